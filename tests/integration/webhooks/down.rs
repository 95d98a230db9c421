//! While the operator is down, its `Fail` webhooks still refuse what they judge (a spec change),
//! and block nothing else: the garbage collector's foreground and orphan deletes, the removal of
//! another party's finalizer, and the deletion of a namespace that holds such objects all finish
//! (issue #48: each of them hung until the operator came back, because the finalizer removal is
//! an `UPDATE` the webhooks were asked about and could not answer).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use kubeforge::testing::TestNamespace;
use serde_json::json;

use super::{Cog, Running, Sprocket};
use crate::support::eventually;

/// What the issue measured as the bound of each step; the steps take well under a second on a
/// quiet plane (the garbage collector and the namespace controller react to watch events).
const BOUND: Duration = Duration::from_secs(30);

fn sprocket(name: &str, finalizers: &[&str]) -> Sprocket {
    serde_json::from_value(json!({
        "apiVersion": "webhook-test.kubeforge.dev/v1", "kind": "Sprocket",
        "metadata": { "name": name, "finalizers": finalizers },
        "spec": { "teeth": 8 },
    }))
    .unwrap()
}

/// A ConfigMap `<owner>-child` owned by `owner`, blocking its foreground deletion.
async fn child_of(ns: &TestNamespace, owner: &Sprocket) -> ConfigMap {
    let mut child = ConfigMap::default();
    child.metadata.name = Some(format!("{}-child", owner.name_any()));
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: Sprocket::api_version(&()).into_owned(),
        kind: Sprocket::kind(&()).into_owned(),
        name: owner.name_any(),
        uid: owner.uid().unwrap(),
        block_owner_deletion: Some(true),
        controller: Some(true),
    }]);
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &child)
        .await
        .unwrap()
}

/// Waits until `name` is gone from `api`; returns how long it took from `since`.
async fn gone<K>(api: &Api<K>, name: &str, what: &str, since: Instant, bound: Duration) -> Duration
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(what, bound, async || {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
    since.elapsed()
}

#[tokio::test]
async fn a_stopped_operator_should_refuse_spec_changes_and_block_no_deletion() {
    let ns = TestNamespace::new().await.unwrap();
    let running = Running::start(&ns, 0, None).await;
    let api = ns.api::<Sprocket>();
    let mut made = Vec::new();
    for (name, finalizers) in [
        ("foreground", &[][..]),
        ("orphan", &[][..]),
        ("held", &["example.com/hold"][..]),
        ("held-in-ns", &["example.com/hold"][..]),
    ] {
        made.push(
            api.create(&PostParams::default(), &sprocket(name, finalizers))
                .await
                .unwrap(),
        );
    }
    child_of(&ns, &made[0]).await;
    child_of(&ns, &made[1]).await;
    let cogs = ns.api::<Cog>();
    let cog: Cog = serde_json::from_value(json!({
        "apiVersion": "webhook-test.kubeforge.dev/v1", "kind": "Cog",
        "metadata": { "name": "cog" }, "spec": { "size": 1 },
    }))
    .unwrap();
    cogs.create(&PostParams::default(), &cog).await.unwrap();
    // Its validator judges metadata: a label is refused while it runs.
    let label = Patch::Merge(json!({ "metadata": { "labels": { "tier": "gold" } } }));
    let denied = cogs.patch("cog", &PatchParams::default(), &label).await;
    match &denied {
        Err(kube::Error::Api(s)) => assert!(s.message.contains("cogs carry no labels"), "{s:?}"),
        other => panic!("expected the validator's denial, got {other:?}"),
    }
    // Stopped: its configurations stay (dropping `_cleanup` at the end removes them).
    let _cleanup = running.stop().await;

    // A spec change still goes to the (unreachable) webhooks and is refused: the match
    // condition leaves out nothing the validator judges.
    let params = PatchParams::default();
    let refused = api
        .patch(
            "held",
            &params,
            &Patch::Merge(json!({ "spec": { "teeth": 9 } })),
        )
        .await;
    match &refused {
        Err(kube::Error::Api(s)) => {
            assert!(s.message.contains("failed calling webhook"), "{s:?}");
        }
        other => panic!("expected the webhook's failure, got {other:?}"),
    }
    // A label is metadata: not the webhooks' business, unless the kind says it is.
    api.patch("held", &params, &label).await.unwrap();
    match &cogs.patch("cog", &params, &label).await {
        Err(kube::Error::Api(s)) => {
            assert!(s.message.contains("failed calling webhook"), "{s:?}");
        }
        other => panic!("expected the webhook's failure, got {other:?}"),
    }

    let cms = ns.api::<ConfigMap>();
    // Foreground: the garbage collector deletes the child, then removes `foregroundDeletion`.
    let started = Instant::now();
    api.delete("foreground", &DeleteParams::foreground())
        .await
        .unwrap();
    let foreground = gone(&api, "foreground", "the foreground delete", started, BOUND).await;
    assert!(cms.get_opt("foreground-child").await.unwrap().is_none());

    // Orphan: the child stays, without its owner reference; the collector removes `orphan`.
    let started = Instant::now();
    api.delete("orphan", &DeleteParams::orphan()).await.unwrap();
    let orphan = gone(&api, "orphan", "the orphaning delete", started, BOUND).await;
    let child = cms.get("orphan-child").await.unwrap();
    assert!(
        child.owner_references().is_empty(),
        "{:?}",
        child.metadata.owner_references
    );

    // Another party's finalizer, removed by its owner (here: by hand, as kubectl would).
    let release = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
    let started = Instant::now();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    api.patch("held", &params, &release).await.unwrap();
    let finalizer = gone(&api, "held", "the held object's deletion", started, BOUND).await;

    // The namespace: its controller deletes everything; the held object goes once released.
    let namespaces = Api::<Namespace>::all(ns.client());
    let started = Instant::now();
    namespaces
        .delete(ns.name(), &DeleteParams::background())
        .await
        .unwrap();
    eventually("the held object to be marked deleted", BOUND, async || {
        let held = api.get_opt("held-in-ns").await.unwrap()?;
        held.meta().deletion_timestamp.is_some().then_some(())
    })
    .await;
    api.patch("held-in-ns", &params, &release).await.unwrap();
    // The namespace controller looks again after a delay of its own when content remains (11 s
    // measured on a quiet plane): the namespace gets twice the bound.
    let namespace = gone(
        &namespaces,
        ns.name(),
        "the namespace's deletion",
        started,
        2 * BOUND,
    )
    .await;
    eprintln!(
        "with the operator stopped: foreground delete {foreground:?}, orphan delete {orphan:?}, \
         foreign finalizer removed and deleted {finalizer:?}, namespace deleted {namespace:?}"
    );
}

/// An operator upgraded from a release whose configurations had no match conditions: its
/// first apply adds them (server-side apply by the same field manager merges the webhooks by
/// name), so the upgraded operator, once stopped, blocks no metadata-only update either.
#[tokio::test]
async fn an_upgrade_from_configurations_without_match_conditions_should_add_them() {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let name = format!("wh-{}", ns.name());
    earlier_release_configurations(&ns, &name).await;
    let validating_api = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let mutating_api = Api::<MutatingWebhookConfiguration>::all(client.clone());
    let running = Running::start(&ns, 0, None).await;
    let api = ns.api::<Sprocket>();
    api.create(&PostParams::default(), &sprocket("upgraded", &[]))
        .await
        .unwrap();
    // Every webhook of a CREATE/UPDATE rule of a kind that leaves metadata alone has it now.
    let conditions = |webhooks: Vec<(String, Option<Vec<String>>)>| {
        for (webhook, conditions) in webhooks {
            if webhook.contains("sprockets") && !webhook.starts_with("validate-delete") {
                assert_eq!(
                    conditions,
                    Some(vec![kubeforge::webhook::METADATA_NAME.to_owned()]),
                    "{webhook}"
                );
            }
        }
    };
    let names = |c: Option<Vec<k8s_openapi::api::admissionregistration::v1::MatchCondition>>| {
        c.map(|c| c.into_iter().map(|c| c.name).collect())
    };
    let live = validating_api.get(&name).await.unwrap();
    conditions(
        live.webhooks
            .unwrap_or_default()
            .into_iter()
            .map(|w| (w.name, names(w.match_conditions)))
            .collect(),
    );
    let live = mutating_api.get(&name).await.unwrap();
    conditions(
        live.webhooks
            .unwrap_or_default()
            .into_iter()
            .map(|w| (w.name, names(w.match_conditions)))
            .collect(),
    );
    let _cleanup = running.stop().await;
    let label = Patch::Merge(json!({ "metadata": { "labels": { "tier": "gold" } } }));
    api.patch("upgraded", &PatchParams::default(), &label)
        .await
        .unwrap();
}

/// Applies the configurations named `name` as the release before the match conditions did:
/// the same webhooks without them, by the same field manager.
async fn earlier_release_configurations(ns: &TestNamespace, name: &str) {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    let client = ns.client();
    let name = name.to_owned();
    let kinds: Vec<_> = kubeforge::webhook::registered()
        .into_iter()
        .filter(|k| k.group == "webhook-test.kubeforge.dev")
        .collect();
    let configurations = kubeforge::webhook::Configurations {
        name: name.clone(),
        endpoint: kubeforge::webhook::Endpoint::Url("https://127.0.0.1:1".to_owned()),
        // The test's namespace only, as the operator's own (a cluster-wide one would send
        // every other test's Sprockets to the closed port until the operator replaced it).
        namespace_selector: Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(
                    [(
                        "kubernetes.io/metadata.name".to_owned(),
                        ns.name().to_owned(),
                    )]
                    .into(),
                ),
                match_expressions: None,
            },
        ),
        ca_bundle: None,
    };
    let mut validating = configurations.validating(&kinds, &[]).unwrap();
    let mut mutating = configurations.mutating(&kinds).unwrap();
    validating
        .webhooks
        .iter_mut()
        .flatten()
        .for_each(|w| w.match_conditions = None);
    mutating
        .webhooks
        .iter_mut()
        .flatten()
        .for_each(|w| w.match_conditions = None);
    let params = PatchParams::apply("kubeforge-webhooks").force();
    let typed = |mut value: serde_json::Value, kind: &str| {
        value["apiVersion"] = json!("admissionregistration.k8s.io/v1");
        value["kind"] = json!(kind);
        value
    };
    let validating_api = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let mutating_api = Api::<MutatingWebhookConfiguration>::all(client.clone());
    let value = typed(
        serde_json::to_value(&validating).unwrap(),
        "ValidatingWebhookConfiguration",
    );
    validating_api
        .patch(&name, &params, &Patch::Apply(value))
        .await
        .unwrap();
    let value = typed(
        serde_json::to_value(&mutating).unwrap(),
        "MutatingWebhookConfiguration",
    );
    mutating_api
        .patch(&name, &params, &Patch::Apply(value))
        .await
        .unwrap();
}

//! A kind upgraded over three releases on the real apiserver (issue #34): release 1 stores `v1`;
//! release 2 serves `v1` and `v2`, stores `v2`, and its operator migrates the stored objects on
//! its own (`Manager::storage_migration`) while another client keeps writing to them; release 3
//! removes `v1`, which the apiserver accepts only because nothing is stored in it any more.
//! Every object comes through intact, with every concurrent write.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kubeforge::crd::compat::{Acceptance, Class, compare, judge};
use kubeforge::manager::Manager;
use kubeforge::prelude::{Action, Context};
use kubeforge::testing::{TestNamespace, WebhookCleanup, apply_crds};
use kubeforge::webhook::WebhookOptions;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

const GROUP: &str = "upgrade-test.kubeforge.dev";
const CRD: &str = "notes.upgrade-test.kubeforge.dev";

/// Release 2's `v1`, as release 1 stored it: `text`.
pub mod v1 {
    /// A note (v1).
    #[kubeforge::custom_resource(
        group = "upgrade-test.kubeforge.dev",
        version = "v1",
        kind = "Note",
        namespaced,
        storage = false,
        conversion(hub = super::Note, generate)
    )]
    #[derive(Clone, Debug, PartialEq)]
    pub struct NoteSpec {
        /// The storage version's `body`.
        #[convert(from = "body")]
        pub text: String,
    }
}

/// Release 2's storage version: `text` is now `body`, and a note has `tags`.
#[kubeforge::custom_resource(
    group = "upgrade-test.kubeforge.dev",
    version = "v2",
    kind = "Note",
    namespaced
)]
#[derive(Clone, Debug, PartialEq)]
pub struct NoteSpec {
    pub body: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// The operator of release 2: nothing to reconcile; it is here for its migration.
pub struct Notes;

#[kubeforge::controller(for = Note)]
impl Notes {
    async fn reconcile(
        &self,
        _note: std::sync::Arc<Note>,
        _ctx: &Context<Note>,
    ) -> Result<Action, kube::Error> {
        Ok(Action::Done)
    }
}

/// Release 2's CRD, as this code generates it.
fn release_2() -> CustomResourceDefinition {
    kubeforge::crd::crds()
        .unwrap()
        .into_iter()
        .find(|c| c.spec.group == GROUP)
        .unwrap()
}

/// Release 1's CRD: `v1` alone, stored, no conversion.
fn release_1() -> CustomResourceDefinition {
    let mut crd = release_2();
    crd.spec.versions.retain(|v| v.name == "v1");
    crd.spec.versions[0].storage = true;
    crd.spec.conversion = None;
    crd
}

/// Release 3's CRD: `v2` alone.
fn release_3() -> CustomResourceDefinition {
    let mut crd = release_2();
    crd.spec.versions.retain(|v| v.name == "v2");
    crd.spec.conversion = None;
    crd
}

/// The compatibility gate (`crdgen --compat`) between two releases' CRDs, with one accepted
/// break: v1 stops being served in release 3, announced in release 2.
fn gate(
    previous: &CustomResourceDefinition,
    current: &CustomResourceDefinition,
) -> kubeforge::crd::compat::Report {
    let accepted = [Acceptance {
        crd: CRD.to_owned(),
        version: Some("v1".to_owned()),
        path: None,
        rule: "version-removed".to_owned(),
        reason: "v1 was deprecated in release 2 and is removed in release 3".to_owned(),
    }];
    judge(
        compare(
            std::slice::from_ref(previous),
            std::slice::from_ref(current),
        ),
        &accepted,
    )
}

/// The rule ids of the findings of `class` not accepted.
fn open(report: &kubeforge::crd::compat::Report, class: Class) -> Vec<&'static str> {
    report.open(class).map(|f| f.rule).collect()
}

async fn stored_versions(crds: &Api<CustomResourceDefinition>) -> Vec<String> {
    crds.get_status(CRD)
        .await
        .unwrap()
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: three releases of a kind with its objects and concurrent writes"
)]
async fn a_kind_should_upgrade_over_three_releases_with_its_objects_and_concurrent_writes_intact() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // A CRD left by an earlier run on the same plane (its storedVersions say v2) would refuse
    // release 1: start from none.
    let _ = crds.delete(CRD, &DeleteParams::default()).await;
    eventually(
        "an earlier run's CRD to be gone",
        Duration::from_secs(60),
        async || crate::support::is_not_found(crds.get(CRD).await).then_some(()),
    )
    .await;
    // Release 1: 40 notes stored in v1.
    apply_crds(&client, [release_1()], Duration::from_secs(30))
        .await
        .unwrap();
    let old = ns.api::<v1::Note>();
    for i in 0..40 {
        let note = v1::Note::new(
            &format!("note-{i}"),
            v1::NoteSpec {
                text: format!("text {i}"),
            },
        );
        old.create(&PostParams::default(), &note).await.unwrap();
    }
    assert_eq!(stored_versions(&crds).await, ["v1"]);
    // The gate from release 1 to 2: no break; the storage version moves, with a conversion.
    let gate_1_2 = gate(&release_1(), &release_2());
    assert!(gate_1_2.passes(), "{:?}", gate_1_2.findings);
    assert_eq!(
        open(&gate_1_2, Class::NeedsMigration),
        ["storage-version-changed"]
    );

    // Release 2: v2 stored, v1 served and converted by the operator, which migrates. A saved
    // position that is not a token (an expired one is the same) makes it start over.
    let name = format!("upgrade-{}", ns.name());
    let _cleanup = WebhookCleanup::new(&ns, &name).conversion(CRD);
    let mut release_2_crd = release_2();
    release_2_crd.metadata.annotations = Some(
        [(
            kubeforge::crd::PROGRESS_ANNOTATION.to_owned(),
            json!({ "to": "v2", "continue": "not-a-token", "rewritten": 7 }).to_string(),
        )]
        .into(),
    );
    apply_crds(&client, [release_2_crd], Duration::from_secs(30))
        .await
        .unwrap();
    let webhooks = WebhookOptions::new(&name)
        .port(0)
        .url("https://127.0.0.1")
        .secret(ns.name(), "webhook-cert")
        .serve::<Note>();
    let notes = ns.api::<Note>();
    // Another client writes while the objects are migrated: one tag per note and round, each a
    // merge patch of the whole list (what it read plus its tag), retried on conflict.
    let writer = {
        let notes = notes.clone();
        tokio::spawn(async move {
            for round in 0..3 {
                for i in 0..40 {
                    let name = format!("note-{i}");
                    loop {
                        let Ok(note) = notes.get(&name).await else {
                            // The conversion webhook is not configured yet.
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue;
                        };
                        let mut tags = note.spec.tags.clone();
                        tags.push(format!("round-{round}"));
                        let patch = json!({
                            "metadata": { "resourceVersion": note.resource_version() },
                            "spec": { "tags": tags },
                        });
                        match notes
                            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                        {
                            Ok(_) => break,
                            Err(kube::Error::Api(s)) if s.code == 409 => {}
                            // The conversion webhook is not configured yet.
                            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                        }
                    }
                }
            }
        })
    };
    // Before the migration the gate from the live CRD (v1 still stored) to release 3 says so.
    let live = crds.get(CRD).await.unwrap();
    let before = gate(&live, &release_3());
    assert_eq!(
        open(&before, Class::NeedsMigration),
        ["stored-version-removed"],
        "{:?}",
        before.findings
    );
    // A slow first operator, killed (its task aborted: no shutdown) once it saved a position.
    let slow = kubeforge::crd::MigrateOptions {
        per_second: 10,
        page_size: 5,
        ..kubeforge::crd::MigrateOptions::default()
    };
    let first = Manager::new(client.clone())
        .namespace(None)
        .webhooks(webhooks.clone())
        .storage_migration(Some(slow))
        .controller(Notes);
    let killed = tokio::spawn(first.run_until(CancellationToken::new()));
    eventually(
        "the first operator to save a position",
        Duration::from_secs(120),
        async || {
            let crd = crds.get(CRD).await.ok()?;
            let saved = crd
                .annotations()
                .get(kubeforge::crd::PROGRESS_ANNOTATION)?
                .clone();
            (!saved.contains("not-a-token")).then_some(())
        },
    )
    .await;
    killed.abort();
    // The restarted operator resumes from there and finishes.
    let manager = Manager::new(client.clone())
        .namespace(None)
        .webhooks(webhooks)
        .controller(Notes);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));
    eventually(
        "the operator to migrate the notes and prune storedVersions",
        Duration::from_secs(120),
        async || (stored_versions(&crds).await == ["v2"]).then_some(()),
    )
    .await;
    writer.await.unwrap();
    let crd = crds.get(CRD).await.unwrap();
    assert!(
        !crd.annotations()
            .contains_key(kubeforge::crd::PROGRESS_ANNOTATION),
        "the progress annotation is removed when done"
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();

    // The gate from the live CRD to release 3 now passes (the accepted break aside), and fails
    // on a deliberately breaking release 3 that also drops `tags`.
    let live = crds.get(CRD).await.unwrap();
    let gate_2_3 = gate(&live, &release_3());
    assert!(gate_2_3.passes(), "{:?}", gate_2_3.findings);
    assert!(
        open(&gate_2_3, Class::NeedsMigration).is_empty(),
        "{:?}",
        gate_2_3.findings
    );
    let mut breaking = release_3();
    let schema = breaking.spec.versions[0].schema.as_mut().unwrap();
    let spec = schema
        .open_api_v3_schema
        .as_mut()
        .unwrap()
        .properties
        .as_mut()
        .unwrap()
        .get_mut("spec")
        .unwrap();
    spec.properties.as_mut().unwrap().remove("tags");
    let broken = gate(&live, &breaking);
    assert!(!broken.passes());
    assert_eq!(
        open(&broken, Class::Breaking),
        ["field-removed"],
        "{:?}",
        broken.findings
    );

    // Release 3: v1 removed; the apiserver accepts it because nothing is stored in v1.
    apply_crds(&client, [release_3()], Duration::from_secs(30))
        .await
        .unwrap();
    for i in 0..40 {
        let note = notes.get(&format!("note-{i}")).await.unwrap();
        assert_eq!(note.spec.body, format!("text {i}"), "note-{i}");
        assert_eq!(
            note.spec.tags,
            ["round-0", "round-1", "round-2"],
            "note-{i}: every concurrent write kept"
        );
    }
}

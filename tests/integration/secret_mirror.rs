//! The SecretMirror example operator: a cluster-scoped kind, `owns` across namespaces and
//! `watches` with mappers (source Secret, Namespaces).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kubeforge::crd::READY;
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, apply_crds};
use kubeforge_examples::secret_mirror::{SecretMirror, SecretMirrorController, SecretMirrorSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, is_not_found};

#[tokio::test]
async fn secret_mirror_should_follow_source_and_namespace_labels() {
    let source_ns = TestNamespace::new().await.unwrap();
    let client = source_ns.client();
    apply_crds(&client, [SecretMirror::crd()], Duration::from_secs(30))
        .await
        .unwrap();
    // Targets: namespaces of this test only, selected by a label unique to this run.
    let label = format!("mirror-test.kubeforge.dev/{}", source_ns.name());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let targets: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("{}-{n}", source_ns.name()))
        .collect();
    for (i, name) in targets.iter().enumerate() {
        let mut labels = std::collections::BTreeMap::new();
        labels.insert("kubeforge.dev/test-namespace".to_owned(), "true".to_owned());
        if i < 2 {
            labels.insert(label.clone(), "yes".to_owned());
        }
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
    let source: Secret = serde_json::from_value(json!({
        "metadata": { "name": "shared" },
        "stringData": { "token": "v1" },
    }))
    .unwrap();
    source_ns
        .api::<Secret>()
        .create(&PostParams::default(), &source)
        .await
        .unwrap();

    let manager = Manager::new(client.clone()).controller(SecretMirrorController);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(shutdown.clone()));

    let name = format!("mirror-{}", source_ns.name());
    let spec: SecretMirrorSpec = serde_json::from_value(json!({
        "source": { "namespace": source_ns.name(), "name": "shared" },
        "namespaceSelector": { label.clone(): "yes" },
    }))
    .unwrap();
    let mirrors: Api<SecretMirror> = Api::all(client.clone());
    mirrors
        .create(&PostParams::default(), &SecretMirror::new(&name, spec))
        .await
        .unwrap();

    let copy = async |ns: &str| -> Option<String> {
        let secret = Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt("shared")
            .await
            .ok()??;
        let token = secret.data?.get("token")?.0.clone();
        String::from_utf8(token).ok()
    };
    let copies_are = async |expected: [Option<&str>; 3]| -> Option<()> {
        for (ns, want) in targets.iter().zip(expected) {
            if copy(ns).await.as_deref() != want {
                return None;
            }
        }
        Some(())
    };
    eventually(
        "copies in the two labelled namespaces",
        Duration::from_secs(60),
        async || copies_are([Some("v1"), Some("v1"), None]).await,
    )
    .await;
    // The status is patched after the copies are written: wait for it rather than read it once.
    eventually(
        "the mirror's status to count two copies and be Ready",
        Duration::from_secs(60),
        async || {
            let status = mirrors.get(&name).await.ok()?.status?;
            (status.copies == 2 && status.conditions.is_true(READY)).then_some(())
        },
    )
    .await;
    let copy_owner = Api::<Secret>::namespaced(client.clone(), &targets[0])
        .get("shared")
        .await
        .unwrap();
    assert_eq!(copy_owner.owner_references()[0].name, name);

    // The source changes: every copy follows (watches(Secret) maps the source to its mirrors).
    source_ns
        .api::<Secret>()
        .patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({ "stringData": { "token": "v2" } })),
        )
        .await
        .unwrap();
    eventually(
        "copies updated from the source",
        Duration::from_secs(60),
        async || copies_are([Some("v2"), Some("v2"), None]).await,
    )
    .await;

    // Namespace labels change: c gains a copy, a loses its copy (watches(Namespace)).
    namespaces
        .patch(
            &targets[2],
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { label.clone(): "yes" } } })),
        )
        .await
        .unwrap();
    namespaces
        .patch(
            &targets[0],
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { label.clone(): null } } })),
        )
        .await
        .unwrap();
    eventually(
        "copies following the namespace labels",
        Duration::from_secs(60),
        async || copies_are([None, Some("v2"), Some("v2")]).await,
    )
    .await;

    // Deleting the mirror: the copies are garbage-collected (owner references across scopes).
    mirrors
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the copies to be collected",
        Duration::from_secs(60),
        async || copies_are([None, None, None]).await,
    )
    .await;
    assert!(is_not_found(mirrors.get(&name).await));

    shutdown.cancel();
    running.await.unwrap().unwrap();
    for ns in &targets {
        let _ = namespaces.delete(ns, &DeleteParams::background()).await;
    }
}

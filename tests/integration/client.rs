//! The write helpers of `kubeforge::client` against the real apiserver: conflict-safe
//! read-modify-write, paged lists, owned children (applied, or created once).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, ListParams, PostParams};
use kubeforge::client::{Target, apply_owned, create_owned, update_object};
use kubeforge::testing::TestNamespace;

use crate::support::configmap;

#[tokio::test]
async fn update_object_should_not_lose_concurrent_increments() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    api.create(&PostParams::default(), &configmap("counter", &[("n", "0")]))
        .await
        .unwrap();
    let conflicts = Arc::new(AtomicU32::new(0));
    let writers: Vec<_> = (0..50)
        .map(|_| {
            let (api, conflicts) = (api.clone(), conflicts.clone());
            tokio::spawn(async move {
                update_object(
                    &api,
                    "counter",
                    Target::Main,
                    100,
                    |cm: &mut ConfigMap, retry| {
                        if retry {
                            conflicts.fetch_add(1, Ordering::SeqCst);
                        }
                        let data = cm.data.get_or_insert_default();
                        let n: i64 = data["n"].parse().unwrap();
                        data.insert("n".into(), (n + 1).to_string());
                        Ok::<_, std::convert::Infallible>(())
                    },
                )
                .await
                .unwrap();
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let n = api.get("counter").await.unwrap().data.unwrap()["n"].clone();
    assert_eq!(n, "50");
    eprintln!(
        "50 concurrent increments, {} conflicts retried",
        conflicts.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn list_paged_should_return_every_object_across_pages() {
    let ns = TestNamespace::new().await.unwrap();
    let api = ns.api::<ConfigMap>();
    for i in 0..25 {
        api.create(
            &PostParams::default(),
            &configmap(&format!("page-{i}"), &[]),
        )
        .await
        .unwrap();
    }
    let params = ListParams::default().labels("!kubernetes.io/none");
    let all = kubeforge::client::list_paged(&api, &params, 7)
        .await
        .unwrap();
    let mut names: Vec<_> = all
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .filter(|n| n.starts_with("page-"))
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 25);
}

#[tokio::test]
async fn owned_children_should_block_a_foreground_deletion_of_their_owner() {
    let ns = TestNamespace::new().await.unwrap();
    let cms = ns.api::<ConfigMap>();
    let owner = cms
        .create(&PostParams::default(), &configmap("owner", &[]))
        .await
        .unwrap();
    // The child holds a finalizer of the test's until the owner is seen held: without it the
    // collector can delete both before the owner is read (a CI run lost that race).
    let mut held_child = configmap("child", &[("a", "1")]);
    held_child.metadata.finalizers = Some(vec!["kubeforge.dev/test-hold".to_owned()]);
    let child = apply_owned(&cms, &owner, "test", held_child).await.unwrap();
    let reference = &child.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (reference.controller, reference.block_owner_deletion),
        (Some(true), Some(true)),
        "{reference:?}"
    );

    // The child blocks the owner's foreground deletion until the collector removed it: the
    // owner is still there, with the `foregroundDeletion` finalizer, while the child exists.
    cms.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let held = cms.get("owner").await.unwrap();
    assert!(
        held.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == "foregroundDeletion")),
        "{:?}",
        held.metadata
    );
    // The collector deletes the child (it waits on the finalizer), then releases the owner.
    crate::support::eventually(
        "the collector to delete the child",
        std::time::Duration::from_secs(120),
        async || {
            let child = cms.get_opt("child").await.unwrap()?;
            child.metadata.deletion_timestamp.map(|_| ())
        },
    )
    .await;
    assert!(
        cms.get_opt("owner").await.unwrap().is_some(),
        "the owner went while its child was still there"
    );
    cms.patch(
        "child",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({ "metadata": { "finalizers": null } })),
    )
    .await
    .unwrap();
    crate::support::eventually(
        "the collector to delete the child, then the owner",
        // The garbage collector shares kube-controller-manager with the namespace deletions of
        // every other test.
        std::time::Duration::from_secs(120),
        async || {
            let child_gone = cms.get_opt("child").await.unwrap().is_none();
            let owner_gone = cms.get_opt("owner").await.unwrap().is_none();
            (child_gone && owner_gone).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn create_owned_should_create_once_and_never_overwrite() {
    let ns = TestNamespace::new().await.unwrap();
    let owner = ns
        .api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("db", &[]))
        .await
        .unwrap();
    let secrets = ns.api::<Secret>();
    let secret = |password: &str| {
        let mut secret = Secret::default();
        secret.metadata.name = Some("db-password".to_owned());
        secret.string_data = Some([("password".to_owned(), password.to_owned())].into());
        secret
    };
    let (first, created) = create_owned(&secrets, &owner, secret("first"))
        .await
        .unwrap();
    assert!(created);
    let reference = &first.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(reference.uid, owner.metadata.uid.clone().unwrap());
    assert_eq!(reference.block_owner_deletion, Some(true));

    let (second, created) = create_owned(&secrets, &owner, secret("second"))
        .await
        .unwrap();
    assert!(!created, "it existed");
    let password = |s: &Secret| s.data.as_ref().unwrap()["password"].0.clone();
    assert_eq!(
        password(&second),
        b"first",
        "the existing secret is kept as it was"
    );
    assert_eq!(
        password(&secrets.get("db-password").await.unwrap()),
        b"first"
    );
}

//! The write helpers of `kubeforge::client` against the real apiserver: conflict-safe
//! read-modify-write and paged lists.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use kubeforge::client::{Target, update_object};
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

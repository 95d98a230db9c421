//! Versions of one kind with different schemas, converted by the manager's conversion webhook
//! (issue #16) which the real apiserver calls: created as v1 and read as v2 and back, listed in
//! both versions, a field only v2 has survives a write through v1, and a storage-version change
//! migrates the stored objects.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, WebhookCleanup, apply_crds};
use kubeforge::webhook::WebhookOptions;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

const GROUP: &str = "conversion-test.kubeforge.dev";
const CRD: &str = "shops.conversion-test.kubeforge.dev";
/// Where v1 keeps what only v2 can hold.
const TIER: &str = "conversion-test.kubeforge.dev/tier";

pub mod v1 {
    /// The first shape: a flat image and a replica count.
    #[kubeforge::custom_resource(
        group = "conversion-test.kubeforge.dev",
        version = "v1",
        kind = "Shop",
        namespaced,
        storage = false,
        conversion(hub = super::v2::Shop)
    )]
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct ShopSpec {
        pub image: String,
        pub replicas: i32,
    }
}

pub mod v2 {
    /// The storage version: the image inside a container block, `scale`, and a `tier` v1 has
    /// no field for.
    #[kubeforge::custom_resource(
        group = "conversion-test.kubeforge.dev",
        version = "v2",
        kind = "Shop",
        namespaced
    )]
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct ShopSpec {
        pub container: Container,
        pub scale: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tier: Option<String>,
    }

    #[kubeforge::schema]
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct Container {
        pub image: String,
    }
}

impl From<v1::Shop> for v2::Shop {
    fn from(shop: v1::Shop) -> Self {
        let mut metadata = shop.metadata;
        let tier = metadata.annotations.as_mut().and_then(|a| a.remove(TIER));
        let mut out = v2::Shop::new(
            "",
            v2::ShopSpec {
                container: v2::Container {
                    image: shop.spec.image,
                },
                scale: shop.spec.replicas,
                tier,
            },
        );
        out.metadata = metadata;
        out
    }
}

impl From<v2::Shop> for v1::Shop {
    fn from(shop: v2::Shop) -> Self {
        let mut metadata = shop.metadata;
        if let Some(tier) = shop.spec.tier {
            metadata
                .annotations
                .get_or_insert_default()
                .insert(TIER.to_owned(), tier);
        }
        let mut out = v1::Shop::new(
            "",
            v1::ShopSpec {
                image: shop.spec.container.image,
                replicas: shop.spec.scale,
            },
        );
        out.metadata = metadata;
        out
    }
}

struct Running {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// Points the CRD back at the unconfigured endpoint when the test ends (also on a panic).
    _cleanup: WebhookCleanup,
}

/// Installs the two-version CRD and runs a manager serving the conversion; returns once the
/// apiserver converts.
async fn start(ns: &TestNamespace) -> Running {
    let client = ns.client();
    let crds = kubeforge::crd::crds().unwrap();
    let ours = crds.into_iter().filter(|c| c.spec.group == GROUP);
    apply_crds(&client, ours, Duration::from_secs(30))
        .await
        .unwrap();
    let name = format!("conv-{}", ns.name());
    let cleanup = WebhookCleanup::new(ns, &name).conversion(CRD);
    let options = WebhookOptions::new(&name)
        .port(0)
        .secret(ns.name(), "webhook-cert")
        .serve::<v2::Shop>();
    let manager = Manager::new(client.clone()).webhooks(options);
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let task = tokio::spawn(async move { manager.run_until(token).await.unwrap() });
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually(
        "the CRD to convert through the webhook",
        Duration::from_secs(60),
        async || {
            let crd = crds.get(CRD).await.ok()?;
            let webhook = crd.spec.conversion?.webhook?;
            webhook.client_config?.ca_bundle.map(|_| ())
        },
    )
    .await;
    Running {
        shutdown,
        task,
        _cleanup: cleanup,
    }
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }
}

fn shop_v1(name: &str, image: &str, replicas: i32) -> v1::Shop {
    v1::Shop::new(
        name,
        v1::ShopSpec {
            image: image.to_owned(),
            replicas,
        },
    )
}

/// Retries `f` while the apiserver cannot call the webhook yet (a fresh CA bundle takes a moment
/// to be used).
async fn settled<T>(what: &str, mut f: impl AsyncFnMut() -> kube::Result<T>) -> T {
    eventually(what, Duration::from_secs(30), async || f().await.ok()).await
}

#[tokio::test]
async fn versions_of_different_shapes_should_convert_both_ways_lose_nothing_and_migrate() {
    let ns = TestNamespace::new().await.unwrap();
    let running = start(&ns).await;
    let client: Client = ns.client();
    let shops1: Api<v1::Shop> = Api::namespaced(client.clone(), ns.name());
    let shops2: Api<v2::Shop> = Api::namespaced(client.clone(), ns.name());

    // Created as v1 (stored as v2), read as v2 and back.
    let created = settled("a v1 create", async || {
        shops1
            .create(
                &PostParams::default(),
                &shop_v1("corner", "registry.example.com/shop:1", 2),
            )
            .await
    })
    .await;
    let as_v2 = shops2.get("corner").await.unwrap();
    assert_eq!(as_v2.spec.container.image, "registry.example.com/shop:1");
    assert_eq!(as_v2.spec.scale, 2);
    assert_eq!(as_v2.metadata.uid, created.metadata.uid);
    let back = shops1.get("corner").await.unwrap();
    assert_eq!(back.spec, created.spec);

    // Listed in both versions.
    shops2
        .create(
            &PostParams::default(),
            &v2::Shop::new(
                "premium",
                v2::ShopSpec {
                    container: v2::Container {
                        image: "registry.example.com/shop:2".into(),
                    },
                    scale: 3,
                    tier: Some("gold".into()),
                },
            ),
        )
        .await
        .unwrap();
    let mut names1: Vec<_> = shops1
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| (s.metadata.name.unwrap(), s.spec.replicas))
        .collect();
    names1.sort();
    assert_eq!(
        names1,
        [("corner".to_owned(), 2), ("premium".to_owned(), 3)]
    );
    let listed2 = shops2.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed2.items.len(), 2);

    // A field only v2 has survives a write through v1.
    let mut premium = shops1.get("premium").await.unwrap();
    premium.spec.replicas = 5;
    shops1
        .replace("premium", &PostParams::default(), &premium)
        .await
        .unwrap();
    let premium = shops2.get("premium").await.unwrap();
    assert_eq!(premium.spec.scale, 5);
    assert_eq!(premium.spec.tier.as_deref(), Some("gold"));
    let annotations = premium.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key(TIER),
        "the v1 carrier is not left on v2: {annotations:?}"
    );

    // In the same test: one manager at a time may own the CRD's conversion webhook.
    a_storage_version_change_should_rewrite_the_stored_objects(&ns).await;
    running.stop().await;
    // A stopped manager leaves the conversion as it is, whatever the mode: while it is down a
    // request that needs a conversion fails; none is stored with fields dropped.
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let conversion = crds.get(CRD).await.unwrap().spec.conversion.unwrap();
    assert_eq!(conversion.strategy, "Webhook");
}

async fn a_storage_version_change_should_rewrite_the_stored_objects(ns: &TestNamespace) {
    let client: Client = ns.client();
    let shops1: Api<v1::Shop> = Api::namespaced(client.clone(), ns.name());
    for i in 0..3 {
        settled("a v1 create", async || {
            shops1
                .create(
                    &PostParams::default(),
                    &shop_v1(&format!("s{i}"), "registry.example.com/s:1", i),
                )
                .await
        })
        .await;
    }
    let before: Vec<_> = shops1
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| s.metadata.resource_version)
        .collect();

    // The storage version moves to v1 (a migration this test's CRD undoes at the end).
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let flip =
        |storage: &str| {
            Patch::Json::<()>(serde_json::from_value(json!([
            { "op": "replace", "path": "/spec/versions/0/storage", "value": storage == "v2" },
            { "op": "replace", "path": "/spec/versions/1/storage", "value": storage == "v1" },
        ])).unwrap())
        };
    let crd = crds.get(CRD).await.unwrap();
    assert_eq!(
        crd.spec.versions[0].name, "v2",
        "versions are ordered v2, v1"
    );
    crds.patch(CRD, &PatchParams::default(), &flip("v1"))
        .await
        .unwrap();
    let migration = kubeforge::crd::migrate_storage(&client, CRD).await.unwrap();
    assert_eq!(migration.storage_version, "v1");
    assert!(migration.rewritten >= 3, "{migration:?}");
    assert!(
        migration.stored_before.contains(&"v2".to_owned()),
        "{migration:?}"
    );
    let stored = crds
        .get(CRD)
        .await
        .unwrap()
        .status
        .unwrap()
        .stored_versions
        .unwrap();
    assert_eq!(stored, ["v1"]);
    let after: Vec<_> = shops1
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| s.metadata.resource_version)
        .collect();
    assert!(
        before.iter().zip(&after).all(|(b, a)| b != a),
        "each object written again"
    );

    // Back to v2 for the other tests sharing the CRD.
    crds.patch(CRD, &PatchParams::default(), &flip("v2"))
        .await
        .unwrap();
    kubeforge::crd::migrate_storage(&client, CRD).await.unwrap();
}

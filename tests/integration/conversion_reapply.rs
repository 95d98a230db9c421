//! Issue #48 §4a: `crdgen`'s CRDs applied again after the operator ran locally. The manifest
//! names the operator's Service; a locally run operator points the conversion at its URL. The
//! manifest must apply again over that — with `kubectl apply` and with
//! `kubectl apply --server-side` — while the operator runs (which then points the conversion
//! back at itself, at once) and after it stopped; `kubectl replace` too.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, WebhookClientConfig,
};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use kubeforge::crd::CustomResource;
use kubeforge::manager::Manager;
use kubeforge::testing::{TestNamespace, WebhookCleanup};
use kubeforge::webhook::WebhookOptions;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::support::eventually;

/// Two versions of a kind in `$group`, of different shapes (so the CRD converts through the
/// webhook), one module per kind of apply: each test owns its CRD.
macro_rules! kind {
    ($module:ident, $group:literal) => {
        pub mod $module {
            pub const CRD: &str = concat!("crates.", $group);

            pub mod v1 {
                #[kubeforge::custom_resource(
                                                            group = $group,
                                                            version = "v1",
                                                            kind = "Crate",
                                                            namespaced,
                                                            storage = false,
                                                            conversion(hub = super::v2::Crate)
                                                        )]
                #[derive(Clone, Debug, Default, PartialEq)]
                pub struct CrateSpec {
                    pub size: i32,
                }
            }

            pub mod v2 {
                #[kubeforge::custom_resource(
                                                            group = $group,
                                                            version = "v2",
                                                            kind = "Crate",
                                                            namespaced
                                                        )]
                #[derive(Clone, Debug, Default, PartialEq)]
                pub struct CrateSpec {
                    pub capacity: i32,
                }
            }

            impl From<v1::Crate> for v2::Crate {
                fn from(old: v1::Crate) -> Self {
                    let mut out = v2::Crate::new(
                        "",
                        v2::CrateSpec {
                            capacity: old.spec.size,
                        },
                    );
                    out.metadata = old.metadata;
                    out
                }
            }

            impl From<v2::Crate> for v1::Crate {
                fn from(new: v2::Crate) -> Self {
                    let mut out = v1::Crate::new(
                        "",
                        v1::CrateSpec {
                            size: new.spec.capacity,
                        },
                    );
                    out.metadata = new.metadata;
                    out
                }
            }
        }
    };
}

kind!(client_side, "reapply-csa.kubeforge.dev");
kind!(server_side, "reapply-ssa.kubeforge.dev");

/// How the manifest is applied.
#[derive(Clone, Copy, Debug)]
enum Apply {
    ClientSide,
    ServerSide,
}

/// `kubectl` against the plane; the output, or a panic with what it said.
fn kubectl(args: &[&str]) -> String {
    let run = concat!(env!("CARGO_MANIFEST_DIR"), "/../controlplane/run");
    let out = Command::new(run)
        .arg("kubectl")
        .args(args)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {}: {said}", args.join(" "));
    said
}

/// What `crdgen` prints for the CRD `crd` (the operator `reapply` in `reapply-system`), in a
/// file of the test namespace's name.
fn manifest(ns: &TestNamespace, crd: &str) -> PathBuf {
    let crds = kubeforge::crdgen::crds_for("reapply", "reapply-system").unwrap();
    let ours = crds
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(crd))
        .unwrap();
    let path = std::env::temp_dir().join(format!("{}-{crd}.yaml", ns.name()));
    std::fs::write(&path, kubeforge::crdgen::to_yaml(ours).unwrap()).unwrap();
    path
}

fn apply(how: Apply, file: &std::path::Path) -> String {
    let file = file.to_str().unwrap();
    match how {
        Apply::ClientSide => kubectl(&["apply", "-f", file]),
        Apply::ServerSide => kubectl(&["apply", "--server-side", "-f", file]),
    }
}

/// The client config of `crd`'s conversion.
async fn endpoint(crds: &Api<CustomResourceDefinition>, crd: &str) -> WebhookClientConfig {
    let live = crds.get(crd).await.unwrap();
    live.spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .unwrap_or_default()
}

/// The operator run locally: a manager serving the kind's conversion at a URL.
struct Local {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Local {
    fn start<K>(client: &Client, ns: &TestNamespace, name: &str) -> Self
    where
        K: kubeforge::crd::CustomResource + kube::Resource<DynamicType = ()>,
    {
        let options = WebhookOptions::new(name)
            .port(0)
            .secret(ns.name(), "webhook-cert")
            .serve::<K>();
        let manager = Manager::new(client.clone()).webhooks(options);
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move { manager.run_until(token).await.unwrap() });
        Self { shutdown, task }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }
}

/// Waits until the conversion of `crd` is the local operator's URL; how long it took.
async fn pointed_at_url(
    crds: &Api<CustomResourceDefinition>,
    crd: &str,
    within: Duration,
) -> Duration {
    let start = Instant::now();
    eventually(
        "the conversion to point at the local operator's URL",
        within,
        async || {
            let config = endpoint(crds, crd).await;
            (config.url.is_some() && config.service.is_none() && config.ca_bundle.is_some())
                .then_some(())
        },
    )
    .await;
    start.elapsed()
}

/// The CRD converts: an object created through v1 reads through v2 (retried while the
/// apiserver does not trust a fresh CA bundle yet).
async fn converts<V1, V2>(ns: &TestNamespace, obj: V1)
where
    V1: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
    V2: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap();
    let v1 = ns.api::<V1>();
    let v2 = ns.api::<V2>();
    eventually(
        "a conversion through the webhook",
        Duration::from_secs(30),
        async || {
            if v1.get_opt(&name).await.ok()?.is_none() {
                v1.create(&PostParams::default(), &obj).await.ok()?;
            }
            v2.get(&name).await.ok()
        },
    )
    .await;
}

/// A periodic re-apply would come only after a minute: half that, the repair is the watch's.
const REPAIRED_WITHIN: Duration = Duration::from_secs(30);

async fn reapply_after_a_local_run<V1, V2>(how: Apply, crd: &str, obj: V1)
where
    V1: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + CustomResource
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
    V2: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + CustomResource
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // From scratch: the first apply creates the CRD, as on a new cluster.
    if crds.get_opt(crd).await.unwrap().is_some() {
        crds.delete(crd, &DeleteParams::default()).await.unwrap();
        eventually(
            "the old CRD to be gone",
            Duration::from_secs(60),
            async || crds.get_opt(crd).await.unwrap().is_none().then_some(()),
        )
        .await;
    }
    let file = manifest(&ns, crd);
    apply(how, &file);
    kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{crd}"),
    ]);
    assert!(endpoint(&crds, crd).await.service.is_some());

    let name = format!("reapply-{}", ns.name());
    let _cleanup = WebhookCleanup::new(&ns, &name).conversion(crd);
    let local = Local::start::<V2>(&client, &ns, &name);
    pointed_at_url(&crds, crd, Duration::from_secs(60)).await;
    converts::<V1, V2>(&ns, obj.clone()).await;

    // Applied again while the operator runs: accepted (before: "exactly one of url or service
    // is required"), then pointed back at the operator by its watch of the CRD.
    let said = apply(how, &file);
    assert!(said.contains(crd), "{said}");
    let took = pointed_at_url(&crds, crd, REPAIRED_WITHIN).await;
    eprintln!(
        "{how:?}: the conversion pointed back at the local operator {took:?} after the apply"
    );
    converts::<V1, V2>(&ns, obj.clone()).await;
    // And once more: every apply, not only the first after a run.
    apply(how, &file);
    pointed_at_url(&crds, crd, REPAIRED_WITHIN).await;

    // Applied again after the operator stopped: the manifest's Service, nothing else.
    local.stop().await;
    apply(how, &file);
    let config = endpoint(&crds, crd).await;
    assert_eq!(config.url, None);
    assert_eq!(
        config.service.map(|s| (s.namespace, s.name)),
        Some(("reapply-system".to_owned(), "reapply-webhook".to_owned()))
    );

    // Replaced while an operator runs: pointed back as quickly.
    let local = Local::start::<V2>(&client, &ns, &name);
    pointed_at_url(&crds, crd, Duration::from_secs(60)).await;
    kubectl(&["replace", "-f", file.to_str().unwrap()]);
    let took = pointed_at_url(&crds, crd, REPAIRED_WITHIN).await;
    eprintln!("{how:?}: pointed back {took:?} after kubectl replace");
    converts::<V1, V2>(&ns, obj).await;
    local.stop().await;
    let _ = std::fs::remove_file(file);
}

#[tokio::test]
async fn crdgen_output_should_apply_client_side_again_after_a_local_run() {
    use client_side::{CRD, v1, v2};
    let obj = v1::Crate::new("box", v1::CrateSpec { size: 3 });
    reapply_after_a_local_run::<v1::Crate, v2::Crate>(Apply::ClientSide, CRD, obj).await;
}

#[tokio::test]
async fn crdgen_output_should_apply_server_side_again_after_a_local_run() {
    use server_side::{CRD, v1, v2};
    let obj = v1::Crate::new("box", v1::CrateSpec { size: 3 });
    reapply_after_a_local_run::<v1::Crate, v2::Crate>(Apply::ServerSide, CRD, obj).await;
}

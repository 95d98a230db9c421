//! Admission webhooks (issue #16) against the real apiserver, which calls the manager's webhook
//! server on loopback: denials carry the validator's message, warnings reach the client, the
//! defaulter's changes are stored, dry runs call the webhooks and store nothing, update and
//! delete are validated with the old object, and with the server unreachable the failure policy
//! decides while `/readyz` reports it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubeforge::manager::Manager;
use kubeforge::testing::{FaultProxy, TestNamespace, WebhookCleanup, apply_crds};
use kubeforge::webhook::{
    AdmissionContext, Defaulter, DeleteValidator, Validator, Verdict, WebhookOptions,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{configmap, eventually, status_code};

mod down;

/// Images only from the registries listed in the namespace's `allowed-registries` ConfigMap (a
/// rule the schema cannot express); `owner` cannot change; objects labelled `protected` cannot be
/// deleted; a missing `replicas` defaults to 1 and an image without a tag gets `:latest`.
#[kubeforge::custom_resource(
    group = "webhook-test.kubeforge.dev",
    version = "v1",
    kind = "Gadget",
    namespaced,
    webhooks(validate, default, timeout_seconds = 5)
)]
#[derive(Clone, Debug, Default)]
pub struct GadgetSpec {
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Validating calls seen on dry runs.
static DRY_RUNS: AtomicUsize = AtomicUsize::new(0);

impl Validator for Gadget {
    async fn validate_create(&self, ctx: &AdmissionContext) -> Verdict {
        if ctx.dry_run() {
            DRY_RUNS.fetch_add(1, Ordering::SeqCst);
        }
        let registry = self.spec.image.split('/').next().unwrap_or_default();
        let cms: Api<ConfigMap> =
            Api::namespaced(ctx.client(), ctx.namespace().unwrap_or("default"));
        let allowed = match cms.get_opt("allowed-registries").await {
            Ok(Some(cm)) => cm
                .data
                .unwrap_or_default()
                .get("registries")
                .cloned()
                .unwrap_or_default(),
            Ok(None) => String::new(),
            Err(e) => return Verdict::deny(format!("cannot read allowed-registries: {e}")),
        };
        if !allowed.split(',').any(|r| r.trim() == registry) {
            return Verdict::deny(format!("spec.image: registry {registry} is not allowed"));
        }
        let verdict = Verdict::allow();
        if self.spec.owner.is_none() {
            return verdict.warn("spec.owner: nobody owns this gadget");
        }
        verdict
    }

    async fn validate_update(&self, old: &Self, ctx: &AdmissionContext) -> Verdict {
        if old.spec.owner.is_some() && old.spec.owner != self.spec.owner {
            return Verdict::deny("spec.owner: cannot change once set");
        }
        self.validate_create(ctx).await
    }
}

impl DeleteValidator for Gadget {
    async fn validate_delete(&self, _: &AdmissionContext) -> Verdict {
        let protected = self
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key("protected"));
        if protected {
            return Verdict::deny("protected gadgets cannot be deleted; remove the label first");
        }
        Verdict::allow()
    }
}

impl Defaulter for Gadget {
    async fn apply_defaults(&mut self, _: &AdmissionContext) -> Verdict {
        self.spec.replicas.get_or_insert(1);
        let last = self.spec.image.rsplit('/').next().unwrap_or_default();
        if !last.contains(':') && !last.contains('@') {
            self.spec.image.push_str(":latest");
            return Verdict::allow().warn("spec.image: no tag, using :latest");
        }
        Verdict::allow()
    }
}

/// Validated with failure policy `Ignore`: admitted when the webhook cannot be called.
#[kubeforge::custom_resource(
    group = "webhook-test.kubeforge.dev",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    webhooks(validate, failure_policy = "Ignore", timeout_seconds = 3)
)]
#[derive(Clone, Debug, Default)]
pub struct GizmoSpec {
    pub size: i32,
}

impl Validator for Gizmo {
    async fn validate_create(&self, _: &AdmissionContext) -> Verdict {
        if self.spec.size > 10 {
            return Verdict::deny("spec.size: at most 10");
        }
        Verdict::allow()
    }
}

/// What most kinds are: validated and defaulted with the default settings (`Fail`,
/// `metadata_updates = "Skip"`), no delete validator. `teeth` must be positive; 0 becomes 12.
#[kubeforge::custom_resource(
    group = "webhook-test.kubeforge.dev",
    version = "v1",
    kind = "Sprocket",
    namespaced,
    webhooks(validate, default)
)]
#[derive(Clone, Debug, Default)]
pub struct SprocketSpec {
    #[serde(default)]
    pub teeth: i32,
}

impl Validator for Sprocket {
    async fn validate_create(&self, _: &AdmissionContext) -> Verdict {
        if self.spec.teeth < 0 {
            return Verdict::deny("spec.teeth: must not be negative");
        }
        Verdict::allow()
    }
}

impl Defaulter for Sprocket {
    async fn apply_defaults(&mut self, _: &AdmissionContext) -> Verdict {
        if self.spec.teeth == 0 {
            self.spec.teeth = 12;
        }
        Verdict::allow()
    }
}

/// A kind whose validator judges metadata too (`metadata_updates = "Send"`): every update
/// reaches it, and waits for the operator.
#[kubeforge::custom_resource(
    group = "webhook-test.kubeforge.dev",
    version = "v1",
    kind = "Cog",
    namespaced,
    webhooks(validate, metadata_updates = "Send")
)]
#[derive(Clone, Debug, Default)]
pub struct CogSpec {
    #[serde(default)]
    pub size: i32,
}

impl Validator for Cog {
    async fn validate_create(&self, _: &AdmissionContext) -> Verdict {
        let labelled = self.metadata.labels.as_ref().is_some_and(|l| !l.is_empty());
        if labelled {
            return Verdict::deny("cogs carry no labels");
        }
        Verdict::allow()
    }

    async fn validate_update(&self, _: &Self, ctx: &AdmissionContext) -> Verdict {
        self.validate_create(ctx).await
    }
}

/// A Gadget named `name` with `image`.
fn gadget(name: &str, image: &str) -> serde_json::Value {
    json!({
        "apiVersion": "webhook-test.kubeforge.dev/v1", "kind": "Gadget",
        "metadata": { "name": name },
        "spec": { "image": image },
    })
}

/// A manager serving the webhooks for `ns` only, its health server and webhook addresses; the
/// apiserver calls `url` when given (a proxy), else the server itself.
struct Running {
    /// Dropped with the test (also on a panic): removes the configurations.
    cleanup: WebhookCleanup,
    metrics: std::sync::Arc<kubeforge::metrics::Metrics>,
    shutdown: CancellationToken,
    health: SocketAddr,
    webhook: SocketAddr,
    name: String,
    client: Client,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn start(ns: &TestNamespace, port: u16, url: Option<String>) -> Running {
        Self::start_with(ns, port, url, |o| o).await
    }

    async fn start_with(
        ns: &TestNamespace,
        port: u16,
        url: Option<String>,
        more: impl FnOnce(WebhookOptions) -> WebhookOptions,
    ) -> Running {
        let client = ns.client();
        let crds = kubeforge::crd::crds().unwrap();
        let ours = crds
            .into_iter()
            .filter(|c| c.spec.group == "webhook-test.kubeforge.dev");
        apply_crds(&client, ours, Duration::from_secs(30))
            .await
            .unwrap();
        let name = format!("wh-{}", ns.name());
        let cleanup = WebhookCleanup::new(ns, &name);
        let options = WebhookOptions::new(&name)
            .port(port)
            .url(url.unwrap_or_else(|| "https://127.0.0.1".to_owned()))
            .secret(ns.name(), "webhook-cert")
            .serve::<Gadget>()
            .serve::<Gizmo>()
            .serve::<Sprocket>()
            .serve::<Cog>();
        let options = more(options);
        let mut manager = Manager::new(client.clone())
            .namespace(Some(ns.name().to_owned()))
            .health_probe_bind_address("127.0.0.1:0".parse().unwrap())
            .webhooks(options);
        let mut listening = manager.on_listening();
        let metrics = std::sync::Arc::clone(manager.metrics());
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move {
            manager.run_until(token).await.unwrap();
        });
        let (mut health, mut webhook) = (None, None);
        while health.is_none() || webhook.is_none() {
            let (what, addr) = listening.recv().await.unwrap();
            match what {
                "health probes" => health = Some(addr),
                "webhook" => webhook = Some(addr),
                _ => {}
            }
        }
        let running = Running {
            cleanup,
            metrics,
            shutdown,
            health: health.unwrap(),
            webhook: webhook.unwrap(),
            name,
            client,
            task,
        };
        running.wait_ready().await;
        running
    }

    async fn readyz(&self) -> (u16, String) {
        let url = format!("http://{}/readyz?verbose", self.health);
        let output = tokio::process::Command::new("curl")
            .args(["-s", "-o", "-", "-w", "\n%{http_code}", &url])
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or_default();
        (code.trim().parse().unwrap_or(0), body.to_owned())
    }

    /// Ready, and both configurations applied (the apiserver calls the webhooks).
    async fn wait_ready(&self) {
        eventually(
            "the webhook server to be ready",
            Duration::from_secs(60),
            async || {
                let (code, _) = self.readyz().await;
                // Both configurations: the mutating one is applied after the validating one,
                // and a create that comes between is not defaulted.
                let validating =
                    bundled::<ValidatingWebhookConfiguration>(&self.client, &self.name).await;
                let mutating =
                    bundled::<MutatingWebhookConfiguration>(&self.client, &self.name).await;
                (code == 200 && validating && mutating).then_some(())
            },
        )
        .await;
    }

    /// Stops the manager, which leaves its configurations (whatever the mode: while it is down
    /// the apiserver refuses what they cover); the returned [`WebhookCleanup`] removes them
    /// when dropped (keep it while another replica of the same name runs).
    async fn stop(self) -> WebhookCleanup {
        self.shutdown.cancel();
        let _ = self.task.await;
        let validating = Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .get_opt(&self.name)
            .await
            .unwrap();
        let mutating = Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .get_opt(&self.name)
            .await
            .unwrap();
        assert!(
            validating.is_some() && mutating.is_some(),
            "the configurations of a stopped manager are kept"
        );
        self.cleanup
    }

    /// The metric label of a webhook path (the configurations' path, under the operator's name).
    fn path(&self, path: &str) -> String {
        format!("/{}{path}", self.name)
    }
}

/// POSTs `body` to the Gadgets of `ns` (with `dry_run`), returning the status, the `Warning`
/// headers and the body.
async fn create_raw(
    client: &Client,
    ns: &str,
    body: &serde_json::Value,
    dry_run: bool,
) -> (u16, Vec<String>, serde_json::Value) {
    let mut uri = format!("/apis/webhook-test.kubeforge.dev/v1/namespaces/{ns}/gadgets");
    if dry_run {
        uri.push_str("?dryRun=All");
    }
    let request = http::Request::post(uri)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    let response = client.send(request.map(Into::into)).await.unwrap();
    let status = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .collect();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (
        status,
        warnings,
        serde_json::from_slice(&bytes).unwrap_or_default(),
    )
}

async fn allow_registries(ns: &TestNamespace, registries: &str) {
    ns.api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &configmap("allowed-registries", &[("registries", registries)]),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn the_validator_should_deny_with_its_message_and_allow_with_its_warnings() {
    let ns = TestNamespace::new().await.unwrap();
    allow_registries(&ns, "registry.example.com").await;
    let running = Running::start(&ns, 0, None).await;
    let client = ns.client();

    let (status, _, body) = create_raw(
        &client,
        ns.name(),
        &gadget("evil", "evil.example/app:1"),
        false,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("admission webhook \"validate-v1.gadgets.webhook-test.kubeforge.dev\" denied the request")
            && message.contains("spec.image: registry evil.example is not allowed"),
        "{message}"
    );

    let (status, warnings, body) = create_raw(
        &client,
        ns.name(),
        &gadget("good", "registry.example.com/app"),
        false,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let warnings = warnings.join("\n");
    assert!(
        warnings.contains("spec.owner: nobody owns this gadget"),
        "{warnings}"
    );
    assert!(
        warnings.contains("spec.image: no tag, using :latest"),
        "{warnings}"
    );

    // The defaulter's changes are stored.
    let stored = ns.api::<Gadget>().get("good").await.unwrap();
    assert_eq!(stored.spec.image, "registry.example.com/app:latest");
    assert_eq!(stored.spec.replicas, Some(1));

    // controller-runtime's webhook metrics, and the rejection by kind and operation.
    let text = running.metrics.render(None);
    let validate = running.path("/validate/webhook-test.kubeforge.dev/v1/gadgets");
    let mutate = running.path("/mutate/webhook-test.kubeforge.dev/v1/gadgets");
    for expected in [
        format!(
            r#"controller_runtime_webhook_requests_total{{code="200",webhook="{validate}"}} 2"#
        ),
        format!(
            r#"kubeforge_webhook_rejections_total{{kind="Gadget",operation="CREATE",webhook="{validate}"}} 1"#
        ),
        format!(r#"controller_runtime_webhook_latency_seconds_count{{webhook="{validate}"}} 2"#),
        format!(r#"controller_runtime_webhook_requests_in_flight{{webhook="{mutate}"}} 0"#),
    ] {
        assert!(text.contains(&expected), "{expected} in\n{text}");
    }
    running.stop().await;
}

#[tokio::test]
async fn a_dry_run_should_call_the_webhooks_and_store_nothing() {
    let ns = TestNamespace::new().await.unwrap();
    allow_registries(&ns, "registry.example.com").await;
    let running = Running::start(&ns, 0, None).await;
    let client = ns.client();
    let before = DRY_RUNS.load(Ordering::SeqCst);

    let (status, _, body) = create_raw(
        &client,
        ns.name(),
        &gadget("dry", "evil.example/app:1"),
        true,
    )
    .await;
    assert_eq!(status, 403, "a denied dry run is denied: {body}");
    let (status, _, body) = create_raw(
        &client,
        ns.name(),
        &gadget("dry", "registry.example.com/app"),
        true,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["spec"]["image"], "registry.example.com/app:latest",
        "the dry run's answer is defaulted"
    );
    assert!(
        DRY_RUNS.load(Ordering::SeqCst) >= before + 2,
        "the validator saw the dry runs"
    );
    assert_eq!(
        status_code(ns.api::<Gadget>().get("dry").await),
        404,
        "nothing stored"
    );
    running.stop().await;
}

#[tokio::test]
async fn updates_and_deletes_should_be_validated_against_the_old_object() {
    let ns = TestNamespace::new().await.unwrap();
    allow_registries(&ns, "registry.example.com").await;
    let running = Running::start(&ns, 0, None).await;
    let api = ns.api::<Gadget>();
    let mut owned = gadget("owned", "registry.example.com/app:1");
    owned["spec"]["owner"] = json!("alice");
    owned["metadata"]["labels"] = json!({ "protected": "yes" });
    api.create(
        &PostParams::default(),
        &serde_json::from_value(owned).unwrap(),
    )
    .await
    .unwrap();

    let params = PatchParams::default();
    let change_owner = Patch::Merge(json!({ "spec": { "owner": "mallory" } }));
    let denied = api.patch("owned", &params, &change_owner).await;
    match &denied {
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains("spec.owner: cannot change once set"),
            "{s:?}"
        ),
        other => panic!("expected a denial, got {other:?}"),
    }
    let bad_image = Patch::Merge(json!({ "spec": { "image": "evil.example/app:2" } }));
    assert_eq!(
        status_code(api.patch("owned", &params, &bad_image).await),
        403
    );
    api.patch(
        "owned",
        &params,
        &Patch::Merge(json!({ "spec": { "image": "registry.example.com/app:2" } })),
    )
    .await
    .unwrap();

    let delete = api.delete("owned", &DeleteParams::default()).await;
    match &delete {
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains("protected gadgets cannot be deleted"),
            "{s:?}"
        ),
        other => panic!("expected a denial, got {other:?}"),
    }
    api.patch(
        "owned",
        &params,
        &Patch::Merge(json!({ "metadata": { "labels": { "protected": null } } })),
    )
    .await
    .unwrap();
    api.delete("owned", &DeleteParams::default()).await.unwrap();
    running.stop().await;
}

#[tokio::test]
async fn an_unreachable_server_should_leave_the_decision_to_the_failure_policy_and_fail_readiness()
{
    let ns = TestNamespace::new().await.unwrap();
    allow_registries(&ns, "registry.example.com").await;
    // The apiserver calls the server through a proxy the test can take away.
    let port = free_port().await;
    let proxy = FaultProxy::tcp(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap();
    let url = format!("https://127.0.0.1:{}", proxy.local_addr().port());
    let running = Running::start(&ns, port, Some(url)).await;
    let gizmos: Api<Gizmo> = ns.api();
    let gizmo = |name: &str, size: i32| -> Gizmo {
        serde_json::from_value(json!({
            "apiVersion": "webhook-test.kubeforge.dev/v1", "kind": "Gizmo",
            "metadata": { "name": name }, "spec": { "size": size },
        }))
        .unwrap()
    };
    assert_eq!(
        status_code(
            gizmos
                .create(&PostParams::default(), &gizmo("big", 11))
                .await
        ),
        403
    );

    drop(proxy);
    // Fail: refused, with the reason.
    let (status, _, body) = create_raw(
        &ns.client(),
        ns.name(),
        &gadget("g", "registry.example.com/app:1"),
        false,
    )
    .await;
    assert_eq!(status, 500, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("failed calling webhook"), "{message}");
    // Ignore: admitted without the webhook (the size rule is not applied).
    gizmos
        .create(&PostParams::default(), &gizmo("big", 11))
        .await
        .unwrap();
    // The operator is not ready, and says why.
    let (code, text) = running.readyz().await;
    assert_eq!(code, 500, "{text}");
    assert!(text.contains("[-]webhook"), "{text}");
    running.stop().await;
}

/// Whether the webhook configuration `name` of kind `C` exists with a CA bundle in each webhook.
async fn bundled<C>(client: &Client, name: &str) -> bool
where
    C: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let Ok(Some(config)) = Api::<C>::all(client.clone()).get_opt(name).await else {
        return false;
    };
    let config = serde_json::to_value(config).unwrap_or_default();
    config["webhooks"].as_array().is_some_and(|hooks| {
        hooks
            .iter()
            .all(|w| w["clientConfig"]["caBundle"].is_string())
    })
}

#[tokio::test]
async fn a_dropped_test_namespace_should_take_the_webhooks_of_its_manager_along() {
    let ns = TestNamespace::new().await.unwrap();
    let running = Running::start(&ns, 0, None).await;
    let (name, client) = (running.name.clone(), running.client.clone());
    // A test without a `WebhookCleanup` (forgotten, or panicked before making one): the
    // configurations of its stopped manager stay until the namespace goes.
    std::mem::forget(running.stop().await);
    assert!(bundled::<ValidatingWebhookConfiguration>(&client, &name).await);
    drop(ns);
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(&name)
        .await
        .unwrap();
    let mutating = Api::<MutatingWebhookConfiguration>::all(client)
        .get_opt(&name)
        .await
        .unwrap();
    assert!(
        validating.is_none() && mutating.is_none(),
        "left behind: {validating:?} {mutating:?}"
    );
}

async fn free_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// The certificate the server at `addr` presents, verified against `ca` (PEM) for 127.0.0.1.
async fn served_certificate(addr: SocketAddr, ca: &[u8]) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let port = addr.port();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test]
async fn replicas_should_share_the_certificate_and_pick_up_a_renewal_without_failed_calls() {
    use k8s_openapi::api::core::v1::Secret;
    let ns = TestNamespace::new().await.unwrap();
    allow_registries(&ns, "registry.example.com").await;
    let fast = |o: WebhookOptions| o.certificate_check_interval(Duration::from_secs(1));
    let first = Running::start_with(&ns, 0, None, fast).await;
    let second = Running::start_with(&ns, 0, None, fast).await;
    let secrets = ns.api::<Secret>();
    let ca = |secret: &Secret| secret.data.as_ref().unwrap()["ca.crt"].0.clone();
    let secret = secrets.get("webhook-cert").await.unwrap();
    let before = served_certificate(first.webhook, &ca(&secret)).await;
    assert_eq!(
        before,
        served_certificate(second.webhook, &ca(&secret)).await,
        "one certificate for both replicas"
    );

    // Admission calls go on while the certificate is renewed: none may fail.
    let client = ns.client();
    let stop = CancellationToken::new();
    let made = std::sync::Arc::new(AtomicUsize::new(0));
    let calls = {
        let (client, ns_name, stop) = (client.clone(), ns.name().to_owned(), stop.clone());
        let made = std::sync::Arc::clone(&made);
        tokio::spawn(async move {
            let mut results = Vec::new();
            let mut i = 0;
            while !stop.is_cancelled() {
                let body = gadget(&format!("during-{i}"), "registry.example.com/app:1");
                results.push(create_raw(&client, &ns_name, &body, false).await.0);
                made.fetch_add(1, Ordering::SeqCst);
                i += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            results
        })
    };
    // Forced renewal: the Secret says the serving certificate expires in a minute.
    let soon = (std::time::SystemTime::now() + Duration::from_secs(60))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let soon = k8s_openapi::jiff::Timestamp::from_second(soon as i64)
        .unwrap()
        .to_string();
    secrets
        .patch(
            "webhook-cert",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "annotations": { "kubeforge.dev/serving-not-after": soon } } })),
        )
        .await
        .unwrap();
    let renewed = eventually(
        "both replicas to serve a renewed certificate",
        Duration::from_secs(30),
        async || {
            let secret = secrets.get("webhook-cert").await.ok()?;
            let a = served_certificate(first.webhook, &ca(&secret)).await;
            let b = served_certificate(second.webhook, &ca(&secret)).await;
            (a != before && a == b).then_some(a)
        },
    )
    .await;
    // The renewal crossed by calls: 5 more once both replicas serve the new certificate,
    // however long they take on a busy machine (counted, not timed).
    let at_renewal = made.load(Ordering::SeqCst);
    eventually(
        "5 admission calls after the renewal",
        Duration::from_secs(120),
        async || (made.load(Ordering::SeqCst) >= at_renewal + 5).then_some(()),
    )
    .await;
    stop.cancel();
    let results = calls.await.unwrap();
    assert!(results.len() >= at_renewal + 5, "{results:?}");
    assert!(
        results.iter().all(|&code| code == 201),
        "every call admitted during the renewal: {results:?}"
    );
    assert_ne!(renewed, before);
    let _cleanup = first.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn the_webapp_example_should_deny_foreign_registries_and_serve_its_v2() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kubeforge_examples::webapp::{WebApp, v2};
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let webapps = kubeforge::crd::crds()
        .unwrap()
        .into_iter()
        .filter(|c| c.spec.group == "apps.kubeforge.dev");
    apply_crds(&client, webapps, Duration::from_secs(30))
        .await
        .unwrap();
    let crd = "webapps.apps.kubeforge.dev";
    let unconfigured = WebhookCleanup::new(&ns, &format!("wh-{}", ns.name())).conversion(crd);
    let running = Running::start_with(&ns, 0, None, |o| o.serve::<WebApp>()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    eventually(
        "the WebApp CRD to convert through the webhook",
        Duration::from_secs(60),
        async || {
            let conversion = crds.get(crd).await.ok()?.spec.conversion?;
            conversion.webhook?.client_config?.ca_bundle.map(|_| ())
        },
    )
    .await;

    // v2, a changed shape: `instances` is v1's `replicas`, `tier` only v2 has.
    let created: v2::WebApp = eventually("a v2 create", Duration::from_secs(30), async || {
        let app: v2::WebApp = serde_json::from_value(json!({
            "apiVersion": "apps.kubeforge.dev/v2", "kind": "WebApp",
            "metadata": { "name": "shop" },
            "spec": { "image": "registry.example.com/shop:1", "instances": 2, "tier": "premium" },
        }))
        .unwrap();
        ns.api::<v2::WebApp>()
            .create(&PostParams::default(), &app)
            .await
            .ok()
    })
    .await;
    assert_eq!(created.spec.tier, "premium");
    let as_v1 = ns.api::<WebApp>().get("shop").await.unwrap();
    assert_eq!(as_v1.spec.replicas, 2);
    let mut edited = as_v1.clone();
    edited.spec.replicas = 3;
    ns.api::<WebApp>()
        .replace("shop", &PostParams::default(), &edited)
        .await
        .unwrap();
    let again = ns.api::<v2::WebApp>().get("shop").await.unwrap();
    assert_eq!(
        (again.spec.instances, again.spec.tier.as_str()),
        (3, "premium"),
        "nothing lost through v1"
    );

    // The registry policy: a WebApp from another registry is denied with the rule's message.
    ns.api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &configmap("webapp-registries", &[("allowed", "registry.example.com")]),
        )
        .await
        .unwrap();
    let mut foreign = as_v1.clone();
    foreign.metadata = kube::api::ObjectMeta {
        name: Some("miner".into()),
        ..Default::default()
    };
    foreign.spec.image = "evil.example/miner:1".into();
    match ns
        .api::<WebApp>()
        .create(&PostParams::default(), &foreign)
        .await
    {
        Err(kube::Error::Api(s)) => assert!(
            s.message
                .contains("spec.image: registry evil.example is not allowed in this namespace"),
            "{s:?}"
        ),
        other => panic!("expected a denial, got {other:?}"),
    }
    running.stop().await;
    // The CRD still converts through the webhook once this test's server is gone: a request
    // that needs a conversion fails, none is stored lossily (the test's clean-up then points it
    // at the unconfigured endpoint).
    let conversion = crds.get(crd).await.unwrap().spec.conversion.unwrap();
    assert_eq!(conversion.strategy, "Webhook");
    // Unconfigured, and back to the one version the other WebApp tests install: left served
    // without a conversion, v2 (kubectl's and the namespace controller's preferred version)
    // could read none of their v1 objects, and no namespace of the plane could be deleted.
    drop(unconfigured);
    apply_crds(&client, [WebApp::crd()], Duration::from_secs(30))
        .await
        .unwrap();
}

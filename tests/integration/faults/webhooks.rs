//! Webhooks and conversion through the operator's lifecycle (issue #31): stopped, crashed,
//! restarted, fed objects it cannot read, and run under exactly the RBAC it prints.
//!
//! - A stopped operator keeps its CRD's conversion and its webhook configurations: while it is
//!   down a write that needs a conversion, and one its `Fail` webhooks would judge, is refused
//!   with a message naming the operator; nothing is stored with fields dropped. Before: the
//!   conversion was switched to `None` and the configurations deleted on shutdown, so a v1
//!   create was stored with v1's fields dropped and a duplicate slot was admitted.
//! - The defaulter's patch holds only what it changed (before: every field serde filled in).
//! - After a crash (configurations left behind), deletes of a kind without a `DeleteValidator`
//!   go through and its namespace can be deleted (before: every delete was refused).
//! - An object the webhook cannot decode can be deleted, and repaired by an update that decodes
//!   (before: both refused, "the object cannot be read").
//! - The operator runs through start, traffic, restart and shutdown under exactly the ClusterRole
//!   its own `crdgen --rbac` prints, with no 403 (before: the role had no webhook rules).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use kubeforge::manager::Manager;
use kubeforge::testing::{ControlPlane, TestNamespace, WebhookCleanup, apply_crds};
use kubeforge::webhook::{AdmissionContext, DeleteValidator, Validator, Verdict, WebhookOptions};
use kubeforge_tests::slots::{self, v1, v2};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::eventually;
use crate::support::process::Spawned;

/// The Slot CRD's conversion is one per CRD: the tests that configure it take turns.
static SLOT_CONVERSION: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Validated on create and update only: no `DeleteValidator`.
#[kubeforge::custom_resource(
    group = "faults-webhooks.kubeforge.dev",
    version = "v1",
    kind = "Ledger",
    namespaced,
    webhooks(validate, timeout_seconds = 5)
)]
#[derive(Clone, Debug, Default)]
pub struct LedgerSpec {
    pub entries: i32,
}

impl Validator for Ledger {
    async fn validate_create(&self, _: &AdmissionContext) -> Verdict {
        if self.spec.entries > 100 {
            return Verdict::deny("spec.entries: at most 100");
        }
        Verdict::allow()
    }
}

/// Validated on every operation; installed with a looser CRD than its type (`value` may be a
/// string), so objects the webhook cannot decode can be stored.
#[kubeforge::custom_resource(
    group = "faults-webhooks.kubeforge.dev",
    version = "v1",
    kind = "Latch",
    namespaced,
    webhooks(validate, validate_delete, timeout_seconds = 5)
)]
#[derive(Clone, Debug, Default)]
pub struct LatchSpec {
    pub value: i64,
}

impl Validator for Latch {
    async fn validate_create(&self, _: &AdmissionContext) -> Verdict {
        if self.spec.value > 100 {
            return Verdict::deny("spec.value: at most 100");
        }
        Verdict::allow()
    }

    async fn validate_update(&self, _: &Self, ctx: &AdmissionContext) -> Verdict {
        self.validate_create(ctx).await
    }
}

impl DeleteValidator for Latch {
    async fn validate_delete(&self, _: &AdmissionContext) -> Verdict {
        let labels = self.metadata.labels.as_ref();
        if labels.is_some_and(|l| l.contains_key("protected")) {
            return Verdict::deny("protected latches stay; remove the label first");
        }
        Verdict::allow()
    }
}

/// The Slot CRD alone (other kinds of the group have tests of their own).
async fn apply_slot_crd(client: &Client) {
    let crd = kubeforge::crd::crds()
        .unwrap()
        .into_iter()
        .filter(|c| c.metadata.name.as_deref() == Some(slots::CRD));
    apply_crds(client, crd, Duration::from_secs(30))
        .await
        .unwrap();
}

/// A manager in this process.
struct InProcess {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl InProcess {
    /// Serves `K`'s webhooks as `name` (URL mode: the apiserver calls it on loopback).
    fn start<K: kube::Resource<DynamicType = ()>>(
        ns: &TestNamespace,
        name: &str,
        namespaced: bool,
    ) -> Self {
        let options = WebhookOptions::new(name)
            .port(0)
            .secret(ns.name(), "webhook-cert")
            .serve::<K>();
        let namespace = namespaced.then(|| ns.name().to_owned());
        let manager = Manager::new(ns.client())
            .namespace(namespace)
            .webhooks(options);
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

/// Waits until the validating configuration `name` and the Slot CRD's conversion (when
/// `conversion`) point at the webhook of `name` with a CA bundle.
async fn configured(client: &Client, name: &str, conversion: bool) {
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let ours = format!("/{name}/");
    eventually(
        "the webhooks to be configured",
        Duration::from_secs(60),
        async || {
            let config = configurations.get_opt(name).await.ok()??;
            let hooks = config.webhooks.unwrap_or_default();
            let applied =
                !hooks.is_empty() && hooks.iter().all(|w| w.client_config.ca_bundle.is_some());
            if !applied {
                return None;
            }
            if !conversion {
                return Some(());
            }
            let crd = crds.get(slots::CRD).await.ok()?;
            let client_config = crd.spec.conversion?.webhook?.client_config?;
            let url = client_config.url?;
            (url.contains(&ours) && client_config.ca_bundle.is_some()).then_some(())
        },
    )
    .await;
}

/// Retries `f` until it succeeds (a fresh CA bundle or endpoint takes the apiserver a moment).
async fn settled<T>(what: &str, mut f: impl AsyncFnMut() -> kube::Result<T>) -> T {
    eventually(what, Duration::from_secs(30), async || f().await.ok()).await
}

fn slot_v1(name: &str, slot: i32, note: &str) -> v1::Slot {
    v1::Slot::new(
        name,
        v1::SlotSpec {
            replicas: 2,
            slot,
            legacy_note: Some(note.to_owned()),
        },
    )
}

fn slot_v2(name: &str, slot: i32) -> v2::Slot {
    v2::Slot::new(
        name,
        v2::SlotSpec {
            instances: 2,
            slot,
            tier: "gold".to_owned(),
        },
    )
}

/// The message of an API error (`panic` on success).
fn refused<T: std::fmt::Debug>(result: kube::Result<T>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("{what}: expected the apiserver to refuse, got {other:?}"),
    }
}

/// An untyped `Api` for `kind` `version` of the test group in `ns`.
fn raw_api(ns: &TestNamespace, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(slots::GROUP, version, kind);
    Api::namespaced_with(
        ns.client(),
        ns.name(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// Stopped (gracefully) between two runs, the operator leaves its conversion and webhooks in
/// place: writes that need them fail loudly, naming it; nothing is stored lossily. Measured
/// before the fix: the conversion was `None` after the stop, the v1 create of `lost` succeeded
/// and was stored without `replicas` and `legacyNote`; the duplicate slot was admitted.
#[tokio::test]
async fn a_stopped_operator_should_keep_its_conversion_and_webhooks_so_nothing_is_stored_lossily() {
    let _turn = SLOT_CONVERSION.lock().await;
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let name = format!("slots-{}", ns.name());
    let _cleanup = WebhookCleanup::new(&ns, &name).conversion(slots::CRD);
    apply_slot_crd(&client).await;
    let slots1: Api<v1::Slot> = ns.api();
    let slots2: Api<v2::Slot> = ns.api();

    let operator = InProcess::start::<v2::Slot>(&ns, &name, false);
    configured(&client, &name, true).await;
    settled("a v1 create", async || {
        slots1
            .create(&PostParams::default(), &slot_v1("kept", 30, "keep me"))
            .await
    })
    .await;
    assert_eq!(slots2.get("kept").await.unwrap().spec.instances, 2);
    operator.stop().await;

    // Stopped: the CRD still converts through the webhook, the configurations are there.
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(slots::CRD)
        .await
        .unwrap();
    assert_eq!(crd.spec.conversion.unwrap().strategy, "Webhook");
    let down = Instant::now();
    let message = refused(
        slots1
            .create(&PostParams::default(), &slot_v1("lost", 31, "dropped?"))
            .await,
        "a v1 create while the operator is down",
    );
    // The first call that fails is the defaulter's (its webhook is registered for every
    // version of the kind) or, for a kind without one, the conversion's.
    assert!(
        (message.contains("conversion webhook") || message.contains("failed calling webhook"))
            && message.contains(&name),
        "the refusal says a webhook could not be called and names the operator: {message}"
    );
    assert_eq!(
        crate::support::status_code(slots2.get("lost").await),
        404,
        "nothing stored"
    );
    let message = refused(
        slots2
            .create(&PostParams::default(), &slot_v2("twin", 30))
            .await,
        "a v2 create the validator would deny, while the operator is down",
    );
    assert!(
        message.contains("failed calling webhook") && message.contains(&name),
        "the refusal names the operator: {message}"
    );
    let refused_within = down.elapsed();

    // Restarted: the object created through v1 kept what only v1 has; writes work again.
    let operator = InProcess::start::<v2::Slot>(&ns, &name, false);
    configured(&client, &name, true).await;
    let kept = settled("a v1 read", async || slots1.get("kept").await).await;
    assert_eq!(
        (kept.spec.replicas, kept.spec.legacy_note.as_deref()),
        (2, Some("keep me"))
    );
    settled("a v1 create", async || {
        slots1
            .create(&PostParams::default(), &slot_v1("lost", 31, "kept now"))
            .await
    })
    .await;
    let message = refused(
        slots2
            .create(&PostParams::default(), &slot_v2("twin", 30))
            .await,
        "a duplicate slot",
    );
    assert!(message.contains("spec.slot: 30 is taken"), "{message}");

    // The defaulter's patch holds what it changed (`instances`), not what serde filled in
    // (`tier`, never sent): before, `tier: standard` was stored too.
    let raw = raw_api(&ns, "v2", "Slot", "slots");
    let sparse: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v2", slots::GROUP), "kind": "Slot",
        "metadata": { "name": "sparse" },
        "spec": { "slot": 40 },
    }))
    .unwrap();
    raw.create(&PostParams::default(), &sparse).await.unwrap();
    let stored = raw.get("sparse").await.unwrap();
    assert_eq!(
        stored.data["spec"],
        json!({ "slot": 40, "instances": 1 }),
        "only the defaulter's change was added"
    );
    operator.stop().await;
    eprintln!("writes refused, naming the operator, within {refused_within:?} of the stop");
}

/// A crash (no graceful shutdown: the runtime the manager runs on is dropped) leaves the
/// configurations behind; a kind without a `DeleteValidator` is not validated on delete, so its
/// objects and their namespace can still be deleted. Measured before the fix: every delete was
/// refused ("failed calling webhook ... connection refused") until the operator returned.
#[tokio::test]
async fn after_a_crash_deletes_of_a_kind_without_a_delete_validator_should_go_through() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let name = format!("ledgers-{}", ns.name());
    let _cleanup = WebhookCleanup::new(&ns, &name);
    let crd = kubeforge::crd::crds()
        .unwrap()
        .into_iter()
        .filter(|c| c.spec.names.kind == "Ledger");
    apply_crds(&client, crd, Duration::from_secs(30))
        .await
        .unwrap();
    let ledgers: Api<Ledger> = ns.api();
    let ledger = |name: &str, entries: i32| Ledger::new(name, LedgerSpec { entries });

    // The manager on a runtime of its own, which the crash drops.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let config = ControlPlane::shared().unwrap().config().await.unwrap();
    let (namespace, webhook_name) = (ns.name().to_owned(), name.clone());
    runtime.spawn(async move {
        let client = Client::try_from(config).unwrap();
        let options = WebhookOptions::new(&webhook_name)
            .port(0)
            .secret(&namespace, "webhook-cert")
            .serve::<Ledger>();
        let manager = Manager::new(client)
            .namespace(Some(namespace))
            .webhooks(options);
        let _ = manager.run_until(CancellationToken::new()).await;
    });
    configured(&client, &name, false).await;
    let message = eventually(
        "the validator to deny",
        Duration::from_secs(30),
        async || match ledgers
            .create(&PostParams::default(), &ledger("big", 101))
            .await
        {
            Err(kube::Error::Api(s)) if s.message.contains("at most 100") => Some(s.message),
            _ => None,
        },
    )
    .await;
    assert!(message.contains("spec.entries: at most 100"), "{message}");
    for n in ["a", "b"] {
        ledgers
            .create(&PostParams::default(), &ledger(n, 1))
            .await
            .unwrap();
    }

    runtime.shutdown_background();
    // The server is gone, its configuration stays: a create is refused, naming the operator.
    let message = eventually(
        "the webhook server to be gone",
        Duration::from_secs(30),
        async || match ledgers
            .create(&PostParams::default(), &ledger("c", 1))
            .await
        {
            Err(kube::Error::Api(s)) if s.message.contains("failed calling webhook") => {
                Some(s.message)
            }
            _ => None,
        },
    )
    .await;
    assert!(message.contains(&name), "{message}");

    // Deletes are not the webhook's: they go through, and so does the namespace's.
    ledgers
        .delete("a", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting a ledger after the crash: {e}"));
    let started = Instant::now();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(ns.name(), &DeleteParams::default())
        .await
        .unwrap();
    // A delete the dead webhook refused would never finish; a loaded CI run needed over 90 s for
    // the namespace controller to empty and delete the namespace.
    eventually(
        "the namespace (with its ledger `b`) to be deleted",
        Duration::from_secs(240),
        async || matches!(namespaces.get_opt(ns.name()).await, Ok(None)).then_some(()),
    )
    .await;
    eprintln!(
        "namespace deleted {:?} after the request",
        started.elapsed()
    );
}

/// The CRD of `Latch` with `spec.value` int-or-string: a string is stored, and the webhook
/// cannot decode it as the kind's `i64`.
fn loose_latch_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": { "name": format!("latches.{}", slots::GROUP) },
        "spec": {
            "group": slots::GROUP, "scope": "Namespaced",
            "names": { "plural": "latches", "singular": "latch", "kind": "Latch" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object",
                        "properties": { "value": { "x-kubernetes-int-or-string": true } },
                    } },
                }},
            }],
        },
    }))
    .unwrap()
}

/// Objects the webhook cannot decode are never blocked from deletion, and an update that makes
/// one decode (and pass the validator) repairs it. Measured before the fix: both were refused
/// with "kubeforge: the object cannot be read".
#[tokio::test]
async fn an_object_the_webhook_cannot_read_should_stay_deletable_and_repairable() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let name = format!("latches-{}", ns.name());
    let _cleanup = WebhookCleanup::new(&ns, &name);
    apply_crds(&client, [loose_latch_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    // Written before the operator runs (no webhook yet): two unreadable, one protected.
    let raw = raw_api(&ns, "v1", "Latch", "latches");
    for (latch, value, labels) in [
        ("broken", json!("big"), json!({})),
        ("doomed", json!("big"), json!({})),
        ("guarded", json!(1), json!({ "protected": "yes" })),
    ] {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1", slots::GROUP), "kind": "Latch",
            "metadata": { "name": latch, "labels": labels },
            "spec": { "value": value },
        }))
        .unwrap();
        raw.create(&PostParams::default(), &obj).await.unwrap();
    }
    let operator = InProcess::start::<Latch>(&ns, &name, true);
    configured(&client, &name, false).await;

    // The delete validator is live.
    let message = eventually(
        "the delete validator to deny",
        Duration::from_secs(30),
        async || match raw.delete("guarded", &DeleteParams::default()).await {
            Err(kube::Error::Api(s)) if s.message.contains("remove the label") => Some(s.message),
            _ => None,
        },
    )
    .await;
    assert!(message.contains("protected latches stay"), "{message}");

    let set = |value: Value| Patch::Merge(json!({ "spec": { "value": value } }));
    // Still unreadable after the update: refused (it would be stored unreadable).
    let message = refused(
        raw.patch("broken", &PatchParams::default(), &set(json!("worse")))
            .await,
        "an update that leaves the object unreadable",
    );
    assert!(message.contains("cannot be read"), "{message}");
    // An update that repairs it: admitted (judged as a create), and the validator still applies.
    let message = refused(
        raw.patch("broken", &PatchParams::default(), &set(json!(101)))
            .await,
        "a repair the validator denies",
    );
    assert!(message.contains("spec.value: at most 100"), "{message}");
    let repaired = raw
        .patch("broken", &PatchParams::default(), &set(json!(3)))
        .await
        .unwrap_or_else(|e| panic!("repairing an unreadable latch: {e}"));
    assert_eq!(repaired.data["spec"]["value"], 3);
    // An unreadable object is deleted without validation.
    raw.delete("doomed", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting an unreadable latch: {e}"));
    operator.stop().await;
}

/// Starts `webhook-operator` registering its webhooks as `name`.
fn start_process(kubeconfig: &Path, name: &str) -> Spawned {
    let mut command = Command::new(env!("CARGO_BIN_EXE_webhook-operator"));
    command
        .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
        .args(["--health-probe-bind-address", "127.0.0.1:0"])
        .args(["--webhook-port", "0", "--webhook-name", name])
        .env("RUST_LOG", "info")
        .env("LOG_FORMAT", "text")
        .env("NO_COLOR", "1");
    Spawned::start(command)
}

/// `webhook-operator crdgen ARGS`.
fn crdgen(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_webhook-operator"))
        .arg("crdgen")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "crdgen {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The operator with webhooks and a conversion, run as a process under a ServiceAccount bound
/// to exactly the ClusterRole its own `crdgen --rbac` prints, through start, traffic, restart
/// and shutdown: no 403, no "forbidden" in its logs. Measured before the fix: the role had no
/// webhook rules ("applying the webhook configurations failed ... forbidden", retried for ever,
/// and the CRD never converted).
#[tokio::test]
async fn the_operator_should_run_under_exactly_the_rbac_it_prints() {
    let _turn = SLOT_CONVERSION.lock().await;
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let name = format!("wo-{}", ns.name());
    let _cleanup = WebhookCleanup::new(&ns, &name).conversion(slots::CRD);
    // The CRDs it prints (the conversion at its Service until it points it at itself).
    let crds: Vec<CustomResourceDefinition> = serde_norway::Deserializer::from_str(&crdgen(&[]))
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(crds.len(), 1, "the Slot CRD");
    let conversion = crds[0].spec.conversion.clone().unwrap();
    assert_eq!(
        conversion.strategy, "Webhook",
        "never without its conversion"
    );
    apply_crds(&client, crds, Duration::from_secs(30))
        .await
        .unwrap();

    // Exactly the printed ClusterRole, bound cluster-wide to the operator's ServiceAccount.
    let mut role: ClusterRole = serde_norway::from_str(&crdgen(&["--rbac"])).unwrap();
    let role_name = format!("webhook-operator-{}", ns.name());
    role.metadata.name = Some(role_name.clone());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    roles.create(&PostParams::default(), &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": role_name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name },
        "subjects": [{ "kind": "ServiceAccount", "name": "operator", "namespace": ns.name() }],
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let kubeconfig = ControlPlane::shared()
        .unwrap()
        .service_account_kubeconfig(ns.name(), "operator")
        .await
        .unwrap();

    let slots1: Api<v1::Slot> = ns.api();
    let slots2: Api<v2::Slot> = ns.api();
    let mut lines = Vec::new();
    for round in 0..2 {
        let operator = start_process(&kubeconfig, &name);
        configured(&client, &name, true).await;
        let created = format!("s{round}");
        settled("a v1 create", async || {
            slots1
                .create(&PostParams::default(), &slot_v1(&created, round, "n"))
                .await
        })
        .await;
        assert_eq!(slots2.get(&created).await.unwrap().spec.instances, 2);
        let message = refused(
            slots2
                .create(&PostParams::default(), &slot_v2("dup", round))
                .await,
            "a duplicate slot",
        );
        assert!(message.contains("is taken"), "{message}");
        eventually(
            "the controller to reconcile it",
            Duration::from_secs(30),
            async || {
                operator
                    .lines()
                    .iter()
                    .any(|l| l.contains("reconciled") && l.contains(&created))
                    .then_some(())
            },
        )
        .await;
        let output = operator.lines();
        let status = operator.stop().await;
        assert!(status.success(), "exit status {status}: {output:#?}");
        lines.extend(output);
    }
    let denied: Vec<_> = lines
        .iter()
        // A refusal reads `... Forbidden ... code: 403` (a bare "403" may be part of a hash).
        .filter(|l| l.to_lowercase().contains("forbidden") || l.contains("code: 403"))
        .collect();
    assert!(
        denied.is_empty(),
        "denied under the printed RBAC: {denied:#?}"
    );
    let _ = bindings.delete(&role_name, &DeleteParams::default()).await;
    let _ = roles.delete(&role_name, &DeleteParams::default()).await;
}

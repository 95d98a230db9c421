//! Reconcilers and watchers whose errors are `anyhow::Error` or `Box<dyn Error + Send + Sync>`,
//! declared with `#[controller]`, against the real apiserver: a failure is logged with its
//! causes, counted in the metrics, judged by the retry policy with the apiserver's error in
//! its chain, retried, and the object converges once the cause is gone.
//!
//! The logs are captured in-process: a `#[tokio::test]` runs on a current-thread runtime, so a
//! subscriber set as this thread's default sees everything the controller logs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PostParams};
use kubeforge::controller::{Action, Context};
use kubeforge::manager::Manager;
use kubeforge::retry::RetryError;
use kubeforge::testing::{TestNamespace, apply_crds};
use kubeforge::watcher::WatchContext;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::logs::Logs;
use crate::support::widget::{Widget, widget, widget_crd};
use crate::support::{configmap, eventually};

/// What a retry policy was shown of one failure.
#[derive(Clone, Debug)]
struct Judged {
    /// The error's own text.
    text: String,
    /// The status code of the `kube::Error` in its source chain, if any.
    api_code: Option<u16>,
}

impl Judged {
    fn of(error: &RetryError) -> Self {
        let chain = std::iter::successors(Some(error as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        });
        let api_code = chain
            .filter_map(|e| e.downcast_ref::<kube::Error>())
            .find_map(|e| match e {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            });
        Self {
            text: error.to_string(),
            api_code,
        }
    }
}

/// Every failure the retry policies of this module's controllers were shown, by controller.
static JUDGED: Mutex<Vec<(&str, Judged)>> = Mutex::new(Vec::new());

/// A retry policy that records what it is shown, then retries after 200 ms.
fn recording(controller: &'static str) -> impl kubeforge::retry::RetryPolicy {
    move |error: &RetryError, _attempt: u32| {
        JUDGED.lock().unwrap().push((controller, Judged::of(error)));
        Some(Duration::from_millis(200))
    }
}

fn judged(controller: &str) -> Vec<Judged> {
    JUDGED
        .lock()
        .unwrap()
        .iter()
        .filter(|(c, _)| *c == controller)
        .map(|(_, j)| j.clone())
        .collect()
}

/// Copies a widget's `spec.value` into its status once the ConfigMap `settings-<widget>`
/// exists; fails with the apiserver's 404, in an anyhow context, until then.
struct AnyhowSettings;

#[kubeforge::controller(for = Widget, name = "anyhow-settings", retry = recording("anyhow-settings"))]
impl AnyhowSettings {
    async fn reconcile(&self, w: Arc<Widget>, ctx: &Context<Widget>) -> anyhow::Result<Action> {
        let settings = format!("settings-{}", ctx.key().name);
        ctx.api::<ConfigMap>()
            .get(&settings)
            .await
            .context("reading the settings")?;
        let status = json!({ "status": { "observed": w.spec.value } });
        ctx.patch_status(&Patch::Merge(status)).await?;
        Ok(Action::Done)
    }
}

/// The same with a boxed error (`?` on the kube error, no context).
struct BoxedSettings;

#[kubeforge::controller(for = Widget, name = "boxed-settings", retry = recording("boxed-settings"))]
impl BoxedSettings {
    async fn reconcile(
        &self,
        w: Arc<Widget>,
        ctx: &Context<Widget>,
    ) -> Result<Action, Box<dyn std::error::Error + Send + Sync>> {
        let settings = format!("settings-{}", ctx.key().name);
        ctx.api::<ConfigMap>().get(&settings).await?;
        let status = json!({ "status": { "observed": w.spec.value } });
        ctx.patch_status(&Patch::Merge(status)).await?;
        Ok(Action::Done)
    }
}

/// The `error` field of each failed reconcile of `controller` in `logs`.
fn failures(logs: &Logs, controller: &str) -> Vec<String> {
    logs.json()
        .into_iter()
        .filter(|line| {
            line["fields"]["message"] == "reconcile failed; retrying with backoff"
                && line["span"]["controller"] == controller
        })
        .filter_map(|line| line["fields"]["error"].as_str().map(str::to_owned))
        .collect()
}

/// The value of the sample `name{labels}` in a Prometheus text scrape.
fn sample(scrape: &str, name_and_labels: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        line.strip_prefix(name_and_labels)
            .and_then(|rest| rest.trim().parse().ok())
    })
}

/// Runs `manager` on the test's namespace until the returned token is cancelled.
fn start(manager: Manager) -> CancellationToken {
    let shutdown = CancellationToken::new();
    tokio::spawn(manager.run_until(shutdown.clone()));
    shutdown
}

/// A widget whose reconcile fails until its settings ConfigMap exists: the failures are logged
/// with `expected_error`, counted and judged with the apiserver's 404 in the chain; once the
/// ConfigMap is created the widget converges.
async fn failing_until_the_settings_exist(
    ns: &TestNamespace,
    manager: Manager,
    controller: &str,
    expected_error: &str,
) {
    let (logs, _guard) = Logs::capture();
    apply_crds(&ns.client(), [widget_crd()], Duration::from_secs(30))
        .await
        .unwrap();
    let metrics = Arc::clone(manager.metrics());
    let shutdown = start(manager);
    ns.api::<Widget>()
        .create(&PostParams::default(), &widget("w", 7))
        .await
        .unwrap();
    eventually(
        "two failed reconciles",
        Duration::from_secs(30),
        async || (failures(&logs, controller).len() >= 2).then_some(()),
    )
    .await;
    let failures = failures(&logs, controller);
    assert_eq!(failures[0], expected_error, "{failures:?}");
    let seen = judged(controller);
    assert!(!seen.is_empty(), "the retry policy judged the failures");
    assert!(
        seen.iter().all(|j| j.api_code == Some(404)),
        "the apiserver's error is in the chain the policy sees: {seen:?}"
    );
    // A failure is logged before it is counted and its retry scheduled: wait for the counts.
    let errors =
        format!("controller_runtime_reconcile_errors_total{{controller=\"{controller}\"}}");
    let retried =
        format!("kubeforge_retries_total{{controller=\"{controller}\",outcome=\"scheduled\"}}");
    eventually(
        "two errors counted and two retries scheduled",
        Duration::from_secs(10),
        async || {
            let scrape = metrics.render(None);
            (sample(&scrape, &errors).unwrap_or(0.0) >= 2.0
                && sample(&scrape, &retried).unwrap_or(0.0) >= 2.0)
                .then_some(())
        },
    )
    .await;

    // The cause goes away: the next retry converges.
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("settings-w", &[]))
        .await
        .unwrap();
    eventually(
        "the widget to converge",
        Duration::from_secs(30),
        async || {
            let w = ns.api::<Widget>().get("w").await.ok()?;
            (w.status?.observed == 7).then_some(())
        },
    )
    .await;
    // The status write is visible before the reconcile that made it has returned and been
    // counted: wait for the count.
    let succeeded = format!(
        "controller_runtime_reconcile_total{{controller=\"{controller}\",result=\"success\"}}"
    );
    eventually(
        "the successful reconcile to be counted",
        Duration::from_secs(10),
        async || (sample(&metrics.render(None), &succeeded).unwrap_or(0.0) >= 1.0).then_some(()),
    )
    .await;
    shutdown.cancel();
}

#[tokio::test]
async fn anyhow_reconcile_errors_should_be_logged_with_their_cause_retried_and_converge() {
    let ns = TestNamespace::new().await.unwrap();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(AnyhowSettings);
    failing_until_the_settings_exist(
        &ns,
        manager,
        "anyhow-settings",
        "reading the settings: 404 NotFound: configmaps \"settings-w\" not found",
    )
    .await;
    let seen = judged("anyhow-settings");
    assert_eq!(
        seen[0].text, "reading the settings",
        "the policy sees anyhow's context as the error, the kube error as its source"
    );
}

#[tokio::test]
async fn boxed_reconcile_errors_should_be_logged_retried_and_converge() {
    let ns = TestNamespace::new().await.unwrap();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .controller(BoxedSettings);
    failing_until_the_settings_exist(
        &ns,
        manager,
        "boxed-settings",
        "404 NotFound: configmaps \"settings-w\" not found",
    )
    .await;
}

/// Records each ConfigMap whose `gate-<name>` Secret exists when it is added; fails with the
/// apiserver's 404 (an `anyhow::Error` holding the kube error, no context) until then.
#[derive(Clone, Default)]
struct GatedAudit(Arc<Mutex<Vec<String>>>);

#[kubeforge::controller(for = ConfigMap, watcher, name = "gated-audit", retry = recording("gated-audit"))]
impl GatedAudit {
    async fn add(&self, cm: Arc<ConfigMap>, ctx: &WatchContext) -> anyhow::Result<()> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        if !name.starts_with("audited-") {
            return Ok(());
        }
        let namespace = cm.metadata.namespace.as_deref().unwrap_or_default();
        kube::Api::<Secret>::namespaced(ctx.client(), namespace)
            .get(&format!("gate-{name}"))
            .await?;
        self.0.lock().unwrap().push(name);
        Ok(())
    }
}

#[tokio::test]
async fn anyhow_watcher_errors_should_be_judged_with_their_cause_and_retried() {
    let ns = TestNamespace::new().await.unwrap();
    let audit = GatedAudit::default();
    let manager = Manager::new(ns.client())
        .namespace(Some(ns.name().to_owned()))
        .watcher(audit.clone());
    let metrics = Arc::clone(manager.metrics());
    let shutdown = start(manager);
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("audited-a", &[]))
        .await
        .unwrap();
    eventually(
        "the retry policy to judge two failures",
        Duration::from_secs(30),
        async || (judged("gated-audit").len() >= 2).then_some(()),
    )
    .await;
    let seen = judged("gated-audit");
    assert!(
        seen.iter().all(|j| j.api_code == Some(404)),
        "the kube error itself, not anyhow's wrapper: {seen:?}"
    );
    let scrape = metrics.render(None);
    let errors = "controller_runtime_reconcile_total{controller=\"gated-audit\",result=\"error\"}";
    assert!(sample(&scrape, errors).unwrap_or(0.0) >= 2.0, "{scrape}");

    let gate: Secret =
        serde_json::from_value(json!({ "metadata": { "name": "gate-audited-a" } })).unwrap();
    ns.api::<Secret>()
        .create(&PostParams::default(), &gate)
        .await
        .unwrap();
    eventually(
        "the retried event to be handled",
        Duration::from_secs(30),
        async || {
            audit
                .0
                .lock()
                .unwrap()
                .contains(&"audited-a".to_owned())
                .then_some(())
        },
    )
    .await;
    shutdown.cancel();
}

//! A test operator for sharding (`--shards <group>`): it reconciles the ConfigMaps labelled
//! `shard-test=true` in its namespace, stamping each with its identity and the value it saw
//! (annotations `shard/by`, `shard/value`, from the data key `value`) when they differ, and, with
//! `SHARD_CHILDREN=1`, applies a child ConfigMap `<name>-child` owned by it and creates one
//! `<name>-once` unless it exists (`create_owned`: children follow their owner's shard).
//!
//! What the sharding tests read from its output (one line each, wall-clock µs since the epoch):
//! `start <namespace>/<name> <µs>` and `end <namespace>/<name> <µs>` around every reconcile (an
//! audit: no object may be reconciled by two replicas at once), `owned <n>` twice a second: the
//! objects its shard's informer holds, and after each `late <µs>`: how much later than asked its
//! half-second sleep woke (how starved its runtime is; the tests' bounds add it).
//! `SHARD_RECONCILE_MS` makes every reconcile take that long (default 5), so overlaps would show;
//! `SHARD_WORKERS` sets the concurrency (default 4).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kubeforge::cli::or_exit;
use kubeforge::controller::{Action, Context, Controller, Owns, Reconciler};
use kubeforge::informer::InformerConfig;

struct Stamper {
    identity: String,
    children: bool,
    took: Duration,
}

fn micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros()
}

impl Reconciler<ConfigMap> for Stamper {
    type Error = kube::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, kube::Error> {
        let key = ctx.key().to_string();
        println!("start {key} {}", micros());
        let result = self.stamp(&cm, ctx).await;
        println!("end {key} {}", micros());
        result.map(|()| Action::Done)
    }
}

impl Stamper {
    async fn stamp(&self, cm: &ConfigMap, ctx: &Context<ConfigMap>) -> Result<(), kube::Error> {
        tokio::time::sleep(self.took).await;
        let value = cm
            .data
            .as_ref()
            .and_then(|d| d.get("value"))
            .cloned()
            .unwrap_or_default();
        let annotation = |k: &str| {
            cm.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .cloned()
        };
        if annotation("shard/by").as_deref() != Some(self.identity.as_str())
            || annotation("shard/value").as_deref() != Some(value.as_str())
        {
            let stamp = serde_json::json!({ "metadata": { "annotations": {
                "shard/by": self.identity,
                "shard/value": value,
            }}});
            ctx.api::<ConfigMap>()
                .patch(
                    &ctx.key().name,
                    &PatchParams::default(),
                    &Patch::Merge(stamp),
                )
                .await?;
        }
        if self.children {
            let child = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(format!("{}-child", ctx.key().name)),
                    ..ObjectMeta::default()
                },
                data: Some([("value".to_owned(), value)].into()),
                ..ConfigMap::default()
            };
            let once = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(format!("{}-once", ctx.key().name)),
                    ..ObjectMeta::default()
                },
                ..child.clone()
            };
            ctx.apply_owned(cm, "shard-operator", child).await?;
            ctx.create_owned(cm, once).await?;
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() {
    let options = kubeforge::cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let namespace = options
        .namespace
        .first()
        .cloned()
        .unwrap_or_else(|| "default".to_owned());
    let manager = or_exit(options.manager(client.clone()));
    let env = |name: &str| std::env::var(name).ok();
    let children = env("SHARD_CHILDREN").is_some_and(|v| v == "1");
    let took = Duration::from_millis(
        env("SHARD_RECONCILE_MS")
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(5),
    );
    let mut controller = Controller::new(
        "shard-test",
        manager.wiring(),
        Api::<ConfigMap>::namespaced(client.clone(), &namespace),
        InformerConfig::default().labels("shard-test=true"),
    );
    if let Some(workers) = env("SHARD_WORKERS").and_then(|w| w.parse().ok()) {
        controller = controller.configure(|config| config.concurrency(workers));
    }
    if children {
        controller = controller.owns(
            Api::<ConfigMap>::namespaced(client, &namespace),
            Owns::full(),
        );
    }
    if let Some(membership) = manager.wiring().shard().cloned() {
        tokio::spawn(async move {
            loop {
                let owned: usize = membership.owned().iter().map(|(_, n)| n).sum();
                println!("owned {owned}");
                let before = std::time::Instant::now();
                tokio::time::sleep(Duration::from_millis(500)).await;
                println!(
                    "late {}",
                    before.elapsed().as_micros().saturating_sub(500_000)
                );
            }
        });
    }
    let identity = std::env::var("POD_NAME").unwrap_or_default();
    let manager = manager.add_controller(
        controller,
        Stamper {
            identity,
            children,
            took,
        },
    );
    or_exit(manager.run().await);
}

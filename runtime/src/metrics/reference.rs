//! The reference of the Prometheus metrics the runtime exports, `docs/src/reference/metrics.md`,
//! rendered from the metrics as their registries gather them: every part that defines metrics is
//! built (without a cluster) and given one series per metric, then each family's name, type,
//! labels and help text become a row. The test compares the result with the committed file;
//! `KUBEFORGE_BLESS=1` rewrites it.

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{Api, Client};
    use prometheus::proto::{MetricFamily, MetricType};

    use crate::cache::Cache;
    use crate::controller::{ControllerMetrics, ReconcileResult};
    use crate::informer::InformerConfig;
    use crate::metrics::Metrics;
    use crate::queue::WorkQueue;
    use crate::retry::RetryOutcome;
    use crate::runner::{MultiRunner, Runnable};
    use crate::shard::{Membership, ShardMetrics};

    /// The file, relative to the workspace.
    const FILE: &str = "docs/src/reference/metrics.md";

    /// The label values this test makes up (the names it gives controllers, queues, runners,
    /// shard groups, the informer and the sharded kind it creates): left out of the values column, which lists the
    /// values the runtime itself writes (such as a reconcile's `result`).
    const MADE_UP: &[&str] = &["_", "", "7", "/api/v1/configmaps", "configmaps"];

    fn offline_client() -> Client {
        // Never contacted: the informer is created, not started.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        Client::try_from(config).expect("a client")
    }

    /// The manager's [`Metrics`] with every hook called once.
    fn manager(client: &Client) -> Vec<MetricFamily> {
        let metrics = Metrics::new();
        metrics.max_concurrent_reconciles("_", 1);
        metrics.reconciled("_", ReconcileResult::Error, Duration::from_millis(1));
        metrics.panicked("_");
        metrics.terminal_error("_");
        metrics.own_write_skipped("_");
        metrics.active_workers("_", 0);
        let queue = metrics.queue_metrics("_");
        queue.added();
        queue.depth(0);
        for priority in crate::queue::Priority::ALL {
            queue.priority_depth(priority, 0);
        }
        queue.aged();
        queue.queued_for(Duration::ZERO);
        queue.worked_for(Duration::ZERO);
        queue.retried();
        metrics.queue_started("_", &WorkQueue::new());
        let retry = metrics.retry_metrics("_");
        retry.pending(7, 0);
        for outcome in [
            RetryOutcome::Scheduled,
            RetryOutcome::Exhausted,
            RetryOutcome::Dropped,
        ] {
            retry.retry(outcome);
        }
        retry.lag(Duration::ZERO);
        metrics.set_leader("_", true);
        let cache = Cache::new(client.clone());
        let _informer = cache.informer(
            Api::<ConfigMap>::all(client.clone()),
            InformerConfig::default(),
        );
        // Rendering refreshes the gauges read on demand (informers, unfinished work).
        metrics.render(Some(&cache));
        metrics.registry().gather()
    }

    /// A sharded replica's metrics and the sharder's.
    fn shard(client: &Client) -> Vec<MetricFamily> {
        let membership = Membership::new("_", "_");
        membership.register(
            &Api::<ConfigMap>::all(client.clone()),
            &InformerConfig::default(),
            || 0,
        );
        let metrics = ShardMetrics::new("_");
        metrics.set_live(1);
        metrics.moved("_");
        metrics.drained(Duration::ZERO);
        metrics.gather(&membership)
    }

    #[cfg(feature = "webhooks")]
    fn webhooks() -> Vec<MetricFamily> {
        let registry = prometheus::Registry::new();
        crate::webhook::WebhookMetrics::new(&registry).touch();
        registry.gather()
    }

    #[cfg(feature = "memcached")]
    fn memcached() -> Vec<MetricFamily> {
        crate::store::MemcachedSeries::reference()
    }

    /// The `rest_client_*` series after one request, and the `process_*` series.
    fn client_and_process() -> Vec<MetricFamily> {
        crate::client::metrics::observe("GET", "_", Some(200), Duration::ZERO);
        crate::client::metrics::observe("GET", "_", None, Duration::ZERO);
        let mut families = crate::client::metrics::families();
        families.extend(crate::metrics::process::families());
        families
    }

    /// The sections of the reference: heading, what registers them, families.
    fn sections() -> Vec<(&'static str, &'static str, Vec<MetricFamily>)> {
        let client = offline_client();
        #[cfg_attr(
            not(any(feature = "webhooks", feature = "memcached", feature = "otlp")),
            allow(unused_mut, reason = "the optional sections are pushed")
        )]
        let mut sections = vec![
            (
                "Controllers, work queues, informers, retries, leader election",
                "The manager's `kubeforge::metrics::Metrics`, under controller-runtime's and \
                 client-go's names where they have one, so existing dashboards work.",
                manager(&client),
            ),
            (
                "Client and process",
                "Every request of a client `kubeforge::client::connect` built (process-wide, as \
                 client-go's), and the process itself (Linux), as Prometheus clients export them.",
                client_and_process(),
            ),
            (
                "Runners",
                "Each of the manager's runners (`runner`: `manager`, `leader-elected`, \
                 `controllers`, `crd-followed`).",
                MultiRunner::new().named("_").metrics(),
            ),
            (
                "CRD followers",
                "A controller that follows its CRD (started when the CRD is Established, \
                 stopped when it goes).",
                crate::manager::established_metric("_", "_", true),
            ),
            (
                "Sharding",
                "A replica of a sharded operator, and the sharder (the members' leader).",
                shard(&client),
            ),
            (
                "Storage migration",
                "The leader's migration of stored objects to their CRD's storage version \
                 (`Manager::storage_migration`; label `crd`: the CRD's name).",
                crate::manager::migration_reference(client.clone()),
            ),
        ];
        #[cfg(feature = "webhooks")]
        sections.push((
            "Webhooks",
            "The manager's webhook server (feature `webhooks`; label `webhook`: the path).",
            webhooks(),
        ));
        #[cfg(feature = "otlp")]
        sections.push((
            "Span export",
            "The OTLP exporter, while spans are exported (`--otlp-traces`, `kubeforge::otlp`).",
            crate::otlp::reference_families(),
        ));
        #[cfg(feature = "memcached")]
        sections.push((
            "memcached store",
            "A cache store in memcached (feature `memcached`; label `backend`: `memcached`).",
            memcached(),
        ));
        sections
    }

    fn type_name(family: &MetricFamily) -> &'static str {
        match family.get_field_type() {
            MetricType::COUNTER => "counter",
            MetricType::GAUGE => "gauge",
            MetricType::HISTOGRAM => "histogram",
            MetricType::SUMMARY => "summary",
            MetricType::UNTYPED => "untyped",
        }
    }

    /// `name` (`value`, `value`) for each label of the family's series, in the order of the first.
    fn labels(family: &MetricFamily) -> String {
        let Some(first) = family.get_metric().first() else {
            return "—".to_owned();
        };
        let labels: Vec<String> = first
            .get_label()
            .iter()
            .map(|pair| {
                let mut values: Vec<&str> = Vec::new();
                for metric in family.get_metric() {
                    for other in metric.get_label() {
                        let value = other.value();
                        if other.name() == pair.name()
                            && !MADE_UP.contains(&value)
                            && !values.contains(&value)
                        {
                            values.push(value);
                        }
                    }
                }
                if values.is_empty() {
                    format!("`{}`", pair.name())
                } else {
                    let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
                    format!("`{}` ({})", pair.name(), values.join(", "))
                }
            })
            .collect();
        if labels.is_empty() {
            "—".to_owned()
        } else {
            labels.join(", ")
        }
    }

    fn render() -> String {
        let mut out = String::from(
            "<!-- generated by runtime/src/metrics/reference.rs (cargo test -p kubeforge --lib --all-features reference); do not edit -->\n\
             # Metrics\n\n\
             The Prometheus metrics an operator serves on `/metrics` (the manager's metrics \
             address), gathered from the registries that define them. The labels column gives, \
             in parentheses, the values the runtime itself writes; the others are names \
             (controllers, queues, runners, informers' resources, shard groups and members). \
             Histograms are served as `_bucket`, `_sum` and `_count` series.\n",
        );
        for (heading, intro, mut families) in sections() {
            families.sort_by(|a, b| a.name().cmp(b.name()));
            out.push_str(&format!("\n## {heading}\n\n{intro}\n\n"));
            out.push_str("| metric | type | labels | help |\n|---|---|---|---|\n");
            for family in &families {
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} |\n",
                    family.name(),
                    type_name(family),
                    labels(family).replace('|', "\\|"),
                    family.help().replace('|', "\\|"),
                ));
            }
        }
        out
    }

    #[tokio::test]
    #[cfg_attr(
        not(all(feature = "webhooks", feature = "memcached")),
        ignore = "the reference lists the metrics of every feature: run it with --all-features"
    )]
    async fn reference_of_metrics_should_be_up_to_date() {
        let actual = render();
        let path = format!("{}/../{FILE}", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("KUBEFORGE_BLESS").is_some() {
            std::fs::write(&path, &actual).expect("write the reference");
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            expected == actual,
            "{FILE} is stale: run KUBEFORGE_BLESS=1 cargo test -p kubeforge --lib --all-features reference"
        );
    }

    /// Every metric the reference lists is served once: no name in two sections.
    #[tokio::test]
    async fn reference_should_list_each_metric_once() {
        let mut names: Vec<String> = sections()
            .into_iter()
            .flat_map(|(_, _, families)| families)
            .map(|f| f.name().to_owned())
            .collect();
        let all = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all, "{names:?}");
    }

    /// Prometheus' naming rules, which scrapers and `rate()` rely on: a name ending in `_total`
    /// is a counter, and a counter's name ends in `_total` (a gauge named `_total` reads as a
    /// counter to `rate()` and breaks when it goes down).
    #[tokio::test]
    async fn counters_and_only_counters_should_be_named_total() {
        let wrong: Vec<String> = sections()
            .into_iter()
            .flat_map(|(_, _, families)| families)
            .filter(|f| f.name().ends_with("_total") != (f.get_field_type() == MetricType::COUNTER))
            .map(|f| format!("{} ({})", f.name(), type_name(&f)))
            .collect();
        assert!(wrong.is_empty(), "misnamed: {wrong:?}");
    }
}

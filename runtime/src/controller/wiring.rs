//! What a controller is wired to: one value the manager hands each controller.

use std::sync::Arc;

use kube::{Client, Resource};

use crate::ObjectKey;
use crate::cache::Cache;
use crate::informer::InformerConfig;
use crate::leader::{Gate, fenced};
use crate::shard::Membership;
use crate::writes::{Flight, WriteTracker, Writer};

use super::ControllerMetrics;

/// Everything a controller is wired to: the shared cache, the client its reconciles write with,
/// the leadership gate, the namespace it watches and the informer options for the kinds it
/// watches. A [`Manager`](crate::manager::Manager) builds one ([`Manager::wiring`]) and hands it
/// to every controller; build one yourself with [`Wiring::new`] to run a controller without a
/// manager. Clones share the cache, the gate and the read-your-own-writes tracker.
///
/// [`Manager::wiring`]: crate::manager::Manager::wiring
#[derive(Clone)]
pub struct Wiring {
    cache: Cache,
    /// Fenced by `gate` when the wiring belongs to a manager (see [`Wiring::client`]).
    writer: Client,
    gate: Gate,
    writes: Arc<WriteTracker>,
    metrics: Option<Arc<dyn ControllerMetrics>>,
    /// The namespaces controllers declared with `#[controller]` watch (all, one, or a set:
    /// each source of a controller then has one informer per namespace).
    pub namespaces: crate::Namespaces,
    /// The informer options for every kind a controller watches unless it names its own (the
    /// default of [`Owns`](super::Owns), [`Watches`](super::Watches) and `#[controller]`).
    pub informer_defaults: InformerConfig,
    /// This replica's shard membership, when the manager shards (see [`crate::shard`]): the
    /// controllers wired from then on watch only this replica's objects.
    shard: Option<Arc<Membership>>,
}

impl std::fmt::Debug for Wiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wiring")
            .field("namespaces", &self.namespaces)
            .field("informer_defaults", &self.informer_defaults)
            .field("gate", &self.gate)
            .finish_non_exhaustive()
    }
}

impl Wiring {
    /// A fresh wiring over `client`: an empty cache, an open gate, all namespaces, default
    /// informer options, no metrics; the client's writes are not fenced.
    pub fn new(client: Client) -> Self {
        let writes = Arc::new(WriteTracker::default());
        Self {
            cache: Cache::with_hook(client.clone(), writes.clone()),
            writer: client,
            gate: Gate::open(),
            writes,
            metrics: None,
            namespaces: crate::Namespaces::all(),
            informer_defaults: InformerConfig::default(),
            shard: None,
        }
    }

    /// Like [`Wiring::new`], with every write of [`Wiring::client`] checked against the gate as
    /// it leaves (what a manager builds; the gate stays open until leader election installs its
    /// check).
    pub(crate) fn fenced(client: Client) -> Self {
        let wiring = Self::new(client);
        let writer = fenced(wiring.writer.clone(), wiring.gate.clone());
        Self {
            cache: wiring.cache.clone().with_writer(writer.clone()),
            writer,
            ..wiring
        }
    }

    /// Reports reconciles and queues of the controllers wired from now on to `metrics`.
    pub(crate) fn set_metrics(&mut self, metrics: Arc<dyn ControllerMetrics>) {
        self.metrics = Some(metrics);
    }

    /// Shards the controllers wired from now on: their primary and owned kinds' informers watch
    /// only `membership`'s objects, and their workers acknowledge drains.
    pub(crate) fn set_shard(&mut self, membership: Arc<Membership>) {
        self.shard = Some(membership);
    }

    /// This replica's shard membership, if the manager shards.
    pub fn shard(&self) -> Option<&Arc<Membership>> {
        self.shard.as_ref()
    }

    /// `config` (of a controller's primary kind), narrowed to this replica's shard when there
    /// is one.
    pub(crate) fn narrow(&self, config: InformerConfig) -> InformerConfig {
        self.narrowed(config, false)
    }

    /// `config` of an owned kind, narrowed to this replica's shard where owned objects can
    /// follow their owner's (see [`crate::shard`]).
    pub(crate) fn narrow_owned(&self, config: InformerConfig) -> InformerConfig {
        self.narrowed(config, true)
    }

    fn narrowed(&self, mut config: InformerConfig, owned: bool) -> InformerConfig {
        if let Some(membership) = &self.shard {
            let narrow: Arc<dyn crate::informer::Narrow> = Arc::clone(membership) as _;
            config.shard = crate::informer::ShardNarrowing::new(narrow, owned);
        }
        config
    }

    /// The shared informer cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The client reconciles use. In a manager's wiring its writes are fenced: while this
    /// replica's leadership is not valid, anything but a read fails with
    /// [`NotLeader`](crate::leader::NotLeader) instead of being sent.
    pub fn client(&self) -> Client {
        self.writer.clone()
    }

    /// Whether this replica may reconcile now (always, without leader election).
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The metrics hooks of the controllers wired with this value, if any.
    pub(crate) fn metrics(&self) -> Option<&Arc<dyn ControllerMetrics>> {
        self.metrics.as_ref()
    }

    pub(crate) fn writes(&self) -> &WriteTracker {
        &self.writes
    }

    /// Records that this process wrote `obj` (as returned by the apiserver): until the informer
    /// of its kind has delivered that version, controllers wait briefly before reconciling the
    /// object, so they do not act on an older cached copy of their own write (see
    /// [`ControllerConfig::read_your_writes`](super::ControllerConfig::read_your_writes)). The
    /// [`Context`](super::Context) write helpers call this for you.
    pub fn record_write<K: Resource + 'static>(&self, obj: &K) {
        self.writes.record(&self.cache, obj);
    }

    /// Like [`Wiring::record_write`], for a write the reconcile of `writer` (if known) made:
    /// its watch event is then known as that reconcile's own.
    pub(crate) fn record_write_by<K: Resource + 'static>(&self, obj: &K, writer: Option<Writer>) {
        self.writes.record_by(&self.cache, obj, writer);
    }

    /// Opens a flight to `key` before a reconcile's write to it is sent (see
    /// [`crate::writes::OwnWrites`]); drop it once the answer is recorded.
    pub(crate) fn flight(&self, key: ObjectKey) -> Flight {
        self.writes.own().flight(key)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;

    use super::*;

    fn offline_client() -> Client {
        // Never contacted: these tests only exercise the registry.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static url"));
        Client::try_from(config).expect("offline client")
    }

    fn cm(name: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("x".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn record_write_should_leave_nothing_behind_that_no_informer_will_report() {
        let client = offline_client();
        let wiring = Wiring::new(client.clone());
        // No informer of the kind: nothing will ever observe the write.
        wiring.record_write(&cm("a", "5"));
        assert_eq!(wiring.writes().pending_len(), 0);

        let informer = wiring.cache().informer(
            Api::<ConfigMap>::namespaced(client, "x"),
            InformerConfig::default(),
        );
        // The watch event raced ahead of the write's response: already in the store.
        informer.apply_for_test(cm("b", "7")).await;
        wiring.record_write(&cm("b", "7"));
        wiring.record_write(&cm("b", "6"));
        assert_eq!(wiring.writes().pending_len(), 0, "seen already");
        // Not seen yet: pending until the informer reports it.
        wiring.record_write(&cm("b", "8"));
        assert_eq!(wiring.writes().pending_len(), 1);
    }
}

//! Informers: list+watch of one kind into a [`Store`], with events fanned out to subscribers.
//!
//! An [`Informer`] runs kube's `watcher` stream (which relists after `410 Gone`, uses bookmarks,
//! and can use streaming lists), applies each change to its store and then tells every
//! subscriber. Subscribers get [`Event`]s through bounded channels; the informer never waits for
//! one: a subscriber whose channel is full gets the next events from a backlog of its own (in
//! order), so one slow controller does not stall the others sharing the informer (client-go's
//! policy). Events that had to wait are counted ([`Informer::late_events`]).
//!
//! One informer serves every controller of a manager that watches the same kind with the same
//! namespace and selectors: see [`crate::cache::Cache`].
//!
//! Before objects are cached they pass through a transform; the default strips
//! `metadata.managedFields`, which is often the largest part of an object and never needed by a
//! controller ([`InformerConfig::keep_managed_fields`] turns that off).
//!
//! # Logs
//!
//! An outage is visible at the default level, once per event rather than per retry, each line
//! with the informer's `kind` (and `namespace`, `labels`, `fields` when set): `warn`
//! `list/watch failed; retrying` when a list/watch that worked fails (`error`, `retry_in`; the
//! retries that follow at `debug`), `info` `list/watch recovered` when the apiserver answers a
//! list or watch again (`down`, `retries`), `info` `relisting` when a relist starts (`reason`,
//! e.g. `resourceVersion too old (410 Gone)`) and `relisted` when it is complete (`objects`,
//! `took`). The first list, and a watch the apiserver closes after its timeout and that resumes
//! at once, stay at `debug`.
//!
//! # Examples
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::{Api, Client};
//! use kubeforge::informer::{Informer, InformerConfig};
//!
//! # async fn doc(client: Client) {
//! let informer = Arc::new(Informer::new(
//!     Api::<ConfigMap>::namespaced(client, "shop"),
//!     InformerConfig::default().labels("app=web"),
//! ));
//! let mut events = informer.subscribe();
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(informer.clone().run(shutdown.clone()));
//! informer.wait_for_sync().await;
//! while let Some(event) = events.recv().await {
//!     println!("{:?}", event.object().metadata.name);
//! }
//! # }
//! ```

mod backoff;
mod fanout;
mod lenient;
mod managed_fields;
mod outage;
mod recent;

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::core::PartialObjectMeta;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::watcher::{self, InitialListStrategy};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::ObjectKey;
use crate::scope::{KindType, Scoped};
use crate::store::{MemoryStore, Reader, Store};

pub use backoff::WatchBackoff;
pub(crate) use fanout::Replayed;

/// Told about each change an informer applies to its store, after the store has it and before
/// subscribers hear of it (the read-your-own-writes tracker, [`crate::writes`], listens here).
pub(crate) trait ApplyHook: Send + Sync {
    /// A watch event (not a list) left `key` of kind `kind` cached at `resource_version`
    /// (`None`: deleted); `uid`: the object's, when known.
    fn applied(
        &self,
        kind: std::any::TypeId,
        key: &ObjectKey,
        resource_version: Option<&str>,
        uid: Option<&str>,
    );
    /// A complete list replaced the store of kind `kind`.
    fn relisted(&self, kind: std::any::TypeId);
}

/// A subscription's events with its [`StartupMark`](fanout::StartupMark).
pub(crate) struct Subscription<K> {
    pub(crate) events: mpsc::Receiver<Event<K>>,
    pub(crate) mark: Arc<fanout::StartupMark>,
}

/// A change the informer applied to its store.
#[derive(Debug)]
pub enum Event<K> {
    /// An object was created or changed (`old` is the previously cached version, if any).
    Applied {
        /// The previously cached version.
        old: Option<Arc<K>>,
        /// The version now cached.
        new: Arc<K>,
    },
    /// An object was deleted (its last known state).
    Deleted(Arc<K>),
    /// Periodic resync: the cached object is re-announced unchanged.
    Resync(Arc<K>),
}

impl<K> Clone for Event<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Applied { old, new } => Self::Applied {
                old: old.clone(),
                new: new.clone(),
            },
            Self::Deleted(o) => Self::Deleted(o.clone()),
            Self::Resync(o) => Self::Resync(o.clone()),
        }
    }
}

impl<K> Event<K> {
    /// Every version the event carries: the old and the new one of an update, else the object.
    pub fn versions(&self) -> impl Iterator<Item = &Arc<K>> {
        let (old, current) = match self {
            Self::Applied { old, new } => (old.as_ref(), new),
            Self::Deleted(o) | Self::Resync(o) => (None, o),
        };
        old.into_iter().chain(std::iter::once(current))
    }

    /// The object the event is about (for `Applied`, the new version).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Applied { new, .. } => new,
            Self::Deleted(o) | Self::Resync(o) => o,
        }
    }
}

/// Transforms an object before it is cached.
pub type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Options of an [`Informer`]. The namespace is that of the [`Api`] the informer is built on.
#[derive(Clone, Debug)]
pub struct InformerConfig {
    /// Label selector (`app=web,tier!=db`).
    pub label_selector: Option<String>,
    /// Field selector (`metadata.name=x`).
    pub field_selector: Option<String>,
    /// Re-announce every cached object this often (`None`: never).
    pub resync: Option<Duration>,
    /// Page size of the initial list (ignored with streaming lists).
    pub page_size: Option<u32>,
    /// Use a streaming list (watch-list) instead of paginated lists for the initial state.
    pub streaming_list: bool,
    /// Keep `metadata.managedFields` in the cache (stripped by default).
    pub keep_managed_fields: bool,
    /// Whether health checks should report ready before this informer has synced.
    pub ignore_sync_for_health: bool,
    /// Capacity of each subscriber's event channel.
    pub buffer: usize,
    /// Retry delays after a failed list or watch.
    pub backoff: WatchBackoff,
    /// Where the cache keeps the objects: `None` in memory (the default), or a
    /// [`RemoteStore`](crate::store::RemoteStore) in this backend (memcached). Honoured by
    /// [`Cache::informer`](crate::cache::Cache::informer); an informer built by hand takes its
    /// store in [`Informer::with_store`].
    pub store: Option<crate::store::StoreChoice>,
    /// Custom indexes and a transform of the cached objects ([`InformerConfig::index`],
    /// [`InformerConfig::transform`]).
    pub kind_options: KindOptions,
    /// Set by a sharded manager's wiring: the informer watches only this replica's share,
    /// by label or by hash range, as the manager decided when it started ([`crate::shard`]).
    pub shard: ShardNarrowing,
}

/// The narrowing of an informer to one replica's shard ([`crate::shard`]), resolved when the
/// informer runs (the manager decides between labels and hash ranges as it starts).
#[derive(Clone, Default)]
pub struct ShardNarrowing {
    /// The membership, and whether the informer is of an owned kind (which follows its owner's
    /// shard only where it can).
    of: Option<(Arc<dyn Narrow>, bool)>,
}

/// What an informer needs of a shard membership (implemented by
/// [`Membership`](crate::shard::Membership)).
pub(crate) trait Narrow: Send + Sync {
    /// Tells the narrowed informers of one member apart from the others (group/member).
    fn key(&self) -> String;
    /// The label selector a narrowed informer adds to its own (label mode).
    fn label_selector(&self, owned: bool) -> Option<String>;
    /// The `shardSelector` a narrowed informer lists and watches with (range mode), which
    /// changes as ranges move.
    fn shard_selector(&self, owned: bool) -> Option<watch::Receiver<String>>;
}

impl Debug for ShardNarrowing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.of {
            None => f.write_str("ShardNarrowing(none)"),
            Some((narrow, owned)) => f
                .debug_struct("ShardNarrowing")
                .field("member", &narrow.key())
                .field("owned", owned)
                .finish(),
        }
    }
}

impl ShardNarrowing {
    /// Narrowed to `membership`'s share (`owned`: an owned kind's informer).
    pub(crate) fn new(membership: Arc<dyn Narrow>, owned: bool) -> Self {
        Self {
            of: Some((membership, owned)),
        }
    }

    /// What tells narrowed informers apart in the cache (group, member, owned).
    pub(crate) fn key(&self) -> Option<String> {
        self.of
            .as_ref()
            .map(|(m, owned)| format!("{}{}", m.key(), if *owned { "/owned" } else { "" }))
    }

    fn label_selector(&self) -> Option<String> {
        self.of
            .as_ref()
            .and_then(|(m, owned)| m.label_selector(*owned))
    }

    fn shard_selector(&self) -> Option<watch::Receiver<String>> {
        self.of
            .as_ref()
            .and_then(|(m, owned)| m.shard_selector(*owned))
    }
}

/// The options of an [`InformerConfig`] that name the kind they apply to: custom indexers and
/// a transform, kept type-erased so the config stays one type for every kind. Options of two
/// different kinds in one config are a mistake the cache reports
/// ([`Cache::problems`](crate::cache::Cache::problems)) instead of ignoring.
#[derive(Clone, Default)]
pub struct KindOptions {
    /// A `PerKind<K>`, and `K`'s name.
    of: Option<(Arc<dyn std::any::Any + Send + Sync>, &'static str)>,
    /// Options given for another kind than the first.
    mismatched: Vec<String>,
}

/// The options of [`KindOptions`] for kind `K`.
struct PerKind<K> {
    indexers: Vec<(String, crate::store::Indexer<K>)>,
    transform: Option<Transform<K>>,
}

impl<K> Default for PerKind<K> {
    fn default() -> Self {
        Self {
            indexers: Vec::new(),
            transform: None,
        }
    }
}

impl<K> Clone for PerKind<K> {
    fn clone(&self) -> Self {
        Self {
            indexers: self.indexers.clone(),
            transform: self.transform.clone(),
        }
    }
}

impl Debug for KindOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindOptions")
            .field("kind", &self.of.as_ref().map(|(_, kind)| kind))
            .field("mismatched", &self.mismatched)
            .finish()
    }
}

impl KindOptions {
    /// Changes the options of kind `K` (`what` names the option, for the mismatch message).
    fn change<K: 'static>(&mut self, what: String, change: impl FnOnce(&mut PerKind<K>)) {
        let kind = std::any::type_name::<K>();
        let mut options = match &self.of {
            None => PerKind::default(),
            Some((any, first)) => match Arc::clone(any).downcast::<PerKind<K>>() {
                Ok(options) => (*options).clone(),
                Err(_) => {
                    self.mismatched
                        .push(format!("{what} of {kind} in the options of {first}"));
                    return;
                }
            },
        };
        change(&mut options);
        self.of = Some((Arc::new(options), kind));
    }

    /// The indexers and transform for kind `K`, and what was given for another kind (every
    /// option, when `K` is not the kind they name).
    fn of<K: 'static>(&self) -> (PerKind<K>, Vec<String>) {
        let mut wrong = self.mismatched.clone();
        match &self.of {
            None => (PerKind::default(), wrong),
            Some((any, first)) => match Arc::clone(any).downcast::<PerKind<K>>() {
                Ok(options) => ((*options).clone(), wrong),
                Err(_) => {
                    wrong.push(format!(
                        "the indexers and transform of {first} given to an informer of {}",
                        std::any::type_name::<K>()
                    ));
                    (PerKind::default(), wrong)
                }
            },
        }
    }
}

impl Default for InformerConfig {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            resync: None,
            page_size: Some(500),
            streaming_list: false,
            keep_managed_fields: false,
            ignore_sync_for_health: false,
            buffer: 1024,
            backoff: WatchBackoff::default(),
            store: None,
            kind_options: KindOptions::default(),
            shard: ShardNarrowing::default(),
        }
    }
}

impl InformerConfig {
    /// Adds the custom index `name` to the store of the objects of `K` (an informer of `K`
    /// shared by several sources gets every index any of them asks for):
    /// [`Reader::by_index`](crate::store::Reader::by_index) and
    /// [`Context::indexed`](crate::controller::Context::indexed) query it. In memory only: a
    /// remote store keeps no custom indexes, and the cache reports an index asked of one.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kubeforge::informer::InformerConfig;
    /// fn node_of(pod: &Pod) -> Vec<String> {
    ///     pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
    /// }
    /// let config = InformerConfig::default().index("by-node", node_of);
    /// ```
    #[must_use]
    pub fn index<K: 'static>(
        mut self,
        name: impl Into<String>,
        by: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        let name = name.into();
        let indexer: crate::store::Indexer<K> = Arc::new(by);
        self.kind_options
            .change::<K>(format!("index `{name}`"), move |options| {
                options.indexers.push((name, indexer));
            });
        self
    }

    /// Transforms each object of `K` before it is cached (drop what the operator never reads:
    /// controller-runtime's `TransformFunc`), after `managedFields` were stripped (unless kept).
    /// The first source that creates a shared informer decides its transform.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kubeforge::informer::InformerConfig;
    /// let config = InformerConfig::default().transform(|pod: &mut Pod| {
    ///     pod.metadata.annotations = None;
    /// });
    /// ```
    #[must_use]
    pub fn transform<K: 'static>(
        mut self,
        transform: impl Fn(&mut K) + Send + Sync + 'static,
    ) -> Self {
        let transform: Transform<K> = Arc::new(transform);
        self.kind_options
            .change::<K>("a transform".to_owned(), move |options| {
                options.transform = Some(transform);
            });
        self
    }

    /// Keep the objects in `backend` (a [`RemoteStore`](crate::store::RemoteStore)) instead of
    /// in memory.
    #[must_use]
    pub fn store(mut self, backend: crate::store::SharedBackend) -> Self {
        self.store = Some(crate::store::StoreChoice::Backend(backend));
        self
    }

    /// Keep the objects where `choice` says (a backend, a backend by name, a store of yours).
    #[must_use]
    pub fn store_choice(mut self, choice: crate::store::StoreChoice) -> Self {
        self.store = Some(choice);
        self
    }

    /// Keep the objects in the backend named `name` that the cache was given (`memcached`);
    /// a controller whose cache has no such backend fails at start-up, saying so.
    #[must_use]
    pub fn store_named(mut self, name: impl Into<String>) -> Self {
        self.store = Some(crate::store::StoreChoice::Named(name.into()));
        self
    }

    /// Watch only objects matching this label selector.
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Watch only objects matching this field selector.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Re-announce every cached object this often, so controllers re-reconcile everything
    /// periodically. Each resync enqueues every object: keep it long (tens of minutes) on big caches.
    #[must_use]
    pub fn resync(mut self, every: Duration) -> Self {
        self.resync = Some(every);
        self
    }

    /// List pages of this many objects during the initial list.
    #[must_use]
    pub fn page_size(mut self, size: u32) -> Self {
        self.page_size = Some(size);
        self
    }

    /// Use streaming lists (the apiserver sends the initial state as watch events, which costs
    /// it less memory than large lists). Requires a server with the WatchList feature.
    #[must_use]
    pub fn streaming_list(mut self, on: bool) -> Self {
        self.streaming_list = on;
        self
    }

    /// Keep `metadata.managedFields` in cached objects (it is stripped by default to save memory).
    #[must_use]
    pub fn keep_managed_fields(mut self, keep: bool) -> Self {
        self.keep_managed_fields = keep;
        self
    }

    /// Let readiness checks pass before this informer has synced (for very large initial lists).
    #[must_use]
    pub fn ignore_sync_for_health(mut self, ignore: bool) -> Self {
        self.ignore_sync_for_health = ignore;
        self
    }

    /// Capacity of each subscriber's channel; a full channel makes the informer wait.
    #[must_use]
    pub fn buffer(mut self, capacity: usize) -> Self {
        self.buffer = capacity.max(1);
        self
    }

    /// Retry a failed list or watch after `initial`, doubling per failure in a row up to `max`
    /// (defaults 200 ms and 5 s: after an outage the informer is back within `max`). Any event
    /// resets the delay (as does a list or watch the apiserver answers); `410 Gone` is relisted at
    /// once.
    #[must_use]
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.backoff = WatchBackoff {
            initial,
            max: max.max(initial),
        };
        self
    }

    /// The label selector the informer lists and watches with: its own, and its shard's.
    fn effective_labels(&self) -> Option<String> {
        match (self.label_selector.clone(), self.shard.label_selector()) {
            (Some(own), Some(shard)) if !own.trim().is_empty() => Some(format!("{own},{shard}")),
            (_, Some(shard)) => Some(shard),
            (own, None) => own,
        }
    }

    fn watcher_config(&self) -> watcher::Config {
        watcher::Config {
            label_selector: self.effective_labels(),
            field_selector: self.field_selector.clone(),
            page_size: self.page_size,
            bookmarks: true,
            initial_list_strategy: if self.streaming_list {
                InitialListStrategy::StreamingList
            } else {
                InitialListStrategy::ListWatch
            },
            ..watcher::Config::default()
        }
    }
}

/// Counters an informer keeps about itself.
#[derive(Debug, Default)]
pub struct InformerStats {
    /// Complete (re)lists applied, the first one included.
    pub lists: AtomicU64,
    /// Errors from the list/watch stream (each followed by a backoff and a retry).
    pub watch_errors: AtomicU64,
    /// Events applied to the store.
    pub events: AtomicU64,
    /// Objects skipped because they could not be decoded.
    pub undecodable: AtomicU64,
    /// Store operations that failed (a remote store unreachable).
    pub store_errors: AtomicU64,
}

/// An object as decoded from the apiserver: the typed object, or what is known of a bad one.
type Decoded<K> = Result<K, Box<InvalidObject>>;

/// What [`Informer::run`] carries between the events of its stream.
struct Listing<K> {
    /// The objects of the (re)list in progress.
    initial: Vec<Arc<K>>,
    /// Keys of the objects of the (re)list in progress that did not decode.
    bad: std::collections::HashSet<ObjectKey>,
    /// Whether the stream decodes leniently (switched on by the first undecodable object).
    lenient: bool,
    /// The keys of the (re)list in progress, for a store that streams lists (instead of
    /// `initial`).
    seen: std::collections::HashSet<ObjectKey>,
}

impl<K> Default for Listing<K> {
    fn default() -> Self {
        Self {
            initial: Vec::new(),
            bad: std::collections::HashSet::new(),
            lenient: false,
            seen: std::collections::HashSet::new(),
        }
    }
}

fn map_event<T, K>(
    event: watcher::Event<T>,
    f: impl Fn(T) -> Decoded<K>,
) -> watcher::Event<Decoded<K>> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Whether a list/watch error comes from an object that did not decode. In a list that is a
/// serde error. In a watch, kube tries a line that is not a valid event as a `Status` (every
/// field of which is optional), so an undecodable object arrives as an API error with code 0 —
/// the apiserver's own errors in a watch come as `WatchError` with a real code.
fn is_decode_error(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) => {
            matches!(e, kube::Error::SerdeError(_))
        }
        watcher::Error::WatchFailed(e) => match e {
            kube::Error::SerdeError(_) => true,
            kube::Error::Api(status) => status.code == 0,
            _ => false,
        },
        _ => false,
    }
}

/// Warning events about undecodable objects being published at once, at most.
const WARNINGS_IN_FLIGHT: usize = 8;

/// At most this much of an error's text goes into a log line (an error can carry a whole
/// response body: megabytes for a large list).
const EXCERPT: usize = 1024;

/// `error`'s text, cut to [`EXCERPT`] bytes (on a character boundary) with a note of the rest.
pub(crate) fn excerpt(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    let total = text.len();
    let mut cut = crate::text::truncate(text, EXCERPT);
    if cut.len() < total {
        cut.push_str(&format!("… ({} more bytes)", total - cut.len()));
    }
    cut
}

/// A list+watch of one kind feeding a [`Store`] and notifying subscribers.
pub struct Informer<K: Resource> {
    api: Api<K>,
    /// The kind's type information (its `DynamicType`, whether it is namespaced).
    ty: KindType<K>,
    /// Builds the lenient decoder's `Api` (`None`: the kind decodes any object, a
    /// `DynamicObject`, so the stream never needs one).
    lenient_api: Option<LenientApi<K>>,
    config: InformerConfig,
    store: Arc<dyn Store<K>>,
    transform: Option<Transform<K>>,
    /// The subscribers (a slow one does not hold up the others).
    fanout: fanout::Fanout<Event<K>>,
    synced: watch::Sender<bool>,
    stats: InformerStats,
    hook: Option<Arc<dyn ApplyHook>>,
    /// Undecodable objects seen, by key, with the resourceVersion last reported (each bad
    /// version is logged, counted and published once).
    undecodable: Mutex<HashMap<ObjectKey, Option<String>>>,
    /// Publishes a Warning event on each undecodable object (created on first use).
    recorder: OnceLock<Arc<crate::events::Recorder>>,
    /// The client those events are written with (default: the informer's).
    events_client: Option<kube::Client>,
    /// Bounds the events being published at once; more bad objects than that at once (a
    /// relist of thousands) are logged and counted but not all published.
    publishing: Arc<tokio::sync::Semaphore>,
    /// Late subscribers of a store without a snapshot, waiting for `run` to list their replay.
    replays: mpsc::UnboundedSender<fanout::Held<Event<K>>>,
    replays_rx: Mutex<Option<mpsc::UnboundedReceiver<fanout::Held<Event<K>>>>>,
    /// The objects that changed lately, handed last (as changes) in a late subscriber's replay.
    recent: recent::Recent,
}

impl<K: Resource> Debug for Informer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("resource_url", &self.api.resource_url())
            .field("config", &self.config)
            .field("synced", &*self.synced.borrow())
            .finish_non_exhaustive()
    }
}

/// Builds an `Api` of the lenient decoder in a namespace (or all).
type LenientApi<K> =
    fn(kube::Client, Option<&str>, &<K as Resource>::DynamicType) -> Api<lenient::Lenient<K>>;

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::Scope: Scoped,
{
    /// An informer over `api` with an in-memory store.
    pub fn new(api: Api<K>, config: InformerConfig) -> Self {
        Self::with_store(api, config, Arc::new(MemoryStore::<K>::new()))
    }

    /// An informer over `api` writing into `store` (another backend, or a [`MemoryStore`] with
    /// custom indexers).
    pub fn with_store(api: Api<K>, config: InformerConfig, store: Arc<dyn Store<K>>) -> Self {
        let ty = KindType::of();
        let lenient: LenientApi<K> = |client, namespace, ()| {
            <K::Scope as Scoped>::api::<lenient::Lenient<K>>(client, namespace)
        };
        Self::build(api, ty, Some(lenient), config, store)
    }
}

impl Informer<kube::api::DynamicObject> {
    /// An informer of a kind known only at run time (`ty`: [`KindType::dynamic`]) over `api`,
    /// with an in-memory store.
    pub fn dynamic(
        api: Api<kube::api::DynamicObject>,
        ty: KindType<kube::api::DynamicObject>,
        config: InformerConfig,
    ) -> Self {
        Self::build(api, ty, None, config, Arc::new(MemoryStore::new()))
    }
}

impl Informer<PartialObjectMeta<kube::api::DynamicObject>> {
    /// A metadata informer of a kind known as data only (`ty`: [`KindType::dynamic`]) over
    /// `api`, writing into `store`: code that serves every kind with one instance, compiled
    /// in kubeforge rather than once per kind in the operator's crate.
    pub(crate) fn dynamic_metadata(
        api: Api<PartialObjectMeta<kube::api::DynamicObject>>,
        ty: KindType<PartialObjectMeta<kube::api::DynamicObject>>,
        config: InformerConfig,
        store: Arc<dyn Store<PartialObjectMeta<kube::api::DynamicObject>>>,
    ) -> Self {
        Self::build(api, ty, None, config, store)
    }
}

impl<K> Informer<K>
where
    K: Resource<DynamicType: Clone + Debug + Send + Sync + 'static>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn build(
        api: Api<K>,
        ty: KindType<K>,
        lenient_api: Option<LenientApi<K>>,
        config: InformerConfig,
        store: Arc<dyn Store<K>>,
    ) -> Self {
        let (replays, replays_rx) = mpsc::unbounded_channel();
        let own = config.kind_options.of::<K>().0.transform;
        let transform: Option<Transform<K>> = match (config.keep_managed_fields, own) {
            (true, own) => own,
            (false, None) => Some(Arc::new(|obj: &mut K| obj.meta_mut().managed_fields = None)),
            (false, Some(own)) => Some(Arc::new(move |obj: &mut K| {
                obj.meta_mut().managed_fields = None;
                own(obj);
            })),
        };
        let informer = Self {
            api,
            ty,
            lenient_api,
            config,
            store,
            transform,
            fanout: fanout::Fanout::new(),
            synced: watch::channel(false).0,
            stats: InformerStats::default(),
            hook: None,
            undecodable: Mutex::default(),
            recorder: OnceLock::new(),
            events_client: None,
            publishing: Arc::new(tokio::sync::Semaphore::new(WARNINGS_IN_FLIGHT)),
            replays,
            replays_rx: Mutex::new(Some(replays_rx)),
            recent: recent::Recent::default(),
        };
        let config = informer.config.clone();
        for problem in informer.add_options(&config) {
            tracing::warn!(informer = %informer.api.resource_url(), %problem, "informer option ignored");
        }
        informer
    }

    /// Adds the custom indexes `config` asks for of `K` to the store (a shared informer gets
    /// those of every source); returns what could not be done: options of another kind, an
    /// index the store cannot keep. The transform is the one the informer was built with.
    pub(crate) fn add_options(&self, config: &InformerConfig) -> Vec<String> {
        let (options, mut problems) = config.kind_options.of::<K>();
        for (name, indexer) in options.indexers {
            if self.store.add_indexer(&name, indexer) == crate::store::AddIndex::Unsupported {
                problems.push(format!(
                    "index `{name}` of {}: the {} store keeps no custom indexes",
                    self.ty.kind(),
                    self.store.backend()
                ));
            }
        }
        problems
    }

    /// Writes the informer's Warning events through `client` (a manager's fenced writer, so a
    /// replica that does not lead writes nothing).
    pub(crate) fn events_through(mut self, client: kube::Client) -> Self {
        self.events_client = Some(client);
        self
    }

    /// Reports every applied change to `hook`.
    pub(crate) fn on_apply(mut self, hook: Option<Arc<dyn ApplyHook>>) -> Self {
        self.hook = hook;
        self
    }

    fn observed(&self, key: &ObjectKey, resource_version: Option<&str>, uid: Option<&str>) {
        if let Some(hook) = &self.hook {
            hook.applied(std::any::TypeId::of::<K>(), key, resource_version, uid);
        }
    }

    /// Replaces the transform applied before caching (this also replaces the default one that
    /// strips `managedFields`; strip them yourself if you still want that).
    #[must_use]
    pub fn transform(mut self, transform: Transform<K>) -> Self {
        self.transform = Some(transform);
        self
    }

    /// Puts `obj` into the store as if the watch had delivered it (unit tests of readers).
    #[cfg(test)]
    pub(crate) async fn apply_for_test(&self, obj: K) {
        let _ = self.store.apply(Arc::new(obj)).await;
    }

    /// Number of objects in the store (from memory, whatever the store).
    pub fn cached(&self) -> usize {
        self.store.len()
    }

    /// Reads the informer's store (the informer is its only writer).
    pub fn store(&self) -> Reader<K> {
        Reader::new(Arc::clone(&self.store))
    }

    /// The namespace the informer watches (`None`: all namespaces, or a cluster-scoped kind).
    pub fn namespace(&self) -> Option<&str> {
        self.api.namespace()
    }

    /// The informer's options.
    pub fn config(&self) -> &InformerConfig {
        &self.config
    }

    /// Counters about lists, errors and events.
    pub fn stats(&self) -> &InformerStats {
        &self.stats
    }

    /// A new subscription. When the informer has already synced, the subscriber first receives
    /// an `Applied` event (with `old: None`) for every cached object (from a remote store, once
    /// the running informer has listed them). A subscriber that falls behind (its channel of
    /// [`InformerConfig::buffer`] events full) gets later events from a backlog of its own: it
    /// never holds up the informer or the other subscribers.
    pub fn subscribe(&self) -> mpsc::Receiver<Event<K>> {
        self.subscription().events
    }

    /// [`Informer::subscribe`], with the mark that tells the start-up state from changes.
    pub(crate) fn subscription(&self) -> Subscription<K> {
        let (events, mark) = if *self.synced.borrow() {
            match self.store.snapshot() {
                Some(objects) => {
                    let (replay, recent) = self.replay(objects);
                    self.fanout.subscribe(self.config.buffer, replay, recent)
                }
                None => {
                    let (rx, held, mark) = self.fanout.subscribe_held(self.config.buffer);
                    let _ = self.replays.send(held);
                    (rx, mark)
                }
            }
        } else {
            self.fanout.subscribe(self.config.buffer, Vec::new(), 0)
        };
        Subscription { events, mark }
    }

    /// Events that waited in a subscriber's backlog because its channel was full.
    pub fn late_events(&self) -> u64 {
        self.fanout.late()
    }

    /// Whether the first complete list has been applied.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Waits until the first complete list has been applied.
    pub async fn wait_for_sync(&self) {
        let mut rx = self.synced.subscribe();
        // `wait_for` only fails if the sender is dropped, which cannot happen while `self` lives.
        let _ = rx.wait_for(|synced| *synced).await;
    }

    fn publish(&self, event: Event<K>) {
        if *self.synced.borrow() {
            self.recent.note(&event, std::time::Instant::now());
        }
        self.fanout.publish(&event);
    }

    /// A late subscriber's replay of `objects` (every cached object, each as created): those
    /// that changed lately come last; how many they are.
    fn replay(&self, objects: Vec<Arc<K>>) -> (Vec<Event<K>>, usize) {
        let (old, recent) = self.recent.split(objects, std::time::Instant::now());
        let changed = recent.len();
        let events = old
            .into_iter()
            .chain(recent)
            .map(|new| Event::Applied { old: None, new })
            .collect();
        (events, changed)
    }

    fn prepare(&self, mut obj: K) -> Arc<K> {
        if let Some(transform) = &self.transform {
            transform(&mut obj);
        }
        shrink_metadata(obj.meta_mut());
        Arc::new(obj)
    }

    /// Runs the list+watch until `shutdown` is cancelled. Errors of the stream are logged and
    /// retried with backoff; they never end the informer.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let url = self.api.resource_url().to_owned();
        let (answers, mut answered) = watch::channel(0_u64);
        let mut ranges = self.config.shard.shard_selector();
        let client = answering(
            self.api.clone().into_client(),
            answers,
            self.config.keep_managed_fields,
            ranges.clone(),
        );
        let mut listing = Listing::default();
        let mut stream = self.stream(&client, listing.lenient);
        let mut resync = self.config.resync.map(|every| {
            let mut interval = tokio::time::interval(every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval
        });
        let mut watching = Watching::new(&self.ty.kind(), self.api.namespace(), &self.config);
        let mut replays = self
            .replays_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let mut waiting = Vec::new();
        loop {
            let tick = async {
                match resync.as_mut() {
                    Some(interval) => {
                        interval.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let replay = async {
                match replays.as_mut() {
                    Some(rx) if waiting.is_empty() => rx.recv().await,
                    // A failed replay list is tried again a second later.
                    Some(_) => {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        None
                    }
                    None => std::future::pending().await,
                }
            };
            let item = tokio::select! {
                () = shutdown.cancelled() => break,
                () = tick => {
                    self.resync().await;
                    continue;
                }
                held = replay => {
                    waiting.extend(held);
                    self.replay_to(&mut waiting).await;
                    continue;
                }
                // The informer's client saw a list or watch answered (a watch resumed says
                // nothing else until its first event).
                Ok(()) = answered.changed() => {
                    watching.answered();
                    continue;
                }
                // This replica's hash ranges changed: list again with the new ones (objects
                // no longer in them leave the store as deletions).
                Some(()) = changed(ranges.as_mut()) => {
                    watching.relist_because("the shard's hash ranges changed");
                    stream = self.stream(&client, listing.lenient);
                    continue;
                }
                item = stream.next() => item,
            };
            let error = match item {
                None => break,
                Some(Ok(event)) => {
                    let done = matches!(event, watcher::Event::InitDone);
                    watching.event(&event);
                    self.handle(event, &mut listing).await;
                    if done {
                        watching.listed(self.store.len());
                    }
                    continue;
                }
                Some(Err(error)) => error,
            };
            // The answers so far came before this failure.
            answered.borrow_and_update();
            self.stats.watch_errors.fetch_add(1, Ordering::Relaxed);
            if !listing.lenient && is_decode_error(&error) {
                // One object of this kind does not fit `K`. Decoding leniently costs a little
                // more per object, so it is only switched on once needed: the lenient stream
                // relists once, and from then on bad objects are logged and skipped without
                // disturbing the watch.
                tracing::warn!(%url, error = %excerpt(&outage::with_cause(&error)), "an object could not be decoded; switching to lenient decoding (bad objects are skipped)");
                listing.lenient = true;
                watching.relist_because("an object did not decode: switching to lenient decoding");
                stream = self.stream(&client, listing.lenient);
                continue;
            }
            let delay = watching.failed(&error);
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Announces every cached object again (the resync period elapsed).
    async fn resync(&self) {
        if self.has_synced()
            && let Some(objects) = self.stored(self.store.list(), "list for a resync").await
        {
            for obj in objects {
                self.publish(Event::Resync(obj));
            }
        }
    }

    /// The result of a store operation; a failure is logged and counted (`None`).
    async fn stored<T>(
        &self,
        operation: crate::store::StoreFuture<'_, T>,
        what: &str,
    ) -> Option<T> {
        match operation.await {
            Ok(value) => Some(value),
            Err(error) => {
                self.stats.store_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(url = %self.api.resource_url(), %error, what, "cache store operation failed");
                None
            }
        }
    }

    /// Lists the replay of late subscribers (of a store without a snapshot); those whose list
    /// failed stay in `waiting` for the next attempt.
    async fn replay_to(&self, waiting: &mut Vec<fanout::Held<Event<K>>>) {
        if waiting.is_empty() {
            return;
        }
        let Some(objects) = self
            .stored(self.store.list(), "list for a late subscriber")
            .await
        else {
            return;
        };
        for held in waiting.drain(..) {
            let (replay, recent) = self.replay(objects.clone());
            self.fanout.release(held, replay, recent);
        }
    }

    /// Applies one event of the stream: a (re)list is gathered in `listing` and applied as a
    /// whole; changes are applied to the store, reported to the hook, then published.
    async fn handle(&self, event: watcher::Event<Decoded<K>>, listing: &mut Listing<K>) {
        match event {
            watcher::Event::Init => {
                listing.initial.clear();
                listing.bad.clear();
                listing.seen.clear();
            }
            watcher::Event::InitApply(Ok(obj)) => {
                let obj = self.prepare(obj);
                self.list_item(obj, listing).await;
            }
            watcher::Event::InitApply(Err(invalid)) => {
                listing.bad.insert(invalid_key(&invalid));
                // Keep the last good copy (announced only when the object is being deleted,
                // with its current metadata, so a finalizer can still be released).
                if let Some(kept) = self.undecodable(&invalid).await {
                    self.list_item(kept, listing).await;
                }
            }
            watcher::Event::InitDone => self.listed(listing).await,
            watcher::Event::Apply(Err(invalid)) => self.applied_undecodable(&invalid).await,
            watcher::Event::Apply(Ok(obj)) => {
                if listing.lenient {
                    // Fixed objects are reported again if they break again.
                    self.lock_undecodable().remove(&ObjectKey::of(&obj));
                }
                let new = self.prepare(obj);
                let old = self
                    .stored(self.store.apply(Arc::clone(&new)), "apply")
                    .await
                    .flatten();
                self.observed(
                    &ObjectKey::of(new.as_ref()),
                    new.meta().resource_version.as_deref(),
                    new.meta().uid.as_deref(),
                );
                self.stats.events.fetch_add(1, Ordering::Relaxed);
                self.publish(Event::Applied { old, new });
            }
            watcher::Event::Delete(obj) => self.deleted(obj).await,
        }
    }

    /// A complete (re)list arrived: replace the store with it.
    async fn listed(&self, listing: &mut Listing<K>) {
        if listing.lenient {
            // Bad objects fixed or deleted while the watch was down.
            self.lock_undecodable()
                .retain(|k, _| listing.bad.contains(k));
        }
        if self.store.streams_lists() {
            let seen = std::mem::take(&mut listing.seen);
            self.remove_unlisted(&seen).await;
        } else {
            let listed = std::mem::take(&mut listing.initial);
            self.apply_list(listed).await;
        }
        if let Some(hook) = &self.hook {
            hook.relisted(std::any::TypeId::of::<K>());
        }
        self.stats.lists.fetch_add(1, Ordering::Relaxed);
        self.fanout.mark_initial();
        self.synced.send_replace(true);
        // The list's buffers are free now: give them back once the lists have settled.
        crate::memory::listed();
    }

    /// One object of a (re)list: gathered, or for a store that streams lists applied at once
    /// (and announced if it changed).
    async fn list_item(&self, obj: Arc<K>, listing: &mut Listing<K>) {
        if !self.store.streams_lists() {
            listing.initial.push(obj);
            return;
        }
        let key = ObjectKey::of(obj.as_ref());
        let cached = self.store.resource_version(&key);
        listing.seen.insert(key);
        if cached.is_some() && cached == obj.meta().resource_version {
            return; // unchanged
        }
        let old = self
            .stored(self.store.apply(Arc::clone(&obj)), "apply")
            .await
            .flatten();
        self.stats.events.fetch_add(1, Ordering::Relaxed);
        self.publish(Event::Applied { old, new: obj });
    }

    /// The end of a streamed (re)list: removes (and announces) the objects it did not list.
    async fn remove_unlisted(&self, seen: &std::collections::HashSet<ObjectKey>) {
        for key in self.store.keys() {
            if seen.contains(&key) {
                continue;
            }
            let gone = self
                .stored(self.store.delete(&key), "delete")
                .await
                .flatten();
            self.stats.events.fetch_add(1, Ordering::Relaxed);
            match gone {
                Some(gone) => self.publish(Event::Deleted(gone)),
                None => {
                    tracing::warn!(url = %self.api.resource_url(), %key, "an object removed by a relist had lost its cache entry: its Deleted event is not published");
                }
            }
        }
    }

    /// A watch event carried an object that does not decode as `K`.
    async fn applied_undecodable(&self, invalid: &InvalidObject) {
        let key = invalid_key(invalid);
        self.stats.events.fetch_add(1, Ordering::Relaxed);
        let kept = self.undecodable(invalid).await;
        // Store first, then the tracker (as for every event).
        let announce = match kept.filter(|k| k.meta().deletion_timestamp.is_some()) {
            Some(new) => {
                let old = self
                    .stored(self.store.apply(Arc::clone(&new)), "apply")
                    .await
                    .flatten();
                Some((old, new))
            }
            None => None,
        };
        self.observed(
            &key,
            invalid.metadata.resource_version.as_deref(),
            invalid.metadata.uid.as_deref(),
        );
        if let Some((old, new)) = announce {
            self.publish(Event::Applied { old, new });
        }
    }

    /// An object was deleted.
    async fn deleted(&self, obj: Decoded<K>) {
        let key = match &obj {
            Ok(obj) => ObjectKey::of(obj),
            Err(invalid) => invalid_key(invalid),
        };
        self.lock_undecodable().remove(&key);
        let cached = self
            .stored(self.store.delete(&key), "delete")
            .await
            .flatten();
        self.observed(&key, None, None);
        self.stats.events.fetch_add(1, Ordering::Relaxed);
        // The last state the watch sent, or else the last one we could decode.
        let gone = obj.ok().map(|o| self.prepare(o)).or(cached);
        if let Some(gone) = gone {
            self.publish(Event::Deleted(gone));
        }
    }

    /// The list/watch stream, decoding each object as `K` (fails on the first object that does
    /// not decode) or leniently (a bad object becomes an `InvalidObject` with its metadata).
    /// The requests go through `client` (the informer's, reporting its answers).
    fn stream(
        &self,
        client: &kube::Client,
        lenient: bool,
    ) -> BoxStream<'static, watcher::Result<watcher::Event<Decoded<K>>>> {
        let config = self.config.watcher_config();
        let namespace = self.api.namespace();
        if lenient && let Some(lenient_api) = self.lenient_api {
            let api = lenient_api(client.clone(), namespace, self.ty.dynamic_type());
            watcher::watcher(api, config)
                .map_ok(|event| map_event(event, |guard| guard.0.map_err(Box::new)))
                .boxed()
        } else {
            let api = self.ty.api(client.clone(), namespace);
            watcher::watcher(api, config)
                .map_ok(|event| map_event(event, Ok))
                .boxed()
        }
    }

    fn lock_undecodable(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Option<String>>> {
        self.undecodable.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Handles an object that does not decode as `K`: each bad version is logged once with its
    /// namespace, name and error, counted, and published as a Warning event on the object. Returns
    /// the copy to keep caching: the last good copy of the same object (same UID), with the bad
    /// object's metadata if it is being deleted (its finalizers, deletion timestamp and
    /// resourceVersion are all a controller needs to run cleanup and release it), else unchanged.
    async fn undecodable(&self, invalid: &InvalidObject) -> Option<Arc<K>> {
        let key = invalid_key(invalid);
        let version = invalid.metadata.resource_version.clone();
        let first = self.lock_undecodable().insert(key.clone(), version.clone()) != Some(version);
        if first {
            self.stats.undecodable.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                url = %self.api.resource_url(),
                namespace = key.namespace.as_deref().unwrap_or(""),
                name = %key.name,
                resource_version = invalid.metadata.resource_version.as_deref().unwrap_or(""),
                error = %excerpt(&invalid.error),
                "skipping an object that does not decode"
            );
            self.warn_on(invalid);
        }
        let cached = self.stored(self.store.get(&key), "get").await.flatten()?;
        if cached.meta().uid != invalid.metadata.uid {
            return None;
        }
        if invalid.metadata.deletion_timestamp.is_none() {
            return Some(cached);
        }
        let mut kept = (*cached).clone();
        *kept.meta_mut() = invalid.metadata.clone();
        Some(self.prepare(kept))
    }

    /// Publishes a Warning event `Undecodable` on a bad object (best effort, in the background).
    fn warn_on(&self, invalid: &InvalidObject) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Ok(permit) = Arc::clone(&self.publishing).try_acquire_owned() else {
            tracing::debug!(
                "too many undecodable-object events in flight; not publishing this one"
            );
            return;
        };
        let recorder = Arc::clone(self.recorder.get_or_init(|| {
            let client = self
                .events_client
                .clone()
                .unwrap_or_else(|| self.api.clone().into_client());
            Arc::new(crate::events::Recorder::new(client, "kubeforge-informer"))
        }));
        let object = PartialObjectMeta::<K> {
            types: Some(kube::core::TypeMeta {
                api_version: self.ty.api_version().into_owned(),
                kind: self.ty.kind().into_owned(),
            }),
            metadata: invalid.metadata.clone(),
            _phantom: std::marker::PhantomData,
        };
        let regarding = object.object_ref(self.ty.dynamic_type());
        let note = format!(
            "this operator cannot decode the object and skips it until it is fixed: {}",
            excerpt(&invalid.error)
        );
        crate::task::spawn_on(&runtime, async move {
            let _permit = permit;
            if let Err(error) = recorder
                .publish_ref(
                    regarding,
                    crate::events::EventType::Warning,
                    "Undecodable",
                    "Decode",
                    Some(note),
                )
                .await
            {
                tracing::debug!(error = %crate::client::readable(&error), "publishing the undecodable-object event failed");
            }
        });
    }

    /// Replaces the store with a complete list and announces the differences.
    async fn apply_list(&self, listed: Vec<Arc<K>>) {
        let mut changes = Vec::new();
        for new in &listed {
            let key = ObjectKey::of(new.as_ref());
            let cached = self.store.resource_version(&key);
            if cached.is_some() && cached == new.meta().resource_version {
                continue; // unchanged
            }
            let old = match cached {
                Some(_) => self.stored(self.store.get(&key), "get").await.flatten(),
                None => None,
            };
            changes.push(Event::Applied {
                old,
                new: Arc::clone(new),
            });
        }
        let removed = self
            .stored(self.store.replace(listed), "replace")
            .await
            .unwrap_or_default();
        self.stats
            .events
            .fetch_add((changes.len() + removed.len()) as u64, Ordering::Relaxed);
        for event in changes {
            self.publish(event);
        }
        for gone in removed {
            self.publish(Event::Deleted(gone));
        }
    }
}

/// The retry delays and the outage lifecycle of [`Informer::run`] (see [`outage`]).
struct Watching {
    backoff: backoff::Backoff,
    lifecycle: outage::Lifecycle,
    subject: outage::Subject,
}

impl Watching {
    /// For an informer of `K` in `namespace` (`None`: all namespaces, or a cluster-scoped kind).
    fn new(kind: &str, namespace: Option<&str>, config: &InformerConfig) -> Self {
        Self {
            backoff: backoff::Backoff::new(config.backoff),
            lifecycle: outage::Lifecycle::default(),
            subject: outage::Subject {
                kind: kind.to_owned(),
                namespace: namespace.map(str::to_owned),
                labels: config.effective_labels(),
                fields: config.field_selector.clone(),
            },
        }
    }

    /// The apiserver answered: an outage is over, the retry delay starts again from the
    /// shortest.
    fn answered(&mut self) {
        if let Some(recovered) = self.lifecycle.answered(tokio::time::Instant::now()) {
            self.subject.report(&recovered, 0);
        }
        self.backoff.succeeded();
    }

    /// An event of the stream. `Init` is no answer: kube sends it before listing.
    fn event<T>(&mut self, event: &watcher::Event<T>) {
        if matches!(event, watcher::Event::Init) {
            if let Some(relisting) = self.lifecycle.list_started(tokio::time::Instant::now()) {
                self.subject.report(&relisting, 0);
            }
        } else {
            self.answered();
        }
    }

    /// A (re)list is complete; the store holds `objects`.
    fn listed(&mut self, objects: usize) {
        let done = self.lifecycle.list_done(tokio::time::Instant::now());
        self.subject.report(&done, objects);
    }

    fn relist_because(&mut self, reason: &str) {
        self.lifecycle.relist_because(reason.to_owned());
    }

    /// The stream failed with `error`: logs it (once per outage above `debug`) and returns the
    /// delay before the next attempt.
    fn failed(&mut self, error: &watcher::Error) -> Duration {
        let delay = self.backoff.failed(error);
        let now = tokio::time::Instant::now();
        if backoff::is_gone(error) {
            tracing::debug!(kind = %self.subject.kind, error = %excerpt(&outage::with_cause(error)), "410 Gone; relisting");
            if let Some(recovered) = self.lifecycle.gone(now) {
                self.subject.report(&recovered, 0);
            }
        } else {
            let error = excerpt(&outage::with_cause(error));
            let failed = self.lifecycle.failed(&error, now);
            self.subject.failure(&failed, &error, delay);
        }
        delay
    }
}

/// `client`, reporting each successful response to `answered` (a list page, a watch the
/// apiserver accepted): how the informer knows that a watch resumed after a failure, which
/// kube's watcher only shows with the watch's first event.
///
/// Unless `keep_managed_fields`, the responses' objects lose their `managedFields` before they
/// are decoded (see `managed_fields.rs`).
fn answering(
    client: kube::Client,
    answered: watch::Sender<u64>,
    keep_managed_fields: bool,
    ranges: Option<watch::Receiver<String>>,
) -> kube::Client {
    let default_namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let client = client.clone();
        let answered = answered.clone();
        if let Some(ranges) = &ranges {
            let selector = ranges.borrow().clone();
            if let Err(error) = with_shard_selector(&mut request, &selector) {
                tracing::warn!(%error, "could not add the shard selector to a request");
            }
        }
        async move {
            let response = client.send(request).await?;
            let success = response.status().is_success();
            if success {
                answered.send_modify(|n| *n = n.wrapping_add(1));
            }
            // Only successful answers are objects (an error's body is passed on as it came).
            let filter = success && !keep_managed_fields;
            Ok::<_, kube::Error>(response.map(|body| managed_fields::Filtered::new(body, filter)))
        }
    });
    kube::Client::new(service, default_namespace)
}

/// Waits for the next change of `ranges` (`None`: never; a closed channel: never again).
async fn changed(ranges: Option<&mut watch::Receiver<String>>) -> Option<()> {
    match ranges {
        Some(rx) => rx.changed().await.ok(),
        None => std::future::pending().await,
    }
}

/// Adds `shardSelector=<selector>` to the query of a list or watch request.
fn with_shard_selector(
    request: &mut http::Request<kube::client::Body>,
    selector: &str,
) -> Result<(), http::Error> {
    let uri = request.uri();
    let path = uri.path();
    let query = match uri.query() {
        Some(query) => format!(
            "{query}&shardSelector={}",
            crate::text::query_escape(selector)
        ),
        None => format!("shardSelector={}", crate::text::query_escape(selector)),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(format!("{path}?{query}").parse()?);
    *request.uri_mut() = http::Uri::from_parts(parts)?;
    Ok(())
}

/// The key of an object that did not decode (from its metadata).
fn invalid_key(invalid: &InvalidObject) -> ObjectKey {
    ObjectKey {
        namespace: invalid.metadata.namespace.clone(),
        name: invalid.metadata.name.clone().unwrap_or_default(),
    }
}

/// Drops the spare capacity of the metadata lists a decoded object carries into the cache: serde
/// grows a `Vec` from empty to four slots on its first element, so a single owner reference
/// (104 bytes) would keep 416 bytes for as long as the object is cached.
fn shrink_metadata(meta: &mut kube::api::ObjectMeta) {
    if let Some(finalizers) = &mut meta.finalizers {
        finalizers.shrink_to_fit();
    }
    if let Some(owners) = &mut meta.owner_references {
        owners.shrink_to_fit();
    }
    if let Some(managed) = &mut meta.managed_fields {
        managed.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    #[test]
    fn logged_errors_should_be_cut_to_an_excerpt() {
        let huge = "é".repeat(600_000); // a response body of 1.2 MB
        let logged = excerpt(&huge);
        assert!(logged.len() < EXCERPT + 40, "{} bytes", logged.len());
        assert!(
            logged.ends_with("more bytes)"),
            "{}",
            &logged[logged.len() - 30..]
        );
        assert_eq!(excerpt(&"short"), "short");
    }

    #[test]
    fn decode_errors_should_be_recognised_in_lists_and_watch_events() {
        let serde = || kube::Error::SerdeError(serde_json::from_str::<u8>("x").unwrap_err());
        assert!(is_decode_error(&watcher::Error::InitialListFailed(serde())));
        // kube turns an undecodable watch line into a `Status` with code 0.
        let code_zero = kube::Error::Api(Box::new(kube::core::Status::failure("", "")));
        assert!(is_decode_error(&watcher::Error::WatchFailed(code_zero)));
        let gone = kube::Error::Api(Box::new(kube::core::Status::failure("", "").with_code(410)));
        assert!(!is_decode_error(&watcher::Error::WatchFailed(gone)));
    }

    #[test]
    fn a_relist_failing_again_and_again_should_back_off() {
        // kube sends `Init` before each attempt to list: it is no answer of the apiserver.
        let mut watching = Watching::new("ConfigMap", Some("shop"), &InformerConfig::default());
        let refused =
            watcher::Error::InitialListFailed(kube::Error::Service("connection refused".into()));
        let mut delays = Vec::new();
        for _ in 0..7 {
            watching.event(&watcher::Event::<ConfigMap>::Init);
            delays.push(watching.failed(&refused));
        }
        assert!(delays[6] >= Duration::from_secs(4), "{delays:?}");
        // A page of the list is an answer.
        watching.event(&watcher::Event::InitApply(ConfigMap::default()));
        assert!(watching.failed(&refused) < Duration::from_millis(300));
    }

    #[test]
    fn cached_objects_should_not_keep_spare_list_capacity() {
        // Decoded from text as the watcher does (no length hints): one owner reference and one
        // finalizer, in lists grown from empty.
        let obj: ConfigMap = serde_json::from_str(
            r#"{"metadata": {"name": "a", "finalizers": ["x"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]}}"#,
        )
        .expect("decodes");
        let mut meta = obj.metadata;
        assert!(meta.owner_references.as_ref().expect("set").capacity() > 1);
        shrink_metadata(&mut meta);
        assert_eq!(meta.owner_references.expect("kept").capacity(), 1);
        assert_eq!(meta.finalizers.expect("kept").capacity(), 1);
    }
}

//! [`RemoteStore`]: a kind's objects kept in a [`Backend`] (memcached) as JSON, with a small
//! in-memory index.

use kubeforge_shared::hash::{FNV_OFFSET, fnv1a, fnv1a_from};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Resource;
use kube::core::Selector;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::index::KeyIndex;
use super::{MAX_KEY_LEN, SharedBackend, Store, StoreError, StoreFuture};
use crate::{BoxError, ObjectKey};

/// Reads one object from the apiserver (`None`: it does not exist): how a store refills an
/// entry the backend lost (a memcached restart, an eviction).
pub type Refill<K> =
    Arc<dyn Fn(ObjectKey) -> BoxFuture<'static, Result<Option<K>, kube::Error>> + Send + Sync>;

/// A [`Store`] whose objects live in a [`Backend`](super::Backend), serialized as JSON under keys
/// made of the backend's shard key, the informer's identity (kind, URL and selectors) and the
/// object's namespace and name; so operators or replicas with different shard keys, and
/// informers of one kind with different selectors, never see each other's entries.
///
/// # What stays in memory
///
/// Per object, its key, `resourceVersion`, labels and owners' UIDs, with namespaces, labels and
/// UIDs interned: about 100 bytes plus the name and version (the object's metadata in a
/// [`MemoryStore`](super::MemoryStore) costs about 1.5 KiB). That answers
/// [`Store::resource_version`] and [`Store::len`] without I/O and finds the keys of
/// `list_selected` and `owned_by` (by scanning the keys: there are no posting lists), whose bodies
/// are then read from the backend in pages. Custom indexers are not supported
/// ([`Store::by_index`] finds nothing).
///
/// # Lost entries
///
/// A read that misses a key the index holds (the backend restarted empty, or evicted it), or
/// finds a body of another `resourceVersion` (a write that failed), refills the entry from the
/// apiserver and writes it back: a lost entry is never taken for a deleted object. A read that
/// overlaps a write of the same object (the index already has the new version, the backend not
/// yet) waits for that write, up to a second, and reads again before it refills. A relist that
/// removes an object whose body is lost cannot publish its `Deleted` event (there is no object to
/// publish); it is logged.
pub struct RemoteStore<K: Resource> {
    inner: Arc<Inner<K>>,
}

struct Inner<K: Resource> {
    backend: SharedBackend,
    /// `<shard key>:<informer id>:`.
    prefix: String,
    index: KeyIndex,
    refill: Refill<K>,
    refills: AtomicU64,
    /// Objects being written (index updated, backend not yet), with the number of writes.
    writing: Mutex<HashMap<ObjectKey, usize>>,
    /// Woken when a write finishes.
    written: tokio::sync::Notify,
}

/// How long a read that found a body older than the index waits for the write in flight.
const WRITE_WAIT: Duration = Duration::from_secs(1);

/// A write of one object in flight; finished when dropped.
struct Writing<'a, K: Resource> {
    inner: &'a Inner<K>,
    key: ObjectKey,
}

impl<K: Resource> Drop for Writing<'_, K> {
    fn drop(&mut self) {
        let mut writing = self.inner.writing.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = writing.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                writing.remove(&self.key);
            }
        }
        drop(writing);
        self.inner.written.notify_waiters();
    }
}

impl<K: Resource> Debug for RemoteStore<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("backend", &self.inner.backend.name())
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

impl<K> RemoteStore<K>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// A store of the objects an informer identified by `informer` (its URL and selectors)
    /// watches, in `backend`, refilling lost entries with `refill`. Starts the key sync (see
    /// [`Backend::key_sync_interval`](super::Backend::key_sync_interval)) if called within a
    /// Tokio runtime.
    pub fn new(backend: SharedBackend, informer: &str, refill: Refill<K>) -> Self {
        let prefix = key_prefix(backend.shard_key(), informer);
        let inner = Arc::new(Inner {
            backend,
            prefix,
            index: KeyIndex::default(),
            refill,
            refills: AtomicU64::new(0),
            writing: Mutex::new(HashMap::new()),
            written: tokio::sync::Notify::new(),
        });
        if let (Some(every), Ok(runtime)) = (
            inner.backend.key_sync_interval(),
            tokio::runtime::Handle::try_current(),
        ) {
            crate::task::spawn_on(&runtime, sync_keys(Arc::downgrade(&inner), every));
        }
        Self { inner }
    }
}

impl<K> Inner<K>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn key(&self, key: &ObjectKey) -> String {
        backend_key(&self.prefix, key)
    }

    fn error(&self, what: impl Into<String>, source: impl Into<BoxError>) -> StoreError {
        StoreError::new(self.backend.name(), what, source)
    }

    /// The bodies of `keys` that the index holds, in pages; lost or stale entries refilled.
    async fn read(&self, keys: Vec<ObjectKey>) -> Result<Vec<Arc<K>>, StoreError> {
        let mut objects = Vec::with_capacity(keys.len());
        for page in keys.chunks(self.backend.page_size().max(1)) {
            let names: Vec<String> = page.iter().map(|k| self.key(k)).collect();
            let bodies = self.backend.get_many(&names).await?;
            for (key, body) in page.iter().zip(bodies) {
                if let Some(obj) = self.decoded(key, body).await? {
                    objects.push(obj);
                }
            }
        }
        Ok(objects)
    }

    /// `body` as the object the index knows under `key`, or the object refilled from the
    /// apiserver if the body is missing, undecodable or of another version.
    async fn decoded(
        &self,
        key: &ObjectKey,
        body: Option<Vec<u8>>,
    ) -> Result<Option<Arc<K>>, StoreError> {
        let Some(known) = self.index.resource_version(key) else {
            return Ok(None); // removed meanwhile
        };
        if let Some(obj) = Self::of_version(body, &known) {
            return Ok(Some(obj));
        }
        // The body is older than the index when a write of it is in flight (its body is what the
        // index knows once it lands) or when an event landed between reading the body and the
        // index: wait for the write, if any, and read the body once more before refilling.
        self.wait_written(key).await;
        let Some(known) = self.index.resource_version(key) else {
            return Ok(None); // removed meanwhile
        };
        let body = self
            .backend
            .get_many(&[self.key(key)])
            .await?
            .pop()
            .flatten();
        if let Some(obj) = Self::of_version(body, &known) {
            return Ok(Some(obj));
        }
        self.refilled(key).await
    }

    /// `body` decoded, if it is of `resourceVersion` `version`.
    fn of_version(body: Option<Vec<u8>>, version: &str) -> Option<Arc<K>> {
        let obj = serde_json::from_slice::<K>(&body?).ok()?;
        (obj.meta().resource_version.as_deref() == Some(version)).then(|| Arc::new(obj))
    }

    /// Marks a write of `key` in flight until the returned guard drops.
    fn writing(&self, key: &ObjectKey) -> Writing<'_, K> {
        *self
            .writing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default() += 1;
        Writing {
            inner: self,
            key: key.clone(),
        }
    }

    /// Waits (up to [`WRITE_WAIT`]) until no write of `key` is in flight.
    async fn wait_written(&self, key: &ObjectKey) {
        let in_flight = || {
            self.writing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(key)
        };
        if !in_flight() {
            return;
        }
        let wait = async {
            loop {
                let written = self.written.notified();
                tokio::pin!(written);
                written.as_mut().enable();
                if !in_flight() {
                    return;
                }
                written.await;
            }
        };
        let _ = tokio::time::timeout(WRITE_WAIT, wait).await;
    }

    async fn refilled(&self, key: &ObjectKey) -> Result<Option<Arc<K>>, StoreError> {
        self.refills.fetch_add(1, Ordering::Relaxed);
        let fresh = (self.refill)(key.clone())
            .await
            .map_err(|e| self.error(format!("refill {key} from the apiserver"), e))?;
        let Some(obj) = fresh else {
            return Ok(None); // gone: its watch event will remove it from the index
        };
        tracing::debug!(backend = self.backend.name(), %key, "refilled a lost cache entry from the apiserver");
        let obj = Arc::new(obj);
        // Best effort: the next read refills again if this write fails.
        if let Ok(body) = serde_json::to_vec(obj.as_ref()) {
            let _ = self.backend.set_many(&[(self.key(key), body)]).await;
        }
        Ok(Some(obj))
    }

    /// The current body of an object the index held before a write (`None` if lost).
    async fn previous(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let body = self
            .backend
            .get_many(&[self.key(key)])
            .await
            .ok()?
            .pop()
            .flatten()?;
        serde_json::from_slice::<K>(&body).ok().map(Arc::new)
    }

    fn encode(&self, obj: &K) -> Result<Vec<u8>, StoreError> {
        serde_json::to_vec(obj).map_err(|e| self.error("encode an object as JSON", e))
    }
}

impl<K> Store<K> for RemoteStore<K>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn get<'a>(&'a self, key: &'a ObjectKey) -> StoreFuture<'a, Option<Arc<K>>> {
        Box::pin(async move {
            if self.inner.index.resource_version(key).is_none() {
                return Ok(None);
            }
            let mut bodies = self.inner.backend.get_many(&[self.inner.key(key)]).await?;
            self.inner.decoded(key, bodies.pop().flatten()).await
        })
    }

    fn resource_version(&self, key: &ObjectKey) -> Option<String> {
        self.inner.index.resource_version(key)
    }

    fn len(&self) -> usize {
        self.inner.index.len()
    }

    fn list(&self) -> StoreFuture<'_, Vec<Arc<K>>> {
        Box::pin(async move {
            if self.inner.backend.key_sync_interval().is_none() {
                return Err(self.inner.error(
                    "list every object",
                    "list support is disabled (key sync interval 0)",
                ));
            }
            let keys = self.inner.index.keys();
            self.inner.read(keys).await
        })
    }

    fn list_selected<'a>(
        &'a self,
        namespace: Option<&'a str>,
        selector: &'a Selector,
    ) -> StoreFuture<'a, Vec<Arc<K>>> {
        Box::pin(async move {
            let keys = self.inner.index.selected(namespace, selector);
            self.inner.read(keys).await
        })
    }

    fn owned_by<'a>(&'a self, owner_uid: &'a str) -> StoreFuture<'a, Vec<Arc<K>>> {
        Box::pin(async move {
            let keys = self.inner.index.owned_by(owner_uid);
            self.inner.read(keys).await
        })
    }

    fn by_index<'a>(&'a self, _index: &'a str, _value: &'a str) -> StoreFuture<'a, Vec<Arc<K>>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    fn apply(&self, obj: Arc<K>) -> StoreFuture<'_, Option<Arc<K>>> {
        Box::pin(async move {
            let key = ObjectKey::of(obj.as_ref());
            let body = self.inner.encode(&obj)?;
            let _writing = self.inner.writing(&key);
            let known = self.inner.index.apply(obj.meta());
            let old = if known {
                self.inner.previous(&key).await
            } else {
                None
            };
            self.inner
                .backend
                .set_many(&[(self.inner.key(&key), body)])
                .await?;
            Ok(old)
        })
    }

    fn delete<'a>(&'a self, key: &'a ObjectKey) -> StoreFuture<'a, Option<Arc<K>>> {
        Box::pin(async move {
            if !self.inner.index.delete(key) {
                return Ok(None);
            }
            let old = self.inner.previous(key).await;
            self.inner
                .backend
                .delete_many(&[self.inner.key(key)])
                .await?;
            Ok(old)
        })
    }

    fn replace(&self, objects: Vec<Arc<K>>) -> StoreFuture<'_, Vec<Arc<K>>> {
        Box::pin(async move {
            let inner = &self.inner;
            let removed = inner.index.replace(objects.iter().map(|o| o.meta()));
            let page = inner.backend.page_size().max(1);
            for chunk in objects.chunks(page) {
                let entries = chunk
                    .iter()
                    .map(|o| Ok((inner.key(&ObjectKey::of(o.as_ref())), inner.encode(o)?)))
                    .collect::<Result<Vec<_>, StoreError>>()?;
                inner.backend.set_many(&entries).await?;
            }
            let mut gone = Vec::with_capacity(removed.len());
            for chunk in removed.chunks(page) {
                let names: Vec<String> = chunk.iter().map(|k| inner.key(k)).collect();
                let bodies = inner.backend.get_many(&names).await.unwrap_or_default();
                let mut bodies = bodies.into_iter();
                for key in chunk {
                    match bodies
                        .next()
                        .flatten()
                        .and_then(|b| serde_json::from_slice::<K>(&b).ok())
                    {
                        Some(obj) => gone.push(Arc::new(obj)),
                        None => {
                            tracing::warn!(backend = inner.backend.name(), %key, "an object removed by a relist had lost its cache entry: its Deleted event is not published");
                        }
                    }
                }
                inner.backend.delete_many(&names).await?;
            }
            Ok(gone)
        })
    }

    fn check(&self) -> StoreFuture<'_, ()> {
        self.inner.backend.check()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend.name()
    }

    fn refills(&self) -> u64 {
        self.inner.refills.load(Ordering::Relaxed)
    }

    fn streams_lists(&self) -> bool {
        true
    }

    fn keys(&self) -> Vec<ObjectKey> {
        self.inner.index.keys()
    }

    fn entry_key(&self, key: &ObjectKey) -> Option<String> {
        Some(self.inner.key(key))
    }
}

/// Writes the key list of the store behind `inner` into the backend every `every`, in pages
/// (`<prefix>keys:<n>`, `<prefix>keys` holding the number of pages), until the store is dropped.
async fn sync_keys<K>(inner: Weak<Inner<K>>, every: std::time::Duration)
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let keys = inner.index.keys();
        let mut entries: Vec<(String, Vec<u8>)> = keys
            .chunks(inner.backend.page_size().max(1))
            .enumerate()
            .map(|(n, page)| {
                let text: Vec<String> = page.iter().map(ToString::to_string).collect();
                (
                    format!("{}keys:{n}", inner.prefix),
                    text.join("\n").into_bytes(),
                )
            })
            .collect();
        entries.push((
            format!("{}keys", inner.prefix),
            entries.len().to_string().into_bytes(),
        ));
        if let Err(error) = inner.backend.set_many(&entries).await {
            tracing::debug!(%error, "writing the key list failed; trying again at the next sync");
        }
    }
}

/// Only the characters a memcached key may hold (no spaces or control characters).
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect()
}

/// The prefix of an informer's entries: the backend's shard key, then the informer's identity
/// hashed (persisted: another build or replica must compute the same).
fn key_prefix(shard_key: &str, informer: &str) -> String {
    format!(
        "{}:{:016x}:",
        sanitize(shard_key),
        fnv1a(informer.as_bytes())
    )
}

/// The backend key of `key` under `prefix`: readable when it fits, else hashed (128 bits).
fn backend_key(prefix: &str, key: &ObjectKey) -> String {
    let readable = format!(
        "{prefix}{}/{}",
        key.namespace.as_deref().unwrap_or(""),
        key.name
    );
    if readable.len() <= MAX_KEY_LEN && readable.bytes().all(|b| b.is_ascii_graphic()) {
        return readable;
    }
    let bytes = readable.as_bytes();
    format!(
        "{prefix}#{:016x}{:016x}",
        fnv1a(bytes),
        fnv1a_from(FNV_OFFSET ^ 0x9e37_79b9_7f4a_7c15, bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_should_fit_memcached_and_differ_by_prefix() {
        let key = ObjectKey::namespaced("shop", "settings");
        assert_eq!(backend_key("a:1:", &key), "a:1:shop/settings");
        assert_ne!(backend_key("a:1:", &key), backend_key("b:1:", &key));
        let long = ObjectKey::namespaced("shop", "x".repeat(253));
        let hashed = backend_key("a:1:", &long);
        assert!(
            hashed.len() <= MAX_KEY_LEN && hashed.starts_with("a:1:#"),
            "{hashed}"
        );
        assert_ne!(
            hashed,
            backend_key("a:1:", &ObjectKey::namespaced("shop", "y".repeat(253)))
        );
        assert_eq!(sanitize("replica 0\n"), "replica_0_");
    }

    /// Issue 37: the entries are persisted, so the hashes in their keys must never change —
    /// these values were computed by the store's own FNV-1a before it moved to
    /// `kubeforge_shared::hash`.
    #[test]
    fn keys_should_hash_as_every_earlier_build_did() {
        assert_eq!(
            key_prefix(
                "replicas-a",
                "/api/v1/namespaces/shop/configmaps?labelSelector=app=web"
            ),
            "replicas-a:5ea031d4e9f4ae35:"
        );
        assert_eq!(
            backend_key("a:1:", &ObjectKey::namespaced("shop", "x".repeat(253))),
            "a:1:#68872b13afc903028e11494b85fd576f"
        );
    }
}

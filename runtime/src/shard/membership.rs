//! A replica's side of sharding: which objects are its own (the label its informers select),
//! the drain acknowledgement, and the kinds its controllers shard (for the sharder).

use std::any::TypeId;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams};
use kube::{Api, Client};

use crate::informer::InformerConfig;

use super::ranges::{RangeKey, SLOTS, SlotSet, fnv1a64, slot_of};
use super::sharder::{Erased, ShardedKind};
use crate::scope::{Kind, KindType};

/// The prefix of the label that names an object's owner: `shard.kubeforge.dev/<group>`.
pub const OWNER_LABEL_PREFIX: &str = "shard.kubeforge.dev/";
/// The prefix of the label that asks its owner to let an object go:
/// `drain.shard.kubeforge.dev/<group>`.
pub const DRAIN_LABEL_PREFIX: &str = "drain.shard.kubeforge.dev/";
/// How many times in a row a drain acknowledgement refused for a conflict is tried again from
/// the object as the apiserver has it.
const RELEASE_ATTEMPTS: usize = 4;

/// The label of the members' Leases; its value is the group.
pub const MEMBER_OF_LABEL: &str = "shard.kubeforge.dev/member-of";

/// Builds the sharder's view of one sharded kind, reading with the first client and writing
/// through the second (fenced) one.
pub(crate) type KindFactory = Arc<dyn Fn(Client, Client) -> Arc<dyn ShardedKind> + Send + Sync>;

/// A kind a controller shards: what the sharder needs of it, and how many of its objects this
/// replica holds.
struct Registered {
    /// (kind, resource URL and selectors): a kind registered twice counts once.
    id: (TypeId, String),
    factory: KindFactory,
    plural: String,
    cached: Box<dyn Fn() -> usize + Send + Sync>,
}

/// This replica's membership in a shard group, as its controllers see it: the
/// [`Wiring`](crate::controller::Wiring) of a sharded manager carries one.
pub struct Membership {
    group: String,
    member: String,
    owner_label: String,
    drain_label: String,
    /// The kinds the controllers shard, in registration order (the sharder's kind numbers).
    kinds: Mutex<Vec<Registered>>,
    released: AtomicU64,
    /// How objects are assigned (decided when the manager starts: see [`Mode`]).
    mode: OnceLock<Mode>,
    /// Range mode: the slots this replica serves (a [`SlotSet`]), the reconciles running per
    /// slot, and the `shardSelector` of its narrowed informers.
    serving: AtomicU64,
    in_flight: [AtomicUsize; SLOTS],
    idle: tokio::sync::Notify,
    selector: tokio::sync::watch::Sender<String>,
}

/// How a shard group assigns objects to members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A label on each object names its member (a move writes the object).
    Labels,
    /// The apiserver's `shardSelector` hash ranges (a move is a change of ranges).
    Ranges(RangeKey),
}

/// Whether a reconcile of an object may run on this replica; while it holds a
/// [`Serving::Yes`], a range this replica lets go waits for it.
pub(crate) enum Serving<'a> {
    /// Go on (the guard counts the reconcile in its slot until dropped).
    Yes(Option<SlotGuard<'a>>),
    /// The object's slot is not (or no longer) this replica's.
    No,
}

/// A reconcile running in a slot.
pub(crate) struct SlotGuard<'a> {
    membership: &'a Membership,
    slot: usize,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if self.membership.in_flight[self.slot].fetch_sub(1, Ordering::SeqCst) == 1 {
            self.membership.idle.notify_waiters();
        }
    }
}

impl Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("group", &self.group)
            .field("member", &self.member)
            .finish_non_exhaustive()
    }
}

impl Membership {
    pub(crate) fn new(group: &str, member: &str) -> Self {
        Self {
            group: group.to_owned(),
            member: member.to_owned(),
            owner_label: format!("{OWNER_LABEL_PREFIX}{group}"),
            drain_label: format!("{DRAIN_LABEL_PREFIX}{group}"),
            kinds: Mutex::default(),
            released: AtomicU64::new(0),
            mode: OnceLock::new(),
            serving: AtomicU64::new(0),
            in_flight: std::array::from_fn(|_| AtomicUsize::new(0)),
            idle: tokio::sync::Notify::new(),
            selector: tokio::sync::watch::channel(SlotSet::default().selector(RangeKey::Uid)).0,
        }
    }

    /// Fixes the mode (the manager does, once it knows whether the apiserver serves shard
    /// selectors); later calls change nothing.
    pub(crate) fn set_mode(&self, mode: Mode) {
        if self.mode.set(mode).is_ok()
            && let Mode::Ranges(key) = mode
        {
            self.selector.send_replace(SlotSet::default().selector(key));
        }
    }

    /// How objects are assigned (labels until the manager decided).
    pub fn mode(&self) -> Mode {
        self.mode.get().copied().unwrap_or(Mode::Labels)
    }

    fn labels_mode(&self) -> bool {
        self.mode() == Mode::Labels
    }

    /// Range mode: the slots this replica serves.
    pub fn serving(&self) -> SlotSet {
        SlotSet(self.serving.load(Ordering::SeqCst))
    }

    /// Range mode: serve `slots` from now on. Reconciles of objects in the slots left start no
    /// more; [`Membership::drained`] waits for those running. The narrowed informers list again
    /// with the new ranges.
    pub(crate) fn serve(&self, slots: SlotSet) {
        self.serving.store(slots.0, Ordering::SeqCst);
        if let Mode::Ranges(key) = self.mode() {
            self.selector.send_replace(slots.selector(key));
        }
    }

    /// Waits until no reconcile runs in any of `slots`.
    pub(crate) async fn drained(&self, slots: SlotSet) {
        loop {
            let idle = self.idle.notified();
            if slots
                .iter()
                .all(|slot| self.in_flight[slot].load(Ordering::SeqCst) == 0)
            {
                return;
            }
            // A guard dropped between the check and here wakes `idle`; a bound keeps a missed
            // wake-up from mattering.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(50), idle).await;
        }
    }

    /// The slot an object falls in (range mode).
    fn slot(key: RangeKey, meta: &ObjectMeta) -> usize {
        let value = key.value(meta.uid.as_deref(), meta.namespace.as_deref());
        slot_of(fnv1a64(value.as_bytes()))
    }

    /// Whether a reconcile of the object may start here: always in label mode (the informers
    /// only hold this replica's objects; drains are acknowledged apart), in range mode while
    /// the object's slot is served — and then the reconcile counts in its slot until the guard
    /// drops.
    pub(crate) fn admit(&self, meta: &ObjectMeta) -> Serving<'_> {
        let Mode::Ranges(key) = self.mode() else {
            return Serving::Yes(None);
        };
        let slot = Self::slot(key, meta);
        // Counted first, checked second: `serve` followed by `drained` then either sees this
        // reconcile or this check sees the slot gone.
        self.in_flight[slot].fetch_add(1, Ordering::SeqCst);
        let guard = SlotGuard {
            membership: self,
            slot,
        };
        if self.serving().contains(slot) {
            Serving::Yes(Some(guard))
        } else {
            Serving::No
        }
    }

    /// Whether an informer is narrowed: always a primary kind's; an owned kind's in label mode
    /// (children carry their owner's label) and with ranges of namespaces, not with ranges of
    /// UIDs (children have UIDs of their own).
    fn narrows(&self, owned: bool) -> bool {
        !owned
            || matches!(
                self.mode(),
                Mode::Labels | Mode::Ranges(RangeKey::Namespace)
            )
    }

    /// The shard group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// This replica's name in the group (its identity).
    pub fn member(&self) -> &str {
        &self.member
    }

    /// The label naming an object's owner (`shard.kubeforge.dev/<group>`).
    pub fn owner_label(&self) -> &str {
        &self.owner_label
    }

    /// The drain label (`drain.shard.kubeforge.dev/<group>`).
    pub fn drain_label(&self) -> &str {
        &self.drain_label
    }

    /// The selector of this replica's own objects: `shard.kubeforge.dev/<group>=<member>`.
    pub fn selector(&self) -> String {
        format!("{}={}", self.owner_label, self.member)
    }

    /// Labels `meta` (a child about to be written) as this replica's: children follow their
    /// owner's shard, so the informers of owned kinds, narrowed too, see them.
    pub fn label(&self, meta: &mut ObjectMeta) {
        if !self.labels_mode() {
            return;
        }
        meta.labels
            .get_or_insert_with(BTreeMap::new)
            .insert(self.owner_label.clone(), self.member.clone());
    }

    /// Whether the object is labelled as this replica's.
    pub fn is_mine(&self, meta: &ObjectMeta) -> bool {
        meta.labels
            .as_ref()
            .and_then(|labels| labels.get(&self.owner_label))
            .is_some_and(|owner| *owner == self.member)
    }

    /// Whether the sharder asked this replica to let the object go.
    pub fn is_draining(&self, meta: &ObjectMeta) -> bool {
        self.labels_mode()
            && meta
                .labels
                .as_ref()
                .is_some_and(|labels| labels.contains_key(&self.drain_label))
    }

    /// Acknowledges a drain: removes both labels, guarded by the resourceVersion the caller
    /// saw. On a conflict (the object changed since — usually not its labels: it keeps being
    /// written) the object is read again, and released from that version if it is still this
    /// replica's and still draining (up to [`RELEASE_ATTEMPTS`] times; then its next event
    /// decides); if it was undrained or moved meanwhile, it is left alone. Call it only once no
    /// reconcile of the object runs (the controller's worker holds the key). `Ok(true)` when
    /// the labels came off.
    /// `api` is the object's kind as a `DynamicObject` (this code is the same for every kind).
    pub(crate) async fn release(
        &self,
        api: &Api<DynamicObject>,
        meta: &ObjectMeta,
    ) -> Result<bool, kube::Error> {
        let name = meta.name.clone().unwrap_or_default();
        let mut rv = meta.resource_version.clone();
        for _ in 0..RELEASE_ATTEMPTS {
            let patch = serde_json::json!({ "metadata": {
                "resourceVersion": rv,
                "labels": { &self.owner_label: null, &self.drain_label: null },
            }});
            match api
                .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => {
                    self.released.fetch_add(1, Ordering::Relaxed);
                    return Ok(true);
                }
                Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    match api.get_metadata_opt(&name).await? {
                        Some(now)
                            if self.is_mine(&now.metadata) && self.is_draining(&now.metadata) =>
                        {
                            rv = now.metadata.resource_version;
                        }
                        _ => return Ok(false),
                    }
                }
                Err(error) => return Err(error),
            }
        }
        Ok(false)
    }

    /// How many objects this replica let go (drains acknowledged).
    pub fn released(&self) -> u64 {
        self.released.load(Ordering::Relaxed)
    }

    /// Records that a controller shards the objects of `api` that `config` selects (the
    /// sharder watches their metadata and labels them); `cached` counts those held here.
    pub(crate) fn register<K>(
        &self,
        api: &Api<K>,
        config: &InformerConfig,
        cached: impl Fn() -> usize + Send + Sync + 'static,
    ) where
        K: Kind,
    {
        self.register_kind(
            TypeId::of::<K>(),
            KindType::<K>::of().erased(),
            api.resource_url(),
            api.namespace(),
            config,
            Box::new(cached),
        );
    }

    /// [`Membership::register`] for the kind `ty`, as data: compiled once, whatever the kinds
    /// sharded.
    fn register_kind(
        &self,
        type_id: TypeId,
        ty: KindType<DynamicObject>,
        url: &str,
        namespace: Option<&str>,
        config: &InformerConfig,
        cached: Box<dyn Fn() -> usize + Send + Sync>,
    ) {
        let selected = InformerConfig {
            label_selector: config.label_selector.clone(),
            field_selector: config.field_selector.clone(),
            ..InformerConfig::default()
        };
        let id = (
            type_id,
            format!(
                "{url}?{:?}&{:?}",
                selected.label_selector, selected.field_selector
            ),
        );
        let namespace = namespace.map(str::to_owned);
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        if kinds.iter().any(|known| known.id == id) {
            return;
        }
        let labels = [self.owner_label.clone(), self.drain_label.clone()];
        let plural = ty.dynamic_type().plural.clone();
        let factory: KindFactory = Arc::new(move |reader: Client, writer: Client| {
            let erased = Erased::new(
                reader,
                writer,
                ty.clone(),
                namespace.as_deref(),
                selected.clone(),
                labels.clone(),
            );
            Arc::new(erased) as Arc<dyn ShardedKind>
        });
        kinds.push(Registered {
            id,
            factory,
            plural,
            cached,
        });
    }

    /// The registered kinds' factories.
    pub(crate) fn kinds(&self) -> Vec<KindFactory> {
        let kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        kinds.iter().map(|kind| Arc::clone(&kind.factory)).collect()
    }

    /// (plural, objects cached here) for each sharded kind.
    pub fn owned(&self) -> Vec<(String, usize)> {
        let kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        kinds
            .iter()
            .map(|kind| (kind.plural.clone(), (kind.cached)()))
            .collect()
    }
}

impl crate::informer::Narrow for Membership {
    fn key(&self) -> String {
        format!("{}/{}", self.group, self.member)
    }

    fn label_selector(&self, owned: bool) -> Option<String> {
        (self.narrows(owned) && self.labels_mode()).then(|| self.selector())
    }

    fn shard_selector(&self, owned: bool) -> Option<tokio::sync::watch::Receiver<String>> {
        (self.narrows(owned) && matches!(self.mode(), Mode::Ranges(_)))
            .then(|| self.selector.subscribe())
    }
}

/// Whether `value` is a valid label value (≤ 63 characters of `[A-Za-z0-9_.-]`, starting and
/// ending with an alphanumeric one).
pub(crate) fn valid_label_value(value: &str) -> bool {
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !value.is_empty()
        && value.len() <= 63
        && ends(value.chars().next())
        && ends(value.chars().last())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// `text` as a DNS-1123 label fragment: lower case, anything else than `[a-z0-9-]` as `-`.
pub(crate) fn dns_fragment(text: &str) -> String {
    text.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_names_should_be_checked() {
        assert!(valid_label_value("host_1a2b"));
        assert!(valid_label_value("replica-0"));
        assert!(!valid_label_value("-x"));
        assert!(!valid_label_value("a/b"));
        assert!(!valid_label_value(&"a".repeat(64)));
        assert_eq!(dns_fragment("Host_1A"), "host-1a");
    }

    #[test]
    fn draining_should_follow_the_groups_drain_label() {
        let m = Membership::new("web", "r1");
        let mut meta = ObjectMeta::default();
        assert!(!m.is_draining(&meta));
        meta.labels = Some(BTreeMap::from([(
            "drain.shard.kubeforge.dev/other".to_owned(),
            "true".to_owned(),
        )]));
        assert!(!m.is_draining(&meta));
        m.label(&mut meta);
        meta.labels
            .as_mut()
            .map(|l| l.insert("drain.shard.kubeforge.dev/web".into(), "true".into()));
        assert!(m.is_draining(&meta));
        assert_eq!(
            meta.labels
                .as_ref()
                .and_then(|l| l.get("shard.kubeforge.dev/web"))
                .map(String::as_str),
            Some("r1")
        );
    }
}

//! The items ready to be handed out, in two priorities with aging.
//!
//! Fresh events go before the waves of start-up, resync and requeue work, so an edit made while
//! an operator with 50,000 objects restarts is reconciled in milliseconds, not after the whole
//! wave. A priority alone would let a steady stream of fresh events starve the low items for ever
//! (controller-runtime's priority queue has that problem); here items are handed out earliest
//! deadline first: a high item's deadline is the moment it was queued, a low item's that moment
//! plus the aging bound. So a low item waits for high items only while it is younger than the
//! bound; past it, it goes before every high item queued after it became due.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// How urgent a queued item is; see [`WorkQueue`](super::WorkQueue).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Work that can wait: the objects an informer found at start-up, resyncs, requeues and
    /// retries. Handed out after high items, but never later than high items queued more than
    /// the aging bound after it.
    Low,
    /// Fresh events: something changed just now (the default of [`WorkQueue::add`](super::WorkQueue::add)).
    High,
}

impl Priority {
    /// Both priorities, high first.
    pub const ALL: [Self; 2] = [Self::High, Self::Low];

    /// The value of the `priority` label of the queue metrics: controller-runtime's numbers
    /// (`0` for its default, `-100` for its `LowPriority`), so dashboards built for it read ours.
    pub fn label(self) -> &'static str {
        match self {
            Self::High => "0",
            Self::Low => "-100",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::High => 0,
            Self::Low => 1,
        }
    }
}

/// The default aging bound (see [`WorkQueue::set_aging`](super::WorkQueue::set_aging)): longer than the start-up wave of a large operator
/// (50,000 objects take about two minutes), so that wave stays behind fresh events, and short
/// enough that nothing is forgotten.
pub const DEFAULT_AGING: Duration = Duration::from_secs(300);

/// One queued item in a lane. An item whose priority was raised leaves a stale entry behind in
/// the low lane (its `seq` no longer matches), skipped when it reaches the front.
struct Entry<T> {
    item: T,
    seq: u64,
    since: Instant,
}

#[derive(Clone, Copy)]
struct Live {
    seq: u64,
    priority: Priority,
    since: Instant,
}

/// The ready items: two FIFO lanes and the live entry of each item.
pub(super) struct Ready<T> {
    lanes: [VecDeque<Entry<T>>; 2],
    live: HashMap<T, Live>,
    counts: [usize; 2],
    seq: u64,
    aging: Duration,
}

/// What [`Ready::pop`] handed out.
pub(super) struct Popped<T> {
    pub(super) item: T,
    /// A low item that went before waiting high ones: it had reached the aging bound.
    pub(super) aged: bool,
}

impl<T> Ready<T> {
    /// Queued items.
    pub(super) fn len(&self) -> usize {
        self.live.len()
    }

    /// Queued items of `priority`.
    pub(super) fn len_of(&self, priority: Priority) -> usize {
        self.counts[priority.index()]
    }
}

impl<T: Hash + Eq + Clone> Ready<T> {
    pub(super) fn new(aging: Duration) -> Self {
        Self {
            lanes: [VecDeque::new(), VecDeque::new()],
            live: HashMap::new(),
            counts: [0, 0],
            seq: 0,
            aging,
        }
    }

    pub(super) fn set_aging(&mut self, aging: Duration) {
        self.aging = aging;
    }

    /// Queues `item` at `priority`; returns whether it was not queued before. An item queued
    /// at low priority that is added at high priority moves to the high lane, unless its
    /// deadline as a low item is earlier already.
    pub(super) fn push(&mut self, item: T, priority: Priority, now: Instant) -> bool {
        if let Some(live) = self.live.get(&item).copied() {
            let overdue = self
                .deadline(live.since, live.priority)
                .is_some_and(|deadline| deadline < now);
            if priority > live.priority && !overdue {
                self.counts[live.priority.index()] -= 1;
                self.enqueue(item, priority, now);
            }
            return false;
        }
        self.enqueue(item, priority, now);
        true
    }

    fn enqueue(&mut self, item: T, priority: Priority, now: Instant) {
        self.seq += 1;
        self.live.insert(
            item.clone(),
            Live {
                seq: self.seq,
                priority,
                since: now,
            },
        );
        self.counts[priority.index()] += 1;
        self.lanes[priority.index()].push_back(Entry {
            item,
            seq: self.seq,
            since: now,
        });
    }

    /// When an entry queued at `since` is due (`None`: never, an aging bound past the clock).
    fn deadline(&self, since: Instant, priority: Priority) -> Option<Instant> {
        match priority {
            Priority::High => Some(since),
            Priority::Low => since.checked_add(self.aging),
        }
    }

    /// Drops the stale entries at the front of `lane`; returns its live front.
    fn front(&mut self, priority: Priority) -> Option<&Entry<T>> {
        let lane = &mut self.lanes[priority.index()];
        while let Some(front) = lane.front() {
            let current = self
                .live
                .get(&front.item)
                .is_some_and(|l| l.seq == front.seq);
            if current {
                break;
            }
            lane.pop_front();
        }
        lane.front()
    }

    /// Hands out the item with the earliest deadline (high first on a tie).
    pub(super) fn pop(&mut self) -> Option<Popped<T>> {
        let high = self.front(Priority::High).map(|e| e.since);
        let low = self.front(Priority::Low).map(|e| e.since);
        let (priority, aged) = match (high, low) {
            (None, None) => return None,
            (Some(_), None) => (Priority::High, false),
            (None, Some(_)) => (Priority::Low, false),
            (Some(high), Some(low)) => match self.deadline(low, Priority::Low) {
                Some(deadline) if deadline < high => (Priority::Low, true),
                _ => (Priority::High, false),
            },
        };
        let entry = self.lanes[priority.index()].pop_front()?;
        self.live.remove(&entry.item);
        self.counts[priority.index()] -= 1;
        Some(Popped {
            item: entry.item,
            aged,
        })
    }

    /// How long the longest-waiting item of `priority` has been in its lane.
    pub(super) fn oldest(&self, priority: Priority, now: Instant) -> Option<Duration> {
        self.lanes[priority.index()]
            .iter()
            .find(|e| self.live.get(&e.item).is_some_and(|l| l.seq == e.seq))
            .map(|e| now.saturating_duration_since(e.since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(ready: &mut Ready<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| ready.pop().map(|p| p.item)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn high_items_should_go_first_and_each_lane_keep_its_order() {
        let mut ready = Ready::new(DEFAULT_AGING);
        let now = Instant::now();
        for item in ["l1", "l2"] {
            ready.push(item, Priority::Low, now);
        }
        for item in ["h1", "h2"] {
            ready.push(item, Priority::High, now);
        }
        assert_eq!(ready.len_of(Priority::Low), 2);
        assert_eq!(drain(&mut ready), ["h1", "h2", "l1", "l2"]);
        assert_eq!(ready.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_low_item_should_go_before_high_items_queued_more_than_the_aging_bound_after_it() {
        let aging = Duration::from_secs(10);
        let mut ready = Ready::new(aging);
        let start = Instant::now();
        ready.push("old-low", Priority::Low, start);
        ready.push("early-high", Priority::High, start + Duration::from_secs(9));
        ready.push("late-high", Priority::High, start + Duration::from_secs(11));
        let first = ready.pop().unwrap();
        assert_eq!((first.item, first.aged), ("early-high", false));
        let second = ready.pop().unwrap();
        assert_eq!(
            (second.item, second.aged),
            ("old-low", true),
            "due at 10 s: before the high item queued at 11 s"
        );
        assert_eq!(drain(&mut ready), ["late-high"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_raised_item_should_move_once_and_leave_nothing_behind() {
        let mut ready = Ready::new(DEFAULT_AGING);
        let now = Instant::now();
        ready.push("a", Priority::Low, now);
        ready.push("b", Priority::Low, now);
        ready.push("h", Priority::High, now);
        assert!(!ready.push("b", Priority::High, now), "already queued");
        assert!(!ready.push("b", Priority::Low, now), "never lowered");
        assert_eq!(
            (ready.len(), ready.len_of(Priority::High)),
            (3, 2),
            "counted once, in its new lane"
        );
        assert_eq!(drain(&mut ready), ["h", "b", "a"]);
        assert!(ready.pop().is_none());
        assert!(ready.lanes.iter().all(VecDeque::is_empty), "no stale entry");
    }

    #[tokio::test(start_paused = true)]
    async fn an_overdue_low_item_should_keep_its_earlier_deadline_when_raised() {
        let aging = Duration::from_secs(10);
        let mut ready = Ready::new(aging);
        let start = Instant::now();
        ready.push("low", Priority::Low, start);
        ready.push("high", Priority::High, start + Duration::from_secs(15));
        // Raised at 20 s: as a low item it was due at 10 s, earlier than anything queued since.
        ready.push("low", Priority::High, start + Duration::from_secs(20));
        assert_eq!(drain(&mut ready), ["low", "high"]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_oldest_wait_should_be_reported_per_priority() {
        let mut ready = Ready::new(DEFAULT_AGING);
        let start = Instant::now();
        ready.push("a", Priority::Low, start);
        ready.push("b", Priority::High, start + Duration::from_secs(3));
        let now = start + Duration::from_secs(5);
        assert_eq!(
            ready.oldest(Priority::Low, now),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            ready.oldest(Priority::High, now),
            Some(Duration::from_secs(2))
        );
        ready.push("a", Priority::High, now);
        assert_eq!(ready.oldest(Priority::Low, now), None, "moved");
        assert_eq!(
            ready.oldest(Priority::High, now),
            Some(Duration::from_secs(2))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_aging_bound_past_the_clock_should_mean_strict_priority() {
        let mut ready = Ready::new(Duration::MAX);
        let start = Instant::now();
        ready.push("low", Priority::Low, start);
        ready.push("high", Priority::High, start + Duration::from_secs(3600));
        assert_eq!(drain(&mut ready), ["high", "low"]);
    }
}

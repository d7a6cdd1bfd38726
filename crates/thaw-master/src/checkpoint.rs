//! Asynchronous checkpointing (Tachyon, section 2.7): which unpersisted file each
//! worker writes to the under-store next. Writes return at memory speed; this
//! runs behind them, one checkpoint per worker at a time, and never blocks them.
//!
//! The order is Tachyon's better solution: the newest files first, not
//! creation order, so that when a worker dies only the files written since the
//! last finished checkpoint need recomputing (a chain A2 -> A3 -> ... -> A9 loses
//! A6..A9, not A4..A9). Files marked temporary are never checkpointed unless
//! someone asks ("it might be best *never* to checkpoint these files"); a file
//! deleted before its turn simply leaves the set. A persist call puts its file
//! in front of all others.
//!
//! All of it is soft state rebuilt from the namespace at start: the set of
//! files waiting is every complete, unpersisted async-through file (plus those
//! whose persist was asked for, which the journal records), and what workers
//! are writing they report with each full heartbeat.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use thaw_common::proto::PersistenceTotals;
use thaw_common::{Result, ThawError};

/// The planner's order of files waiting for a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// The most recently written file first (Tachyon, section 2.7's choice).
    #[default]
    NewestFirst,
    /// Creation (write) order: the naive baseline Tachyon, section 2.7 argues against.
    CreationOrder,
}

impl Order {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "newest" | "newest-first" => Ok(Order::NewestFirst),
            "creation" | "creation-order" => Ok(Order::CreationOrder),
            _ => Err(ThawError::invalid(format!("unknown checkpoint order {s:?}: expected newest or creation"))),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Order::NewestFirst => "newest",
            Order::CreationOrder => "creation",
        }
    }
}

/// A file waiting for its checkpoint, as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub file_id: u64,
    /// When its write completed (ms); with the id, its place in time.
    pub written_ms: u64,
    pub temporary: bool,
    /// Someone asked for it: first, temporary or not.
    pub forced: bool,
    /// Live workers holding every block of the file (any may write it).
    pub holders: Vec<u64>,
}

/// Which checkpoints to start now: at most one per worker in `free`, each the
/// first candidate in the order that the worker holds whole. Asked-for files
/// come first (oldest request first, by write time), then the rest by `order`;
/// temporary files only when asked for. Pure, so the order can be tested alone.
pub fn plan(candidates: &[Candidate], free: &[u64], order: Order) -> Vec<(u64, u64)> {
    let mut ranked: Vec<&Candidate> = candidates.iter().filter(|c| c.forced || !c.temporary).collect();
    ranked.sort_by_key(|c| {
        let age = (c.written_ms, c.file_id);
        let newest = order == Order::NewestFirst && !c.forced;
        (!c.forced, if newest { (u64::MAX - age.0, u64::MAX - age.1) } else { age })
    });
    let mut free: Vec<u64> = free.to_vec();
    let mut out = Vec::new();
    for c in ranked {
        if free.is_empty() {
            break;
        }
        if let Some(i) = free.iter().position(|w| c.holders.contains(w)) {
            out.push((c.file_id, free.remove(i)));
        }
    }
    out
}

/// A failed checkpoint is tried again after this, doubling per failure.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct Waiting {
    written_ms: u64,
    temporary: bool,
    forced: bool,
    failures: u32,
    retry_at: Option<Instant>,
    error: String,
}

/// The master's checkpoint state.
#[derive(Debug, Default)]
pub struct Checkpoints {
    order: Order,
    waiting: HashMap<u64, Waiting>,
    /// File -> (worker writing it, since when).
    in_flight: HashMap<u64, (u64, Instant)>,
    done: u64,
    failed: u64,
}

impl Checkpoints {
    pub fn new(order: Order) -> Self {
        Checkpoints { order, ..Default::default() }
    }

    pub fn order(&self) -> Order {
        self.order
    }

    /// A complete, unpersisted file that may be checkpointed.
    pub fn add(&mut self, file_id: u64, written_ms: u64, temporary: bool, forced: bool) {
        let w = self.waiting.entry(file_id).or_insert(Waiting {
            written_ms,
            temporary,
            forced,
            failures: 0,
            retry_at: None,
            error: String::new(),
        });
        if forced && !w.forced {
            // Asked for now: no waiting out an earlier failure's backoff.
            w.forced = true;
            w.retry_at = None;
        }
    }

    pub fn is_waiting(&self, file_id: u64) -> bool {
        self.waiting.contains_key(&file_id)
    }

    /// The file is gone (deleted, replaced) or persisted some other way.
    pub fn drop_file(&mut self, file_id: u64) {
        self.waiting.remove(&file_id);
        self.in_flight.remove(&file_id);
    }

    pub fn in_flight(&self, file_id: u64) -> bool {
        self.in_flight.contains_key(&file_id)
    }

    pub fn error(&self, file_id: u64) -> Option<&str> {
        self.waiting.get(&file_id).map(|w| w.error.as_str()).filter(|e| !e.is_empty())
    }

    /// A dead or re-registered worker writes nothing any more: its files wait again.
    pub fn worker_lost(&mut self, worker: u64) {
        self.in_flight.retain(|_, (w, _)| *w != worker);
    }

    /// Files waiting that `worker` could start now (none if it is writing one).
    fn worker_free(&self, worker: u64) -> bool {
        !self.in_flight.values().any(|(w, _)| *w == worker)
    }

    /// The candidates as of `now`: waiting, not in flight, not backing off.
    /// `holders` names the live workers holding a file whole.
    fn candidates(&self, now: Instant, holders: &dyn Fn(u64) -> Vec<u64>) -> Vec<Candidate> {
        self.waiting
            .iter()
            .filter(|(f, w)| !self.in_flight.contains_key(f) && w.retry_at.is_none_or(|t| t <= now))
            .filter(|(_, w)| w.forced || !w.temporary)
            .map(|(&file_id, w)| Candidate {
                file_id,
                written_ms: w.written_ms,
                temporary: w.temporary,
                forced: w.forced,
                holders: holders(file_id),
            })
            .collect()
    }

    /// The checkpoint `worker` starts now, if it is free and holds a waiting file.
    pub fn next_for(&mut self, worker: u64, now: Instant, holders: &dyn Fn(u64) -> Vec<u64>) -> Option<u64> {
        if self.waiting.is_empty() || !self.worker_free(worker) {
            return None;
        }
        let cands = self.candidates(now, holders);
        let (file, w) = plan(&cands, &[worker], self.order).into_iter().next()?;
        self.in_flight.insert(file, (w, now));
        Some(file)
    }

    /// Whether `worker` has a checkpoint to start (a held ask returns for it).
    pub fn has_work(&self, worker: u64, now: Instant, holders: &dyn Fn(u64) -> Vec<u64>) -> bool {
        !self.waiting.is_empty()
            && self.worker_free(worker)
            && !plan(&self.candidates(now, holders), &[worker], self.order).is_empty()
    }

    /// A worker's full heartbeat listed what it is writing: adopt what a
    /// restarted master did not know, and forget orders older than `grace` the
    /// worker never started (the answer carrying them was lost).
    pub fn reconcile(&mut self, worker: u64, writing: &[u64], now: Instant, grace: Duration) {
        for f in writing {
            if self.waiting.contains_key(f) {
                self.in_flight.entry(*f).or_insert((worker, now));
            }
        }
        self.in_flight.retain(|f, (w, since)| {
            *w != worker || writing.contains(f) || now.saturating_duration_since(*since) < grace
        });
    }

    /// The file's checkpoint is published: it leaves the set.
    pub fn succeeded(&mut self, file_id: u64) {
        self.drop_file(file_id);
        self.done += 1;
    }

    /// The checkpoint failed: the file waits again, after a backoff.
    pub fn failed(&mut self, file_id: u64, now: Instant, error: &str) {
        self.in_flight.remove(&file_id);
        self.failed += 1;
        if let Some(w) = self.waiting.get_mut(&file_id) {
            w.failures += 1;
            let backoff = RETRY_FIRST.saturating_mul(1 << w.failures.min(6).saturating_sub(1)).min(RETRY_MAX);
            w.retry_at = Some(now + backoff);
            w.error = error.to_string();
        }
    }

    /// Counters for status (the per-state file counts are the caller's).
    pub fn fill_totals(&self, t: &mut PersistenceTotals) {
        t.checkpoints_done = self.done;
        t.checkpoints_failed = self.failed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cand(file_id: u64, written_ms: u64, holders: &[u64]) -> Candidate {
        Candidate { file_id, written_ms, temporary: false, forced: false, holders: holders.to_vec() }
    }

    #[test]
    fn tachyon_s_chain_checkpoints_the_newest_file_each_time_one_is_done() {
        // A2..A6 written while A2's checkpoint ran; the next is A6, not A3.
        let c: Vec<Candidate> = (3..=6).map(|i| cand(i, i * 10, &[1])).collect();
        assert_eq!(plan(&c, &[1], Order::NewestFirst), vec![(6, 1)]);
        assert_eq!(plan(&c, &[1], Order::CreationOrder), vec![(3, 1)]);
    }

    #[test]
    fn asked_for_files_go_first_and_temporary_ones_only_when_asked_for() {
        let mut c = vec![cand(1, 10, &[1]), cand(2, 20, &[1]), cand(3, 30, &[1])];
        c[2].temporary = true;
        assert_eq!(plan(&c, &[1], Order::NewestFirst), vec![(2, 1)]);
        c[0].forced = true;
        assert_eq!(plan(&c, &[1], Order::NewestFirst), vec![(1, 1)]);
        c[0].forced = false;
        c[2].forced = true;
        assert_eq!(plan(&c, &[1], Order::NewestFirst), vec![(3, 1)]);
    }

    #[test]
    fn a_failure_backs_off_a_persist_call_clears_the_wait_and_a_lost_order_is_retried() {
        let t0 = Instant::now();
        let holders = |_: u64| vec![1];
        let mut cp = Checkpoints::new(Order::NewestFirst);
        cp.add(5, 100, false, false);
        assert_eq!(cp.next_for(1, t0, &holders), Some(5));
        assert_eq!(cp.next_for(1, t0, &holders), None, "one at a time per worker");
        cp.failed(5, t0, "disk full");
        assert_eq!(cp.error(5), Some("disk full"));
        assert_eq!(cp.next_for(1, t0, &holders), None, "backing off");
        assert_eq!(cp.next_for(1, t0 + RETRY_FIRST, &holders), Some(5));
        cp.failed(5, t0, "disk full");
        assert!(!cp.has_work(1, t0 + RETRY_FIRST, &holders), "the second backoff is longer");
        cp.add(5, 100, false, true);
        assert_eq!(cp.next_for(1, t0, &holders), Some(5), "asked for: at once");
        // The worker never started it: after the grace the order is forgotten.
        cp.reconcile(1, &[], t0 + Duration::from_millis(10), Duration::from_secs(3));
        assert!(cp.in_flight(5));
        cp.reconcile(1, &[], t0 + Duration::from_secs(4), Duration::from_secs(3));
        assert!(!cp.in_flight(5));
        // A restarted master learns what a worker is writing.
        cp.reconcile(2, &[5, 99], t0, Duration::from_secs(3));
        assert!(cp.in_flight(5) && !cp.in_flight(99));
        cp.worker_lost(2);
        assert!(!cp.in_flight(5));
        cp.succeeded(5);
        assert!(!cp.is_waiting(5));
        let mut t = PersistenceTotals::default();
        cp.fill_totals(&mut t);
        assert_eq!((t.checkpoints_done, t.checkpoints_failed), (1, 2));
    }

    fn candidates() -> impl Strategy<Value = Vec<Candidate>> {
        prop::collection::vec((0u64..50, any::<bool>(), any::<bool>(), prop::collection::vec(1u64..5, 0..4)), 0..30)
            .prop_map(|v| {
                v.into_iter()
                    .enumerate()
                    .map(|(i, (t, temporary, forced, holders))| Candidate {
                        file_id: i as u64 + 1,
                        written_ms: t,
                        temporary,
                        forced,
                        holders,
                    })
                    .collect()
            })
    }

    proptest! {
        /// Each free worker starts at most one checkpoint, of a file it holds
        /// whole; no file twice; temporary files only when asked for; a worker
        /// left idle holds no eligible file left over; and each choice is the
        /// first in the order among the files its worker could have taken.
        #[test]
        fn the_plan_follows_the_order(c in candidates(), free in prop::collection::btree_set(1u64..5, 0..4), newest in any::<bool>()) {
            let order = if newest { Order::NewestFirst } else { Order::CreationOrder };
            let free: Vec<u64> = free.into_iter().collect();
            let out = plan(&c, &free, order);
            let by_id: HashMap<u64, &Candidate> = c.iter().map(|x| (x.file_id, x)).collect();
            let chosen: Vec<u64> = out.iter().map(|(f, _)| *f).collect();
            let workers: Vec<u64> = out.iter().map(|(_, w)| *w).collect();
            prop_assert!(workers.iter().all(|w| free.contains(w)));
            prop_assert_eq!(workers.iter().collect::<std::collections::HashSet<_>>().len(), workers.len());
            prop_assert_eq!(chosen.iter().collect::<std::collections::HashSet<_>>().len(), chosen.len());
            let eligible = |x: &Candidate| x.forced || !x.temporary;
            let before = |a: &Candidate, b: &Candidate| {
                if a.forced != b.forced {
                    return a.forced;
                }
                let (ka, kb) = ((a.written_ms, a.file_id), (b.written_ms, b.file_id));
                if order == Order::NewestFirst && !a.forced { ka > kb } else { ka < kb }
            };
            for (f, w) in &out {
                let x = by_id[f];
                prop_assert!(eligible(x) && x.holders.contains(w));
                // No file left unchosen that this worker holds comes before it,
                // unless an earlier choice took that file.
                for y in c.iter().filter(|y| eligible(y) && y.holders.contains(w) && !chosen.contains(&y.file_id)) {
                    prop_assert!(!before(y, x), "file {} should have gone before {}", y.file_id, x.file_id);
                }
            }
            for w in free.iter().filter(|w| !workers.contains(w)) {
                prop_assert!(!c.iter().any(|y| eligible(y) && y.holders.contains(w) && !chosen.contains(&y.file_id)));
            }
        }
    }
}

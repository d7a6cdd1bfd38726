//! Asynchronous checkpointing's decision (Tachyon, section 2.7): which
//! unpersisted file each worker writes to the under-store next. The service
//! that hands these orders to workers and publishes their copies is
//! `master/checkpoints.rs`. Writes return at memory speed; this
//! runs behind them, one checkpoint per worker at a time, and never blocks them.
//!
//! The order is Tachyon's better solution: the newest files first, not
//! creation order, so that when a worker dies only the files written since the
//! last finished checkpoint need recomputing (a chain A2 -> A3 -> ... -> A9 loses
//! A6..A9, not A4..A9). Files marked temporary are never checkpointed unless
//! someone asks ("it might be best *never* to checkpoint these files"); a file
//! deleted before its turn simply leaves the set.
//!
//! A persist call (`thaw fs persist`, "write the file now") does not queue
//! behind the background: each worker has two lanes, one background
//! checkpoint and one asked-for one at a time, and the asked-for copy is not
//! paced by `--checkpoint-bandwidth` nor run in the idle I/O class (a user
//! waits on it, as on a `cache-through` write). A file asked for while its
//! background copy runs has that copy hurried (the worker lifts its pacing).
//! Tachyon puts such a file first in its one queue; with a low bandwidth cap
//! and a large file being copied, "first" can mean hours.
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

/// A checkpoint a worker is writing.
#[derive(Debug, Clone, Copy)]
struct Flight {
    worker: u64,
    since: Instant,
    /// In the asked-for lane (or hurried there from the background).
    urgent: bool,
    /// The worker has been sent the order as it stands (a hurried copy: not yet).
    told: bool,
}

/// The master's checkpoint state.
#[derive(Debug, Default)]
pub struct Checkpoints {
    order: Order,
    waiting: HashMap<u64, Waiting>,
    in_flight: HashMap<u64, Flight>,
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
        if forced && let Some(f) = self.in_flight.get_mut(&file_id).filter(|f| !f.urgent) {
            // Being copied in the background: hurried, in the asked-for lane.
            f.urgent = true;
            f.told = false;
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
        self.in_flight.retain(|_, f| f.worker != worker);
    }

    /// Whether `worker` may start a checkpoint in a lane (asked-for or background).
    fn lane_free(&self, worker: u64, urgent: bool) -> bool {
        !self.in_flight.values().any(|f| f.worker == worker && f.urgent == urgent)
    }

    /// Files `worker` is writing in the background that were asked for since.
    fn to_hurry(&self, worker: u64) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.worker == worker && f.urgent && !f.told)
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
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

    /// The first file `worker` could start now in each free lane: (file, urgent).
    fn starts(&self, worker: u64, now: Instant, holders: &dyn Fn(u64) -> Vec<u64>) -> Vec<(u64, bool)> {
        if self.waiting.is_empty() {
            return Vec::new();
        }
        let (urgent, background): (Vec<Candidate>, Vec<Candidate>) =
            self.candidates(now, holders).into_iter().partition(|c| c.forced);
        let mut out = Vec::new();
        for (lane, cands) in [(true, urgent), (false, background)] {
            if self.lane_free(worker, lane)
                && let Some((file, _)) = plan(&cands, &[worker], self.order).into_iter().next()
            {
                out.push((file, lane));
            }
        }
        out
    }

    /// The checkpoints `worker` is ordered to write now, as (file, urgent):
    /// one per free lane, and the background copies to hurry.
    pub fn next_for(&mut self, worker: u64, now: Instant, holders: &dyn Fn(u64) -> Vec<u64>) -> Vec<(u64, bool)> {
        let mut out: Vec<(u64, bool)> = self.to_hurry(worker).into_iter().map(|f| (f, true)).collect();
        for f in &out {
            if let Some(x) = self.in_flight.get_mut(&f.0) {
                x.told = true;
            }
        }
        for (file, urgent) in self.starts(worker, now, holders) {
            self.in_flight.insert(file, Flight { worker, since: now, urgent, told: true });
            out.push((file, urgent));
        }
        out
    }

    /// Whether `worker` has a checkpoint to start or hurry (a held ask returns for it).
    pub fn has_work(&self, worker: u64, now: Instant, holders: &dyn Fn(u64) -> Vec<u64>) -> bool {
        !self.to_hurry(worker).is_empty() || !self.starts(worker, now, holders).is_empty()
    }

    /// What the checkpoint of a waiting file waits for now, in words: who is
    /// writing it and for how long, or what goes before it. `path` names
    /// files; `holders` as for [`Self::next_for`]. `None`: not waiting.
    pub fn waiting_for(
        &self,
        file_id: u64,
        now: Instant,
        path: &dyn Fn(u64) -> String,
        holders: &dyn Fn(u64) -> Vec<u64>,
    ) -> Option<String> {
        let w = self.waiting.get(&file_id)?;
        let secs = |t: Instant| now.saturating_duration_since(t).as_secs_f64();
        if let Some(f) = self.in_flight.get(&file_id) {
            return Some(match (f.urgent, f.told) {
                (true, true) => {
                    format!("worker {} has been writing it for {:.1} s, unpaced (asked for)", f.worker, secs(f.since))
                }
                (true, false) => format!(
                    "worker {} has been writing it for {:.1} s in the background (paced by its --checkpoint-bandwidth); \
                     it is told to hurry with its next heartbeat",
                    f.worker,
                    secs(f.since)
                ),
                (false, _) => format!(
                    "worker {} has been writing it for {:.1} s in the background, paced by its --checkpoint-bandwidth",
                    f.worker,
                    secs(f.since)
                ),
            });
        }
        if let Some(t) = w.retry_at.filter(|t| *t > now) {
            return Some(format!(
                "its last checkpoint failed; the next try starts in {:.1} s",
                t.duration_since(now).as_secs_f64()
            ));
        }
        if w.temporary && !w.forced {
            return Some("a temporary file: never checkpointed unless asked (thaw fs persist)".to_string());
        }
        let holders = holders(file_id);
        if holders.is_empty() {
            return Some("no live worker holds its blocks".to_string());
        }
        // Its holders' lanes are busy: with what.
        let busy: Vec<String> = self
            .in_flight
            .iter()
            .filter(|(_, f)| holders.contains(&f.worker) && f.urgent == w.forced)
            .map(|(id, f)| format!("worker {} is writing {} ({:.1} s so far)", f.worker, path(*id), secs(f.since)))
            .collect();
        let lane = if w.forced { "asked-for checkpoints asked earlier" } else { "its turn in the background" };
        Some(if busy.is_empty() {
            format!("waiting for {lane}")
        } else {
            format!("waiting for {lane}: {}", busy.join(", "))
        })
    }

    /// A worker's full heartbeat listed what it is writing: adopt what a
    /// restarted master did not know, and forget orders older than `grace` the
    /// worker never started (the answer carrying them was lost).
    pub fn reconcile(&mut self, worker: u64, writing: &[u64], now: Instant, grace: Duration) {
        for f in writing {
            if let Some(w) = self.waiting.get(f) {
                // An asked-for one is told again: the worker may write it paced.
                let urgent = w.forced;
                self.in_flight.entry(*f).or_insert(Flight { worker, since: now, urgent, told: !urgent });
            }
        }
        self.in_flight.retain(|id, f| {
            f.worker != worker || writing.contains(id) || now.saturating_duration_since(f.since) < grace
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
    fn an_asked_for_file_runs_beside_a_background_checkpoint_and_one_being_copied_is_hurried() {
        let t0 = Instant::now();
        let holders = |_: u64| vec![1];
        let path = |f: u64| format!("/f{f}");
        let mut cp = Checkpoints::new(Order::NewestFirst);
        cp.add(1, 10, false, false);
        cp.add(2, 20, false, false);
        cp.add(3, 30, true, false);
        // The background lane takes the newest; the asked-for lane is idle.
        assert_eq!(cp.next_for(1, t0, &holders), vec![(2, false)]);
        assert!(!cp.has_work(1, t0, &holders));
        let why = cp.waiting_for(1, t0, &path, &holders).unwrap();
        assert!(why.contains("its turn in the background") && why.contains("worker 1 is writing /f2"), "{why}");
        assert!(cp.waiting_for(3, t0, &path, &holders).unwrap().contains("temporary"));
        // Asked for: it starts beside the running background copy, not after it.
        cp.add(3, 30, true, true);
        assert!(cp.has_work(1, t0, &holders));
        assert_eq!(cp.next_for(1, t0, &holders), vec![(3, true)]);
        assert!(cp.waiting_for(3, t0, &path, &holders).unwrap().contains("unpaced (asked for)"));
        // A second one waits for the first asked for, not for the background.
        cp.add(1, 10, false, true);
        assert_eq!(cp.next_for(1, t0, &holders), vec![]);
        let why = cp.waiting_for(1, t0, &path, &holders).unwrap();
        assert!(why.contains("asked earlier") && why.contains("/f3") && !why.contains("/f2"), "{why}");
        // The background copy asked for: hurried once, with the next answer.
        cp.succeeded(3);
        cp.add(2, 20, false, true);
        assert!(cp.waiting_for(2, t0, &path, &holders).unwrap().contains("told to hurry"));
        assert_eq!(cp.next_for(1, t0, &holders), vec![(2, true)]);
        assert_eq!(cp.next_for(1, t0, &holders), vec![], "the asked-for lane is busy with /f2 now");
        cp.succeeded(2);
        assert_eq!(cp.next_for(1, t0, &holders), vec![(1, true)]);
        assert_eq!(cp.waiting_for(2, t0, &path, &holders), None, "persisted");
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
        assert_eq!(cp.next_for(1, t0, &holders), vec![(5, false)]);
        assert_eq!(cp.next_for(1, t0, &holders), vec![], "one at a time per worker");
        cp.failed(5, t0, "disk full");
        assert_eq!(cp.error(5), Some("disk full"));
        assert_eq!(cp.next_for(1, t0, &holders), vec![], "backing off");
        assert!(cp.waiting_for(5, t0, &|f| format!("/f{f}"), &holders).unwrap().contains("next try starts in"));
        assert_eq!(cp.next_for(1, t0 + RETRY_FIRST, &holders), vec![(5, false)]);
        cp.failed(5, t0, "disk full");
        assert!(!cp.has_work(1, t0 + RETRY_FIRST, &holders), "the second backoff is longer");
        cp.add(5, 100, false, true);
        assert_eq!(cp.next_for(1, t0, &holders), vec![(5, true)], "asked for: at once");
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

//! DYRS's planning (DYRS, section III-A/B, IV-A, Algorithm 1): each pending
//! migration's target by earliest estimated finish among the workers with room
//! for it (see [`super::room`]), off the heartbeat path, and the binding of just
//! enough of them at each heartbeat.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use thaw_common::proto::BlockReference;

use super::*;

/// Pending migrations a planning pass targets, at most: those in front, plus a
/// margin per worker. Only the front of the order is bound before the next pass,
/// and sorting a long tail every pass would hold the master's lock for nothing.
pub const PLAN_WINDOW: usize = 2048;
pub const PLAN_WINDOW_PER_WORKER: usize = 64;

/// (job bytes, job submission, job order, migration seq): smaller first.
type PendingKey = (u64, u64, u64, u64);

/// A device's migration time model as its worker reports it (see the worker's
/// `Estimate`): `len` bytes take `max(per_migration, len x per_byte)` ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    pub per_byte: f64,
    pub per_migration: f64,
}

impl Cost {
    pub fn of(&self, len: u64) -> f64 {
        self.per_migration.max(self.per_byte * len as f64)
    }

    /// Of `n` blocks of `bytes` in all (sizes unknown): at least the fixed cost
    /// of each, and at least the bytes' transfer.
    pub fn of_queue(&self, n: u32, bytes: u64) -> f64 {
        (self.per_migration * n as f64).max(self.per_byte * bytes as f64)
    }
}

impl Migrations {
    /// Sets the target of every pending migration: the candidate device where it
    /// would finish earliest, given each device's estimate and queue, scanning the
    /// pending list in priority order. Pending blocks that reached memory some
    /// other way are dropped (their jobs become references).
    pub fn plan(&mut self, cluster: &Cluster) {
        if !self.policy.binds_late() {
            return;
        }
        // A migration keeps only live jobs (an evicted or expired job is
        // released from each of its blocks), so one pending with none is an
        // orphan (its jobs left while it was bound elsewhere): dropped here, in
        // the one pass over the pending, without looking jobs up by name.
        let mut orphans = Vec::new();
        let mut in_mem = Vec::new();
        let mut pending: Vec<(PendingKey, u64)> = Vec::new();
        for (&b, m) in &self.migrations {
            if let State::Pending { .. } = m.state {
                if m.jobs.is_empty() {
                    orphans.push(b);
                } else if mem_holder(cluster, b).is_some() {
                    in_mem.push(b);
                } else {
                    pending.push((self.key(m), b));
                }
            }
        }
        for b in orphans {
            self.migrations.remove(&b);
        }
        for b in in_mem {
            let m = self.migrations.remove(&b).expect("listed");
            let w = mem_holder(cluster, b).expect("checked");
            for j in &m.jobs {
                if let Some(job) = self.jobs.get(j) {
                    let r = BlockReference { block_id: b, job: Some(job.job_ref(j)) };
                    self.load(w).out_references.push(r);
                }
            }
        }
        let live = cluster.workers().filter(|w| w.alive).count();
        let window = PLAN_WINDOW + PLAN_WINDOW_PER_WORKER * live;
        if pending.len() > window {
            pending.select_nth_unstable(window);
            pending.truncate(window);
        }
        pending.sort_unstable();
        let estimates = if self.policy == Policy::Naive { self.naive_costs(cluster) } else { self.estimates(cluster) };
        let mut room = self.room(cluster);
        let mut refused = BTreeSet::new();
        let mut finish: HashMap<(u64, Device), f64> = HashMap::new();
        let mut targets: HashMap<(u64, Device), VecDeque<u64>> = HashMap::new();
        let mut no_source = Vec::new();
        for (_, b) in pending {
            let m = &self.migrations[&b];
            let cands = match self.devices_for(cluster, b, m, |w| room.fits(w, m.length)) {
                Devices::Fit(c) => c,
                Devices::NoSource if no_copy(cluster, b, m.ufs.is_some()) => {
                    no_source.push(b);
                    continue;
                }
                Devices::NoSource => Vec::new(),
                Devices::Full(ws) => {
                    refused.extend(ws);
                    let m = self.migrations.get_mut(&b).expect("listed");
                    m.state = State::Pending { target: None };
                    m.no_room = true;
                    continue;
                }
            };
            let mut best: Option<((u64, Device), f64)> = None;
            for c in cands {
                let cost = estimates.get(&c).copied().unwrap_or_default();
                let base = *finish.entry(c).or_insert_with(|| {
                    let w = self.workers.get(&c.0);
                    let queued = w.and_then(|w| w.queued.get(&c.1)).copied().unwrap_or(0);
                    let bytes = w.and_then(|w| w.queued_bytes.get(&c.1)).copied().unwrap_or(0);
                    cost.of_queue(queued, bytes)
                });
                let done = base + cost.of(m.length);
                if best.is_none_or(|(bc, bt)| done < bt || (done == bt && c < bc)) {
                    best = Some((c, done));
                }
            }
            let m = self.migrations.get_mut(&b).expect("listed");
            m.no_room = false;
            match best {
                Some((c, done)) => {
                    m.state = State::Pending { target: Some(c) };
                    room.take(c.0, m.length);
                    finish.insert(c, done);
                    targets.entry(c).or_default().push_back(b);
                }
                None => m.state = State::Pending { target: None },
            }
        }
        self.refused = refused;
        for b in no_source {
            self.give_up(b, None, "no copy of it is left to migrate from");
        }
        self.targets = targets;
    }

    /// Each live worker's room for migrations now (see [`Migrations::room_left`]).
    fn room(&self, cluster: &Cluster) -> Room {
        let now = std::time::Instant::now();
        let mut room = Room::default();
        for w in cluster.workers().filter(|w| w.alive) {
            room.set(w.id, self.room_left(cluster, w.id, now), 0);
        }
        room
    }

    /// Per-device cost models; a part of a model a device has not measured yet
    /// is the mean of the measured ones of its kind, else [`DEFAULT_NS_PER_BYTE`]
    /// (per byte) and 0 (per migration).
    fn estimates(&self, cluster: &Cluster) -> HashMap<(u64, Device), Cost> {
        let mut out = HashMap::new();
        let mut sums: HashMap<Device, [(f64, u32); 2]> = HashMap::new();
        for w in cluster.workers().filter(|w| w.alive) {
            if let Some(l) = self.workers.get(&w.id) {
                for (&d, &c) in &l.costs {
                    out.insert((w.id, d), c);
                    let s = sums.entry(d).or_default();
                    for (i, v) in [c.per_byte, c.per_migration].into_iter().enumerate() {
                        if v > 0.0 {
                            s[i].0 += v;
                            s[i].1 += 1;
                        }
                    }
                }
            }
        }
        let mean = |d: Device, i: usize, default: f64| match sums.get(&d).map(|s| s[i]) {
            Some((s, n)) if n > 0 => s / n as f64,
            _ => default,
        };
        for w in cluster.workers().filter(|w| w.alive) {
            for d in [Device::Disk, Device::Ufs] {
                let c = out.entry((w.id, d)).or_default();
                if c.per_byte <= 0.0 {
                    c.per_byte = mean(d, 0, DEFAULT_NS_PER_BYTE);
                }
                if c.per_migration <= 0.0 {
                    c.per_migration = mean(d, 1, 0.0);
                }
            }
        }
        out
    }

    fn key(&self, m: &Migration) -> PendingKey {
        match self.priority {
            Priority::Fifo => (0, 0, 0, m.seq),
            Priority::SmallestJobFirst => {
                let best = m
                    .jobs
                    .iter()
                    .filter_map(|j| self.jobs.get(j))
                    .map(|j| (j.bytes, j.submitted_ms, j.order))
                    .min()
                    .unwrap_or((u64::MAX, u64::MAX, u64::MAX));
                (best.0, best.1, best.2, m.seq)
            }
        }
    }

    /// Binds blocks targeted at `worker` until each of its device queues holds a
    /// heartbeat interval's worth of work at its estimate, plus one block.
    /// Never past the worker's room: memory taken since the planning pass
    /// (a write) leaves the rest of its targets to the next pass.
    pub(super) fn feed(&mut self, cluster: &Cluster, worker: u64, interval: Duration) {
        let mut left = self.room_left(cluster, worker, std::time::Instant::now());
        for device in [Device::Disk, Device::Ufs] {
            let Some(mut queue) = self.targets.remove(&(worker, device)) else {
                continue;
            };
            let (cost, mut queued_bytes, mut queued) = {
                let load = self.load(worker);
                (
                    load.costs.get(&device).copied().filter(|c| c.per_byte > 0.0 || c.per_migration > 0.0),
                    load.queued_bytes.get(&device).copied().unwrap_or(0),
                    load.queued.get(&device).copied().unwrap_or(0),
                )
            };
            // The device's queue must last an interval at its estimate. A device
            // not measured yet gets only the minimum: binding is final, so wait
            // for its first measurement before trusting it with more.
            let interval_ns = interval.as_nanos() as f64;
            let lasts = |queued: u32, bytes: u64| cost.is_none_or(|c| c.of_queue(queued, bytes) >= interval_ns);
            // The naive policy fills free slots only (see `naive.rs`).
            let naive = self.policy == Policy::Naive;
            while let Some(&b) = queue.front() {
                let still = self
                    .migrations
                    .get(&b)
                    .is_some_and(|m| m.state == State::Pending { target: Some((worker, device)) });
                if !still {
                    queue.pop_front();
                    continue;
                }
                // The running block plus one queued, then enough for an interval.
                if (naive && queued >= NAIVE_SLOTS) || (!naive && queued >= 2 && lasts(queued, queued_bytes)) {
                    break;
                }
                let len = self.migrations[&b].length;
                if len > left {
                    for b in queue.drain(..) {
                        if let Some(m) = self.migrations.get_mut(&b)
                            && m.state == (State::Pending { target: Some((worker, device)) })
                        {
                            m.state = State::Pending { target: None };
                        }
                    }
                    break;
                }
                queue.pop_front();
                self.bind(b, worker, device);
                left -= len;
                queued += 1;
                queued_bytes += len;
            }
            if !queue.is_empty() {
                self.targets.insert((worker, device), queue);
            }
        }
    }

    /// Bytes `worker`'s MEM can still take for migrations, as far as the
    /// master knows at `now`: its free and evictable memory (less writes set
    /// aside and commits not yet in its report) less the migrations bound to
    /// it that its report does not show in memory yet.
    pub fn room_left(&self, cluster: &Cluster, worker: u64, now: Instant) -> u64 {
        let Some(w) = cluster.worker(worker).filter(|w| w.alive) else {
            return 0;
        };
        let bound: u64 = self.workers.get(&worker).map_or(0, |l| l.queued_bytes.values().sum());
        w.mem_room(now).saturating_sub(bound)
    }

    /// [`devices`] for migration `m` of `block` on the live cluster.
    pub(super) fn devices_for(
        &self,
        cluster: &Cluster,
        block: u64,
        m: &Migration,
        fits: impl Fn(u64) -> bool,
    ) -> Devices {
        let (disk, ufs) = sources(cluster, block, m.ufs.is_some());
        devices(&disk, &ufs, &m.failed_on, fits)
    }

    /// Why `blocks` wait for memory: what fills the workers that had no room.
    pub(super) fn waiting(&self, cluster: &Cluster, blocks: u64) -> String {
        let live = cluster.workers().filter(|w| w.alive).count();
        let full: Vec<(&TierUsage, u64)> = self
            .refused
            .iter()
            .filter_map(|id| cluster.worker(*id).filter(|w| w.alive))
            .filter_map(|w| {
                let bound = self.workers.get(&w.id).map_or(0, |l| l.queued_bytes.values().sum());
                w.tier(Tier::Mem).map(|t| (t, bound))
            })
            .collect();
        waiting_text(blocks, &full, live)
    }
}

/// The workers that could migrate `block`: live holders of a DISK replica
/// (with a MEM tier to migrate into), and for a block in the under-store every
/// live worker with a MEM tier.
fn sources(cluster: &Cluster, block: u64, in_ufs: bool) -> (Vec<u64>, Vec<u64>) {
    let has_mem =
        |w: u64| cluster.worker(w).is_some_and(|w| w.alive && w.tier(Tier::Mem).is_some_and(|t| t.capacity > 0));
    let disk: Vec<u64> = cluster
        .block(block)
        .map(|e| e.replicas.iter().filter(|r| r.tier == Tier::Disk && has_mem(r.worker)).map(|r| r.worker).collect())
        .unwrap_or_default();
    let ufs: Vec<u64> =
        if in_ufs { cluster.workers().filter(|w| has_mem(w.id)).map(|w| w.id).collect() } else { Vec::new() };
    (disk, ufs)
}

//! Workers, their liveness, and the block map (block -> replicas on (worker, tier)).
//! Pure state and decisions; the master's RPC layer feeds it time and reports.
//! Replica locations are soft state, rebuilt from block reports after a restart.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use thaw_common::ids::{MAX_BLOCKS_PER_FILE, block_id, file_of_block};
use thaw_common::locality::{ReplicaPlace, level, rank};
use thaw_common::proto::{
    BlockReplica, DeviceState, FileCacheStat, JobAccess, Position, Tier, TierUsage, WorkerInfo, WriteType,
};
use thaw_common::size::format_size;
use thaw_common::{Result, ThawError};

#[derive(Debug, Clone)]
pub struct WorkerEntry {
    pub id: u64,
    pub data_address: String,
    pub host: String,
    pub rack: String,
    pub tiers: Vec<TierUsage>,
    pub alive: bool,
    pub last_heartbeat: Instant,
    /// (block, tier) replicas this worker holds.
    pub blocks: HashSet<(u64, Tier)>,
    /// Blocks the worker must delete, sent with the next heartbeat answer.
    pub pending_removals: Vec<u64>,
    pub jobs: Vec<JobAccess>,
    /// The worker's memory policy's view of files (highest benefit first).
    pub cache_files: Vec<FileCacheStat>,
    /// The worker's emulated devices (evaluation only), as of its last heartbeat.
    pub devices: Vec<DeviceState>,
    /// Where it serves metrics (empty: it does not), for status.
    pub metrics_address: String,
    /// MEM set aside for segments of writes in progress, per file: blocks
    /// handed out and not yet committed (see [`Cluster::choose_segment`]).
    pub reserved: HashMap<u64, Reserved>,
    /// MEM commits this master answered for the worker, and of those the
    /// ones its last full heartbeat did not count yet (`TierUsage.commits`),
    /// with their bytes: its reported use does not show those.
    pub mem_commits: u64,
    pub settling: VecDeque<Settling>,
    /// MEM blocks of deleted files (and their bytes) in `pending_removals`:
    /// still on the worker. And those whose removal went out with the last
    /// heartbeat answer: dropped by the worker as it got it, but still in the
    /// use it reported.
    pub removing: HashMap<u64, u64>,
    pub removed_unreported: HashMap<u64, u64>,
    /// Blocks to unpin, sent with the next full heartbeat answer: another
    /// worker persisted their file.
    pub pending_unpins: Vec<u64>,
}

/// A MEM commit the worker's last report does not count yet.
#[derive(Debug, Clone, Copy)]
pub struct Settling {
    /// Its place in the worker's count of commits (`mem_commits`).
    pub seq: u64,
    pub bytes: u64,
    /// Cache the worker may evict (a cache-through write's, a read's fill).
    pub evictable: bool,
}

/// MEM set aside on one worker for one file's write.
#[derive(Debug, Clone, Copy)]
pub struct Reserved {
    pub blocks: u64,
    pub block_size: u64,
    /// When the last segment was handed out.
    pub at: Instant,
}

/// A segment of a memory write: the worker, and how many blocks it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub worker: u64,
    pub blocks: u64,
}

/// The most one segment of a memory write sets aside (at least one block):
/// a writer holds no more of a worker's memory than this ahead of its bytes,
/// so concurrent writers on one host still find room beside it.
pub const SEGMENT_MAX_BYTES: u64 = 256 << 20;

/// A reservation no segment renewed for this long no longer counts: its
/// writer is gone without the master deleting the file (a lineage rebuild
/// has no writer lease), or slower than any segment needs.
pub const RESERVATION_TTL: Duration = Duration::from_secs(600);

impl WorkerEntry {
    pub fn tier(&self, tier: Tier) -> Option<&TierUsage> {
        self.tiers.iter().find(|t| t.tier == tier as i32)
    }

    fn free(&self, tier: Tier) -> u64 {
        self.tier(tier).map(|t| t.capacity.saturating_sub(t.used)).unwrap_or(0)
    }

    fn place(&self, tier: Tier) -> ReplicaPlace<'_> {
        ReplicaPlace { worker_address: &self.data_address, host: &self.host, rack: &self.rack, tier }
    }

    /// MEM bytes a new block could get here without evicting anything, as
    /// far as the master knows: the free bytes in the worker's last report,
    /// and those of deleted files it has dropped since, less what the master
    /// set aside for writes in progress and what was committed since the
    /// report. A deleted file's blocks count as used until the worker is
    /// told to drop them (its next heartbeat's answer: they are there till then).
    pub fn mem_free(&self, now: Instant) -> u64 {
        self.mem_space(now).0
    }

    /// [`WorkerEntry::mem_free`] and the evictable cache: the bytes a write
    /// could get by evicting (held and pinned blocks are never evicted).
    pub fn mem_room(&self, now: Instant) -> u64 {
        self.mem_space(now).1
    }

    fn mem_space(&self, now: Instant) -> (u64, u64) {
        let Some(t) = self.tier(Tier::Mem) else { return (0, 0) };
        let reserved: u64 = self
            .reserved
            .values()
            .filter(|r| now.saturating_duration_since(r.at) < RESERVATION_TTL)
            .map(|r| r.blocks * r.block_size)
            .sum();
        // Blocks being written are set aside here (`reserved`), not counted twice.
        let used = t.used.saturating_sub(t.writing);
        let dropped = self.removed_unreported.values().sum::<u64>().min(used);
        let settling: u64 = self.settling.iter().map(|s| s.bytes).sum();
        let settling_evictable: u64 = self.settling.iter().filter(|s| s.evictable).map(|s| s.bytes).sum();
        let taken = reserved + settling;
        let free = (t.capacity.saturating_sub(used) + dropped).saturating_sub(taken);
        // Some dropped blocks may be among the evictable ones (a persisted
        // file's), which is not known here: the larger of the two counts.
        let room = (t.capacity.saturating_sub(used) + t.evictable.max(dropped)).saturating_sub(taken);
        (free, (room + settling_evictable).max(free))
    }

    pub fn info(&self, now: Instant) -> WorkerInfo {
        WorkerInfo {
            id: self.id,
            data_address: self.data_address.clone(),
            host: self.host.clone(),
            rack: self.rack.clone(),
            tiers: self.tiers.clone(),
            alive: self.alive,
            last_heartbeat_ms_ago: now.saturating_duration_since(self.last_heartbeat).as_millis() as u64,
            jobs: self.jobs.clone(),
            migration: None,
            devices: self.devices.clone(),
            metrics_address: self.metrics_address.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replica {
    pub worker: u64,
    pub tier: Tier,
}

#[derive(Debug, Clone, Default)]
pub struct BlockEntry {
    pub length: u64,
    pub replicas: Vec<Replica>,
}

#[derive(Default)]
pub struct Cluster {
    workers: BTreeMap<u64, WorkerEntry>,
    by_address: HashMap<String, u64>,
    /// Ordered by block id, so a file's blocks are one range.
    blocks: BTreeMap<u64, BlockEntry>,
    next_worker_id: u64,
    /// The segments still to hand out of memory writes whose length was
    /// known at their create, all set aside then ([`Cluster::plan_write`]).
    plans: HashMap<u64, VecDeque<Segment>>,
}

impl Cluster {
    pub fn worker(&self, id: u64) -> Option<&WorkerEntry> {
        self.workers.get(&id)
    }

    pub fn live_worker_mut(&mut self, id: u64) -> Option<&mut WorkerEntry> {
        self.workers.get_mut(&id).filter(|w| w.alive)
    }

    pub fn workers(&self) -> impl Iterator<Item = &WorkerEntry> {
        self.workers.values()
    }

    /// Registers a worker, replacing any earlier registration at the same address
    /// (a restarted worker): its old replicas are forgotten. Keeps the id.
    /// The worker's count of MEM commits goes on from its report's (it may
    /// have counted some under an earlier master).
    pub fn register(&mut self, data_address: &str, host: &str, rack: &str, tiers: Vec<TierUsage>, now: Instant) -> u64 {
        let mem_commits = tiers.iter().find(|t| t.tier == Tier::Mem as i32).map_or(0, |t| t.commits);
        let id = match self.by_address.get(data_address) {
            Some(&id) => {
                self.forget_replicas(id);
                id
            }
            None => {
                self.next_worker_id += 1;
                self.by_address.insert(data_address.to_string(), self.next_worker_id);
                self.next_worker_id
            }
        };
        self.workers.insert(
            id,
            WorkerEntry {
                id,
                data_address: data_address.to_string(),
                host: host.to_string(),
                rack: rack.to_string(),
                tiers,
                alive: true,
                last_heartbeat: now,
                blocks: HashSet::new(),
                pending_removals: Vec::new(),
                jobs: Vec::new(),
                cache_files: Vec::new(),
                devices: Vec::new(),
                metrics_address: String::new(),
                reserved: HashMap::new(),
                mem_commits,
                settling: VecDeque::new(),
                removing: HashMap::new(),
                removed_unreported: HashMap::new(),
                pending_unpins: Vec::new(),
            },
        );
        id
    }

    fn forget_replicas(&mut self, worker: u64) {
        let Some(w) = self.workers.get_mut(&worker) else {
            return;
        };
        for (block, _) in std::mem::take(&mut w.blocks) {
            if let Some(e) = self.blocks.get_mut(&block) {
                e.replicas.retain(|r| r.worker != worker);
                if e.replicas.is_empty() {
                    self.blocks.remove(&block);
                }
            }
        }
        w.pending_removals.clear();
        w.removing.clear();
        w.removed_unreported.clear();
    }

    /// Declares dead every live worker silent for longer than `timeout`; their
    /// replicas are dropped so reads fail over. Returns their ids.
    /// Counts every live worker as heard from at `now`: the silence was the
    /// master's own (it was stopped or starved), not theirs.
    pub fn forgive_silence(&mut self, now: Instant) {
        for w in self.workers.values_mut().filter(|w| w.alive) {
            w.last_heartbeat = w.last_heartbeat.max(now);
        }
    }

    pub fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<u64> {
        let dead: Vec<u64> = self
            .workers
            .values()
            .filter(|w| w.alive && now.saturating_duration_since(w.last_heartbeat) > timeout)
            .map(|w| w.id)
            .collect();
        for &id in &dead {
            self.forget_replicas(id);
            if let Some(w) = self.workers.get_mut(&id) {
                w.alive = false;
            }
        }
        dead
    }

    pub fn add_replica(&mut self, block: u64, worker: u64, tier: Tier, length: u64) {
        let Some(w) = self.workers.get_mut(&worker) else {
            return;
        };
        if !w.blocks.insert((block, tier)) {
            return;
        }
        let e = self.blocks.entry(block).or_default();
        e.length = length;
        e.replicas.push(Replica { worker, tier });
    }

    pub fn remove_replica(&mut self, block: u64, worker: u64, tier: Tier) {
        if let Some(w) = self.workers.get_mut(&worker) {
            w.blocks.remove(&(block, tier));
        }
        if let Some(e) = self.blocks.get_mut(&block) {
            e.replicas.retain(|r| !(r.worker == worker && r.tier == tier));
            if e.replicas.is_empty() {
                self.blocks.remove(&block);
            }
        }
    }

    pub fn block(&self, block: u64) -> Option<&BlockEntry> {
        self.blocks.get(&block)
    }

    /// Gives back what was set aside for a file's write (it ended).
    pub fn release_reservations(&mut self, file_id: u64) {
        self.plans.remove(&file_id);
        for w in self.workers.values_mut() {
            w.reserved.remove(&file_id);
        }
    }

    /// A worker's MEM commit was answered: the memory set aside for the
    /// block is now used, and not in its reported use until a report counts
    /// it (the worker counts the commits confirmed to it, in the same order).
    /// `evictable`: the block is cache (see [`Settling`]).
    pub fn mem_committed(&mut self, worker: u64, block: u64, length: u64, evictable: bool) {
        let Some(w) = self.workers.get_mut(&worker) else { return };
        let file = file_of_block(block);
        if let Some(r) = w.reserved.get_mut(&file) {
            r.blocks = r.blocks.saturating_sub(1);
            if r.blocks == 0 {
                w.reserved.remove(&file);
            }
        }
        w.mem_commits += 1;
        w.settling.push_back(Settling { seq: w.mem_commits, bytes: length, evictable });
    }

    /// A worker's full heartbeat (its `tiers` set already): its MEM use
    /// shows the commits it counts as confirmed (`TierUsage.commits`) and
    /// the removals the last answer carried, and reservations past their
    /// time are dropped; `removed`: blocks it dropped itself (its report
    /// shows them gone). Call before taking the removals this answer carries.
    /// (A worker that does not count its commits, `commits_counted` unset:
    /// its report is taken to show them all.)
    pub fn reported(&mut self, worker: u64, removed: &[u64], now: Instant) {
        if let Some(w) = self.workers.get_mut(&worker) {
            let (mem_commits, counted) = w.tier(Tier::Mem).map_or((0, false), |t| (t.commits, t.commits_counted));
            for b in removed {
                w.removing.remove(b);
                w.removed_unreported.remove(b);
            }
            if !counted {
                w.settling.clear();
            }
            while w.settling.front().is_some_and(|s| s.seq <= mem_commits) {
                w.settling.pop_front();
            }
            w.removed_unreported = std::mem::take(&mut w.removing);
            w.reserved.retain(|_, r| now.saturating_duration_since(r.at) < RESERVATION_TTL);
        }
    }

    /// Where the next segment of a memory write goes, from block
    /// `first_block` on, and how many blocks it takes ([`Cluster::reserve`]
    /// then sets that much of the worker's MEM aside). Free memory first: the
    /// nearest live worker (the writer's own; among equally near ones the
    /// worker of the segment before, `previous`, else the one with the most
    /// free) while it has a block free; else `previous` while it has (a write
    /// does not hop between workers of equal room); else the one with the
    /// most free. Only when no worker has a block free, the same by room a
    /// write may make by evicting cache; and when none has that either, the
    /// write fails, saying so. A segment takes as many blocks as the blocks
    /// before it (1, 1, 2, 4, ...: a small file sets aside one block, a large
    /// one few segments), at most [`SEGMENT_MAX_BYTES`] and what fits.
    pub fn choose_segment(
        &self,
        client: &Position,
        first_block: u64,
        block_size: u64,
        previous: u64,
        now: Instant,
    ) -> Result<Segment> {
        let bs = block_size.max(1);
        let live: Vec<&WorkerEntry> = self
            .nearest_workers(client)
            .into_iter()
            .filter(|w| w.tier(Tier::Mem).is_some_and(|u| u.capacity > 0))
            .collect();
        if live.is_empty() {
            return Err(ThawError::unavailable("no live worker has a MEM tier; a memory write needs one"));
        }
        let best_level = live.iter().map(|w| level(client, &w.place(Tier::Mem))).min().expect("not empty");
        let nearest: Vec<&WorkerEntry> =
            live.iter().copied().filter(|w| level(client, &w.place(Tier::Mem)) == best_level).collect();
        let cap_blocks = (SEGMENT_MAX_BYTES / bs).max(1);
        for space in [WorkerEntry::mem_free, WorkerEntry::mem_room] {
            let fits = |w: &&WorkerEntry| space(w, now) >= bs;
            let most = |among: &[&WorkerEntry]| {
                among
                    .iter()
                    .copied()
                    .filter(fits)
                    .max_by_key(|w| (space(w, now), std::cmp::Reverse(w.id)))
                    .map(|w| w.id)
            };
            let prev = live.iter().copied().filter(fits).find(|w| w.id == previous).map(|w| w.id);
            let chosen = prev
                .filter(|p| nearest.iter().any(|w| w.id == *p))
                .or_else(|| most(&nearest))
                .or(prev)
                .or_else(|| most(&live));
            if let Some(id) = chosen {
                let w = self.workers.get(&id).expect("live");
                let blocks = first_block.clamp(1, cap_blocks).min(space(w, now) / bs).max(1);
                return Ok(Segment { worker: id, blocks });
            }
        }
        Err(Self::no_room(&live, first_block, bs, None, now))
    }

    /// A memory write of `blocks` blocks whose length its writer said at
    /// create: every segment it will need, placed and set aside at once (the
    /// writer's nearest workers first, most free first, then the others),
    /// or, if the cluster cannot hold all of it, an error before a byte is
    /// sent. Without this, concurrent writers that together want more than
    /// the cluster holds each get part of what they need and can all fail
    /// (four writers of 7 blocks into 24 can each hold 6); with it, as many
    /// as fit get all they need. Free memory first; only if that cannot
    /// hold the file, room by evicting cache too. Call [`Cluster::reserve`]
    /// on the first segment once the file has its id, then
    /// [`Cluster::hold_plan`] with the file id and the rest.
    ///
    /// (Beyond DYRS and Alluxio, which place a block at a time: a write of
    /// known length is admitted whole or not at all.)
    pub fn plan_write(&self, client: &Position, blocks: u64, block_size: u64, now: Instant) -> Result<Vec<Segment>> {
        let bs = block_size.max(1);
        let blocks = blocks.max(1);
        let mut live: Vec<&WorkerEntry> = self
            .nearest_workers(client)
            .into_iter()
            .filter(|w| w.tier(Tier::Mem).is_some_and(|u| u.capacity > 0))
            .collect();
        if live.is_empty() {
            return Err(ThawError::unavailable("no live worker has a MEM tier; a memory write needs one"));
        }
        let cap_blocks = (SEGMENT_MAX_BYTES / bs).max(1);
        let mut most_placed = 0;
        for space in [WorkerEntry::mem_free, WorkerEntry::mem_room] {
            live.sort_by_key(|w| (level(client, &w.place(Tier::Mem)), std::cmp::Reverse(space(w, now)), w.id));
            let mut plan = Vec::new();
            let mut placed = 0;
            for w in &live {
                let mut here = (space(w, now) / bs).min(blocks - placed);
                while here > 0 {
                    let n = here.min(cap_blocks);
                    plan.push(Segment { worker: w.id, blocks: n });
                    (placed, here) = (placed + n, here - n);
                }
                if placed == blocks {
                    return Ok(plan);
                }
            }
            most_placed = most_placed.max(placed);
        }
        Err(Self::no_room(&live, most_placed, bs, Some(blocks), now))
    }

    /// Keeps the segments of `file`'s write after its first (from
    /// [`Cluster::plan_write`]), setting their memory aside.
    pub fn hold_plan(&mut self, file: u64, rest: Vec<Segment>, block_size: u64, now: Instant) {
        for seg in &rest {
            self.reserve(*seg, file, block_size, now);
        }
        if !rest.is_empty() {
            self.plans.insert(file, rest.into());
        }
    }

    /// The next planned segment of `file`'s write, if its worker is live
    /// and its memory still set aside for it (else none: the write's next
    /// segment is placed as if unplanned, [`Cluster::choose_segment`]).
    pub fn next_planned(&mut self, file: u64, now: Instant) -> Option<Segment> {
        let plan = self.plans.get_mut(&file)?;
        let seg = plan.pop_front()?;
        if plan.is_empty() {
            self.plans.remove(&file);
        }
        let w = self.workers.get_mut(&seg.worker).filter(|w| w.alive)?;
        let r = w
            .reserved
            .get_mut(&file)
            .filter(|r| r.blocks >= seg.blocks && now.saturating_duration_since(r.at) < RESERVATION_TTL)?;
        r.at = now;
        Some(seg)
    }

    /// The error of a memory write that finds no room: what the cluster's
    /// MEM holds, and what of it can never be evicted. `whole`: the blocks
    /// of a write planned whole (its length known): then the error compares
    /// the write's size with the cluster's free memory.
    fn no_room(live: &[&WorkerEntry], first_block: u64, bs: u64, whole: Option<u64>, now: Instant) -> ThawError {
        let tiers: Vec<&TierUsage> = live.iter().filter_map(|w| w.tier(Tier::Mem)).collect();
        let cap: u64 = tiers.iter().map(|t| t.capacity).sum();
        let used: u64 = tiers.iter().map(|t| t.used).sum();
        let kept: u64 = tiers.iter().map(|t| t.held + t.pinned).sum();
        let set_aside: u64 = live.iter().flat_map(|w| w.reserved.values()).map(|r| r.blocks * r.block_size).sum();
        let state = format!(
            "the {} live workers' MEM tiers hold {} of {} ({} of it held for jobs or not persisted elsewhere, never \
             evicted), {} more is set aside for writes in progress",
            live.len(),
            format_size(used),
            format_size(cap),
            format_size(kept),
            format_size(set_aside),
        );
        let Some(n) = whole else {
            return ThawError::exhausted(format!(
                "no worker has room in memory for block {first_block} ({}): {state}; a memory write holds at most \
                 the cluster's free memory",
                format_size(bs)
            ));
        };
        // Free: what a write could get, evicting cache, in whole blocks.
        let free: u64 = live.iter().map(|w| w.mem_room(now) / bs * bs).sum();
        ThawError::exhausted(format!(
            "this write of {} is larger than the cluster's free memory ({}, counting cache it may evict), so none \
             of it is written: {state}; write it cache-through (memory keeps what fits), or free memory first",
            format_size(n.saturating_mul(bs)),
            format_size(free),
        ))
    }

    /// Sets a segment's blocks aside on its worker for `file`'s write, until
    /// they are committed or the write ends.
    pub fn reserve(&mut self, seg: Segment, file: u64, block_size: u64, now: Instant) {
        if let Some(w) = self.workers.get_mut(&seg.worker) {
            let r = w.reserved.entry(file).or_insert(Reserved { blocks: 0, block_size, at: now });
            r.blocks += seg.blocks;
            r.at = now;
        }
    }

    /// Forgets every block of a file and queues its deletion on the workers.
    pub fn drop_file(&mut self, file_id: u64) {
        self.release_reservations(file_id);
        let range = block_id(file_id, 0)..block_id(file_id, MAX_BLOCKS_PER_FILE - 1) + 1;
        let ids: Vec<u64> = self.blocks.range(range).map(|(id, _)| *id).collect();
        for id in ids {
            let entry = self.blocks.remove(&id).expect("listed");
            for r in entry.replicas {
                if let Some(w) = self.workers.get_mut(&r.worker) {
                    w.blocks.remove(&(id, r.tier));
                    w.pending_removals.push(id);
                    if r.tier == Tier::Mem {
                        w.removing.insert(id, entry.length);
                    }
                }
            }
        }
    }

    /// Live workers holding every one of a file's `blocks` blocks (in any tier):
    /// those that can write its checkpoint alone.
    pub fn holders(&self, file_id: u64, blocks: u64) -> Vec<u64> {
        if blocks == 0 {
            // An empty file: any live worker writes it.
            return self.workers.values().filter(|w| w.alive).map(|w| w.id).collect();
        }
        let mut holders: Option<Vec<u64>> = None;
        for index in 0..blocks {
            let here: Vec<u64> = match self.blocks.get(&block_id(file_id, index)) {
                Some(e) => e.replicas.iter().map(|r| r.worker).collect(),
                None => return Vec::new(),
            };
            let mut next = holders.take().unwrap_or_else(|| here.clone());
            next.retain(|w| here.contains(w));
            next.sort_unstable();
            next.dedup();
            if next.is_empty() {
                return next;
            }
            holders = Some(next);
        }
        let mut out = holders.unwrap_or_default();
        out.retain(|w| self.workers.get(w).is_some_and(|w| w.alive));
        out
    }

    /// Live workers that can write the file's checkpoint: those holding it
    /// whole; else, for a file spread over several workers (a segmented
    /// write) whose every block has a live replica, those holding some of it,
    /// most blocks first (each reads the blocks it lacks from the others).
    pub fn checkpoint_writers(&self, file_id: u64, blocks: u64) -> Vec<u64> {
        let whole = self.holders(file_id, blocks);
        if !whole.is_empty() || blocks == 0 {
            return whole;
        }
        let mut held: BTreeMap<u64, u64> = BTreeMap::new();
        for index in 0..blocks {
            let live: Vec<u64> = self
                .blocks
                .get(&block_id(file_id, index))
                .map(|e| {
                    e.replicas
                        .iter()
                        .map(|r| r.worker)
                        .filter(|w| self.workers.get(w).is_some_and(|w| w.alive))
                        .collect()
                })
                .unwrap_or_default();
            if live.is_empty() {
                return Vec::new();
            }
            for w in live {
                *held.entry(w).or_default() += 1;
            }
        }
        let mut out: Vec<(u64, u64)> = held.into_iter().collect();
        out.sort_by_key(|&(w, n)| (std::cmp::Reverse(n), w));
        out.into_iter().map(|(w, _)| w).collect()
    }

    /// Per block of the file: "" if `worker` holds it, else the data address
    /// of a live worker that does (MEM first). Empty if `worker` holds all.
    pub fn block_sources(&self, file_id: u64, blocks: u64, worker: u64) -> Vec<String> {
        let mut out = Vec::with_capacity(blocks as usize);
        let mut any = false;
        for index in 0..blocks {
            let Some(e) = self.blocks.get(&block_id(file_id, index)) else {
                out.push(String::new());
                continue;
            };
            if e.replicas.iter().any(|r| r.worker == worker) {
                out.push(String::new());
                continue;
            }
            let mut rs: Vec<&Replica> =
                e.replicas.iter().filter(|r| self.workers.get(&r.worker).is_some_and(|w| w.alive)).collect();
            rs.sort_by_key(|r| (r.tier != Tier::Mem, r.worker));
            let addr = rs.first().and_then(|r| self.workers.get(&r.worker)).map(|w| w.data_address.clone());
            any |= addr.is_some();
            out.push(addr.unwrap_or_default());
        }
        if any { out } else { Vec::new() }
    }

    /// Queues the unpinning of a persisted file's blocks on the live workers
    /// holding them, but `except` (it unpins its own).
    pub fn unpin_file(&mut self, file_id: u64, blocks: u64, except: u64) {
        for index in 0..blocks {
            let b = block_id(file_id, index);
            let Some(e) = self.blocks.get(&b) else { continue };
            for r in &e.replicas {
                if r.worker != except
                    && let Some(w) = self.workers.get_mut(&r.worker)
                {
                    w.pending_unpins.push(b);
                }
            }
        }
    }

    /// Whether some block of the file (of `blocks`) has no replica left.
    pub fn missing_block(&self, file_id: u64, blocks: u64) -> bool {
        (0..blocks).any(|i| !self.blocks.contains_key(&block_id(file_id, i)))
    }

    /// Blocks with at least one replica: all, in MEM, on DISK.
    pub fn block_counts(&self) -> [usize; 3] {
        let has = |e: &BlockEntry, t| e.replicas.iter().any(|r| r.tier == t);
        let mut n = [0; 3];
        for e in self.blocks.values().filter(|e| !e.replicas.is_empty()) {
            n[0] += 1;
            n[1] += has(e, Tier::Mem) as usize;
            n[2] += has(e, Tier::Disk) as usize;
        }
        n
    }

    pub fn blocks_in_memory(&self) -> usize {
        self.blocks.values().filter(|e| e.replicas.iter().any(|r| r.tier == Tier::Mem)).count()
    }

    /// A block's replicas, ordered by locality level to `client` (CAVA, section III-A).
    pub fn ordered_replicas(&self, block: u64, client: &Position) -> Vec<BlockReplica> {
        let Some(e) = self.blocks.get(&block) else {
            return Vec::new();
        };
        let mut out: Vec<(_, BlockReplica)> = e
            .replicas
            .iter()
            .filter_map(|r| {
                let w = self.workers.get(&r.worker).filter(|w| w.alive)?;
                let place = w.place(r.tier);
                Some((
                    (rank(client, &place), w.id),
                    BlockReplica {
                        worker_id: w.id,
                        data_address: w.data_address.clone(),
                        host: w.host.clone(),
                        rack: w.rack.clone(),
                        tier: r.tier as i32,
                        locality: level(client, &place) as i32,
                    },
                ))
            })
            .collect();
        out.sort_by_key(|(k, _)| *k);
        out.into_iter().map(|(_, r)| r).collect()
    }

    /// Live workers ordered by how close they are to `client`.
    pub fn nearest_workers(&self, client: &Position) -> Vec<&WorkerEntry> {
        let mut live: Vec<&WorkerEntry> = self.workers.values().filter(|w| w.alive).collect();
        live.sort_by_key(|w| (rank(client, &w.place(Tier::Mem)), w.id));
        live
    }

    /// Where to stream a new file: the nearest live worker with room in the tier the
    /// write type needs (or `replication` distinct workers for replicated-disk writes).
    pub fn choose_writers(
        &self,
        client: &Position,
        write_type: WriteType,
        replication: u32,
    ) -> Result<Vec<&WorkerEntry>> {
        let (tier, count) = match write_type {
            WriteType::MustCache | WriteType::CacheThrough | WriteType::AsyncThrough => (Some(Tier::Mem), 1),
            WriteType::Through => (None, 1),
            WriteType::ReplicatedDisk => (Some(Tier::Disk), replication.max(1) as usize),
            WriteType::Unspecified => return Err(ThawError::invalid("write type is unspecified")),
        };
        let mut candidates: Vec<&WorkerEntry> = self
            .nearest_workers(client)
            .into_iter()
            .filter(|w| tier.is_none_or(|t| w.tier(t).is_some_and(|u| u.capacity > 0)))
            .collect();
        if let Some(t) = tier {
            // Among equally near workers, the one with the most room first.
            candidates.sort_by_key(|w| (level(client, &w.place(Tier::Mem)), std::cmp::Reverse(w.free(t))));
        }
        if candidates.len() < count {
            return Err(ThawError::unavailable(format!(
                "{} live worker(s) with a {} tier; this write needs {count}",
                candidates.len(),
                tier.map(|t| t.as_str_name()).unwrap_or("any")
            )));
        }
        candidates.truncate(count);
        Ok(candidates)
    }
}

#[cfg(test)]
mod tests;

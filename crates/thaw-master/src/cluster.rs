//! The cluster as the master knows it. Here: its membership (workers by
//! address, their host and rack, liveness, and each one's memory as the
//! master counts it between reports); the block map (block -> replicas on
//! (worker, tier)) in `blocks.rs`; where new writes go, and the memory set
//! aside for them, in `writes.rs`. The types are all here; the two files
//! add methods. Pure state and decisions; the master's RPC layer feeds it
//! time and reports. Replica locations are soft state, rebuilt from block
//! reports after a restart.

mod blocks;
mod writes;

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
    /// When this registration was made (a restarted worker registers again).
    pub registered: Instant,
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
    /// less what the master set aside for writes in progress and what was
    /// committed since the report. A deleted file's blocks count as used
    /// until a report shows them gone: the worker drops them when an answer
    /// tells it to and reports that at once. (Counting them free as soon as
    /// the answer went out raced with the drop: a block placed in between
    /// found the worker full.)
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
        let settling: u64 = self.settling.iter().map(|s| s.bytes).sum();
        let settling_evictable: u64 = self.settling.iter().filter(|s| s.evictable).map(|s| s.bytes).sum();
        let taken = reserved + settling;
        let free = t.capacity.saturating_sub(used).saturating_sub(taken);
        let room = (t.capacity.saturating_sub(used) + t.evictable).saturating_sub(taken);
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
            registered_ms_ago: now.saturating_duration_since(self.registered).as_millis() as u64,
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
                registered: now,
                blocks: HashSet::new(),
                pending_removals: Vec::new(),
                jobs: Vec::new(),
                cache_files: Vec::new(),
                devices: Vec::new(),
                metrics_address: String::new(),
                reserved: HashMap::new(),
                mem_commits,
                settling: VecDeque::new(),
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
    }

    /// Counts every live worker as heard from at `now`: the silence was the
    /// master's own (it was stopped or starved), not theirs.
    pub fn forgive_silence(&mut self, now: Instant) {
        for w in self.workers.values_mut().filter(|w| w.alive) {
            w.last_heartbeat = w.last_heartbeat.max(now);
        }
    }

    /// Declares dead every live worker silent for longer than `timeout`; their
    /// replicas are dropped so reads fail over. Returns their ids.
    pub fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<u64> {
        let dead: Vec<u64> = self
            .workers
            .values()
            .filter(|w| w.alive && now.saturating_duration_since(w.last_heartbeat) > timeout)
            .map(|w| w.id)
            .collect();
        for &id in &dead {
            self.declare_dead(id);
        }
        dead
    }

    /// Declares a live worker dead now; its replicas are dropped so reads
    /// fail over. False if it was not alive.
    pub fn declare_dead(&mut self, id: u64) -> bool {
        if self.worker(id).is_none_or(|w| !w.alive) {
            return false;
        }
        self.forget_replicas(id);
        if let Some(w) = self.workers.get_mut(&id) {
            w.alive = false;
        }
        true
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

    /// A worker's report of its use (its `tiers` set already): its MEM use
    /// shows the commits it counts as confirmed (`TierUsage.commits`), and
    /// reservations past their time are dropped. (A worker that does not
    /// count its commits, `commits_counted` unset: its report is taken to
    /// show them all.)
    pub fn reported(&mut self, worker: u64, now: Instant) {
        if let Some(w) = self.workers.get_mut(&worker) {
            let (mem_commits, counted) = w.tier(Tier::Mem).map_or((0, false), |t| (t.commits, t.commits_counted));
            if !counted {
                w.settling.clear();
            }
            while w.settling.front().is_some_and(|s| s.seq <= mem_commits) {
                w.settling.pop_front();
            }
            w.reserved.retain(|_, r| now.saturating_duration_since(r.at) < RESERVATION_TTL);
        }
    }

    /// Live workers ordered by how close they are to `client`.
    pub fn nearest_workers(&self, client: &Position) -> Vec<&WorkerEntry> {
        let mut live: Vec<&WorkerEntry> = self.workers.values().filter(|w| w.alive).collect();
        live.sort_by_key(|w| (rank(client, &w.place(Tier::Mem)), w.id));
        live
    }
}

#[cfg(test)]
mod tests;

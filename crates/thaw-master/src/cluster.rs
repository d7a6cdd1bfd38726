//! Workers, their liveness, and the block map (block -> replicas on (worker, tier)).
//! Pure state and decisions; the master's RPC layer feeds it time and reports.
//! Replica locations are soft state, rebuilt from block reports after a restart.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use thaw_common::ids::{MAX_BLOCKS_PER_FILE, block_id};
use thaw_common::locality::{ReplicaPlace, level, rank};
use thaw_common::proto::{
    BlockReplica, DeviceState, FileCacheStat, JobAccess, Position, Tier, TierUsage, WorkerInfo, WriteType,
};
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
}

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
    pub fn register(&mut self, data_address: &str, host: &str, rack: &str, tiers: Vec<TierUsage>, now: Instant) -> u64 {
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

    /// Forgets every block of a file and queues its deletion on the workers.
    pub fn drop_file(&mut self, file_id: u64) {
        let range = block_id(file_id, 0)..block_id(file_id, MAX_BLOCKS_PER_FILE - 1) + 1;
        let ids: Vec<u64> = self.blocks.range(range).map(|(id, _)| *id).collect();
        for id in ids {
            let entry = self.blocks.remove(&id).expect("listed");
            for r in entry.replicas {
                if let Some(w) = self.workers.get_mut(&r.worker) {
                    w.blocks.remove(&(id, r.tier));
                    w.pending_removals.push(id);
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

    /// A block's replicas, ordered by locality level to `client` (cava.txt III-A).
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
mod tests {
    use super::*;

    fn tiers(mem: u64, disk: u64) -> Vec<TierUsage> {
        vec![
            TierUsage { tier: Tier::Mem as i32, capacity: mem, ..Default::default() },
            TierUsage { tier: Tier::Disk as i32, capacity: disk, ..Default::default() },
        ]
    }

    fn pos(host: &str, rack: &str) -> Position {
        Position { host: host.into(), rack: rack.into(), worker_address: String::new() }
    }

    #[test]
    fn dead_workers_lose_replicas_and_reads_fail_over() {
        let t0 = Instant::now();
        let mut c = Cluster::default();
        let a = c.register("a:1", "h1", "r1", tiers(100, 100), t0);
        let b = c.register("b:1", "h2", "r1", tiers(100, 100), t0);
        let blk = block_id(7, 0);
        c.add_replica(blk, a, Tier::Mem, 10);
        c.add_replica(blk, b, Tier::Disk, 10);
        let order: Vec<_> = c.ordered_replicas(blk, &pos("h2", "r1")).iter().map(|r| r.worker_id).collect();
        // Host-disk (b) ranks below rack-memory (a).
        assert_eq!(order, vec![a, b]);
        c.workers.get_mut(&b).unwrap().last_heartbeat = t0 + Duration::from_secs(10);
        let dead = c.expire(t0 + Duration::from_secs(10), Duration::from_secs(5));
        assert_eq!(dead, vec![a]);
        let order: Vec<_> = c.ordered_replicas(blk, &pos("h2", "r1")).iter().map(|r| r.worker_id).collect();
        assert_eq!(order, vec![b]);
        // Re-registration at the same address keeps the id and starts clean.
        assert_eq!(c.register("a:1", "h1", "r1", tiers(100, 100), t0), a);
        assert!(c.worker(a).unwrap().alive && c.worker(a).unwrap().blocks.is_empty());
    }

    #[test]
    fn writers_are_local_first_and_distinct() {
        let t0 = Instant::now();
        let mut c = Cluster::default();
        let a = c.register("a:1", "h1", "r1", tiers(100, 100), t0);
        let b = c.register("b:1", "h2", "r1", tiers(100, 100), t0);
        let d = c.register("d:1", "h3", "r2", tiers(0, 100), t0);
        let ids = |v: Vec<&WorkerEntry>| v.iter().map(|w| w.id).collect::<Vec<_>>();
        assert_eq!(ids(c.choose_writers(&pos("h2", "r1"), WriteType::MustCache, 1).unwrap()), vec![b]);
        // A worker with no MEM tier never takes a memory write.
        assert_eq!(ids(c.choose_writers(&pos("h3", "r2"), WriteType::MustCache, 1).unwrap()).len(), 1);
        assert_ne!(ids(c.choose_writers(&pos("h3", "r2"), WriteType::MustCache, 1).unwrap()), vec![d]);
        assert_eq!(ids(c.choose_writers(&pos("h3", "r2"), WriteType::Through, 1).unwrap()), vec![d]);
        let three = ids(c.choose_writers(&pos("h1", "r1"), WriteType::ReplicatedDisk, 3).unwrap());
        assert_eq!(three[0], a);
        assert_eq!(three.iter().collect::<HashSet<_>>().len(), 3);
        assert!(c.choose_writers(&pos("h1", "r1"), WriteType::ReplicatedDisk, 4).is_err());
    }

    #[test]
    fn dropping_a_file_queues_removal_of_only_its_blocks() {
        let t0 = Instant::now();
        let mut c = Cluster::default();
        let a = c.register("a:1", "h1", "r1", tiers(100, 100), t0);
        for i in 0..3 {
            c.add_replica(block_id(5, i), a, Tier::Mem, 1);
        }
        c.add_replica(block_id(6, 0), a, Tier::Mem, 1);
        c.add_replica(block_id(4, 9), a, Tier::Mem, 1);
        c.drop_file(5);
        let mut removed = c.worker(a).unwrap().pending_removals.clone();
        removed.sort();
        assert_eq!(removed, vec![block_id(5, 0), block_id(5, 1), block_id(5, 2)]);
        assert!(c.block(block_id(6, 0)).is_some() && c.block(block_id(4, 9)).is_some());
    }
}

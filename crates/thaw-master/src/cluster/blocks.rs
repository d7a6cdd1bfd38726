//! The cluster's block map: which workers hold each block, in which tier
//! ([`Replica`]), what reads are told (replicas nearest first), which
//! workers can checkpoint a file, and a deleted file's blocks queued for
//! removal on the workers holding them.

use super::*;

impl Cluster {
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
        self.release_reservations(file_id);
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

    /// Worker `worker`'s `tier` as a replica seen from `client` (a block's
    /// migration target: where it will be); none if the worker is not alive.
    pub fn replica_at(&self, worker: u64, tier: Tier, client: &Position) -> Option<BlockReplica> {
        let w = self.workers.get(&worker).filter(|w| w.alive)?;
        let place = w.place(tier);
        Some(BlockReplica {
            worker_id: w.id,
            data_address: w.data_address.clone(),
            host: w.host.clone(),
            rack: w.rack.clone(),
            tier: tier as i32,
            locality: level(client, &place) as i32,
        })
    }
}

//! Where new writes go: the workers a write streams to
//! ([`Cluster::choose_writers`]), a memory write's segments (one at a time,
//! or its whole length planned at create) and the memory set aside on each
//! worker until the segment's blocks are committed.

use super::*;

impl Cluster {
    /// Gives back what was set aside for a file's write (it ended).
    pub fn release_reservations(&mut self, file_id: u64) {
        self.plans.remove(&file_id);
        for w in self.workers.values_mut() {
            w.reserved.remove(&file_id);
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

    /// Where to stream a new file: the nearest live worker with room in the tier the
    /// write type needs (or `replication` distinct workers for replicated-disk writes).
    pub fn choose_writers(
        &self,
        client: &Position,
        write_type: WriteType,
        replication: u32,
    ) -> Result<Vec<&WorkerEntry>> {
        let meaning = thaw_common::write_type::known(write_type)?;
        let (tier, count) = (meaning.tier, meaning.copies(replication));
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

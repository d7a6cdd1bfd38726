//! A storage tier: a directory of block files with an enforced capacity. Space is
//! reserved before bytes are written, so concurrent writers can never overfill it.
//! Blocks are written under `tmp/` and renamed into `blocks/` when complete, so a
//! crash never leaves a partial block where a reader could see it.
//!
//! A full tier makes room ([`TierStore::reserve_evicting`]): blocks that are
//! neither pinned (no copy anywhere else) nor protected by the caller (a job
//! still expects them) are a cache, and the replacement policy
//! ([`crate::replacement`]) picks which of them go. The tier keeps each block's
//! access history for it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use thaw_common::proto::{BlockReport, Tier, TierUsage};
use thaw_common::size::format_size;
use thaw_common::{Result, ThawError};

use crate::replacement::{Candidate, Policy};

/// A stored block.
#[derive(Debug, Clone, Copy)]
struct Entry {
    length: u64,
    /// No copy exists anywhere else (written to this tier only): never evicted.
    pinned: bool,
    last_access: u64,
    /// Reads since admission (LFU's history).
    hits: u64,
}

#[derive(Debug, Default)]
struct TierState {
    /// Bytes of stored blocks plus outstanding reservations.
    used: u64,
    blocks: HashMap<u64, Entry>,
    /// Logical clock of admissions and accesses (the policy's notion of time).
    clock: u64,
    /// Blocks and bytes the replacement policy has evicted since start.
    evictions: u64,
    evicted_bytes: u64,
}

#[derive(Debug)]
pub struct TierStore {
    pub tier: Tier,
    dir: PathBuf,
    capacity: u64,
    policy: Policy,
    state: Mutex<TierState>,
}

/// What a tier's bytes are, for status: `held` and `pinned` are protected,
/// `evictable` is the cache the policy may evict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Split {
    pub held: u64,
    pub pinned: u64,
    pub evictable: u64,
    /// Reserved for blocks being written.
    pub in_flight: u64,
}

/// Space held for a block being written; given back on drop unless committed.
pub struct Reservation {
    store: Arc<TierStore>,
    bytes: u64,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            let mut st = self.store.lock();
            st.used = st.used.saturating_sub(self.bytes);
        }
    }
}

impl TierStore {
    /// Opens the tier at `dir`. With `wipe` (the MEM tier: memory does not survive a
    /// restart) every old block is deleted; otherwise blocks found are kept.
    /// Partial blocks under `tmp/` are always deleted. Blocks found are pinned:
    /// nothing says whether another copy of them exists.
    pub fn open(tier: Tier, dir: &Path, capacity: u64, wipe: bool, policy: Policy) -> Result<Arc<Self>> {
        let blocks_dir = dir.join("blocks");
        let tmp_dir = dir.join("tmp");
        if wipe && blocks_dir.exists() {
            std::fs::remove_dir_all(&blocks_dir)?;
        }
        if tmp_dir.exists() {
            std::fs::remove_dir_all(&tmp_dir)?;
        }
        std::fs::create_dir_all(&blocks_dir)
            .map_err(|e| ThawError::from(e).context(format!("tier directory {}", blocks_dir.display())))?;
        std::fs::create_dir_all(&tmp_dir)?;
        let mut state = TierState::default();
        for entry in std::fs::read_dir(&blocks_dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.parse::<u64>().ok()) else {
                continue;
            };
            let length = entry.metadata()?.len();
            state.used += length;
            state.blocks.insert(id, Entry { length, pinned: true, last_access: 0, hits: 0 });
        }
        Ok(Arc::new(TierStore { tier, dir: dir.to_path_buf(), capacity, policy, state: Mutex::new(state) }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TierState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn name(&self) -> &'static str {
        match self.tier {
            Tier::Mem => "MEM",
            Tier::Disk => "DISK",
            Tier::Unspecified => "?",
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Holds `bytes` of space, evicting cached blocks by the replacement policy
    /// if the tier is full. `protected`: blocks a job still expects (never
    /// evicted, nor are pinned ones). Returns the reservation, or a "full" error
    /// saying what the tier holds, and the blocks evicted (id, length), whose
    /// files are gone. Nothing is evicted unless the eviction makes room.
    pub fn reserve_evicting(
        self: &Arc<Self>,
        bytes: u64,
        protected: &dyn Fn(u64) -> bool,
    ) -> (Result<Reservation>, Vec<(u64, u64)>) {
        let mut st = self.lock();
        let mut evicted = Vec::new();
        if st.used + bytes > self.capacity {
            let need = (st.used + bytes).saturating_sub(self.capacity);
            let candidates: Vec<Candidate> = st
                .blocks
                .iter()
                .filter(|(b, e)| !e.pinned && !protected(**b))
                .map(|(&block, e)| Candidate { block, length: e.length, last_access: e.last_access, hits: e.hits })
                .collect();
            let victims = if bytes > self.capacity { None } else { self.policy.victims(&candidates, need) };
            let Some(victims) = victims else {
                let split = split(&st, protected);
                let e = ThawError::exhausted(format!(
                    "{} tier is full: {} used of {}, {} more needed ({} held for jobs, {} not persisted anywhere else, {} being written, {} evictable)",
                    self.name(),
                    format_size(st.used),
                    format_size(self.capacity),
                    format_size(bytes),
                    format_size(split.held),
                    format_size(split.pinned),
                    format_size(split.in_flight),
                    format_size(split.evictable),
                ));
                return (Err(e), evicted);
            };
            for b in victims {
                let e = st.blocks.remove(&b).expect("a candidate");
                st.used = st.used.saturating_sub(e.length);
                st.evictions += 1;
                st.evicted_bytes += e.length;
                evicted.push((b, e.length));
            }
        }
        st.used += bytes;
        drop(st);
        for (b, _) in &evicted {
            self.delete_file(*b);
        }
        (Ok(Reservation { store: self.clone(), bytes }), evicted)
    }

    /// A read of `block`: the replacement policy's access history.
    pub fn touch(&self, block: u64) {
        let mut st = self.lock();
        st.clock += 1;
        let now = st.clock;
        if let Some(e) = st.blocks.get_mut(&block) {
            e.last_access = now;
            e.hits += 1;
        }
    }

    /// Where the tier's bytes are: held (`protected`), pinned, evictable, or
    /// reserved for writes.
    pub fn split(&self, protected: &dyn Fn(u64) -> bool) -> Split {
        split(&self.lock(), protected)
    }

    /// Blocks and bytes the replacement policy evicted since start.
    pub fn evictions(&self) -> (u64, u64) {
        let st = self.lock();
        (st.evictions, st.evicted_bytes)
    }

    pub fn block_path(&self, block: u64) -> PathBuf {
        self.dir.join("blocks").join(block.to_string())
    }

    /// A fresh temporary path for a block being written.
    pub fn temp_path(&self, block: u64) -> PathBuf {
        self.dir.join("tmp").join(format!("{block}.{:016x}", rand::random::<u64>()))
    }

    /// Moves a fully written temp file into place. The reservation becomes the
    /// block's exact length. Replacing an existing copy of the block is allowed.
    /// `pinned`: no other copy of the block exists (it is never evicted).
    pub fn commit(
        &self,
        block: u64,
        temp: &Path,
        length: u64,
        mut reservation: Reservation,
        pinned: bool,
    ) -> Result<()> {
        std::fs::rename(temp, self.block_path(block))?;
        let mut st = self.lock();
        let held = std::mem::take(&mut reservation.bytes);
        st.used = st.used.saturating_sub(held) + length;
        st.clock += 1;
        let entry = Entry { length, pinned, last_access: st.clock, hits: 0 };
        if let Some(old) = st.blocks.insert(block, entry) {
            st.used = st.used.saturating_sub(old.length);
        }
        Ok(())
    }

    /// Deletes a block; returns its length if it was here.
    pub fn remove(&self, block: u64) -> Option<u64> {
        let len = {
            let mut st = self.lock();
            let len = st.blocks.remove(&block)?.length;
            st.used = st.used.saturating_sub(len);
            len
        };
        self.delete_file(block);
        Some(len)
    }

    fn delete_file(&self, block: u64) {
        if let Err(e) = std::fs::remove_file(self.block_path(block)) {
            tracing::warn!(block, error = %e, "could not delete block file");
        }
    }

    /// Another copy of the block exists now (its file was persisted): the
    /// replacement policy may evict it like any cache.
    pub fn unpin(&self, block: u64) {
        if let Some(e) = self.lock().blocks.get_mut(&block) {
            e.pinned = false;
        }
    }

    pub fn get(&self, block: u64) -> Option<u64> {
        self.lock().blocks.get(&block).map(|e| e.length)
    }

    /// The tier's use; `protected` as for [`TierStore::split`].
    pub fn usage(&self, protected: &dyn Fn(u64) -> bool) -> TierUsage {
        let st = self.lock();
        let s = split(&st, protected);
        TierUsage {
            tier: self.tier as i32,
            capacity: self.capacity,
            used: st.used,
            blocks: st.blocks.len() as u64,
            dir: self.dir.display().to_string(),
            held: s.held,
            pinned: s.pinned,
            evictable: s.evictable,
            replacement: self.policy.name().to_string(),
            evictions: st.evictions,
            evicted_bytes: st.evicted_bytes,
        }
    }

    pub fn report(&self) -> Vec<BlockReport> {
        self.lock()
            .blocks
            .iter()
            .map(|(&block_id, e)| BlockReport { block_id, tier: self.tier as i32, length: e.length })
            .collect()
    }

    /// Removes the whole tier directory (a local cluster's MEM tier on shutdown).
    pub fn destroy(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn split(st: &TierState, protected: &dyn Fn(u64) -> bool) -> Split {
    let mut s = Split::default();
    let mut stored = 0;
    for (b, e) in &st.blocks {
        stored += e.length;
        if e.pinned {
            s.pinned += e.length;
        } else if protected(*b) {
            s.held += e.length;
        } else {
            s.evictable += e.length;
        }
    }
    s.in_flight = st.used.saturating_sub(stored);
    s
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    fn open(dir: &Path, capacity: u64, tier: Tier) -> Arc<TierStore> {
        open_with(dir, capacity, tier, Policy::Lru)
    }

    fn open_with(dir: &Path, capacity: u64, tier: Tier, policy: Policy) -> Arc<TierStore> {
        TierStore::open(tier, dir, capacity, tier == Tier::Mem, policy).unwrap()
    }

    /// Any policy, for the property tests.
    fn policy() -> impl Strategy<Value = Policy> {
        prop_oneof![Just(Policy::Lru), Just(Policy::Lfu)]
    }

    fn reserve(t: &Arc<TierStore>, bytes: u64) -> Result<Reservation> {
        t.reserve_evicting(bytes, &|_| true).0
    }

    /// Writes and commits a block of `len` bytes.
    fn put(t: &Arc<TierStore>, block: u64, len: u64, pinned: bool, protected: &dyn Fn(u64) -> bool) -> Vec<u64> {
        let (r, evicted) = t.reserve_evicting(len, protected);
        let tmp = t.temp_path(block);
        std::fs::write(&tmp, vec![7u8; len as usize]).unwrap();
        t.commit(block, &tmp, len, r.unwrap(), pinned).unwrap();
        evicted.into_iter().map(|(b, _)| b).collect()
    }

    #[test]
    fn capacity_is_enforced_and_reservations_return() {
        let dir = tempfile::tempdir().unwrap();
        let t = open(dir.path(), 100, Tier::Mem);
        let r1 = reserve(&t, 60).unwrap();
        let e = reserve(&t, 60).err().expect("full");
        assert_eq!(e.kind, thaw_common::ErrorKind::ResourceExhausted);
        assert!(e.message.contains("MEM tier is full"), "{e}");
        let tmp = t.temp_path(7);
        std::fs::write(&tmp, b"0123456789").unwrap();
        t.commit(7, &tmp, 10, r1, false).unwrap();
        assert_eq!(t.usage(&|_| false).used, 10);
        {
            let _r = reserve(&t, 90).unwrap();
            assert!(reserve(&t, 1).is_err());
        }
        assert_eq!(t.usage(&|_| false).used, 10);
        assert_eq!(t.remove(7), Some(10));
        assert_eq!(t.usage(&|_| false).used, 0);
        assert!(!t.block_path(7).exists());
    }

    #[test]
    fn disk_blocks_survive_reopen_and_mem_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let t = open(dir.path(), 100, Tier::Disk);
        put(&t, 3, 3, false, &|_| false);
        std::fs::write(t.temp_path(4), b"partial").unwrap();
        drop(t);
        let t = open(dir.path(), 100, Tier::Disk);
        assert_eq!(t.get(3), Some(3));
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
        // Found on reopen: nothing says another copy exists.
        assert_eq!(t.split(&|_| false).pinned, 3);
        let m = open(dir.path(), 100, Tier::Mem);
        assert_eq!(m.get(3), None);
        assert_eq!(m.usage(&|_| false).used, 0);
    }

    #[test]
    fn a_full_tier_evicts_the_least_recently_read_cached_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let t = open(dir.path(), 40, Tier::Mem);
        for b in 1..=4 {
            put(&t, b, 10, false, &|_| false);
        }
        t.touch(1); // read again: now the most recent
        t.touch(3);
        assert_eq!(put(&t, 5, 15, false, &|_| false), vec![2, 4]);
        assert_eq!(t.get(2), None);
        assert!(!t.block_path(2).exists() && !t.block_path(4).exists());
        assert_eq!(t.get(1), Some(10));
        assert_eq!(t.usage(&|_| false).used, 35);
        assert_eq!(t.evictions(), (2, 20));
    }

    #[test]
    fn held_and_pinned_blocks_stay_and_a_tier_full_of_them_says_what_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let t = open(dir.path(), 30, Tier::Mem);
        put(&t, 1, 10, true, &|_| false); // memory-only write
        put(&t, 2, 10, false, &|_| false); // held for a job
        put(&t, 3, 10, false, &|_| false); // cache
        let held = |b| b == 2;
        assert_eq!(t.split(&held), Split { held: 10, pinned: 10, evictable: 10, in_flight: 0 });
        let (r, evicted) = t.reserve_evicting(20, &held);
        let e = r.err().expect("only 10 evictable");
        assert!(evicted.is_empty(), "nothing evicted for a block that still would not fit");
        assert!(e.message.contains("10 B held for jobs, 10 B not persisted anywhere else"), "{e}");
        assert_eq!(t.get(3), Some(10));
        assert_eq!(put(&t, 4, 10, false, &held), vec![3]);
        assert_eq!((t.get(1), t.get(2)), (Some(10), Some(10)));
    }

    #[test]
    fn lfu_keeps_the_block_read_most_where_lru_would_evict_it() {
        let dir = tempfile::tempdir().unwrap();
        for (policy, evicted) in [(Policy::Lfu, 2), (Policy::Lru, 1)] {
            let t = open_with(&dir.path().join(policy.name()), 30, Tier::Mem, policy);
            put(&t, 1, 10, false, &|_| false);
            put(&t, 2, 10, false, &|_| false);
            put(&t, 3, 10, false, &|_| false);
            // Block 1: read often, long ago; 2: never; 3: once, lately.
            (0..5).for_each(|_| t.touch(1));
            t.touch(3);
            t.touch(2);
            t.touch(3);
            assert_eq!(put(&t, 4, 10, false, &|_| false), vec![evicted], "{}", policy.name());
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Write a block (pinned or not) of this many bytes.
        Put(u64, bool),
        /// Read a stored block (by index into the stored ones).
        Read(usize),
        /// Toggle a stored block's protection (a job expects it, or lets go).
        Protect(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u64..40, prop::bool::weighted(0.15)).prop_map(|(n, p)| Op::Put(n, p)),
            3 => any::<prop::sample::Index>().prop_map(|i| Op::Read(i.index(1 << 16))),
            2 => any::<prop::sample::Index>().prop_map(|i| Op::Protect(i.index(1 << 16))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// Used bytes never pass the capacity; no protected or pinned block is
        /// ever evicted; a new block is refused only when the blocks the policy
        /// may not touch leave too little room.
        #[test]
        fn replacement_keeps_its_promises(ops in prop::collection::vec(op(), 1..80), policy in policy()) {
            let dir = tempfile::tempdir().unwrap();
            let cap = 100;
            let t = open_with(dir.path(), cap, Tier::Mem, policy);
            let mut protected: HashSet<u64> = HashSet::new();
            let mut pinned: HashSet<u64> = HashSet::new();
            let mut next = 1u64;
            for op in ops {
                let stored: Vec<u64> = { let mut v: Vec<u64> = t.report().iter().map(|r| r.block_id).collect(); v.sort(); v };
                match op {
                    Op::Put(n, pin) => {
                        let keep: u64 = stored.iter().filter(|b| protected.contains(b) || pinned.contains(b)).map(|b| t.get(*b).unwrap()).sum();
                        let prot = protected.clone();
                        let (r, evicted) = t.reserve_evicting(n, &|b| prot.contains(&b));
                        for (b, _) in &evicted {
                            prop_assert!(!protected.contains(b) && !pinned.contains(b), "evicted a protected block {b}");
                            prop_assert!(!t.block_path(*b).exists());
                        }
                        match r {
                            Ok(r) => {
                                let tmp = t.temp_path(next);
                                std::fs::write(&tmp, vec![1u8; n as usize]).unwrap();
                                t.commit(next, &tmp, n, r, pin).unwrap();
                                if pin { pinned.insert(next); }
                                next += 1;
                            }
                            // Refused only if what must stay leaves no room.
                            Err(_) => prop_assert!(keep + n > cap, "refused {n} with only {keep} protected"),
                        }
                    }
                    Op::Read(i) if !stored.is_empty() => t.touch(stored[i % stored.len()]),
                    Op::Protect(i) if !stored.is_empty() => {
                        let b = stored[i % stored.len()];
                        if !protected.remove(&b) { protected.insert(b); }
                    }
                    _ => {}
                }
                let u = t.usage(&|b| protected.contains(&b));
                prop_assert!(u.used <= cap);
                prop_assert_eq!(u.used, u.held + u.pinned + u.evictable);
                for b in protected.iter().chain(pinned.iter()) {
                    prop_assert!(t.get(*b).is_some(), "protected block {} is gone", b);
                }
            }
        }

        /// A tier full of evictable blocks always admits a new block that fits
        /// the tier at all.
        #[test]
        fn a_full_tier_of_cache_always_admits(sizes in prop::collection::vec(1u64..50, 1..30), n in 1u64..=100, policy in policy()) {
            let dir = tempfile::tempdir().unwrap();
            let t = open_with(dir.path(), 100, Tier::Mem, policy);
            for (i, s) in sizes.iter().enumerate() {
                put(&t, i as u64 + 1, *s, false, &|_| false);
            }
            let (r, _) = t.reserve_evicting(n, &|_| false);
            prop_assert!(r.is_ok());
            prop_assert!(t.usage(&|_| false).used <= 100);
        }
    }
}

//! A tier's accounting: its bytes. Room is reserved before a block is
//! written, so concurrent writers can never overfill the tier, and a full
//! tier evicts cached blocks to make it (the index decides which); a written
//! block is committed (its file placed, its reservation turned into its
//! length) or removed; and the tier says where its bytes are (held, pinned,
//! evictable, in flight), what its cache did (hits, misses, evictions), and
//! what each file is worth to it, for status and metrics.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use thaw_common::proto::{BlockReport, FileCacheStat, TierUsage};
use thaw_common::size::format_size;
use thaw_common::{Result, ThawError};

use super::TierStore;
use super::index::{Entry, Need, TierState};
use crate::replacement::{Decision, Request, owner_of};

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
    /// For a block a client writes (counted in `TierUsage.writing`).
    writing: bool,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether the space is a client write's.
    pub fn is_client_write(&self) -> bool {
        self.writing
    }

    /// Marks the space as a client write's (see `TierUsage.writing`).
    pub fn for_client_write(mut self) -> Self {
        if !self.writing {
            self.store.lock().writing += self.bytes;
            self.writing = true;
        }
        self
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            let mut st = self.store.lock();
            st.used = st.used.saturating_sub(self.bytes);
            if self.writing {
                st.writing = st.writing.saturating_sub(self.bytes);
            }
        }
    }
}

impl TierStore {
    /// Holds `bytes` of space, evicting cached blocks by the replacement
    /// policy if the tier is full (a migration or a write: see
    /// [`TierStore::reserve_for`]).
    pub fn reserve_evicting(
        self: &Arc<Self>,
        bytes: u64,
        protected: &dyn Fn(u64) -> bool,
    ) -> (Result<Reservation>, Vec<(u64, u64)>) {
        self.reserve_for(bytes, protected, Need::Required)
    }

    /// Holds `bytes` of space, evicting cached blocks by the replacement policy
    /// if the tier is full. `protected`: blocks a job still expects (never
    /// evicted, nor are pinned ones). For a read's fill (`Need::Cache`) the
    /// benefit policies may drop the request instead (counted in `drops`).
    /// Returns the reservation, or a "full" / "not cached" error saying why,
    /// and the blocks evicted (id, length), whose files are gone. Nothing is
    /// evicted unless the eviction makes room.
    pub fn reserve_for(
        self: &Arc<Self>,
        bytes: u64,
        protected: &dyn Fn(u64) -> bool,
        need: Need<'_>,
    ) -> (Result<Reservation>, Vec<(u64, u64)>) {
        let policy = self.cache.policy;
        let mut st = self.lock();
        let mut evicted = Vec::new();
        if st.used + bytes > self.capacity {
            self.refresh(&mut st);
            let short = (st.used + bytes).saturating_sub(self.capacity);
            let request = self.request(&st, need);
            let decision =
                if bytes > self.capacity { Decision::TooLittle } else { self.decide(&st, short, protected, request) };
            let victims = match decision {
                Decision::Evict(v) => v,
                Decision::TooLittle => {
                    if matches!(need, Need::Cache { .. }) {
                        st.drops += 1;
                    }
                    let split = split(&st, protected);
                    let e = ThawError::exhausted(format!(
                        "{} tier is full: {} used of {}, {} more needed; {}, {} evictable{}",
                        self.name(),
                        format_size(st.used),
                        format_size(self.capacity),
                        format_size(bytes),
                        unevictable_text(&split),
                        format_size(split.evictable),
                        if matches!(need, Need::Cache { .. }) && policy.uses_benefit() {
                            ", not counting the reading application's own"
                        } else {
                            ""
                        }
                    ));
                    return (Err(e), evicted);
                }
                Decision::Dropped { victim, victim_benefit } => {
                    st.drops += 1;
                    let Request::Cache { benefit, .. } = request else { unreachable!("only cache requests drop") };
                    let e = ThawError::exhausted(format!(
                        "not cached: the block's caching benefit {:.3} is not above that of block {victim} ({:.3}), the next the {} policy would evict",
                        benefit as f64 / 1e6,
                        victim_benefit as f64 / 1e6,
                        policy.name()
                    ));
                    return (Err(e), evicted);
                }
            };
            for b in victims {
                let e = st.unrank(b).expect("a candidate");
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
        (Ok(Reservation { store: self.clone(), bytes, writing: false }), evicted)
    }

    /// Moves a fully written temp file into place. The reservation becomes the
    /// block's exact length. Replacing an existing copy of the block is allowed.
    /// `pinned`: no other copy of the block exists (it is never evicted).
    pub fn commit(&self, block: u64, temp: &Path, length: u64, reservation: Reservation, pinned: bool) -> Result<()> {
        self.commit_for(block, temp, length, reservation, pinned, None)
    }

    /// [`TierStore::commit`] of a block filled for a read by `reader`: the
    /// block is that application's, and the read's access is already counted.
    pub fn commit_for(
        &self,
        block: u64,
        temp: &Path,
        length: u64,
        reservation: Reservation,
        pinned: bool,
        reader: Option<&str>,
    ) -> Result<()> {
        self.commit_owned(block, temp, length, reservation, pinned, reader, reader.is_some())
    }

    /// [`TierStore::commit_for`], `fresh` saying whether the read that asked
    /// for the fill is still to be served from it (its access then is not a
    /// hit). A fill left running behind a ranged read that was streamed from
    /// the under-store is not: the next read of the block is a hit.
    #[allow(clippy::too_many_arguments)]
    pub fn commit_owned(
        &self,
        block: u64,
        temp: &Path,
        length: u64,
        mut reservation: Reservation,
        pinned: bool,
        reader: Option<&str>,
        fresh: bool,
    ) -> Result<()> {
        self.place_file(block, temp)?;
        let policy = self.cache.policy;
        let mut st = self.lock();
        let held = std::mem::take(&mut reservation.bytes);
        st.used = st.used.saturating_sub(held) + length;
        if reservation.writing {
            // Stored; still the client's write until the master confirms it.
            st.writing = st.writing.saturating_sub(held) + length;
        }
        st.clock += 1;
        if let Some(old) = st.unrank(block) {
            st.used = st.used.saturating_sub(old.length);
        }
        let entry = Entry {
            length,
            pinned,
            last_access: st.clock,
            hits: 0,
            owner: reader.map(owner_of).unwrap_or(0),
            key: None,
            fresh,
        };
        st.insert(block, entry);
        if policy.uses_benefit() {
            self.refresh(&mut st);
        }
        st.rank(block, policy, &self.cache.affinities);
        Ok(())
    }

    /// The master answered the commit of a block of `length` bytes
    /// (`confirmed`), or refused it (the block is removed): a client write's
    /// block stops counting as `writing`, and a confirmed one is counted in
    /// `commits`, both at once with the tier's use.
    pub fn commit_answered(&self, length: u64, client_write: bool, confirmed: bool) {
        let mut st = self.lock();
        if client_write {
            st.writing = st.writing.saturating_sub(length);
        }
        if confirmed {
            st.commits += 1;
        }
    }

    /// Deletes a block; returns its length if it was here.
    pub fn remove(&self, block: u64) -> Option<u64> {
        let len = {
            let mut st = self.lock();
            let len = st.unrank(block)?.length;
            st.used = st.used.saturating_sub(len);
            len
        };
        self.delete_file(block);
        Some(len)
    }

    /// A read the application's caching probability kept out of the cache.
    pub fn note_skipped(&self) {
        self.lock().skipped += 1;
    }

    /// A read served from elsewhere (the under-store, another tier) that this
    /// tier's hit ratio counts as a miss.
    pub fn note_miss(&self) {
        self.lock().misses += 1;
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

    /// (hits, misses, drops, skipped) since start.
    pub fn cache_counters(&self) -> (u64, u64, u64, u64) {
        let st = self.lock();
        (st.hits, st.misses, st.drops, st.skipped)
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
            replacement: self.cache.policy.name().to_string(),
            evictions: st.evictions,
            evicted_bytes: st.evicted_bytes,
            cache_hits: st.hits,
            cache_misses: st.misses,
            cache_drops: st.drops,
            cache_skipped: st.skipped,
            window_ms: if self.cache.policy.uses_benefit() { self.cache.window.as_millis() as u64 } else { 0 },
            writing: st.writing,
            commits: st.commits,
            commits_counted: true,
        }
    }

    /// The files read in the window or with blocks here, highest benefit
    /// first (at most `limit`): frequency, benefit and bytes stored.
    pub fn file_stats(&self, limit: usize) -> Vec<FileCacheStat> {
        let mut st = self.lock();
        self.refresh(&mut st);
        let policy = self.cache.policy;
        let aff = &*self.cache.affinities;
        let files: HashSet<u64> = st.files.keys().chain(st.by_file.keys()).copied().collect();
        let mut out: Vec<FileCacheStat> = files
            .into_iter()
            .map(|file| {
                let w = st.files.get(&file);
                let frequency = w.map_or(0.0, |w| w.reads as f64 / w.blocks.len().max(1) as f64);
                let affinity = w.map_or(0.0, |w| w.jobs.keys().map(|j| aff.affinity(j)).fold(0.0, f64::max));
                let cached_bytes = st
                    .by_file
                    .get(&file)
                    .map_or(0, |s| s.iter().map(|b| st.blocks.get(b).map_or(0, |e| e.length)).sum());
                let benefit = if policy.uses_benefit() {
                    st.file_benefit(file, policy, aff) as f64 / 1e6
                } else {
                    frequency * affinity
                };
                FileCacheStat { file_id: file, frequency, affinity, benefit, cached_bytes }
            })
            .collect();
        out.sort_by(|a, b| b.benefit.total_cmp(&a.benefit).then(b.cached_bytes.cmp(&a.cached_bytes)));
        out.truncate(limit);
        out
    }

    pub fn report(&self) -> Vec<BlockReport> {
        self.lock()
            .blocks
            .iter()
            .map(|(&block_id, e)| BlockReport { block_id, tier: self.tier as i32, length: e.length })
            .collect()
    }
}

/// What no migration or write may evict, largest first: "16.0 MiB cannot
/// be evicted (16.0 MiB not persisted anywhere else, 4.0 KiB held for jobs)".
/// The largest part leads, so a full tier is blamed on what fills it.
fn unevictable_text(s: &Split) -> String {
    let mut parts =
        [(s.held, "held for jobs"), (s.pinned, "not persisted anywhere else"), (s.in_flight, "being written")];
    parts.sort_by_key(|p| std::cmp::Reverse(p.0));
    let listed: Vec<String> =
        parts.iter().filter(|p| p.0 > 0).map(|(b, what)| format!("{} {what}", format_size(*b))).collect();
    let total = s.held + s.pinned + s.in_flight;
    if listed.is_empty() {
        return "nothing in it is held, pinned or being written".to_string();
    }
    format!("{} cannot be evicted ({})", format_size(total), listed.join(", "))
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

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

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use thaw_common::ids::file_of_block;
use thaw_common::proto::{BlockReport, FileCacheStat, Tier, TierUsage};
use thaw_common::size::format_size;
use thaw_common::{Result, ThawError};

use crate::affinity::Affinities;
use crate::replacement::{Candidate, Decision, Policy, Request, Screen, benefit_units, owner_of};

/// What a tier's replacement needs besides its blocks.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    pub policy: Policy,
    /// CAVA's sliding window: the benefit policies count a file's reads
    /// over this much of the past.
    pub window: Duration,
    /// The applications' affinities and caching probabilities (the master's).
    pub affinities: Arc<Affinities>,
}

/// Default sliding window: long enough that a hot file is read many times
/// within it (CAVA, section IV-B), short enough that a file nobody reads any more
/// falls to benefit 0 within a working session.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(600);

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { policy: Policy::Lru, window: DEFAULT_WINDOW, affinities: Arc::default() }
    }
}

impl CacheConfig {
    pub fn with_policy(policy: Policy) -> Self {
        CacheConfig { policy, ..Self::default() }
    }
}

/// A stored block.
#[derive(Debug, Clone)]
struct Entry {
    length: u64,
    /// No copy exists anywhere else (written to this tier only): never evicted.
    pinned: bool,
    last_access: u64,
    /// Reads since admission (LFU's history).
    hits: u64,
    /// The application that last read it (or whose read brought it in).
    owner: u64,
    /// Its place in the eviction index (`None` while pinned).
    key: Option<(u64, u64, u64)>,
    /// Filled for a read that has not been served yet: that read's access was
    /// counted when it asked for the fill.
    fresh: bool,
}

/// A file's reads within the window.
#[derive(Debug, Default)]
struct FileWindow {
    reads: u64,
    /// Block -> reads of it in the window.
    blocks: HashMap<u64, u32>,
    /// Application -> reads by it in the window.
    jobs: HashMap<Arc<str>, u32>,
}

#[derive(Debug, Default)]
struct TierState {
    /// Bytes of stored blocks plus outstanding reservations.
    used: u64,
    /// Bytes of blocks clients are writing, reserved or stored, until the
    /// master confirms their commit (`TierUsage.writing`).
    writing: u64,
    /// Commits the master confirmed (`TierUsage.commits`).
    commits: u64,
    blocks: HashMap<u64, Entry>,
    /// Logical clock of admissions and accesses (the policy's notion of time).
    clock: u64,
    /// Blocks and bytes the replacement policy has evicted since start.
    evictions: u64,
    evicted_bytes: u64,
    /// Reads served from this tier, reads that found the block elsewhere (only
    /// counted on the tier reads cache into), and cache requests dropped by the
    /// policy or skipped by the application's caching probability.
    hits: u64,
    misses: u64,
    drops: u64,
    skipped: u64,
    /// LRU and LFU: unpinned blocks in eviction order.
    order: BTreeSet<(u64, u64, u64)>,
    /// The benefit policies: files by (benefit, least recent access of their
    /// unpinned blocks), and each file's unpinned blocks by last access. A
    /// file's benefit changes with every read of it; this way the change moves
    /// one entry, not every block of the file.
    files_order: BTreeSet<(u64, u64, u64)>,
    file_key: HashMap<u64, (u64, u64)>,
    file_lru: HashMap<u64, BTreeSet<(u64, u64)>>,
    /// File -> its stored blocks (a file's benefit change re-ranks them all).
    by_file: HashMap<u64, HashSet<u64>>,
    /// Reads in the window, oldest first: (ms since open, file, block, job).
    records: VecDeque<(u64, u64, u64, Arc<str>)>,
    files: HashMap<u64, FileWindow>,
    /// The affinity table's version the index was ranked with.
    ranked_version: u64,
}

#[derive(Debug)]
pub struct TierStore {
    pub tier: Tier,
    dir: PathBuf,
    capacity: u64,
    cache: CacheConfig,
    started: Instant,
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

/// What a request for room asks on behalf of.
#[derive(Debug, Clone, Copy)]
pub enum Need<'a> {
    /// A migration or a write (never dropped).
    Required,
    /// A read's fill of `block` for application `job` (may be dropped).
    Cache { block: u64, job: &'a str },
}

impl TierState {
    fn file_benefit(&self, file: u64, policy: Policy, aff: &Affinities) -> u64 {
        let Some(w) = self.files.get(&file) else { return 0 };
        if w.reads == 0 || w.blocks.is_empty() {
            return 0;
        }
        let top = w.jobs.keys().map(|j| aff.affinity(j)).fold(0.0f64, f64::max);
        match policy {
            Policy::Cava => benefit_units(top * w.reads as f64 / w.blocks.len() as f64),
            _ => benefit_units(top),
        }
    }

    fn candidate(&self, block: u64, e: &Entry, policy: Policy, aff: &Affinities) -> Candidate {
        let benefit = if policy.uses_benefit() { self.file_benefit(file_of_block(block), policy, aff) } else { 0 };
        Candidate { block, length: e.length, last_access: e.last_access, hits: e.hits, benefit, owner: e.owner }
    }

    /// Puts `block` at its place in the eviction index (or out of it, if pinned).
    fn rank(&mut self, block: u64, policy: Policy, aff: &Affinities) {
        let benefit = if policy.uses_benefit() { self.file_benefit(file_of_block(block), policy, aff) } else { 0 };
        self.rank_at(block, policy, benefit);
    }

    /// [`TierState::rank`] with the block's file's benefit known.
    fn rank_at(&mut self, block: u64, policy: Policy, benefit: u64) {
        let Some(e) = self.blocks.get(&block) else { return };
        let c =
            Candidate { block, length: e.length, last_access: e.last_access, hits: e.hits, benefit, owner: e.owner };
        // Under the benefit policies a block's key is (0, last access, block):
        // its place in its file's list; the benefit lives in the file's key.
        let key = (!e.pinned).then(|| if policy.uses_benefit() { (0, c.last_access, block) } else { policy.key(&c) });
        let old = std::mem::replace(&mut self.blocks.get_mut(&block).expect("just seen").key, key);
        if old != key {
            if policy.uses_benefit() {
                let file = file_of_block(block);
                let list = self.file_lru.entry(file).or_default();
                if let Some((_, la, b)) = old {
                    list.remove(&(la, b));
                }
                if let Some((_, la, b)) = key {
                    list.insert((la, b));
                }
            } else {
                if let Some(k) = old {
                    self.order.remove(&k);
                }
                if let Some(k) = key {
                    self.order.insert(k);
                }
            }
        }
        if policy.uses_benefit() {
            self.refile(file_of_block(block), benefit);
        }
    }

    /// Puts `file` at its place among files (benefit, then its least recently
    /// read unpinned block), or out of the order if it has none.
    fn refile(&mut self, file: u64, benefit: u64) {
        let first = self.file_lru.get(&file).and_then(|l| l.first().copied());
        if first.is_none() {
            self.file_lru.remove(&file);
        }
        let key = first.map(|(la, _)| (benefit, la));
        let old = match key {
            Some(k) => self.file_key.insert(file, k),
            None => self.file_key.remove(&file),
        };
        if old != key {
            if let Some((b, la)) = old {
                self.files_order.remove(&(b, la, file));
            }
            if let Some((b, la)) = key {
                self.files_order.insert((b, la, file));
            }
        }
    }

    fn rank_file(&mut self, file: u64, policy: Policy, aff: &Affinities) {
        if policy.uses_benefit() {
            let benefit = self.file_benefit(file, policy, aff);
            self.refile(file, benefit);
            return;
        }
        let blocks: Vec<u64> = self.by_file.get(&file).map(|s| s.iter().copied().collect()).unwrap_or_default();
        for b in blocks {
            self.rank_at(b, policy, 0);
        }
    }

    fn unrank(&mut self, block: u64) -> Option<Entry> {
        let e = self.blocks.remove(&block)?;
        let file = file_of_block(block);
        if let Some(k) = e.key {
            self.order.remove(&k);
            if let Some(list) = self.file_lru.get_mut(&file) {
                list.remove(&(k.1, k.2));
                let benefit = self.file_key.get(&file).map_or(0, |k| k.0);
                self.refile(file, benefit);
            }
        }
        if let Some(s) = self.by_file.get_mut(&file) {
            s.remove(&block);
            if s.is_empty() {
                self.by_file.remove(&file);
            }
        }
        Some(e)
    }

    /// Counts a read of `block` by `job` in the window.
    fn record(&mut self, now_ms: u64, block: u64, job: &str) {
        let file = file_of_block(block);
        let job: Arc<str> = Arc::from(job);
        let w = self.files.entry(file).or_default();
        w.reads += 1;
        *w.blocks.entry(block).or_default() += 1;
        *w.jobs.entry(job.clone()).or_default() += 1;
        self.records.push_back((now_ms, file, block, job));
    }

    /// Forgets reads older than the window; returns the files whose count fell.
    fn expire(&mut self, now_ms: u64, window_ms: u64) -> HashSet<u64> {
        let mut touched = HashSet::new();
        while let Some((at, ..)) = self.records.front() {
            if now_ms.saturating_sub(*at) < window_ms {
                break;
            }
            let (_, file, block, job) = self.records.pop_front().expect("front exists");
            touched.insert(file);
            let Some(w) = self.files.get_mut(&file) else { continue };
            w.reads -= 1;
            if let Some(n) = w.blocks.get_mut(&block) {
                *n -= 1;
                if *n == 0 {
                    w.blocks.remove(&block);
                }
            }
            if let Some(n) = w.jobs.get_mut(&job) {
                *n -= 1;
                if *n == 0 {
                    w.jobs.remove(&job);
                }
            }
            if w.reads == 0 {
                self.files.remove(&file);
            }
        }
        touched
    }
}

impl TierStore {
    /// Opens the tier at `dir`. With `wipe` (the MEM tier: memory does not survive a
    /// restart) every old block is deleted; otherwise blocks found are kept.
    /// Partial blocks under `tmp/` are always deleted. Blocks found are pinned:
    /// nothing says whether another copy of them exists.
    pub fn open(tier: Tier, dir: &Path, capacity: u64, wipe: bool, cache: CacheConfig) -> Result<Arc<Self>> {
        if cache.window.is_zero() {
            return Err(ThawError::invalid("the cache window must be longer than zero"));
        }
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
            let e = Entry { length, pinned: true, last_access: 0, hits: 0, owner: 0, key: None, fresh: false };
            state.blocks.insert(id, e);
            state.by_file.entry(file_of_block(id)).or_default().insert(id);
        }
        Ok(Arc::new(TierStore {
            tier,
            dir: dir.to_path_buf(),
            capacity,
            cache,
            started: Instant::now(),
            state: Mutex::new(state),
        }))
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
        self.cache.policy
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Brings the benefit ranking up to date: reads that left the window, and
    /// a new affinity table from the master.
    fn refresh(&self, st: &mut TierState) {
        let policy = self.cache.policy;
        if !policy.uses_benefit() {
            return;
        }
        let aff = &*self.cache.affinities;
        let version = aff.version();
        let touched = st.expire(self.now_ms(), self.cache.window.as_millis() as u64);
        if version != st.ranked_version {
            st.ranked_version = version;
            let files: Vec<u64> = st.by_file.keys().copied().collect();
            for f in files {
                st.rank_file(f, policy, aff);
            }
        } else {
            for f in touched {
                st.rank_file(f, policy, aff);
            }
        }
    }

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

    /// What [`TierStore::reserve_for`] would decide for `bytes` now, without
    /// doing it (the cost benchmark and the tests).
    pub fn plan(&self, bytes: u64, protected: &dyn Fn(u64) -> bool, need: Need<'_>) -> Decision {
        let mut st = self.lock();
        self.refresh(&mut st);
        let short = (st.used + bytes).saturating_sub(self.capacity);
        let request = self.request(&st, need);
        self.decide(&st, short, protected, request)
    }

    fn request(&self, st: &TierState, need: Need<'_>) -> Request {
        match need {
            Need::Required => Request::Required,
            Need::Cache { block, job } => Request::Cache {
                owner: owner_of(job),
                benefit: st.file_benefit(file_of_block(block), self.cache.policy, &self.cache.affinities),
            },
        }
    }

    /// [`Policy::choose`] over the index: the blocks in eviction order, without
    /// sorting them all.
    fn decide(&self, st: &TierState, short: u64, protected: &dyn Fn(u64) -> bool, request: Request) -> Decision {
        if short == 0 {
            return Decision::Evict(Vec::new());
        }
        let policy = self.cache.policy;
        let mut freed = 0;
        let mut out = Vec::new();
        let order: Box<dyn Iterator<Item = (u64, u64)> + '_> = if policy.uses_benefit() {
            Box::new(by_benefit(st))
        } else {
            Box::new(st.order.iter().map(|&(k, _, b)| (k, b)))
        };
        for (benefit, block) in order {
            if protected(block) {
                continue;
            }
            let e = &st.blocks[&block];
            match policy.screen(e.owner, benefit, block, request) {
                Some(Screen::Skip) => continue,
                Some(Screen::Drop(d)) => return d,
                None => {}
            }
            freed += e.length;
            out.push(block);
            if freed >= short {
                return Decision::Evict(out);
            }
        }
        Decision::TooLittle
    }

    /// The blocks the policy may evict now and their history (what
    /// [`Policy::choose`] decides over).
    pub fn candidates(&self, protected: &dyn Fn(u64) -> bool) -> Vec<Candidate> {
        let mut st = self.lock();
        self.refresh(&mut st);
        let policy = self.cache.policy;
        let st = &*st;
        st.blocks
            .iter()
            .filter(|(b, e)| !e.pinned && !protected(**b))
            .map(|(&b, e)| st.candidate(b, e, policy, &self.cache.affinities))
            .collect()
    }

    /// A read of `block` by application `job` (served from this tier or not):
    /// the replacement policy's history. Returns whether this tier holds it
    /// (a hit, unless it was just filled for this very read).
    pub fn access(&self, block: u64, job: &str) -> bool {
        let policy = self.cache.policy;
        let mut st = self.lock();
        st.clock += 1;
        let now = st.clock;
        let (stored, fresh) = match st.blocks.get_mut(&block) {
            Some(e) => {
                e.last_access = now;
                e.hits += 1;
                e.owner = owner_of(job);
                (true, std::mem::take(&mut e.fresh))
            }
            None => (false, false),
        };
        if policy.uses_benefit() {
            if !fresh {
                let at = self.now_ms();
                st.record(at, block, job);
            }
            self.refresh(&mut st);
            if stored {
                st.rank(block, policy, &self.cache.affinities);
            } else {
                st.rank_file(file_of_block(block), policy, &self.cache.affinities);
            }
        } else if stored {
            st.rank(block, policy, &self.cache.affinities);
        }
        match (stored, fresh) {
            (true, false) => st.hits += 1,
            _ => st.misses += 1,
        }
        stored && !fresh
    }

    /// A read that asks this tier to cache `block` it does not hold: counted
    /// in the window before the policy decides, so the request's benefit
    /// includes it; the read's own access after the fill is not counted again.
    pub fn note_request(&self, block: u64, job: &str) {
        if !self.cache.policy.uses_benefit() {
            return;
        }
        let mut st = self.lock();
        let at = self.now_ms();
        st.record(at, block, job);
        self.refresh(&mut st);
        st.rank_file(file_of_block(block), self.cache.policy, &self.cache.affinities);
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

    /// Whether a reader holds the block's file open now: short-circuit
    /// readers (and this worker's own sends) take a shared `flock` on the
    /// file they read, which an exclusive try here finds. The kernel drops
    /// the lock when the reader closes the file or dies, kill -9 included, so
    /// nothing has to tell the worker. An evicted file a reader still held
    /// would keep its memory until closed while the tier counted it free.
    pub fn in_use(&self, block: u64) -> bool {
        thaw_common::filelock::in_use(&self.block_path(block))
    }

    /// A read of `block` (LRU and LFU history; tests).
    pub fn touch(&self, block: u64) {
        self.access(block, "");
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

    /// The tier's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where blocks being written are.
    pub fn temp_dir(&self) -> PathBuf {
        self.dir.join("tmp")
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
    pub fn commit(&self, block: u64, temp: &Path, length: u64, reservation: Reservation, pinned: bool) -> Result<()> {
        self.commit_for(block, temp, length, reservation, pinned, None)
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
        std::fs::rename(temp, self.block_path(block))?;
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
        st.blocks.insert(block, entry);
        st.by_file.entry(file_of_block(block)).or_default().insert(block);
        if policy.uses_benefit() {
            self.refresh(&mut st);
        }
        st.rank(block, policy, &self.cache.affinities);
        Ok(())
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

    fn delete_file(&self, block: u64) {
        if let Err(e) = std::fs::remove_file(self.block_path(block)) {
            tracing::warn!(block, error = %e, "could not delete block file");
        }
    }

    /// Another copy of the block exists now (its file was persisted): the
    /// replacement policy may evict it like any cache.
    pub fn unpin(&self, block: u64) {
        let mut st = self.lock();
        if let Some(e) = st.blocks.get_mut(&block) {
            e.pinned = false;
            st.rank(block, self.cache.policy, &self.cache.affinities);
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

    /// Removes the whole tier directory (a local cluster's MEM tier on shutdown).
    pub fn destroy(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The benefit policies' eviction order, (benefit, block) by (benefit, last
/// access): the files' order merged with each file's own, lazily (a file
/// joins the merge only when its first block could come next).
fn by_benefit(st: &TierState) -> impl Iterator<Item = (u64, u64)> + '_ {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::ops::Bound::{Excluded, Unbounded};
    let mut files = st.files_order.iter().peekable();
    let mut heap: BinaryHeap<Reverse<(u64, u64, u64, u64)>> = BinaryHeap::new();
    std::iter::from_fn(move || {
        while let Some(&&(benefit, la, file)) = files.peek() {
            if heap.peek().is_some_and(|Reverse(top)| (top.0, top.1) < (benefit, la)) {
                break;
            }
            files.next();
            if let Some(&(la, block)) = st.file_lru.get(&file).and_then(|l| l.first()) {
                heap.push(Reverse((benefit, la, block, file)));
            }
        }
        let Reverse((benefit, la, block, file)) = heap.pop()?;
        if let Some(&(la2, b2)) =
            st.file_lru.get(&file).and_then(|l| l.range((Excluded((la, block)), Unbounded)).next())
        {
            heap.push(Reverse((benefit, la2, b2, file)));
        }
        Some((benefit, block))
    })
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

#[cfg(test)]
mod tests;

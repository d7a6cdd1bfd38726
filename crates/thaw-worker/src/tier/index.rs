//! A tier's index: which blocks it holds (length, pinned or not, read
//! history), in the replacement policy's eviction order, and the window of
//! recent reads per file that the benefit policies (CAVA, section IV-B) rank
//! by. The eviction decision walks this order ([`TierStore::plan`]) instead
//! of sorting every block; [`crate::replacement`] is the pure policy it must
//! agree with. All of it is in memory; nothing here touches a file.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use thaw_common::ids::file_of_block;

use super::TierStore;
use crate::affinity::Affinities;
use crate::replacement::{Candidate, Decision, Policy, Request, Screen, benefit_units, owner_of};

/// A stored block.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) length: u64,
    /// No copy exists anywhere else (written to this tier only): never evicted.
    pub(super) pinned: bool,
    pub(super) last_access: u64,
    /// Reads since admission (LFU's history).
    pub(super) hits: u64,
    /// The application that last read it (or whose read brought it in).
    pub(super) owner: u64,
    /// Its place in the eviction index (`None` while pinned).
    pub(super) key: Option<(u64, u64, u64)>,
    /// Filled for a read that has not been served yet: that read's access was
    /// counted when it asked for the fill.
    pub(super) fresh: bool,
}

/// A file's reads within the window.
#[derive(Debug, Default)]
pub(super) struct FileWindow {
    pub(super) reads: u64,
    /// Block -> reads of it in the window.
    pub(super) blocks: HashMap<u64, u32>,
    /// Application -> reads by it in the window.
    pub(super) jobs: HashMap<Arc<str>, u32>,
}

/// What the tier's lock guards: its blocks, bytes and counters, and the
/// replacement policy's order over them.
#[derive(Debug, Default)]
pub(super) struct TierState {
    /// Bytes of stored blocks plus outstanding reservations.
    pub(super) used: u64,
    /// Bytes of blocks clients are writing, reserved or stored, until the
    /// master confirms their commit (`TierUsage.writing`).
    pub(super) writing: u64,
    /// Commits the master confirmed (`TierUsage.commits`).
    pub(super) commits: u64,
    /// foldhash: block ids are the master's own (SipHash's defence against
    /// chosen keys buys nothing), and status walks every block (100,000
    /// small files: a walk was 7 ms under SipHash, 20 a second).
    pub(super) blocks: foldhash::HashMap<u64, Entry>,
    /// Logical clock of admissions and accesses (the policy's notion of time).
    pub(super) clock: u64,
    /// Blocks and bytes the replacement policy has evicted since start.
    pub(super) evictions: u64,
    pub(super) evicted_bytes: u64,
    /// Reads served from this tier, reads that found the block elsewhere (only
    /// counted on the tier reads cache into), and cache requests dropped by the
    /// policy or skipped by the application's caching probability.
    pub(super) hits: u64,
    pub(super) misses: u64,
    pub(super) drops: u64,
    pub(super) skipped: u64,
    /// LRU and LFU: unpinned blocks in eviction order.
    pub(super) order: BTreeSet<(u64, u64, u64)>,
    /// The benefit policies: files by (benefit, least recent access of their
    /// unpinned blocks), and each file's unpinned blocks by last access. A
    /// file's benefit changes with every read of it; this way the change moves
    /// one entry, not every block of the file.
    pub(super) files_order: BTreeSet<(u64, u64, u64)>,
    pub(super) file_key: HashMap<u64, (u64, u64)>,
    pub(super) file_lru: HashMap<u64, BTreeSet<(u64, u64)>>,
    /// File -> its stored blocks (a file's benefit change re-ranks them all).
    pub(super) by_file: HashMap<u64, HashSet<u64>>,
    /// Reads in the window, oldest first: (ms since open, file, block, job).
    pub(super) records: VecDeque<(u64, u64, u64, Arc<str>)>,
    pub(super) files: HashMap<u64, FileWindow>,
    /// The affinity table's version the index was ranked with.
    pub(super) ranked_version: u64,
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
    /// The index of the blocks a start-up scan found (id, length): pinned,
    /// as nothing says whether another copy of them exists.
    pub(super) fn recovered(found: Vec<(u64, u64)>) -> Self {
        let mut state = TierState::default();
        for (id, length) in found {
            state.used += length;
            let e = Entry { length, pinned: true, last_access: 0, hits: 0, owner: 0, key: None, fresh: false };
            state.insert(id, e);
        }
        state
    }

    /// Adds a stored block (unranked: [`TierState::rank`] places it).
    pub(super) fn insert(&mut self, block: u64, e: Entry) {
        self.blocks.insert(block, e);
        self.by_file.entry(file_of_block(block)).or_default().insert(block);
    }

    pub(super) fn file_benefit(&self, file: u64, policy: Policy, aff: &Affinities) -> u64 {
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
    pub(super) fn rank(&mut self, block: u64, policy: Policy, aff: &Affinities) {
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

    pub(super) fn rank_file(&mut self, file: u64, policy: Policy, aff: &Affinities) {
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

    pub(super) fn unrank(&mut self, block: u64) -> Option<Entry> {
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
    pub(super) fn record(&mut self, now_ms: u64, block: u64, job: &str) {
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
    /// Brings the benefit ranking up to date: reads that left the window, and
    /// a new affinity table from the master.
    pub(super) fn refresh(&self, st: &mut TierState) {
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

    /// What [`TierStore::reserve_for`] would decide for `bytes` now, without
    /// doing it (the cost benchmark and the tests).
    pub fn plan(&self, bytes: u64, protected: &dyn Fn(u64) -> bool, need: Need<'_>) -> Decision {
        let mut st = self.lock();
        self.refresh(&mut st);
        let short = (st.used + bytes).saturating_sub(self.capacity);
        let request = self.request(&st, need);
        self.decide(&st, short, protected, request)
    }

    pub(super) fn request(&self, st: &TierState, need: Need<'_>) -> Request {
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
    pub(super) fn decide(
        &self,
        st: &TierState,
        short: u64,
        protected: &dyn Fn(u64) -> bool,
        request: Request,
    ) -> Decision {
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

    /// A read of `block` (LRU and LFU history; tests).
    pub fn touch(&self, block: u64) {
        self.access(block, "");
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

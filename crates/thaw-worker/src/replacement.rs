//! Cache replacement: which blocks leave a full tier to make room for a new one,
//! and whether a block a read brought in is worth them at all.
//!
//! A tier holds three kinds of block. Those a job still expects (a reference
//! list is not empty: Ignem, section III-A3, do-not-harm) and those with no other
//! copy (written to memory only, not persisted) are protected and never chosen.
//! The rest (blocks a read brought in, blocks whose jobs have let go, blocks
//! also in the under-store or on another tier) are a cache: when a fill, a
//! migration or a write needs room, the policy picks victims among them.
//!
//! Four policies. LRU and LFU are the baselines. `cava` is CAVA, section IV-B: the
//! benefit of caching a file is its access frequency over the last sliding
//! window times the highest cache affinity of the applications that read it in
//! that window; victims are the blocks of lowest benefit (0 for blocks nobody
//! read in the window), least recently used among equals; a read's request to
//! cache a block is dropped when a victim it needs is worth as much as it, and a
//! block is never evicted for another block of the same application. `ca` is the
//! paper's CA-Only variant: the same without the frequency (benefit = affinity).
//! Migrations and memory writes are never dropped (a job or a writer asked for
//! them), but they too evict in the policy's order.
//!
//! Where Thaw differs from the paper, and why: CAVA's NameNode decides
//! every caching request centrally; here each worker decides for its own
//! memory, synchronously on the read path, with the master supplying what only
//! it knows (the applications' affinities and caching probabilities, with each
//! heartbeat answer, and whether another worker already caches the block, at
//! commit). FREQ(file) is counted per worker as reads per block of the file in
//! the window (a whole-file read counts once however its blocks spread over
//! workers). The caching probability is a fixed draw per block, not a coin
//! per request, so repeated reads keep the same blocks instead of churning.
//!
//! [`Policy::choose`] is the decision as a pure function of the candidates; the
//! tier ([`crate::tier::TierStore`]) keeps the history and an ordered index that
//! makes the same decision without sorting every cached block (a property test
//! checks the two agree).

use thaw_common::{Result, ThawError};

/// An evictable block and its access history, in the tier's logical clock
/// (one tick per admission or access).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub block: u64,
    pub length: u64,
    /// Tick of the block's last read (or its admission, if never read).
    pub last_access: u64,
    /// Reads of the block since it was admitted.
    pub hits: u64,
    /// Caching benefit of the block's file now, in millionths (0 when nobody
    /// read it in the window). Only the benefit policies look at it.
    pub benefit: u64,
    /// The application that last read the block (a hash of its job id; 0: none).
    pub owner: u64,
}

/// Who asks for room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// A migration or a write: room is made if it can be.
    Required,
    /// A read's fill of a block into the cache: under the benefit policies it
    /// is dropped rather than evict what is worth as much, and never evicts
    /// its own application's blocks.
    Cache { owner: u64, benefit: u64 },
}

/// What the policy decided for a request of room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Evict these blocks, in order (empty: there is room already).
    Evict(Vec<u64>),
    /// The candidates the policy may take free too little.
    TooLittle,
    /// A cache request dropped: the next victim it needs has this benefit,
    /// not below the request's own.
    Dropped { victim: u64, victim_benefit: u64 },
}

/// How victims are chosen among evictable blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Least recently used first.
    #[default]
    Lru,
    /// Least frequently used first (reads since admission), the least recently
    /// used among equals.
    Lfu,
    /// CAVA's CA-Only: lowest cache affinity of the file's readers in the
    /// window first.
    Affinity,
    /// CAVA, section IV-B: lowest affinity x frequency first.
    Cava,
}

impl Policy {
    pub const NAMES: &'static [&'static str] = &["lru", "lfu", "ca", "cava"];

    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "lru" => Ok(Policy::Lru),
            "lfu" => Ok(Policy::Lfu),
            "ca" | "ca-only" => Ok(Policy::Affinity),
            "cava" => Ok(Policy::Cava),
            other => {
                Err(ThawError::invalid(format!("unknown cache policy {other:?} (known: {})", Self::NAMES.join(", "))))
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::Lfu => "lfu",
            Policy::Affinity => "ca",
            Policy::Cava => "cava",
        }
    }

    /// Whether the policy ranks blocks by caching benefit (and so needs the
    /// window's history and the applications' affinities).
    pub fn uses_benefit(self) -> bool {
        matches!(self, Policy::Affinity | Policy::Cava)
    }

    /// The block's place in eviction order: smallest first.
    pub fn key(self, c: &Candidate) -> (u64, u64, u64) {
        match self {
            // Ties (same tick) cannot happen within one tier; the block id keeps
            // the order total anyway.
            Policy::Lru => (0, c.last_access, c.block),
            Policy::Lfu => (c.hits, c.last_access, c.block),
            Policy::Affinity | Policy::Cava => (c.benefit, c.last_access, c.block),
        }
    }

    /// The decision for a request of `need` bytes among `candidates` (blocks
    /// the policy may evict). Nothing is evicted unless it makes enough room.
    pub fn choose(self, candidates: &[Candidate], need: u64, request: Request) -> Decision {
        if need == 0 {
            return Decision::Evict(Vec::new());
        }
        let mut order: Vec<&Candidate> = candidates.iter().collect();
        order.sort_by_key(|c| self.key(c));
        let mut freed = 0u64;
        let mut out = Vec::new();
        for c in order {
            if let Some(verdict) = self.screen(c.owner, c.benefit, c.block, request) {
                match verdict {
                    Screen::Skip => continue,
                    Screen::Drop(d) => return d,
                }
            }
            freed += c.length;
            out.push(c.block);
            if freed >= need {
                return Decision::Evict(out);
            }
        }
        Decision::TooLittle
    }

    /// Whether the next block in eviction order may go for `request`: `None`
    /// if it may; skipped (its own application's block) or a drop (worth as
    /// much as the request) under the benefit policies.
    pub(crate) fn screen(self, owner: u64, benefit: u64, block: u64, request: Request) -> Option<Screen> {
        let Request::Cache { owner: asker, benefit: asked } = request else { return None };
        if !self.uses_benefit() {
            return None;
        }
        if owner != 0 && owner == asker {
            return Some(Screen::Skip);
        }
        // Blocks are visited by increasing benefit: the first one not below
        // the request's means every later one is not either.
        (benefit >= asked).then_some(Screen::Drop(Decision::Dropped { victim: block, victim_benefit: benefit }))
    }
}

pub(crate) enum Screen {
    Skip,
    Drop(Decision),
}

/// A job id's owner tag (0 is kept for "nobody").
pub fn owner_of(job: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    job.hash(&mut h);
    h.finish().max(1)
}

/// A benefit in the units candidates carry (millionths).
pub fn benefit_units(benefit: f64) -> u64 {
    if benefit.is_finite() && benefit > 0.0 { (benefit * 1e6).round() as u64 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(block: u64, length: u64, last_access: u64) -> Candidate {
        Candidate { block, length, last_access, hits: 0, benefit: 0, owner: 0 }
    }

    fn evict(v: &[u64]) -> Decision {
        Decision::Evict(v.to_vec())
    }

    const REQ: Request = Request::Required;

    #[test]
    fn lru_takes_the_least_recently_used_first_and_stops_when_enough_is_free() {
        let cands = [c(1, 10, 5), c(2, 10, 1), c(3, 10, 9), c(4, 10, 3)];
        assert_eq!(Policy::Lru.choose(&cands, 15, REQ), evict(&[2, 4]));
        assert_eq!(Policy::Lru.choose(&cands, 10, REQ), evict(&[2]));
        assert_eq!(Policy::Lru.choose(&cands, 40, REQ), evict(&[2, 4, 1, 3]));
        assert_eq!(Policy::Lru.choose(&cands, 0, REQ), evict(&[]));
    }

    #[test]
    fn lfu_takes_the_least_read_first_and_the_least_recent_among_equals() {
        let hit = |block, last_access, hits| Candidate { hits, ..c(block, 10, last_access) };
        // Block 1 is the least recent but read often; 3 and 4 were read once.
        let cands = [hit(1, 1, 9), hit(2, 8, 0), hit(3, 5, 1), hit(4, 2, 1)];
        assert_eq!(Policy::Lfu.choose(&cands, 10, REQ), evict(&[2]));
        assert_eq!(Policy::Lfu.choose(&cands, 30, REQ), evict(&[2, 4, 3]));
        assert_eq!(Policy::Lru.choose(&cands, 10, REQ), evict(&[1]), "LRU throws the hot block out");
    }

    #[test]
    fn too_little_to_free_evicts_nothing() {
        assert_eq!(Policy::Lru.choose(&[c(1, 10, 1)], 11, REQ), Decision::TooLittle);
        assert_eq!(Policy::Lru.choose(&[], 1, REQ), Decision::TooLittle);
    }

    fn b(block: u64, last_access: u64, benefit: u64, owner: u64) -> Candidate {
        Candidate { benefit, owner, ..c(block, 10, last_access) }
    }

    #[test]
    fn cava_evicts_unread_blocks_first_then_the_lowest_benefit_lru_among_equals() {
        // 1: nobody read it in the window (benefit 0), though read lately before;
        // 2 and 3: benefit 0.2, 3 the less recent; 4: hot (benefit 1.2).
        let cands = [b(1, 9, 0, 7), b(2, 5, 200_000, 7), b(3, 2, 200_000, 7), b(4, 1, 1_200_000, 7)];
        let cache = Request::Cache { owner: 8, benefit: 400_000 };
        assert_eq!(Policy::Cava.choose(&cands, 10, cache), evict(&[1]));
        assert_eq!(Policy::Cava.choose(&cands, 30, cache), evict(&[1, 3, 2]));
        // The hot block is worth more than the request: the request is dropped,
        // and nothing is evicted for it.
        assert_eq!(Policy::Cava.choose(&cands, 40, cache), Decision::Dropped { victim: 4, victim_benefit: 1_200_000 });
        // A migration (required) takes it anyway, in the same order.
        assert_eq!(Policy::Cava.choose(&cands, 40, REQ), evict(&[1, 3, 2, 4]));
        // LRU would have thrown the hot block out first.
        assert_eq!(Policy::Lru.choose(&cands, 10, cache), evict(&[4]));
    }

    #[test]
    fn a_request_not_above_a_victims_benefit_is_dropped_even_at_equal_benefit() {
        let cands = [b(1, 1, 400_000, 5)];
        let equal = Request::Cache { owner: 6, benefit: 400_000 };
        assert_eq!(Policy::Cava.choose(&cands, 10, equal), Decision::Dropped { victim: 1, victim_benefit: 400_000 });
        let above = Request::Cache { owner: 6, benefit: 400_001 };
        assert_eq!(Policy::Cava.choose(&cands, 10, above), evict(&[1]));
    }

    #[test]
    fn a_block_is_never_evicted_for_another_block_of_the_same_application() {
        // Block 1 is the application's own (owner 5): skipped, block 2 goes.
        let cands = [b(1, 1, 0, 5), b(2, 2, 100_000, 6)];
        let own = Request::Cache { owner: 5, benefit: 400_000 };
        assert_eq!(Policy::Cava.choose(&cands, 10, own), evict(&[2]));
        // Only its own blocks to take: too little room, nothing evicted.
        assert_eq!(Policy::Cava.choose(&cands[..1], 10, own), Decision::TooLittle);
        // CA-only keeps the rule; LRU does not know applications.
        assert_eq!(Policy::Affinity.choose(&cands[..1], 10, own), Decision::TooLittle);
        assert_eq!(Policy::Lru.choose(&cands[..1], 10, own), evict(&[1]));
    }

    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        assert_eq!(Policy::parse("LRU").unwrap(), Policy::Lru);
        assert_eq!(Policy::parse("lfu").unwrap(), Policy::Lfu);
        assert_eq!(Policy::parse("cava").unwrap(), Policy::Cava);
        assert_eq!(Policy::parse("ca").unwrap(), Policy::Affinity);
        let e = Policy::parse("random").unwrap_err();
        assert!(e.message.contains("known: lru, lfu, ca, cava"), "{e}");
    }
}

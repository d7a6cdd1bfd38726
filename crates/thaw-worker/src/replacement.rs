//! Cache replacement: which blocks leave a full tier to make room for a new one.
//!
//! A tier holds three kinds of block. Those a job still expects (a reference
//! list is not empty: ignem.txt III-A3, do-not-harm) and those with no other
//! copy (written to memory only, not persisted) are protected and never chosen.
//! The rest (blocks a read brought in, blocks whose jobs have let go, blocks
//! also in the under-store or on another tier) are a cache: when a fill, a
//! migration or a write needs room, the policy picks victims among them.
//!
//! The policy is a pure function of the candidates' access history; the tier
//! keeps that history ([`crate::tier::TierStore`]). LRU and LFU are the
//! baselines; cava.txt's affinity x frequency plugs in as a further variant of
//! [`Policy`], with the history it needs added to [`Candidate`].

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
}

impl Policy {
    pub const NAMES: &'static [&'static str] = &["lru", "lfu"];

    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "lru" => Ok(Policy::Lru),
            "lfu" => Ok(Policy::Lfu),
            other => Err(ThawError::invalid(format!(
                "unknown replacement policy {other:?} (known: {})",
                Self::NAMES.join(", ")
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::Lfu => "lfu",
        }
    }

    /// The blocks to evict, in order, so that at least `need` bytes are freed;
    /// `None` when all the candidates together free less (then nothing is
    /// evicted: a cache is not thrown away for a block that still would not fit).
    pub fn victims(self, candidates: &[Candidate], need: u64) -> Option<Vec<u64>> {
        if need == 0 {
            return Some(Vec::new());
        }
        if candidates.iter().map(|c| c.length).sum::<u64>() < need {
            return None;
        }
        let mut order: Vec<&Candidate> = candidates.iter().collect();
        match self {
            // Ties (same tick) cannot happen within one tier; the block id keeps
            // the order total anyway.
            Policy::Lru => order.sort_by_key(|c| (c.last_access, c.block)),
            Policy::Lfu => order.sort_by_key(|c| (c.hits, c.last_access, c.block)),
        }
        let mut freed = 0u64;
        let mut out = Vec::new();
        for c in order {
            if freed >= need {
                break;
            }
            freed += c.length;
            out.push(c.block);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(block: u64, length: u64, last_access: u64) -> Candidate {
        Candidate { block, length, last_access, hits: 0 }
    }

    #[test]
    fn lru_takes_the_least_recently_used_first_and_stops_when_enough_is_free() {
        let cands = [c(1, 10, 5), c(2, 10, 1), c(3, 10, 9), c(4, 10, 3)];
        assert_eq!(Policy::Lru.victims(&cands, 15), Some(vec![2, 4]));
        assert_eq!(Policy::Lru.victims(&cands, 10), Some(vec![2]));
        assert_eq!(Policy::Lru.victims(&cands, 40), Some(vec![2, 4, 1, 3]));
        assert_eq!(Policy::Lru.victims(&cands, 0), Some(vec![]));
    }

    #[test]
    fn lfu_takes_the_least_read_first_and_the_least_recent_among_equals() {
        let hit = |block, last_access, hits| Candidate { block, length: 10, last_access, hits };
        // Block 1 is the least recent but read often; 3 and 4 were read once.
        let cands = [hit(1, 1, 9), hit(2, 8, 0), hit(3, 5, 1), hit(4, 2, 1)];
        assert_eq!(Policy::Lfu.victims(&cands, 10), Some(vec![2]));
        assert_eq!(Policy::Lfu.victims(&cands, 30), Some(vec![2, 4, 3]));
        assert_eq!(Policy::Lru.victims(&cands, 10), Some(vec![1]), "LRU throws the hot block out");
    }

    #[test]
    fn too_little_to_free_evicts_nothing() {
        assert_eq!(Policy::Lru.victims(&[c(1, 10, 1)], 11), None);
        assert_eq!(Policy::Lru.victims(&[], 1), None);
    }

    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        assert_eq!(Policy::parse("LRU").unwrap(), Policy::Lru);
        assert_eq!(Policy::parse("lfu").unwrap(), Policy::Lfu);
        let e = Policy::parse("random").unwrap_err();
        assert!(e.message.contains("known: lru, lfu"), "{e}");
    }
}

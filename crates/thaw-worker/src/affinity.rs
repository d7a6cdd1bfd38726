//! The cache affinity and caching probability of each application, as the
//! master last said (CAVA, section IV-A, II). The master classifies applications
//! from what their tasks measurably do and sends the table with each full
//! heartbeat answer; the worker's tiers rank cached blocks by it and its reads
//! cache a block with its application's probability. Soft state: a restarted
//! worker knows nothing until its first heartbeat, and uses the default then.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Affinity of an application the master has not classified (the medium
/// class's value, until the master says otherwise).
pub const DEFAULT_AFFINITY: f64 = 0.2;

#[derive(Debug, Default)]
struct Table {
    /// Job id -> (affinity, caching probability).
    jobs: HashMap<String, (f64, f64)>,
    default: Option<f64>,
}

#[derive(Debug, Default)]
pub struct Affinities {
    table: RwLock<Table>,
    /// Bumped on every change: tiers re-rank their files when it moves.
    version: AtomicU64,
}

impl Affinities {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The application's cache affinity in [0, 1].
    pub fn affinity(&self, job: &str) -> f64 {
        let t = self.read();
        t.jobs.get(job).map(|j| j.0).unwrap_or(t.default.unwrap_or(DEFAULT_AFFINITY))
    }

    /// The probability with which a read of the application caches a block it
    /// does not find in memory (1 when the master gave none).
    pub fn probability(&self, job: &str) -> f64 {
        self.read().jobs.get(job).map(|j| j.1).unwrap_or(1.0)
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Replaces the table with the master's (values outside [0, 1] are clamped).
    pub fn set(&self, jobs: impl IntoIterator<Item = (String, f64, f64)>, default: f64) {
        let clamp = |x: f64| if x.is_finite() { x.clamp(0.0, 1.0) } else { 0.0 };
        let jobs: HashMap<String, (f64, f64)> = jobs.into_iter().map(|(j, a, p)| (j, (clamp(a), clamp(p)))).collect();
        let default = Some(clamp(default));
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        if t.jobs != jobs || t.default != default {
            t.jobs = jobs;
            t.default = default;
            self.version.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Whether a read caches `block` under caching probability `p`: a fixed draw
/// per block, so the same blocks of a file are chosen by every read and every
/// worker (a random draw per read would cache a different part each time and
/// evict the last one's).
pub fn chosen(block: u64, p: f64) -> bool {
    if p >= 1.0 {
        return true;
    }
    // splitmix64: block ids are sequential, their draws must not be.
    let mut z = block.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 11) as f64 / (1u64 << 53) as f64) < p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_jobs_take_the_default_and_changes_bump_the_version() {
        let a = Affinities::default();
        assert_eq!(a.affinity("x"), DEFAULT_AFFINITY);
        assert_eq!(a.probability("x"), 1.0);
        a.set([("grep".to_string(), 0.4, 0.5)], 0.1);
        let v = a.version();
        assert_eq!((a.affinity("grep"), a.probability("grep"), a.affinity("x")), (0.4, 0.5, 0.1));
        a.set([("grep".to_string(), 0.4, 0.5)], 0.1);
        assert_eq!(a.version(), v, "the same table is no change");
        a.set([("grep".to_string(), 7.0, -1.0)], 0.1);
        assert_eq!((a.affinity("grep"), a.probability("grep")), (1.0, 0.0));
        assert!(a.version() > v);
    }

    #[test]
    fn the_share_of_blocks_chosen_follows_the_probability() {
        for p in [0.0, 0.25, 0.5, 0.9, 1.0] {
            let n = (0..20_000u64).filter(|b| chosen((b << 24) | (b % 7), p)).count() as f64 / 20_000.0;
            assert!((n - p).abs() < 0.02, "p {p}: chose {n}");
        }
        // A fixed draw: the same answer every time.
        assert_eq!(chosen(12345, 0.5), chosen(12345, 0.5));
    }
}

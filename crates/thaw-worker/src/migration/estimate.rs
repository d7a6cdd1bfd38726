//! A device's migration time estimate (DYRS, section IV-A), made fit for blocks of
//! any size: a fixed cost per migration and a speed per byte.

/// Weight of the newest duration in the estimate's moving average.
const EWMA_WEIGHT: f64 = 0.3;

/// Migrations of at most this share of the largest one a device has moved are
/// "small": their time is the device's fixed cost, not its speed.
const SMALL_SHARE: f64 = 0.25;

/// A device's migration time model: a migration of `len` bytes takes
/// `max(per_migration, len x per_byte)` ns. `per_byte` is the paper's EWMA of
/// migration durations (DYRS, section IV-A), per byte, over large migrations;
/// `per_migration` is an EWMA of the durations of small ones.
///
/// Improvement on the paper, whose blocks all have one size (then this is its
/// EWMA). SWIM's inputs are files of every size, and a quarter of the blocks
/// are a few bytes or KB whose migration time is all fixed cost: 4 ms to open,
/// copy and commit on an idle disk, 200 ms behind the queue of a disk another
/// tenant keeps busy. A per-byte average over all migrations took that cost
/// for the device's speed: estimates swung a thousandfold between devices, and
/// the master's Algorithm 1 sent a busy disk hundreds of one-byte files (cheap
/// at its per-byte estimate) while keeping every big block from it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Estimate {
    pub(super) per_byte: Option<f64>,
    pub(super) per_migration: Option<f64>,
    /// The file system's block size, or the largest migration seen if larger:
    /// what "small" is measured against. (Measured against the device's own
    /// history alone, a device whose first migration was a 3 KB file would
    /// take it for its speed, be sent only small files at that speed, and
    /// never learn better.)
    pub(super) largest: u64,
}

impl Estimate {
    fn ewma(old: Option<f64>, sample: f64) -> Option<f64> {
        Some(old.map_or(sample, |o| EWMA_WEIGHT * sample + (1.0 - EWMA_WEIGHT) * o))
    }

    fn is_small(&self, len: u64) -> bool {
        (len as f64) < SMALL_SHARE * self.largest as f64
    }

    pub(super) fn add(&mut self, len: u64, took_ns: f64) {
        if len == 0 {
            return;
        }
        if (len as f64) * SMALL_SHARE > self.largest as f64 {
            // Far larger than anything before: the old "large" ones were small.
            if let Some(b) = self.per_byte.take() {
                self.per_migration = Self::ewma(self.per_migration, b * self.largest as f64);
            }
        }
        self.largest = self.largest.max(len);
        if self.is_small(len) {
            self.per_migration = Self::ewma(self.per_migration, took_ns);
        } else {
            self.per_byte = Self::ewma(self.per_byte, took_ns / len as f64);
        }
    }

    /// The pair to report while a migration of `len` bytes has been running
    /// for `elapsed_ns` (DYRS, section IV-A: raised at every heartbeat once it runs
    /// past its estimate): the part of the model that migration measures rises
    /// to what it shows so far. Only a measured part is raised: a first
    /// migration's age is no measurement (early on it would look fast).
    pub(super) fn raised(&self, len: u64, elapsed_ns: f64) -> Estimate {
        let mut e = *self;
        if len == 0 {
            return e;
        }
        if self.is_small(len) {
            e.per_migration = self.per_migration.map(|a| a.max(elapsed_ns));
        } else {
            e.per_byte = self.per_byte.map(|b| b.max(elapsed_ns / len as f64));
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_migrations_measure_the_fixed_cost_and_large_ones_the_speed() {
        const MIB: u64 = 1 << 20;
        let mut e = Estimate::default();
        // The first migration is a 3 KB file: the largest so far, so it measures speed.
        e.add(3000, 4e6);
        assert_eq!(e.per_byte, Some(4e6 / 3000.0));
        // A full block: the 3 KB one was small after all, and becomes the fixed cost.
        e.add(MIB, 88e6);
        assert_eq!(e.per_migration, Some(4e6));
        assert_eq!(e.per_byte, Some(88e6 / MIB as f64));
        // More small files, one of them stuck 200 ms behind a busy disk's queue:
        // the fixed cost rises; the speed is untouched (a per-byte average of all
        // migrations would have put it at 20000 ns per byte).
        e.add(1, 200e6);
        e.add(34, 4e6);
        assert_eq!(e.per_byte, Some(88e6 / MIB as f64));
        let fixed = e.per_migration.unwrap();
        assert!(fixed > 4e6 && fixed < 200e6, "{fixed}");
        // Large ones average as the paper's EWMA.
        e.add(MIB, 176e6);
        let b = e.per_byte.unwrap();
        assert!((b - (0.3 * 176e6 + 0.7 * 88e6) / MIB as f64).abs() < 1e-9, "{b}");
    }

    #[test]
    fn a_migration_past_its_estimate_raises_the_part_it_measures() {
        const MIB: u64 = 1 << 20;
        let mut e = Estimate::default();
        e.add(MIB, 88e6);
        e.add(3000, 4e6);
        // Within its estimate: unchanged.
        assert_eq!(e.raised(3000, 1e6), e);
        assert_eq!(e.raised(MIB, 50e6), e);
        // A small one stuck for half a second: the fixed cost is at least that.
        let r = e.raised(3000, 500e6);
        assert_eq!((r.per_migration, r.per_byte), (Some(500e6), e.per_byte));
        // A full block past its estimate: its age over its bytes.
        let r = e.raised(MIB, 200e6);
        assert_eq!((r.per_migration, r.per_byte), (e.per_migration, Some(200e6 / MIB as f64)));
        assert_eq!(Estimate::default().raised(MIB, 1e9), Estimate::default(), "no measurement, nothing to raise");
    }
}

//! How many streams a migration's copy reads its device with: measured, per
//! device. An improvement on DYRS, section III-B, which "serializes migrations and
//! moves one block at a time into memory in order to limit disk read
//! concurrency" on hard disks, where a second stream costs seeks.
//!
//! One block per device at a time stays (the queue, its order and the estimates
//! are DYRS's); what changes is how one block's copy reads a device that is fast:
//! its byte range is split into `k` parts copied at once. `k` starts at 1 and
//! only rises when `k` streams were *measured* to move more bytes per second
//! than the level below (by [`GAIN`]): a device that thrashes under concurrent
//! streams measures slower and stays at 1. A device whose single stream runs
//! below [`FAST`] (a hard disk) is never probed with more: DYRS's one stream per
//! device is the default there. Emulated devices (the device model, with its
//! concurrency penalty) are always read with one stream (the caller's rule).
//! Measured on this machine's virtio disk: one 1 GiB read 1.0-1.4 GB/s, two
//! halves at once 1.7 GB/s.

/// The most streams one copy uses.
pub const MAX_STREAMS: usize = 4;

/// A level must move this much more per second than the one below to be used.
pub const GAIN: f64 = 1.15;

/// Single-stream speed (bytes per second) below which a device is not probed
/// with more streams: a hard disk's sequential read.
pub const FAST: f64 = 300e6;

/// Copies smaller than this are not split (and not measured): their time is
/// the fixed cost, not the device's speed.
pub const MIN_SPLIT: u64 = 16 << 20;

/// Large copies between two probes of a level other than the chosen one, so a
/// device whose speed changed (another tenant, a different file) is noticed.
pub const PROBE_EVERY: u32 = 8;

/// Weight of the newest sample in a level's moving average.
const EWMA_WEIGHT: f64 = 0.5;

/// Measured throughput per stream count of one device, and the choice it gives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parallelism {
    /// EWMA of bytes per second, index = streams - 1.
    rate: [Option<f64>; MAX_STREAMS],
    /// Large copies since the last probe.
    since_probe: u32,
    /// The next probe goes above the chosen level (else below).
    probe_up: bool,
}

impl Parallelism {
    /// The level in use: the smallest whose measured rate no higher level
    /// beats by [`GAIN`].
    pub fn chosen(&self) -> usize {
        let mut best = 1;
        let mut level = 2;
        while level <= MAX_STREAMS {
            match (self.rate[level - 1], self.rate[best - 1]) {
                (Some(r), Some(b)) if r > GAIN * b => best = level,
                _ => {}
            }
            level *= 2;
        }
        best
    }

    /// Streams for the next copy of `len` bytes.
    pub fn streams(&mut self, len: u64) -> usize {
        if len < MIN_SPLIT {
            return 1;
        }
        let Some(single) = self.rate[0] else {
            return 1; // measure one stream first
        };
        if single < FAST && self.chosen() == 1 {
            return 1; // a slow device keeps DYRS's one stream
        }
        let k = self.chosen();
        let up = (k * 2).min(MAX_STREAMS);
        if up > k && self.rate[up - 1].is_none() {
            return up; // the level above was never tried
        }
        if self.since_probe < PROBE_EVERY {
            return k;
        }
        self.since_probe = 0;
        self.probe_up = !self.probe_up;
        match (self.probe_up, k) {
            (true, k) if up > k => up,
            (_, 1) => k,
            _ => k / 2,
        }
    }

    /// A copy of `len` bytes with `streams` streams took `ns`.
    pub fn record(&mut self, streams: usize, len: u64, ns: u64) {
        if len < MIN_SPLIT || ns == 0 || streams == 0 || streams > MAX_STREAMS {
            return;
        }
        let rate = len as f64 * 1e9 / ns as f64;
        let r = &mut self.rate[streams - 1];
        *r = Some(r.map_or(rate, |o| EWMA_WEIGHT * rate + (1.0 - EWMA_WEIGHT) * o));
        self.since_probe += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: u64 = 64 << 20;

    /// Runs `n` copies of a block on a device moving `rate(k)` bytes/s with k streams.
    fn drive(p: &mut Parallelism, n: usize, rate: impl Fn(usize) -> f64) -> Vec<usize> {
        (0..n)
            .map(|_| {
                let k = p.streams(BLOCK);
                p.record(k, BLOCK, (BLOCK as f64 / rate(k) * 1e9) as u64);
                k
            })
            .collect()
    }

    #[test]
    fn a_fast_device_that_gains_from_streams_gets_them() {
        let mut p = Parallelism::default();
        // An SSD: 1 GB/s with one stream, 1.7 with two, 1.8 with four.
        let used = drive(&mut p, 8, |k| match k {
            1 => 1.0e9,
            2 => 1.7e9,
            _ => 1.8e9,
        });
        assert_eq!(&used[..3], &[1, 2, 4], "measures one stream, then tries more");
        // Four is not 15% better than two: two it is.
        assert_eq!(p.chosen(), 2);
        assert!(used[3..].iter().all(|&k| k == 2), "{used:?}");
    }

    #[test]
    fn a_device_that_thrashes_stays_at_one_stream() {
        let mut p = Parallelism::default();
        // Fast, but a second stream halves the total (seeks).
        let used = drive(&mut p, 40, |k| 600e6 / k as f64);
        assert_eq!(p.chosen(), 1);
        let more = used.iter().filter(|&&k| k > 1).count();
        assert!(more <= 1 + 40 / PROBE_EVERY as usize, "probes only now and then: {used:?}");
    }

    #[test]
    fn a_hard_disk_is_never_read_with_two_streams() {
        let mut p = Parallelism::default();
        let used = drive(&mut p, 40, |_| 150e6);
        assert!(used.iter().all(|&k| k == 1), "{used:?}");
    }

    #[test]
    fn small_copies_are_not_split_nor_measured() {
        let mut p = Parallelism::default();
        p.record(1, BLOCK, 50_000_000);
        p.record(2, BLOCK, 30_000_000);
        assert_eq!(p.chosen(), 2);
        assert_eq!(p.streams(4 << 20), 1);
        let before = p.clone();
        p.record(2, 4 << 20, 1);
        assert_eq!(p, before);
    }

    #[test]
    fn a_device_that_stops_gaining_falls_back() {
        let mut p = Parallelism::default();
        drive(&mut p, 6, |k| 1e9 * (1.0 + 0.7 * (k > 1) as u8 as f64));
        assert_eq!(p.chosen(), 2);
        // Another tenant now makes two streams cost more than they give.
        drive(&mut p, 6 * PROBE_EVERY as usize, |k| 1e9 / k as f64);
        assert_eq!(p.chosen(), 1);
    }
}

//! Writer leases: an unfinished file belongs to the client writing it for as
//! long as that client renews its lease, as in HDFS (its LeaseManager: a
//! client's lease covers the files it has open for writing, and a lease not
//! renewed within its limit has those files recovered). Thaw never shows half a
//! file, so recovery deletes the unfinished file: its namespace entry, the
//! blocks some worker already committed, and (the workers' side, when the
//! writer's connection dropped) its staged bytes. Without this, a writer killed
//! mid-write left its file `incomplete` forever.
//!
//! One difference from HDFS: a lease is per (writer, file), renewed by the
//! writer naming the files it still writes, so the master needs no separate
//! client registry, and a renewal for a file it no longer holds tells the
//! writer at once that its write is lost. Soft state: after a master restart
//! every unfinished file in the journal starts a fresh lease for the writer
//! recorded with it, which the writer, if still alive, goes on renewing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
struct Lease {
    writer: String,
    expires: Instant,
    /// The same moment as wall-clock milliseconds, for listings.
    expires_ms: u64,
}

#[derive(Debug)]
pub struct WriterLeases {
    by_file: HashMap<u64, Lease>,
    limit: Duration,
}

impl WriterLeases {
    pub fn new(limit: Duration) -> Self {
        WriterLeases { by_file: HashMap::new(), limit }
    }

    /// How long a lease lasts without renewal.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// `writer` holds `file` until one limit after `now` (`now_ms` on the wall clock).
    pub fn grant(&mut self, file: u64, writer: &str, now: Instant, now_ms: u64) {
        let lease = Lease {
            writer: writer.to_string(),
            expires: now + self.limit,
            expires_ms: now_ms + self.limit.as_millis() as u64,
        };
        self.by_file.insert(file, lease);
    }

    /// Renews `writer`'s leases on `files`; returns those it does not hold
    /// (recovered already, completed, deleted, or another writer's): the
    /// writer's writes of them are lost.
    pub fn renew(&mut self, writer: &str, files: &[u64], now: Instant, now_ms: u64) -> Vec<u64> {
        let mut lost = Vec::new();
        for &f in files {
            match self.by_file.get_mut(&f) {
                Some(l) if l.writer == writer => {
                    l.expires = now + self.limit;
                    l.expires_ms = now_ms + self.limit.as_millis() as u64;
                }
                _ => lost.push(f),
            }
        }
        lost
    }

    /// The file completed or is gone: no lease on it any more.
    pub fn release(&mut self, file: u64) {
        self.by_file.remove(&file);
    }

    /// Removes and returns the leases past their limit at `now`: (file, writer).
    pub fn take_expired(&mut self, now: Instant) -> Vec<(u64, String)> {
        let expired: Vec<u64> = self.by_file.iter().filter(|(_, l)| l.expires <= now).map(|(f, _)| *f).collect();
        let mut out: Vec<(u64, String)> =
            expired.into_iter().filter_map(|f| self.by_file.remove(&f).map(|l| (f, l.writer))).collect();
        out.sort();
        out
    }

    /// Who holds `file`, and until when (wall-clock milliseconds).
    pub fn holder(&self, file: u64) -> Option<(&str, u64)> {
        self.by_file.get(&file).map(|l| (l.writer.as_str(), l.expires_ms))
    }

    pub fn len(&self) -> usize {
        self.by_file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_file.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_lease_not_renewed_expires_and_a_renewed_one_does_not() {
        let t0 = Instant::now();
        let mut l = WriterLeases::new(10 * S);
        l.grant(1, "a", t0, 1_000);
        l.grant(2, "b", t0, 1_000);
        assert_eq!(l.holder(1), Some(("a", 11_000)));
        // a renews at 6 s; b does not.
        assert!(l.renew("a", &[1], t0 + 6 * S, 7_000).is_empty());
        assert_eq!(l.holder(1), Some(("a", 17_000)));
        assert!(l.take_expired(t0 + 9 * S).is_empty());
        assert_eq!(l.take_expired(t0 + 10 * S), vec![(2, "b".to_string())]);
        assert_eq!(l.holder(2), None);
        assert!(l.take_expired(t0 + 15 * S).is_empty());
        assert_eq!(l.take_expired(t0 + 16 * S), vec![(1, "a".to_string())]);
        assert!(l.is_empty());
    }

    #[test]
    fn renewing_a_file_not_held_says_it_is_lost() {
        let t0 = Instant::now();
        let mut l = WriterLeases::new(10 * S);
        l.grant(1, "a", t0, 0);
        l.grant(2, "a", t0, 0);
        // Another writer cannot renew a's file; a completed file is released.
        assert_eq!(l.renew("b", &[1], t0, 0), vec![1]);
        l.release(2);
        assert_eq!(l.renew("a", &[1, 2, 3], t0 + S, 1_000), vec![2, 3]);
        assert_eq!(l.len(), 1);
        // b's failed renewal did not extend a's lease.
        assert_eq!(l.holder(1), Some(("a", 11_000)));
    }
}

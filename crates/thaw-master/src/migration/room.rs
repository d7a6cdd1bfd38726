//! Room for migrations: which workers' memory can take a block (issue 28).
//!
//! A worker's room is its free MEM plus the cache a migration may evict there,
//! less what is already bound to it and not yet in its reported use. What a
//! migration may not evict is the worker's own rule (see `thaw-worker`'s
//! `Worker::reserve`): pinned blocks (the only copy of unpersisted data),
//! blocks held for any job (do-not-harm, Ignem, section III-A3: a referenced block
//! is never evicted to make room, whatever the jobs' priorities), and blocks
//! being written. [`devices`] then offers a block only the devices whose
//! worker can take it, and none when no worker can: the block waits at the
//! master, and its job's progress says why ([`waiting_text`]).
//!
//! Improvement on the papers: DYRS, Algorithm 1 and Ignem's random holder
//! choose by estimated finish (or at random) only, as if every slave's memory
//! had room; a worker whose MEM is full of data no migration may evict looks
//! idle, so it is the fastest estimate, and every block bound there waited
//! the worker's room wait, failed and was bound again (a 300-file job took
//! 15.8 s instead of 0.13 s). Here such a worker is never chosen while another
//! has room, a block under-store-only or with a DISK replica on a full worker
//! goes through the under-store of a worker with room, and a block no worker
//! can take is not bound at all.

use std::collections::HashMap;

use thaw_common::proto::TierUsage;
use thaw_common::size::format_size;

use super::Device;

/// Bytes each worker's MEM can still take for migrations, as far as the
/// master knows; workers not set have none.
#[derive(Debug, Clone, Default)]
pub struct Room {
    left: HashMap<u64, u64>,
}

impl Room {
    /// A worker's room: `mem_room` (free plus evictable, see
    /// `WorkerEntry::mem_room`) less `bound` (migrations bound to it and not
    /// yet in its reported use).
    pub fn set(&mut self, worker: u64, mem_room: u64, bound: u64) {
        self.left.insert(worker, mem_room.saturating_sub(bound));
    }

    pub fn left(&self, worker: u64) -> u64 {
        self.left.get(&worker).copied().unwrap_or(0)
    }

    pub fn fits(&self, worker: u64, len: u64) -> bool {
        self.left(worker) >= len
    }

    /// A block of `len` is targeted at (or bound to) `worker`.
    pub fn take(&mut self, worker: u64, len: u64) {
        if let Some(l) = self.left.get_mut(&worker) {
            *l = l.saturating_sub(len);
        }
    }
}

/// Where a block may migrate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// These devices, each on a worker with room for it.
    Fit(Vec<(u64, Device)>),
    /// No live worker holds a copy (nor can read one from the under-store).
    NoSource,
    /// Sources exist, but none of their workers has room: these workers.
    Full(Vec<u64>),
}

/// The devices that may migrate a block: the live DISK-replica holders `disk`
/// with room for it; else, for a block in the under-store, the live workers
/// `ufs` with room (through their under-store device). Workers in `avoid`
/// (where it failed) only if no other fits. `fits`: whether a worker has room.
pub fn devices(disk: &[u64], ufs: &[u64], avoid: &[u64], fits: impl Fn(u64) -> bool) -> Devices {
    let with = |ws: &[u64], d: Device| -> Vec<(u64, Device)> {
        let mut v: Vec<(u64, Device)> = ws.iter().filter(|w| fits(**w)).map(|w| (*w, d)).collect();
        v.sort();
        v.dedup();
        v
    };
    let mut out = with(disk, Device::Disk);
    if out.is_empty() {
        out = with(ufs, Device::Ufs);
    }
    if out.is_empty() {
        if disk.is_empty() && ufs.is_empty() {
            return Devices::NoSource;
        }
        let mut full: Vec<u64> = disk.iter().chain(ufs).copied().collect();
        full.sort();
        full.dedup();
        return Devices::Full(full);
    }
    if out.iter().any(|(w, _)| !avoid.contains(w)) {
        out.retain(|(w, _)| !avoid.contains(w));
    }
    Devices::Fit(out)
}

/// Why blocks wait for memory, for a job's progress: "N blocks wait for
/// memory: every worker that could take them (2 of 2) has its MEM full of
/// data that cannot be evicted (24.0 MiB not persisted anywhere else, ...)".
/// `full`: the workers that had no room, with their MEM's last report;
/// `bound`: bytes of migrations under way on them.
pub fn waiting_text(blocks: u64, full: &[(&TierUsage, u64)], live: usize) -> String {
    let sum = |f: fn(&TierUsage) -> u64| full.iter().map(|(t, _)| f(t)).sum::<u64>();
    let mut parts = [
        (sum(|t| t.pinned), "not persisted anywhere else"),
        (sum(|t| t.held), "held for jobs"),
        (sum(|t| t.writing), "being written"),
        (full.iter().map(|(_, b)| *b).sum(), "promised to migrations under way"),
    ];
    parts.sort_by_key(|p| std::cmp::Reverse(p.0));
    let parts: Vec<String> =
        parts.iter().filter(|p| p.0 > 0).map(|(b, what)| format!("{} {what}", format_size(*b))).collect();
    let capacity: u64 = sum(|t| t.capacity);
    format!(
        "{blocks} block{} wait{} for memory: every worker that could take {} ({} of {live}) has its MEM ({}) full of data that cannot be evicted{}",
        if blocks == 1 { "" } else { "s" },
        if blocks == 1 { "s" } else { "" },
        if blocks == 1 { "it" } else { "them" },
        full.len(),
        format_size(capacity),
        if parts.is_empty() { String::new() } else { format!(" ({})", parts.join(", ")) }
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_full_worker_is_never_chosen_while_another_has_room() {
        // Under-store only: any worker, but only the one with room.
        let room = |w: u64| w == 2;
        assert_eq!(devices(&[], &[1, 2], &[], room), Devices::Fit(vec![(2, Device::Ufs)]));
        // A DISK replica on the full worker: through the under-store elsewhere.
        assert_eq!(devices(&[1], &[1, 2], &[], room), Devices::Fit(vec![(2, Device::Ufs)]));
        // A DISK replica on a worker with room comes first.
        assert_eq!(devices(&[2], &[1, 2], &[], room), Devices::Fit(vec![(2, Device::Disk)]));
    }

    #[test]
    fn no_worker_with_room_is_a_wait_naming_the_full_workers() {
        assert_eq!(devices(&[], &[1, 2], &[], |_| false), Devices::Full(vec![1, 2]));
        // A DISK-only block whose holder is full waits, even if others have room.
        assert_eq!(devices(&[1], &[], &[], |w| w == 2), Devices::Full(vec![1]));
        assert_eq!(devices(&[], &[], &[], |_| true), Devices::NoSource);
    }

    #[test]
    fn a_worker_where_it_failed_is_chosen_only_if_no_other_fits() {
        assert_eq!(devices(&[], &[1, 2], &[2], |_| true), Devices::Fit(vec![(1, Device::Ufs)]));
        assert_eq!(devices(&[], &[1, 2], &[2], |w| w == 2), Devices::Fit(vec![(2, Device::Ufs)]));
    }

    #[test]
    fn room_is_taken_by_each_target_and_bound_bytes_count_against_it() {
        let mut r = Room::default();
        r.set(1, 10, 4);
        assert_eq!(r.left(1), 6);
        assert!(r.fits(1, 6) && !r.fits(1, 7));
        r.take(1, 5);
        assert!(!r.fits(1, 2));
        assert!(!r.fits(9, 1), "an unknown worker has no room");
        r.set(2, 3, 5);
        assert_eq!(r.left(2), 0);
    }

    #[test]
    fn the_waiting_text_names_the_unevictable_data_largest_first() {
        let mib = 1u64 << 20;
        let a = TierUsage { capacity: 16 * mib, pinned: 16 * mib, ..Default::default() };
        let b = TierUsage { capacity: 16 * mib, pinned: 8 * mib, held: 4 * mib, writing: mib, ..Default::default() };
        let t = waiting_text(300, &[(&a, 0), (&b, 2 * mib)], 2);
        assert_eq!(
            t,
            "300 blocks wait for memory: every worker that could take them (2 of 2) has its MEM (32.0 MiB) full of \
             data that cannot be evicted (24.0 MiB not persisted anywhere else, 4.0 MiB held for jobs, 2.0 MiB \
             promised to migrations under way, 1.0 MiB being written)"
        );
        assert!(
            waiting_text(1, &[(&a, 0)], 3)
                .starts_with("1 block waits for memory: every worker that could take it (1 of 3)")
        );
    }

    proptest! {
        /// Whatever the room, sources and failures: a chosen device's worker
        /// has room and is a source; a block waits only if no source has room;
        /// DISK is chosen whenever a holder has room.
        #[test]
        fn choices_fit_and_a_wait_means_no_source_has_room(
            disk in prop::collection::vec(1u64..6, 0..4),
            ufs in prop::collection::vec(1u64..6, 0..6),
            avoid in prop::collection::vec(1u64..6, 0..3),
            room in prop::collection::btree_set(1u64..6, 0..6),
        ) {
            let fits = |w: u64| room.contains(&w);
            match devices(&disk, &ufs, &avoid, fits) {
                Devices::Fit(v) => {
                    prop_assert!(!v.is_empty());
                    for (w, d) in &v {
                        prop_assert!(fits(*w));
                        match d {
                            Device::Disk => prop_assert!(disk.contains(w)),
                            Device::Ufs => {
                                prop_assert!(ufs.contains(w));
                                prop_assert!(!disk.iter().any(|h| fits(*h)), "a holder with room comes first");
                            }
                        }
                        if v.iter().any(|(x, _)| !avoid.contains(x)) {
                            prop_assert!(!avoid.contains(w));
                        }
                    }
                }
                Devices::Full(ws) => {
                    prop_assert!(!disk.iter().chain(&ufs).any(|w| fits(*w)));
                    prop_assert!(!ws.is_empty());
                }
                Devices::NoSource => prop_assert!(disk.is_empty() && ufs.is_empty()),
            }
        }
    }
}

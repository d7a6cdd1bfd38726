use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::*;
use crate::replacement::Decision;

fn open(dir: &Path, capacity: u64, tier: Tier) -> Arc<TierStore> {
    open_with(dir, capacity, tier, Policy::Lru)
}

fn open_with(dir: &Path, capacity: u64, tier: Tier, policy: Policy) -> Arc<TierStore> {
    TierStore::open(tier, dir, capacity, tier == Tier::Mem, CacheConfig::with_policy(policy)).unwrap()
}

/// Any policy, for the property tests.
fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![Just(Policy::Lru), Just(Policy::Lfu), Just(Policy::Affinity), Just(Policy::Cava)]
}

fn reserve(t: &Arc<TierStore>, bytes: u64) -> Result<Reservation> {
    t.reserve_evicting(bytes, &|_| true).0
}

/// Writes and commits a block of `len` bytes.
fn put(t: &Arc<TierStore>, block: u64, len: u64, pinned: bool, protected: &dyn Fn(u64) -> bool) -> Vec<u64> {
    let (r, evicted) = t.reserve_evicting(len, protected);
    let tmp = t.temp_path(block);
    std::fs::write(&tmp, vec![7u8; len as usize]).unwrap();
    t.commit(block, &tmp, len, r.unwrap(), pinned).unwrap();
    evicted.into_iter().map(|(b, _)| b).collect()
}

#[test]
fn capacity_is_enforced_and_reservations_return() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 100, Tier::Mem);
    let r1 = reserve(&t, 60).unwrap();
    let e = reserve(&t, 60).err().expect("full");
    assert_eq!(e.kind, thaw_common::ErrorKind::ResourceExhausted);
    assert!(e.message.contains("MEM tier is full"), "{e}");
    let tmp = t.temp_path(7);
    std::fs::write(&tmp, b"0123456789").unwrap();
    t.commit(7, &tmp, 10, r1, false).unwrap();
    assert_eq!(t.usage(&|_| false).used, 10);
    {
        let _r = reserve(&t, 90).unwrap();
        assert!(reserve(&t, 1).is_err());
    }
    assert_eq!(t.usage(&|_| false).used, 10);
    assert_eq!(t.remove(7), Some(10));
    assert_eq!(t.usage(&|_| false).used, 0);
    assert!(!t.block_path(7).exists());
}

#[test]
fn disk_blocks_survive_reopen_and_mem_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 100, Tier::Disk);
    put(&t, 3, 3, false, &|_| false);
    std::fs::write(t.temp_path(4), b"partial").unwrap();
    drop(t);
    let t = open(dir.path(), 100, Tier::Disk);
    assert_eq!(t.get(3), Some(3));
    assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    // Found on reopen: nothing says another copy exists.
    assert_eq!(t.split(&|_| false).pinned, 3);
    let m = open(dir.path(), 100, Tier::Mem);
    assert_eq!(m.get(3), None);
    assert_eq!(m.usage(&|_| false).used, 0);
}

#[test]
fn a_full_tier_evicts_the_least_recently_read_cached_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 40, Tier::Mem);
    for b in 1..=4 {
        put(&t, b, 10, false, &|_| false);
    }
    t.touch(1); // read again: now the most recent
    t.touch(3);
    assert_eq!(put(&t, 5, 15, false, &|_| false), vec![2, 4]);
    assert_eq!(t.get(2), None);
    assert!(!t.block_path(2).exists() && !t.block_path(4).exists());
    assert_eq!(t.get(1), Some(10));
    assert_eq!(t.usage(&|_| false).used, 35);
    assert_eq!(t.evictions(), (2, 20));
}

#[test]
fn held_and_pinned_blocks_stay_and_a_tier_full_of_them_says_what_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 30, Tier::Mem);
    put(&t, 1, 10, true, &|_| false); // memory-only write
    put(&t, 2, 10, false, &|_| false); // held for a job
    put(&t, 3, 10, false, &|_| false); // cache
    let held = |b| b == 2;
    assert_eq!(t.split(&held), Split { held: 10, pinned: 10, evictable: 10, in_flight: 0 });
    let (r, evicted) = t.reserve_evicting(20, &held);
    let e = r.err().expect("only 10 evictable");
    assert!(evicted.is_empty(), "nothing evicted for a block that still would not fit");
    assert!(e.message.contains("10 B held for jobs, 10 B not persisted anywhere else"), "{e}");
    assert_eq!(t.get(3), Some(10));
    assert_eq!(put(&t, 4, 10, false, &held), vec![3]);
    assert_eq!((t.get(1), t.get(2)), (Some(10), Some(10)));
}

#[test]
fn lfu_keeps_the_block_read_most_where_lru_would_evict_it() {
    let dir = tempfile::tempdir().unwrap();
    for (policy, evicted) in [(Policy::Lfu, 2), (Policy::Lru, 1)] {
        let t = open_with(&dir.path().join(policy.name()), 30, Tier::Mem, policy);
        put(&t, 1, 10, false, &|_| false);
        put(&t, 2, 10, false, &|_| false);
        put(&t, 3, 10, false, &|_| false);
        // Block 1: read often, long ago; 2: never; 3: once, lately.
        (0..5).for_each(|_| t.touch(1));
        t.touch(3);
        t.touch(2);
        t.touch(3);
        assert_eq!(put(&t, 4, 10, false, &|_| false), vec![evicted], "{}", policy.name());
    }
}

const MB: u64 = 1;

fn cava(dir: &Path, capacity: u64, window: Duration, aff: &[(&str, f64)]) -> Arc<TierStore> {
    let affinities = Arc::new(Affinities::default());
    affinities.set(aff.iter().map(|(j, a)| (j.to_string(), *a, 1.0)), 0.2);
    let cache = CacheConfig { policy: Policy::Cava, window, affinities };
    TierStore::open(Tier::Mem, dir, capacity, true, cache).unwrap()
}

/// A read's fill of `block` for `job`, as the worker does it: counted,
/// then room asked for; returns the evicted blocks, or the refusal.
fn fill(t: &Arc<TierStore>, block: u64, len: u64, job: &str) -> std::result::Result<Vec<u64>, ThawError> {
    t.note_request(block, job);
    let (r, evicted) = t.reserve_for(len, &|_| false, Need::Cache { block, job });
    let r = r?;
    let tmp = t.temp_path(block);
    std::fs::write(&tmp, vec![7u8; len as usize]).unwrap();
    t.commit_for(block, &tmp, len, r, false, Some(job)).unwrap();
    t.access(block, job); // the read served from the fill: not counted twice
    Ok(evicted.into_iter().map(|(b, _)| b).collect())
}

fn blk(file: u64, index: u64) -> u64 {
    thaw_common::ids::block_id(file, index)
}

#[test]
fn cava_keeps_a_hot_file_and_drops_a_cold_read_not_worth_it() {
    let dir = tempfile::tempdir().unwrap();
    let t = cava(dir.path(), 40 * MB, DEFAULT_WINDOW, &[("grep", 0.4), ("sort", 0.2), ("rank", 0.05)]);
    // File 1 (two blocks) read three times by sort (0.2 x 3 = 0.6); file 2
    // once by rank (0.05).
    for round in 0..3 {
        for i in 0..2 {
            if round == 0 {
                fill(&t, blk(1, i), 10 * MB, "sort").unwrap();
            } else {
                assert!(t.access(blk(1, i), &format!("sort{round}")), "a hit");
            }
        }
    }
    fill(&t, blk(2, 0), 10 * MB, "rank").unwrap();
    fill(&t, blk(2, 1), 10 * MB, "rank").unwrap();
    // grep reads file 3 (benefit 0.4): evicts rank's file (0.05), not the hot one.
    assert_eq!(fill(&t, blk(3, 0), 10 * MB, "grep").unwrap(), vec![blk(2, 0)]);
    assert_eq!(fill(&t, blk(3, 1), 10 * MB, "grep2").unwrap(), vec![blk(2, 1)]);
    // Another cold file read by rank (0.05) is worth less than every victim: dropped.
    let e = fill(&t, blk(4, 0), 10 * MB, "rank").unwrap_err();
    assert_eq!(e.kind, thaw_common::ErrorKind::ResourceExhausted);
    assert!(e.message.contains("not cached") && e.message.contains("cava"), "{e}");
    assert_eq!(t.cache_counters().2, 1, "one drop counted");
    // The same under LRU would have evicted the hot file's first block.
    let lru = open_with(&dir.path().join("lru"), 20 * MB, Tier::Mem, Policy::Lru);
    put(&lru, blk(1, 0), 10 * MB, false, &|_| false);
    put(&lru, blk(2, 0), 10 * MB, false, &|_| false);
    lru.touch(blk(2, 0));
    assert_eq!(put(&lru, blk(4, 0), 10 * MB, false, &|_| false), vec![blk(1, 0)]);
    // Frequencies and benefits as the worker reports them.
    let stats = t.file_stats(10);
    assert_eq!(stats[0].file_id, 1);
    assert!((stats[0].frequency - 3.0).abs() < 1e-9 && (stats[0].benefit - 0.6).abs() < 1e-6, "{stats:?}");
    assert_eq!(stats[0].cached_bytes, 20 * MB);
}

#[test]
fn an_application_never_evicts_its_own_blocks_so_a_scan_larger_than_memory_does_not_thrash() {
    let dir = tempfile::tempdir().unwrap();
    let t = cava(dir.path(), 30 * MB, DEFAULT_WINDOW, &[("scan", 0.4)]);
    let mut refused = 0;
    for i in 0..6 {
        match fill(&t, blk(9, i), 10 * MB, "scan") {
            Ok(evicted) => assert!(evicted.is_empty(), "evicted its own block"),
            Err(e) => {
                assert!(e.message.contains("reading application's own"), "{e}");
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 3);
    // The first three blocks stay and serve the next scan from memory.
    assert!((0..3).all(|i| t.get(blk(9, i)).is_some()));
}

#[test]
fn reads_leave_the_window_and_their_blocks_fall_to_benefit_zero() {
    let dir = tempfile::tempdir().unwrap();
    let low = [("a", 0.4), ("b", 0.05), ("b2", 0.05), ("b3", 0.05)];
    let t = cava(dir.path(), 20 * MB, Duration::from_millis(300), &low);
    fill(&t, blk(1, 0), 10 * MB, "a").unwrap();
    t.access(blk(1, 0), "a2");
    fill(&t, blk(2, 0), 10 * MB, "b").unwrap();
    // Now: file 1 worth 0.8, file 2 0.05; a low-affinity read is dropped.
    assert!(fill(&t, blk(3, 0), 10 * MB, "b2").is_err());
    std::thread::sleep(Duration::from_millis(400));
    // Both fell out of the window (benefit 0): the new read evicts the LRU one.
    assert_eq!(fill(&t, blk(3, 0), 10 * MB, "b3").unwrap(), vec![blk(1, 0)]);
    assert!(t.file_stats(10).iter().all(|f| f.file_id == 3 || f.benefit == 0.0));
}

#[test]
fn a_new_affinity_table_reranks_what_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let t = cava(dir.path(), 20 * MB, DEFAULT_WINDOW, &[("x", 0.4), ("y", 0.2)]);
    fill(&t, blk(1, 0), 10 * MB, "x").unwrap();
    fill(&t, blk(2, 0), 10 * MB, "y").unwrap();
    let victim = |t: &Arc<TierStore>| t.plan(10 * MB, &|_| false, Need::Required);
    assert_eq!(victim(&t), Decision::Evict(vec![blk(2, 0)]));
    // The master reclassifies x as low.
    t.cache.affinities.set([("x".to_string(), 0.05, 1.0), ("y".to_string(), 0.2, 1.0)], 0.2);
    assert_eq!(victim(&t), Decision::Evict(vec![blk(1, 0)]));
}

#[derive(Debug, Clone)]
enum Op {
    /// Write a block (pinned or not) of this many bytes.
    Put(u64, bool),
    /// Read a stored block (by index into the stored ones).
    Read(usize),
    /// Toggle a stored block's protection (a job expects it, or lets go).
    Protect(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..40, prop::bool::weighted(0.15)).prop_map(|(n, p)| Op::Put(n, p)),
        3 => any::<prop::sample::Index>().prop_map(|i| Op::Read(i.index(1 << 16))),
        2 => any::<prop::sample::Index>().prop_map(|i| Op::Protect(i.index(1 << 16))),
    ]
}

#[derive(Debug, Clone)]
enum CacheOp {
    /// A read of (file, index) by application j: a hit, or a fill of `len`.
    Read(u64, u64, usize, u64),
    /// A migration or write of a block of `len`.
    Put(u64, u64),
    /// Toggle a stored block's protection.
    Protect(usize),
    /// Open a stored block as a short-circuit reader does (shared lock),
    /// or close it.
    Open(usize),
    /// The master sends a new affinity table (rotated by this much).
    Reclassify(usize),
}

fn cache_op() -> impl Strategy<Value = CacheOp> {
    prop_oneof![
        5 => (1u64..6, 0u64..4, 0usize..4, 1u64..30).prop_map(|(f, i, j, n)| CacheOp::Read(f, i, j, n)),
        1 => (100u64..200, 1u64..30).prop_map(|(f, n)| CacheOp::Put(f, n)),
        1 => any::<prop::sample::Index>().prop_map(|i| CacheOp::Protect(i.index(1 << 16))),
        1 => any::<prop::sample::Index>().prop_map(|i| CacheOp::Open(i.index(1 << 16))),
        1 => (1usize..3).prop_map(CacheOp::Reclassify),
    ]
}

fn any_policy() -> impl Strategy<Value = Policy> {
    prop_oneof![Just(Policy::Lru), Just(Policy::Lfu), Just(Policy::Affinity), Just(Policy::Cava)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Under every policy, with reads by several applications: the ordered
    /// index decides exactly what the pure policy decides over the same
    /// candidates; protected blocks are never evicted; used bytes never
    /// pass the capacity.
    #[test]
    fn the_index_decides_as_the_policy_and_keeps_the_promises(
        ops in prop::collection::vec(cache_op(), 1..60),
        policy in any_policy(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let jobs = ["a", "b", "c", "d"];
        let affinities = Arc::new(Affinities::default());
        affinities.set([("a".to_string(), 0.4, 1.0), ("b".to_string(), 0.2, 1.0), ("c".to_string(), 0.05, 1.0)], 0.2);
        let cache = CacheConfig { policy, window: DEFAULT_WINDOW, affinities: affinities.clone() };
        let cap = 100;
        let t = TierStore::open(Tier::Mem, dir.path(), cap, true, cache).unwrap();
        let mut protected: HashSet<u64> = HashSet::new();
        let mut open: HashMap<u64, std::fs::File> = HashMap::new();
        for op in ops {
            let prot = protected.clone();
            // As the worker asks: held for a job, or open by a reader.
            let is_prot = |b: u64| prot.contains(&b) || t.in_use(b);
            match op {
                CacheOp::Read(f, i, j, n) => {
                    let b = blk(f, i);
                    if t.get(b).is_some() {
                        t.access(b, jobs[j]);
                    } else {
                        t.note_request(b, jobs[j]);
                        let need = Need::Cache { block: b, job: jobs[j] };
                        let expected = {
                            let st = t.lock();
                            let short = (st.used + n).saturating_sub(cap);
                            drop(st);
                            let cands = t.candidates(&is_prot);
                            let request = { let st = t.lock(); t.request(&st, need) };
                            policy.choose(&cands, short, request)
                        };
                        prop_assert_eq!(t.plan(n, &is_prot, need), expected.clone());
                        let (r, evicted) = t.reserve_for(n, &is_prot, need);
                        for (b, _) in &evicted {
                            prop_assert!(!protected.contains(b), "evicted protected block {}", b);
                            prop_assert!(!open.contains_key(b), "evicted block {} a reader holds open", b);
                        }
                        match (r, expected) {
                            (Ok(r), Decision::Evict(v)) => {
                                prop_assert_eq!(evicted.iter().map(|e| e.0).collect::<Vec<_>>(), v);
                                let tmp = t.temp_path(b);
                                std::fs::write(&tmp, vec![1u8; n as usize]).unwrap();
                                t.commit_for(b, &tmp, n, r, false, Some(jobs[j])).unwrap();
                                t.access(b, jobs[j]);
                            }
                            (Err(_), Decision::Evict(_)) => prop_assert!(n > cap),
                            (Ok(_), d) => prop_assert!(false, "reserved though the policy said {:?}", d),
                            (Err(_), _) => prop_assert!(evicted.is_empty()),
                        }
                    }
                }
                CacheOp::Put(f, n) => {
                    let b = blk(f, 0);
                    if t.get(b).is_none() {
                        let (r, evicted) = t.reserve_for(n, &is_prot, Need::Required);
                        for (e, _) in &evicted {
                            prop_assert!(!protected.contains(e));
                        }
                        if let Ok(r) = r {
                            let tmp = t.temp_path(b);
                            std::fs::write(&tmp, vec![1u8; n as usize]).unwrap();
                            t.commit(b, &tmp, n, r, false).unwrap();
                        }
                    }
                }
                CacheOp::Protect(i) => {
                    let mut stored: Vec<u64> = t.report().iter().map(|r| r.block_id).collect();
                    stored.sort();
                    if !stored.is_empty() {
                        let b = stored[i % stored.len()];
                        if !protected.remove(&b) { protected.insert(b); }
                    }
                }
                CacheOp::Reclassify(k) => {
                    let values = [0.4, 0.2, 0.05];
                    affinities.set((0..3).map(|j| (jobs[j].to_string(), values[(j + k) % 3], 1.0)), 0.2);
                }
                CacheOp::Open(i) => {
                    let mut stored: Vec<u64> = t.report().iter().map(|r| r.block_id).collect();
                    stored.sort();
                    if !stored.is_empty() {
                        let b = stored[i % stored.len()];
                        if open.remove(&b).is_none() {
                            use std::os::fd::AsRawFd;
                            let f = std::fs::File::open(t.block_path(b)).unwrap();
                            // SAFETY: a valid descriptor.
                            prop_assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH) }, 0);
                            open.insert(b, f);
                        }
                    }
                }
            }
            for b in open.keys() {
                prop_assert!(t.get(*b).is_some(), "block {} open by a reader is gone", b);
            }
            let u = t.usage(&|b| protected.contains(&b));
            prop_assert!(u.used <= cap);
            for b in &protected {
                prop_assert!(t.get(*b).is_some(), "protected block {} is gone", b);
            }
        }
    }

    /// Used bytes never pass the capacity; no protected or pinned block is
    /// ever evicted; a new block is refused only when the blocks the policy
    /// may not touch leave too little room.
    #[test]
    fn replacement_keeps_its_promises(ops in prop::collection::vec(op(), 1..80), policy in policy()) {
        let dir = tempfile::tempdir().unwrap();
        let cap = 100;
        let t = open_with(dir.path(), cap, Tier::Mem, policy);
        let mut protected: HashSet<u64> = HashSet::new();
        let mut pinned: HashSet<u64> = HashSet::new();
        let mut next = 1u64;
        for op in ops {
            let stored: Vec<u64> = { let mut v: Vec<u64> = t.report().iter().map(|r| r.block_id).collect(); v.sort(); v };
            match op {
                Op::Put(n, pin) => {
                    let keep: u64 = stored.iter().filter(|b| protected.contains(b) || pinned.contains(b)).map(|b| t.get(*b).unwrap()).sum();
                    let prot = protected.clone();
                    let (r, evicted) = t.reserve_evicting(n, &|b| prot.contains(&b));
                    for (b, _) in &evicted {
                        prop_assert!(!protected.contains(b) && !pinned.contains(b), "evicted a protected block {b}");
                        prop_assert!(!t.block_path(*b).exists());
                    }
                    match r {
                        Ok(r) => {
                            let tmp = t.temp_path(next);
                            std::fs::write(&tmp, vec![1u8; n as usize]).unwrap();
                            t.commit(next, &tmp, n, r, pin).unwrap();
                            if pin { pinned.insert(next); }
                            next += 1;
                        }
                        // Refused only if what must stay leaves no room.
                        Err(_) => prop_assert!(keep + n > cap, "refused {n} with only {keep} protected"),
                    }
                }
                Op::Read(i) if !stored.is_empty() => t.touch(stored[i % stored.len()]),
                Op::Protect(i) if !stored.is_empty() => {
                    let b = stored[i % stored.len()];
                    if !protected.remove(&b) { protected.insert(b); }
                }
                _ => {}
            }
            let u = t.usage(&|b| protected.contains(&b));
            prop_assert!(u.used <= cap);
            prop_assert_eq!(u.used, u.held + u.pinned + u.evictable);
            for b in protected.iter().chain(pinned.iter()) {
                prop_assert!(t.get(*b).is_some(), "protected block {} is gone", b);
            }
        }
    }

    /// A tier full of evictable blocks always admits a new block that fits
    /// the tier at all.
    #[test]
    fn a_full_tier_of_cache_always_admits(sizes in prop::collection::vec(1u64..50, 1..30), n in 1u64..=100, policy in policy()) {
        let dir = tempfile::tempdir().unwrap();
        let t = open_with(dir.path(), 100, Tier::Mem, policy);
        for (i, s) in sizes.iter().enumerate() {
            put(&t, i as u64 + 1, *s, false, &|_| false);
        }
        let (r, _) = t.reserve_evicting(n, &|_| false);
        prop_assert!(r.is_ok());
        prop_assert!(t.usage(&|_| false).used <= 100);
    }
}

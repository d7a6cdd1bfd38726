//! Decisions of the planner: Algorithm 1's targets, queue depth, priority order,
//! Ignem's random binding, failure handling, leases.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use thaw_common::ids::block_id;
use thaw_common::proto::{JobBlockRead, SourceEstimate, TierUsage};

use super::*;

const LEN: u64 = 1000;

fn tiers() -> Vec<TierUsage> {
    vec![
        TierUsage { tier: Tier::Mem as i32, capacity: 1 << 30, ..Default::default() },
        TierUsage { tier: Tier::Disk as i32, capacity: 1 << 30, ..Default::default() },
    ]
}

/// A cluster of `n` workers (ids 1..=n) each holding a DISK replica of blocks
/// 0..blocks of file 1.
fn cluster(n: usize, blocks: u64) -> (Cluster, Vec<u64>) {
    let mut c = Cluster::default();
    let now = Instant::now();
    let ids: Vec<u64> = (0..n).map(|i| c.register(&format!("w{i}:1"), &format!("h{i}"), "r", tiers(), now)).collect();
    for b in 0..blocks {
        for &w in &ids {
            c.add_replica(block_id(1, b), w, Tier::Disk, LEN);
        }
    }
    (c, ids)
}

fn specs(file: u64, range: std::ops::Range<u64>) -> Vec<BlockSpec> {
    range.map(|i| BlockSpec { block: block_id(file, i), length: LEN, ufs: None }).collect()
}

fn report(device: Device, ns_per_byte: f64, queued: u32) -> WorkerMigrationReport {
    WorkerMigrationReport {
        sources: vec![SourceEstimate {
            source: device.source() as i32,
            ns_per_byte,
            queued,
            queued_bytes: queued as u64 * LEN,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn dyrs() -> Migrations {
    Migrations::new(Policy::Dyrs, Priority::Fifo, Duration::from_secs(60))
}

const HB: Duration = Duration::from_millis(1);

#[test]
fn algorithm_1_spreads_blocks_by_estimated_finish() {
    // Three replica holders with per-block times 1, 2 and 4 units: greedy earliest
    // finish gives them 4, 2 and 1 of 7 blocks, all finishing at 4 units.
    let (c, w) = cluster(3, 7);
    let mut m = dyrs();
    for (i, spb) in [1.0, 2.0, 4.0].into_iter().enumerate() {
        m.heartbeat(&c, w[i], Some(report(Device::Disk, spb, 0)), vec![], HB);
    }
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..7), Instant::now()).unwrap();
    m.plan(&c);
    let count = |worker: u64| (0..7).filter(|i| m.target_of(block_id(1, *i)) == Some((worker, Device::Disk))).count();
    assert_eq!((count(w[0]), count(w[1]), count(w[2])), (4, 2, 1));
    // The first block goes where it finishes soonest: the fastest node.
    assert_eq!(m.target_of(block_id(1, 0)), Some((w[0], Device::Disk)));
}

#[test]
fn a_slow_node_gets_no_tail_block_that_faster_nodes_finish_sooner() {
    let (c, w) = cluster(2, 3);
    let mut m = dyrs();
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], HB);
    m.heartbeat(&c, w[1], Some(report(Device::Disk, 10.0, 0)), vec![], HB);
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..3), Instant::now()).unwrap();
    m.plan(&c);
    for i in 0..3 {
        assert_eq!(m.target_of(block_id(1, i)), Some((w[0], Device::Disk)), "block {i}");
    }
    // The slow node asks for work and gets none; the fast one gets its blocks.
    let slow = m.heartbeat(&c, w[1], Some(report(Device::Disk, 10.0, 0)), vec![], Duration::from_secs(1));
    assert!(slow.migrations.is_empty());
    let fast = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], Duration::from_secs(1));
    assert_eq!(fast.migrations.len(), 3);
}

#[test]
fn a_device_with_a_high_fixed_cost_gets_no_small_blocks_a_faster_one_finishes_sooner() {
    // Same speed per byte; the first device takes 200 ms per migration however
    // small (a busy disk's queue), the second 4 ms. Per byte alone, the blocks
    // would split evenly; with the fixed cost, the second takes all five (it
    // finishes them in 20 ms, before the first would finish one).
    let (c, w) = cluster(2, 5);
    let mut m = dyrs();
    for (i, fixed) in [200e6, 4e6].into_iter().enumerate() {
        let mut r = report(Device::Disk, 1.0, 0);
        r.sources[0].ns_per_migration = fixed;
        m.heartbeat(&c, w[i], Some(r), vec![], HB);
    }
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..5), Instant::now()).unwrap();
    m.plan(&c);
    for i in 0..5 {
        assert_eq!(m.target_of(block_id(1, i)), Some((w[1], Device::Disk)), "block {i}");
    }
    // And the second's queue lasts a 10 ms interval at 4 ms each: three bound.
    let mut r = report(Device::Disk, 1.0, 0);
    r.sources[0].ns_per_migration = 4e6;
    let o = m.heartbeat(&c, w[1], Some(r), vec![], Duration::from_millis(10));
    assert_eq!(o.migrations.len(), 3);
}

#[test]
fn queued_work_counts_against_a_node() {
    // Equal speeds, but the first node already has 5 blocks queued.
    let (c, w) = cluster(2, 2);
    let mut m = dyrs();
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 5)), vec![], HB);
    m.heartbeat(&c, w[1], Some(report(Device::Disk, 1.0, 0)), vec![], HB);
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..2), Instant::now()).unwrap();
    m.plan(&c);
    assert_eq!(m.target_of(block_id(1, 0)), Some((w[1], Device::Disk)));
    assert_eq!(m.target_of(block_id(1, 1)), Some((w[1], Device::Disk)));
}

#[test]
fn a_device_not_measured_yet_gets_only_one_running_and_one_queued() {
    let (c, w) = cluster(1, 20);
    let mut m = dyrs();
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..20), Instant::now()).unwrap();
    m.plan(&c);
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 0.0, 0)), vec![], Duration::from_secs(10));
    assert_eq!(o.migrations.len(), 2, "binding is final: wait for a measurement");
    assert!(o.migrations_waiting);
}

#[test]
fn a_heartbeat_binds_just_enough_to_last_until_the_next() {
    let (c, w) = cluster(1, 100);
    let mut m = dyrs();
    // 1000 ns per byte: a 1000-byte block takes 1 ms. With a 10 ms interval the
    // queue needs 10 blocks' worth.
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 0)), vec![], HB);
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..100), Instant::now()).unwrap();
    m.plan(&c);
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 0)), vec![], Duration::from_millis(10));
    assert_eq!(o.migrations.len(), 10);
    assert!(o.migrations_waiting, "90 more are targeted here: a device that runs dry may ask early");
    // Bound is final: they are not handed out again; a full queue gets nothing more.
    m.plan(&c);
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 10)), vec![], Duration::from_millis(10));
    assert!(o.migrations.is_empty());
    // Half drained: topped up by five.
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 5)), vec![], Duration::from_millis(10));
    assert_eq!(o.migrations.len(), 5);
    // A device far slower than the interval still gets one running and one queued.
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1e9, 0)), vec![], Duration::from_millis(10));
    assert_eq!(o.migrations.len(), 2);
    // Once everything is bound, nothing is waiting.
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], Duration::from_secs(10));
    assert_eq!(o.migrations.len(), 100 - 10 - 5 - 2);
    assert!(!o.migrations_waiting);
}

#[test]
fn a_light_ask_binds_like_a_heartbeat_without_the_job_lists() {
    let (c, w) = cluster(1, 30);
    let mut m = dyrs();
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 0)), vec![], HB);
    assert!(!m.has_work(w[0]));
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..30), Instant::now()).unwrap();
    assert!(!m.has_work(w[0]), "not targeted before a planning pass");
    m.plan(&c);
    assert!(m.targeted() && m.has_work(w[0]), "a held ask is answered once the pass targets blocks here");
    // A light ask binds a heartbeat interval's worth, and says more is waiting;
    // the dead-job question is left to the full heartbeat.
    let mut r = report(Device::Disk, 1000.0, 0);
    r.referenced_jobs = vec!["gone".into()];
    let o = m.ask(&c, w[0], Some(r), vec![JobBlockRead { job_id: "j".into(), block_id: block_id(1, 29) }], HB * 10);
    assert_eq!(o.migrations.len(), 10);
    assert!(o.migrations_waiting);
    assert_eq!(o.waiting_sources, vec![MigrationSource::Disk], "the DISK device's work: only it asks");
    assert!(o.migrating_jobs.is_empty() && o.dead_jobs.is_empty(), "no job lists in a light answer");
    // The read it carried counted: block 29 no longer pends.
    assert_eq!(m.target_of(block_id(1, 29)), None);
    // It ran dry (the ten are done): the next light ask gets the rest (but the
    // one read).
    let mut r = report(Device::Disk, 1000.0, 0);
    r.events = o
        .migrations
        .iter()
        .map(|c| MigrationEvent { block_id: c.block_id, outcome: "done".into(), ..Default::default() })
        .collect();
    let o = m.ask(&c, w[0], Some(r), vec![], Duration::from_secs(1));
    assert_eq!(o.migrations.len(), 19);
    assert!(!o.migrations_waiting);
    assert_eq!(m.worker_load(w[0]).map(|l| l.done), Some(10), "the light ask's events counted");
    m.plan(&c);
    assert!(!m.has_work(w[0]));
    // A full heartbeat still names the live jobs.
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 0)), vec![], HB);
    assert_eq!(o.migrating_jobs, vec!["j".to_string()]);
}

#[test]
fn smallest_job_first_with_submission_as_tie_breaker() {
    let (c, w) = cluster(1, 10);
    // DYRS's default is smallest job first (its paper's FIFO measured slower for
    // small jobs: Policy::default_priority); naive keeps the paper's FIFO.
    assert_eq!(Policy::Dyrs.default_priority(), Priority::SmallestJobFirst);
    assert_eq!(Policy::Naive.default_priority(), Priority::Fifo);
    for (priority, want) in [
        (Policy::Dyrs.default_priority(), vec!["small-a", "small-b", "big", "big", "big"]),
        (Priority::Fifo, vec!["big", "big", "big", "small-a", "small-b"]),
    ] {
        let mut m = Migrations::new(Policy::Dyrs, priority, Duration::from_secs(60));
        let now = Instant::now();
        m.migrate(&c, "big", EvictionMode::Explicit, None, specs(1, 0..3), now).unwrap();
        m.migrate(&c, "small-a", EvictionMode::Explicit, None, specs(1, 3..4), now).unwrap();
        m.migrate(&c, "small-b", EvictionMode::Explicit, None, specs(1, 4..5), now).unwrap();
        m.plan(&c);
        let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 0)), vec![], Duration::from_secs(1));
        let order: Vec<&str> = o.migrations.iter().map(|c| c.jobs[0].job_id.as_str()).collect();
        assert_eq!(order, want, "{priority:?}");
        assert!(o.migrations.iter().all(|c| c.smallest_job_first == (priority == Priority::SmallestJobFirst)));
    }
}

#[test]
fn ignem_binds_every_block_at_once_to_a_replica_holder() {
    let (mut c, w) = cluster(3, 0);
    let now = Instant::now();
    // Block i has replicas on two of the three workers.
    for i in 0..30 {
        c.add_replica(block_id(1, i), w[(i % 3) as usize], Tier::Disk, LEN);
        c.add_replica(block_id(1, i), w[((i + 1) % 3) as usize], Tier::Disk, LEN);
    }
    let mut m = Migrations::new(Policy::Ignem, Priority::SmallestJobFirst, Duration::from_secs(60));
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..30), now).unwrap();
    let mut got = 0;
    let mut per_worker = Vec::new();
    for &id in &w {
        let o = m.heartbeat(&c, id, None, vec![], HB);
        for cmd in &o.migrations {
            let holders: Vec<u64> = c.block(cmd.block_id).unwrap().replicas.iter().map(|r| r.worker).collect();
            assert!(holders.contains(&id), "block bound to a worker without a replica");
        }
        got += o.migrations.len();
        per_worker.push(o.migrations.len());
    }
    assert_eq!(got, 30);
    // Random, not all on one holder.
    assert!(per_worker.iter().all(|n| *n < 30), "{per_worker:?}");
}

#[test]
fn under_store_blocks_may_go_to_any_live_worker_and_memory_blocks_only_gain_a_reference() {
    let (mut c, w) = cluster(2, 0);
    let ufs = |i: u64| Some(UfsSource { path: "/f".into(), offset: i * LEN, length: LEN });
    c.add_replica(block_id(2, 1), w[1], Tier::Mem, LEN);
    let mut m = dyrs();
    let blocks = vec![
        BlockSpec { block: block_id(2, 0), length: LEN, ufs: ufs(0) },
        BlockSpec { block: block_id(2, 1), length: LEN, ufs: ufs(1) },
    ];
    m.migrate(&c, "j", EvictionMode::Implicit, None, blocks, Instant::now()).unwrap();
    m.plan(&c);
    let (wk, dev) = m.target_of(block_id(2, 0)).unwrap();
    assert_eq!(dev, Device::Ufs);
    assert!(w.contains(&wk));
    assert_eq!(m.target_of(block_id(2, 1)), None, "a block in memory is not migrated");
    let o = m.heartbeat(&c, w[1], None, vec![], HB);
    assert_eq!(o.references.len(), 1);
    assert_eq!(o.references[0].block_id, block_id(2, 1));
    assert!(o.references[0].job.as_ref().unwrap().implicit);
    let info = m.job_info(&c, "j", Instant::now()).unwrap();
    assert_eq!((info.blocks, info.blocks_in_memory, info.blocks_pending), (2, 1, 1));
}

#[test]
fn a_lost_worker_s_migrations_go_elsewhere() {
    let (mut c, w) = cluster(2, 4);
    let mut m = dyrs();
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], HB);
    m.heartbeat(&c, w[1], Some(report(Device::Disk, 100.0, 0)), vec![], HB);
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..4), Instant::now()).unwrap();
    m.plan(&c);
    let o = m.heartbeat(&c, w[0], None, vec![], Duration::from_secs(1));
    assert_eq!(o.migrations.len(), 4);
    // Worker 0 dies: its replicas vanish and its bound migrations return.
    c.expire(Instant::now() + Duration::from_secs(100), Duration::from_secs(1));
    c.register("w1:1", "h1", "r", tiers(), Instant::now());
    for b in 0..4 {
        c.add_replica(block_id(1, b), w[1], Tier::Disk, LEN);
    }
    m.worker_lost(&c, w[0]);
    m.plan(&c);
    // 100 ns/B: a block takes 100 us; an interval of 150 us needs two.
    let o = m.heartbeat(&c, w[1], Some(report(Device::Disk, 100.0, 0)), vec![], Duration::from_micros(150));
    assert_eq!(o.migrations.len(), 2, "the slow survivor takes them, a heartbeat's worth at a time");
    assert_eq!(m.job_info(&c, "j", Instant::now()).unwrap().blocks_queued, 2);
}

#[test]
fn failures_retry_elsewhere_then_give_up() {
    let (c, w) = cluster(2, 1);
    let mut m = Migrations::new(Policy::Ignem, Priority::Fifo, Duration::from_secs(60));
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..1), Instant::now()).unwrap();
    let fail = |block| WorkerMigrationReport {
        events: vec![MigrationEvent { block_id: block, outcome: "failed: disk".into(), ..Default::default() }],
        ..Default::default()
    };
    let b = block_id(1, 0);
    let mut last = None;
    for attempt in 0..MAX_ATTEMPTS {
        let (holder, _) = m.target_of(b).expect("bound");
        if let Some(prev) = last {
            assert_ne!(holder, prev, "attempt {attempt} retried on the worker that failed");
        }
        last = Some(holder);
        m.heartbeat(&c, holder, Some(fail(b)), vec![], HB);
        // After two failures both workers have failed once: any may be tried.
        if attempt == 1 {
            last = None;
        }
    }
    assert!(m.target_of(b).is_none());
    let info = m.job_info(&c, "j", Instant::now()).unwrap();
    assert_eq!(info.blocks_failed, 1);
    let (events, next) = m.events(0, 0);
    assert_eq!(events.len(), MAX_ATTEMPTS as usize + 1);
    let last = events.last().unwrap();
    assert!(last.outcome.starts_with("given up: disk"), "{last:?}");
    assert!(last.worker_id != 0 && last.end_ms > 0, "{last:?}");
    assert_eq!(next, events.last().unwrap().seq + 1);
    assert!(m.events(next, 0).0.is_empty());
    let _ = w;
}

#[test]
fn reads_drop_pending_migrations_and_count_as_read() {
    let (c, w) = cluster(1, 3);
    let mut m = dyrs();
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..3), Instant::now()).unwrap();
    let read = JobBlockRead { job_id: "j".into(), block_id: block_id(1, 2) };
    m.heartbeat(&c, w[0], None, vec![read], HB);
    assert_eq!(m.pending(), 2);
    let info = m.job_info(&c, "j", Instant::now()).unwrap();
    assert_eq!((info.blocks_read, info.blocks_pending), (1, 2));
    assert_eq!(m.events(0, 0).0[0].outcome, "read-first");
}

#[test]
fn leases_expire_into_evictions_and_renewals_name_unknown_jobs() {
    let (c, w) = cluster(2, 2);
    let mut m = dyrs();
    let t0 = Instant::now();
    m.migrate(&c, "a", EvictionMode::Explicit, Some(Duration::from_secs(1)), specs(1, 0..2), t0).unwrap();
    m.migrate(&c, "b", EvictionMode::Explicit, Some(Duration::from_secs(10)), specs(1, 1..2), t0).unwrap();
    assert!(m.renew(&["a".into(), "zz".into()], t0 + Duration::from_millis(500)) == vec!["zz".to_string()]);
    assert!(m.expire(t0 + Duration::from_millis(1400), &w).is_empty(), "renewed");
    let dead = m.expire(t0 + Duration::from_secs(2), &w);
    assert_eq!(dead, vec!["a".to_string()]);
    assert!(!m.is_live("a") && m.is_live("b"));
    // Block 0 was only a's: its migration is gone. Block 1 stays for b.
    assert_eq!(m.pending(), 1);
    for &id in &w {
        let o = m.heartbeat(&c, id, None, vec![], HB);
        assert_eq!(o.evictions.len(), 1);
        assert_eq!(o.evictions[0].job_id, "a");
        assert!(o.evictions[0].blocks.is_empty());
        assert_eq!(o.migrating_jobs, vec!["b".to_string()]);
    }
    // A worker asking about the jobs it references learns which are dead.
    let r = WorkerMigrationReport { referenced_jobs: vec!["a".into(), "b".into()], ..Default::default() };
    assert_eq!(m.heartbeat(&c, w[0], Some(r), vec![], HB).dead_jobs, vec!["a".to_string()]);
    assert_eq!(m.renew(&["a".into()], t0).len(), 1);
    assert_eq!(m.evict("a", None, &w).unwrap_err().kind, thaw_common::ErrorKind::NotFound);
}

#[test]
fn partial_eviction_keeps_the_job() {
    let (c, w) = cluster(1, 3);
    let mut m = dyrs();
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..3), Instant::now()).unwrap();
    m.evict("j", Some(&[block_id(1, 0)]), &w).unwrap();
    let info = m.job_info(&c, "j", Instant::now()).unwrap();
    assert_eq!((info.blocks, info.bytes), (2, 2 * LEN));
    let o = m.heartbeat(&c, w[0], None, vec![], HB);
    assert_eq!(o.evictions[0].blocks, vec![block_id(1, 0)]);
}

#[test]
fn planning_ten_thousand_pending_blocks_is_quick() {
    // DYRS, section III-D: "under a millisecond for 50GB". Not a timing assertion
    // (see BENCHMARKS.md); this checks the pass covers every block.
    let (c, w) = cluster(7, 10_000);
    let mut m = dyrs();
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..10_000), Instant::now()).unwrap();
    m.plan(&c);
    // A pass targets the front of the order (FIFO here: the first blocks), a
    // window larger than any worker's queue.
    let window = PLAN_WINDOW + PLAN_WINDOW_PER_WORKER * w.len();
    let targeted: Vec<u64> = (0..10_000).filter(|i| m.target_of(block_id(1, *i)).is_some()).collect();
    assert_eq!(targeted, (0..window as u64).collect::<Vec<_>>());
}

proptest! {
    /// Under any interleaving of migrate, evict, reads, lease expiry and
    /// finished migrations, with workers that report what they hold: a pending
    /// migration always has a live job, no block is bound to two workers at once,
    /// and once every job is gone nothing is left.
    #[test]
    fn state_stays_consistent(ops in prop::collection::vec((0u8..7, 0u64..12, 0usize..3), 1..80)) {
        let (c, w) = cluster(3, 12);
        let mut m = dyrs();
        let t0 = Instant::now();
        let jobs = ["a", "b", "c"];
        // What each worker holds (queued or running).
        let mut holds: Vec<std::collections::BTreeSet<u64>> = vec![Default::default(); 3];
        let rep = |held: &std::collections::BTreeSet<u64>| WorkerMigrationReport {
            migrating_blocks: held.iter().copied().collect(),
            ..report(Device::Disk, 1.0, held.len() as u32)
        };
        for (i, (op, b, j)) in ops.into_iter().enumerate() {
            let now = t0 + Duration::from_millis(i as u64 * 100);
            let mut delivered = Vec::new();
            match op {
                0 | 1 => m.migrate(&c, jobs[j], EvictionMode::Explicit, Some(Duration::from_secs(2)), specs(1, b..(b + 3).min(12)), now).unwrap(),
                2 => { let _ = m.evict(jobs[j], None, &w); }
                3 => {
                    let read = JobBlockRead { job_id: jobs[j].into(), block_id: block_id(1, b) };
                    let o = m.heartbeat(&c, w[j], Some(rep(&holds[j])), vec![read], HB);
                    delivered.push((j, o.migrations));
                }
                4 => {
                    m.plan(&c);
                    for k in 0..3 {
                        let o = m.heartbeat(&c, w[k], Some(rep(&holds[k])), vec![], Duration::from_millis(5));
                        delivered.push((k, o.migrations));
                    }
                }
                5 => { m.expire(now, &w); }
                _ => {
                    // Worker j finishes its first block.
                    if let Some(&blk) = holds[j].iter().next() {
                        holds[j].remove(&blk);
                        let ev = MigrationEvent { block_id: blk, outcome: "done".into(), ..Default::default() };
                        let r = WorkerMigrationReport { events: vec![ev], ..rep(&holds[j]) };
                        let o = m.heartbeat(&c, w[j], Some(r), vec![], HB);
                        delivered.push((j, o.migrations));
                    }
                }
            }
            for (k, cmds) in delivered {
                for cmd in cmds {
                    for (other, held) in holds.iter().enumerate() {
                        prop_assert!(!held.contains(&cmd.block_id), "block {} bound again while worker {} holds it", cmd.block_id, other);
                    }
                    holds[k].insert(cmd.block_id);
                }
            }
            for mig in m.migrations.values() {
                if matches!(mig.state, State::Pending { .. }) {
                    prop_assert!(mig.jobs.iter().any(|j| m.is_live(j)), "pending migration without a live job");
                }
            }
        }
        m.expire(t0 + Duration::from_secs(3600), &w);
        prop_assert!(m.jobs.is_empty());
        prop_assert_eq!(m.pending(), 0);
    }
}

#[test]
fn a_lost_command_goes_back_to_pending_and_elsewhere() {
    let (c, w) = cluster(2, 1);
    let mut m = dyrs();
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], HB);
    m.heartbeat(&c, w[1], Some(report(Device::Disk, 5.0, 0)), vec![], HB);
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..1), Instant::now()).unwrap();
    m.plan(&c);
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], HB);
    assert_eq!(o.migrations.len(), 1);
    // That answer never arrived: the next report does not hold the block.
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], HB);
    assert!(!m.is_bound(block_id(1, 0)), "a lost command returns to pending");
    m.plan(&c);
    let again = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], HB);
    assert_eq!(again.migrations.len(), 1, "and is sent again");
    // A worker that holds it keeps it.
    let holding = WorkerMigrationReport { migrating_blocks: vec![block_id(1, 0)], ..report(Device::Disk, 1.0, 1) };
    m.heartbeat(&c, w[0], Some(holding), vec![], HB);
    assert!(m.is_bound(block_id(1, 0)));
}

#[test]
fn no_worker_yet_is_a_wait_not_a_failure_and_asking_again_retries_failed_blocks() {
    let ufs = |i: u64| Some(UfsSource { path: "/f".into(), offset: i * LEN, length: LEN });
    let blocks = || (0..3).map(|i| BlockSpec { block: block_id(1, i), length: LEN, ufs: ufs(i) }).collect::<Vec<_>>();
    for policy in [Policy::Dyrs, Policy::Ignem] {
        let mut c = Cluster::default();
        let mut m = Migrations::new(policy, Priority::Fifo, Duration::from_secs(60));
        m.migrate(&c, "j", EvictionMode::Explicit, None, blocks(), Instant::now()).unwrap();
        let info = m.job_info(&c, "j", Instant::now()).unwrap();
        assert_eq!((info.blocks_pending, info.blocks_failed), (3, 0), "{policy:?}");
        let w = c.register(&format!("w-{policy:?}:1"), "h", "r", tiers(), Instant::now());
        m.plan(&c);
        m.repair(&c);
        let o = m.heartbeat(&c, w, None, vec![], Duration::from_secs(1));
        assert!(!o.migrations.is_empty(), "{policy:?}: nothing bound once a worker came");
    }
    // A block given up on is tried again when the job asks again.
    let (c, w) = cluster(1, 1);
    let mut m = Migrations::new(Policy::Ignem, Priority::Fifo, Duration::from_secs(60));
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..1), Instant::now()).unwrap();
    for _ in 0..MAX_ATTEMPTS {
        let ev = MigrationEvent { block_id: block_id(1, 0), outcome: "failed: x".into(), ..Default::default() };
        m.heartbeat(&c, w[0], Some(WorkerMigrationReport { events: vec![ev], ..Default::default() }), vec![], HB);
    }
    assert_eq!(m.job_info(&c, "j", Instant::now()).unwrap().blocks_failed, 1);
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..1), Instant::now()).unwrap();
    let info = m.job_info(&c, "j", Instant::now()).unwrap();
    assert_eq!((info.blocks_failed, info.blocks_queued), (0, 1));
}

#[test]
fn evicting_paths_the_job_does_not_have_releases_nothing() {
    let (c, w) = cluster(1, 2);
    let mut m = dyrs();
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..2), Instant::now()).unwrap();
    m.evict("j", Some(&[block_id(9, 0)]), &w).unwrap();
    assert!(m.heartbeat(&c, w[0], None, vec![], HB).evictions.is_empty());
    assert_eq!(m.job_info(&c, "j", Instant::now()).unwrap().blocks, 2);
}

#[test]
fn a_read_of_a_block_bound_elsewhere_cancels_it_there() {
    let (c, w) = cluster(2, 1);
    let mut m = Migrations::new(Policy::Ignem, Priority::Fifo, Duration::from_secs(60));
    m.migrate(&c, "j", EvictionMode::Implicit, None, specs(1, 0..1), Instant::now()).unwrap();
    let (holder, _) = m.target_of(block_id(1, 0)).unwrap();
    let other = if holder == w[0] { w[1] } else { w[0] };
    m.heartbeat(&c, other, None, vec![JobBlockRead { job_id: "j".into(), block_id: block_id(1, 0) }], HB);
    let o = m.heartbeat(&c, holder, None, vec![], HB);
    assert!(o.evictions.iter().any(|e| e.job_id == "j" && e.blocks == vec![block_id(1, 0)]), "{:?}", o.evictions);
}

#[test]
fn policy_none_settles_at_once_and_deleted_files_fail_their_blocks() {
    let (c, _) = cluster(1, 2);
    let mut m = Migrations::new(Policy::None, Priority::Fifo, Duration::from_secs(60));
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..2), Instant::now()).unwrap();
    let info = m.job_info(&c, "j", Instant::now()).unwrap();
    assert_eq!((info.blocks_pending, info.blocks_not_migrated), (0, 2));
    let (c, _) = cluster(1, 2);
    let mut m = dyrs();
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..2), Instant::now()).unwrap();
    m.drop_file(1);
    assert_eq!(m.pending(), 0);
    assert_eq!(m.job_info(&c, "j", Instant::now()).unwrap().blocks_failed, 2);
}

fn naive() -> Migrations {
    Migrations::new(Policy::Naive, Policy::Naive.default_priority(), Duration::from_secs(60))
}

#[test]
fn naive_targets_the_holder_with_the_fewest_outstanding_migrations_whatever_its_speed() {
    // The speeds that make Algorithm 1 give 4, 2 and 1 of 7 blocks: the naive
    // scheme ignores them and deals the blocks out by count (3, 2, 2).
    let (c, w) = cluster(3, 7);
    let mut m = naive();
    for (i, spb) in [1.0, 2.0, 4.0].into_iter().enumerate() {
        m.heartbeat(&c, w[i], Some(report(Device::Disk, spb, 0)), vec![], HB);
    }
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..7), Instant::now()).unwrap();
    m.plan(&c);
    let count = |m: &Migrations, worker: u64| {
        (0..7).filter(|i| m.target_of(block_id(1, *i)) == Some((worker, Device::Disk))).count()
    };
    assert_eq!((count(&m, w[0]), count(&m, w[1]), count(&m, w[2])), (3, 2, 2));
    // Migrations already queued count against a holder: with 3 queued on the
    // first and 1 on the second, the seven even the counts out (4, 4 and 3
    // outstanding afterwards, ties going to the lowest id).
    let mut m = naive();
    for (i, queued) in [3, 1, 0].into_iter().enumerate() {
        m.heartbeat(&c, w[i], Some(report(Device::Disk, 1.0, queued)), vec![], HB);
    }
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..7), Instant::now()).unwrap();
    m.plan(&c);
    assert_eq!((count(&m, w[0]), count(&m, w[1]), count(&m, w[2])), (1, 3, 3));
    // The first block goes to the emptiest holder.
    assert_eq!(m.target_of(block_id(1, 0)), Some((w[2], Device::Disk)));
}

#[test]
fn naive_binds_only_into_free_slots() {
    // A measured, fast device and a long interval: DYRS would bind a heartbeat's
    // worth (10 blocks, see above); the naive scheme fills its two slots.
    let (c, w) = cluster(1, 20);
    let mut m = naive();
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 0)), vec![], HB);
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..20), Instant::now()).unwrap();
    m.plan(&c);
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 0)), vec![], Duration::from_millis(10));
    assert_eq!(o.migrations.len(), NAIVE_SLOTS as usize);
    assert!(o.migrations_waiting);
    // Both slots taken: nothing; one freed: one.
    m.plan(&c);
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 2)), vec![], Duration::from_secs(10));
    assert!(o.migrations.is_empty());
    let o = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1000.0, 1)), vec![], Duration::from_secs(10));
    assert_eq!(o.migrations.len(), 1);
}

#[test]
fn naive_gives_a_slow_node_with_a_free_slot_a_tail_block() {
    // DYRS, Fig. 10a: the blocks DYRS keeps off the slow node (see
    // `a_slow_node_gets_no_tail_block_that_faster_nodes_finish_sooner`) go to it
    // under the naive scheme as soon as it has a free slot.
    let (c, w) = cluster(2, 3);
    let mut m = naive();
    m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], HB);
    m.heartbeat(&c, w[1], Some(report(Device::Disk, 10.0, 0)), vec![], HB);
    m.migrate(&c, "j", EvictionMode::Explicit, None, specs(1, 0..3), Instant::now()).unwrap();
    m.plan(&c);
    assert_eq!(m.target_of(block_id(1, 1)), Some((w[1], Device::Disk)));
    let slow = m.heartbeat(&c, w[1], Some(report(Device::Disk, 10.0, 0)), vec![], Duration::from_secs(1));
    assert_eq!(slow.migrations.iter().map(|c| c.block_id).collect::<Vec<_>>(), vec![block_id(1, 1)]);
    let fast = m.heartbeat(&c, w[0], Some(report(Device::Disk, 1.0, 0)), vec![], Duration::from_secs(1));
    assert_eq!(fast.migrations.len(), 2);
}

#[test]
fn naive_is_a_policy_by_name_and_keeps_dyrs_order() {
    assert_eq!(Policy::parse("naive").unwrap(), Policy::Naive);
    assert_eq!(Policy::Naive.name(), "naive");
    assert_eq!(Policy::Naive.default_priority(), Priority::Fifo);
    assert!(Policy::Naive.binds_late() && Policy::Dyrs.binds_late() && !Policy::Ignem.binds_late());
    let e = Policy::parse("nope").unwrap_err();
    assert!(e.message.contains("naive"), "{}", e.message);
}

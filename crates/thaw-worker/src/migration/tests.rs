//! Decisions of the executor and the reference lists: queue order, one migration
//! per device, do-not-harm, implicit and explicit eviction, dead jobs, purges,
//! estimates.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use thaw_common::proto::{BlockReference, EvictCommand, JobBlockRead};

use super::*;

const LEN: u64 = 100;

fn job(id: &str, bytes: u64, submitted_ms: u64, implicit: bool) -> JobRef {
    JobRef { job_id: id.into(), implicit, job_bytes: bytes, submitted_ms }
}

fn cmd(block: u64, seq: u64, jobs: Vec<JobRef>, sjf: bool) -> MigrationCommand {
    MigrationCommand {
        block_id: block,
        length: LEN,
        source: MigrationSource::Disk as i32,
        jobs,
        seq,
        smallest_job_first: sjf,
        ..Default::default()
    }
}

fn orders(migrations: Vec<MigrationCommand>) -> HeartbeatResponse {
    HeartbeatResponse { migrations, ..Default::default() }
}

fn migrator(limit: u64) -> Migrator {
    let config =
        MigrationConfig { buffer_limit: Some(limit), implicit_delay: Duration::from_secs(2), ..Default::default() };
    Migrator::new(config, limit)
}

/// Every job the tests use, as the master's list of live jobs.
const JOBS: [&str; 14] =
    ["a", "b", "c", "j", "big", "small-late", "small-early", "tiny", "imp", "exp", "live", "dead", "small", "other"];

/// A heartbeat answer that names every test job as live (the master always does
/// for its live jobs).
fn known(mut r: HeartbeatResponse) -> HeartbeatResponse {
    if r.migrating_jobs.is_empty() {
        r.migrating_jobs = JOBS.iter().map(|j| j.to_string()).collect();
    }
    r
}

fn none_in_mem(_: u64) -> Option<u64> {
    None
}

/// Runs the next migration of the DISK device to a successful end.
fn run_one(m: &Migrator) -> Option<(u64, Effects)> {
    let t = m.next(Source::Disk)?;
    Some((t.block, m.finish(Source::Disk, Ok(true))))
}

#[test]
fn smallest_job_first_then_submission_then_order() {
    let m = migrator(10 * LEN);
    let big = job("big", 3000, 1, false);
    let small_late = job("small-late", 100, 5, false);
    let small_early = job("small-early", 100, 2, false);
    m.apply(
        &known(orders(vec![
            cmd(1, 0, vec![big.clone()], true),
            cmd(2, 1, vec![small_late], true),
            cmd(3, 2, vec![small_early], true),
        ])),
        none_in_mem,
    );
    assert_eq!(m.queue(Source::Disk), vec![3, 2, 1]);
    // A block shared by a big and a small job goes at the small job's place.
    let m = migrator(10 * LEN);
    m.apply(
        &known(orders(vec![cmd(1, 0, vec![big.clone()], true), cmd(2, 1, vec![big, job("tiny", 10, 9, false)], true)])),
        none_in_mem,
    );
    assert_eq!(m.queue(Source::Disk), vec![2, 1]);
    // FIFO: the master's order.
    let m = migrator(10 * LEN);
    m.apply(
        &known(orders(vec![
            cmd(7, 2, vec![job("a", 1, 1, false)], false),
            cmd(8, 1, vec![job("b", 9, 9, false)], false),
        ])),
        none_in_mem,
    );
    assert_eq!(m.queue(Source::Disk), vec![8, 7]);
}

#[test]
fn one_migration_per_device_and_no_preemption() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 5, vec![job("big", 900, 1, false)], true)])), none_in_mem);
    let first = m.next(Source::Disk).unwrap();
    assert_eq!(first.block, 1);
    // A smaller job's block arrives: it waits for the running one.
    m.apply(&known(orders(vec![cmd(2, 6, vec![job("small", 1, 2, false)], true)])), none_in_mem);
    assert!(m.next(Source::Disk).is_none());
    assert_eq!(m.active(Source::Disk), Some(1));
    // The other device is independent.
    let mut ufs = cmd(3, 7, vec![job("small", 1, 2, false)], true);
    ufs.source = MigrationSource::Ufs as i32;
    ufs.ufs = Some(UfsSource { path: "/f".into(), offset: 0, length: LEN });
    m.apply(&known(orders(vec![ufs])), none_in_mem);
    assert_eq!(m.next(Source::Ufs).unwrap().block, 3);
    m.finish(Source::Disk, Ok(true));
    assert_eq!(m.next(Source::Disk).unwrap().block, 2);
}

#[test]
fn a_full_buffer_makes_migrations_wait_instead_of_evicting() {
    let m = migrator(2 * LEN);
    let j = job("j", 300, 1, false);
    m.apply(&known(orders((1..=3).map(|b| cmd(b, b, vec![j.clone()], true)).collect())), none_in_mem);
    assert_eq!(run_one(&m).unwrap().1, Effects::default());
    assert_eq!(run_one(&m).unwrap().1, Effects::default());
    // Both held blocks are referenced: the third waits, nothing is evicted.
    assert!(m.next(Source::Disk).is_none());
    assert_eq!(m.held().len(), 2);
    // The job lets go of block 1 explicitly: room, and the third runs.
    let r = HeartbeatResponse {
        evictions: vec![EvictCommand { job_id: "j".into(), blocks: vec![1] }],
        ..Default::default()
    };
    assert_eq!(m.apply(&known(r), none_in_mem).evict, vec![1]);
    assert_eq!(run_one(&m).unwrap().0, 3);
}

#[test]
fn implicit_references_go_when_the_block_is_read_explicit_ones_stay() {
    let m = migrator(10 * LEN);
    let imp = job("imp", 200, 1, true);
    let exp = job("exp", 200, 1, false);
    m.apply(
        &known(orders(vec![cmd(1, 1, vec![imp.clone()], true), cmd(2, 2, vec![imp, exp.clone()], true)])),
        none_in_mem,
    );
    run_one(&m);
    run_one(&m);
    // Half a block: still held.
    assert!(m.on_read("imp", 1, LEN / 2).evict.is_empty());
    // The rest: released and evicted.
    assert_eq!(m.on_read("imp", 1, LEN / 2).evict, vec![1]);
    // Block 2 is also the explicit job's: a full read by imp only drops imp.
    assert!(m.on_read("imp", 2, LEN).evict.is_empty());
    assert_eq!(m.held()[&2], vec!["exp".to_string()]);
    // Reads by an explicit job release nothing.
    assert!(m.on_read("exp", 2, LEN).evict.is_empty());
    let r = HeartbeatResponse {
        evictions: vec![EvictCommand { job_id: "exp".into(), blocks: vec![] }],
        ..Default::default()
    };
    assert_eq!(m.apply(&known(r), none_in_mem).evict, vec![2]);
    assert_eq!(m.buffer_used(), 0);
}

#[test]
fn a_read_of_a_job_first_named_in_a_light_answer_is_reported() {
    // The job's first orders come in a light answer (no live-job list), and the
    // job reads the block before any full answer: the master must hear of the
    // read, or it takes the eviction that follows for a lost block and migrates
    // it again for a job that is done with it.
    let m = migrator(10 * LEN);
    let light = HeartbeatResponse { light: true, ..orders(vec![cmd(1, 1, vec![job("imp", 100, 1, true)], true)]) };
    m.apply(&light, none_in_mem);
    run_one(&m);
    assert_eq!(m.on_read("imp", 1, LEN).evict, vec![1]);
    let (_, reads) = m.report();
    assert_eq!(reads, vec![JobBlockRead { job_id: "imp".into(), block_id: 1 }]);
    // A job no order named is not reported (the master keeps no state for it).
    m.on_read("stranger", 9, LEN);
    assert!(m.report().1.is_empty());
}

#[test]
fn a_partly_read_implicit_block_goes_after_the_idle_delay() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("imp", 100, 1, true)], true)])), none_in_mem);
    run_one(&m);
    // A short-circuit open (0 bytes): the client holds the file.
    assert!(m.on_read("imp", 1, 0).evict.is_empty());
    assert!(m.sweep(Instant::now()).evict.is_empty());
    assert_eq!(m.sweep(Instant::now() + Duration::from_secs(3)).evict, vec![1]);
}

#[test]
fn a_queued_migration_read_first_is_dropped_and_a_running_one_not_referenced() {
    let m = migrator(10 * LEN);
    m.apply(
        &known(orders(vec![
            cmd(1, 1, vec![job("a", 1, 1, true)], false),
            cmd(2, 2, vec![job("a", 1, 1, true)], false),
        ])),
        none_in_mem,
    );
    let running = m.next(Source::Disk).unwrap();
    assert_eq!(running.block, 1);
    m.on_read("a", 2, LEN);
    assert!(m.queue(Source::Disk).is_empty(), "block 2 was read first: not migrated");
    // Block 1 was read while it was migrating: the job needs it no more.
    m.on_read("a", 1, LEN);
    assert_eq!(m.finish(Source::Disk, Ok(true)).evict, vec![1]);
    let (report, _) = m.report();
    let outcomes: Vec<&str> = report.events.iter().map(|e| e.outcome.as_str()).collect();
    assert_eq!(outcomes, vec!["read-first", "done"]);
    // An explicit job keeps what it read while it migrated (until evict), and a
    // partial read (a footer) does not cancel a queued migration.
    m.apply(
        &known(orders(vec![
            cmd(3, 3, vec![job("b", 1, 1, false)], false),
            cmd(4, 4, vec![job("b", 1, 1, false)], false),
        ])),
        none_in_mem,
    );
    assert_eq!(m.next(Source::Disk).unwrap().block, 3);
    m.on_read("b", 3, LEN);
    m.on_read("b", 4, LEN / 10);
    assert!(m.finish(Source::Disk, Ok(true)).evict.is_empty());
    assert_eq!(m.queue(Source::Disk), vec![4]);
}

#[test]
fn a_short_circuit_open_at_the_end_of_a_migration_keeps_the_block_for_the_reader() {
    // The copy has committed the MEM file; a client on this host opens it by
    // path before the migration's end is booked. Evicting the block then would
    // delete the file before the client opens it (it would read the disk again).
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, true)], false)])), none_in_mem);
    assert_eq!(m.next(Source::Disk).unwrap().block, 1);
    assert!(m.on_read("a", 1, 0).evict.is_empty());
    assert!(m.finish(Source::Disk, Ok(true)).evict.is_empty(), "the opened block must stay");
    // The reference goes once the job has left it alone for the idle delay.
    assert_eq!(m.sweep(Instant::now() + Duration::from_secs(3)).evict, vec![1]);
}

#[test]
fn references_of_jobs_the_master_no_longer_knows_are_dropped() {
    // The answer that carried the eviction was lost; the next one no longer
    // names the job: its blocks go anyway.
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    run_one(&m);
    m.apply(&known(orders(vec![cmd(2, 2, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    let r = HeartbeatResponse { migrating_jobs: vec!["b".into()], ..Default::default() };
    assert_eq!(m.apply(&r, none_in_mem).evict, vec![1]);
    assert!(m.queue(Source::Disk).is_empty() && m.held().is_empty());
    assert_eq!(m.buffer_used(), 0);
}

#[test]
fn a_light_answer_binds_work_but_releases_nothing() {
    // The last full answer knew only "a"; a light answer (to an early ask) binds
    // a migration for "b", a job the master took on since, and names no jobs.
    let m = migrator(10 * LEN);
    let full = HeartbeatResponse {
        migrations: vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)],
        migrating_jobs: vec!["a".into()],
        ..Default::default()
    };
    m.apply(&full, none_in_mem);
    run_one(&m);
    assert!(m.idle());
    let light = HeartbeatResponse {
        migrations: vec![cmd(2, 2, vec![job("b", 1, 1, false)], false)],
        migrations_waiting: true,
        light: true,
        ..Default::default()
    };
    assert_eq!(m.apply(&light, none_in_mem), Effects::default());
    assert_eq!(m.held().get(&1), Some(&vec!["a".to_string()]), "a's block stays");
    assert_eq!(m.queue(Source::Disk), vec![2], "b's migration is bound");
    assert!(!m.idle());
    run_one(&m);
    assert_eq!(m.held().get(&2), Some(&vec!["b".to_string()]));
    // The same answer as a full one would have released both.
    let full_empty = HeartbeatResponse { migrating_jobs: vec!["c".into()], ..Default::default() };
    let mut evicted = m.apply(&full_empty, none_in_mem).evict;
    evicted.sort();
    assert_eq!(evicted, vec![1, 2]);
}

#[test]
fn a_light_answer_keeps_reads_of_known_jobs_reported() {
    let m = migrator(10 * LEN);
    m.apply(&HeartbeatResponse { migrating_jobs: vec!["a".into()], ..Default::default() }, none_in_mem);
    m.apply(&HeartbeatResponse { light: true, ..Default::default() }, none_in_mem);
    m.on_read("a", 5, LEN);
    let (_, reads) = m.report();
    assert_eq!(reads, vec![JobBlockRead { job_id: "a".into(), block_id: 5 }], "the light answer kept a's list");
}

#[test]
fn a_migration_arriving_after_the_job_read_the_block_is_skipped() {
    let m = migrator(10 * LEN);
    m.on_read("a", 7, LEN);
    m.apply(&known(orders(vec![cmd(7, 1, vec![job("a", 1, 1, true)], false)])), none_in_mem);
    assert!(m.queue(Source::Disk).is_empty());
    let (r, reads) = m.report();
    assert_eq!(r.events[0].outcome, "read-first");
    assert_eq!(reads, vec![JobBlockRead { job_id: "a".into(), block_id: 7 }], "reported once the job is known");
}

#[test]
fn blocks_that_cannot_fit_or_find_no_room_fail_instead_of_waiting_forever() {
    let m = migrator(LEN / 2);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    assert!(m.next(Source::Disk).is_none());
    let (r, _) = m.report();
    assert!(r.events[0].outcome.contains("larger than the migration buffer"), "{:?}", r.events);
    assert!(m.queue(Source::Disk).is_empty());
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(2, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    for _ in 0..NO_ROOM_TRIES {
        m.next(Source::Disk).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        m.finish(Source::Disk, Err((true, "MEM tier is full: 16.0 MiB not persisted anywhere else".into())));
    }
    assert!(m.queue(Source::Disk).is_empty());
    let (r, _) = m.report();
    // The event spans every try (it read "0 ms": the last try's), and says
    // what it waited for before the tier's reason.
    let e = &r.events[0];
    assert!(e.outcome.starts_with("failed: no room in MEM for 100 B in "), "{e:?}");
    assert!(e.outcome.ends_with("s: MEM tier is full: 16.0 MiB not persisted anywhere else"), "{e:?}");
    assert!(e.end_ms - e.start_ms >= 2 * NO_ROOM_TRIES as u64, "{e:?}");
}

#[test]
fn references_join_queued_running_and_held_blocks_once() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    // The same block for a second job arrives as a command (ignem) or a reference.
    m.apply(&known(orders(vec![cmd(1, 3, vec![job("b", 1, 1, false)], false)])), none_in_mem);
    let r = HeartbeatResponse {
        references: vec![BlockReference { block_id: 1, job: Some(job("c", 1, 1, false)) }],
        ..Default::default()
    };
    m.apply(&known(r), none_in_mem);
    assert_eq!(m.queue(Source::Disk), vec![1]);
    run_one(&m);
    assert_eq!(m.held()[&1], vec!["a".to_string(), "b".to_string(), "c".to_string()]);
    // A command for a block already in memory (not migrated here) is done at once.
    m.apply(&known(orders(vec![cmd(9, 4, vec![job("a", 1, 1, false)], false)])), |b| (b == 9).then_some(4));
    assert!(m.queue(Source::Disk).is_empty());
}

#[test]
fn a_block_already_in_memory_is_held_for_its_job_and_stays_as_cache_when_released() {
    let m = migrator(10 * LEN);
    let in_mem = |b: u64| (b == 9).then_some(40);
    m.apply(&known(orders(vec![cmd(9, 1, vec![job("a", 1, 1, false)], false)])), in_mem);
    // Protected from the tier's replacement while the job expects it...
    assert_eq!(m.held()[&9], vec!["a".to_string()]);
    assert!(m.protecting(|held| held(9)));
    assert_eq!(m.buffer_used(), 0, "a block that was not migrated takes no buffer");
    // ... and a reference the master sends for it (a second job) adds to it.
    let r = HeartbeatResponse {
        references: vec![BlockReference { block_id: 9, job: Some(job("b", 1, 1, false)) }],
        ..Default::default()
    };
    m.apply(&known(r), in_mem);
    assert_eq!(m.held()[&9], vec!["a".to_string(), "b".to_string()]);
    // Released by both: not evicted (it is cache now, the replacement's to judge).
    let ev = |j: &str| HeartbeatResponse {
        evictions: vec![EvictCommand { job_id: j.into(), blocks: vec![] }],
        ..Default::default()
    };
    assert!(m.apply(&known(ev("a")), in_mem).evict.is_empty());
    assert!(m.apply(&known(ev("b")), in_mem).evict.is_empty());
    assert!(!m.protecting(|held| held(9)));
    // A purge (new master) leaves such blocks alone too, but evicts migrated ones.
    m.apply(&known(orders(vec![cmd(9, 2, vec![job("a", 1, 1, false)], false)])), in_mem);
    m.apply(&known(orders(vec![cmd(1, 3, vec![job("a", 1, 1, false)], false)])), in_mem);
    run_one(&m);
    assert_eq!(m.purge().evict, vec![1]);
}

#[test]
fn a_migration_that_finds_its_block_cached_holds_it_for_its_jobs() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    let t = m.next(Source::Disk).unwrap();
    // A read cached the block meanwhile: the copy finds it there.
    assert!(m.finish(Source::Disk, Ok(false)).evict.is_empty());
    assert_eq!(m.held()[&t.block], vec!["a".to_string()]);
    assert_eq!(m.buffer_used(), 0);
}

#[test]
fn a_buffer_full_of_held_blocks_fails_waiting_migrations_after_the_room_wait_naming_the_holders() {
    let config =
        MigrationConfig { buffer_limit: Some(2 * LEN), room_wait: Duration::from_secs(5), ..Default::default() };
    let m = Migrator::new(config, 2 * LEN);
    for b in 1..=2 {
        m.apply(&known(orders(vec![cmd(b, b, vec![job("a", 1, 1, false)], false)])), none_in_mem);
        run_one(&m);
    }
    m.apply(&known(orders((3..=5).map(|b| cmd(b, b, vec![job("b", 1, 1, false)], false)).collect())), none_in_mem);
    let t0 = Instant::now();
    m.report(); // clear the events so far
    assert!(m.next_at(Source::Disk, t0).is_none(), "waits for room");
    assert!(m.next_at(Source::Disk, t0 + Duration::from_secs(4)).is_none(), "still within the wait");
    assert!(m.report().0.events.is_empty());
    // Room frees up (job a evicts one block): the wait starts over.
    let r = HeartbeatResponse {
        evictions: vec![EvictCommand { job_id: "a".into(), blocks: vec![1] }],
        ..Default::default()
    };
    assert_eq!(m.apply(&known(r), none_in_mem).evict, vec![1]);
    let started = m.next_at(Source::Disk, t0 + Duration::from_secs(4)).expect("fits now");
    assert_eq!(started.block, 3);
    m.finish(Source::Disk, Ok(true));
    let t1 = t0 + Duration::from_secs(5);
    assert!(m.next_at(Source::Disk, t1).is_none());
    assert!(m.next_at(Source::Disk, t1 + Duration::from_millis(4900)).is_none());
    // Nothing freed for the whole wait: every head that does not fit fails.
    assert!(m.next_at(Source::Disk, t1 + Duration::from_secs(5)).is_none());
    assert!(m.queue(Source::Disk).is_empty());
    let events = m.report().0.events;
    let failed: Vec<u64> = events.iter().filter(|e| e.outcome.starts_with("failed")).map(|e| e.block_id).collect();
    assert_eq!(failed, vec![4, 5]);
    let why = &events.iter().find(|e| e.block_id == 4).unwrap().outcome;
    assert!(why.contains("no room in the migration buffer"), "{why}");
    assert!(why.contains("held by jobs a (100 B), b (100 B)"), "{why}");
}

#[test]
fn dead_jobs_lose_their_references_once_the_buffer_is_past_the_threshold() {
    let m = migrator(3 * LEN + 20);
    for (b, j) in [(1, "live"), (2, "dead"), (3, "dead")] {
        m.apply(&known(orders(vec![cmd(b, b, vec![job(j, 1, 1, false)], false)])), none_in_mem);
        run_one(&m);
    }
    // 300 of 320 bytes used: past 80%, so the report names the referencing jobs.
    let (report, _) = m.report();
    assert_eq!(report.referenced_jobs, vec!["dead".to_string(), "live".to_string()]);
    let r = HeartbeatResponse { dead_jobs: vec!["dead".into()], ..Default::default() };
    let mut evicted = m.apply(&known(r), none_in_mem).evict;
    evicted.sort();
    assert_eq!(evicted, vec![2, 3]);
    assert_eq!(m.held().keys().copied().collect::<Vec<_>>(), vec![1]);
    assert!(m.report().0.referenced_jobs.is_empty(), "below the threshold: no question");
}

#[test]
fn a_purge_drops_everything_and_a_migration_running_across_it_is_not_kept() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders((1..=3).map(|b| cmd(b, b, vec![job("a", 1, 1, false)], false)).collect())), none_in_mem);
    run_one(&m);
    let _running = m.next(Source::Disk).unwrap();
    assert_eq!(m.purge().evict, vec![1]);
    assert!(m.queue(Source::Disk).is_empty());
    assert_eq!(m.finish(Source::Disk, Ok(true)).evict, vec![2]);
    assert!(m.held().is_empty());
    assert_eq!(m.buffer_used(), 0);
}

#[test]
fn estimates_average_and_rise_while_a_migration_overruns() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    let _t = m.next(Source::Disk).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // Before the first migration ends there is no estimate to raise.
    assert_eq!(m.report().0.sources[0].ns_per_byte, 0.0);
    m.finish(Source::Disk, Ok(true));
    let first = m.estimate(Source::Disk).unwrap();
    assert!(first >= 20e6 / LEN as f64, "{first}");
    // The next one runs long: each report raises the estimate to at least its age.
    m.apply(&known(orders(vec![cmd(2, 2, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    let _t = m.next(Source::Disk).unwrap();
    std::thread::sleep(Duration::from_millis(60));
    let (r, _) = m.report();
    let raised = r.sources[0].ns_per_byte;
    assert!(raised >= 60e6 / LEN as f64 && raised > first, "{raised} vs {first}");
    assert_eq!((r.sources[0].active, r.sources[0].queued_bytes), (1, LEN));
}

#[test]
fn with_the_block_size_known_a_first_small_file_is_no_measure_of_speed() {
    let m = migrator(10 * LEN);
    m.set_block_size(4 * LEN);
    let mut small = cmd(1, 1, vec![job("a", 1, 1, false)], false);
    small.length = LEN / 2;
    m.apply(&known(orders(vec![small])), none_in_mem);
    let _t = m.next(Source::Disk).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    m.finish(Source::Disk, Ok(true));
    let r = m.report().0.sources[0];
    assert_eq!(r.ns_per_byte, 0.0, "speed not measured yet");
    assert!(r.ns_per_migration >= 5e6, "{}", r.ns_per_migration);
}

#[test]
fn a_device_that_runs_dry_asks_early_only_when_the_master_has_more_for_it() {
    let m = migrator(10 * LEN);
    let waiting = |migrations| HeartbeatResponse {
        migrations,
        migrations_waiting: true,
        waiting_sources: vec![MigrationSource::Disk as i32],
        ..Default::default()
    };
    m.apply(&known(waiting(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    assert!(!m.ran_dry(Source::Disk), "a block is still queued");
    assert!(!m.ran_dry(Source::Ufs), "the waiting work is the DISK device's, not this idle one's");
    let _t = m.next(Source::Disk).unwrap();
    assert!(m.ran_dry(Source::Disk), "the last block started, and the master said it has more");
    assert!(!m.ran_dry(Source::Disk), "once per answer");
    m.finish(Source::Disk, Ok(true));
    assert!(!m.ran_dry(Source::Disk));
    // An answer without the per-device list (an older master): any device asks.
    m.apply(&known(HeartbeatResponse { migrations_waiting: true, ..Default::default() }), none_in_mem);
    assert!(m.ran_dry(Source::Ufs));
    // The early heartbeat's answer: nothing more waiting.
    m.apply(&known(orders(vec![])), none_in_mem);
    assert!(!m.ran_dry(Source::Disk));
}

#[test]
fn a_copy_running_across_a_purge_is_kept_for_the_new_master_s_command() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    let _running = m.next(Source::Disk).unwrap();
    m.purge();
    // The new master asks for the same block while the old copy still runs.
    m.apply(&known(orders(vec![cmd(1, 7, vec![job("b", 1, 1, false)], false)])), none_in_mem);
    assert!(m.queue(Source::Disk).is_empty(), "merged into the running copy");
    assert_eq!(m.finish(Source::Disk, Ok(true)).evict, Vec::<u64>::new());
    let held = m.held();
    assert_eq!(held.get(&1), Some(&vec!["b".to_string()]), "held for the new master's job only");
}

/// A copy that began before a purge and ended after it, before the new
/// master asked for its block: the new master hears nothing of it (a "done"
/// would end the migration it has bound here since, for a copy about to be
/// dropped), and the copy is dropped, unless a command of the new master held
/// the block (in memory now) before the drop was carried out.
#[test]
fn a_copy_ending_after_a_purge_tells_the_new_master_nothing_and_its_drop_spares_a_block_asked_for_since() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    let _running = m.next(Source::Disk).unwrap();
    m.purge();
    let fx = m.finish(Source::Disk, Ok(true));
    assert_eq!(fx.evict, vec![1]);
    assert!(m.report().0.events.is_empty(), "no event for a copy the new master never asked for");
    // The new master's command comes before the drop is carried out: the
    // block is in memory, so it is held for the new job, and it stays.
    m.apply(&known(orders(vec![cmd(1, 7, vec![job("b", 1, 1, false)], false)])), |_| Some(LEN));
    let (r, _) = m.report();
    assert_eq!(r.events.iter().map(|e| e.outcome.as_str()).collect::<Vec<_>>(), vec!["done"]);
    let mut evicted = Vec::new();
    m.evict_unwanted(fx, |b| evicted.push(b));
    assert!(evicted.is_empty(), "held for the new master's job: not evicted");
    assert_eq!(m.held().get(&1), Some(&vec!["b".to_string()]));
    // Without a new command the drop goes ahead.
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(2, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    let _running = m.next(Source::Disk).unwrap();
    m.purge();
    let mut evicted = Vec::new();
    m.evict_unwanted(m.finish(Source::Disk, Ok(true)), |b| evicted.push(b));
    assert_eq!(evicted, vec![2]);
}

#[test]
fn no_room_in_the_tier_requeues_without_a_failure() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    m.next(Source::Disk).unwrap();
    m.finish(Source::Disk, Err((true, "MEM tier is full".into())));
    assert_eq!(m.queue(Source::Disk), vec![1]);
    m.next(Source::Disk).unwrap();
    m.finish(Source::Disk, Err((false, "disk gone".into())));
    let (r, _) = m.report();
    assert_eq!(r.events.len(), 1);
    assert!(r.events[0].outcome.starts_with("failed: disk gone"));
}

#[test]
fn reads_of_migrating_jobs_are_reported_once() {
    let m = migrator(10 * LEN);
    m.apply(&known(HeartbeatResponse { migrating_jobs: vec!["a".into()], ..Default::default() }), none_in_mem);
    m.on_read("a", 5, 10);
    m.on_read("a", 5, 10);
    m.on_read("other", 6, 10);
    let (_, reads) = m.report();
    assert_eq!(reads, vec![JobBlockRead { job_id: "a".into(), block_id: 5 }]);
    assert!(m.report().1.is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Migrate { block: u64, job: usize },
    Run,
    Read { block: u64, job: usize, bytes: u64 },
    Evict { job: usize, block: Option<u64> },
    Dead { job: usize },
    Sweep,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..8, 0usize..3).prop_map(|(block, job)| Op::Migrate { block, job }),
        Just(Op::Run),
        Just(Op::Run),
        (0u64..8, 0usize..3, prop_oneof![Just(0u64), Just(LEN / 2), Just(LEN)])
            .prop_map(|(block, job, bytes)| Op::Read { block, job, bytes }),
        (0usize..3, prop::option::of(0u64..8)).prop_map(|(job, block)| Op::Evict { job, block }),
        (0usize..3).prop_map(|job| Op::Dead { job }),
        Just(Op::Sweep),
    ]
}

/// The model's side of implicit eviction: a reference the worker dropped is a
/// finished claim only if the job is implicit and has read the block.
fn release_read_implicit(
    before: &std::collections::BTreeMap<u64, Vec<String>>,
    after: &std::collections::BTreeMap<u64, Vec<String>>,
    jobs: &[JobRef],
    read: &HashSet<(String, u64)>,
    expect: &mut HashMap<u64, HashSet<String>>,
) {
    for (b, was) in before {
        for j in was {
            let gone = !after.get(b).is_some_and(|now| now.contains(j));
            let implicit = jobs.iter().any(|x| &x.job_id == j && x.implicit);
            if gone
                && implicit
                && read.contains(&(j.clone(), *b))
                && let Some(s) = expect.get_mut(b)
            {
                s.remove(j);
            }
        }
    }
}

proptest! {
    /// Do-not-harm under random interleavings: a migrated block is evicted only
    /// when no job still expects to read it (by the model), the buffer limit is
    /// never exceeded, and once every job is dead nothing is held (no reference
    /// leaks).
    #[test]
    fn do_not_harm_and_no_leaks(ops in prop::collection::vec(op(), 1..120)) {
        let m = migrator(4 * LEN);
        let jobs = [job("a", 1, 1, true), job("b", 2, 2, false), job("c", 3, 3, true)];
        // The model: which jobs still expect to read each block.
        let mut expect: HashMap<u64, HashSet<String>> = HashMap::new();
        let mut read: HashSet<(String, u64)> = HashSet::new();
        let mut seq = 0;
        let check = |fx: Effects, expect: &HashMap<u64, HashSet<String>>| -> Result<(), TestCaseError> {
            for b in fx.evict {
                let left = expect.get(&b).map(|s| s.len()).unwrap_or(0);
                prop_assert_eq!(left, 0, "block {} evicted while jobs still expect it", b);
            }
            Ok(())
        };
        for op in ops {
            match op {
                Op::Migrate { block, job } => {
                    seq += 1;
                    let j = &jobs[job];
                    // A job that read the block already does not claim it again.
                    if !read.contains(&(j.job_id.clone(), block)) {
                        expect.entry(block).or_default().insert(j.job_id.clone());
                    }
                    let fx = m.apply(&known(orders(vec![cmd(block, seq, vec![j.clone()], true)])), none_in_mem);
                    check(fx, &expect)?;
                }
                Op::Run => {
                    if m.next(Source::Disk).is_some() {
                        check(m.finish(Source::Disk, Ok(true)), &expect)?;
                    }
                }
                Op::Read { block, job, bytes } => {
                    let j = &jobs[job];
                    let before = m.held();
                    let queued = m.queue(Source::Disk).contains(&block);
                    let active = m.active(Source::Disk) == Some(block);
                    let fx = m.on_read(&j.job_id, block, bytes);
                    read.insert((j.job_id.clone(), block));
                    // Not in memory yet: a whole read ends the claim of a queued
                    // migration, any read by an implicit job that of a running one.
                    let ends = (queued && (bytes == 0 || bytes >= LEN)) || (active && j.implicit);
                    if ends && let Some(s) = expect.get_mut(&block) {
                        s.remove(&j.job_id);
                    }
                    release_read_implicit(&before, &m.held(), &jobs, &read, &mut expect);
                    check(fx, &expect)?;
                }
                Op::Evict { job, block } => {
                    let id = jobs[job].job_id.clone();
                    match block {
                        Some(b) => { if let Some(s) = expect.get_mut(&b) { s.remove(&id); } }
                        None => expect.values_mut().for_each(|s| { s.remove(&id); }),
                    }
                    let r = HeartbeatResponse {
                        evictions: vec![EvictCommand { job_id: id, blocks: block.into_iter().collect() }],
                        ..Default::default()
                    };
                    check(m.apply(&known(r), none_in_mem), &expect)?;
                }
                Op::Dead { job } => {
                    let id = jobs[job].job_id.clone();
                    expect.values_mut().for_each(|s| { s.remove(&id); });
                    let r = HeartbeatResponse { dead_jobs: vec![id], ..Default::default() };
                    check(m.apply(&known(r), none_in_mem), &expect)?;
                }
                Op::Sweep => {
                    let before = m.held();
                    let fx = m.sweep(Instant::now() + Duration::from_secs(10));
                    release_read_implicit(&before, &m.held(), &jobs, &read, &mut expect);
                    check(fx, &expect)?;
                }
            }
            prop_assert!(m.buffer_used() <= 4 * LEN, "buffer overcommitted: {}", m.buffer_used());
        }
        for j in &jobs {
            m.apply(&known(HeartbeatResponse { dead_jobs: vec![j.job_id.clone()], ..Default::default() }), none_in_mem);
        }
        while m.next(Source::Disk).is_some() {
            m.finish(Source::Disk, Ok(true));
        }
        prop_assert!(m.held().is_empty(), "references leaked: {:?}", m.held());
        prop_assert_eq!(m.buffer_used(), 0);
    }
}

#[test]
fn a_command_for_a_block_already_held_is_reported_done_at_once() {
    let m = migrator(10 * LEN);
    m.apply(&known(orders(vec![cmd(1, 1, vec![job("a", 1, 1, false)], false)])), none_in_mem);
    run_one(&m);
    m.report();
    m.apply(&known(orders(vec![cmd(1, 2, vec![job("b", 1, 1, false)], false)])), none_in_mem);
    let (r, _) = m.report();
    assert_eq!(r.events.len(), 1);
    assert_eq!((r.events[0].block_id, r.events[0].outcome.as_str()), (1, "done"));
    assert_eq!(m.held()[&1], vec!["a".to_string(), "b".to_string()]);
}

#[test]
fn ended_migrations_are_counted_by_device_and_outcome_and_outlive_the_report() {
    let m = migrator(10 * LEN);
    let a = job("a", 300, 1, false);
    let mut too_big = cmd(3, 2, vec![a.clone()], false);
    too_big.length = 11 * LEN;
    m.apply(&known(orders(vec![cmd(1, 0, vec![a.clone()], false), cmd(2, 1, vec![a], false), too_big])), none_in_mem);
    assert_eq!(m.devices()[0].1.queued, 3);
    run_one(&m).expect("block 1 runs");
    let t = m.next(Source::Disk).expect("block 2 runs");
    assert_eq!((t.block, m.devices()[0].1.active), (2, 1));
    m.finish(Source::Disk, Err((false, "disk gone".into())));
    // Block 3 can never fit the buffer: it fails when it comes up.
    assert!(m.next(Source::Disk).is_none());
    let (report, _) = m.report();
    assert_eq!(report.events.len(), 3);
    let want = vec![(Some(Source::Disk), Outcome::Done, 1), (Some(Source::Disk), Outcome::Failed, 2)];
    assert_eq!(m.ended(), want, "the counts stay after the events went to the master");
    assert_eq!(m.devices()[0].1.queued + m.devices()[0].1.active, 0);
}

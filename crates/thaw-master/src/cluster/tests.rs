use super::*;

fn tiers(mem: u64, disk: u64) -> Vec<TierUsage> {
    vec![
        TierUsage { tier: Tier::Mem as i32, capacity: mem, ..Default::default() },
        TierUsage { tier: Tier::Disk as i32, capacity: disk, ..Default::default() },
    ]
}

fn pos(host: &str, rack: &str) -> Position {
    Position { host: host.into(), rack: rack.into(), worker_address: String::new() }
}

#[test]
fn dead_workers_lose_replicas_and_reads_fail_over() {
    let t0 = Instant::now();
    let mut c = Cluster::default();
    let a = c.register("a:1", "h1", "r1", tiers(100, 100), t0);
    let b = c.register("b:1", "h2", "r1", tiers(100, 100), t0);
    let blk = block_id(7, 0);
    c.add_replica(blk, a, Tier::Mem, 10);
    c.add_replica(blk, b, Tier::Disk, 10);
    let order: Vec<_> = c.ordered_replicas(blk, &pos("h2", "r1")).iter().map(|r| r.worker_id).collect();
    // Host-disk (b) ranks below rack-memory (a).
    assert_eq!(order, vec![a, b]);
    c.workers.get_mut(&b).unwrap().last_heartbeat = t0 + Duration::from_secs(10);
    let dead = c.expire(t0 + Duration::from_secs(10), Duration::from_secs(5));
    assert_eq!(dead, vec![a]);
    let order: Vec<_> = c.ordered_replicas(blk, &pos("h2", "r1")).iter().map(|r| r.worker_id).collect();
    assert_eq!(order, vec![b]);
    // Re-registration at the same address keeps the id and starts clean.
    assert_eq!(c.register("a:1", "h1", "r1", tiers(100, 100), t0), a);
    assert!(c.worker(a).unwrap().alive && c.worker(a).unwrap().blocks.is_empty());
}

#[test]
fn writers_are_local_first_and_distinct() {
    let t0 = Instant::now();
    let mut c = Cluster::default();
    let a = c.register("a:1", "h1", "r1", tiers(100, 100), t0);
    let b = c.register("b:1", "h2", "r1", tiers(100, 100), t0);
    let d = c.register("d:1", "h3", "r2", tiers(0, 100), t0);
    let ids = |v: Vec<&WorkerEntry>| v.iter().map(|w| w.id).collect::<Vec<_>>();
    assert_eq!(ids(c.choose_writers(&pos("h2", "r1"), WriteType::MustCache, 1).unwrap()), vec![b]);
    // A worker with no MEM tier never takes a memory write.
    assert_eq!(ids(c.choose_writers(&pos("h3", "r2"), WriteType::MustCache, 1).unwrap()).len(), 1);
    assert_ne!(ids(c.choose_writers(&pos("h3", "r2"), WriteType::MustCache, 1).unwrap()), vec![d]);
    assert_eq!(ids(c.choose_writers(&pos("h3", "r2"), WriteType::Through, 1).unwrap()), vec![d]);
    let three = ids(c.choose_writers(&pos("h1", "r1"), WriteType::ReplicatedDisk, 3).unwrap());
    assert_eq!(three[0], a);
    assert_eq!(three.iter().collect::<HashSet<_>>().len(), 3);
    assert!(c.choose_writers(&pos("h1", "r1"), WriteType::ReplicatedDisk, 4).is_err());
}

/// A worker's MEM use as its heartbeat reports it.
fn report(c: &mut Cluster, id: u64, used: u64, evictable: u64, now: Instant) {
    let w = c.workers.get_mut(&id).unwrap();
    let t = w.tiers.iter_mut().find(|t| t.tier == Tier::Mem as i32).unwrap();
    (t.used, t.evictable) = (used, evictable);
    (t.commits, t.commits_counted) = (w.mem_commits, true);
    c.reported(id, now);
}

#[test]
fn segments_stay_on_the_writer_s_worker_while_it_has_room_then_go_where_most_memory_is_free() {
    let t0 = Instant::now();
    let mut c = Cluster::default();
    let a = c.register("a:1", "h1", "r1", tiers(8, 100), t0);
    let b = c.register("b:1", "h2", "r1", tiers(8, 100), t0);
    let d = c.register("d:1", "h3", "r2", tiers(8, 100), t0);
    let near = pos("h1", "r1");
    // Blocks of 1: one block set aside first, then as many as came before.
    let next = std::cell::Cell::new(0);
    let place = |c: &mut Cluster, previous: u64| {
        let s = c.choose_segment(&near, next.get(), 1, previous, t0).unwrap();
        c.reserve(s, 9, 1, t0);
        for i in 0..s.blocks {
            c.add_replica(block_id(9, next.get() + i), s.worker, Tier::Mem, 1);
            c.mem_committed(s.worker, block_id(9, next.get() + i), 1, false);
        }
        next.set(next.get() + s.blocks);
        s
    };
    let sizes: Vec<Segment> = (0..4).map(|_| place(&mut c, a)).collect();
    assert_eq!(sizes.iter().map(|s| (s.worker, s.blocks)).collect::<Vec<_>>(), [(a, 1), (a, 1), (a, 2), (a, 4)]);
    // Full (its committed blocks count before it reports them): the worker
    // with the most room, as many blocks as came before.
    let s = place(&mut c, a);
    assert!((s.worker == b || s.worker == d) && s.blocks == 8, "{s:?}");
    let other = s.worker;
    report(&mut c, a, 8, 0, t0);
    assert_eq!(c.worker(other).unwrap().mem_room(t0), 0);
    let third = place(&mut c, other);
    assert!(third.worker != a && third.worker != other && third.blocks == 8, "{third:?}");
    // Eight blocks each: the cluster is full, and says so.
    assert_eq!(next.get(), 24);
    let e = c.choose_segment(&near, 24, 1, third.worker, t0).unwrap_err();
    assert_eq!(e.kind, thaw_common::ErrorKind::ResourceExhausted);
    assert!(e.message.contains("no worker has room in memory for block 24"), "{e}");
    // A write stays on the worker of its last segment while it has room,
    // rather than hop to one with a little more.
    report(&mut c, other, 0, 0, t0);
    report(&mut c, third.worker, 0, 0, t0);
    c.release_reservations(9);
    let s = c.choose_segment(&near, 4, 1, other, t0).unwrap();
    assert_eq!((s.worker, s.blocks), (other, 4));
    c.reserve(s, 12, 1, t0);
    let s = c.choose_segment(&near, 4, 1, other, t0).unwrap();
    assert_eq!((s.worker, s.blocks), (other, 4), "4 left there, 8 on the third");
    c.reserve(s, 12, 1, t0);
    report(&mut c, other, 8, 0, t0);
    report(&mut c, third.worker, 8, 0, t0);
    c.release_reservations(12);
    // Evictable cache counts as room (a write evicts it) once no worker
    // has free memory; what is set aside for another write does not.
    report(&mut c, b, 8, 4, t0);
    let s = c.choose_segment(&near, 24, 1, 0, t0).unwrap();
    assert_eq!((s.worker, s.blocks), (b, 4));
    c.reserve(s, 10, 1, t0);
    assert!(c.choose_segment(&near, 0, 1, 0, t0).is_err(), "the room went to file 10");
    // A write's end gives back what it did not use.
    c.release_reservations(10);
    assert_eq!(c.choose_segment(&near, 0, 1, 0, t0).unwrap().worker, b);
    // Free memory elsewhere goes before evicting cache here.
    report(&mut c, a, 8, 8, t0);
    report(&mut c, d, 4, 0, t0);
    let s = c.choose_segment(&near, 0, 1, 0, t0).unwrap();
    assert_eq!(s.worker, d, "{s:?}");
    // A reservation nobody renewed lapses.
    for id in [a, b, d] {
        let blocks = c.worker(id).unwrap().mem_room(t0);
        c.reserve(Segment { worker: id, blocks }, 11, 1, t0);
    }
    assert!(c.choose_segment(&near, 0, 1, 0, t0).is_err());
    assert!(c.choose_segment(&near, 0, 1, 0, t0 + RESERVATION_TTL).is_ok());
}

#[test]
fn a_commit_not_yet_confirmed_to_a_new_worker_still_counts_as_used() {
    let t0 = Instant::now();
    let mut c = Cluster::default();
    let a = c.register("a:1", "h1", "r1", tiers(8, 100), t0);
    let s = c.choose_segment(&pos("h1", "r1"), 0, 1, 0, t0).unwrap();
    c.reserve(s, 9, 1, t0);
    c.add_replica(block_id(9, 0), a, Tier::Mem, 1);
    c.mem_committed(a, block_id(9, 0), 1, false);
    // Its first report, taken before the confirmation reached it: the
    // block is `writing` there (not in its use), 0 commits counted.
    let w = c.workers.get_mut(&a).unwrap();
    let t = w.tiers.iter_mut().find(|t| t.tier == Tier::Mem as i32).unwrap();
    (t.used, t.writing, t.commits, t.commits_counted) = (1, 1, 0, true);
    c.reported(a, t0);
    assert_eq!(c.worker(a).unwrap().mem_free(t0), 7, "the block is still counted");
    // An older worker that does not count commits: its use shows them all.
    let w = c.workers.get_mut(&a).unwrap();
    let t = w.tiers.iter_mut().find(|t| t.tier == Tier::Mem as i32).unwrap();
    (t.used, t.writing, t.commits, t.commits_counted) = (1, 0, 0, false);
    c.reported(a, t0);
    assert_eq!(c.worker(a).unwrap().mem_free(t0), 7);
    // A worker registering with an earlier master's count goes on from it.
    let mut t = tiers(8, 100);
    (t[0].commits, t[0].commits_counted) = (41, true);
    let b = c.register("b:1", "h2", "r1", t, t0);
    c.mem_committed(b, block_id(10, 0), 1, false);
    assert_eq!(c.worker(b).unwrap().mem_commits, 42);
    c.reported(b, t0);
    assert_eq!(c.worker(b).unwrap().mem_free(t0), 7, "commit 42 is not in a report of 41");
}

#[test]
fn a_write_of_known_length_gets_all_its_memory_at_create_or_none() {
    let t0 = Instant::now();
    let mut c = Cluster::default();
    let a = c.register("a:1", "h1", "r1", tiers(8, 100), t0);
    let b = c.register("b:1", "h2", "r1", tiers(8, 100), t0);
    let d = c.register("d:1", "h3", "r2", tiers(8, 100), t0);
    let plan = |c: &mut Cluster, host: &str, file: u64| {
        let p = c.plan_write(&pos(host, "r1"), 7, 1, t0)?;
        let mut rest = p.clone().into_iter();
        c.reserve(rest.next().unwrap(), file, 1, t0);
        c.hold_plan(file, rest.collect(), 1, t0);
        Ok::<_, ThawError>(p.iter().map(|s| (s.worker, s.blocks)).collect::<Vec<_>>())
    };
    // The writer's own worker first, then where most is free.
    assert_eq!(plan(&mut c, "h1", 1).unwrap(), [(a, 7)]);
    assert_eq!(plan(&mut c, "h1", 2).unwrap(), [(a, 1), (b, 6)]);
    assert_eq!(plan(&mut c, "h3", 3).unwrap(), [(d, 7)]);
    // Three blocks are left of 24: a fourth write of 7 gets none of them.
    let e = plan(&mut c, "h2", 4).unwrap_err();
    assert_eq!(e.kind, thaw_common::ErrorKind::ResourceExhausted);
    assert!(e.message.contains("this write of 7 B is larger than the cluster's free memory (3 B"), "{e}");
    assert!(e.message.contains("21 B more is set aside"), "{e}");
    assert_eq!([a, b, d].map(|w| c.worker(w).unwrap().mem_free(t0)), [0, 2, 1]);
    // The later segments come in order, already set aside; a planned
    // segment whose worker died is placed afresh.
    assert_eq!(c.next_planned(2, t0), Some(Segment { worker: b, blocks: 6 }));
    assert_eq!(c.next_planned(2, t0), None);
    assert!(c.plan_write(&pos("h1", "r1"), 2, 1, t0).is_ok());
    c.workers.get_mut(&b).unwrap().alive = false;
    assert_eq!(plan(&mut c, "h1", 5).unwrap_err().kind, thaw_common::ErrorKind::ResourceExhausted);
    // A write's end gives back its plan's memory.
    c.release_reservations(1);
    assert_eq!(c.worker(a).unwrap().mem_free(t0), 7);
    assert_eq!(plan(&mut c, "h3", 6).unwrap(), [(d, 1), (a, 6)], "b is dead");
}

#[test]
fn a_spread_file_is_checkpointed_by_the_worker_holding_most_of_it_reading_the_rest_from_the_others() {
    let t0 = Instant::now();
    let mut c = Cluster::default();
    let a = c.register("a:1", "h1", "r1", tiers(100, 100), t0);
    let b = c.register("b:1", "h2", "r1", tiers(100, 100), t0);
    c.add_replica(block_id(3, 0), a, Tier::Mem, 1);
    c.add_replica(block_id(3, 1), b, Tier::Mem, 1);
    c.add_replica(block_id(3, 2), b, Tier::Mem, 1);
    assert!(c.holders(3, 3).is_empty());
    assert_eq!(c.checkpoint_writers(3, 3), vec![b, a]);
    assert_eq!(c.block_sources(3, 3, b), vec!["a:1".to_string(), String::new(), String::new()]);
    assert!(c.block_sources(3, 1, a).is_empty(), "a holds block 0 itself");
    // A block with no live replica: nobody can.
    c.add_replica(block_id(4, 0), a, Tier::Mem, 1);
    assert!(c.checkpoint_writers(4, 2).is_empty());
    // Once persisted, the other holders unpin their blocks.
    c.unpin_file(3, 3, b);
    assert_eq!(c.worker(a).unwrap().pending_unpins, vec![block_id(3, 0)]);
    assert!(c.worker(b).unwrap().pending_unpins.is_empty());
}

#[test]
fn dropping_a_file_queues_removal_of_only_its_blocks() {
    let t0 = Instant::now();
    let mut c = Cluster::default();
    let a = c.register("a:1", "h1", "r1", tiers(100, 100), t0);
    for i in 0..3 {
        c.add_replica(block_id(5, i), a, Tier::Mem, 1);
    }
    c.add_replica(block_id(6, 0), a, Tier::Mem, 1);
    c.add_replica(block_id(4, 9), a, Tier::Mem, 1);
    c.drop_file(5);
    let mut removed = c.worker(a).unwrap().pending_removals.clone();
    removed.sort();
    assert_eq!(removed, vec![block_id(5, 0), block_id(5, 1), block_id(5, 2)]);
    assert!(c.block(block_id(6, 0)).is_some() && c.block(block_id(4, 9)).is_some());
}

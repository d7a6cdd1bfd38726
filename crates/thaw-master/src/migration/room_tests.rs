//! The planner and a worker whose memory is full of data no migration may
//! evict (issue 28): it is never chosen while another has room, and a block
//! no worker can take waits at the master, saying why, instead of looping
//! bind, fail, bind.

use std::time::{Duration, Instant};

use thaw_common::ids::block_id;
use thaw_common::proto::{MigrationEvent, MigrationSource, SourceEstimate, TierUsage};

use super::*;

const LEN: u64 = 4096;
const MIB: u64 = 1 << 20;
const HB: Duration = Duration::from_secs(1);

/// Two workers with 16 MiB of MEM; `pinned[i]`: worker i's MEM holds that much
/// of unpersisted (pinned) data.
fn cluster(pinned: [u64; 2]) -> (Cluster, Vec<u64>) {
    let mut c = Cluster::default();
    let now = Instant::now();
    let ids = (0..2)
        .map(|i| {
            let mem = TierUsage {
                tier: Tier::Mem as i32,
                capacity: 16 * MIB,
                used: pinned[i],
                pinned: pinned[i],
                commits_counted: true,
                ..Default::default()
            };
            c.register(&format!("w{i}:1"), &format!("h{i}"), "r", vec![mem], now)
        })
        .collect();
    (c, ids)
}

fn set_pinned(c: &mut Cluster, w: u64, pinned: u64) {
    let t = c.live_worker_mut(w).unwrap().tiers.iter_mut().find(|t| t.tier == Tier::Mem as i32).unwrap();
    (t.used, t.pinned) = (pinned, pinned);
}

/// `n` blocks of 4 KiB files in the under-store only.
fn small_files(n: u64) -> Vec<BlockSpec> {
    (0..n)
        .map(|i| BlockSpec {
            block: block_id(100 + i, 0),
            length: LEN,
            ufs: Some(UfsSource { path: format!("/small/{i}"), offset: 0, length: LEN }),
        })
        .collect()
}

/// A worker's report: a measured under-store device (fast: it wants many
/// blocks per heartbeat) holding `holding` queued, and `done` finished.
fn report(holding: &[u64], done: &[u64]) -> WorkerMigrationReport {
    WorkerMigrationReport {
        sources: vec![SourceEstimate {
            source: MigrationSource::Ufs as i32,
            ns_per_byte: 0.001,
            queued: holding.len() as u32,
            queued_bytes: holding.len() as u64 * LEN,
            ..Default::default()
        }],
        migrating_blocks: holding.to_vec(),
        events: done
            .iter()
            .map(|b| MigrationEvent { block_id: *b, outcome: "done".into(), ..Default::default() })
            .collect(),
        ..Default::default()
    }
}

/// Every migration each worker gets over `beats` planning passes and
/// heartbeats, each worker finishing at once what it got (its memory use
/// left as it is).
fn bound(m: &mut Migrations, c: &Cluster, ids: &[u64], beats: usize) -> Vec<usize> {
    let mut got = vec![0; ids.len()];
    let mut last: Vec<Vec<u64>> = vec![Vec::new(); ids.len()];
    for _ in 0..beats {
        m.plan(c);
        for (i, &w) in ids.iter().enumerate() {
            let o = m.heartbeat(c, w, Some(report(&[], &last[i])), vec![], HB);
            last[i] = o.migrations.iter().map(|c| c.block_id).collect();
            got[i] += o.migrations.len();
        }
    }
    got
}

#[test]
fn a_worker_full_of_unpersisted_data_is_never_chosen_while_another_has_room() {
    for policy in [Policy::Dyrs, Policy::Ignem] {
        // The issue's smaller case: a 24 MiB must-cache file fills one worker
        // and half the other; 300 files of 4 KiB follow.
        let (c, w) = cluster([16 * MIB, 8 * MIB]);
        let mut m = Migrations::new(policy, Priority::Fifo, Duration::from_secs(60));
        m.migrate(&c, "small", EvictionMode::Explicit, None, small_files(300), Instant::now()).unwrap();
        m.plan(&c);
        for i in 0..300 {
            let t = m.target_of(block_id(100 + i, 0));
            assert!(t.is_none_or(|t| t == (w[1], Device::Ufs)), "{policy:?}: block {i} at {t:?}");
        }
        let got = bound(&mut m, &c, &w, 400);
        assert_eq!(got, vec![0, 300], "{policy:?}: nothing bound to the full worker");
        let info = m.job_info(&c, "small", Instant::now()).unwrap();
        assert_eq!(info.blocks_waiting_for_memory, 0, "{policy:?}");
        assert!(info.waiting.is_empty());
    }
}

#[test]
fn a_block_whose_disk_holder_is_full_goes_through_the_under_store_of_a_worker_with_room() {
    let (mut c, w) = cluster([16 * MIB, 0]);
    let b = small_files(1);
    c.add_replica(b[0].block, w[0], Tier::Disk, LEN);
    let mut m = Migrations::new(Policy::Dyrs, Priority::Fifo, Duration::from_secs(60));
    m.migrate(&c, "j", EvictionMode::Explicit, None, b, Instant::now()).unwrap();
    m.plan(&c);
    assert_eq!(m.target_of(block_id(100, 0)), Some((w[1], Device::Ufs)));
}

#[test]
fn room_counts_what_is_already_bound_and_the_rest_waits() {
    // 16 KiB of room on the second worker: four blocks, then it is full.
    let (c, w) = cluster([16 * MIB, 16 * MIB - 4 * LEN]);
    let mut m = Migrations::new(Policy::Dyrs, Priority::Fifo, Duration::from_secs(60));
    m.migrate(&c, "j", EvictionMode::Explicit, None, small_files(10), Instant::now()).unwrap();
    // The worker finishes none: the bound blocks keep their room.
    let mut holding = Vec::new();
    for _ in 0..20 {
        m.plan(&c);
        let o = m.heartbeat(&c, w[1], Some(report(&holding, &[])), vec![], HB);
        holding.extend(o.migrations.iter().map(|c| c.block_id));
        assert!(m.heartbeat(&c, w[0], Some(report(&[], &[])), vec![], HB).migrations.is_empty());
    }
    assert_eq!(holding.len(), 4);
    let info = m.job_info(&c, "j", Instant::now()).unwrap();
    assert_eq!((info.blocks_queued, info.blocks_pending, info.blocks_waiting_for_memory), (4, 6, 6));
}

#[test]
fn when_no_worker_has_room_blocks_wait_at_the_master_saying_why_and_go_when_room_frees() {
    for policy in [Policy::Dyrs, Policy::Ignem] {
        let (mut c, w) = cluster([16 * MIB, 16 * MIB]);
        let mut m = Migrations::new(policy, Priority::Fifo, Duration::from_secs(60));
        m.migrate(&c, "small", EvictionMode::Explicit, None, small_files(300), Instant::now()).unwrap();
        m.repair(&c);
        // Nothing is bound (so nothing fails and is bound again), nothing given up.
        assert_eq!(bound(&mut m, &c, &w, 50), vec![0, 0], "{policy:?}");
        assert_eq!(m.events(0, 0).0.len(), 0, "{policy:?}: no event: nothing ran");
        let info = m.job_info(&c, "small", Instant::now()).unwrap();
        assert_eq!((info.blocks_pending, info.blocks_waiting_for_memory, info.blocks_failed), (300, 300, 0));
        assert_eq!(
            info.waiting,
            "300 blocks wait for memory: every worker that could take them (2 of 2) has its MEM (32.0 MiB) full \
             of data that cannot be evicted (32.0 MiB not persisted anywhere else)",
            "{policy:?}"
        );
        // The must-cache file is persisted elsewhere and unpinned on one worker:
        // the blocks go there.
        set_pinned(&mut c, w[0], 0);
        m.repair(&c);
        assert_eq!(bound(&mut m, &c, &w, 400), vec![300, 0], "{policy:?}");
        let info = m.job_info(&c, "small", Instant::now()).unwrap();
        assert_eq!(info.blocks_waiting_for_memory, 0, "{policy:?}");
        assert!(info.waiting.is_empty());
    }
}

#[test]
fn memory_taken_after_planning_is_not_bound_into() {
    let (mut c, w) = cluster([16 * MIB, 0]);
    let mut m = Migrations::new(Policy::Dyrs, Priority::Fifo, Duration::from_secs(60));
    m.migrate(&c, "j", EvictionMode::Explicit, None, small_files(10), Instant::now()).unwrap();
    m.plan(&c);
    assert_eq!(m.target_of(block_id(100, 0)), Some((w[1], Device::Ufs)));
    // A write fills the second worker before its heartbeat.
    set_pinned(&mut c, w[1], 16 * MIB);
    assert!(m.heartbeat(&c, w[1], None, vec![], HB).migrations.is_empty());
    assert!(!m.heartbeat(&c, w[1], None, vec![], HB).migrations_waiting, "no ask loop for blocks it cannot take");
    m.plan(&c);
    assert_eq!(m.job_info(&c, "j", Instant::now()).unwrap().blocks_waiting_for_memory, 10);
}

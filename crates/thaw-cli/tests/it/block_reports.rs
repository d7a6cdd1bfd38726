//! Incremental block reports: the master's block locations and tier use
//! follow a worker's evictions and fills within a fraction of a second, not
//! at its next heartbeat (issue 28, item 10).

use std::time::{Duration, Instant};

use crate::common::*;

const MIB: u64 = 1 << 20;

/// What the master and the worker say of the worker's memory: the master's
/// tier use for it, the bytes of MEM replicas its block map lists over
/// `paths` (and of `hot` alone), and the worker's own tier use.
async fn views(c: &Cluster, client: &Client, paths: &[String], hot: &str) -> (u64, u64, u64, u64) {
    let mem = |tiers: &[thaw_common::proto::TierUsage]| {
        tiers.iter().find(|t| t.tier == Tier::Mem as i32).map(|t| t.used).expect("a MEM tier")
    };
    let status = client.cluster_status().await.unwrap();
    let master_used = mem(&status.workers[0].tiers);
    let (mut listed, mut hot_listed) = (0, 0);
    for p in paths {
        let (info, _) = client.stat_blocks(p, true).await.unwrap();
        let here: u64 = info
            .blocks
            .iter()
            .filter(|b| b.replicas.iter().any(|r| r.tier == Tier::Mem as i32))
            .map(|b| b.length)
            .sum();
        listed += here;
        if p == hot {
            hot_listed = here;
        }
    }
    let worker_used = mem(&client.worker_stats(c.worker_addr(0)).await.unwrap().tiers);
    (master_used, listed, hot_listed, worker_used)
}

/// The scenario, scaled down: one worker with 20 MiB of MEM under
/// lru; an 8 MiB file read three times, then six 4 MiB files read once
/// (32 MiB read into 20 MiB: the hot file is evicted). Heartbeats are 10 s
/// apart, so only an incremental report can tell the master in time: right
/// after the last read, within 500 ms (the 100 ms bound plus slack), the
/// master lists no MEM replica of the hot file, and its locations and tier
/// use both match what the worker holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_and_fills_reach_the_master_well_before_the_next_heartbeat() {
    let mut o = ClusterOptions::workers(1);
    o.workers[0].mem_capacity = 20 * MIB;
    o.workers[0].extra_args = vec!["--cache-policy".into(), "lru".into()];
    o.heartbeat_ms = 10_000;
    o.worker_timeout_ms = 60_000;
    let c = start(o).await;
    let hot = "/hot".to_string();
    let mut paths = vec![hot.clone()];
    cold_file(&c, &hot, 8 << 20, 1);
    for i in 0..6 {
        let p = format!("/cold-{i}");
        cold_file(&c, &p, 4 << 20, 10 + i);
        paths.push(p);
    }
    let client = c.client("elsewhere", "r9");
    for _ in 0..3 {
        client.read_all(&hot).await.unwrap();
    }
    let bound = Duration::from_millis(500);
    let mut slowest = Duration::ZERO;
    for p in &paths[1..] {
        client.read_all(p).await.unwrap();
        // After each read (fill, and from the third on, evictions), the
        // master catches up within the bound.
        let read = Instant::now();
        loop {
            let (master_used, listed, hot_listed, worker_used) = views(&c, &client, &paths, &hot).await;
            if master_used == worker_used && listed == worker_used {
                if p == paths.last().unwrap() {
                    assert_eq!(hot_listed, 0, "the hot file was evicted, yet listed in memory");
                    assert!((16 * MIB..=20 * MIB).contains(&worker_used), "worker uses {worker_used}");
                }
                slowest = slowest.max(read.elapsed());
                break;
            }
            assert!(
                read.elapsed() < bound,
                "{:?} after reading {p}: the master says {master_used} bytes used and lists {listed} in memory \
                 ({hot_listed} of the hot file); the worker uses {worker_used}\n{}",
                read.elapsed(),
                c.logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    eprintln!("the master matched the worker at most {slowest:?} after a read returned");
}

/// A worker's group commit (`CommitBlocks`): each commit in the call is
/// checked and answered on its own, in order; a refused one does not refuse
/// the others, and an accepted one is a replica the master lists. Called
/// raw, as a worker registered by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_in_one_call_are_each_accepted_or_refused_on_their_own() {
    use thaw_common::proto::*;
    let c = start(ClusterOptions::workers(1)).await;
    cold_file(&c, "/two", (3 * MIB) as usize, 5);
    let client = c.client("elsewhere", "r9");
    let (info, _) = client.stat_blocks("/two", true).await.unwrap();
    let blocks: Vec<(u64, u64)> = info.blocks.iter().map(|b| (b.block_id, b.length)).collect();
    assert!(!blocks.is_empty());
    let mut m = thaw_common::auth::master_client(c.master_addr(), None, None).unwrap();
    let reg = m
        .register_worker(RegisterWorkerRequest {
            data_address: "127.0.0.1:9".into(),
            host: "by-hand".into(),
            rack: "r9".into(),
            tiers: vec![TierUsage { tier: Tier::Disk as i32, capacity: 1 << 30, ..Default::default() }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let commit = |block_id: u64, length: u64, epoch: u64| CommitBlockRequest {
        worker_id: reg.worker_id,
        master_epoch: epoch,
        block_id,
        tier: Tier::Disk as i32,
        length,
        ..Default::default()
    };
    let (b0, len0) = blocks[0];
    let commits = vec![
        commit(b0, len0 + 1, reg.master_epoch),             // longer than the block
        commit(b0, len0, reg.master_epoch.wrapping_add(1)), // another epoch's
        commit(b0, len0, reg.master_epoch),                 // right
        commit(u64::MAX - 7, 1, reg.master_epoch),          // no such file
    ];
    let results = m.commit_blocks(CommitBlocksRequest { commits }).await.unwrap().into_inner().results;
    let kinds: Vec<&str> = results.iter().map(|r| r.error_kind.as_str()).collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(!kinds[0].is_empty() && results[0].error.contains(&format!("{b0}")), "{results:?}");
    assert_eq!(kinds[1], "unavailable", "{results:?}");
    assert!(kinds[2].is_empty() && results[2].response.is_some(), "{results:?}");
    assert!(!kinds[3].is_empty(), "{results:?}");
    let (info, _) = client.stat_blocks("/two", true).await.unwrap();
    let listed = info.blocks[0].replicas.iter().any(|r| r.worker_id == reg.worker_id && r.tier == Tier::Disk as i32);
    assert!(listed, "the accepted commit is not a replica: {:?}", info.blocks[0]);
    // An empty call is answered empty.
    let none = m.commit_blocks(CommitBlocksRequest::default()).await.unwrap().into_inner();
    assert!(none.results.is_empty());
}

//! A migration beside a worker whose memory is full of data no migration may
//! evict (issue 28, item 1): the planner binds nothing there while another
//! worker has room, and when no worker has room the job's blocks wait at the
//! master, its progress saying why, and nothing is bound, failed and bound
//! again.

use std::collections::{BTreeSet, HashMap};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

const MIB: usize = 1 << 20;

/// Two workers (h0, h1) with 16 MiB of MEM each, 4 MiB blocks: the issue's
/// smaller case.
async fn two_small_workers() -> Cluster {
    let mut o = ClusterOptions::workers(2);
    o.block_size = 4 * MIB as u64;
    for w in &mut o.workers {
        w.mem_capacity = 16 * MIB as u64;
    }
    start(o).await
}

/// Runs `thaw ARGS` against the cluster, killed if it runs past `limit`.
fn thaw(c: &Cluster, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env("THAW_MASTER", c.master_addr())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            panic!("thaw {args:?} did not return within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// `n` cold files of 4 KiB under `/small`.
fn small_files(c: &Cluster, n: usize) {
    for i in 0..n {
        cold_file(c, &format!("/small/f{i:03}"), 4096, i as u64);
    }
}

/// Worker id by host.
async fn worker_ids(client: &Client) -> HashMap<String, u64> {
    client.cluster_status().await.unwrap().workers.iter().map(|w| (w.host.clone(), w.id)).collect()
}

/// The hosts holding `path`'s blocks in memory.
async fn mem_hosts(client: &Client, path: &str) -> BTreeSet<String> {
    let (info, _) = client.stat_blocks(path, true).await.unwrap();
    info.blocks
        .iter()
        .flat_map(|b| b.replicas.iter().filter(|r| r.tier == Tier::Mem as i32).map(|r| r.host.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_binds_nothing_to_a_worker_full_of_unpersisted_data() {
    let c = two_small_workers().await;
    let client = c.client("h0", "r0");
    // 24 MiB must-cache: the writer's worker (h0) full, then 8 MiB on h1.
    let big = data(24 * MIB, 1);
    client.write_all("/big", &big, WriteOptions::of(WriteType::MustCache)).await.unwrap();
    let (info, _) = client.stat_blocks("/big", true).await.unwrap();
    let on_h0 = info.blocks.iter().filter(|b| b.replicas.iter().any(|r| r.host == "h0")).count();
    assert_eq!(on_h0, 4, "h0's memory is full of /big: {info:?}");
    small_files(&c, 300);
    let out = thaw(&c, &["--job", "small", "migrate", "/small", "--wait", "--json"], Duration::from_secs(120));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((j["blocks_in_memory"].as_u64(), j["blocks_failed"].as_u64()), (Some(300), Some(0)), "{j}");
    // Every block is in memory on the worker with room.
    for i in 0..300 {
        let p = format!("/small/f{i:03}");
        assert_eq!(mem_hosts(&client, &p).await, BTreeSet::from(["h1".to_string()]), "{p}");
    }
    // No migration was bound to the full worker: every event is a copy done
    // on h1, and h0's executor never had one.
    let ids = worker_ids(&client).await;
    let events = client.migration_events(0, 0).await.unwrap().events;
    let failed: Vec<_> = events.iter().filter(|e| e.outcome != "done").collect();
    assert!(failed.is_empty(), "no failure and retry: {failed:?}");
    assert_eq!(events.len(), 300, "one event per block");
    for e in &events {
        assert_eq!((e.worker_id, e.outcome.as_str()), (ids["h1"], "done"), "{e:?}");
    }
    let status = thaw(&c, &["status", "--json"], Duration::from_secs(20));
    let s: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let h0 = s["workers"].as_array().unwrap().iter().find(|w| w["host"] == "h0").unwrap();
    let m = &h0["migration"];
    assert_eq!(m["migrations_done"].as_u64(), Some(0), "{h0}");
    assert_eq!(m["room"].as_u64(), Some(0), "the planner sees no room on h0: {h0}");
    assert!(m["devices"].as_array().unwrap().iter().all(|d| d["queued"] == 0 && d["active"] == 0), "{h0}");
    // The must-cache file is intact.
    let mut r = client.open("/big").await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&big));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_no_worker_has_room_the_job_waits_saying_why_and_nothing_loops() {
    let c = two_small_workers().await;
    // Each worker's memory full of a 16 MiB must-cache file.
    for h in ["h0", "h1"] {
        let bytes = data(16 * MIB, 2);
        c.client(h, "r0")
            .write_all(&format!("/full-{h}"), &bytes, WriteOptions::of(WriteType::MustCache))
            .await
            .unwrap();
    }
    let client = c.client("h0", "r0");
    small_files(&c, 20);
    let out = thaw(&c, &["--job", "small", "migrate", "/small", "--wait", "--timeout", "4s"], Duration::from_secs(60));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout} {stderr}");
    let why = "20 blocks wait for memory: every worker that could take them (2 of 2) has its MEM (32.0 MiB) \
               full of data that cannot be evicted (32.0 MiB not persisted anywhere else)";
    assert!(stderr.contains(why), "the wait says why: {stderr}");
    assert_eq!(stderr.matches(why).count(), 1, "said once: {stderr}");
    assert!(stdout.contains("20 pending, 0 queued, 0 in memory, 0 read, 0 failed; 20 blocks wait"), "{stdout}");
    // Nothing was bound, failed or bound again; `thaw jobs` says the same.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(client.migration_events(0, 0).await.unwrap().events, vec![]);
    let jobs = thaw(&c, &["jobs", "--json"], Duration::from_secs(20));
    let v: serde_json::Value = serde_json::from_slice(&jobs.stdout).unwrap();
    let j = &v["jobs"][0];
    assert_eq!((j["blocks_pending"].as_u64(), j["blocks_waiting_for_memory"].as_u64()), (Some(20), Some(20)), "{j}");
    assert_eq!(j["waiting"], why, "{j}");
    let text = thaw(&c, &["jobs"], Duration::from_secs(20));
    assert!(String::from_utf8_lossy(&text.stdout).contains(why));
    for w in client.cluster_status().await.unwrap().workers {
        let m = w.migration.unwrap_or_default();
        assert!(m.devices.iter().all(|d| d.queued + d.active == 0), "{m:?}");
        assert_eq!(m.migrations_done, 0);
    }
    // Memory frees up (a full file is deleted): the waiting blocks go there.
    client.delete("/full-h1", false).await.unwrap();
    let j = wait_in_memory(&client, "small").await;
    assert_eq!((j.blocks_failed, j.blocks_waiting_for_memory), (0, 0), "{j:?}");
    assert!(j.waiting.is_empty());
    for i in 0..20 {
        let p = format!("/small/f{i:03}");
        assert_eq!(mem_hosts(&client, &p).await, BTreeSet::from(["h1".to_string()]), "{p}");
    }
    let events = client.migration_events(0, 0).await.unwrap().events;
    assert!(events.iter().all(|e| e.outcome == "done"), "{events:?}");
}

//! A full memory tier on a real cluster: reads and migrations make room by
//! evicting cached blocks least recently used first; blocks jobs expect and
//! blocks with no other copy stay; a migration that cannot get room fails with
//! the reason, and `thaw migrate --wait` returns.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use thaw_common::proto::{EvictionMode, TierUsage};

const MIB: usize = 1 << 20;

/// One worker with a 10 MiB MEM tier (1 MiB blocks), and `extra` worker flags.
async fn small_memory(extra: &[&str]) -> Cluster {
    let mut o = ClusterOptions::workers(1);
    o.workers[0].mem_capacity = 10 * MIB as u64;
    o.workers[0].extra_args = extra.iter().map(|s| s.to_string()).collect();
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

async fn mem(c: &Cluster, client: &Client) -> TierUsage {
    let s = client.worker_stats(c.worker_addr(0)).await.unwrap();
    s.tiers.into_iter().find(|t| t.tier == Tier::Mem as i32).unwrap()
}

/// Blocks of `path` with a MEM replica, as the master sees them.
async fn blocks_in_memory(client: &Client, path: &str) -> usize {
    let (info, _) = client.stat_blocks(path, true).await.unwrap();
    info.blocks.iter().filter(|b| b.replicas.iter().any(|r| r.tier == Tier::Mem as i32)).count()
}

/// Waits until the master's view settles to `want` MEM blocks of `path`.
async fn wait_blocks_in_memory(client: &Client, path: &str, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = blocks_in_memory(client, path).await;
        if n == want {
            return;
        }
        assert!(Instant::now() < deadline, "{path}: {n} blocks in memory, want {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn read(client: &Client, path: &str, want: &[u8]) -> thaw_client::ReadStats {
    let mut r = client.open(path).await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(want), "{path}");
    r.stats()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_into_a_full_tier_evict_the_least_recently_used_cached_blocks() {
    // The user's case, scaled: four files of 40% of MEM each, read twice each.
    let c = small_memory(&[]).await;
    let client = c.client("h0", "r0");
    let files: Vec<(String, Vec<u8>)> =
        (0..4).map(|i| (format!("/f{i}"), cold_file(&c, &format!("/f{i}"), 4 * MIB, i as u64 + 1))).collect();
    for (p, bytes) in &files {
        let first = read(&client, p, bytes).await;
        assert_eq!(first.under_store, bytes.len() as u64, "{p}: the first read is cold: {first:?}");
        let second = read(&client, p, bytes).await;
        assert_eq!(second.under_store, 0, "{p}: the second read comes from memory: {second:?}");
        assert_eq!(second.short_circuit, bytes.len() as u64, "{p}: {second:?}");
    }
    // The last two files are in memory; the first was evicted for them (least
    // recently used), and the second in part.
    wait_blocks_in_memory(&client, "/f3", 4).await;
    wait_blocks_in_memory(&client, "/f2", 4).await;
    wait_blocks_in_memory(&client, "/f0", 0).await;
    let m = mem(&c, &client).await;
    assert!(m.used <= m.capacity, "{m:?}");
    assert_eq!((m.evictions, m.evicted_bytes), (6, 6 * MIB as u64), "{m:?}");
    assert_eq!((m.held, m.pinned, m.evictable), (0, 0, m.used), "all cache: {m:?}");
    assert_eq!(m.replacement, "lru");
    // Reading the first file again brings it back, evicting the oldest again.
    let again = read(&client, "/f0", &files[0].1).await;
    assert_eq!(again.under_store, 4 * MIB as u64);
    wait_blocks_in_memory(&client, "/f0", 4).await;
    // `thaw status` shows the split, as of the worker's last full heartbeat
    // (evictions reach the master with the next one).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = thaw(&c, &["status"], Duration::from_secs(20));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("evictable (lru has evicted 10 blocks, 10.0 MiB)") {
            assert!(text.contains("0 B held for jobs, 0 B not persisted elsewhere"), "{text}");
            assert!(text.contains("blocks in memory 10"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_into_a_tier_full_of_cached_blocks_makes_room_and_the_blocks_stay_for_the_job() {
    let c = small_memory(&[]).await;
    let client = c.client("h0", "r0");
    for i in 0..3 {
        let p = format!("/cached{i}");
        let bytes = cold_file(&c, &p, 3 * MIB, 10 + i);
        read(&client, &p, &bytes).await;
    }
    assert_eq!(mem(&c, &client).await.used, 9 * MIB as u64);
    let big = cold_file(&c, "/in/big", 8 * MIB, 20);
    let out = thaw(&c, &["--job", "q", "migrate", "/in/big", "--wait", "--json"], Duration::from_secs(60));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((info["blocks_in_memory"].as_u64(), info["blocks_failed"].as_u64()), (Some(8), Some(0)), "{info}");
    // Held for the job: more cached reads do not push its blocks out.
    let m = mem(&c, &client).await;
    assert_eq!(m.held, 8 * MIB as u64, "{m:?}");
    let other = cold_file(&c, "/other", 2 * MIB, 30);
    read(&client, "/other", &other).await;
    let s = read(&client.with_job("q"), "/in/big", &big).await;
    assert_eq!(s.under_store, 0, "the job's blocks stayed in memory: {s:?}");
    client.evict("q", &[]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_into_a_tier_full_of_held_blocks_fails_with_the_reason_and_wait_returns() {
    let c = small_memory(&["--migration-room-wait-ms", "1000"]).await;
    let client = c.remote_client();
    cold_file(&c, "/a", 6 * MIB, 1);
    let b = cold_file(&c, "/b", 6 * MIB, 2);
    client.migrate("holder", &["/a".to_string()], EvictionMode::Explicit, None).await.unwrap();
    let out = thaw(&c, &["--job", "holder", "migrate", "/a", "--wait"], Duration::from_secs(60));
    assert!(out.status.success());
    // The buffer is 8 MiB (80% of MEM): 6 MiB held, room for 2 of /b's 6 blocks.
    let started = Instant::now();
    let out = thaw(&c, &["--job", "late", "migrate", "/b", "--wait"], Duration::from_secs(90));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("2 in memory") && text.contains("4 failed"), "{text}");
    assert!(text.contains("no room in the migration buffer"), "{text}");
    assert!(text.contains("held by jobs holder (6.0 MiB), late (2.0 MiB)"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    // Nothing held was evicted, and the job reads its failed blocks from the
    // under-store.
    assert_eq!(blocks_in_memory(&client, "/a").await, 6);
    let s = read(&client.with_job("late"), "/b", &b).await;
    assert_eq!(s.remote_mem, 2 * MIB as u64, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_only_blocks_are_never_evicted_and_reads_past_them_still_work() {
    let c = small_memory(&[]).await;
    let client = c.client("h0", "r0");
    let only = data(6 * MIB, 5);
    client
        .write_all("/scratch", &only, WriteOptions { write_type: WriteType::MustCache, ..Default::default() })
        .await
        .unwrap();
    for i in 0..3 {
        let p = format!("/cold{i}");
        let bytes = cold_file(&c, &p, 3 * MIB, 40 + i);
        let s = read(&client, &p, &bytes).await;
        assert_eq!(s.under_store, 3 * MIB as u64);
    }
    let m = mem(&c, &client).await;
    assert_eq!(m.pinned, 6 * MIB as u64, "{m:?}");
    assert!(m.used <= m.capacity);
    assert_eq!(read(&client, "/scratch", &only).await.short_circuit, 6 * MIB as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lfu_a_full_tier_keeps_the_file_read_most_and_evicts_the_one_read_once() {
    let c = small_memory(&["--cache-policy", "lfu"]).await;
    let client = c.client("h0", "r0");
    let hot = cold_file(&c, "/hot", 4 * MIB, 1);
    let once = cold_file(&c, "/once", 4 * MIB, 2);
    let new = cold_file(&c, "/new", 4 * MIB, 3);
    for _ in 0..3 {
        read(&client, "/hot", &hot).await;
    }
    read(&client, "/once", &once).await;
    // /new needs room: LRU would evict /hot (read longest ago), LFU evicts /once.
    read(&client, "/new", &new).await;
    wait_blocks_in_memory(&client, "/hot", 4).await;
    wait_blocks_in_memory(&client, "/new", 4).await;
    wait_blocks_in_memory(&client, "/once", 2).await;
    let m = mem(&c, &client).await;
    assert_eq!((m.replacement.as_str(), m.evictions), ("lfu", 2), "{m:?}");
}

//! A full memory tier on a real cluster: reads and migrations make room by
//! evicting cached blocks least recently used first; blocks jobs expect and
//! blocks with no other copy stay; a migration that cannot get room fails with
//! the reason, and `thaw migrate --wait` returns.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
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
    // `thaw status` shows the split (evictions reach the master within
    // 100 ms of a worker's block report).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = thaw(&c, &["status"], Duration::from_secs(20));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("evictable, 0 B being written or copied in (lru has evicted 10 blocks, 10.0 MiB)") {
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

/// Reads `path` as job `job`; returns the bytes that came from the under-store.
async fn cold_bytes(client: &Client, job: &str, path: &str, want: &[u8]) -> u64 {
    read(&client.with_job(job), path, want).await.under_store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_cava_a_scan_larger_than_memory_keeps_its_first_part_and_the_hot_file_stays() {
    // CAVA, section IV-B on a real worker: a hot file read three times, then a scan
    // of 12 MiB through 10 MiB of memory by another application.
    let mut c = small_memory(&["--cache-policy", "cava"]).await;
    let client = c.client("h0", "r0");
    let hot = cold_file(&c, "/hot", 4 * MIB, 1);
    let scan = cold_file(&c, "/scan", 12 * MIB, 2);
    for i in 0..3 {
        cold_bytes(&client, &format!("etl-{i}"), "/hot", &hot).await;
    }
    assert_eq!(cold_bytes(&client, "etl-3", "/hot", &hot).await, 0, "hot is in memory");
    // The scan caches 6 blocks, then its fills are dropped: the hot file is
    // worth more (0.2 x 4 reads), and the scan never evicts its own blocks.
    assert_eq!(cold_bytes(&client, "scan", "/scan", &scan).await, 12 * MIB as u64);
    wait_blocks_in_memory(&client, "/hot", 4).await;
    wait_blocks_in_memory(&client, "/scan", 6).await;
    // Its next run reads those 6 from memory (LRU would have thrashed: every
    // block evicted before its reuse).
    assert_eq!(cold_bytes(&client, "scan-2", "/scan", &scan).await, 6 * MIB as u64);
    let m = mem(&c, &client).await;
    assert_eq!((m.replacement.as_str(), m.evictions), ("cava", 0), "{m:?}");
    assert!(m.cache_drops >= 6 && m.cache_hits >= 4 + 6, "{m:?}");
    // `thaw cache --json`: the worker's counters, and the files by benefit.
    let deadline = Instant::now() + Duration::from_secs(10);
    let report = loop {
        let out = thaw(&c, &["cache", "--json"], Duration::from_secs(20));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if v["workers"][0]["drops"].as_u64() >= Some(6) && v["files"].as_array().is_some_and(|f| f.len() == 2) {
            break v;
        }
        assert!(Instant::now() < deadline, "{v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let w = &report["workers"][0];
    assert_eq!((w["policy"].as_str(), w["cached_bytes"].as_u64()), (Some("cava"), Some(10 * MIB as u64)), "{w}");
    let ratio = w["hit_ratio"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio < 1.0, "{w}");
    let files = report["files"].as_array().unwrap();
    assert_eq!(files[0]["path"], "/hot", "the hot file ranks first: {report}");
    assert!((files[0]["frequency"].as_f64().unwrap() - 4.0).abs() < 1e-9, "{report}");
    assert!((files[0]["benefit"].as_f64().unwrap() - 0.8).abs() < 1e-6, "{report}");
    assert_eq!(files[1]["cached_bytes"].as_u64(), Some(6 * MIB as u64));
    // The text form names the same.
    let text = String::from_utf8_lossy(&thaw(&c, &["cache"], Duration::from_secs(20)).stdout).to_string();
    assert!(text.contains("cava") && text.contains("/hot") && text.contains("applications"), "{text}");
    // Bad input is refused with a clear error.
    let out = thaw(&c, &["cache", "--files", "0"], Duration::from_secs(20));
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--files"));
    // A worker killed and restarted forgets frequencies (soft state); reads go on.
    c.kill_worker(0);
    c.restart_worker(0).await.unwrap();
    assert_eq!(cold_bytes(&client, "after", "/hot", &hot).await, 4 * MIB as u64);
    assert_eq!(cold_bytes(&client, "after-2", "/hot", &hot).await, 0);
    let m = mem(&c, &client).await;
    assert_eq!((m.cache_drops, m.evictions), (0, 0), "counters start again: {m:?}");
}

#[test]
fn a_bad_cache_policy_window_or_affinity_is_refused_at_start_up() {
    for (args, says) in [
        (&["--cache-policy", "mru"][..], "unknown cache policy \"mru\" (known: lru, lfu, ca, cava)"),
        (&["--cache-window", "0"][..], "out of range"),
        (&["--ca-values", "0.4,0.2,1.5"][..], "outside [0, 1]"),
        (&["--ca-values", "0.1,0.2,0.05"][..], "must not rise"),
        (&["--ca-cpu-threshold", "lots"][..], "auto or a number"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .args(["local", "--ufs"])
            .arg(dir.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{args:?}: {err}");
    }
}

/// Copies of `path`'s blocks in memory: (blocks, MEM replicas in all).
async fn mem_copies(client: &Client, path: &str) -> (usize, usize) {
    let (info, _) = client.stat_blocks(path, true).await.unwrap();
    let n = info.blocks.iter().map(|b| b.replicas.iter().filter(|r| r.tier == Tier::Mem as i32).count()).sum();
    (info.blocks.len(), n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_cava_a_block_is_cached_once_in_the_cluster_and_lru_keeps_both_copies() {
    for (policy, copies) in [("cava", 4), ("lru", 8)] {
        let mut o = ClusterOptions::workers(2);
        for w in &mut o.workers {
            w.mem_capacity = 10 * MIB as u64;
            w.extra_args = vec!["--cache-policy".into(), policy.into()];
        }
        let c = start(o).await;
        let bytes = cold_file(&c, "/f", 4 * MIB, 7);
        let (a, b) = (c.client("h0", "r0"), c.client("h1", "r1"));
        // b opens the file before a reads it: b's block list shows no copy
        // in memory, so b fills its own worker too.
        let mut late = b.open("/f").await.unwrap();
        read(&a, "/f", &bytes).await;
        wait_blocks_in_memory(&a, "/f", 4).await;
        let mut got = Vec::new();
        late.read_to_end(&mut got).await.unwrap();
        assert_eq!(sha(&got), sha(&bytes));
        // Under cava the master keeps the first copy only and the second
        // worker drops its own with the next heartbeat; LRU keeps both.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (blocks, n) = mem_copies(&a, "/f").await;
            let w1 = client_mem(&c, &a, 1).await;
            if n == copies && (policy != "cava" || w1.used == 0) {
                assert_eq!(blocks, 4);
                break;
            }
            assert!(Instant::now() < deadline, "{policy}: {n} copies in memory, worker 1 {w1:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A reader after that is sent to the one copy.
        let s = read(&b, "/f", &bytes).await;
        assert_eq!(s.under_store, 0, "{policy}: {s:?}");
    }
}

async fn client_mem(c: &Cluster, client: &Client, i: usize) -> TierUsage {
    let s = client.worker_stats(c.worker_addr(i)).await.unwrap();
    s.tiers.into_iter().find(|t| t.tier == Tier::Mem as i32).unwrap()
}

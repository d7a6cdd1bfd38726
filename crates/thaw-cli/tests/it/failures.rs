//! Real crashes: kill -9 of workers and the master, and restarts.

use std::time::{Duration, Instant};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_read_fails_over_to_the_under_store_copy() {
    // Blocks larger than loopback socket buffers, so the kill cuts a block stream.
    let mut c = start(ClusterOptions { block_size: 24 << 20, ..ClusterOptions::workers(3) }).await;
    let bytes = data(40 << 20, 11);
    // Written from h0: the only MEM replica is on worker 0; the under-store has the rest.
    c.client("h0", "r0").write_all("/ft/file", &bytes, opts(WriteType::CacheThrough)).await.unwrap();
    let reader = c.remote_client();
    let mut r = reader.open("/ft/file").await.unwrap();
    let mut got = vec![0u8; 64 << 10];
    let n = r.read_exact_or_eof(&mut got).await.unwrap();
    assert_eq!(n, 64 << 10);
    c.kill_worker(0);
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).await.unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    got.extend_from_slice(&rest);
    assert_eq!(sha(&got), sha(&bytes));
    let s = r.stats();
    assert!(s.failovers >= 1, "{s:?}");
    assert!(s.under_store > 0, "{s:?}");
    assert_eq!(s.remote_mem + s.under_store, bytes.len() as u64, "{s:?}");
    // The first block was cut part-way and finished from the under-store.
    assert!(s.remote_mem < 24 << 20, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_read_fails_over_to_a_disk_replica() {
    let mut c = start(ClusterOptions::workers(3)).await;
    let bytes = data(4 << 20, 12);
    // Replicated on the DISK tiers of worker 0 and the next nearest.
    c.client("h0", "r0").write_all("/ft/disk", &bytes, opts(WriteType::ReplicatedDisk)).await.unwrap();
    let reader = c.client("h0x", "r0");
    let mut r = reader.open("/ft/disk").await.unwrap();
    let first = r.info().blocks[0].replicas[0].data_address.clone();
    let victim = (0..3).find(|&i| c.worker_addr(i) == first).unwrap();
    let mut got = vec![0u8; 32 << 10];
    r.read_exact_or_eof(&mut got).await.unwrap();
    c.kill_worker(victim);
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).await.unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    got.extend_from_slice(&rest);
    assert_eq!(sha(&got), sha(&bytes));
    assert!(r.stats().failovers >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn must_cache_file_whose_only_replica_died_is_reported_lost() {
    let mut c = start(ClusterOptions::workers(3)).await;
    let bytes = data(2 << 20, 13);
    c.client("h0", "r0").write_all("/lost/file", &bytes, opts(WriteType::MustCache)).await.unwrap();
    c.kill_worker(0);
    let client = c.remote_client();
    let started = Instant::now();
    let err = client.read_all("/lost/file").await.expect_err("the only copy is gone");
    assert_eq!(err.kind, ErrorKind::DataLost, "{err}");
    assert!(err.message.contains("lost") && err.message.contains("/lost/file"), "{err}");
    // Bounded by the dead-worker timeout (1.5 s here), not by the read's retry limit.
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(client.stat("/lost/file").await.unwrap().lost);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_restart_keeps_the_namespace_and_serves_again() {
    let mut c = start(ClusterOptions::workers(3)).await;
    let client = c.client("h0", "r0");
    client.mkdir("/keep/empty-dir", true, false).await.unwrap();
    let a = data(1_500_000, 21);
    let b = data(10, 22);
    let d = data(2_200_000, 23);
    let ia = client.write_all("/keep/a", &a, opts(WriteType::MustCache)).await.unwrap();
    let ib = client.write_all("/keep/b", &b, opts(WriteType::Through)).await.unwrap();
    client.write_all("/keep/d", &d, opts(WriteType::ReplicatedDisk)).await.unwrap();
    client.rename("/keep/d", "/keep/d2").await.unwrap();
    c.kill_master();
    c.restart_master().await.unwrap();
    let names: Vec<String> = client.list("/keep").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, vec!["a", "b", "d2", "empty-dir"]);
    assert_eq!(client.stat("/keep/a").await.unwrap().file_id, ia.file_id);
    assert_eq!(client.stat("/keep/b").await.unwrap().file_id, ib.file_id);
    // Workers re-registered with their blocks: even the memory-only file reads.
    assert_eq!(sha(&client.read_all("/keep/a").await.unwrap()), sha(&a));
    assert_eq!(client.read_all("/keep/b").await.unwrap(), b);
    assert_eq!(sha(&client.read_all("/keep/d2").await.unwrap()), sha(&d));
    // New files get new ids, never an old one.
    let ie = client.write_all("/keep/e", b"new", opts(WriteType::MustCache)).await.unwrap();
    assert!(ie.file_id > ia.file_id && ie.file_id > ib.file_id);
}

/// The journal's log and its checkpoints under a kill -9: 8 clients create
/// files as fast as they can while the master folds its log into its store
/// every 50 changes; the master is killed mid-stream. Every create it
/// acknowledged is there after the restart, with its id; new ids are new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_create_survives_a_kill_during_log_checkpoints() {
    let mut options = ClusterOptions::workers(1);
    options.master_args = vec!["--journal-checkpoint-ops".into(), "50".into()];
    let mut c = start(options).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (client, stop) = (c.client("h0", "r0"), stop.clone());
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let path = format!("/storm/w{w}/f{i}");
                    match client.write_all(&path, b"", opts(WriteType::MustCache)).await {
                        Ok(info) => acked.push((path, info.file_id)),
                        Err(_) => break, // the master is gone: this one may or may not be there
                    }
                }
                acked
            })
        })
        .collect();
    // Past a few checkpoints.
    let client = c.client("h0", "r0");
    let started = Instant::now();
    while client.list("/storm/w0").await.map_or(0, |d| d.len()) < 60 {
        assert!(started.elapsed() < Duration::from_secs(60), "creates did not get going\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.kill_master();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    assert!(acked.len() >= 200, "only {} creates acknowledged", acked.len());
    c.restart_master().await.unwrap();
    let mut newest = 0;
    for (path, id) in &acked {
        let got = client.stat(path).await.unwrap_or_else(|e| panic!("{path}, acknowledged, is gone: {e}"));
        assert_eq!(got.file_id, *id, "{path}");
        newest = newest.max(*id);
    }
    let fresh = client.write_all("/storm/after", b"", opts(WriteType::MustCache)).await.unwrap();
    assert!(fresh.file_id > newest, "{} reuses an id at or below {newest}", fresh.file_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_worker_has_empty_memory_and_the_master_knows() {
    let mut c = start(ClusterOptions::workers(3)).await;
    let client = c.client("h0", "r0");
    let m = data(1_200_000, 31);
    let d = data(1_300_000, 32);
    client.write_all("/wr/mem", &m, opts(WriteType::MustCache)).await.unwrap();
    client.write_all("/wr/disk", &d, WriteOptions { replication: 1, ..opts(WriteType::ReplicatedDisk) }).await.unwrap();
    assert!(std::fs::read_dir(c.mem_dir(0).join("blocks")).unwrap().count() > 0);
    c.kill_worker(0);
    c.restart_worker(0).await.unwrap();
    // The MEM tier came back empty; the DISK tier came back whole.
    assert_eq!(std::fs::read_dir(c.mem_dir(0).join("blocks")).unwrap().count(), 0);
    let status = client.cluster_status().await.unwrap();
    let w0 = status.workers.iter().find(|w| w.data_address == c.worker_addr(0)).unwrap();
    assert!(w0.alive);
    let mem = w0.tiers.iter().find(|t| t.tier == Tier::Mem as i32).unwrap();
    assert_eq!((mem.used, mem.blocks), (0, 0));
    let st = client.stat("/wr/mem").await.unwrap();
    assert!(st.lost && st.in_memory_bytes == 0, "{st:?}");
    let (sd, _) = client.stat_blocks("/wr/disk", true).await.unwrap();
    assert!(sd.blocks.iter().all(|b| b.replicas.len() == 1 && b.replicas[0].data_address == c.worker_addr(0)));
    assert_eq!(sha(&client.read_all("/wr/disk").await.unwrap()), sha(&d));
    assert_eq!(client.read_all("/wr/mem").await.unwrap_err().kind, ErrorKind::DataLost);
}

/// Waits until worker `i`'s tier holds `blocks` blocks.
async fn wait_tier_blocks(c: &Cluster, i: usize, tier: Tier, blocks: u64) {
    let client = c.remote_client();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = client.worker_stats(c.worker_addr(i)).await.unwrap();
        let t = stats.tiers.iter().find(|t| t.tier == tier as i32).unwrap().clone();
        if t.blocks == blocks {
            return;
        }
        assert!(Instant::now() < deadline, "worker {i} {tier:?} holds {} blocks, expected {blocks}", t.blocks);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_files_leave_no_blocks_even_on_workers_that_were_down() {
    let mut c = start(ClusterOptions::workers(2)).await;
    let client = c.client("h0", "r0");
    // Deleted while the worker is up: its blocks go with the next heartbeat.
    client.write_all("/del/mem", &data(2_500_000, 51), opts(WriteType::MustCache)).await.unwrap();
    wait_tier_blocks(&c, 0, Tier::Mem, 3).await;
    client.delete("/del/mem", false).await.unwrap();
    wait_tier_blocks(&c, 0, Tier::Mem, 0).await;
    // Deleted while the worker is down: its DISK blocks go when it registers again.
    let one = WriteOptions { replication: 1, ..opts(WriteType::ReplicatedDisk) };
    client.write_all("/del/disk", &data(2_500_000, 52), one.clone()).await.unwrap();
    client.write_all("/del/keep", &data(1_000_000, 53), one).await.unwrap();
    wait_tier_blocks(&c, 0, Tier::Disk, 4).await;
    c.kill_worker(0);
    client.delete("/del/disk", false).await.unwrap();
    c.restart_worker(0).await.unwrap();
    wait_tier_blocks(&c, 0, Tier::Disk, 1).await;
    assert_eq!(sha(&client.read_all("/del/keep").await.unwrap()), sha(&data(1_000_000, 53)));
}

/// The fault campaign's finding 2: a master stopped for longer than a worker's
/// heartbeat timeout must not, once it runs again, declare every worker dead
/// and their memory-only files lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_paused_past_the_heartbeat_timeout_loses_nothing() {
    let c = start(ClusterOptions::workers(2)).await;
    let client = c.client("h9", "r9");
    let bytes = data(2_000_000, 41);
    client.write_all("/paused/m", &bytes, opts(WriteType::MustCache)).await.unwrap();
    let pid = c.master_pid().expect("master runs") as i32;
    // SAFETY: signalling a child of this test.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    tokio::time::sleep(std::time::Duration::from_millis(3 * c.options.worker_timeout_ms)).await;
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let st = client.stat("/paused/m").await.unwrap();
    assert!(!st.lost && st.in_memory_bytes == bytes.len() as u64, "{st:?}");
    assert_eq!(client.read_all("/paused/m").await.unwrap(), bytes);
    let alive = client.cluster_status().await.unwrap().workers.iter().filter(|w| w.alive).count();
    assert_eq!(alive, 2);
}

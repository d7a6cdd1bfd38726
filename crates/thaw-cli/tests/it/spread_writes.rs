//! Memory writes spread over workers: a must-cache, cache-through or
//! async-through file larger than one worker's memory is placed a segment at
//! a time (the writer's own worker while it has room, then the others by free
//! memory), read back byte for byte, its blocks all in memory; an
//! async-through one is checkpointed from several workers; a write larger
//! than the whole cluster's free memory fails, saying so, and leaves nothing.

use std::collections::BTreeSet;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use thaw_common::proto::{Persistence, TierUsage};

const MIB: usize = 1 << 20;

/// Three workers (h0, h1, h2) with 8 MiB of memory each, 1 MiB blocks.
async fn three_small_workers() -> Cluster {
    let mut o = ClusterOptions::workers(3);
    for w in &mut o.workers {
        w.mem_capacity = 8 * MIB as u64;
    }
    start(o).await
}

async fn mem_tiers(client: &Client) -> Vec<TierUsage> {
    let status = client.cluster_status().await.unwrap();
    let mut out = Vec::new();
    for w in &status.workers {
        let s = client.worker_stats(&w.data_address).await.unwrap();
        out.push(s.tiers.into_iter().find(|t| t.tier == Tier::Mem as i32).unwrap());
    }
    out
}

/// Waits until every worker's memory is empty again, as the workers and the
/// master see it (deletes reach the workers with their next heartbeat, and
/// the master counts the memory free once their next report shows it).
async fn wait_memory_free(client: &Client) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let tiers = mem_tiers(client).await;
        let status = client.cluster_status().await.unwrap();
        let at_master = status.workers.iter().flat_map(|w| &w.tiers).filter(|t| t.tier == Tier::Mem as i32);
        if tiers.iter().all(|t| t.used == 0) && at_master.clone().all(|t| t.used == 0) {
            return;
        }
        assert!(Instant::now() < deadline, "memory not given back: {tiers:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Per block of `path`: the hosts of the workers holding it in MEM.
async fn mem_hosts(client: &Client, path: &str) -> Vec<Vec<String>> {
    let (info, _) = client.stat_blocks(path, true).await.unwrap();
    info.blocks
        .iter()
        .map(|b| b.replicas.iter().filter(|r| r.tier == Tier::Mem as i32).map(|r| r.host.clone()).collect())
        .collect()
}

/// Runs `thaw ARGS` against the cluster as a client on `host`.
fn thaw(c: &Cluster, host: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("THAW_MASTER", c.master_addr())
        .env("THAW_HOST", host)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_write_larger_than_one_worker_spreads_over_several_and_reads_back_byte_exact() {
    let c = three_small_workers().await;
    let local = c.client("h0", "r0");
    let remote = c.remote_client();
    let bytes = data(20 * MIB, 7);
    let cases = [
        (WriteType::MustCache, true),
        (WriteType::MustCache, false),
        (WriteType::CacheThrough, true),
        (WriteType::CacheThrough, false),
        (WriteType::AsyncThrough, true),
        (WriteType::AsyncThrough, false),
    ];
    for (i, (wt, short_circuit)) in cases.into_iter().enumerate() {
        let path = format!("/spread/{}-{i}", wt.as_str_name());
        let writer = if short_circuit { &local } else { &remote };
        // Written in odd pieces, as a stream of unknown length.
        let mut w = writer.create(&path, WriteOptions::of(wt)).await.unwrap();
        assert_eq!(w.is_local(), short_circuit, "{path}");
        for piece in bytes.chunks(3 * MIB + 12_345) {
            w.write(piece).await.unwrap();
        }
        let info = w.close().await.unwrap();
        assert_eq!(info.length, bytes.len() as u64, "{path}");
        for reader in [&local, &remote] {
            assert_eq!(sha(&reader.read_all(&path).await.unwrap()), sha(&bytes), "{path}");
        }
        // Every block in memory, on more than one worker, none on more than
        // its 8 MiB holds; the writer's own worker took the first blocks.
        let hosts = mem_hosts(&local, &path).await;
        assert_eq!(hosts.len(), 20, "{path}");
        assert!(hosts.iter().all(|h| h.len() == 1), "{path}: every block in memory once: {hosts:?}");
        let used: BTreeSet<&String> = hosts.iter().map(|h| &h[0]).collect();
        assert!(used.len() > 1, "{path}: all blocks on {used:?}");
        for h in &used {
            assert!(hosts.iter().filter(|b| &&b[0] == h).count() <= 8, "{path}: {hosts:?}");
        }
        if short_circuit {
            assert!(hosts[..8].iter().all(|h| h[0] == "h0"), "{path}: the writer's worker first: {hosts:?}");
        }
        match wt {
            WriteType::CacheThrough => {
                let copy = std::fs::read(c.ufs.join(path.trim_start_matches('/'))).unwrap();
                assert_eq!(sha(&copy), sha(&bytes), "{path}: the under-store copy is whole");
            }
            WriteType::AsyncThrough => {
                // Checkpointed by one of its workers, reading the others' blocks.
                let info = local.persist_wait(&path, Duration::from_secs(60)).await.unwrap();
                assert_eq!(info.persistence, Persistence::Persisted as i32);
                let copy = std::fs::read(c.ufs.join(path.trim_start_matches('/'))).unwrap();
                assert_eq!(sha(&copy), sha(&bytes), "{path}: the checkpoint is whole");
                // And every holder then counts its blocks as cache, not as the only copy.
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    let tiers = mem_tiers(&local).await;
                    if tiers.iter().all(|t| t.pinned == 0) {
                        break;
                    }
                    assert!(Instant::now() < deadline, "{path}: still pinned after its checkpoint: {tiers:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            _ => {
                let tiers = mem_tiers(&local).await;
                assert_eq!(tiers.iter().map(|t| t.pinned).sum::<u64>(), bytes.len() as u64, "{tiers:?}");
            }
        }
        local.delete(&path, false).await.unwrap();
        wait_memory_free(&local).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thaw_fs_put_spreads_a_large_file_and_small_ones_stay_on_the_writer_s_worker() {
    let c = three_small_workers().await;
    let client = c.client("h0", "r0");
    let big = c.root().join("big.bin");
    let bytes = data(20 * MIB, 8);
    std::fs::write(&big, &bytes).unwrap();
    // The in-kernel copy of `fs put` into the block files, segment by segment.
    let out = thaw(&c, "h0", &["fs", "put", "--write-type", "must-cache", big.to_str().unwrap(), "/big"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cat = thaw(&c, "h1", &["fs", "cat", "/big"]);
    assert!(cat.status.success() && sha(&cat.stdout) == sha(&bytes));
    let hosts = mem_hosts(&client, "/big").await;
    assert!(hosts[..8].iter().all(|h| h == &["h0"]), "{hosts:?}");
    assert_eq!(hosts.iter().flatten().collect::<BTreeSet<_>>().len(), 3, "{hosts:?}");
    client.delete("/big", false).await.unwrap();
    wait_memory_free(&client).await;
    // Files that fit stay where they are written, as before.
    for (i, host) in ["h0", "h1", "h2"].into_iter().enumerate() {
        let small = data(3 * MIB + 5, 20 + i as u64);
        let path = format!("/small{i}");
        c.client(host, "r0").write_all(&path, &small, WriteOptions::of(WriteType::MustCache)).await.unwrap();
        let hosts = mem_hosts(&client, &path).await;
        assert!(hosts.iter().all(|h| h == &[host]), "{path}: {hosts:?}");
    }
}

/// Writers of 7 MiB each, all at once from `hosts`, in half-MiB pieces,
/// saying their length at create if `known`: each one's path, bytes and result.
async fn write_at_once(c: &Cluster, hosts: &[&str], known: bool) -> Vec<(String, Vec<u8>, thaw_common::Result<()>)> {
    let writes: Vec<_> = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let client = c.client(host, "r0");
            tokio::spawn(async move {
                let bytes = data(7 * MIB, 30 + i as u64);
                let path = format!("/w{i}");
                let length = known.then_some(bytes.len() as u64);
                let opts = WriteOptions { length, ..WriteOptions::of(WriteType::MustCache) };
                let mut w = match client.create(&path, opts).await {
                    Ok(w) => w,
                    Err(e) => return (path, bytes, Err(e)),
                };
                for piece in bytes.chunks(MIB / 2) {
                    if let Err(e) = w.write(piece).await {
                        return (path, bytes, Err(e));
                    }
                    tokio::task::yield_now().await;
                }
                let r = w.close().await.map(|_| ());
                (path, bytes, r)
            })
        })
        .collect();
    let mut out = Vec::new();
    for w in writes {
        out.push(w.await.unwrap());
    }
    out
}

/// Checks the outcome of [`write_at_once`]: each write whole, or failed
/// for want of memory and gone; how many succeeded. Deletes them after,
/// and waits for their memory to be free.
async fn check_outcomes(c: &Cluster, outcomes: Vec<(String, Vec<u8>, thaw_common::Result<()>)>) -> usize {
    let client = c.client("h0", "r0");
    let mut ok = 0;
    for (path, bytes, r) in outcomes {
        match r {
            Ok(()) => {
                ok += 1;
                assert_eq!(sha(&client.read_all(&path).await.unwrap()), sha(&bytes), "{path}");
                client.delete(&path, false).await.unwrap();
            }
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::ResourceExhausted, "{path}: {e}");
                let larger = e.message.contains("is larger than the cluster's free memory");
                assert!(larger || e.message.contains("no worker has room in memory"), "{path}: {e}");
                assert_eq!(client.stat(&path).await.unwrap_err().kind, ErrorKind::NotFound);
            }
        }
    }
    wait_memory_free(&client).await;
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_are_not_handed_the_same_free_memory() {
    let c = three_small_workers().await;
    // 21 MiB for 24 MiB of memory, three writers at once, their lengths not
    // known: each segment is set aside for its writer until committed, so
    // no two are handed the same room, and every write fits (each sets
    // aside at most 8 blocks: 1, 1, 2, 4).
    assert_eq!(check_outcomes(&c, write_at_once(&c, &["h0", "h1", "elsewhere"], false).await).await, 3);
    // 28 MiB, four writers that say their length: each gets all its memory
    // at create or fails then, before sending a byte, so exactly as many as
    // fit (three) are written, whatever the interleaving.
    let known = write_at_once(&c, &["h0", "h1", "h2", "elsewhere"], true).await;
    let refused: Vec<_> = known.iter().filter_map(|(_, _, r)| r.as_ref().err()).collect();
    // Refused at create: larger than the free memory left, or no worker has
    // room for one of its blocks.
    let at_create =
        |m: &str| m.contains("this write of 7.0 MiB is larger") || m.contains("of the 7 this write of 7.0 MiB");
    assert!(refused.iter().all(|e| at_create(&e.message)), "{refused:?}");
    assert_eq!(check_outcomes(&c, known).await, 3);
    // The same, their lengths not known: segment by segment, those the
    // master finds no room for fail, saying so (no worker is ever asked for
    // memory it does not have), and leave nothing; the others are whole.
    // How many get through depends on the interleaving (each may hold part
    // of what it needs when the memory runs out), which is what saying the
    // length avoids.
    assert!(check_outcomes(&c, write_at_once(&c, &["h0", "h1", "h2", "elsewhere"], false).await).await <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_write_larger_than_the_cluster_s_free_memory_fails_clearly_and_leaves_nothing() {
    let c = three_small_workers().await;
    let client = c.client("h0", "r0");
    // 30 MiB into 24 MiB of memory, for the write types whose blocks are the
    // only copy, from this host (short-circuit) and from elsewhere (streamed).
    let bytes = data(30 * MIB, 9);
    for wt in [WriteType::MustCache, WriteType::AsyncThrough] {
        for writer in [&client, &c.remote_client()] {
            let path = format!("/too-big/{}", wt.as_str_name());
            let e = writer.write_all(&path, &bytes, WriteOptions::of(wt)).await.unwrap_err();
            assert_eq!(e.kind, ErrorKind::ResourceExhausted, "{e}");
            let says = "this write of 30.0 MiB is larger than the cluster's free memory (24.0 MiB";
            assert!(e.message.contains(says), "{e}");
            assert_eq!(client.stat(&path).await.unwrap_err().kind, ErrorKind::NotFound, "{wt:?}");
            wait_memory_free(&client).await;
        }
    }
    // A cache-through file's bytes are all in the under-store: once no
    // worker has memory free, its blocks evict cache, its own first blocks
    // too; the file is whole, memory holds what fits.
    for writer in [&client, &c.remote_client()] {
        let info = writer.write_all("/ct", &bytes, WriteOptions::of(WriteType::CacheThrough)).await.unwrap();
        assert_eq!(info.length, bytes.len() as u64);
        assert_eq!(sha(&std::fs::read(c.ufs.join("ct")).unwrap()), sha(&bytes));
        assert_eq!(sha(&client.read_all("/ct").await.unwrap()), sha(&bytes));
        let tiers = mem_tiers(&client).await;
        assert!(tiers.iter().all(|t| t.used <= t.capacity && t.pinned == 0), "{tiers:?}");
        client.delete("/ct", false).await.unwrap();
        wait_memory_free(&client).await;
    }
    // From the command line: the reason, and no file.
    let local = c.root().join("big.bin");
    std::fs::write(&local, &bytes).unwrap();
    let out = thaw(&c, "h0", &["fs", "put", "--write-type", "must-cache", local.to_str().unwrap(), "/big"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let says = "this write of 30.0 MiB is larger than the cluster's free memory (24.0 MiB";
    assert!(!out.status.success() && err.contains(says), "{err}");
    let ls = thaw(&c, "h0", &["fs", "ls", "/"]);
    let ls = String::from_utf8_lossy(&ls.stdout);
    assert!(!ls.lines().any(|l| l.split_whitespace().last() == Some("big")), "{ls}");
    wait_memory_free(&client).await;
    // The cluster still takes what fits.
    client.write_all("/fits", &bytes[..20 * MIB], WriteOptions::of(WriteType::MustCache)).await.unwrap();
    assert_eq!(sha(&client.read_all("/fits").await.unwrap()), sha(&bytes[..20 * MIB]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_memory_free_a_memory_write_evicts_cache_and_never_what_is_pinned() {
    let c = three_small_workers().await;
    let remote = c.remote_client();
    // Every worker's memory full: cache (cold files read from each host) and
    // on h2 a must-cache file, which is never evicted.
    for (i, host) in ["h0", "h1"].into_iter().enumerate() {
        let p = format!("/cold{i}");
        let bytes = cold_file(&c, &p, 8 * MIB, 50 + i as u64);
        assert_eq!(sha(&c.client(host, "r0").read_all(&p).await.unwrap()), sha(&bytes));
    }
    let pinned = data(8 * MIB, 52);
    c.client("h2", "r0").write_all("/pinned", &pinned, WriteOptions::of(WriteType::MustCache)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while mem_tiers(&remote).await.iter().map(|t| t.used).sum::<u64>() < 24 * MIB as u64 {
        assert!(Instant::now() < deadline, "{:?}", mem_tiers(&remote).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // 12 MiB more: no worker has memory free, so the write evicts cache, on
    // h0 and h1 only.
    let bytes = data(12 * MIB, 53);
    c.client("h2", "r0").write_all("/new", &bytes, WriteOptions::of(WriteType::MustCache)).await.unwrap();
    assert_eq!(sha(&remote.read_all("/new").await.unwrap()), sha(&bytes));
    let hosts = mem_hosts(&remote, "/new").await;
    assert!(hosts.iter().all(|h| h.len() == 1 && h[0] != "h2"), "{hosts:?}");
    let tiers = mem_tiers(&remote).await;
    assert!(tiers.iter().map(|t| t.evictions).sum::<u64>() >= 12, "{tiers:?}");
    assert_eq!(sha(&remote.read_all("/pinned").await.unwrap()), sha(&pinned));
    assert_eq!(mem_hosts(&remote, "/pinned").await.iter().flatten().count(), 8);
    // The evicted files still read, from the under-store.
    for i in 0..2 {
        let p = format!("/cold{i}");
        assert_eq!(remote.read_all(&p).await.unwrap().len(), 8 * MIB, "{p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_a_segment_a_version_1_request_names() {
    use thaw_common::proto::*;
    let c = three_small_workers().await;
    let client = c.client("h0", "r0");
    let mut sock = tokio::net::TcpStream::connect(c.worker_addr(0)).await.unwrap();
    let req = DataRequest {
        version: thaw_proto::DATA_PROTOCOL_VERSION,
        job_id: String::new(),
        request: Some(data_request::Request::WriteFile(WriteFileRequest {
            file_id: 77,
            block_size: MIB as u64,
            tier: Tier::Mem as i32,
            first_block: 3,
            ..Default::default()
        })),
        ..Default::default()
    };
    thaw_common::frame::write_msg(&mut sock, &req).await.unwrap();
    let resp = thaw_common::frame::read_msg::<_, DataResponse>(&mut sock).await.unwrap().unwrap();
    let e = thaw_common::frame::check_response(resp).unwrap_err();
    assert!(e.message.contains("first_block is data protocol version 2"), "{e}");
    // And an unknown version is refused, naming the ones spoken.
    let mut sock = tokio::net::TcpStream::connect(c.worker_addr(0)).await.unwrap();
    thaw_common::frame::write_msg(&mut sock, &DataRequest { version: 3, ..req }).await.unwrap();
    let resp = thaw_common::frame::read_msg::<_, DataResponse>(&mut sock).await.unwrap().unwrap();
    let e = thaw_common::frame::check_response(resp).unwrap_err();
    assert!(e.message.contains("this worker speaks 1 to 2"), "{e}");
    assert!(mem_tiers(&client).await.iter().all(|t| t.used == 0));
}

//! async-through writes and their checkpoints (Tachyon, section 2.7), on a cluster
//! of real processes: what lands in the under-store, in which order, and what a
//! kill -9 of a worker or of the master leaves.

use std::time::{Duration, Instant};

use crate::common::*;
use thaw_common::proto::{FileInfo, Persistence};

const WAIT: Duration = Duration::from_secs(30);

fn async_through() -> WriteOptions {
    WriteOptions { write_type: WriteType::AsyncThrough, ..Default::default() }
}

fn temporary() -> WriteOptions {
    WriteOptions { temporary: true, ..async_through() }
}

fn state(f: &FileInfo) -> Persistence {
    Persistence::try_from(f.persistence).unwrap()
}

/// Workers whose checkpoint copies run at `bw` (e.g. "1MiB").
fn paced(n: usize, bw: &str) -> ClusterOptions {
    let mut o = ClusterOptions::workers(n);
    for w in &mut o.workers {
        w.extra_args.extend(["--checkpoint-bandwidth".to_string(), bw.to_string()]);
    }
    o
}

fn ufs_bytes(c: &Cluster, path: &str) -> Option<Vec<u8>> {
    std::fs::read(c.ufs.join(path.trim_start_matches('/'))).ok()
}

fn checkpoint_area(c: &Cluster) -> Vec<String> {
    std::fs::read_dir(c.ufs.join(".thaw-staging/checkpoints"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

async fn wait_state(client: &Client, path: &str, want: Persistence) -> FileInfo {
    let deadline = Instant::now() + WAIT;
    loop {
        let f = client.stat(path).await.unwrap();
        if state(&f) == want {
            return f;
        }
        assert!(Instant::now() < deadline, "{path} stayed {:?}, not {want:?}", state(&f));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pinned bytes of worker `i`'s MEM tier, as of its last heartbeat.
async fn pinned(c: &Cluster, i: usize) -> u64 {
    let s = c.remote_client().cluster_status().await.unwrap();
    let w = s.workers.iter().find(|w| w.data_address == c.worker_addr(i)).unwrap();
    w.tiers.iter().find(|t| t.tier == Tier::Mem as i32).unwrap().pinned
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_through_write_returns_from_memory_then_lands_byte_identical_in_the_under_store() {
    // 2 MiB/s: the 3 MiB checkpoint takes 1.5 s, so the write returns long before.
    let c = start(paced(2, "2MiB")).await;
    let client = c.client("h0", "r0");
    let bytes = data(3 << 20, 1);
    let info = client.write_all("/out/part-0", &bytes, async_through()).await.unwrap();
    assert_ne!(state(&info), Persistence::Persisted, "{info:?}");
    assert!(ufs_bytes(&c, "/out/part-0").is_none(), "nothing at the path before the checkpoint lands");
    // Readable at once, from memory.
    assert_eq!(sha(&client.read_all("/out/part-0").await.unwrap()), sha(&bytes));
    wait_state(&client, "/out/part-0", Persistence::Persisting).await;
    let status = client.cluster_status().await.unwrap().persistence.unwrap();
    assert_eq!((status.persisting, status.lost), (1, 0), "{status:?}");
    let f = wait_state(&client, "/out/part-0", Persistence::Persisted).await;
    assert!(f.persisted && f.file_id == info.file_id);
    assert_eq!(sha(&ufs_bytes(&c, "/out/part-0").unwrap()), sha(&bytes));
    assert!(checkpoint_area(&c).is_empty(), "{:?}", checkpoint_area(&c));
    // Its blocks are cache now: unpinned at the worker.
    let deadline = Instant::now() + WAIT;
    while pinned(&c, 0).await != 0 {
        assert!(Instant::now() < deadline, "blocks stayed pinned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let totals = client.cluster_status().await.unwrap().persistence.unwrap();
    assert_eq!((totals.persisted, totals.not_persisted, totals.checkpoints_done), (1, 0, 1), "{totals:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_go_newest_first_while_writes_outrun_them() {
    // 1 MiB files at 512 KiB/s: each checkpoint takes 2 s; all five are
    // written while the first is copied, even on a loaded machine (at 2 MiB/s
    // a loaded 2-core host wrote a4 and a5 after a1's checkpoint ended).
    let c = start(paced(1, "512KiB")).await;
    let client = c.client("h0", "r0");
    for i in 1..=5 {
        client.write_all(&format!("/chain/a{i}"), &data(1 << 20, i), async_through()).await.unwrap();
    }
    let mut order: Vec<String> = Vec::new();
    let deadline = Instant::now() + WAIT;
    while order.len() < 5 {
        for f in client.list("/chain").await.unwrap() {
            if f.persisted && !order.contains(&f.name) {
                order.push(f.name);
            }
        }
        assert!(Instant::now() < deadline, "persisted so far: {order:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Tachyon, section 2.7: once a1's checkpoint is done, the newest file is next.
    assert_eq!(order, ["a1", "a5", "a4", "a3", "a2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporary_and_deleted_files_are_never_persisted_and_a_renamed_one_lands_at_its_new_path() {
    let c = start(paced(1, "2MiB")).await;
    let client = c.client("h0", "r0");
    let moved = data(2 << 20, 2);
    client.write_all("/tmp-test/moving", &moved, async_through()).await.unwrap();
    client.write_all("/tmp-test/scratch", &data(1 << 20, 3), temporary()).await.unwrap();
    client.write_all("/tmp-test/gone", &data(1 << 20, 4), async_through()).await.unwrap();
    client.delete("/tmp-test/gone", false).await.unwrap();
    // Renamed while its checkpoint is being copied.
    wait_state(&client, "/tmp-test/moving", Persistence::Persisting).await;
    client.mkdir("/final", true, true).await.unwrap();
    client.rename("/tmp-test/moving", "/final/moved").await.unwrap();
    let f = wait_state(&client, "/final/moved", Persistence::Persisted).await;
    assert_eq!(f.path, "/final/moved");
    assert_eq!(sha(&ufs_bytes(&c, "/final/moved").unwrap()), sha(&moved));
    assert!(ufs_bytes(&c, "/tmp-test/moving").is_none());
    // Two more checkpoint times: the temporary file is still memory only.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let t = client.stat("/tmp-test/scratch").await.unwrap();
    assert_eq!(state(&t), Persistence::NotPersisted);
    assert!(t.temporary);
    assert!(ufs_bytes(&c, "/tmp-test/scratch").is_none() && ufs_bytes(&c, "/tmp-test/gone").is_none());
    assert!(checkpoint_area(&c).is_empty(), "{:?}", checkpoint_area(&c));
    // Asked for, a temporary file is persisted like any other.
    let t = client.persist_wait("/tmp-test/scratch", WAIT).await.unwrap();
    assert!(t.persisted);
    assert_eq!(ufs_bytes(&c, "/tmp-test/scratch").unwrap(), data(1 << 20, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_file_never_comes_back_from_a_checkpoint_its_journal_did_not_record() {
    let mut c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    // A master killed after publishing a checkpoint and before journaling the
    // file persisted leaves the under-store copy of a file its journal calls
    // memory-only (a temporary file stands in: it is never checkpointed by
    // itself; the copy is put in place by hand).
    client.write_all("/back/x", &data(1 << 20, 8), temporary()).await.unwrap();
    std::fs::write(c.ufs.join("back/x"), data(1 << 20, 8)).unwrap();
    c.kill_master();
    c.restart_master().await.unwrap();
    assert!(!client.stat("/back/x").await.unwrap().persisted);
    client.delete("/back/x", false).await.unwrap();
    // Listed (which loads what the under-store has) and looked up: gone.
    assert!(client.list("/back").await.unwrap().is_empty());
    assert_eq!(client.stat("/back/x").await.unwrap_err().kind, ErrorKind::NotFound);
    assert!(ufs_bytes(&c, "/back/x").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_before_its_checkpoint_loses_only_the_unpersisted_file() {
    // 1 MiB/s: the 6 MiB file's checkpoint takes 6 s; the worker dies first.
    let mut c = start(paced(2, "1MiB")).await;
    let client = c.client("h0", "r0");
    let safe = data(256 << 10, 5);
    client.write_all("/kill/safe", &safe, async_through()).await.unwrap();
    client.persist_wait("/kill/safe", WAIT).await.unwrap();
    client.write_all("/kill/big", &data(6 << 20, 6), async_through()).await.unwrap();
    wait_state(&client, "/kill/big", Persistence::Persisting).await;
    c.kill_worker(0);
    c.wait_worker_dead(0, WAIT).await.unwrap();
    let reader = c.remote_client();
    let big = reader.stat("/kill/big").await.unwrap();
    assert_eq!(state(&big), Persistence::Lost, "{big:?}");
    // A lost file without lineage reads as a clear error, never as wrong bytes.
    let err = reader.read_all("/kill/big").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::DataLost, "{err}");
    // The write type as the CLI spells it, not the protocol's enum name.
    assert!(err.message.contains("(write type async-through)"), "{err}");
    let err = reader.persist("/kill/big").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::DataLost, "{err}");
    assert!(ufs_bytes(&c, "/kill/big").is_none());
    // The persisted file survives its worker: read through from the under-store.
    assert_eq!(sha(&reader.read_all("/kill/safe").await.unwrap()), sha(&safe));
    let totals = reader.cluster_status().await.unwrap().persistence.unwrap();
    assert_eq!((totals.lost, totals.persisted), (1, 1), "{totals:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_during_a_checkpoint_orders_it_again_after_restart() {
    let mut c = start(paced(1, "2MiB")).await;
    let client = c.client("h0", "r0");
    let bytes = data(3 << 20, 7);
    client.write_all("/m/file", &bytes, async_through()).await.unwrap();
    wait_state(&client, "/m/file", Persistence::Persisting).await;
    c.kill_master();
    c.restart_master().await.unwrap();
    let f = client.persist_wait("/m/file", WAIT).await.unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert!(f.persisted);
    assert_eq!(sha(&ufs_bytes(&c, "/m/file").unwrap()), sha(&bytes));
    // Persisted survives another restart (it is in the journal).
    c.kill_master();
    c.restart_master().await.unwrap();
    assert!(client.stat("/m/file").await.unwrap().persisted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpersisted_blocks_are_never_evicted_and_persisting_them_makes_room() {
    let mut o = ClusterOptions::workers(1);
    o.workers[0].mem_capacity = 8 << 20;
    let c = start(o).await;
    let client = c.client("h0", "r0");
    let kept = data(6 << 20, 8);
    client.write_all("/full/kept", &kept, temporary()).await.unwrap();
    // No room without evicting the only copy: a clear error, and nothing lost.
    let err = client.write_all("/full/next", &data(4 << 20, 9), async_through()).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::ResourceExhausted, "{err}");
    assert!(err.message.contains("not persisted"), "{err}");
    assert!(client.stat("/full/next").await.is_err(), "the failed write left no file");
    assert_eq!(sha(&client.read_all("/full/kept").await.unwrap()), sha(&kept));
    // Persisted, the blocks become cache; the next write evicts them.
    client.persist_wait("/full/kept", WAIT).await.unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        match client.write_all("/full/next", &data(4 << 20, 9), async_through()).await {
            Ok(_) => break,
            // The worker unpins as soon as the master confirms; a write racing it waits.
            Err(e) if e.kind == ErrorKind::ResourceExhausted && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    // Evicted (as the worker's next heartbeat tells the master), not lost.
    loop {
        let k = client.stat("/full/kept").await.unwrap();
        if k.in_memory_bytes < kept.len() as u64 {
            assert!(k.persisted, "{k:?}");
            break;
        }
        assert!(Instant::now() < deadline, "{k:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sha(&client.read_all("/full/kept").await.unwrap()), sha(&kept));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_refuses_what_it_cannot_persist_with_a_clear_error() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    client.mkdir("/dir", true, true).await.unwrap();
    assert_eq!(client.persist("/dir").await.unwrap_err().kind, ErrorKind::IsADirectory);
    assert_eq!(client.persist("/nope").await.unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(client.persist("/../etc/passwd").await.unwrap_err().kind, ErrorKind::InvalidArgument);
    let wrong = WriteOptions { temporary: true, ..opts(WriteType::MustCache) };
    let err = client.write_all("/t", b"x", wrong).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidArgument, "{err}");
    // A file being written cannot be persisted yet.
    let mut w = client.create("/open", async_through()).await.unwrap();
    w.write(b"partial").await.unwrap();
    assert_eq!(client.persist("/open").await.unwrap_err().kind, ErrorKind::FailedPrecondition);
    w.close().await.unwrap();
    // A must-cache file may be persisted by hand; an empty file too.
    client.write_all("/mc", &data(100_000, 10), opts(WriteType::MustCache)).await.unwrap();
    assert!(client.persist_wait("/mc", WAIT).await.unwrap().persisted);
    assert_eq!(ufs_bytes(&c, "/mc").unwrap(), data(100_000, 10));
    client.write_all("/empty", b"", async_through()).await.unwrap();
    assert!(client.persist_wait("/empty", WAIT).await.unwrap().persisted);
    assert_eq!(ufs_bytes(&c, "/empty").unwrap(), b"");
    // Persisting a persisted file answers at once.
    assert!(client.persist("/mc").await.unwrap().persisted);
}

/// `thaw fs persist` writes the file now: with checkpoints paced to 1 KiB/s
/// and an 8 MiB background checkpoint running (hours at that rate), a small
/// file asked for is written beside it at once. A persist that times out says
/// what it waited for; the background copy asked for is hurried and lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_by_hand_runs_beside_a_slow_background_checkpoint_and_a_timeout_says_why() {
    let c = start(paced(1, "1KiB")).await;
    let client = c.client("h0", "r0");
    let big = data(8 << 20, 1);
    client.write_all("/bg/big", &big, async_through()).await.unwrap();
    wait_state(&client, "/bg/big", Persistence::Persisting).await;
    let small = data(64 << 10, 2);
    client.write_all("/small", &small, temporary()).await.unwrap();
    let persist = |path: &str, timeout: &str| {
        std::process::Command::new(BIN)
            .args(["fs", "persist", path, "--timeout", timeout])
            .env("THAW_MASTER", c.master_addr())
            .output()
            .unwrap()
    };
    let out = persist("/small", "20");
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), c.logs());
    assert_eq!(ufs_bytes(&c, "/small").unwrap(), small);
    let f = client.stat("/bg/big").await.unwrap();
    assert_eq!(state(&f), Persistence::Persisting, "the background copy is still paced");
    assert!(f.persist_waiting.contains("in the background, paced by its --checkpoint-bandwidth"), "{f:?}");

    // No time to wait: the answer names who is writing it, and how.
    let out = persist("/bg/big", "0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("/bg/big is still persisting after 0.0 s: worker "), "{err}");
    assert!(err.contains("--checkpoint-bandwidth") && err.contains("hurry"), "{err}");
    // Asked for: its copy goes unpaced from there.
    wait_state(&client, "/bg/big", Persistence::Persisted).await;
    assert_eq!(sha(&ufs_bytes(&c, "/bg/big").unwrap()), sha(&big));
}

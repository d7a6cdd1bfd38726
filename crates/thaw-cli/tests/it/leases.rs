//! Writer leases (issue 18, item 4): an unfinished file belongs to its writer
//! while the writer renews its lease. `thaw fs put` killed -9 mid-write loses
//! its file once the lease runs out (the entry, its committed blocks and their
//! memory are freed, the path is free again); a live writer keeps its file
//! through many lease periods and through a master restart; nobody else's
//! `put --force` takes a file being written; `thaw fs ls` says who holds it.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

const MIB: usize = 1 << 20;
/// The lease of these tests' masters: short, so that expiry is quick to see.
const LEASE_MS: u64 = 1500;

async fn cluster() -> Cluster {
    let mut o = ClusterOptions::workers(1);
    o.master_args = vec!["--writer-lease-ms".into(), LEASE_MS.to_string()];
    start(o).await
}

/// `thaw fs put - PATH` (must-cache, 1 MiB blocks) on host h0, fed through its stdin.
fn put_from_stdin(c: &Cluster, path: &str) -> (Child, ChildStdin) {
    let mut child = Command::new(BIN)
        .args(["fs", "put", "--write-type", "must-cache", "--block-size", "1MiB", "-", path])
        .args(["--master", c.master_addr()])
        .env("THAW_HOST", "h0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin)
}

fn thaw(c: &Cluster, args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).args(["--master", c.master_addr()]).output().unwrap()
}

/// Bytes in worker 0's MEM tier, as the master last heard.
async fn mem_used(client: &Client) -> u64 {
    let st = client.cluster_status().await.unwrap();
    st.workers.iter().flat_map(|w| &w.tiers).filter(|t| t.tier == Tier::Mem as i32).map(|t| t.used).sum()
}

async fn wait_until<F: std::future::Future<Output = bool>>(what: &str, limit: Duration, mut f: impl FnMut() -> F) {
    let deadline = Instant::now() + limit;
    while !f().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_mid_write_loses_its_file_once_its_lease_runs_out() {
    let c = cluster().await;
    let client = c.client("h9", "r9");
    let (mut put, mut stdin) = put_from_stdin(&c, "/big");
    stdin.write_all(&data(10 * MIB, 1)).unwrap();
    stdin.flush().unwrap();
    // Ten blocks reach the worker's memory while the file is unfinished.
    wait_until("blocks in memory", Duration::from_secs(20), || async { mem_used(&client).await >= 8 * MIB as u64 })
        .await;
    let info = client.stat("/big").await.unwrap();
    assert!(!info.complete);
    assert!(info.writer.contains(&format!("pid {}", put.id())), "{info:?}");
    assert!(info.lease_expires_ms > thaw_common::now_ms(), "{info:?}");
    // `thaw fs ls` names the holder.
    let ls = thaw(&c, &["fs", "ls", "/"]);
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(text.contains("incomplete") && text.contains("written by") && text.contains("lease"), "{text}");

    put.kill().unwrap();
    put.wait().unwrap();
    let killed = Instant::now();
    // Gone within the lease and a check interval, with its memory.
    wait_until("the unfinished file deleted", Duration::from_secs(10), || async {
        client.stat("/big").await.is_err_and(|e| e.kind == ErrorKind::NotFound)
    })
    .await;
    let took = killed.elapsed();
    assert!(took >= Duration::from_millis(LEASE_MS / 2), "deleted before its lease could run out: {took:?}");
    wait_until("its blocks freed", Duration::from_secs(10), || async { mem_used(&client).await == 0 }).await;
    let log = std::fs::read_to_string(c.root().join("master.log")).unwrap_or_default();
    assert!(log.contains("stopped renewing its lease"), "{}", c.logs());
    // The path is free again.
    let (put, mut stdin) = put_from_stdin(&c, "/big");
    let bytes = data(3 * MIB + 7, 2);
    stdin.write_all(&bytes).unwrap();
    drop(stdin);
    let out = put.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(client.read_all("/big").await.unwrap() == bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_writer_keeps_its_file_through_many_leases_and_a_master_restart() {
    let mut c = cluster().await;
    let client = c.client("h9", "r9");
    let (put, mut stdin) = put_from_stdin(&c, "/slow");
    let first = data(2 * MIB, 3);
    stdin.write_all(&first).unwrap();
    stdin.flush().unwrap();
    wait_until("the file created", Duration::from_secs(20), || async { client.stat("/slow").await.is_ok() }).await;

    // Another client may not replace it, --force or not.
    let other = c.root().join("other.bin");
    std::fs::write(&other, b"other").unwrap();
    let forced = thaw(&c, &["fs", "put", "-f", other.to_str().unwrap(), "/slow"]);
    assert!(!forced.status.success());
    let err = String::from_utf8_lossy(&forced.stderr);
    assert!(err.contains("is being written by"), "{err}");

    // Three leases pass with the writer silent but alive: it renews.
    tokio::time::sleep(Duration::from_millis(3 * LEASE_MS)).await;
    assert!(!client.stat("/slow").await.unwrap().complete);
    // The master restarts: the unfinished file gets a fresh lease from the
    // journal, which the writer goes on renewing.
    c.kill_master();
    c.restart_master().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2 * LEASE_MS)).await;
    let info = client.stat("/slow").await.unwrap();
    assert!(!info.complete && info.writer.contains(&format!("pid {}", put.id())), "{info:?}");

    let rest = data(MIB + 11, 4);
    stdin.write_all(&rest).unwrap();
    drop(stdin);
    let out = put.wait_with_output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), c.logs());
    let want = [first, rest].concat();
    let info = client.stat("/slow").await.unwrap();
    assert!(info.complete && info.writer.is_empty(), "{info:?}");
    assert!(client.read_all("/slow").await.unwrap() == want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_without_a_writer_name_is_refused() {
    use thaw_common::proto::CreateFileRequest;
    use thaw_common::proto::master_service_client::MasterServiceClient;
    let c = cluster().await;
    let mut master = MasterServiceClient::connect(format!("http://{}", c.master_addr())).await.unwrap();
    let req = CreateFileRequest { path: "/x".into(), write_type: WriteType::MustCache as i32, ..Default::default() };
    let e = master.create_file(req).await.unwrap_err();
    assert_eq!(format!("{:?}", e.code()), "InvalidArgument");
    assert!(e.message().contains("writer must name itself"), "{}", e.message());
    let req = CreateFileRequest {
        path: "/x".into(),
        write_type: WriteType::MustCache as i32,
        writer: "w".repeat(300),
        ..Default::default()
    };
    let e = master.create_file(req).await.unwrap_err();
    assert!(e.message().contains("at most 256 bytes"), "{}", e.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_paused_past_its_lease_fails_saying_why_and_the_path_stays_free() {
    let c = cluster().await;
    let client = c.client("h9", "r9");
    let (put, mut stdin) = put_from_stdin(&c, "/paused");
    stdin.write_all(&data(3 * MIB, 5)).unwrap();
    stdin.flush().unwrap();
    wait_until("blocks in memory", Duration::from_secs(20), || async { mem_used(&client).await >= 2 * MIB as u64 })
        .await;
    let pid = put.id() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    wait_until("the unfinished file deleted", Duration::from_secs(10), || async {
        client.stat("/paused").await.is_err_and(|e| e.kind == ErrorKind::NotFound)
    })
    .await;
    // Someone else writes the path meanwhile.
    client.write_all("/paused", b"another file", opts(WriteType::MustCache)).await.unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    // Its next renewal learns the lease is gone; it fails then, or at its
    // next write (which may find its stdin closed).
    tokio::time::sleep(Duration::from_millis(LEASE_MS)).await;
    let _ = stdin.write_all(&data(MIB, 6));
    drop(stdin);
    let out = put.wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lease ran out"), "{err}");
    // The failed writer did not delete the other file at its path.
    assert_eq!(client.read_all("/paused").await.unwrap(), b"another file");
    wait_until("the paused write's blocks freed", Duration::from_secs(10), || async {
        mem_used(&client).await < MIB as u64
    })
    .await;
}

/// The fault campaign's finding 1: a through write whose writer died after its
/// worker put the under-store copy in place, but before CompleteFile. Neither
/// deleting the unfinished file nor its lease running out may leave that copy
/// to come back at the next listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_files_under_store_copy_goes_with_it() {
    use thaw_common::proto::CreateFileRequest;
    use thaw_common::proto::master_service_client::MasterServiceClient;
    let c = cluster().await;
    let client = c.client("h9", "r9");
    let mut master = MasterServiceClient::connect(format!("http://{}", c.master_addr())).await.unwrap();
    for (name, how) in [("deleted", "a delete"), ("expired", "its lease running out")] {
        let path = format!("/dir/{name}");
        let req = CreateFileRequest {
            path: path.clone(),
            write_type: WriteType::Through as i32,
            writer: "a writer that dies".into(),
            recursive: true,
            ..Default::default()
        };
        master.create_file(req).await.unwrap();
        // What its worker had written when the writer died.
        std::fs::write(c.ufs.join("dir").join(name), data(1000, 3)).unwrap();
        if name == "deleted" {
            client.delete(&path, false).await.unwrap();
        } else {
            // Asked without pause: a lookup right after the entry went must
            // not take the dead writer's copy in from the under-store.
            let deadline = Instant::now() + Duration::from_secs(10);
            while client.stat(&path).await.is_ok() {
                assert!(Instant::now() < deadline, "the lease did not run out within 10 s");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // Its under-store copy went before its entry.
            let e = client.stat(&path).await.unwrap_err();
            assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
        }
        let names: Vec<String> = client.list("/dir").await.unwrap().into_iter().map(|f| f.name).collect();
        assert!(!names.contains(&name.to_string()), "after {how}, {path} came back: {names:?}");
        assert!(!c.ufs.join("dir").join(name).exists(), "after {how}, the under-store copy of {path} is still there");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_deleted_while_it_is_written_does_not_come_back_when_its_writer_finishes() {
    let c = cluster().await;
    let writer = c.client("h9", "r9");
    let other = c.remote_client();
    for wt in [WriteType::Through, WriteType::CacheThrough] {
        let path = format!("/late/{}", wt.as_str_name());
        let mut w = writer.create(&path, WriteOptions::of(wt)).await.unwrap();
        w.write(&data(300_000, 4)).await.unwrap();
        // Deleted by someone else mid-write; the writer goes on and closes:
        // its worker puts the under-store copy in place, then the master
        // refuses to complete a file it deleted, and deletes that copy.
        other.delete(&path, false).await.unwrap();
        w.write(&data(300_000, 5)).await.unwrap();
        let e = w.close().await.unwrap_err();
        let names: Vec<String> = other.list("/late").await.unwrap().into_iter().map(|f| f.name).collect();
        assert!(names.is_empty(), "{path} came back: {names:?}");
        assert!(!c.ufs.join(path.trim_start_matches('/')).exists(), "{path}'s under-store copy is still there");
        if wt == WriteType::Through {
            assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
            assert!(e.message.contains("was deleted while it was being written"), "{e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_writer_never_deletes_the_file_that_took_its_path() {
    let c = cluster().await;
    let writer = c.client("h9", "r9");
    let other = c.remote_client();
    let mut w = writer.create("/taken", WriteOptions::of(WriteType::Through)).await.unwrap();
    w.write(&data(300_000, 6)).await.unwrap();
    // Deleted and written anew by someone else while the first write goes on.
    other.delete("/taken", false).await.unwrap();
    let theirs = data(200_000, 7);
    other.write_all("/taken", &theirs, WriteOptions::of(WriteType::MustCache)).await.unwrap();
    // The first writer's close fails (its file is gone), and the partial file
    // it deletes on failure is its own only: the new file stays.
    let e = w.close().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert_eq!(sha(&other.read_all("/taken").await.unwrap()), sha(&theirs));
    // A delete naming a file id deletes only that file.
    let id = other.stat("/taken").await.unwrap().file_id;
    let e = other.delete_file("/taken", id + 1).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(e.message.contains("another file took the path"), "{e}");
    other.delete_file("/taken", id).await.unwrap();
    assert_eq!(other.stat("/taken").await.unwrap_err().kind, ErrorKind::NotFound);
}

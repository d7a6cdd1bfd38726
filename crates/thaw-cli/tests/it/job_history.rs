//! A job's end, seen by its user, on real multi-process clusters: Ctrl-C on
//! `thaw migrate --wait` ends the job and releases its blocks (or keeps them,
//! when asked, and says how to end it); an ended job stays listed by `thaw
//! jobs` for a while with what was migrated for it and what its reads took;
//! `thaw events` names the jobs each migration was for.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

fn thaw(c: &Cluster, args: &[&str]) -> String {
    let out = Command::new(BIN).args(["--master", c.master_addr()]).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The `thaw jobs --json` entry of `id`, if listed.
fn listed(c: &Cluster, id: &str) -> Option<Value> {
    let v: Value = serde_json::from_str(&thaw(c, &["jobs", "--json"])).unwrap();
    v["jobs"].as_array().unwrap().iter().find(|j| j["job_id"] == id).cloned()
}

/// Waits until `f` holds, or fails after `limit` with what `f` last saw.
async fn until<T: std::fmt::Debug>(limit: Duration, mut f: impl FnMut() -> (bool, T)) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let (ok, seen) = f();
        if ok {
            return seen;
        }
        assert!(Instant::now() < deadline, "still not so after {limit:?}: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A `thaw migrate --wait` of `/slow` as job `id`, still waiting once a
/// block of it is in memory and its migration is counted done (the under-store
/// is modelled at 1 MiB/s; the block's replica can be reported a heartbeat
/// before the worker's migration report, on a loaded machine).
async fn waiting_migrate(c: &Cluster, client: &Client, id: &str, extra: &[&str]) -> Child {
    let mut child = Command::new(BIN)
        .args(["--master", c.master_addr(), "--job", id, "migrate", "--wait", "/slow"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = job(client, id).await;
        let why = match &seen {
            Some(j) if j.blocks_in_memory >= 1 && j.blocks_migrated >= 1 && j.blocks_in_memory < j.blocks => {
                return child;
            }
            // In memory but its report not counted yet: wait for the report (a
            // heartbeat later); only a migration already complete is too late.
            Some(j) if j.blocks_in_memory >= j.blocks => format!("the migration ended before the interrupt: {j:?}"),
            _ if Instant::now() >= deadline => format!("job {id} never got a block into memory: {seen:?}"),
            _ => String::new(),
        };
        if !why.is_empty() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{why}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn interrupt(child: Child) -> (Option<i32>, String) {
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn mem_used(c: &Cluster) -> u64 {
    let v: Value = serde_json::from_str(&thaw(c, &["status", "--json"])).unwrap();
    v["workers"].as_array().unwrap().iter().map(|w| w["migration"]["buffer_used"].as_u64().unwrap_or(0)).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_migrate_wait_ends_the_job_and_releases_its_blocks_or_keeps_them_when_asked() {
    let mut options = ClusterOptions::workers(1);
    options.workers[0].device_model = Some("ufs=1MiB/s".into());
    let c = start(options).await;
    cold_file(&c, "/slow/a", 8 << 20, 1);
    let client = c.remote_client();

    let child = waiting_migrate(&c, &client, "ci", &[]).await;
    let (code, said) = interrupt(child);
    assert_eq!(code, Some(130), "{said}");
    assert!(said.contains("job ci ended, its blocks released"), "{said}");
    // Ended at once, not after the 10-minute lease, and listed as ended.
    assert!(job(&client, "ci").await.is_none(), "ended at once, not after its lease");
    let j = job_listed(&client, "ci").await.expect("the ended job is still listed");
    assert!(j.ended && j.end_reason == "evicted", "{j:?}");
    assert!(j.blocks_migrated >= 1 && j.bytes_migrated >= 1 << 20, "{j:?}");
    assert_eq!((j.blocks_pending, j.blocks_queued, j.blocks_in_memory, j.lease_remaining_ms), (0, 0, 0, 0), "{j:?}");
    let listed = listed(&c, "ci").unwrap();
    assert_eq!((listed["state"].as_str(), listed["ended"].as_bool()), (Some("ended"), Some(true)), "{listed}");
    // Its blocks leave memory with the workers' next heartbeats.
    until(Duration::from_secs(10), || {
        let used = mem_used(&c);
        (used == 0, used)
    })
    .await;

    // Kept when asked: the job stays live, and the user is told how to end it.
    let child = waiting_migrate(&c, &client, "kept", &["--keep-on-interrupt"]).await;
    let (code, said) = interrupt(child);
    assert_eq!(code, Some(130), "{said}");
    assert!(said.contains("keeps its blocks") && said.contains("thaw --job kept evict"), "{said}");
    let j = job(&client, "kept").await.unwrap();
    assert!(!j.ended && j.lease_remaining_ms > 0, "{j:?}");
    assert!(thaw(&c, &["--job", "kept", "evict"]).contains("evicted"));
    assert!(job_listed(&client, "kept").await.unwrap().ended);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_job_stays_listed_with_what_it_moved_and_read_and_events_name_jobs() {
    let c = start(ClusterOptions::workers(1)).await;
    let bytes = cold_file(&c, "/in/f", 2_500_000, 3);
    thaw(&c, &["--job", "r", "migrate", "--wait", "/in"]);
    let got =
        Command::new(BIN).args(["--master", c.master_addr(), "--job", "r", "fs", "cat", "/in/f"]).output().unwrap();
    assert_eq!(got.stdout.len(), bytes.len());
    // The workers count the job's reads and tell the master with a heartbeat.
    until(Duration::from_secs(10), || {
        let j = listed(&c, "r").unwrap();
        (j["read_bytes"].as_u64() >= Some(bytes.len() as u64), j)
    })
    .await;
    assert!(thaw(&c, &["--job", "r", "evict"]).contains("evicted, ended"));

    let j = listed(&c, "r").expect("an ended job stays listed");
    assert_eq!((j["state"].as_str(), j["end_reason"].as_str()), (Some("ended"), Some("evicted")), "{j}");
    assert_eq!((j["blocks"].as_u64(), j["blocks_migrated"].as_u64()), (Some(3), Some(3)), "{j}");
    assert_eq!(j["bytes_migrated"].as_u64(), Some(bytes.len() as u64), "{j}");
    assert_eq!(j["read_bytes_from_memory"].as_u64(), Some(bytes.len() as u64), "{j}");
    assert!(j["ended_ms"].as_u64().unwrap() > 0, "{j}");
    let text = thaw(&c, &["jobs"]);
    assert!(text.contains("no jobs running") && text.contains("ended lately"), "{text}");
    let row = text.lines().find(|l| l.starts_with("r ")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("evicted") && row.contains("2.4 MiB"), "{text}");

    // Each migration's event names the job it was for.
    let lines = until(Duration::from_secs(5), || {
        let lines = thaw(&c, &["events", "--json"]);
        (lines.lines().count() == 3, lines)
    })
    .await;
    for l in lines.lines() {
        let e: Value = serde_json::from_str(l).unwrap();
        assert_eq!(e["jobs"], serde_json::json!(["r"]), "{e}");
    }
    assert!(thaw(&c, &["events"]).lines().all(|l| l.contains("job r ")), "{}", thaw(&c, &["events"]));

    // A new job of that id replaces the ended one in the list.
    thaw(&c, &["--job", "r", "migrate", "/in"]);
    let j = listed(&c, "r").unwrap();
    assert_eq!(j["state"], "running", "{j}");
}

/// `thaw --job J fs cat PATH` on `host` ("" for a host no worker is on: the
/// blocks are streamed), with its bytes.
fn cat_as(c: &Cluster, job: &str, host: &str, path: &str) -> Vec<u8> {
    let mut cmd = Command::new(BIN);
    cmd.args(["--master", c.master_addr(), "--job", job, "fs", "cat", path]);
    if !host.is_empty() {
        cmd.env("THAW_HOST", host);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// Job `id`'s counters once the workers' heartbeats carry `read` bytes of
/// its reads, after `thaw --job id evict` ended it.
async fn ended_reads(c: &Cluster, id: &str, read: u64) -> (u64, u64) {
    until(Duration::from_secs(10), || {
        let j = listed(c, id).unwrap();
        (j["read_bytes"].as_u64() >= Some(read), j)
    })
    .await;
    // A heartbeat more: nothing else is still on its way.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(thaw(c, &["--job", id, "evict"]).contains("evicted"));
    let j = listed(c, id).unwrap();
    assert_eq!(j["state"], "ended", "{j}");
    (j["read_bytes"].as_u64().unwrap(), j["read_bytes_from_memory"].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_migrated_inputs_count_as_from_memory_remote_or_short_circuit_and_cold_reads_do_not() {
    let c = start(ClusterOptions::workers(1)).await;
    let len = 2_500_000u64;
    for (job, host) in [("remote", ""), ("local", "h0")] {
        let bytes = cold_file(&c, &format!("/{job}/f"), len as usize, 7);
        thaw(&c, &["--job", job, "migrate", "--wait", &format!("/{job}")]);
        assert_eq!(cat_as(&c, job, host, &format!("/{job}/f")), bytes);
        let (read, from_memory) = ended_reads(&c, job, len).await;
        assert_eq!((read, from_memory), (len, len), "job {job}: read, of it from memory");
    }
    // A cold read by a job (its inputs elsewhere) takes nothing from memory,
    // streamed or filled on this host for a short-circuit read.
    for (job, host) in [("cold-remote", ""), ("cold-local", "h0")] {
        cold_file(&c, &format!("/{job}/in"), 1000, 1);
        cold_file(&c, &format!("/{job}/f"), len as usize, 8);
        thaw(&c, &["--job", job, "migrate", "--wait", &format!("/{job}/in")]);
        cat_as(&c, job, host, &format!("/{job}/f"));
        let (read, from_memory) = ended_reads(&c, job, len).await;
        assert_eq!((read, from_memory), (len, 0), "job {job}: read, of it from memory");
    }
}

/// A ranged read streams its bytes from the under-store and leaves a fill of
/// the whole block behind it. That fill was booked as made for a read still to
/// come, so the next read of the block (a job that found it in memory, its
/// migration done already) counted as a cold read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_filled_behind_a_ranged_read_is_read_from_memory_by_the_next_job() {
    let c = start(ClusterOptions::workers(1)).await;
    let len = 1u64 << 20;
    let bytes = cold_file(&c, "/peek/f", len as usize, 9);
    let client = c.remote_client();
    let mut r = client.open("/peek/f").await.unwrap();
    let mut buf = vec![0u8; 4096];
    assert_eq!(r.read_at(1000, &mut buf).await.unwrap(), 4096);
    drop(r);
    until(Duration::from_secs(10), || {
        let v: Value = serde_json::from_str(&thaw(&c, &["fs", "ls", "--json", "/peek"])).unwrap();
        (v[0]["in_memory_bytes"].as_u64() == Some(len), v)
    })
    .await;
    thaw(&c, &["--job", "j", "migrate", "--wait", "/peek"]);
    assert_eq!(cat_as(&c, "j", "", "/peek/f"), bytes);
    let (read, from_memory) = ended_reads(&c, "j", len).await;
    assert_eq!((read, from_memory), (len, len), "read, of it from memory");
}

/// The workers count reads by job id for as long as they run: a new job of an
/// id used before showed its predecessor's reads as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_job_of_an_old_id_counts_only_its_own_reads() {
    let c = start(ClusterOptions::workers(1)).await;
    let len = 1_500_000u64;
    let bytes = cold_file(&c, "/again/f", len as usize, 4);
    for run in 0..2 {
        thaw(&c, &["--job", "again", "migrate", "--wait", "/again"]);
        // The earlier run's reads are on the workers' next heartbeat already.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let j = listed(&c, "again").unwrap();
        assert_eq!(
            (j["read_bytes"].as_u64(), j["read_bytes_from_memory"].as_u64()),
            (Some(0), Some(0)),
            "run {run}: {j}"
        );
        assert_eq!(cat_as(&c, "again", "", "/again/f"), bytes);
        let (read, from_memory) = ended_reads(&c, "again", len).await;
        assert_eq!((read, from_memory), (len, len), "run {run}: read, of it from memory");
    }
}

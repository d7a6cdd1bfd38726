//! Highly available masters (`thaw master --id N --peers ...`): a group of 3
//! on loopback, its leader killed (kill -9) while clients write, read and
//! migrate. No acknowledged write is lost, reads go on, jobs migrate again,
//! and the time from the kill to the next served request is measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use thaw_common::proto::EvictionMode;
use tokio::sync::Mutex;

/// Paths and bytes of the writes acknowledged so far.
type Acked = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

fn group(workers: usize) -> ClusterOptions {
    let mut o = ClusterOptions::workers(workers);
    o.masters = 3;
    o
}

async fn leader(c: &Cluster) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(l) = c.leader().await {
            return l;
        }
        assert!(Instant::now() < deadline, "no leader in 20 s\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client of one master only (no failover).
fn client_of(addr: &str) -> Client {
    Client::new(thaw_client::ClientConfig::from_env(Some(addr.to_string()))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_master_serves_and_the_others_point_to_it() {
    let c = start(group(1)).await;
    let l = leader(&c).await;
    let addrs = c.master_addrs();
    c.remote_client().write_all("/a", b"abc", opts(WriteType::CacheThrough)).await.unwrap();
    for (i, a) in addrs.iter().enumerate() {
        let r = client_of(a).stat("/a").await;
        if i == l {
            assert_eq!(r.unwrap().length, 3);
        } else {
            let e = r.unwrap_err();
            assert_eq!(e.kind, ErrorKind::Unavailable, "{e}");
            assert!(e.message.contains("not the leader") && e.message.contains(&addrs[l]), "{e}");
        }
    }
    // The leader reports the group; the followers catch up with its log.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = c.remote_client().cluster_status().await.unwrap().masters;
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(
            m.iter().filter(|m| m.leader).map(|m| m.address.clone()).collect::<Vec<_>>(),
            vec![addrs[l].clone()]
        );
        if m.iter().all(|m| m.behind == 0 && m.log_index > 0) {
            break;
        }
        assert!(Instant::now() < deadline, "followers never caught up: {m:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = std::process::Command::new(BIN).arg("status").env("THAW_MASTER", c.master_addr()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("masters (a group of 3") && text.contains("leader, log at"), "{text}");
    assert_eq!(text.matches("follower, up to date").count(), 2, "{text}");
}

/// Writes of every kind, reads, and a job, while the leader is killed; then
/// the killed master comes back, the second leader is killed too, and the
/// first one (caught up while it followed) serves everything acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_loses_no_acknowledged_write_and_reads_go_on() {
    let mut c = start(group(2)).await;
    let client = c.remote_client();
    let fixed = data(300_000, 7);
    client.write_all("/fixed", &fixed, opts(WriteType::CacheThrough)).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Acked = Arc::default();
    let kinds = [WriteType::CacheThrough, WriteType::MustCache, WriteType::Through, WriteType::AsyncThrough];
    let writer = {
        let (client, stop, acked) = (c.remote_client(), stop.clone(), acked.clone());
        tokio::spawn(async move {
            let (mut i, mut failed) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let path = format!("/w/{i}");
                let bytes = data(50_000 + (i as usize % 7) * 10_000, i);
                match client.write_all(&path, &bytes, opts(kinds[i as usize % kinds.len()])).await {
                    Ok(_) => acked.lock().await.push((path, bytes)),
                    Err(_) => failed += 1,
                }
                i += 1;
            }
            failed
        })
    };
    // Reads, each timed: the longest wait is the failover as a reader sees it.
    let reader = {
        let (client, stop, fixed) = (c.remote_client(), stop.clone(), fixed.clone());
        tokio::spawn(async move {
            let (mut ok, mut failed, mut longest) = (0u64, Vec::new(), Duration::ZERO);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                match client.read_all("/fixed").await {
                    Ok(b) => {
                        assert_eq!(b, fixed, "a read returned wrong bytes");
                        ok += 1;
                    }
                    Err(e) => failed.push(format!("after {:?}: {e}", t.elapsed())),
                }
                longest = longest.max(t.elapsed());
            }
            (ok, failed, longest)
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let first = leader(&c).await;
    let before = acked.lock().await.len();
    c.kill_master_n(first);
    let killed = Instant::now();
    // The next request served (any master but the dead one).
    client.stat("/fixed").await.unwrap();
    let failover = killed.elapsed();
    let second = leader(&c).await;
    assert_ne!(first, second);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during = acked.lock().await.len();
    assert!(during > before, "writes went on after the failover: {before} then {during}\n{}", c.logs());
    // The first leader comes back as a follower and catches up; the second
    // is killed: the first and the third must hold every acknowledged write.
    c.restart_master_n(first).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    c.kill_master_n(second);
    client.stat("/fixed").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    let failed_writes = writer.await.unwrap();
    let (reads_ok, reads_failed, longest_read) = reader.await.unwrap();
    let acked = acked.lock().await.clone();
    for (path, bytes) in &acked {
        let got = client.read_all(path).await.unwrap_or_else(|e| panic!("{path}: {e}\n{}", c.logs()));
        assert!(got == *bytes, "{path}: other bytes after the failovers");
    }
    let listed = client.list("/w").await.unwrap().len();
    assert!(listed >= acked.len(), "{listed} listed, {} acknowledged", acked.len());
    eprintln!(
        "failover: first request served {failover:?} after the kill; {} writes acknowledged, {failed_writes} failed; \
         {reads_ok} reads ok, {} failed, longest {longest_read:?}",
        acked.len(),
        reads_failed.len()
    );
    assert!(reads_failed.is_empty(), "reads failed during failovers: {reads_failed:?}\n{}", c.logs());
}

/// The leader is killed while a job's blocks are on their way into memory
/// (under-store reads at 4 MiB/s): migration state is soft, so the new
/// leader knows no job; the job asks again and every block gets there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_migrates_again_after_the_leader_is_killed_mid_migration() {
    let mut o = group(2);
    for w in &mut o.workers {
        w.device_model = Some("ufs=4MiB/s".into());
    }
    let mut c = start(o).await;
    let a = cold_file(&c, "/in/a", 6_000_000, 1);
    let b = cold_file(&c, "/in/b", 2_000_000, 2);
    let client = c.remote_client().with_job("q1");
    let j = client.migrate("q1", &["/in".to_string()], EvictionMode::Explicit, None).await.unwrap();
    assert_eq!(j.blocks, 8, "{j:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let partial = job(&client, "q1").await.unwrap();
    assert!(partial.blocks_in_memory < 8, "the migration was over before the kill: {partial:?}");
    let l = leader(&c).await;
    c.kill_master_n(l);
    client.migrate("q1", &["/in".to_string()], EvictionMode::Explicit, None).await.unwrap();
    wait_in_memory(&client, "q1").await;
    for (p, want) in [("/in/a", &a), ("/in/b", &b)] {
        let mut r = client.open(p).await.unwrap();
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        assert_eq!(sha(&got), sha(want));
        assert_eq!(r.stats().under_store, 0, "{p} read from memory");
    }
}

/// A secured group over TLS: the masters authenticate to each other with
/// the cluster secret and trust the cluster's CA; a failover works the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secured_group_over_tls_fails_over_too() {
    let mut o = group(1);
    o.secure = true;
    o.tls = true;
    let mut c = start(o).await;
    let client = c.remote_client();
    client.write_all("/s", b"secret bytes", opts(WriteType::CacheThrough)).await.unwrap();
    let l = leader(&c).await;
    c.kill_master_n(l);
    assert_eq!(client.read_all("/s").await.unwrap(), b"secret bytes");
    client.write_all("/t", b"more", opts(WriteType::MustCache)).await.unwrap();
    assert_eq!(client.read_all("/t").await.unwrap(), b"more");
    // Raft's port is the master's: nobody but a master (a superuser) speaks it.
    let ca = thaw_common::tls::ClientTls::load(&c.certs.as_ref().unwrap().ca).unwrap();
    let addr = &c.master_addrs()[(l + 1) % 3];
    let ch = thaw_common::auth::channel(addr, Some(&ca)).unwrap();
    let mut raft = thaw_common::proto::master_raft_client::MasterRaftClient::new(ch);
    let msg = thaw_common::proto::RaftMessage { kind: thaw_common::proto::RaftKind::Vote as i32, body: b"{}".to_vec() };
    let e = raft.raft(msg).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
}

/// Every master killed at once, then started again: the group comes back
/// with every acknowledged change, renames and deletes included (the Raft
/// log is durable before an answer, and so is what was applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_master_killed_at_once_comes_back_with_every_acknowledged_change() {
    let mut c = start(group(1)).await;
    let client = c.remote_client();
    let mut want = Vec::new();
    for i in 0..40u64 {
        let bytes = data(1000 + i as usize, i);
        let wt = if i % 2 == 0 { WriteType::CacheThrough } else { WriteType::MustCache };
        client.write_all(&format!("/d{}/f{i}", i % 4), &bytes, opts(wt)).await.unwrap();
        want.push((format!("/d{}/f{i}", i % 4), bytes));
    }
    client.rename("/d0", "/renamed").await.unwrap();
    client.delete("/d1", true).await.unwrap();
    for i in 0..3 {
        c.kill_master_n(i);
    }
    for i in 0..3 {
        c.respawn_master_n(i).unwrap();
    }
    c.wait_for_workers(1, Duration::from_secs(30)).await.unwrap();
    for (path, bytes) in &want {
        let path = path.replace("/d0/", "/renamed/");
        match client.read_all(&path).await {
            Ok(got) => {
                assert!(!path.starts_with("/d1/"), "{path} came back after its delete");
                assert!(got == *bytes, "{path}: other bytes");
            }
            Err(e) => {
                assert!(path.starts_with("/d1/") && e.kind == ErrorKind::NotFound, "{path}: {e}\n{}", c.logs());
            }
        }
    }
    assert!(client.stat("/d0").await.is_err());
}

/// A killed master is no follower: the new leader shows it unreachable with
/// the time since it was last heard from (`thaw status` and `--json`), while
/// the live follower is reachable and heard from moments ago.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_is_shown_unreachable_with_when_it_was_last_heard() {
    let mut c = start(group(1)).await;
    let old = leader(&c).await;
    c.remote_client().write_all("/a", b"abc", opts(WriteType::CacheThrough)).await.unwrap();
    c.kill_master_n(old);
    let killed = Instant::now();
    let new = leader(&c).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let asked = killed.elapsed();
    let m = client_of(&c.master_addrs()[new]).cluster_status().await.unwrap().masters;
    assert_eq!(m.len(), 3, "{m:?}");
    let dead = &m[old];
    assert!(!dead.leader && !dead.reachable, "{m:?}");
    let heard = dead.last_heard_ms_ago.expect("the new leader heard from the old one before the kill");
    assert!(heard >= asked.as_millis() as u64, "last heard {heard} ms ago, but it was killed {asked:?} ago");
    let live = m.iter().enumerate().find(|(i, _)| *i != old && *i != new).unwrap().1;
    assert!(live.reachable && live.last_heard_ms_ago.is_some_and(|ms| ms < 2000), "{m:?}");
    assert!(m[new].leader && m[new].reachable, "{m:?}");

    let status = |json: bool| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg("status").env("THAW_MASTER", c.master_addr());
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = status(false);
    let line = text.lines().find(|l| l.contains(&c.master_addrs()[old])).unwrap();
    assert!(line.contains("unreachable, last heard") && line.ends_with(" s ago"), "{text}");
    assert!(!line.contains("follower"), "{text}");
    assert_eq!(text.matches("follower, up to date, heard").count(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
    let masters = v["masters"].as_array().unwrap();
    assert_eq!(masters[old]["reachable"], false, "{v}");
    assert!(masters[old]["last_heard_ms_ago"].as_u64().is_some_and(|ms| ms >= 1500), "{v}");
    assert_eq!(masters[new]["reachable"], true, "{v}");
}

//! How soon a dead worker is declared dead, on real processes: a killed one
//! (kill -9) long before its heartbeat timeout, whatever it was doing (idle,
//! or writing a checkpoint), and a stopped one (SIGSTOP: alive, silent) not
//! before it (`crates/thaw-master/src/liveness.rs`).

use std::time::{Duration, Instant};

use crate::common::*;
use thaw_common::proto::Persistence;

/// Heartbeat timeout of these tests: far longer than any wait below, so a
/// death seen within them was seen by the probe.
const TIMEOUT_MS: u64 = 30_000;

fn one_copy(write_type: WriteType) -> WriteOptions {
    WriteOptions { write_type, replication: 1, ..Default::default() }
}

fn signal(c: &Cluster, i: usize, sig: i32) {
    let pid = c.worker_pid(i).expect("the worker runs") as i32;
    // SAFETY: signalling a child of this test.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

async fn alive(client: &Client, addr: &str) -> bool {
    let status = client.cluster_status().await.unwrap();
    status.workers.iter().any(|w| w.alive && w.data_address == addr)
}

/// Three workers, a 30 s heartbeat timeout (200 ms heartbeats). Worker 0 is
/// killed while it writes the checkpoint of a 6 MiB async-through file (at
/// 1 MiB/s: six seconds of it), worker 1 is killed idle, worker 2 is stopped
/// at the same moment. Both killed workers' files are lost within 5 s (the
/// probe: a silent worker whose data port refuses is dead); the stopped
/// worker, as silent as they are and for longer, is never declared dead, and
/// its file reads back whole once it goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workers_are_declared_dead_before_their_timeout_a_stopped_one_is_not() {
    let mut o = ClusterOptions { worker_timeout_ms: TIMEOUT_MS, ..ClusterOptions::workers(3) };
    o.workers[0].extra_args.extend(["--checkpoint-bandwidth".to_string(), "1MiB".to_string()]);
    let mut c = start(o).await;
    let client = c.remote_client();
    c.client("h0", "r0")
        .write_all("/dead/checkpointing", &data(6 << 20, 70), one_copy(WriteType::AsyncThrough))
        .await
        .unwrap();
    c.client("h1", "r1").write_all("/dead/idle", &data(1 << 20, 71), one_copy(WriteType::MustCache)).await.unwrap();
    let kept = data(1 << 20, 72);
    c.client("h2", "r0").write_all("/dead/stopped", &kept, one_copy(WriteType::MustCache)).await.unwrap();
    let persisting = Persistence::Persisting as i32;
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.stat("/dead/checkpointing").await.unwrap().persistence != persisting {
        assert!(Instant::now() < deadline, "worker 0 never started the checkpoint\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal(&c, 2, libc::SIGSTOP);
    let killed = Instant::now();
    c.kill_worker(0);
    c.kill_worker(1);
    for path in ["/dead/checkpointing", "/dead/idle"] {
        while !client.stat(path).await.unwrap().lost {
            let waited = killed.elapsed();
            assert!(waited < Duration::from_secs(5), "{path} not lost {waited:?} after the kill\n{}", c.logs());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let seen = killed.elapsed();
    assert!(!alive(&client, c.worker_addr(0)).await && !alive(&client, c.worker_addr(1)).await);
    // The stopped worker, silent for 3 s more (ten probe rounds), is alive.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stopped_alive = alive(&client, c.worker_addr(2)).await;
    signal(&c, 2, libc::SIGCONT);
    assert!(stopped_alive, "a stopped worker was declared dead before its timeout\n{}", c.logs());
    assert!(!client.stat("/dead/stopped").await.unwrap().lost);
    assert_eq!(sha(&client.read_all("/dead/stopped").await.unwrap()), sha(&kept));
    eprintln!("both killed workers' files lost {seen:?} after the kill");
}

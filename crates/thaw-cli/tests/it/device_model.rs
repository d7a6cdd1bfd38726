//! The emulated device model on a live multi-process cluster: cold reads pay the
//! modelled under-store bandwidth, DISK reads of a modelled disk go through the
//! worker (no short-circuit), and `thaw interfere` shows in `thaw status`.
//! Only lower bounds on time are asserted: a slow machine cannot make them fail.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;
use thaw_client::ClientConfig;

const MIB: usize = 1 << 20;
/// Worker 0's model: a slow under-store and a slow disk.
const UFS_BW: usize = 8 * MIB;
const DISK_BW: usize = 16 * MIB;

fn thaw(c: &Cluster, args: &[&str]) -> Output {
    Command::new(BIN).args(args).env("THAW_MASTER", c.master_addr()).output().expect("thaw runs")
}

fn ok(c: &Cluster, args: &[&str]) -> String {
    let out = thaw(c, args);
    assert!(out.status.success(), "thaw {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn fails(c: &Cluster, args: &[&str]) -> String {
    let out = thaw(c, args);
    assert!(!out.status.success(), "thaw {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

/// Worker `i`'s entry in `thaw status --json`.
fn worker_status(c: &Cluster, i: usize) -> Value {
    let status: Value = serde_json::from_str(&ok(c, &["status", "--json"])).unwrap();
    let addr = c.worker_addr(i);
    status["workers"].as_array().unwrap().iter().find(|w| w["address"] == addr).expect("worker listed").clone()
}

fn device<'a>(worker: &'a Value, name: &str) -> Option<&'a Value> {
    worker["devices"].as_array().unwrap().iter().find(|d| d["device"] == name)
}

/// Waits (through heartbeats) until worker `i`'s `name` device satisfies `want`.
async fn wait_device(c: &Cluster, i: usize, name: &str, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let w = worker_status(c, i);
        if let Some(d) = device(&w, name).filter(|d| want(d)) {
            return d.clone();
        }
        assert!(Instant::now() < deadline, "worker {i}'s {name} device never matched: {w:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn read_timed(client: &Client, path: &str, expect: &[u8]) -> (Duration, thaw_client::ReadStats) {
    let t0 = Instant::now();
    let mut r = client.open(path).await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    let took = t0.elapsed();
    assert_eq!(sha(&got), sha(expect), "{path}");
    (took, r.stats())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modelled_devices_pace_reads_and_interference_shows_in_status() {
    let mut options = ClusterOptions::workers(2);
    options.workers[0].device_model = Some("ufs=8MiB/s,disk=16MiB/s,penalty=0.5".into());
    let c = start(options).await;
    let ufs = wait_device(&c, 0, "ufs", |d| d["bandwidth"] == UFS_BW && d["penalty"] == 0.5).await;
    assert_eq!(ufs["interference_streams"], 0);
    assert!(device(&worker_status(&c, 1), "ufs").is_none(), "worker 1 has no model");

    // A cold file, read by a client beside worker 0: filled from the under-store
    // into worker 0's memory block by block, through its modelled under-store.
    let cold = data(6 * MIB, 1);
    std::fs::create_dir_all(c.ufs.join("cold")).unwrap();
    std::fs::write(c.ufs.join("cold/a.bin"), &cold).unwrap();
    let beside = c.client("h0", "r0");
    let (took, stats) = read_timed(&beside, "/cold/a.bin", &cold).await;
    let floor = Duration::from_secs_f64(cold.len() as f64 / UFS_BW as f64);
    assert!(took >= floor, "cold read of {} bytes took {took:?}, under {floor:?}", cold.len());
    assert_eq!(stats.under_store, cold.len() as u64, "{stats:?}");

    // Streamed through without caching: the read-through stream is paced too.
    let streamed = data(4 * MIB, 2);
    std::fs::write(c.ufs.join("cold/b.bin"), &streamed).unwrap();
    let mut cfg = ClientConfig::from_env(Some(c.master_addr().to_string()));
    cfg.position.host = "h0".into();
    cfg.short_circuit = false;
    cfg.cache_on_read = None;
    let streaming = Client::new(cfg).unwrap();
    let (took, stats) = read_timed(&streaming, "/cold/b.bin", &streamed).await;
    let floor = Duration::from_secs_f64(streamed.len() as f64 / UFS_BW as f64);
    assert!(took >= floor, "streamed read took {took:?}, under {floor:?}");
    assert_eq!(stats.under_store, streamed.len() as u64, "{stats:?}");
    wait_device(&c, 0, "ufs", |d| d["bytes_read"].as_u64() >= Some((cold.len() + streamed.len()) as u64)).await;

    // A DISK block of a modelled disk is not read by short-circuit (that would
    // bypass the model): the client streams it from the same worker, paced.
    let on_disk = data(4 * MIB, 3);
    let one_disk = WriteOptions { replication: 1, ..opts(WriteType::ReplicatedDisk) };
    beside.write_all("/disk/c.bin", &on_disk, one_disk).await.unwrap();
    let (st, _) = beside.stat_blocks("/disk/c.bin", true).await.unwrap();
    assert!(st.blocks.iter().all(|b| b.replicas.len() == 1 && b.replicas[0].data_address == c.worker_addr(0)));
    let (took, stats) = read_timed(&beside, "/disk/c.bin", &on_disk).await;
    assert_eq!((stats.short_circuit, stats.remote_disk, stats.failovers), (0, on_disk.len() as u64, 0), "{stats:?}");
    let floor = Duration::from_secs_f64(on_disk.len() as f64 / DISK_BW as f64);
    assert!(took >= floor, "DISK read took {took:?}, under {floor:?}");

    // Interference: on shows in the status, off clears it.
    let id = worker_status(&c, 0)["id"].as_u64().unwrap().to_string();
    let out = ok(&c, &["interfere", "--worker", &id, "--device", "ufs", "on", "--streams", "2"]);
    assert!(out.contains("ufs:") && out.contains("interference 2"), "{out}");
    wait_device(&c, 0, "ufs", |d| d["interference_streams"] == 2).await;
    let human = ok(&c, &["status"]);
    assert!(human.contains("interference 2"), "{human}");
    // With the synthetic readers open, every slice of a real read costs at least
    // (1 + 0.5 * 2) times its bytes' time alone.
    let more = data(2 * MIB, 4);
    std::fs::write(c.ufs.join("cold/d.bin"), &more).unwrap();
    let (took, _) = read_timed(&beside, "/cold/d.bin", &more).await;
    let floor = Duration::from_secs_f64(more.len() as f64 * 2.0 / UFS_BW as f64);
    assert!(took >= floor, "read beside 2 synthetic readers took {took:?}, under {floor:?}");
    let out = ok(&c, &["interfere", "--worker", &id, "--device", "ufs", "off", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(device(&v, "ufs").unwrap()["interference_streams"], 0, "{v:#}");
    wait_device(&c, 0, "ufs", |d| d["interference_streams"] == 0).await;

    // Mistakes are clear errors.
    let e = fails(&c, &["interfere", "--worker", "999", "--device", "ufs", "on"]);
    assert!(e.contains("no worker with id 999"), "{e}");
    let id1 = worker_status(&c, 1)["id"].as_u64().unwrap().to_string();
    let e = fails(&c, &["interfere", "--worker", &id1, "--device", "disk", "on"]);
    assert!(e.contains("has no disk device model"), "{e}");
    let e = fails(&c, &["interfere", "--worker", &id, "--device", "tape", "on"]);
    assert!(e.contains("tape"), "{e}");
}

#[test]
fn bad_device_models_are_refused_at_start() {
    let out = Command::new(BIN)
        .args(["worker", "--master", "127.0.0.1:1", "--mem-dir", "/nonexistent", "--device-model", "disk=40MiB"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("needs a /s suffix") && e.lines().count() == 1, "{e}");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["local", "--ufs", dir.path().to_str().unwrap(), "--port", "0"])
        .args(["--state-dir", dir.path().join("state").to_str().unwrap()])
        .args(["--worker-device-model", "3:ufs=1MiB/s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--worker-device-model 3") && e.contains("1 worker"), "{e}");
    // Workers are numbered from 1, as `thaw status` shows them: 0 names none.
    let out = Command::new(BIN)
        .args(["local", "--ufs", dir.path().to_str().unwrap(), "--port", "0"])
        .args(["--state-dir", dir.path().join("state").to_str().unwrap()])
        .args(["--worker-device-model", "0:ufs=1MiB/s", "--exit-with-stdin"])
        // A cluster that starts anyway stops at once (stdin is empty) rather than hang the test.
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--worker-device-model 0") && e.contains("numbered 1 to 1"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modelled_devices_pace_writes_to_them_without_counting_them_as_reads() {
    let mut options = ClusterOptions::workers(1);
    options.workers[0].device_model = Some("ufs=8MiB/s,disk=16MiB/s".into());
    let c = start(options).await;
    wait_device(&c, 0, "ufs", |d| d["bandwidth"] == UFS_BW).await;
    let beside = c.client("h0", "r0");
    // To the under-store (streamed, and by short-circuit with cache-through).
    for (i, wt) in [WriteType::Through, WriteType::CacheThrough].into_iter().enumerate() {
        let bytes = data(2 * MIB, 10 + i as u64);
        let t0 = Instant::now();
        beside.write_all(&format!("/w/{i}"), &bytes, opts(wt)).await.unwrap();
        let floor = Duration::from_secs_f64(bytes.len() as f64 / UFS_BW as f64);
        assert!(t0.elapsed() >= floor, "{wt:?} write took {:?}, under {floor:?}", t0.elapsed());
        assert_eq!(std::fs::read(c.ufs.join(format!("w/{i}"))).unwrap(), bytes);
    }
    // To the DISK tier: the short-circuit write is refused, the stream paced.
    let bytes = data(4 * MIB, 12);
    let t0 = Instant::now();
    let one_disk = WriteOptions { replication: 1, ..opts(WriteType::ReplicatedDisk) };
    beside.write_all("/w/disk", &bytes, one_disk).await.unwrap();
    let floor = Duration::from_secs_f64(bytes.len() as f64 / DISK_BW as f64);
    assert!(t0.elapsed() >= floor, "DISK write took {:?}, under {floor:?}", t0.elapsed());
    let w = worker_status(&c, 0);
    assert_eq!(device(&w, "ufs").unwrap()["bytes_read"], 0, "{w:#}");
    assert_eq!(device(&w, "disk").unwrap()["bytes_read"], 0, "{w:#}");
}

//! A recursive delete of a large tree (`thaw_master::namespace::reaper`): the
//! tree is gone at once and its name free, its journal records go in batches
//! behind it while the master serves others, and a master killed midway
//! finishes the removal at its next start, touching nothing else.

use std::time::{Duration, Instant};

use crate::common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// 20 directories of 19 empty files under `top`: 401 inodes with `top`.
async fn fill(client: &Client, top: &str) {
    let tasks: Vec<_> = (0..16)
        .map(|k| {
            let (client, top) = (client.clone(), top.to_string());
            tokio::spawn(async move {
                for i in (k..380).step_by(16) {
                    let path = format!("{top}/d{:02}/f{:02}", i / 19, i % 19);
                    client.write_all(&path, b"", opts(WriteType::MustCache)).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// `thaw_master_inodes_being_deleted` from the master's /metrics.
async fn being_deleted(addr: &str) -> u64 {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("metrics port answers");
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    let line = body.lines().find(|l| l.starts_with("thaw_master_inodes_being_deleted ")).expect("the gauge");
    line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64
}

async fn until_deleted(addr: &str, c: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while being_deleted(addr).await > 0 {
        assert!(Instant::now() < deadline, "the records were not removed in 60 s\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `field=N` of the master log's last "namespace loaded" line.
fn loaded(c: &Cluster, field: &str) -> u64 {
    let log = std::fs::read_to_string(c.root().join("master.log")).unwrap();
    let line = log.lines().rfind(|l| l.contains("master namespace loaded from journal")).expect("loaded line");
    let at = line.find(&format!(" {field}=")).unwrap_or_else(|| panic!("{field} in {line}")) + field.len() + 2;
    line[at..].split(|ch: char| !ch.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_tree_goes_at_once_and_its_records_in_batches_also_after_a_kill_midway() {
    let mut o = ClusterOptions::workers(1);
    // One record per commit: the removal outlasts the calls below.
    o.master_args = ["--delete-batch", "1", "--metrics-port", "0"].map(String::from).to_vec();
    let mut c = start(o).await;
    let client = c.remote_client();
    let kept = data(5000, 3);
    client.write_all("/keep/a", &kept, WriteOptions::default()).await.unwrap();
    fill(&client, "/a").await;
    fill(&client, "/b").await;
    let metrics = c.master_metrics_addr().unwrap().to_string();

    client.delete("/a", true).await.unwrap();
    // Gone at once, its records still being removed while the master answers.
    assert_eq!(client.stat("/a").await.unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(client.stat("/a/d03/f04").await.unwrap_err().kind, ErrorKind::NotFound);
    let left = being_deleted(&metrics).await;
    assert!(left > 0 && left <= 401, "{left} inodes being deleted");
    // The name is free: a new tree takes it while the old one's records go.
    client.write_all("/a/d03/f04", b"new", WriteOptions::default()).await.unwrap();
    let names: Vec<String> = client.list("/").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, ["a", "b", "keep"]);
    until_deleted(&metrics, &c).await;
    assert_eq!(client.read_all("/a/d03/f04").await.unwrap(), b"new");

    // kill -9 while /b's records are being removed: the next start finds the
    // rest under the reaper and finishes, and nothing else is lost.
    client.delete("/b", true).await.unwrap();
    c.kill_master();
    c.restart_master().await.unwrap();
    let left = loaded(&c, "deleting");
    assert!(left > 0 && left <= 401, "{left} inodes left to delete at the start\n{}", c.logs());
    let metrics = c.master_metrics_addr().unwrap().to_string();
    until_deleted(&metrics, &c).await;
    let client = c.remote_client();
    assert_eq!(client.stat("/b").await.unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(sha(&client.read_all("/keep/a").await.unwrap()), sha(&kept));
    // The journal holds exactly what is left: the root, /keep, /keep/a, /a, /a/d03, /a/d03/f04.
    c.restart_master().await.unwrap();
    assert_eq!((loaded(&c, "inodes"), loaded(&c, "deleting")), (6, 0), "{}", c.logs());
    assert_eq!(client.read_all("/a/d03/f04").await.unwrap(), b"new");
}

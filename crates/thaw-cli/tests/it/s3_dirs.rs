//! Directories on an S3 under-store, through the `thaw` CLI as a user types it,
//! against two S3 implementations (SeaweedFS: a filer behind S3, where a
//! directory is an entry of its own; moto: a plain key store): a directory
//! removed or renamed stays gone, and a renamed directory's files keep what
//! Thaw knows of them (issue 28, item 2).

use crate::common::*;

use std::process::{Command, Output};
use std::time::Duration;

use thaw_testkit::s3::{S3Impl, S3Server};

async fn s3_cluster(kind: S3Impl, prefix: &str) -> (S3Server, Cluster) {
    let s3 = S3Server::start_impl(kind, &["thaw"]).await.unwrap();
    let options =
        ClusterOptions { ufs_uri: Some(s3.uri("thaw", prefix)), env: S3Server::env(), ..ClusterOptions::workers(1) };
    let c = start(options).await;
    (s3, c)
}

fn thaw(c: &Cluster, args: &[&str]) -> Output {
    Command::new(BIN).args(args).env("THAW_MASTER", c.master_addr()).env("THAW_HOST", "h0").output().expect("thaw runs")
}

fn ok(c: &Cluster, args: &[&str]) -> String {
    let out = thaw(c, args);
    assert!(out.status.success(), "thaw {args:?} failed: {}\n{}", String::from_utf8_lossy(&out.stderr), c.logs());
    String::from_utf8(out.stdout).unwrap()
}

fn fails(c: &Cluster, args: &[&str]) -> String {
    let out = thaw(c, args);
    assert!(!out.status.success(), "thaw {args:?} should fail: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr).unwrap()
}

/// `thaw fs ls PATH --json`: name -> entry.
fn ls(c: &Cluster, p: &str) -> std::collections::BTreeMap<String, serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&ok(c, &["fs", "ls", p, "--json"])).unwrap();
    v.as_array().unwrap().iter().map(|e| (e["name"].as_str().unwrap().to_string(), e.clone())).collect()
}

/// Names the bucket itself lists under `p` (what any other S3 tool sees).
async fn bucket_names(bucket: &thaw_ufs::UnderStore, p: &str) -> Vec<String> {
    bucket.list(p).await.unwrap().into_iter().map(|(n, _)| n).collect()
}

async fn a_removed_directory_stays_removed(kind: S3Impl) {
    let (s3, c) = s3_cluster(kind, "rm").await;
    let bucket = s3.under_store("thaw", "rm").unwrap();
    let local = c.root().join("x");
    std::fs::write(&local, b"some bytes").unwrap();
    let x = local.to_str().unwrap();
    // A directory with a marker (mkdir), one made by a write under it, and one
    // that only another tool's key implies.
    ok(&c, &["fs", "mkdir", "/r1"]);
    ok(&c, &["fs", "mkdir", "-p", "/r1/sub"]);
    ok(&c, &["fs", "put", x, "/r1/sub/f"]);
    ok(&c, &["fs", "put", x, "/r1/g", "--write-type", "through"]);
    ufs_put(&bucket, "/r1/other/deep/h", b"from another tool").await;
    assert!(ls(&c, "/r1").contains_key("other"));

    ok(&c, &["fs", "rm", "-r", "/r1"]);
    assert!(!ls(&c, "/").contains_key("r1"), "{kind:?}: /r1 is back after rm -r\n{}", c.logs());
    assert_eq!(bucket_names(&bucket, "/").await, Vec::<String>::new(), "{kind:?}: the bucket keeps keys of /r1");
    assert!(bucket.stat("/r1").await.unwrap().is_none(), "{kind:?}: the bucket keeps the marker r1/");
    // Gone, so a second rm says so, as for any unknown path.
    let e = fails(&c, &["fs", "rm", "-r", "/r1"]);
    assert!(e.contains("no such file or directory: /r1"), "{kind:?}: {e}");
    // And the name is free for a file.
    ok(&c, &["fs", "put", x, "/r1"]);
    assert_eq!(ls(&c, "/")["r1"]["length"], 10, "{kind:?}: /r1 is not the file put there");
    assert_eq!(ufs_get(&bucket, "/r1").await, b"some bytes");
}

async fn a_renamed_directory_keeps_its_files_and_leaves_no_old_name(kind: S3Impl) {
    let (s3, c) = s3_cluster(kind, "mv").await;
    let bucket = s3.under_store("thaw", "mv").unwrap();
    let local = c.root().join("x");
    let bytes = data(300_000, 7);
    std::fs::write(&local, &bytes).unwrap();
    let x = local.to_str().unwrap();
    ok(&c, &["fs", "mkdir", "/d1"]);
    ok(&c, &["fs", "put", x, "/d1/cached", "--write-type", "cache-through"]);
    ok(&c, &["fs", "put", x, "/d1/through", "--write-type", "through"]);
    ok(&c, &["fs", "mkdir", "/d1/empty"]);
    let before = ls(&c, "/d1");
    assert_eq!(before["cached"]["in_memory_bytes"], bytes.len() as u64);
    // S3 has no rename: the objects are copied, and a copy has a new
    // Last-Modified (whole seconds): let one pass so that it differs.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    ok(&c, &["fs", "mv", "/d1", "/d2"]);
    let root = ls(&c, "/");
    assert!(!root.contains_key("d1") && root.contains_key("d2"), "{kind:?}: {:?}", root.keys());
    assert_eq!(bucket_names(&bucket, "/").await, ["d2"], "{kind:?}: the old name stays in the bucket");
    assert!(bucket.stat("/d1").await.unwrap().is_none(), "{kind:?}: the bucket keeps the marker d1/");
    let e = fails(&c, &["fs", "stat", "/d1"]);
    assert!(e.contains("no such file or directory"), "{kind:?}: {e}");
    // The moved files are the same files: same ids, owner, mode, and the
    // cache-through one still in memory (listed twice: the second listing
    // compares with the bucket's new Last-Modified).
    for _ in 0..2 {
        let after = ls(&c, "/d2");
        assert_eq!(after.keys().collect::<Vec<_>>(), ["cached", "empty", "through"], "{kind:?}");
        for name in ["cached", "through", "empty"] {
            for field in ["file_id", "owner", "group", "mode", "in_memory_bytes", "persisted"] {
                assert_eq!(after[name][field], before[name][field], "{kind:?}: /d2/{name} {field} changed\n{after:?}");
            }
        }
    }
    assert_eq!(sha(&ufs_get(&bucket, "/d2/through").await), sha(&bytes));
    assert_eq!(sha(&ufs_get(&bucket, "/d2/cached").await), sha(&bytes));
    // The old name is free again.
    ok(&c, &["fs", "put", x, "/d1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_directory_stays_removed_on_seaweedfs() {
    a_removed_directory_stays_removed(S3Impl::Seaweed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_directory_stays_removed_on_moto() {
    a_removed_directory_stays_removed(S3Impl::Moto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_directory_keeps_its_files_and_leaves_no_old_name_on_seaweedfs() {
    a_renamed_directory_keeps_its_files_and_leaves_no_old_name(S3Impl::Seaweed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_directory_keeps_its_files_and_leaves_no_old_name_on_moto() {
    a_renamed_directory_keeps_its_files_and_leaves_no_old_name(S3Impl::Moto).await;
}

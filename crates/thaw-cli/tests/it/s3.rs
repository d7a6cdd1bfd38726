//! The under-store as an S3 bucket on a real S3 server (SeaweedFS on loopback):
//! read-through, writes that persist, migrations, checkpoints, renames and
//! deletes with S3's semantics, paged listings, and the errors of a wrong bucket,
//! wrong keys and an endpoint that is down.

use crate::common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use thaw_common::proto::EvictionMode;
use thaw_testkit::s3::SeaweedS3;

fn s3_cluster(s3: &SeaweedS3, prefix: &str, n: usize) -> ClusterOptions {
    ClusterOptions { ufs_uri: Some(s3.uri("thaw", prefix)), env: SeaweedS3::env(), ..ClusterOptions::workers(n) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_bucket_serves_reads_writes_migrations_and_checkpoints() {
    let s3 = SeaweedS3::start(&["thaw"]).await.unwrap();
    let bucket = s3.under_store("thaw", "warehouse").unwrap();
    let c = start(s3_cluster(&s3, "warehouse", 2)).await;
    let bs = c.options.block_size as usize;
    let client = c.client("h0", "r0");

    // Cold objects put there by another tool are files in the namespace.
    let cold = data(3 * bs + 4321, 1);
    ufs_put(&bucket, "/events/day1.bin", &cold).await;
    let listed: Vec<String> = client.list("/events").await.unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(listed, vec!["/events/day1.bin"]);
    assert_eq!(client.stat("/events/day1.bin").await.unwrap().length, cold.len() as u64);
    let mut r = client.open("/events/day1.bin").await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&cold), "{}", c.logs());
    assert_eq!(r.stats().under_store, cold.len() as u64, "{:?}", r.stats());
    // Read again: from worker memory, where the first read cached it.
    let mut r = client.open("/events/day1.bin").await.unwrap();
    got.clear();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&cold));
    assert_eq!(r.stats().under_store, 0, "second read went to S3: {:?}", r.stats());

    // A job's inputs migrate from the bucket into memory before it reads.
    let input = data(2 * bs + 10, 2);
    ufs_put(&bucket, "/in/part-0", &input).await;
    let reader = c.remote_client().with_job("q1");
    let j = reader.migrate("q1", &["/in".to_string()], EvictionMode::Explicit, None).await.unwrap();
    assert_eq!(j.blocks, 3);
    assert_eq!(wait_in_memory(&reader, "q1").await.blocks_in_memory, 3);
    let mut r = reader.open("/in/part-0").await.unwrap();
    got.clear();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&input));
    assert_eq!((r.stats().remote_mem, r.stats().under_store), (input.len() as u64, 0), "{:?}", r.stats());

    // Writes that persist land in the bucket, whole, only when complete.
    for (i, wt) in [WriteType::Through, WriteType::CacheThrough].into_iter().enumerate() {
        let path = format!("/out/{}", wt.as_str_name());
        let bytes = data(2 * bs + 99, 10 + i as u64);
        let info = client.write_all(&path, &bytes, opts(wt)).await.unwrap();
        assert!(info.persisted);
        assert_eq!(sha(&ufs_get(&bucket, &path).await), sha(&bytes), "{path}");
    }
    // A memory write is persisted by a checkpoint (copied into the staging
    // area, then moved to its path: a copy and a delete on S3).
    let fast = data(bs + 5, 20);
    client
        .write_all("/out/async", &fast, WriteOptions { write_type: WriteType::AsyncThrough, ..Default::default() })
        .await
        .unwrap();
    let info = client.persist_wait("/out/async", Duration::from_secs(30)).await.unwrap();
    assert!(info.persisted, "{info:?}");
    assert_eq!(sha(&ufs_get(&bucket, "/out/async").await), sha(&fast));
    assert!(bucket.list("/").await.unwrap().iter().all(|(n, _)| !n.starts_with(".thaw")), "staging shows");

    // Rename: no rename in S3, so objects are copied, then the sources deleted.
    client.mkdir("/moved", false, false).await.unwrap();
    client.rename("/out/WRITE_TYPE_THROUGH", "/moved/one").await.unwrap();
    assert!(bucket.stat("/out/WRITE_TYPE_THROUGH").await.unwrap().is_none());
    assert_eq!(sha(&ufs_get(&bucket, "/moved/one").await), sha(&data(2 * bs + 99, 10)));
    client.rename("/out", "/out2").await.unwrap();
    assert!(bucket.stat("/out").await.unwrap().is_none(), "old prefix left behind");
    assert_eq!(sha(&ufs_get(&bucket, "/out2/async").await), sha(&fast));
    assert_eq!(sha(&client.read_all("/out2/WRITE_TYPE_CACHE_THROUGH").await.unwrap()), sha(&data(2 * bs + 99, 11)));
    // Delete: the objects go too.
    client.delete("/out2", true).await.unwrap();
    assert!(bucket.stat("/out2/async").await.unwrap().is_none());
    assert!(bucket.stat("/out2").await.unwrap().is_none());
    assert!(client.stat("/out2").await.is_err());
    // Path traversal never reaches a key outside the prefix.
    let e = client.read_all("/../escape").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_with_more_keys_than_one_s3_page_lists_whole() {
    let s3 = SeaweedS3::start(&["thaw"]).await.unwrap();
    let bucket = s3.under_store("thaw", "many").unwrap();
    // SeaweedFS answers at most 1,000 keys a page.
    const N: usize = 1_100;
    let puts = (0..N).map(|i| {
        let bucket = bucket.clone();
        async move { ufs_put(&bucket, &format!("/logs/k{i:05}"), format!("{i}").as_bytes()).await }
    });
    futures::stream::iter(puts).buffer_unordered(16).collect::<Vec<()>>().await;
    let c = start(s3_cluster(&s3, "many", 1)).await;
    let client = c.remote_client();
    let files = client.list("/logs").await.unwrap();
    assert_eq!(files.len(), N);
    assert_eq!(files.iter().filter(|f| f.length == format!("{}", N - 1).len() as u64).count(), 100);
    assert_eq!(client.read_all("/logs/k01099").await.unwrap(), b"1099");
}

/// `thaw master` on `uri`: its exit status and what it printed.
fn master_on(uri: &str, env: &[(String, String)]) -> (bool, String) {
    let journal = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["master", "--ufs", uri, "--port", "0", "--journal-dir"])
        .arg(journal.path())
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("thaw master --ufs {uri} neither failed nor served in 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_bucket_wrong_keys_or_a_dead_endpoint_stop_the_master_saying_which() {
    let mut s3 = SeaweedS3::start(&["thaw"]).await.unwrap();
    // Checked before the master says it listens: its one line of output is why.
    let one_line = |out: &str| {
        assert!(!out.contains("listening"), "the master said it listens before checking its bucket:\n{out}");
        assert_eq!(out.trim_end().lines().count(), 1, "one line expected:\n{out}");
        assert!(out.len() < 400, "{} characters:\n{out}", out.len());
    };
    let (ok, out) = master_on(&s3.uri("nosuchbucket", "x"), &SeaweedS3::env());
    assert!(!ok);
    assert!(out.contains("bucket \"nosuchbucket\" does not exist"), "{out}");
    one_line(&out);
    let wrong = vec![
        ("AWS_ACCESS_KEY_ID".to_string(), "thaw-test-key".to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), "not-the-secret".to_string()),
    ];
    let (ok, out) = master_on(&s3.uri("thaw", "x"), &wrong);
    assert!(!ok);
    // The server's code, the bucket and the settings to fix; no response dump.
    for says in ["access refused", "SignatureDoesNotMatch", "bucket \"thaw\"", "AWS_SECRET_ACCESS_KEY"] {
        assert!(out.contains(says), "no {says:?} in: {out}");
    }
    one_line(&out);
    let (ok, out) = master_on("s3://thaw/x?endpoint=127.0.0.1:1", &SeaweedS3::env());
    assert!(!ok);
    assert!(out.contains("http://"), "{out}");
    let uri = s3.uri("thaw", "x");
    s3.kill();
    let (ok, out) = master_on(&uri, &SeaweedS3::env());
    assert!(!ok);
    assert!(out.contains("does not answer"), "{out}");
    assert!(!out.contains("listening"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_own_keys_fail_never_registers_and_says_why() {
    let s3 = SeaweedS3::start(&["thaw"]).await.unwrap();
    let c = start(s3_cluster(&s3, "keys", 1)).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("worker.log");
    let mut worker = Command::new(BIN)
        .args(["worker", "--master", c.master_addr(), "--host", "wrong-keys", "--port", "0"])
        .arg("--mem-dir")
        .arg(dir.path().join("mem"))
        .env("AWS_ACCESS_KEY_ID", "thaw-test-key")
        .env("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let said = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("access refused") {
            break text;
        }
        assert!(Instant::now() < deadline, "the worker never said why: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(said.contains("the master's under-store, as this worker reaches it"), "{said}");
    // It retries, and the master never counts it: no read, write or migration goes to it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let hosts: Vec<String> =
        c.remote_client().cluster_status().await.unwrap().workers.into_iter().map(|w| w.host).collect();
    assert_eq!(hosts, ["h0"]);
    worker.kill().unwrap();
    worker.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_fail_clearly_while_the_s3_endpoint_is_down_and_memory_still_serves() {
    let mut s3 = SeaweedS3::start(&["thaw"]).await.unwrap();
    let bucket = s3.under_store("thaw", "down").unwrap();
    let hot = data(1 << 20, 3);
    let cold = data(1 << 20, 4);
    ufs_put(&bucket, "/hot", &hot).await;
    ufs_put(&bucket, "/cold", &cold).await;
    let c = start(s3_cluster(&s3, "down", 1)).await;
    let client = c.remote_client();
    assert_eq!(sha(&client.read_all("/hot").await.unwrap()), sha(&hot));
    client.stat("/cold").await.unwrap();
    s3.kill();
    let started = Instant::now();
    let e = client.read_all("/cold").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(60), "a dead endpoint hung the read");
    assert!(e.message.contains("under-store"), "{e}");
    // What is in memory does not need the store.
    assert_eq!(sha(&client.read_all("/hot").await.unwrap()), sha(&hot));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_larger_than_the_clusters_memory_reads_whole_through_a_full_tier() {
    let s3 = SeaweedS3::start(&["thaw"]).await.unwrap();
    let bucket = s3.under_store("thaw", "big").unwrap();
    let big = data(12 << 20, 11);
    ufs_put(&bucket, "/big.bin", &big).await;
    let mut options = s3_cluster(&s3, "big", 1);
    options.workers[0].mem_capacity = 4 << 20; // a third of the object
    let c = start(options).await;
    for client in [c.remote_client(), c.client("h0", "r0")] {
        let got = client.read_all("/big.bin").await.unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
        assert_eq!(sha(&got), sha(&big));
    }
    let (st, _) = c.remote_client().stat_blocks("/big.bin", true).await.unwrap();
    let in_mem = st.blocks.iter().filter(|b| b.replicas.iter().any(|r| r.tier == Tier::Mem as i32)).count();
    assert!(in_mem <= 4, "{in_mem} blocks of 1 MiB in a 4 MiB tier");
}

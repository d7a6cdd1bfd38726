//! The under-store as a directory of a real HDFS (Hadoop's MiniDFSCluster on
//! loopback, reached by the hdfs-native client): read-through, persisted writes,
//! migrations, checkpoints, atomic renames, deletes, a NameNode restart, and a
//! NameNode that is not there.

use crate::common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use thaw_common::proto::EvictionMode;
use thaw_testkit::hdfs::MiniHdfs;
use thaw_ufs::UnderStore;

fn hdfs_cluster(hdfs: &MiniHdfs, path: &str, n: usize) -> ClusterOptions {
    ClusterOptions { ufs_uri: Some(hdfs.uri(path)), ..ClusterOptions::workers(n) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hdfs_directory_serves_reads_writes_migrations_and_atomic_renames() {
    let Some(mut hdfs) = MiniHdfs::start(1).unwrap() else { return };
    let store = UnderStore::open(&hdfs.uri("/warehouse")).unwrap();
    store.check().await.unwrap();
    // A write shows at its path only once closed; an aborted one never does.
    let mut w = store.writer("/half").await.unwrap();
    w.write(Bytes::from_static(b"partial")).await.unwrap();
    assert!(store.stat("/half").await.unwrap().is_none(), "an open write shows at its path");
    w.abort().await;
    assert!(store.stat("/half").await.unwrap().is_none());

    let c = start(hdfs_cluster(&hdfs, "/warehouse", 2)).await;
    let bs = c.options.block_size as usize;
    let client = c.client("h0", "r0");
    let cold = data(3 * bs + 777, 1);
    ufs_put(&store, "/events/day1.bin", &cold).await;
    let mut r = client.open("/events/day1.bin").await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&cold), "{}", c.logs());
    assert_eq!(r.stats().under_store, cold.len() as u64);
    assert_eq!(sha(&client.read_all("/events/day1.bin").await.unwrap()), sha(&cold));

    // A job's inputs migrate from HDFS.
    let input = data(2 * bs + 5, 2);
    ufs_put(&store, "/in/part-0", &input).await;
    let reader = c.remote_client().with_job("q1");
    reader.migrate("q1", &["/in".to_string()], EvictionMode::Explicit, None).await.unwrap();
    assert_eq!(wait_in_memory(&reader, "q1").await.blocks_in_memory, 3);
    let mut r = reader.open("/in/part-0").await.unwrap();
    got.clear();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&input));
    assert_eq!(r.stats().under_store, 0, "{:?}", r.stats());

    // Writes that persist, and a checkpoint of a memory write.
    let through = data(2 * bs + 1, 3);
    client.write_all("/out/through", &through, opts(WriteType::Through)).await.unwrap();
    assert_eq!(sha(&ufs_get(&store, "/out/through").await), sha(&through));
    let fast = data(bs + 9, 4);
    client
        .write_all("/out/async", &fast, WriteOptions { write_type: WriteType::AsyncThrough, ..Default::default() })
        .await
        .unwrap();
    assert!(client.persist_wait("/out/async", Duration::from_secs(30)).await.unwrap().persisted);
    assert_eq!(sha(&ufs_get(&store, "/out/async").await), sha(&fast));
    assert!(store.list("/").await.unwrap().iter().all(|(n, _)| !n.starts_with(".thaw")), "staging shows");

    // Renames are HDFS's own: a whole directory in one step.
    client.rename("/out", "/done").await.unwrap();
    assert!(store.stat("/out").await.unwrap().is_none());
    assert_eq!(sha(&ufs_get(&store, "/done/through").await), sha(&through));
    assert_eq!(sha(&client.read_all("/done/async").await.unwrap()), sha(&fast));
    client.delete("/done", true).await.unwrap();
    assert!(store.stat("/done").await.unwrap().is_none());

    // A NameNode restart: the next cold read and write go through once it is back.
    let later = data(bs + 3, 5);
    ufs_put(&store, "/later.bin", &later).await;
    hdfs.restart_name_node().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let read = loop {
        match client.read_all("/later.bin").await {
            Ok(b) => break b,
            Err(e) if Instant::now() < deadline => {
                eprintln!("read during the NameNode's restart: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("no read 60 s after the NameNode restarted: {e}\n{}", c.logs()),
        }
    };
    assert_eq!(sha(&read), sha(&later));
    client.write_all("/after-restart", b"still here", opts(WriteType::Through)).await.unwrap();
    assert_eq!(ufs_get(&store, "/after-restart").await, b"still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_node_that_does_not_answer_stops_the_master_saying_so() {
    let journal = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(["master", "--ufs", "hdfs://127.0.0.1:1/x", "--port", "0", "--journal-dir"])
        .arg(journal.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(90));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success());
    assert!(text.contains("the HDFS NameNode does not answer"), "{text}");
}

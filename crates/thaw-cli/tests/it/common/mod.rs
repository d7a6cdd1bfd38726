//! Helpers shared by the integration tests.
#![allow(dead_code, unused_imports)]

use sha2::{Digest, Sha256};
pub use thaw_client::{Client, WriteOptions};
pub use thaw_common::ErrorKind;
pub use thaw_common::proto::{Tier, WriteType};
pub use thaw_testkit::{Cluster, ClusterOptions, WorkerSpec};

pub const BIN: &str = env!("CARGO_BIN_EXE_thaw");

/// Deterministic pseudo-random bytes (seeded), so failures reproduce: the
/// same as the fault campaign's.
pub fn data(len: usize, seed: u64) -> Vec<u8> {
    thaw_testkit::chaos::bytes(len, seed)
}

pub fn sha(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

pub async fn start(options: ClusterOptions) -> Cluster {
    Cluster::start(BIN, options).await.expect("cluster starts")
}

pub fn opts(write_type: WriteType) -> WriteOptions {
    WriteOptions { write_type, replication: 2, ..Default::default() }
}

/// Puts `len` bytes straight into the under-store: a cold file.
pub fn cold_file(c: &Cluster, path: &str, len: usize, seed: u64) -> Vec<u8> {
    let bytes = data(len, seed);
    let full = c.ufs.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, &bytes).unwrap();
    bytes
}

/// Puts `bytes` at `path` of an under-store directly (another tool's write).
pub async fn ufs_put(ufs: &thaw_ufs::UnderStore, path: &str, bytes: &[u8]) {
    let mut w = ufs.writer(path).await.unwrap();
    w.write(bytes::Bytes::copy_from_slice(bytes)).await.unwrap();
    w.close().await.unwrap();
}

/// The whole file at `path` of an under-store, read directly.
pub async fn ufs_get(ufs: &thaw_ufs::UnderStore, path: &str) -> Vec<u8> {
    use futures::TryStreamExt;
    let len = ufs.stat(path).await.unwrap().unwrap_or_else(|| panic!("{path} not in the under-store")).length;
    let parts: Vec<bytes::Bytes> = ufs.read_range(path, 0..len).await.unwrap().try_collect().await.unwrap();
    parts.concat()
}

/// The master's record of job `id`, if it is running.
pub async fn job(client: &Client, id: &str) -> Option<thaw_common::proto::JobInfo> {
    job_listed(client, id).await.filter(|j| !j.ended)
}

/// Job `id` as the master lists it: running, or ended lately.
pub async fn job_listed(client: &Client, id: &str) -> Option<thaw_common::proto::JobInfo> {
    match client.jobs(Some(id)).await {
        Ok(r) => r.jobs.into_iter().next(),
        Err(e) if e.kind == ErrorKind::NotFound => None,
        Err(e) => panic!("jobs: {e}"),
    }
}

/// Waits until every block of the job is in memory.
pub async fn wait_in_memory(client: &Client, id: &str) -> thaw_common::proto::JobInfo {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let j = job(client, id).await.expect("job exists");
        if j.blocks_in_memory == j.blocks {
            return j;
        }
        assert!(std::time::Instant::now() < deadline, "migration did not finish: {j:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Reads a data connection until the worker closes it; the bytes read, or
/// `None` if it is still open after `limit`.
pub async fn read_to_close(sock: &mut tokio::net::TcpStream, limit: std::time::Duration) -> Option<usize> {
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(limit, async {
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0;
        while let Ok(k) = sock.read(&mut buf).await {
            if k == 0 {
                break;
            }
            n += k;
        }
        n
    })
    .await
    .ok()
}

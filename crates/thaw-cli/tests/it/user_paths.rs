//! The user's paths at memory speed: `fs cat`, `fs get` and `fs put` (and the
//! client's short-circuit write under them) are byte exact for files spanning
//! several blocks with unaligned sizes, by short-circuit and streamed alike; a
//! write that stops early leaves nothing visible and gives its space back.

use std::process::{Command, Output, Stdio};

use crate::common::*;

fn thaw(c: &Cluster, short_circuit: &str, args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .env("THAW_MASTER", c.master_addr())
        .env("THAW_HOST", "h0")
        .env("THAW_SHORT_CIRCUIT", short_circuit)
        .output()
        .expect("thaw runs");
    assert!(out.status.success(), "thaw {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Files in a worker's MEM tier directory, block files and temp files.
fn tier_files(c: &Cluster, worker: usize, sub: &str) -> usize {
    std::fs::read_dir(c.mem_dir(worker).join(sub)).map(|d| d.count()).unwrap_or(0)
}

/// Bytes used in the MEM tier of the worker on `host`, as that worker counts them.
async fn mem_used(client: &Client, host: &str) -> u64 {
    let status = client.cluster_status().await.unwrap();
    let w = status.workers.iter().find(|w| w.host == host).expect("worker on host");
    let stats = client.worker_stats(&w.data_address).await.unwrap();
    stats.tiers.iter().find(|t| t.tier == Tier::Mem as i32).expect("MEM tier").used
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cat_get_and_put_are_byte_exact_by_short_circuit_and_streamed() {
    let c = start(ClusterOptions::workers(2)).await;
    let bs = c.options.block_size as usize;
    let client = c.client("h0", "r0");
    for (i, size) in [3 * bs + 12_345, 2 * bs, 777].into_iter().enumerate() {
        let bytes = data(size, 90 + i as u64);
        let local = c.root().join(format!("in{i}.bin"));
        std::fs::write(&local, &bytes).unwrap();
        for sc in ["1", "0"] {
            for wt in ["must-cache", "cache-through"] {
                let path = format!("/up/{i}/{sc}/{wt}");
                let l = local.to_str().unwrap();
                thaw(&c, sc, &["fs", "put", l, &path, "--write-type", wt]);
                // Written from h0: the blocks are in h0's worker memory.
                let (st, _) = client.stat_blocks(&path, true).await.unwrap();
                assert_eq!(st.length, size as u64);
                assert_eq!(st.blocks.len(), size.div_ceil(bs));
                for b in &st.blocks {
                    assert_eq!((b.replicas[0].host.as_str(), b.replicas[0].tier), ("h0", Tier::Mem as i32), "{path}");
                }
                if wt == "cache-through" {
                    let persisted = std::fs::read(c.ufs.join(path.trim_start_matches('/'))).unwrap();
                    assert_eq!(sha(&persisted), sha(&bytes), "{path} in the under-store");
                }
                let cat = thaw(&c, sc, &["fs", "cat", &path]);
                assert_eq!(sha(&cat.stdout), sha(&bytes), "cat {path}");
                let got = c.root().join("got.bin");
                thaw(&c, sc, &["fs", "get", &path, got.to_str().unwrap()]);
                assert_eq!(sha(&std::fs::read(&got).unwrap()), sha(&bytes), "get {path}");
            }
        }
    }
    // Every temp file was committed or dropped; usage is the blocks' bytes.
    assert_eq!(tier_files(&c, 0, "tmp"), 0);
    let status = client.cluster_status().await.unwrap();
    let w = status.workers.iter().find(|w| w.host == "h0").unwrap();
    let stats = client.worker_stats(&w.data_address).await.unwrap();
    let mem = stats.tiers.iter().find(|t| t.tier == Tier::Mem as i32).unwrap();
    let stored: u64 = [3 * bs + 12_345, 2 * bs, 777].iter().map(|&s| 4 * s as u64).sum();
    assert_eq!(mem.used, stored);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cat_into_an_append_only_file_and_a_remote_cat_still_work() {
    let c = start(ClusterOptions::workers(2)).await;
    let bs = c.options.block_size as usize;
    let bytes = data(2 * bs + 99, 5);
    c.client("h0", "r0").write_all("/up/f", &bytes, opts(WriteType::MustCache)).await.unwrap();
    // Standard output opened with O_APPEND takes no sendfile: the copy is buffered.
    let out_path = c.root().join("appended.bin");
    std::fs::write(&out_path, b"head:").unwrap();
    let out = std::fs::OpenOptions::new().append(true).open(&out_path).unwrap();
    let status = Command::new(BIN)
        .args(["fs", "cat", "/up/f"])
        .env("THAW_MASTER", c.master_addr())
        .env("THAW_HOST", "h0")
        .stdout(Stdio::from(out))
        .status()
        .unwrap();
    assert!(status.success());
    let got = std::fs::read(&out_path).unwrap();
    assert_eq!(&got[..5], b"head:");
    assert_eq!(sha(&got[5..]), sha(&bytes));
    // From a host with no worker: every block streamed.
    let far = Command::new(BIN)
        .args(["fs", "cat", "/up/f"])
        .env("THAW_MASTER", c.master_addr())
        .env("THAW_HOST", "elsewhere")
        .output()
        .unwrap();
    assert!(far.status.success());
    assert_eq!(sha(&far.stdout), sha(&bytes));
    // A reader that goes away (a closed pipe) ends cat quietly, as it ends `cat`: by SIGPIPE.
    let mut head = Command::new(BIN)
        .args(["fs", "cat", "/up/f"])
        .env("THAW_MASTER", c.master_addr())
        .env("THAW_HOST", "h0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(head.stdout.take());
    let done = head.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    let quiet = done.status.success() || done.status.signal() == Some(libc::SIGPIPE);
    assert!(quiet && done.stderr.is_empty(), "{:?}: {}", done.status, String::from_utf8_lossy(&done.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_circuit_write_stopped_early_leaves_nothing_and_frees_its_space() {
    let c = start(ClusterOptions::workers(2)).await;
    let bs = c.options.block_size as usize;
    let client = c.client("h0", "r0");
    let bytes = data(5 * bs / 2, 8);

    // Aborted: the file is deleted, the committed blocks and the open one dropped.
    let mut w = client.create("/up/aborted", opts(WriteType::MustCache)).await.unwrap();
    assert!(w.is_local(), "a client on the worker's host writes its block files");
    w.write(&bytes).await.unwrap();
    assert_eq!(tier_files(&c, 0, "tmp"), 1, "the third block is open");
    // Nothing of the open block is visible, and no reader may open the file.
    assert_eq!(tier_files(&c, 0, "blocks"), 2);
    assert!(client.open("/up/aborted").await.is_err());
    w.abort().await;
    assert_eq!(client.stat("/up/aborted").await.unwrap_err().kind, ErrorKind::NotFound);

    // Dropped (a client that died): the worker drops what the write left.
    let mut w = client.create("/up/dropped", opts(WriteType::MustCache)).await.unwrap();
    w.write(&bytes).await.unwrap();
    drop(w);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while (tier_files(&c, 0, "tmp") + tier_files(&c, 0, "blocks") > 0 || mem_used(&client, "h0").await > 0)
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(tier_files(&c, 0, "tmp"), 0);
    assert_eq!(tier_files(&c, 0, "blocks"), 0);
    assert_eq!(mem_used(&client, "h0").await, 0, "reservations and blocks given back");
    let err = client.read_all("/up/dropped").await.unwrap_err();
    assert_ne!(err.kind, ErrorKind::Internal, "{err}");

    // A client that may not short-circuit streams, and the bytes still land in h0's memory.
    let mut cfg = client.config().clone();
    cfg.short_circuit = false;
    let streamed = Client::new(cfg).unwrap();
    let mut w = streamed.create("/up/streamed", opts(WriteType::MustCache)).await.unwrap();
    assert!(!w.is_local());
    w.write(&bytes).await.unwrap();
    w.close().await.unwrap();
    assert_eq!(sha(&client.read_all("/up/streamed").await.unwrap()), sha(&bytes));
    // A client on another host streams too.
    let remote = c.remote_client();
    let w = remote.create("/up/remote", opts(WriteType::MustCache)).await.unwrap();
    assert!(!w.is_local());
    w.abort().await;
}

/// One framed message of the data protocol.
async fn send<M: prost::Message>(sock: &mut tokio::net::TcpStream, msg: &M) {
    thaw_common::frame::write_msg(sock, msg).await.unwrap();
}

async fn answer(sock: &mut tokio::net::TcpStream) -> thaw_common::proto::DataResponse {
    thaw_common::frame::read_msg(sock).await.unwrap().expect("an answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_commits_no_block_a_client_misreports() {
    use thaw_common::proto::*;
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    let addr = client.cluster_status().await.unwrap().workers[0].data_address.clone();
    let request = |tier: Tier| DataRequest {
        version: thaw_proto::DATA_PROTOCOL_VERSION,
        job_id: "bad".into(),
        request: Some(data_request::Request::WriteLocal(WriteFileRequest {
            file_id: 4242,
            block_size: 1 << 20,
            tier: tier as i32,
            ufs_path: String::new(),
            checksum: false,
            first_block: 0,
            cached: false,
        })),
        ..Default::default()
    };
    let step = |s: local_write_step::Step| LocalWriteStep { step: Some(s) };
    let ok = ErrorCode::Ok as i32;

    // No tier to write into: refused (a client then streams).
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    send(&mut sock, &request(Tier::Unspecified)).await;
    assert_eq!(answer(&mut sock).await.code, ErrorCode::InvalidArgument as i32);

    // A block announced longer than what was written is not committed.
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    send(&mut sock, &request(Tier::Mem)).await;
    assert_eq!(answer(&mut sock).await.code, ok);
    send(&mut sock, &step(local_write_step::Step::OpenBlock(0))).await;
    let opened = answer(&mut sock).await;
    assert_eq!(opened.code, ok);
    std::fs::write(&opened.local_path, vec![7u8; 100]).unwrap();
    assert_eq!(mem_used(&client, "h0").await, 1 << 20, "the block's space is reserved");
    send(&mut sock, &step(local_write_step::Step::CommitLength(200))).await;
    let refused = answer(&mut sock).await;
    assert_eq!(refused.code, ErrorCode::InvalidArgument as i32, "{}", refused.message);
    assert!(!std::path::Path::new(&opened.local_path).exists(), "the temp file is dropped");
    assert_eq!(tier_files(&c, 0, "blocks"), 0);
    assert_eq!(mem_used(&client, "h0").await, 0, "the reservation is given back");

    // Blocks out of order, and a finish with a block still open, are refused.
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    send(&mut sock, &request(Tier::Mem)).await;
    assert_eq!(answer(&mut sock).await.code, ok);
    send(&mut sock, &step(local_write_step::Step::OpenBlock(1))).await;
    assert_eq!(answer(&mut sock).await.code, ErrorCode::InvalidArgument as i32);
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    send(&mut sock, &request(Tier::Mem)).await;
    assert_eq!(answer(&mut sock).await.code, ok);
    send(&mut sock, &step(local_write_step::Step::OpenBlock(0))).await;
    assert_eq!(answer(&mut sock).await.code, ok);
    send(&mut sock, &step(local_write_step::Step::Finish(0))).await;
    assert_eq!(answer(&mut sock).await.code, ErrorCode::InvalidArgument as i32);
    assert_eq!(tier_files(&c, 0, "tmp"), 0);
    assert_eq!(mem_used(&client, "h0").await, 0);
}

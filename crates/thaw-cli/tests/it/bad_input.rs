//! Bad input gets a clear error, the servers keep serving, and nothing stored is lost.

use crate::common::*;
use thaw_common::frame;
use thaw_common::proto::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends raw bytes to a worker and returns its error response.
async fn raw_exchange(addr: &str, bytes: &[u8]) -> DataResponse {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(bytes).await.unwrap();
    frame::read_msg::<_, DataResponse>(&mut sock).await.unwrap().expect("an error response")
}

fn framed(req: &DataRequest) -> Vec<u8> {
    use prost::Message;
    let body = req.encode_to_vec();
    let mut v = (body.len() as u32).to_be_bytes().to_vec();
    v.extend(body);
    v
}

fn req(r: data_request::Request) -> DataRequest {
    DataRequest {
        version: thaw_proto::DATA_PROTOCOL_VERSION,
        job_id: "bad".into(),
        request: Some(r),
        ..Default::default()
    }
}

/// A write stream's header: 1 MiB blocks into `tier` and/or the under-store.
fn write_req(file_id: u64, tier: Tier, ufs_path: &str) -> DataRequest {
    let w = WriteFileRequest {
        file_id,
        block_size: 1 << 20,
        tier: tier as i32,
        ufs_path: ufs_path.into(),
        checksum: false,
        first_block: 0,
        cached: false,
    };
    req(data_request::Request::WriteFile(w))
}

fn code(resp: &DataResponse) -> ErrorCode {
    ErrorCode::try_from(resp.code).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_errors_are_clear_and_typed() {
    let c = start(ClusterOptions::workers(2)).await;
    let client = c.client("h0", "r0");
    let keep = data(1_500_000, 1);
    client.write_all("/ok/keep", &keep, opts(WriteType::CacheThrough)).await.unwrap();

    let e = client.stat("/nope/missing").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(e.message.contains("/nope/missing"), "{e}");
    assert_eq!(client.open("/missing").await.err().unwrap().kind, ErrorKind::NotFound);
    assert_eq!(client.delete("/missing", true).await.unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(client.rename("/missing", "/x").await.unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(client.list("/missing").await.unwrap_err().kind, ErrorKind::NotFound);

    // Escapes and malformed paths: refused before anything is touched.
    let outside = c.root().join("escaped");
    for bad in ["/ok/../../escaped", "/../escaped", "relative/path", "/a/./b", "/x\0y"] {
        assert_eq!(client.stat(bad).await.unwrap_err().kind, ErrorKind::InvalidArgument, "{bad}");
        assert_eq!(client.mkdir(bad, true, true).await.unwrap_err().kind, ErrorKind::InvalidArgument, "{bad}");
        let e = client.write_all(bad, b"x", opts(WriteType::Through)).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{bad}: {e}");
        assert_eq!(client.rename("/ok/keep", bad).await.unwrap_err().kind, ErrorKind::InvalidArgument, "{bad}");
        assert_eq!(client.delete(bad, true).await.unwrap_err().kind, ErrorKind::InvalidArgument, "{bad}");
    }
    assert!(!outside.exists());
    // A 5 MB path: refused by size, the server stays up.
    let huge = format!("/{}", "a/".repeat(2_500_000));
    let e = client.stat(&huge).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");

    // Kinds a file system user expects.
    assert_eq!(
        client.write_all("/ok/keep", b"x", opts(WriteType::MustCache)).await.unwrap_err().kind,
        ErrorKind::AlreadyExists
    );
    assert_eq!(client.delete("/ok", false).await.unwrap_err().kind, ErrorKind::DirectoryNotEmpty);
    assert_eq!(client.open("/ok").await.err().unwrap().kind, ErrorKind::IsADirectory);
    assert_eq!(client.mkdir("/ok/keep/sub", true, true).await.unwrap_err().kind, ErrorKind::NotADirectory);
    let under_file = client.write_all("/ok/keep/child", b"x", opts(WriteType::MustCache)).await.unwrap_err();
    assert_eq!(under_file.kind, ErrorKind::NotADirectory, "{under_file}");
    assert_eq!(client.rename("/ok", "/ok/inner").await.unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(client.delete("/", true).await.unwrap_err().kind, ErrorKind::InvalidArgument);
    let tiny = WriteOptions { block_size: 1, ..opts(WriteType::MustCache) };
    assert_eq!(client.write_all("/ok/tiny", b"x", tiny).await.unwrap_err().kind, ErrorKind::InvalidArgument);
    let no_type = WriteOptions { write_type: WriteType::Unspecified, ..Default::default() };
    assert_eq!(client.write_all("/ok/untyped", b"x", no_type).await.unwrap_err().kind, ErrorKind::InvalidArgument);
    let too_many = WriteOptions { replication: 3, ..opts(WriteType::ReplicatedDisk) };
    assert_eq!(client.write_all("/ok/rep3", b"x", too_many).await.unwrap_err().kind, ErrorKind::Unavailable);

    // Nothing stored was lost on the way.
    assert_eq!(sha(&client.read_all("/ok/keep").await.unwrap()), sha(&keep));
    let names: Vec<String> = client.list("/ok").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, vec!["keep"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_data_requests_get_errors_and_the_worker_keeps_serving() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.remote_client();
    let keep = data(2_000_000, 2);
    client.write_all("/keep", &keep, opts(WriteType::MustCache)).await.unwrap();
    let addr = c.worker_addr(0).to_string();

    // Garbage that is not a protobuf message.
    let resp = raw_exchange(&addr, &[0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff]).await;
    assert_eq!(code(&resp), ErrorCode::InvalidArgument, "{}", resp.message);
    assert!(resp.message.contains("malformed"), "{}", resp.message);
    // A length prefix of 4 GiB: refused before any allocation.
    let resp = raw_exchange(&addr, &[0xff, 0xff, 0xff, 0xff]).await;
    assert_eq!(code(&resp), ErrorCode::InvalidArgument);
    assert!(resp.message.contains("limit"), "{}", resp.message);
    // A version this worker does not speak.
    let mut old = req(data_request::Request::Stats(WorkerStatsRequest {}));
    old.version = 99;
    let resp = raw_exchange(&addr, &framed(&old)).await;
    assert!(resp.message.contains("version 99"), "{}", resp.message);
    // An empty request.
    let resp = raw_exchange(&addr, &framed(&DataRequest { version: 1, ..Default::default() })).await;
    assert_eq!(code(&resp), ErrorCode::InvalidArgument);
    // A block that does not exist.
    let missing =
        req(data_request::Request::ReadBlock(ReadBlockRequest { block_id: 987_654_321, ..Default::default() }));
    let resp = raw_exchange(&addr, &framed(&missing)).await;
    assert_eq!(code(&resp), ErrorCode::NotFound, "{}", resp.message);
    let open = req(data_request::Request::OpenLocal(OpenLocalBlockRequest { block_id: 987_654_321 }));
    assert_eq!(code(&raw_exchange(&addr, &framed(&open)).await), ErrorCode::NotFound);
    // Read-through of a path outside the under-store root.
    let escape = req(data_request::Request::ReadBlock(ReadBlockRequest {
        block_id: 5,
        ufs: Some(UfsSource { path: "/../../../etc/passwd".into(), offset: 0, length: 10 }),
        ..Default::default()
    }));
    let resp = raw_exchange(&addr, &framed(&escape)).await;
    assert_eq!(code(&resp), ErrorCode::InvalidArgument, "{}", resp.message);
    // A write stream into the under-store outside its root.
    let write = write_req(77, Tier::Unspecified, "/../escaped");
    let resp = raw_exchange(&addr, &framed(&write)).await;
    assert_eq!(code(&resp), ErrorCode::InvalidArgument, "{}", resp.message);
    assert!(!c.root().join("escaped").exists());
    // An oversized chunk in a write stream (for a real, incomplete file).
    let w = client.create("/chunky", opts(WriteType::MustCache)).await.unwrap();
    let file_id = w.info().file_id;
    drop(w);
    let write = write_req(file_id, Tier::Mem, "");
    let mut bytes = framed(&write);
    bytes.extend_from_slice(&(64u32 << 20).to_be_bytes());
    let resp = raw_exchange(&addr, &bytes).await;
    assert_eq!(code(&resp), ErrorCode::InvalidArgument, "{}", resp.message);

    // Still serving, nothing lost.
    assert_eq!(sha(&client.read_all("/keep").await.unwrap()), sha(&keep));
    let stats = client.worker_stats(&addr).await.unwrap();
    let mem = stats.tiers.iter().find(|t| t.tier == Tier::Mem as i32).unwrap();
    assert_eq!(mem.blocks, 2, "only /keep's blocks remain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_writes_leave_nothing_behind() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.remote_client();
    let keep = data(1_000_000, 3);
    client.write_all("/keep", &keep, opts(WriteType::MustCache)).await.unwrap();
    let addr = c.worker_addr(0).to_string();

    // A writer that sends 2.5 blocks and vanishes without ending the stream.
    let mut w = client.create("/partial", opts(WriteType::CacheThrough)).await.unwrap();
    w.write(&data(2_600_000, 4)).await.unwrap();
    let file_id = w.info().file_id;
    // The stream is cut; nothing completes the file.
    drop(w);
    // A raw stream that promises a chunk and stops half-way.
    let write = write_req(file_id, Tier::Mem, "");
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    let mut bytes = framed(&write);
    bytes.extend_from_slice(&(1u32 << 20).to_be_bytes());
    bytes.extend_from_slice(&[7u8; 1000]);
    sock.write_all(&bytes).await.unwrap();
    sock.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let _ = sock.read_to_end(&mut rest).await;

    // The partial file is visible as incomplete, unreadable, and removable.
    let st = client.stat("/partial").await.unwrap();
    assert!(!st.complete);
    let e = client.open("/partial").await.err().unwrap();
    assert_eq!(e.kind, ErrorKind::FailedPrecondition);
    assert!(e.message.contains("incomplete"), "{e}");
    // The worker dropped the blocks it had stored for the cut streams, and the
    // under-store never saw the file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let stats = client.worker_stats(&addr).await.unwrap();
        let mem = stats.tiers.iter().find(|t| t.tier == Tier::Mem as i32).unwrap().clone();
        if mem.blocks == 1 && mem.used == keep.len() as u64 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "tier still holds partial blocks: {mem:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!c.ufs.join("partial").exists());
    client.delete("/partial", false).await.unwrap();
    // Writing the same path again works, and the old file is intact.
    client.write_all("/partial", b"whole", opts(WriteType::CacheThrough)).await.unwrap();
    assert_eq!(client.read_all("/partial").await.unwrap(), b"whole");
    assert_eq!(sha(&client.read_all("/keep").await.unwrap()), sha(&keep));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_tier_refuses_clearly_and_keeps_what_it_has() {
    let mut options = ClusterOptions::workers(1);
    options.workers[0].mem_capacity = 3 << 20;
    let c = start(options).await;
    let client = c.remote_client();
    let keep = data(1 << 20, 5);
    client.write_all("/keep", &keep, opts(WriteType::MustCache)).await.unwrap();
    let e = client.write_all("/big", &data(5 << 20, 6), opts(WriteType::MustCache)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::ResourceExhausted, "{e}");
    assert!(e.message.contains("this write of 5.0 MiB is larger than the cluster's free memory (2.0 MiB"), "{e}");
    // The failed file is gone, its partial blocks freed (as the worker sees
    // the write's connection end), the old file intact.
    assert_eq!(client.stat("/big").await.unwrap_err().kind, ErrorKind::NotFound);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let stats = client.worker_stats(c.worker_addr(0)).await.unwrap();
        let mem = stats.tiers.iter().find(|t| t.tier == Tier::Mem as i32).unwrap().clone();
        if mem.used == keep.len() as u64 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{mem:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(sha(&client.read_all("/keep").await.unwrap()), sha(&keep));
    // A file that fits still goes in.
    client.write_all("/fits", &data(1 << 20, 7), opts(WriteType::MustCache)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_at_its_connection_cap_says_busy_instead_of_hanging() {
    let mut options = ClusterOptions::workers(1);
    options.workers[0].max_connections = 2;
    let c = start(options).await;
    let client = c.remote_client();
    client.write_all("/f", b"bytes", opts(WriteType::MustCache)).await.unwrap();
    let addr = c.worker_addr(0).to_string();
    // Two connections hold both slots. Each proves it holds one by being served
    // (a connection stays open between requests); one refused because a slot was
    // still held by the write's closing connection is opened again.
    let stats = req(data_request::Request::Stats(WorkerStatsRequest {}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut idle = Vec::new();
    while idle.len() < 2 {
        let mut sock = TcpStream::connect(&addr).await.unwrap();
        sock.write_all(&framed(&stats)).await.unwrap();
        let resp = frame::read_msg::<_, DataResponse>(&mut sock).await.unwrap().expect("a response");
        if code(&resp) == ErrorCode::Ok {
            idle.push(sock);
        } else {
            assert!(std::time::Instant::now() < deadline, "a slot was never freed: {}", resp.message);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    // Idle connections give their slots up to new ones (the longest-idle is
    // closed); connections in the middle of a request do not. Both start a
    // request (two bytes of its length) and stall: the next connection is
    // told the worker is busy.
    for sock in &mut idle {
        sock.write_all(&[0, 0]).await.unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let resp = raw_exchange(&addr, &framed(&stats)).await;
    assert_eq!(code(&resp), ErrorCode::Unavailable, "{}", resp.message);
    assert!(resp.message.contains("busy"), "{}", resp.message);
    // Slots free up when connections close, and reads work again.
    drop(idle);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(client.read_all("/f").await.unwrap(), b"bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_from_the_wrong_under_store_bytes_is_refused() {
    let c = start(ClusterOptions::workers(1)).await;
    std::fs::write(c.ufs.join("a.bin"), data(1000, 1)).unwrap();
    std::fs::write(c.ufs.join("b.bin"), data(1000, 2)).unwrap();
    let client = c.remote_client();
    let (a, _) = client.stat_blocks("/a.bin", true).await.unwrap();
    let addr = c.worker_addr(0).to_string();
    // Block 0 of a.bin, "filled" from b.bin: the master refuses it, nothing is cached.
    let forged = req(data_request::Request::CacheBlock(CacheBlockRequest {
        block_id: a.blocks[0].block_id,
        ufs: Some(UfsSource { path: "/b.bin".into(), offset: 0, length: 1000 }),
        tier: Tier::Mem as i32,
    }));
    let resp = raw_exchange(&addr, &framed(&forged)).await;
    assert_eq!(code(&resp), ErrorCode::InvalidArgument, "{}", resp.message);
    assert!(resp.message.contains("filled from /b.bin"), "{}", resp.message);
    assert_eq!(client.stat("/a.bin").await.unwrap().in_memory_bytes, 0);
    assert_eq!(client.read_all("/a.bin").await.unwrap(), data(1000, 1));
}

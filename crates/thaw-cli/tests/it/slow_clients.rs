//! Slow and idle clients cannot starve a worker (issue 18, item 5): a reader
//! that takes nothing, a client that sends half a request, and a writer that
//! stops mid-chunk are cut off after the stall timeout; sockets held open with
//! nothing sent are closed, oldest first, when the worker needs their slots;
//! a frame past the size limit gets a clear error. Meanwhile real reads go on.

use std::time::{Duration, Instant};

use crate::common::*;
use prost::Message;
use thaw_common::proto::{DataRequest, ReadBlockRequest, WriteFileRequest, data_request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MIB: usize = 1 << 20;
const STALL_MS: u64 = 1000;

async fn cluster(max_connections: usize) -> Cluster {
    let mut o = ClusterOptions::workers(1);
    o.block_size = 64 << 20;
    o.workers[0].max_connections = max_connections;
    o.workers[0].extra_args = vec!["--stall-timeout-ms".into(), STALL_MS.to_string()];
    start(o).await
}

fn request(r: data_request::Request) -> Vec<u8> {
    let body =
        DataRequest { version: 1, job_id: "attacker".into(), request: Some(r), ..Default::default() }.encode_to_vec();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend(body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_readers_and_senders_are_cut_off_while_others_are_served() {
    let c = cluster(64).await;
    let client = c.client("h9", "r9");
    let bytes = data(48 * MIB, 1);
    client.write_all("/big.bin", &bytes, WriteOptions::of(WriteType::MustCache)).await.unwrap();
    let block = client.stat_blocks("/big.bin", true).await.unwrap().0.blocks[0].block_id;
    let addr = c.worker_addr(0).to_string();

    // A reader that asks for 48 MiB and takes none of it.
    let mut reader = TcpStream::connect(&addr).await.unwrap();
    let read = data_request::Request::ReadBlock(ReadBlockRequest { block_id: block, ..Default::default() });
    reader.write_all(&request(read)).await.unwrap();
    // A client that sends two bytes of a request's length and stops.
    let mut half = TcpStream::connect(&addr).await.unwrap();
    half.write_all(&[0, 0]).await.unwrap();
    // A writer that announces a 1 MiB chunk and sends 10 bytes of it.
    let mut writer = TcpStream::connect(&addr).await.unwrap();
    let write = data_request::Request::WriteFile(WriteFileRequest {
        file_id: 999,
        block_size: 1 << 20,
        tier: Tier::Mem as i32,
        ..Default::default()
    });
    writer.write_all(&request(write)).await.unwrap();
    writer.write_all(&(MIB as u32).to_be_bytes()).await.unwrap();
    writer.write_all(&[1u8; 10]).await.unwrap();
    // An idle connection, as a client's pool keeps: left alone.
    let mut idle = TcpStream::connect(&addr).await.unwrap();

    // Served meanwhile.
    let t0 = Instant::now();
    assert!(client.read_all("/big.bin").await.unwrap() == bytes);
    println!("a 48 MiB read beside three stalled clients: {:?}", t0.elapsed());

    tokio::time::sleep(Duration::from_millis(3 * STALL_MS)).await;
    // Each stalled one was closed: what the reader gets now ends short.
    let got = read_to_close(&mut reader, Duration::from_secs(10)).await.expect("the stalled reader was cut off");
    assert!(got < 48 * MIB, "the stalled reader got all {got} bytes");
    assert!(read_to_close(&mut half, Duration::from_secs(5)).await.is_some(), "a half request was kept");
    assert!(read_to_close(&mut writer, Duration::from_secs(5)).await.is_some(), "a stalled writer was kept");
    // The idle one is still open (the idle timeout is minutes).
    assert!(read_to_close(&mut idle, Duration::from_millis(300)).await.is_none(), "an idle connection was closed");
    // And the written block was not kept.
    assert!(client.read_all("/big.bin").await.unwrap() == bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_held_open_cannot_starve_a_full_worker() {
    let c = cluster(16).await;
    let client = c.client("h9", "r9");
    let bytes = data(3 * MIB, 2);
    client.write_all("/f.bin", &bytes, WriteOptions::of(WriteType::MustCache)).await.unwrap();
    let addr = c.worker_addr(0).to_string();
    // Every slot taken by a socket that sends nothing.
    let mut held = Vec::new();
    for _ in 0..40 {
        held.push(TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Reads still get through: the longest-idle sockets make room.
    for _ in 0..5 {
        assert!(client.read_all("/f.bin").await.unwrap() == bytes);
    }
    let mut closed = 0;
    for s in &mut held {
        closed += usize::from(read_to_close(s, Duration::from_millis(50)).await.is_some());
    }
    assert!(closed >= 24, "only {closed} of 40 held sockets were closed for a worker of 16 slots");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_past_the_size_limit_gets_a_clear_error() {
    let c = cluster(16).await;
    let mut sock = TcpStream::connect(c.worker_addr(0)).await.unwrap();
    sock.write_all(&(64u32 << 20).to_be_bytes()).await.unwrap();
    let mut len = [0u8; 4];
    sock.read_exact(&mut len).await.unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    sock.read_exact(&mut body).await.unwrap();
    let resp = thaw_common::proto::DataResponse::decode(body.as_slice()).unwrap();
    assert!(resp.message.contains("over the 1048576-byte limit"), "{resp:?}");
}

//! Benchmark 2, remote MEM read.
//!
//! Measures a client on a host no worker is on reading a file from the worker's MEM
//! tier: the worker streams each block file over loopback TCP. The baseline is the
//! raw transport: a loopback TCP connection that carries the same number of bytes,
//! written from an in-memory 4 MiB buffer and read into a 4 MiB buffer. The ratio
//! is what Thaw's protocol, per-block connections and the worker's copy out of
//! tmpfs cost on top of the wire; it should stay at or above 0.7.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, ensure};
use thaw_common::proto::WriteType;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::measure::{Comparison, Spec, compare};
use crate::payload::{self, BUF, Transfer};
use crate::{BLOCK_SIZE, Config};

const PATH: &str = "/bench/remote.bin";

pub async fn run(cfg: &Config) -> Result<Comparison> {
    let size = cfg.size;
    let cluster = crate::setup::one_worker(BLOCK_SIZE, (2 << 30).max(2 * size)).await?;
    payload::write_thaw(&crate::setup::client(&cluster, "h0", "r0")?, PATH, size, WriteType::MustCache, BLOCK_SIZE)
        .await?;
    let client = crate::setup::remote_client(&cluster)?;
    let sum = payload::expected_sum(size);
    let mut chunk = vec![0u8; BUF];
    payload::fill(&mut chunk, 0);
    let chunk: Arc<[u8]> = chunk.into();

    let thaw = async |_| -> Result<Transfer> {
        let (t, src) = payload::read_thaw(&client, PATH).await?;
        ensure!(src.remote_mem == size, "not every byte was streamed from remote MEM: {src:?}");
        t.check(size, sum, "remote MEM read")
    };
    let baseline = async |_| tcp_copy(chunk.clone(), size).await;
    let spec = Spec {
        name: "remote-mem",
        thaw_label: "Thaw MEM read streamed from the worker over loopback TCP",
        baseline_label: "raw loopback TCP copy from a 4 MiB in-memory buffer",
        target: 0.7,
    };
    let mut c = compare(spec, cfg.repeats, thaw, baseline).await?;
    c.notes = "all bytes streamed from the worker's MEM tier (client read stats)".into();
    Ok(c)
}

/// One loopback transfer of `size` bytes: a server on its own thread (like the
/// worker, which is its own process) writes `chunk` over and over; the timed side
/// connects and reads to the end.
async fn tcp_copy(chunk: Arc<[u8]>, size: u64) -> Result<Transfer> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let server = std::thread::spawn(move || serve_once(listener, chunk, size));
    let started = Instant::now();
    let mut sock = TcpStream::connect(addr).await?;
    let _ = sock.set_nodelay(true);
    let t = payload::read_socket(&mut sock, started).await?;
    server.join().map_err(|_| anyhow::anyhow!("loopback server panicked"))??;
    ensure!(t.bytes == size, "loopback copy carried {} bytes, expected {size}", t.bytes);
    Ok(t)
}

/// Accepts one connection and writes `size` bytes to it from `chunk`, with tokio
/// on a runtime of its own.
fn serve_once(listener: std::net::TcpListener, chunk: Arc<[u8]>, size: u64) -> Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let (mut sock, _) = TcpListener::from_std(listener)?.accept().await?;
        let _ = sock.set_nodelay(true);
        let mut left = size;
        while left > 0 {
            let k = left.min(chunk.len() as u64) as usize;
            sock.write_all(&chunk[..k]).await?;
            left -= k as u64;
        }
        sock.shutdown().await?;
        Ok(())
    })
}

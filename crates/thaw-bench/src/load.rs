//! Load held under attack (issue 18, item 5).
//!
//! 64 remote readers (on a host no worker is on: every byte crosses loopback
//! TCP) read 1 MiB at random offsets of a 256 MiB file in one worker's MEM,
//! for `--meta-secs` seconds a run, alone and with slow-client attackers
//! beside them, alternating. The attackers, each a task that reconnects as
//! soon as the worker closes it:
//! - 256 sockets held open sending nothing (more than the worker's 128
//!   connection slots: the longest-idle ones are closed to make room);
//! - 16 readers that ask for a whole 16 MiB block and take none of it
//!   (cut off after the stall timeout, 2 s here, 30 s by default);
//! - 16 clients that send two bytes of a request's length and stop.
//!
//! Reported: bytes per second of the readers (attacked / alone: the ratio,
//! target 0.8), and the latency of a 1 MiB read at the 50th and 99th
//! percentiles in the notes, with the attacker connections opened.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use prost::Message;
use rand::{Rng, SeedableRng};
use thaw_common::proto::{DataRequest, ReadBlockRequest, WriteType, data_request};
use thaw_testkit::{Cluster, ClusterOptions};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::Config;
use crate::measure::{Comparison, median};

const PATH: &str = "/bench/load.bin";
const FILE: u64 = 256 << 20;
const BLOCK: u64 = 16 << 20;
const READ: usize = 1 << 20;
const READERS: usize = 64;
const IDLE_HOLDERS: usize = 256;
const STALLED_READERS: usize = 16;
const HALF_SENDERS: usize = 16;

struct Run {
    bytes_per_sec: f64,
    latencies_ms: Vec<f64>,
}

pub async fn run(cfg: &Config) -> Result<Comparison> {
    let mut options = ClusterOptions::workers(1);
    options.block_size = BLOCK;
    options.workers[0].mem_capacity = 2 * FILE;
    options.workers[0].max_connections = 128;
    options.workers[0].extra_args = vec!["--stall-timeout-ms".into(), "2000".into()];
    let cluster = Cluster::start(crate::setup::thaw_bin()?, options).await?;
    crate::payload::write_thaw(&crate::setup::client(&cluster, "h0", "r0")?, PATH, FILE, WriteType::MustCache, BLOCK)
        .await?;
    let client = crate::setup::remote_client(&cluster)?;
    let block = client.stat_blocks(PATH, true).await?.0.blocks[0].block_id;
    let secs = Duration::from_secs_f64(cfg.meta_secs.max(1.0));
    let made = Arc::new(AtomicU64::new(0));
    let (mut alone, mut attacked) = (Vec::new(), Vec::new());
    for _ in 0..cfg.repeats {
        alone.push(readers(&client, secs).await?);
        let stop = Arc::new(AtomicBool::new(false));
        let attackers = attack(&cluster, block, stop.clone(), made.clone());
        tokio::time::sleep(Duration::from_millis(500)).await;
        attacked.push(readers(&client, secs).await?);
        stop.store(true, Ordering::Relaxed);
        for a in attackers {
            a.abort();
        }
    }
    let rate = |runs: &[Run]| median(&runs.iter().map(|r| r.bytes_per_sec / f64::from(1 << 20)).collect::<Vec<_>>());
    let pct = |runs: &[Run], p: f64| {
        let mut all: Vec<f64> = runs.iter().flat_map(|r| r.latencies_ms.iter().copied()).collect();
        all.sort_by(f64::total_cmp);
        all.get(((all.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
    };
    let count = |runs: &[Run]| runs.iter().map(|r| r.latencies_ms.len()).sum::<usize>();
    let (thaw, baseline) = (rate(&attacked), rate(&alone));
    Ok(Comparison {
        name: "load-under-attack".into(),
        thaw_label: format!(
            "{READERS} remote readers of 1 MiB, beside {IDLE_HOLDERS} idle sockets, {STALLED_READERS} stalled readers \
             and {HALF_SENDERS} half-sent requests"
        ),
        baseline_label: format!("the same {READERS} readers alone"),
        unit: "MiB/s",
        thaw,
        baseline,
        ratio: thaw / baseline,
        target: Some(0.8),
        thaw_runs: attacked.iter().map(|r| r.bytes_per_sec / f64::from(1 << 20)).collect(),
        baseline_runs: alone.iter().map(|r| r.bytes_per_sec / f64::from(1 << 20)).collect(),
        notes: format!(
            "1 MiB reads alone {} (p50 {:.1} ms, p99 {:.1} ms, max {:.0} ms); under attack {} (p50 {:.1} ms, \
             p99 {:.1} ms, max {:.0} ms); reads slower than 1 s under attack: {}; attacker connections opened: {}",
            count(&alone),
            pct(&alone, 0.5),
            pct(&alone, 0.99),
            pct(&alone, 1.0),
            count(&attacked),
            pct(&attacked, 0.5),
            pct(&attacked, 0.99),
            pct(&attacked, 1.0),
            attacked.iter().flat_map(|r| &r.latencies_ms).filter(|l| **l > 1000.0).count(),
            made.load(Ordering::Relaxed)
        ),
    })
}

/// `READERS` tasks reading 1 MiB at random offsets for `secs`.
async fn readers(client: &thaw_client::Client, secs: Duration) -> Result<Run> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..READERS {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
            let mut reader = client.open(PATH).await?;
            let mut buf = vec![0u8; READ];
            let (mut bytes, mut lat) = (0u64, Vec::new());
            while started.elapsed() < secs {
                let at = rng.random_range(0..(FILE - READ as u64) / 4096) * 4096;
                let t0 = Instant::now();
                let n = reader.read_at(at, &mut buf).await?;
                ensure!(n == READ, "read {n} of {READ} bytes at {at}");
                lat.push(t0.elapsed().as_secs_f64() * 1e3);
                bytes += n as u64;
            }
            Ok::<_, anyhow::Error>((bytes, lat))
        }));
    }
    let (mut bytes, mut latencies_ms) = (0u64, Vec::new());
    for t in tasks {
        let (b, l) = t.await??;
        bytes += b;
        latencies_ms.extend(l);
    }
    Ok(Run { bytes_per_sec: bytes as f64 / started.elapsed().as_secs_f64(), latencies_ms })
}

/// Starts the attackers; each holds its connection, taking nothing, until
/// the worker closes it or 3 s pass (past the stall timeout), then opens
/// another, counting connections in `made`.
fn attack(
    cluster: &Cluster,
    block: u64,
    stop: Arc<AtomicBool>,
    made: Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let addr = cluster.worker_addr(0).to_string();
    let read = data_request::Request::ReadBlock(ReadBlockRequest { block_id: block, ..Default::default() });
    let body = DataRequest { version: 1, job_id: "attacker".into(), request: Some(read), ..Default::default() }
        .encode_to_vec();
    let mut read_request = (body.len() as u32).to_be_bytes().to_vec();
    read_request.extend(body);
    let kinds = std::iter::repeat_n(Vec::new(), IDLE_HOLDERS)
        .chain(std::iter::repeat_n(read_request, STALLED_READERS))
        .chain(std::iter::repeat_n(vec![0u8, 0], HALF_SENDERS));
    kinds
        .map(|send| {
            let (addr, stop, made) = (addr.clone(), stop.clone(), made.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut sock) = TcpStream::connect(&addr).await else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    made.fetch_add(1, Ordering::Relaxed);
                    if sock.write_all(&send).await.is_err() {
                        continue;
                    }
                    // peek takes nothing; it ends at the worker's close (0) or
                    // at bytes waiting unread (a stalled reader: then wait out the timeout).
                    let mut probe = [0u8; 1];
                    let held = tokio::time::timeout(Duration::from_secs(3), async {
                        while let Ok(n) = sock.peek(&mut probe).await {
                            if n == 0 {
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    });
                    let _ = held.await;
                }
            })
        })
        .collect()
}

//! Benchmark 4, metadata: block-location lookups.
//!
//! Measures how many `stat_blocks(path, true)` calls per second the master answers
//! for a 16-block file whose blocks are all in a worker's MEM tier: the call every
//! read starts with (the master resolves the path, orders each block's replicas by
//! locality to the client, and lists the workers that can read through). N
//! concurrent clients (N = 1, 4, 16), each a tokio task with its own `Client` and
//! so its own HTTP/2 connection, call in a closed loop for a fixed time. There is
//! no external baseline: each N is reported next to the single-client figure, so
//! the ratio is how well lookups scale with concurrent callers.

use std::time::{Duration, Instant};

use anyhow::Result;
use thaw_client::Client;
use thaw_common::proto::WriteType;
use thaw_testkit::Cluster;

use crate::Config;
use crate::measure::{Comparison, median};
use crate::payload;

const PATH: &str = "/bench/sixteen-blocks.bin";
const BLOCKS: u64 = 16;
const META_BLOCK: u64 = 1 << 20;
const CLIENTS: [usize; 3] = [1, 4, 16];

/// Lookups per second of each repeat, and every call's latency.
struct Load {
    rates: Vec<f64>,
    latencies: Vec<Duration>,
}

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let cluster = crate::setup::one_worker(META_BLOCK, 256 << 20).await?;
    let writer = crate::setup::client(&cluster, "h0", "r0")?;
    payload::write_thaw(&writer, PATH, BLOCKS * META_BLOCK, WriteType::MustCache, META_BLOCK).await?;
    let mut loads = Vec::new();
    for n in CLIENTS {
        loads.push(load(&cluster, n, cfg).await?);
    }
    let single = median(&loads[0].rates);
    Ok(CLIENTS.iter().zip(loads).map(|(&n, l)| report(n, l, single)).collect())
}

/// `repeats` closed-loop runs of `n` clients.
async fn load(cluster: &Cluster, n: usize, cfg: &Config) -> Result<Load> {
    let clients: Vec<Client> = (0..n).map(|_| crate::setup::client(cluster, "h0", "r0")).collect::<Result<_>>()?;
    for c in &clients {
        c.stat_blocks(PATH, true).await?; // connect outside the timed span
    }
    let mut out = Load { rates: Vec::new(), latencies: Vec::new() };
    for _ in 0..cfg.repeats {
        let deadline = Instant::now() + Duration::from_secs_f64(cfg.meta_secs);
        let started = Instant::now();
        let tasks: Vec<_> = clients.iter().cloned().map(|c| tokio::spawn(closed_loop(c, deadline))).collect();
        let mut calls = 0;
        for t in tasks {
            let lat = t.await??;
            calls += lat.len();
            out.latencies.extend(lat);
        }
        out.rates.push(calls as f64 / started.elapsed().as_secs_f64());
    }
    Ok(out)
}

/// Calls `stat_blocks` back to back until `deadline`; returns each call's latency.
async fn closed_loop(client: Client, deadline: Instant) -> Result<Vec<Duration>> {
    let mut lat = Vec::new();
    loop {
        let t = Instant::now();
        if t >= deadline {
            return Ok(lat);
        }
        let (info, _) = client.stat_blocks(PATH, true).await?;
        anyhow::ensure!(info.blocks.len() as u64 == BLOCKS, "expected {BLOCKS} blocks, got {}", info.blocks.len());
        lat.push(t.elapsed());
    }
}

fn report(n: usize, mut l: Load, single: f64) -> Comparison {
    l.latencies.sort();
    let pct = |p: f64| l.latencies.get(((l.latencies.len() as f64 - 1.0) * p) as usize).copied().unwrap_or_default();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let rate = median(&l.rates);
    Comparison {
        name: format!("metadata x{n}"),
        thaw_label: format!("stat_blocks of a {BLOCKS}-block file, {n} concurrent clients"),
        baseline_label: "the same with 1 client".into(),
        unit: "ops/s",
        thaw: rate,
        baseline: single,
        ratio: rate / single,
        target: None,
        thaw_runs: l.rates,
        baseline_runs: Vec::new(),
        notes: format!("latency p50 {:.3} ms, p99 {:.3} ms", ms(pct(0.5)), ms(pct(0.99))),
    }
}

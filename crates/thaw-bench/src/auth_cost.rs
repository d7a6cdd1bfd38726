//! What security costs (issue 18, target < 5%): two clusters side by side, the
//! same but for a secret, on the two paths authentication adds work to.
//! - Metadata: `stat_blocks` of a 16-block file by 4 concurrent clients in a
//!   closed loop (benchmark 4's call). Secured, each call carries a token the
//!   master verifies (an HMAC), the path's directories are checked for the
//!   caller's permissions, and each block gets a signed grant.
//! - Remote reads: a client on another host reading a file from the worker's
//!   MEM tier (benchmark 2's read). Secured, every block request carries the
//!   master's grant and the worker checks its HMAC.
//!
//! The secured side's client is an ordinary user ("reader"), so every
//! permission check runs. The ratio is secured / open; 0.95 is the target.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use thaw_client::Client;
use thaw_common::proto::WriteType;
use thaw_testkit::{Cluster, ClusterOptions};

use crate::measure::{Comparison, median};
use crate::payload;
use crate::{BLOCK_SIZE, Config};

const META_PATH: &str = "/bench/meta/sixteen-blocks.bin";
const META_BLOCK: u64 = 1 << 20;
const READ_PATH: &str = "/bench/remote.bin";
const CLIENTS: usize = 4;

async fn cluster(secure: bool, size: u64) -> Result<Cluster> {
    let mut options = ClusterOptions::workers(1);
    options.block_size = BLOCK_SIZE;
    options.workers[0].mem_capacity = (2 << 30).max(2 * size);
    options.secure = secure;
    Cluster::start(crate::setup::thaw_bin()?, options).await
}

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let (open, secured) = (cluster(false, cfg.size).await?, cluster(true, cfg.size).await?);
    for c in [&open, &secured] {
        let admin = crate::setup::client(c, "h0", "r0")?;
        payload::write_thaw(&admin, META_PATH, 16 * META_BLOCK, WriteType::MustCache, META_BLOCK).await?;
        payload::write_thaw(&admin, READ_PATH, cfg.size, WriteType::MustCache, BLOCK_SIZE).await?;
    }
    let readers = |c: &Cluster, host: &str| -> Result<Vec<Client>> {
        (0..CLIENTS).map(|_| crate::setup::client_as(c, host, "r9", "reader")).collect()
    };
    let (open_meta, secured_meta) = (readers(&open, "h0")?, readers(&secured, "h0")?);
    let (open_remote, secured_remote) = (readers(&open, "elsewhere")?, readers(&secured, "elsewhere")?);
    let (mut meta, mut reads) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    let secs = Duration::from_secs_f64(cfg.meta_secs);
    let sum = payload::expected_sum(cfg.size);
    // A warm-up of each, then alternating repeats, each side first in turn.
    lookups(&open_meta, secs).await?;
    lookups(&secured_meta, secs).await?;
    read(&open_remote[0], cfg.size, sum).await?;
    read(&secured_remote[0], cfg.size, sum).await?;
    for i in 0..cfg.repeats {
        let secured_first = i % 2 == 1;
        for secured_turn in [secured_first, !secured_first] {
            let (clients, readers, m, r) = if secured_turn {
                (&secured_meta, &secured_remote, &mut meta.1, &mut reads.1)
            } else {
                (&open_meta, &open_remote, &mut meta.0, &mut reads.0)
            };
            m.push(lookups(clients, secs).await?);
            r.push(read(&readers[0], cfg.size, sum).await?);
        }
    }
    let compare = |name: &str, what: &str, unit: &'static str, (open, secured): (Vec<f64>, Vec<f64>)| {
        let (o, s) = (median(&open), median(&secured));
        Comparison {
            name: name.into(),
            thaw_label: format!("{what}, with a secret (tokens, permissions, grants)"),
            baseline_label: format!("{what}, no secret"),
            unit,
            thaw: s,
            baseline: o,
            ratio: s / o,
            target: Some(0.95),
            thaw_runs: secured,
            baseline_runs: open,
            notes: String::new(),
        }
    };
    Ok(vec![
        compare("auth-metadata", &format!("stat_blocks of 16 blocks, {CLIENTS} clients"), "calls/s", meta),
        compare("auth-remote-read", "remote MEM read streamed over loopback TCP", "MiB/s", reads),
    ])
}

/// Calls per second of `clients` calling `stat_blocks` back to back for `secs`.
async fn lookups(clients: &[Client], secs: Duration) -> Result<f64> {
    let deadline = Instant::now() + secs;
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .cloned()
        .map(|c| {
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let (info, _) = c.stat_blocks(META_PATH, true).await?;
                    ensure!(info.blocks.len() == 16, "expected 16 blocks, got {}", info.blocks.len());
                    n += 1;
                }
                Ok(n)
            })
        })
        .collect();
    let mut calls = 0;
    for t in tasks {
        calls += t.await??;
    }
    Ok(calls as f64 / started.elapsed().as_secs_f64())
}

/// MiB/s of one remote read of the whole file, checked.
async fn read(client: &Client, size: u64, sum: u64) -> Result<f64> {
    let (t, src) = payload::read_thaw(client, READ_PATH).await?;
    ensure!(src.remote_mem == size, "not every byte was streamed from remote MEM: {src:?}");
    Ok(t.check(size, sum, "remote MEM read")?.mib_per_sec())
}

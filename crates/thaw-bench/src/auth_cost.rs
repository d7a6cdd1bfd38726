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
//!
//! A third cluster adds TLS to the secret (`auth-tls-*` rows, no target):
//! what encryption costs on the same two paths.

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

async fn cluster((secure, tls): (bool, bool), size: u64) -> Result<Cluster> {
    let mut options = ClusterOptions::workers(1);
    options.block_size = BLOCK_SIZE;
    options.workers[0].mem_capacity = (2 << 30).max(2 * size);
    options.secure = secure;
    options.tls = tls;
    Cluster::start(crate::setup::thaw_bin()?, options).await
}

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let open = cluster((false, false), cfg.size).await?;
    let secured = cluster((true, false), cfg.size).await?;
    let tls = cluster((true, true), cfg.size).await?;
    for c in [&open, &secured, &tls] {
        let admin = crate::setup::client(c, "h0", "r0")?;
        payload::write_thaw(&admin, META_PATH, 16 * META_BLOCK, WriteType::MustCache, META_BLOCK).await?;
        payload::write_thaw(&admin, READ_PATH, cfg.size, WriteType::MustCache, BLOCK_SIZE).await?;
    }
    let readers = |c: &Cluster, host: &str| -> Result<Vec<Client>> {
        (0..CLIENTS).map(|_| crate::setup::client_as(c, host, "r9", "reader")).collect()
    };
    let sides = [(&open, "open"), (&secured, "secret"), (&tls, "secret and TLS")];
    let mut meta_clients = Vec::new();
    let mut remote_clients = Vec::new();
    for (c, _) in sides {
        meta_clients.push(readers(c, "h0")?);
        remote_clients.push(readers(c, "elsewhere")?);
    }
    let mut meta: Vec<Vec<f64>> = vec![Vec::new(); 3];
    let mut reads: Vec<Vec<f64>> = vec![Vec::new(); 3];
    let secs = Duration::from_secs_f64(cfg.meta_secs);
    let sum = payload::expected_sum(cfg.size);
    // A warm-up of each, then repeats in a rotating order, so that no side
    // always runs first or last.
    for s in 0..3 {
        lookups(&meta_clients[s], secs).await?;
        read(&remote_clients[s][0], cfg.size, sum).await?;
    }
    for i in 0..cfg.repeats {
        for k in 0..3 {
            let s = (i + k) % 3;
            meta[s].push(lookups(&meta_clients[s], secs).await?);
            reads[s].push(read(&remote_clients[s][0], cfg.size, sum).await?);
        }
    }
    let compare = |name: &str, what: &str, unit: &'static str, runs: &[Vec<f64>], side: usize, target| {
        let (o, s) = (median(&runs[0]), median(&runs[side]));
        Comparison {
            name: name.into(),
            thaw_label: format!("{what}, with a {}", sides[side].1),
            baseline_label: format!("{what}, open"),
            unit,
            thaw: s,
            baseline: o,
            ratio: s / o,
            target,
            thaw_runs: runs[side].clone(),
            baseline_runs: runs[0].clone(),
            notes: String::new(),
        }
    };
    let lookup = format!("stat_blocks of 16 blocks, {CLIENTS} clients");
    let remote = "remote MEM read, loopback";
    Ok(vec![
        compare("auth-metadata", &lookup, "calls/s", &meta, 1, Some(0.95)),
        compare("auth-remote-read", remote, "MiB/s", &reads, 1, Some(0.95)),
        compare("auth-tls-metadata", &lookup, "calls/s", &meta, 2, None),
        compare("auth-tls-remote-read", remote, "MiB/s", &reads, 2, None),
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

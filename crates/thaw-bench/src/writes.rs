//! Write throughput by write type, Tachyon, Fig. 1's shape: `async-through`
//! (memory now, under-store in the background) against a raw tmpfs write and
//! against synchronous writes (`replicated:3` to three workers' DISK tiers,
//! `through` and `cache-through` to the under-store), with 1 and 4 writers.
//!
//! All six run side by side in one cluster (3 workers, the writers beside
//! worker 0), in turn, the order rotating each repeat; each figure is the median
//! MiB/s of the repeats. Between runs the files are deleted and the background
//! checkpoints of the async-through run drain (untimed), so they do not take
//! disk time from the next configuration's run.
//!
//! Twice: on this machine's own devices (tmpfs memory; a virtual disk whose
//! page cache absorbs writes, so "disk" writes run at memory-copy speed), and
//! with the emulated device model in front of the DISK tier and the under-store
//! (`disk=150MiB/s,ufs=150MiB/s`, an HDD-like disk), which Tachyon's
//! comparison with replicated disk writes assumes.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use thaw_client::{Client, WriteOptions};
use thaw_common::proto::WriteType;
use thaw_common::size::format_size;
use thaw_testkit::{Cluster, ClusterOptions};

use crate::Config;
use crate::measure::{Comparison, median};
use crate::payload::{BUF, fill};
use crate::setup::{client, thaw_bin};

/// The device model of the emulated run.
pub const HDD: &str = "disk=150MiB/s,ufs=150MiB/s";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tmpfs,
    Thaw(WriteType, u32),
}

const KINDS: [(&str, Kind); 6] = [
    ("tmpfs", Kind::Tmpfs),
    ("must-cache", Kind::Thaw(WriteType::MustCache, 1)),
    ("async-through", Kind::Thaw(WriteType::AsyncThrough, 1)),
    ("cache-through", Kind::Thaw(WriteType::CacheThrough, 1)),
    ("through", Kind::Thaw(WriteType::Through, 1)),
    ("replicated:3", Kind::Thaw(WriteType::ReplicatedDisk, 3)),
];

/// Runs both device settings; `size` bytes per run, split among the writers.
pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let mut out = Vec::new();
    for model in [None, Some(HDD)] {
        let c = start(cfg.size, model).await?;
        for writers in [1usize, 4] {
            out.extend(measure(&c, cfg, writers, model).await?);
        }
    }
    Ok(out)
}

async fn start(size: u64, model: Option<&str>) -> Result<Cluster> {
    let mut o = ClusterOptions::workers(3);
    o.block_size = 64 << 20;
    o.heartbeat_ms = 200;
    for w in &mut o.workers {
        // Room for one run in memory (plus the slack of 4 writers' last blocks).
        w.mem_capacity = size + (512 << 20);
        w.disk_capacity = size + (512 << 20);
        w.device_model = model.map(str::to_string);
    }
    Cluster::start(thaw_bin()?, o).await
}

async fn measure(c: &Cluster, cfg: &Config, writers: usize, model: Option<&str>) -> Result<Vec<Comparison>> {
    let writer = client(c, "h0", "r0")?;
    let per = (cfg.size / writers as u64).max(1);
    let mut data = vec![0u8; BUF];
    fill(&mut data, 0);
    let shm = tempfile::Builder::new().prefix("thaw-bench-writes-").tempdir_in("/dev/shm")?;
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];
    // One untimed round first, then the timed ones, each in a rotated order.
    for round in 0..=cfg.repeats {
        for k in 0..KINDS.len() {
            let i = (k + round) % KINDS.len();
            let (name, kind) = KINDS[i];
            let started = Instant::now();
            match kind {
                Kind::Tmpfs => tmpfs_write(shm.path(), writers, per, &data).await?,
                Kind::Thaw(wt, n) => thaw_write(&writer, writers, per, wt, n, &data).await?,
            }
            let secs = started.elapsed().as_secs_f64();
            if round > 0 {
                runs[i].push((per * writers as u64) as f64 / secs / (1 << 20) as f64);
            }
            settle(c, &writer, name, shm.path()).await?;
        }
    }
    let label = |name: &str| match model {
        None => format!("{name}, {writers} writer(s), this machine's devices"),
        Some(m) => format!("{name}, {writers} writer(s), emulated devices {m}"),
    };
    let suffix = format!("{writers}w{}", if model.is_some() { "-hdd" } else { "" });
    let fig = |i: usize| median(&runs[i]);
    let row = |name: String, t: usize, b: usize, target: Option<f64>| Comparison {
        name,
        thaw_label: label(KINDS[t].0),
        baseline_label: label(KINDS[b].0),
        unit: "MiB/s",
        thaw: fig(t),
        baseline: fig(b),
        ratio: fig(t) / fig(b),
        target,
        thaw_runs: runs[t].clone(),
        baseline_runs: runs[b].clone(),
        notes: format!("{} per run; {}", format_size(per * writers as u64), table(&runs)),
    };
    let (tmpfs, must, asyncw, cache, through, rep3) = (0, 1, 2, 3, 4, 5);
    let out = vec![
        row(format!("write-async-vs-tmpfs-{suffix}"), asyncw, tmpfs, Some(0.8)),
        row(format!("write-async-vs-rep3-{suffix}"), asyncw, rep3, Some(10.0)),
        row(format!("write-must-cache-vs-tmpfs-{suffix}"), must, tmpfs, None),
        row(format!("write-cache-through-vs-tmpfs-{suffix}"), cache, tmpfs, None),
        row(format!("write-through-vs-tmpfs-{suffix}"), through, tmpfs, None),
    ];
    Ok(out)
}

/// Every configuration's median, for the notes.
fn table(runs: &[Vec<f64>]) -> String {
    KINDS.iter().zip(runs).map(|((n, _), r)| format!("{n} {:.0}", median(r))).collect::<Vec<_>>().join(", ")
}

async fn tmpfs_write(dir: &std::path::Path, writers: usize, per: u64, data: &[u8]) -> Result<()> {
    let handles: Vec<_> = (0..writers)
        .map(|i| {
            let (path, data) = (dir.join(format!("f{i}")), data.to_vec());
            tokio::task::spawn_blocking(move || -> Result<()> {
                use std::io::Write;
                let mut f = std::fs::File::create(path)?;
                let mut at = 0;
                while at < per {
                    let k = (per - at).min(data.len() as u64) as usize;
                    f.write_all(&data[..k])?;
                    at += k as u64;
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.await??;
    }
    Ok(())
}

async fn thaw_write(c: &Client, writers: usize, per: u64, wt: WriteType, n: u32, data: &[u8]) -> Result<()> {
    let tasks: Vec<_> = (0..writers)
        .map(|i| {
            let (c, data) = (c.clone(), data.to_vec());
            tokio::spawn(async move {
                let opts = WriteOptions { write_type: wt, replication: n, overwrite: true, ..Default::default() };
                let mut w = c.create(&format!("/bench-writes/f{i}"), opts).await?;
                let mut at = 0;
                while at < per {
                    let k = (per - at).min(data.len() as u64) as usize;
                    w.write(&data[..k]).await?;
                    at += k as u64;
                }
                w.close().await?;
                Ok::<(), anyhow::Error>(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// After a run: no checkpoint left to write, then the files gone (and the
/// workers told, with their next heartbeat).
async fn settle(cl: &Cluster, c: &Client, name: &str, shm: &std::path::Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let p = c.cluster_status().await?.persistence.unwrap_or_default();
        if p.not_persisted + p.persisting == 0 || name != "async-through" {
            break;
        }
        if Instant::now() > deadline {
            bail!("checkpoints did not drain in 10 minutes:\n{}", cl.logs());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if name == "tmpfs" {
        for e in std::fs::read_dir(shm)? {
            std::fs::remove_file(e?.path())?;
        }
    } else {
        c.delete("/bench-writes", true).await?;
        // Two heartbeats: the workers drop the blocks before the next run.
        tokio::time::sleep(Duration::from_millis(450)).await;
    }
    Ok(())
}

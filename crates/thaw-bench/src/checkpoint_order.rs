//! Checkpointing newest-first against creation order (Tachyon, section 2.7), on the
//! paper's own example: a chain A1 -> A2 -> ... where each file is derived from
//! the one before, written faster than checkpoints can keep up with.
//!
//! One worker, checkpoints capped at `BANDWIDTH`; a writer makes `CHAIN` files
//! of `FILE` bytes, one every `GAP` (a generation rate above the checkpoint
//! bandwidth), async-through. At the moment the `FAIL_AT`-th file is written a
//! worker failure would lose every unpersisted file; rebuilding the newest
//! (A_FAIL_AT) means recomputing every file after the newest persisted one in
//! the chain, so that count is the figure (lower is better). Then the writer
//! goes on to the end of the chain and the checkpoint lag of every file (from
//! its write's completion to its persisted state) is measured until all are
//! persisted. Both orders run in turn, each on a fresh cluster, the same way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use thaw_client::WriteOptions;
use thaw_common::proto::WriteType;
use thaw_common::size::format_size;
use thaw_testkit::{Cluster, ClusterOptions};

use crate::Config;
use crate::measure::{Comparison, median};
use crate::payload::{BUF, fill};
use crate::setup::{client, thaw_bin};

const BANDWIDTH: u64 = 64 << 20;
const FILE: u64 = 16 << 20;
const GAP: Duration = Duration::from_millis(150);
const CHAIN: usize = 24;
const FAIL_AT: usize = 16;

/// What one order did.
#[derive(Debug, Clone)]
struct Outcome {
    /// Files to recompute to rebuild A_FAIL_AT after a failure at its write.
    recompute: Vec<f64>,
    /// Unpersisted files at that moment.
    unpersisted: Vec<f64>,
    /// Per file, ms from write to persisted (all repeats).
    lags: Vec<f64>,
}

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let mut newest = Outcome { recompute: vec![], unpersisted: vec![], lags: vec![] };
    let mut creation = newest.clone();
    for r in 0..cfg.repeats {
        // Alternate which goes first.
        let orders = if r % 2 == 0 { ["newest", "creation"] } else { ["creation", "newest"] };
        for order in orders {
            let out = if order == "newest" { &mut newest } else { &mut creation };
            one(order, out).await?;
        }
    }
    let pct = |v: &[f64], p: f64| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
    };
    let setting = format!(
        "chain of {CHAIN} files of {} written one per {} ms ({} per second) against checkpoints at {}/s; median of {} runs",
        format_size(FILE),
        GAP.as_millis(),
        format_size((FILE as f64 / GAP.as_secs_f64()) as u64),
        format_size(BANDWIDTH),
        cfg.repeats
    );
    let row = |name: &str, unit: &'static str, t: Vec<f64>, b: Vec<f64>, tf: f64, bf: f64, notes: String| Comparison {
        name: name.to_string(),
        thaw_label: "checkpoints newest-first (Tachyon, section 2.7)".into(),
        baseline_label: "checkpoints in creation order".into(),
        unit,
        thaw: tf,
        baseline: bf,
        ratio: tf / bf,
        target: None,
        thaw_runs: t,
        baseline_runs: b,
        notes,
    };
    Ok(vec![
        row(
            "ckpt-recompute-after-failure",
            "files",
            newest.recompute.clone(),
            creation.recompute.clone(),
            median(&newest.recompute),
            median(&creation.recompute),
            format!(
                "files to recompute to rebuild A{FAIL_AT} after a failure as it is written (lower is better); \
                 unpersisted then: newest {:.0}, creation {:.0}; {setting}",
                median(&newest.unpersisted),
                median(&creation.unpersisted)
            ),
        ),
        row(
            "ckpt-lag-median",
            "ms",
            vec![],
            vec![],
            median(&newest.lags),
            median(&creation.lags),
            format!("write-to-persisted lag of every file, median (lower is better); {setting}"),
        ),
        row(
            "ckpt-lag-p90",
            "ms",
            vec![],
            vec![],
            pct(&newest.lags, 0.9),
            pct(&creation.lags, 0.9),
            format!(
                "90th percentile; max: newest {:.0} ms, creation {:.0} ms (newest-first lets the oldest files wait)",
                pct(&newest.lags, 1.0),
                pct(&creation.lags, 1.0)
            ),
        ),
    ])
}

async fn one(order: &str, out: &mut Outcome) -> Result<()> {
    let mut o = ClusterOptions::workers(1);
    o.block_size = FILE;
    o.heartbeat_ms = 200;
    o.workers[0].mem_capacity = FILE * (CHAIN as u64 + 4);
    o.workers[0].extra_args = vec!["--checkpoint-bandwidth".into(), BANDWIDTH.to_string()];
    o.master_args = vec!["--checkpoint-order".into(), order.into()];
    let c = Cluster::start(thaw_bin()?, o).await?;
    let writer = client(&c, "h0", "r0")?;
    let watcher = client(&c, "h0", "r0")?;
    let mut data = vec![0u8; BUF];
    fill(&mut data, 0);
    // Watches for persisted files every 10 ms from the start to the end.
    let persisted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let poller = {
        let (persisted, stop) = (persisted.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let now = Instant::now();
                for f in watcher.list("/chain").await.unwrap_or_default() {
                    if f.persisted {
                        persisted.lock().unwrap().entry(f.name).or_insert(now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let mut written: HashMap<String, Instant> = HashMap::new();
    let opts = WriteOptions { write_type: WriteType::AsyncThrough, ..Default::default() };
    let mut next = Instant::now();
    for i in 1..=CHAIN {
        tokio::time::sleep_until(next.into()).await;
        next += GAP;
        let mut w = writer.create(&format!("/chain/a{i:02}"), opts.clone()).await?;
        let mut at = 0;
        while at < FILE {
            let k = (FILE - at).min(BUF as u64) as usize;
            w.write(&data[..k]).await?;
            at += k as u64;
        }
        w.close().await?;
        written.insert(format!("a{i:02}"), Instant::now());
        if i == FAIL_AT {
            // The failure's moment: what the master says is persisted now.
            let now: Vec<String> =
                writer.list("/chain").await?.into_iter().filter(|f| f.persisted).map(|f| f.name).collect();
            let newest_persisted = (1..=FAIL_AT).rev().find(|k| now.contains(&format!("a{k:02}")));
            out.recompute.push((FAIL_AT - newest_persisted.unwrap_or(0)) as f64);
            out.unpersisted.push((FAIL_AT - now.len()) as f64);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while persisted.lock().unwrap().len() < CHAIN {
        if Instant::now() > deadline {
            bail!("checkpoints of the chain did not finish in 2 minutes ({order}):\n{}", c.logs());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    poller.await?;
    for (name, at) in persisted.lock().unwrap().iter() {
        out.lags.push(at.saturating_duration_since(written[name]).as_secs_f64() * 1000.0);
    }
    Ok(())
}

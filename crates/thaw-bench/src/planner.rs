//! The dyrs planner's cost (DYRS, section III-D): one pass of Algorithm 1 with
//! 10,000 pending blocks on 7 workers, each block with 3 DISK replicas and the
//! workers with different estimates and queues. A pass collects every pending
//! block but targets only the front of the order, its window
//! (`PLAN_WINDOW + PLAN_WINDOW_PER_WORKER` per live worker, 2,496 here), so the
//! per-block figure divides by the blocks the pass targeted, counted after it.
//! The paper claims "under a millisecond for 50GB of pending migrations", i.e.
//! about 200 blocks of 256 MB (the block size of its mappers, DYRS, section
//! II-C) each given a target: 200 blocks per millisecond is the baseline.

use std::time::{Duration, Instant};

use anyhow::Result;
use thaw_common::ids::block_id;
use thaw_common::proto::{EvictionMode, MigrationSource, SourceEstimate, Tier, TierUsage, WorkerMigrationReport};
use thaw_master::cluster::Cluster;
use thaw_master::migration::{BlockSpec, Migrations, Policy, Priority};

use crate::Config;
use crate::measure::{Comparison, median};

const WORKERS: usize = 7;
const PENDING: u64 = 10_000;
const BLOCK: u64 = 64 << 20;
/// DYRS, section III-D: 50 GB in under 1 ms, in 256 MB blocks.
const PAPER_BLOCKS_PER_MS: f64 = 200.0;

pub fn run(cfg: &Config) -> Result<Comparison> {
    let (cluster, mut m) = setup()?;
    let runs = (cfg.repeats * 10).max(20);
    m.plan(&cluster); // warm-up
    let targeted = targeted(&m);
    anyhow::ensure!(targeted > 0, "a planning pass targeted no block");
    let mut per_ms = Vec::new();
    let mut millis = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        m.plan(&cluster);
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        millis.push(ms);
        per_ms.push(targeted as f64 / ms);
    }
    let thaw = median(&per_ms);
    Ok(Comparison {
        name: "planner".into(),
        thaw_label: format!(
            "Algorithm 1: a pass with {PENDING} pending blocks targets {targeted}, {WORKERS} workers x 3 replicas"
        ),
        baseline_label: "DYRS, section III-D: 50 GB (200 blocks of 256 MB) in under 1 ms".into(),
        unit: "blocks/ms",
        thaw,
        baseline: PAPER_BLOCKS_PER_MS,
        ratio: thaw / PAPER_BLOCKS_PER_MS,
        target: Some(1.0),
        thaw_runs: per_ms,
        baseline_runs: vec![PAPER_BLOCKS_PER_MS],
        notes: format!("one pass ({PENDING} pending, {targeted} targeted): median {:.2} ms of {runs}", median(&millis)),
    })
}

/// Pending blocks the last pass gave a target: the ones it planned.
fn targeted(m: &Migrations) -> usize {
    (0..PENDING).filter(|&b| m.target_of(block_id(1 + b / 1000, b % 1000)).is_some()).count()
}

/// The cluster and its pending migrations, before any planning pass.
fn setup() -> Result<(Cluster, Migrations)> {
    let now = Instant::now();
    let mut cluster = Cluster::default();
    let tiers = vec![
        TierUsage { tier: Tier::Mem as i32, capacity: 1 << 40, ..Default::default() },
        TierUsage { tier: Tier::Disk as i32, capacity: 1 << 40, ..Default::default() },
    ];
    let ids: Vec<u64> = (0..WORKERS)
        .map(|i| cluster.register(&format!("w{i}:1"), &format!("h{i}"), "r0", tiers.clone(), now))
        .collect();
    for b in 0..PENDING {
        for r in 0..3 {
            let w = ids[((b * 7 + r * 3) % WORKERS as u64) as usize];
            cluster.add_replica(block_id(1 + b / 1000, b % 1000), w, Tier::Disk, BLOCK);
        }
    }
    let mut m = Migrations::new(Policy::Dyrs, Priority::SmallestJobFirst, Duration::from_secs(3600));
    for (i, &w) in ids.iter().enumerate() {
        let report = WorkerMigrationReport {
            sources: vec![SourceEstimate {
                source: MigrationSource::Disk as i32,
                ns_per_byte: 5.0 + 3.0 * i as f64,
                queued: i as u32 % 3,
                queued_bytes: (i as u64 % 3) * BLOCK,
                ..Default::default()
            }],
            ..Default::default()
        };
        m.heartbeat(&cluster, w, Some(report), Vec::new(), Duration::from_secs(1));
    }
    // Ten jobs of different sizes, so the smallest-job-first key has work to do.
    for j in 0..10u64 {
        let blocks: Vec<BlockSpec> = (0..PENDING)
            .filter(|b| b % 10 == j)
            .map(|b| BlockSpec { block: block_id(1 + b / 1000, b % 1000), length: BLOCK, ufs: None })
            .take(((j + 1) * 200) as usize)
            .collect();
        m.migrate(&cluster, &format!("job{j}"), EvictionMode::Explicit, None, blocks, now)?;
    }
    // The rest of the blocks as one big job.
    let rest: Vec<BlockSpec> =
        (0..PENDING).map(|b| BlockSpec { block: block_id(1 + b / 1000, b % 1000), length: BLOCK, ufs: None }).collect();
    m.migrate(&cluster, "big", EvictionMode::Explicit, None, rest, now)?;
    anyhow::ensure!(m.pending() == PENDING as usize, "expected {PENDING} pending, got {}", m.pending());
    Ok((cluster, m))
}

#[cfg(test)]
mod tests {
    use thaw_master::migration::{PLAN_WINDOW, PLAN_WINDOW_PER_WORKER};

    use super::*;

    /// The per-block figure divides by the blocks a pass plans: its window,
    /// not every pending block.
    #[test]
    fn a_pass_is_counted_by_the_blocks_it_targets() {
        let (cluster, mut m) = setup().unwrap();
        m.plan(&cluster);
        let window = PLAN_WINDOW + PLAN_WINDOW_PER_WORKER * WORKERS;
        assert!(window < PENDING as usize, "the bench must have more pending blocks than a window");
        assert_eq!(targeted(&m), window);
    }
}

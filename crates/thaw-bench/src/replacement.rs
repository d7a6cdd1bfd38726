//! The cost of a cache replacement decision (issue target: under 50 us at
//! 100,000 cached blocks), per policy, on a real MEM tier of 100,000 block
//! files in tmpfs, 1,000 files of 100 blocks read by 20 applications of
//! three affinity classes. Three figures per policy:
//!
//! - **decision**: what a read's fill asks when memory is full (the ordered
//!   index walked from its cheapest end, each victim checked for a reader
//!   holding it open), without carrying it out;
//! - **fill**: the whole cycle a read's fill costs the tier: counting the read,
//!   reserving (evicting one block, deleting its file), committing the new
//!   block (a rename) and re-ranking its file;
//! - **hit**: a read of a cached block (history and re-ranking its file).
//!
//! The baseline is the target (50 us); beside it, the same decision made by
//! sorting all 100,000 candidates (`Policy::choose`), which the index replaces.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use thaw_common::ids::block_id;
use thaw_common::proto::Tier;
use thaw_worker::affinity::Affinities;
use thaw_worker::replacement::{Policy, Request};
use thaw_worker::tier::{CacheConfig, Need, TierStore};

use crate::Config;
use crate::measure::{Comparison, median};

const BLOCKS: u64 = 100_000;
const PER_FILE: u64 = 100;
/// Recorded length of each block (the files themselves are empty: tmpfs pages
/// are not what is measured).
const LEN: u64 = 4096;
const TARGET_US: f64 = 50.0;

fn job(i: u64) -> String {
    format!("app-{}", i % 20)
}

pub fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let mut out = Vec::new();
    for policy in [Policy::Lru, Policy::Lfu, Policy::Affinity, Policy::Cava] {
        out.push(one(cfg, policy)?);
    }
    Ok(out)
}

fn one(cfg: &Config, policy: Policy) -> Result<Comparison> {
    let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir())?;
    let affinities = Arc::new(Affinities::default());
    let values = [0.4, 0.2, 0.05];
    affinities.set((0..20).map(|i| (job(i), values[(i % 3) as usize], 1.0)), 0.2);
    let cache = CacheConfig { policy, window: Duration::from_secs(3600), affinities };
    let tier = TierStore::open(Tier::Mem, dir.path(), BLOCKS * LEN, true, cache)?;
    let none = |_: u64| false;
    let setup = Instant::now();
    for b in 0..BLOCKS {
        let block = block_id(1 + b / PER_FILE, b % PER_FILE);
        let reader = job(b / PER_FILE);
        tier.note_request(block, &reader);
        let (r, _) = tier.reserve_for(LEN, &none, Need::Cache { block, job: &reader });
        let temp = tier.temp_path(block);
        std::fs::File::create(&temp)?;
        tier.commit_for(block, &temp, LEN, r?, false, Some(&reader))?;
        tier.access(block, &reader);
    }
    // Some files read again, so frequencies differ.
    for f in (1..=BLOCKS / PER_FILE).step_by(7) {
        for i in 0..PER_FILE {
            tier.access(block_id(f, i), &job(f + 1));
        }
    }
    let setup = setup.elapsed();
    let in_use = |b: u64| tier.in_use(b);
    let runs = (cfg.repeats * 400).max(2000);
    // A new file's block read by a high-affinity application: the decision.
    let asker = job(0);
    let new_block = |i: u64| block_id(10_000 + i, 0);
    tier.note_request(new_block(0), &asker);
    let mut decide_us = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let d = tier.plan(LEN, &in_use, Need::Cache { block: new_block(0), job: &asker });
        decide_us.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(d);
    }
    // The same decision by sorting every candidate (what the index replaces).
    let sort_runs = 20;
    let candidates = tier.candidates(&none);
    let mut sort_us = Vec::new();
    for _ in 0..sort_runs {
        let t = Instant::now();
        let d = policy.choose(&candidates, LEN, Request::Cache { owner: 1, benefit: u64::MAX });
        sort_us.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(d);
    }
    // Whole fills (each evicting one block) and hits.
    let mut fill_us = Vec::new();
    let mut dropped = 0;
    for i in 1..=(runs as u64 / 4) {
        let block = new_block(i);
        let t = Instant::now();
        tier.note_request(block, &asker);
        let (r, _) = tier.reserve_for(LEN, &in_use, Need::Cache { block, job: &asker });
        match r {
            Ok(r) => {
                let temp = tier.temp_path(block);
                std::fs::File::create(&temp)?;
                tier.commit_for(block, &temp, LEN, r, false, Some(&asker))?;
            }
            Err(_) => dropped += 1,
        }
        fill_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let mut hit_us = Vec::new();
    for i in 0..runs as u64 {
        let block = block_id(1 + (i * 13) % (BLOCKS / PER_FILE), i % PER_FILE);
        let t = Instant::now();
        std::hint::black_box(tier.access(block, &job(i)));
        hit_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let decision = median(&decide_us);
    let p99 = {
        let mut v = decide_us.clone();
        v.sort_by(f64::total_cmp);
        v[(v.len() * 99) / 100]
    };
    Ok(Comparison {
        name: format!("replacement-{}", policy.name()),
        thaw_label: format!("{} decision at {BLOCKS} cached blocks (index)", policy.name()),
        baseline_label: "target: 50 us per decision".into(),
        unit: "us",
        thaw: decision,
        baseline: TARGET_US,
        ratio: TARGET_US / decision,
        target: Some(1.0),
        thaw_runs: decide_us,
        baseline_runs: vec![TARGET_US],
        notes: format!(
            "decision p99 {p99:.1} us; sorting all candidates instead {:.0} us; whole fill {:.1} us ({dropped} of {} dropped); hit {:.1} us; setup of {BLOCKS} blocks {:.1} s",
            median(&sort_us),
            median(&fill_us),
            fill_us.len(),
            median(&hit_us),
            setup.as_secs_f64()
        ),
    })
}

//! Issue 13, early asks made light: what the master spends on a worker's early
//! ask for migration work, full (the old early heartbeat: tier use, job
//! counters, and an answer listing every live job) next to light (the
//! migration report and reads only; an answer of migration orders only).
//!
//! An in-process master (the same code the `thaw master` binary runs, without
//! gRPC) with `JOBS` live jobs, each waiting on a migration, and one worker
//! that has counters for every job (as a SWIM replay's workers do). Each call
//! is the worker's ask with its queue drained; the answer binds what the
//! planner targeted at it. Figures: master handling time per call (median of
//! batches), and the encoded bytes of the request and the answer.

use std::time::Instant;

use anyhow::Result;
use prost::Message;
use thaw_common::proto::{
    HeartbeatRequest, JobAccess, MigrateRequest, MigrationSource, RegisterWorkerRequest, SourceEstimate, Tier,
    TierUsage, WorkerMigrationReport,
};
use thaw_master::master::{Master, MasterConfig};

use crate::Config;
use crate::measure::{Comparison, median};

/// Live jobs at the master (a SWIM replay keeps a few hundred).
const JOBS: usize = 300;
/// Calls per timed batch.
const BATCH: usize = 200;

pub async fn run(cfg: &Config) -> Result<Comparison> {
    let dir = tempfile::tempdir()?;
    let ufs = dir.path().join("ufs");
    std::fs::create_dir_all(&ufs)?;
    for j in 0..JOBS {
        std::fs::write(ufs.join(format!("in-{j}.bin")), vec![7u8; 4096])?;
    }
    let master = Master::open(MasterConfig::new(dir.path().join("journal"), ufs.to_string_lossy().to_string()))?;
    let tiers = vec![
        TierUsage {
            tier: Tier::Mem as i32,
            capacity: 8 << 30,
            used: 1 << 30,
            blocks: 16,
            dir: "/dev/shm/thaw/w0".into(),
            evictable: 1 << 30,
            replacement: "lru".into(),
            ..Default::default()
        },
        TierUsage {
            tier: Tier::Disk as i32,
            capacity: 64 << 30,
            used: 9 << 30,
            blocks: 150,
            dir: "/var/thaw/w0".into(),
            pinned: 9 << 30,
            replacement: "lru".into(),
            ..Default::default()
        },
    ];
    let reg = master.register_worker(RegisterWorkerRequest {
        data_address: "127.0.0.1:1".into(),
        host: "h0".into(),
        rack: "r0".into(),
        tiers: tiers.clone(),
        blocks: Vec::new(),
        metrics_address: String::new(),
    })?;
    for j in 0..JOBS {
        let req = MigrateRequest { job_id: job_name(j), paths: vec![format!("/in-{j}.bin")], ..Default::default() };
        master.migrate(req).await?;
    }
    master.plan();
    let report = WorkerMigrationReport {
        sources: vec![SourceEstimate {
            source: MigrationSource::Ufs as i32,
            ns_per_byte: 2.0,
            ns_per_migration: 2e6,
            ..Default::default()
        }],
        buffer_limit: 6 << 30,
        ..Default::default()
    };
    let counters: Vec<JobAccess> = (0..JOBS)
        .map(|j| JobAccess { job_id: job_name(j), reads: 40, bytes_read: 1 << 30, ..Default::default() })
        .collect();
    let full = HeartbeatRequest {
        worker_id: reg.worker_id,
        master_epoch: reg.master_epoch,
        tiers,
        jobs: counters,
        migration: Some(report.clone()),
        ..Default::default()
    };
    let light = HeartbeatRequest {
        worker_id: reg.worker_id,
        master_epoch: reg.master_epoch,
        migration: Some(report),
        light: true,
        ..Default::default()
    };
    let (mut full_us, mut light_us) = (Vec::new(), Vec::new());
    let (mut full_bytes, mut light_bytes) = (0, 0);
    let batches = (cfg.repeats * 4).max(10);
    for i in 0..=batches {
        for (req, us, bytes) in [(&full, &mut full_us, &mut full_bytes), (&light, &mut light_us, &mut light_bytes)] {
            let t = Instant::now();
            let mut answer = 0;
            for _ in 0..BATCH {
                answer = answer.max(master.heartbeat(req.clone()).encoded_len());
            }
            if i > 0 {
                us.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
            }
            *bytes = answer;
        }
    }
    let (f, l) = (median(&full_us), median(&light_us));
    Ok(Comparison {
        name: "early-ask".into(),
        thaw_label: format!("light ask: master time per call, {JOBS} live jobs"),
        baseline_label: "full early heartbeat: master time per call".into(),
        unit: "us",
        thaw: l,
        baseline: f,
        ratio: l / f,
        target: None,
        thaw_runs: light_us,
        baseline_runs: full_us,
        notes: format!(
            "request {} B light vs {} B full; answer {} B light vs {} B full",
            light.encoded_len(),
            full.encoded_len(),
            light_bytes,
            full_bytes
        ),
    })
}

fn job_name(j: usize) -> String {
    format!("swim-job-{j:05}-a3f9c2")
}

//! The faults: kill -9 and restart, SIGSTOP and SIGCONT, and tier fills.

use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Result, bail};
use thaw_client::WriteOptions;
use thaw_common::ErrorKind;
use thaw_common::proto::{Tier, WriteType};

use super::load::{Outcome, describe, outcome};
use super::{Acked, ChaosReport, FILL_FILE, Ledger, OP_TIMEOUT, Rng, client_at, lock};
use crate::Cluster;

fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling a child process this cluster started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// One fault, while the load runs: kill -9 and restart a worker or the
/// master, stop one of them for a while and let it go on, or fill a worker's
/// MEM or DISK tier for a while.
pub(super) async fn fault(
    c: &mut Cluster,
    rng: &mut Rng,
    report: &Mutex<ChaosReport>,
    fills: &mut Ledger,
    cycle: usize,
    fault: Fault,
    worker: usize,
) -> Result<()> {
    match fault {
        Fault::KillWorker => {
            c.kill_worker(worker);
            tokio::time::sleep(Duration::from_millis(300 + rng.below(1500))).await;
            c.restart_worker(worker).await?;
        }
        Fault::KillMaster => {
            // In a group: its leader (the others take over meanwhile).
            let m = c.leader().await.unwrap_or(0);
            c.kill_master_n(m);
            tokio::time::sleep(Duration::from_millis(200 + rng.below(800))).await;
            c.restart_master_n(m).await?;
        }
        Fault::StopWorker => {
            let Some(pid) = c.worker_pid(worker) else { bail!("worker {worker} is not running") };
            signal(pid, libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(500 + rng.below(1500))).await;
            signal(pid, libc::SIGCONT);
        }
        Fault::StopMaster => {
            let m = c.leader().await.unwrap_or(0);
            let Some(pid) = c.master_pid_n(m) else { bail!("master {m} is not running") };
            signal(pid, libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(500 + rng.below(2000))).await;
            signal(pid, libc::SIGCONT);
        }
        Fault::FillMem => fill(c, rng, report, fills, cycle, worker, Tier::Mem).await?,
        Fault::FillDisk => fill(c, rng, report, fills, cycle, worker, Tier::Disk).await?,
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    KillWorker,
    KillMaster,
    StopWorker,
    StopMaster,
    FillMem,
    FillDisk,
}

impl Fault {
    pub(super) fn name(self) -> &'static str {
        match self {
            Fault::KillWorker => "kill -9 and restart of a worker",
            Fault::KillMaster => "kill -9 and restart of the master",
            Fault::StopWorker => "SIGSTOP of a worker, then SIGCONT",
            Fault::StopMaster => "SIGSTOP of the master, then SIGCONT",
            Fault::FillMem => "fill of every worker's MEM, from a worker's host",
            Fault::FillDisk => "fill of a worker's DISK tier",
        }
    }
}

/// A cycle's fault, and the worker it hits. A tier fill hits a worker a client
/// of the load writes to (the one on its host).
pub(super) fn choose(rng: &mut Rng, workers: usize, clients: usize) -> (Fault, usize) {
    let worker = rng.below(workers as u64) as usize;
    match rng.below(20) {
        0..=5 => (Fault::KillWorker, worker),
        6..=8 => (Fault::KillMaster, worker),
        9..=11 => (Fault::StopWorker, worker),
        12..=14 => (Fault::StopMaster, worker),
        15..=17 => (Fault::FillMem, worker % clients),
        _ => (Fault::FillDisk, worker % clients),
    }
}

/// Fills worker `w`'s `tier` with files written from its host (must-cache for
/// MEM, replicated:1 for DISK: blocks with no other copy, never evicted) until
/// a write is refused for a full tier; holds it full a while, as the load goes
/// on (its writes there are refused, its reads go on); then reads every fill
/// file back and deletes it. The checks after the cycle see that the refused
/// write left no file. A memory write goes on to other workers once its own
/// worker's MEM is full (issue 19), so a MEM fill fills every worker's MEM.
async fn fill(
    c: &Cluster,
    rng: &mut Rng,
    report: &Mutex<ChaosReport>,
    fills: &mut Ledger,
    cycle: usize,
    w: usize,
    tier: Tier,
) -> Result<()> {
    let spec = &c.options.workers[w];
    let client = client_at(c, &spec.host, &spec.rack, Duration::from_secs(8));
    let (write_type, capacity) = match tier {
        Tier::Mem => (WriteType::MustCache, c.options.workers.iter().map(|w| w.mem_capacity).sum()),
        _ => (WriteType::ReplicatedDisk, spec.disk_capacity),
    };
    let opts = WriteOptions { write_type, replication: 1, ..Default::default() };
    let mut written = Vec::new();
    let (mut full, mut unclear) = (false, false);
    for i in 0..capacity as usize / FILL_FILE + 8 {
        let path = format!("/chaos/fill/c{cycle}-{i}");
        let acked = Acked { seed: rng.next(), len: FILL_FILE, write_type };
        match tokio::time::timeout(OP_TIMEOUT, client.write_all(&path, &acked.bytes(), opts.clone())).await {
            Ok(Ok(_)) => {
                let mut r = lock(report);
                r.fill_files += 1;
                r.fill_bytes += acked.len as u64;
                fills.note(&path, cycle, format_args!("fill write to worker {w}: acknowledged"));
                written.push((path, acked));
            }
            Ok(Err(e)) if e.kind == ErrorKind::ResourceExhausted => {
                lock(report).writes_refused_full += 1;
                fills.note(&path, cycle, format_args!("fill write to worker {w}: refused: {e}"));
                fills.refused.insert(path);
                full = true;
                break;
            }
            other => {
                let e = match other {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("no answer in {OP_TIMEOUT:?}"),
                };
                let mut r = lock(report);
                r.fills_unclear += 1;
                r.problem(format!("cycle {cycle}: a fill of worker {w}'s {tier:?} tier failed at {path}: {e}"));
                fills.note(&path, cycle, format_args!("fill write to worker {w}: failed: {e}"));
                fills.uncertain.insert(path, acked);
                unclear = true;
                break;
            }
        }
    }
    if !full && !unclear {
        let mut r = lock(report);
        r.fills_unclear += 1;
        r.problem(format!(
            "cycle {cycle}: worker {w}'s {tier:?} tier took {} fill files and never said full",
            written.len()
        ));
    }
    // Full for a while: writes to it are refused, reads go on.
    tokio::time::sleep(Duration::from_millis(500 + rng.below(1500))).await;
    let reader = c.remote_client();
    for (path, acked) in written {
        match tokio::time::timeout(OP_TIMEOUT, reader.read_all(&path)).await {
            Ok(Ok(got)) if got == acked.bytes() => lock(report).bytes_verified += got.len() as u64,
            Ok(Ok(got)) => {
                let mut r = lock(report);
                r.wrong_reads += 1;
                r.problem(format!("cycle {cycle}: fill file {path}: read {} wrong bytes", got.len()));
            }
            _ => lock(report).reads_failed += 1,
        }
        let deleted = outcome(tokio::time::timeout(OP_TIMEOUT, reader.delete(&path, false)).await);
        fills.note(&path, cycle, format_args!("fill file deleted: {}", describe(&deleted)));
        if matches!(deleted, Outcome::Acked) {
            fills.deleted.insert(path, acked);
        } else {
            fills.uncertain.insert(path, acked);
        }
    }
    Ok(())
}

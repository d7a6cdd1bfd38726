//! The faults: kill -9 and restart, SIGSTOP and SIGCONT.

use std::time::Duration;

use anyhow::{Result, bail};

use super::Rng;
use crate::Cluster;

fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling a child process this cluster started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// One fault, while the load runs: kill -9 and restart a worker or the
/// master, or stop one of them for a while and let it go on.
pub(super) async fn fault(c: &mut Cluster, rng: &mut Rng, fault: Fault, worker: usize) -> Result<()> {
    match fault {
        Fault::KillWorker => {
            c.kill_worker(worker);
            tokio::time::sleep(Duration::from_millis(300 + rng.below(1500))).await;
            c.restart_worker(worker).await?;
        }
        Fault::KillMaster => {
            c.kill_master();
            tokio::time::sleep(Duration::from_millis(200 + rng.below(800))).await;
            c.restart_master().await?;
        }
        Fault::StopWorker => {
            let Some(pid) = c.worker_pid(worker) else { bail!("worker {worker} is not running") };
            signal(pid, libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(500 + rng.below(1500))).await;
            signal(pid, libc::SIGCONT);
        }
        Fault::StopMaster => {
            let Some(pid) = c.master_pid() else { bail!("the master is not running") };
            signal(pid, libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(500 + rng.below(2000))).await;
            signal(pid, libc::SIGCONT);
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    KillWorker,
    KillMaster,
    StopWorker,
    StopMaster,
}

impl Fault {
    pub(super) fn name(self) -> &'static str {
        match self {
            Fault::KillWorker => "kill -9 and restart of a worker",
            Fault::KillMaster => "kill -9 and restart of the master",
            Fault::StopWorker => "SIGSTOP of a worker, then SIGCONT",
            Fault::StopMaster => "SIGSTOP of the master, then SIGCONT",
        }
    }
}

/// A cycle's fault, and the worker it hits.
pub(super) fn choose(rng: &mut Rng, workers: usize) -> (Fault, usize) {
    let worker = rng.below(workers as u64) as usize;
    match rng.below(15) {
        0..=5 => (Fault::KillWorker, worker),
        6..=8 => (Fault::KillMaster, worker),
        9..=11 => (Fault::StopWorker, worker),
        _ => (Fault::StopMaster, worker),
    }
}

//! The worker's side of the worker protocol: registration with a full block report,
//! heartbeats carrying tier use and job counters, block commits. Soft state: a new
//! master epoch or a "register again" answer makes the worker re-register
//! (Ignem, section III-A5, DYRS, section III-C).

use std::sync::Arc;
use std::time::Duration;

use thaw_common::proto::*;
use thaw_common::{Result, ThawError};
use tokio_util::sync::CancellationToken;

use crate::Worker;

/// Files a full heartbeat reports of the memory policy's ranking (highest
/// benefit first): enough for `thaw cache`, bounded for large caches.
const FILE_STATS: usize = 256;
/// An idle worker's light asks are at least this far apart.
const IDLE_ASK_GAP: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, Copy, Default)]
pub struct Registration {
    pub worker_id: u64,
    pub epoch: u64,
    pub heartbeat: Duration,
}

impl Worker {
    /// Registers with the master and applies its answer.
    pub async fn register(&self) -> Result<()> {
        // Soft state: a master that (re)registers us knows nothing of our
        // migrations, so drop them, and the migrated blocks, before the report.
        let fx = self.migrator.purge();
        self.carry_out(fx);
        let mut blocks = Vec::new();
        let mut tiers = Vec::new();
        for t in self.tiers() {
            blocks.extend(t.report());
            tiers.push(self.tier_usage(t));
        }
        // Removals not yet reported are covered by the full report.
        self.removed.lock().unwrap_or_else(|e| e.into_inner()).clear();
        // This worker's own credentials may differ from the master's: it
        // checks the master's under-store before it registers, so that a
        // worker that cannot reach it is never counted as live (nor handed
        // reads, writes or migrations), and says why in its log.
        if self.ufs.get().is_none() {
            let mut master = self.master.clone();
            let uri = master.get_cluster_status(GetClusterStatusRequest {}).await.map_err(ThawError::from)?;
            let uri = uri.into_inner().ufs_uri;
            let ufs = thaw_ufs::UnderStore::open(&uri)?;
            ufs.check().await.map_err(|e| e.context("the master's under-store, as this worker reaches it"))?;
            let _ = self.ufs.set(ufs);
        }
        let req = RegisterWorkerRequest {
            data_address: self.address.clone(),
            host: self.config.host.clone(),
            rack: self.config.rack.clone(),
            tiers,
            blocks,
            metrics_address: self.metrics_address.clone().unwrap_or_default(),
        };
        let resp = self.master.clone().register_worker(req).await.map_err(ThawError::from)?.into_inner();
        for b in &resp.remove_blocks {
            self.drop_block(*b);
        }
        for t in self.tiers() {
            resp.unpin_blocks.iter().for_each(|b| t.unpin(*b));
        }
        self.migrator.set_block_size(resp.default_block_size);
        let reg = Registration {
            worker_id: resp.worker_id,
            epoch: resp.master_epoch,
            heartbeat: Duration::from_millis(resp.heartbeat_interval_ms.max(10)),
        };
        *self.registration.lock().unwrap_or_else(|e| e.into_inner()) = Some(reg);
        if let Some(tx) = &self.config.registered {
            let _ = tx.send(reg.worker_id);
        }
        tracing::info!(worker = reg.worker_id, address = %self.address, stale = resp.remove_blocks.len(), "registered with master");
        Ok(())
    }

    pub fn registration(&self) -> Option<Registration> {
        *self.registration.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Deletes a block from every tier (on the master's word).
    pub(crate) fn drop_block(&self, block: u64) {
        self.migrator.forget(block);
        let mut dropped = false;
        for t in self.tiers() {
            dropped |= t.remove(block).is_some();
        }
        if dropped {
            self.note_changed();
        }
    }

    /// Notes a block this worker dropped on its own, for the next incremental
    /// report (see [`crate::block_changes`]) or heartbeat.
    pub fn note_removed(&self, block: u64, tier: Tier, length: u64) {
        self.removed.lock().unwrap_or_else(|e| e.into_inner()).push(BlockReport {
            block_id: block,
            tier: tier as i32,
            length,
        });
        self.note_changed();
    }

    /// A full heartbeat (tier use, removals, job counters, devices, migration
    /// report) or, if `light`, an ask carrying only the migration report and
    /// reads, which the master may hold up to `wait` for work.
    async fn heartbeat(&self, reg: Registration, light: bool, wait: Duration) -> Result<bool> {
        let fx = self.migrator.sweep(std::time::Instant::now());
        self.carry_out(fx);
        // A full heartbeat's tier use and removals go in order with the
        // incremental reports'.
        let _order = if light { None } else { Some(self.reporting.lock().await) };
        let removed = if light { Vec::new() } else { self.take_removals() };
        let (mut report, reads) = self.migrator.report();
        tracing::trace!(light, wait_ms = wait.as_millis() as u64, "heartbeat");
        if light {
            // Asked again with the next full heartbeat; the master ignores it here.
            report.referenced_jobs.clear();
        }
        let req = HeartbeatRequest {
            worker_id: reg.worker_id,
            master_epoch: reg.epoch,
            tiers: if light { Vec::new() } else { self.tiers().map(|t| self.tier_usage(t)).collect() },
            removed_blocks: removed.clone(),
            jobs: if light { Vec::new() } else { self.stats.snapshot() },
            migration: Some(report.clone()),
            reads: reads.clone(),
            devices: if light { Vec::new() } else { self.device_states() },
            light,
            wait_ms: if light { wait.as_millis().min(u32::MAX as u128) as u32 } else { 0 },
            checkpointing: self.checkpoints.in_progress(),
            files: match self.tier(Tier::Mem) {
                Some(m) if !light => m.file_stats(FILE_STATS),
                _ => Vec::new(),
            },
        };
        match self.master.clone().heartbeat(req).await {
            Ok(resp) => {
                let mut resp = resp.into_inner();
                if !light {
                    self.removals_answered(removed, true);
                }
                for b in &resp.remove_blocks {
                    self.drop_block(*b);
                }
                for t in self.tiers() {
                    resp.unpin_blocks.iter().for_each(|b| t.unpin(*b));
                }
                if !resp.reregister && !resp.light {
                    let table = resp.affinities.iter().map(|a| (a.job_id.clone(), a.affinity, a.probability));
                    self.affinities.set(table, resp.default_affinity);
                }
                if !resp.reregister {
                    self.checkpoints.order(std::mem::take(&mut resp.checkpoints));
                    let mem = self.tier(Tier::Mem);
                    let fx = self.migrator.apply(&resp, |b| mem.as_ref().and_then(|m| m.get(b)));
                    self.carry_out(fx);
                }
                Ok(resp.reregister)
            }
            Err(e) => {
                // Report these again next time.
                if !light {
                    self.removals_answered(removed, false);
                }
                self.migrator.unreport(report, reads);
                Err(e.into())
            }
        }
    }

    /// Registers (retrying until the master answers), then heartbeats until
    /// shutdown: a full one every interval; in between, light asks for
    /// migration work (see [`Migrator::idle`](crate::migration::Migrator)): an
    /// idle worker holds one open at the master until its next full heartbeat
    /// is due, and a busy one whose device ran dry while the master has more
    /// work asks at once (but not within a twentieth of an interval of the last
    /// exchange: an eighth while asks were full heartbeats; a light one costs
    /// the master a hundredth of one).
    pub async fn run_master_link(self: Arc<Self>, shutdown: CancellationToken) {
        let mut backoff = Duration::from_millis(100);
        let mut last = tokio::time::Instant::now();
        let mut last_full = last;
        loop {
            let reg = match self.registration() {
                Some(r) => r,
                None => {
                    // Shutdown does not wait for a registration: with no master
                    // of a group up, one tries them all for seconds.
                    let registered = tokio::select! {
                        _ = shutdown.cancelled() => return,
                        r = self.register() => r,
                    };
                    if let Err(e) = registered {
                        tracing::warn!(error = %e, "registration failed; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                    backoff = Duration::from_millis(100);
                    continue;
                }
            };
            let full_due = last_full + reg.heartbeat;
            let now = tokio::time::Instant::now();
            let light = if now >= full_due {
                None
            } else if self.migrator.idle() {
                // Held at the master until work comes or the full one is due;
                // a short pause first, so an ask that came back empty (its
                // work taken by another) does not spin.
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep_until(last + IDLE_ASK_GAP) => {}
                }
                Some(full_due.saturating_duration_since(tokio::time::Instant::now()))
            } else {
                let early = async {
                    self.migrator.fetch.notified().await;
                    tokio::time::sleep_until(last + reg.heartbeat / 20).await;
                };
                // Woken when a migration ends: if that left the worker idle,
                // go back to holding an ask.
                let ended = async {
                    loop {
                        self.migrator.wake.notified().await;
                        if self.migrator.idle() {
                            break;
                        }
                    }
                };
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = ended => continue,
                    _ = tokio::time::sleep_until(full_due) => None,
                    _ = early => {
                        tracing::trace!("a migration device ran dry: early ask");
                        Some(Duration::ZERO)
                    }
                }
            };
            last = tokio::time::Instant::now();
            if light.is_none() {
                last_full = last;
            }
            let beat = match light {
                Some(wait) if wait.is_zero() && self.migrator.idle() => continue,
                Some(wait) => self.heartbeat(reg, true, wait),
                None => self.heartbeat(reg, false, Duration::ZERO),
            };
            // Nor for a heartbeat (its removals are moot once the worker stops).
            let outcome = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = beat => r,
            };
            match outcome {
                Ok(false) => {}
                Ok(true) => {
                    tracing::info!("master asks to register again (it restarted or declared this worker dead)");
                    *self.registration.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                Err(_) if shutdown.is_cancelled() => return,
                Err(e) => {
                    tracing::warn!(error = %e, "heartbeat failed");
                    // Not again at once: wait for the next full heartbeat.
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep_until(last_full + reg.heartbeat) => {}
                    }
                }
            }
        }
    }

    /// Tells the master a block is stored here (with the commits of others
    /// meanwhile: see [`crate::group_commit`]). Fails if the master does not
    /// accept it (its file is gone, or this worker must re-register first).
    pub async fn commit_block(
        &self,
        block: u64,
        tier: Tier,
        length: u64,
        filled_from: Option<UfsSource>,
        crc32: Option<u32>,
        read_fill: bool,
    ) -> Result<()> {
        let reg = self
            .registration()
            .ok_or_else(|| ThawError::unavailable("worker is not registered with the master yet"))?;
        let req = CommitBlockRequest {
            worker_id: reg.worker_id,
            master_epoch: reg.epoch,
            block_id: block,
            tier: tier as i32,
            length,
            filled_from,
            crc32,
            read_fill,
        };
        match self.commits.commit(&self.master, req).await {
            Ok(r) => {
                let at = r.cached_at;
                if !at.is_empty() {
                    tracing::debug!(block, at, "cached at another worker already: this copy goes after the read");
                }
                Ok(())
            }
            Err(e) => {
                if e.kind == thaw_common::ErrorKind::Unavailable {
                    *self.registration.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                Err(e.context(format!("commit of block {block}")))
            }
        }
    }
}

//! The worker's side of the worker protocol: registration with a full block report,
//! heartbeats carrying tier use and job counters, block commits. Soft state: a new
//! master epoch or a "register again" answer makes the worker re-register
//! (ignem.txt III-A5, dyrs.txt III-C).

use std::sync::Arc;
use std::time::Duration;

use thaw_common::proto::*;
use thaw_common::{Result, ThawError};
use tokio_util::sync::CancellationToken;

use crate::Worker;

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
        let req = RegisterWorkerRequest {
            data_address: self.address.clone(),
            host: self.config.host.clone(),
            rack: self.config.rack.clone(),
            tiers,
            blocks,
        };
        let resp = self.master.clone().register_worker(req).await.map_err(ThawError::from)?.into_inner();
        if self.ufs.get().is_none() {
            let ufs = thaw_ufs::UnderStore::open(&resp.ufs_uri)?;
            let _ = self.ufs.set(ufs);
        }
        for b in &resp.remove_blocks {
            self.drop_block(*b);
        }
        self.migrator.set_block_size(resp.default_block_size);
        let reg = Registration {
            worker_id: resp.worker_id,
            epoch: resp.master_epoch,
            heartbeat: Duration::from_millis(resp.heartbeat_interval_ms.max(10)),
        };
        *self.registration.lock().unwrap_or_else(|e| e.into_inner()) = Some(reg);
        tracing::info!(worker = reg.worker_id, address = %self.address, stale = resp.remove_blocks.len(), "registered with master");
        Ok(())
    }

    pub fn registration(&self) -> Option<Registration> {
        *self.registration.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Deletes a block from every tier (on the master's word).
    fn drop_block(&self, block: u64) {
        self.migrator.forget(block);
        for t in self.tiers() {
            t.remove(block);
        }
    }

    /// Notes a block this worker dropped on its own, for the next heartbeat.
    pub fn note_removed(&self, block: u64, tier: Tier, length: u64) {
        self.removed.lock().unwrap_or_else(|e| e.into_inner()).push(BlockReport {
            block_id: block,
            tier: tier as i32,
            length,
        });
    }

    async fn heartbeat(&self, reg: Registration) -> Result<bool> {
        let fx = self.migrator.sweep(std::time::Instant::now());
        self.carry_out(fx);
        let removed = std::mem::take(&mut *self.removed.lock().unwrap_or_else(|e| e.into_inner()));
        let (report, reads) = self.migrator.report();
        let req = HeartbeatRequest {
            worker_id: reg.worker_id,
            master_epoch: reg.epoch,
            tiers: self.tiers().map(|t| self.tier_usage(t)).collect(),
            removed_blocks: removed.clone(),
            jobs: self.stats.snapshot(),
            migration: Some(report.clone()),
            reads: reads.clone(),
            devices: self.device_states(),
        };
        match self.master.clone().heartbeat(req).await {
            Ok(resp) => {
                let resp = resp.into_inner();
                for b in &resp.remove_blocks {
                    self.drop_block(*b);
                }
                if !resp.reregister {
                    let mem = self.tier(Tier::Mem);
                    let fx = self.migrator.apply(&resp, |b| mem.as_ref().and_then(|m| m.get(b)));
                    self.carry_out(fx);
                }
                Ok(resp.reregister)
            }
            Err(e) => {
                // Report these again next time.
                self.removed.lock().unwrap_or_else(|e| e.into_inner()).extend(removed);
                self.migrator.unreport(report, reads);
                Err(e.into())
            }
        }
    }

    /// Registers (retrying until the master answers), then heartbeats until
    /// shutdown: every interval, or sooner (but not within an eighth of one of
    /// the last) when a migration device ran dry and the master has more work.
    pub async fn run_master_link(self: Arc<Self>, shutdown: CancellationToken) {
        let mut backoff = Duration::from_millis(100);
        let mut last = tokio::time::Instant::now();
        loop {
            let reg = match self.registration() {
                Some(r) => r,
                None => {
                    if let Err(e) = self.register().await {
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
            let early = async {
                self.migrator.fetch.notified().await;
                tokio::time::sleep_until(last + reg.heartbeat / 8).await;
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(last + reg.heartbeat) => {}
                _ = early => tracing::trace!("a migration device ran dry: early heartbeat"),
            }
            last = tokio::time::Instant::now();
            match self.heartbeat(reg).await {
                Ok(false) => {}
                Ok(true) => {
                    tracing::info!("master asks to register again (it restarted or declared this worker dead)");
                    *self.registration.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                Err(_) if shutdown.is_cancelled() => return,
                Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
            }
        }
    }

    /// Tells the master a block is stored here. Fails if the master does not accept
    /// it (its file is gone, or this worker must re-register first).
    pub async fn commit_block(
        &self,
        block: u64,
        tier: Tier,
        length: u64,
        filled_from: Option<UfsSource>,
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
        };
        match self.master.clone().commit_block(req).await {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = ThawError::from(e);
                if e.kind == thaw_common::ErrorKind::Unavailable {
                    *self.registration.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                Err(e.context(format!("commit of block {block}")))
            }
        }
    }
}

//! Incremental block reports: the worker tells the master of its block
//! changes as they happen, not with its next heartbeat.
//!
//! Evictions (a full tier making room, a job's reference list emptying),
//! blocks dropped on the master's word, and commits change what the worker
//! holds and uses. A heartbeat carries them every interval (seconds), so
//! block locations (`thaw fs ls`, the Dask placement) and `thaw status` lagged
//! the worker by up to that much: a scheduler placed tasks by a block that was
//! no longer in memory (issue 28, item 10). Here every change wakes a report
//! of the removed blocks and the tiers' use, sent [`BATCH`] after the first
//! change it carries (changes meanwhile go with it), as HDFS DataNodes send
//! incremental block reports between their full ones. Commits themselves
//! reach the master at once (`commit_block`); the report brings the use.
//!
//! Staleness bound: a change is in a report sent at most [`BATCH`] (50 ms)
//! after it, once a report or full heartbeat already in flight is answered,
//! so the master's view lags the worker by under 100 ms on a LAN.

use std::sync::Arc;
use std::time::Duration;

use thaw_common::proto::BlockChangesRequest;
use tokio_util::sync::CancellationToken;

use crate::Worker;

/// How long a report waits after the first change it carries, gathering more
/// (a burst of evictions goes in one report).
/// Also a floor between reports: at most ~20 a second reach the master from
/// a worker whose blocks change all the time (a long migration).
pub const BATCH: Duration = Duration::from_millis(50);

impl Worker {
    /// Notes that blocks or tier use changed: an incremental report follows.
    pub(crate) fn note_changed(&self) {
        self.changed.notify_one();
    }

    /// Sends an incremental report after each batch of changes, until
    /// shutdown. A failed report is left to the next change or the next
    /// full heartbeat, which carries the same removals and use.
    pub(crate) async fn run_block_reports(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.changed.notified() => {}
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(BATCH) => {}
            }
            let Some(reg) = self.registration() else {
                continue; // registering: its full block report covers these
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.report_block_changes(reg) => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "incremental block report failed; the next heartbeat carries it");
                    }
                }
            }
        }
    }

    /// One incremental report: the blocks dropped since the last report and
    /// every tier's use now.
    async fn report_block_changes(&self, reg: crate::master_link::Registration) -> thaw_common::Result<()> {
        let _order = self.reporting.lock().await;
        let removed = std::mem::take(&mut *self.removed.lock().unwrap_or_else(|e| e.into_inner()));
        let req = BlockChangesRequest {
            worker_id: reg.worker_id,
            master_epoch: reg.epoch,
            tiers: self.tiers().map(|t| self.tier_usage(t)).collect(),
            removed_blocks: removed.clone(),
        };
        let n = removed.len();
        match self.master.clone().report_block_changes(req).await {
            Ok(resp) => {
                let resp = resp.into_inner();
                if resp.reregister {
                    // The heartbeat hears the same and registers again, with
                    // a full report that covers these removals.
                    self.removed.lock().unwrap_or_else(|e| e.into_inner()).extend(removed);
                    return Ok(());
                }
                tracing::trace!(removed = n, remove = resp.remove_blocks.len(), "incremental block report");
                for b in &resp.remove_blocks {
                    self.drop_block(*b);
                }
                Ok(())
            }
            Err(e) => {
                self.removed.lock().unwrap_or_else(|e| e.into_inner()).extend(removed);
                Err(e.into())
            }
        }
    }
}

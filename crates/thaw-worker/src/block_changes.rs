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

use thaw_common::proto::{BlockChangesRequest, BlockReport, Tier};
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
        let removed = self.take_removals();
        // Read after the removals: a read that made one of them goes with it
        // (and with the next heartbeat, in order with its migrations' ends).
        let reads = self.migrator.reads_to_report();
        let req = BlockChangesRequest {
            worker_id: reg.worker_id,
            master_epoch: reg.epoch,
            tiers: self.tiers().map(|t| self.tier_usage(t)).collect(),
            removed_blocks: removed.clone(),
            reads,
        };
        let n = removed.len();
        match self.master.clone().report_block_changes(req).await {
            Ok(resp) => {
                let resp = resp.into_inner();
                if resp.reregister {
                    // The heartbeat hears the same and registers again.
                    self.removals_answered(removed, false);
                    return Ok(());
                }
                self.removals_answered(removed, true);
                tracing::trace!(removed = n, remove = resp.remove_blocks.len(), "incremental block report");
                for b in &resp.remove_blocks {
                    self.drop_block(*b);
                }
                Ok(())
            }
            Err(e) => {
                self.removals_answered(removed, false);
                Err(e.into())
            }
        }
    }

    /// Takes the removals not reported yet, for a report (one at a time,
    /// under `reporting`): they are being sent until [`Worker::removals_answered`].
    pub(crate) fn take_removals(&self) -> Vec<BlockReport> {
        let taken = std::mem::take(&mut *lock(&self.removed));
        lock(&self.sending).clone_from(&taken);
        taken
    }

    /// The report carrying `removed` was answered (`delivered`); else they
    /// wait for the next one.
    pub(crate) fn removals_answered(&self, removed: Vec<BlockReport>, delivered: bool) {
        lock(&self.sending).clear();
        if !delivered {
            lock(&self.removed).extend(removed);
        }
    }

    /// Before the commit of `block` into `tier` goes to the master: a removal
    /// of it (evicted, then filled again) must not reach the master after the
    /// commit, which would make it forget the new copy. One not sent yet is
    /// dropped (the block is back); one being sent is waited for.
    pub(crate) async fn settle_removal(&self, block: u64, tier: Tier) {
        let is = |b: &BlockReport| b.block_id == block && b.tier == tier as i32;
        lock(&self.removed).retain(|b| !is(b));
        if lock(&self.sending).iter().any(is) {
            drop(self.reporting.lock().await);
            // A failed report put it back.
            lock(&self.removed).retain(|b| !is(b));
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TierConfig, WorkerConfig};

    fn worker(dir: &std::path::Path) -> Worker {
        let config = WorkerConfig {
            master: "127.0.0.1:1".into(),
            host: "h".into(),
            rack: "r".into(),
            mem: Some(TierConfig { dir: dir.join("mem"), capacity: 64 << 20 }),
            disk: None,
            replacement: crate::replacement::Policy::Lru,
            cache_window: crate::tier::DEFAULT_WINDOW,
            advertise: None,
            remove_mem_on_exit: false,
            max_connections: 8,
            max_connections_per_user: 8,
            stall_timeout: crate::data::DEFAULT_STALL_TIMEOUT,
            migration: Default::default(),
            device_models: Default::default(),
            checkpoint_bandwidth: 0,
            keep_page_cache: false,
            secret: None,
            tls: None,
            master_tls: None,
            registered: None,
        };
        Worker::new(config, "127.0.0.1:2".into()).unwrap()
    }

    fn pending(w: &Worker) -> Vec<u64> {
        lock(&w.removed).iter().map(|b| b.block_id).collect()
    }

    /// A block evicted and filled again: its removal must not reach the
    /// master after the new copy's commit (the master would forget the copy).
    #[tokio::test]
    async fn a_block_filled_again_is_not_reported_removed_after_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let w = worker(dir.path());
        w.note_removed(7, Tier::Mem, 10);
        w.note_removed(8, Tier::Mem, 10);
        w.note_removed(7, Tier::Disk, 10);
        w.settle_removal(7, Tier::Mem).await;
        assert_eq!(pending(&w), vec![8, 7], "only the MEM removal of block 7 goes");
        // A report carrying block 8's removal is in flight: the commit waits
        // for its answer, and a failed report's removal does not come back.
        let order = w.reporting.lock().await;
        let sent = w.take_removals();
        let settle = w.settle_removal(8, Tier::Mem);
        tokio::pin!(settle);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), &mut settle).await;
        assert!(waited.is_err(), "the commit went before the report in flight was answered");
        w.removals_answered(sent, false);
        drop(order);
        settle.await;
        assert_eq!(pending(&w), vec![7]);
    }
}

//! When a journal commit is waited for, and group commit for a single
//! master's journal.
//!
//! HDFS's NameNode logs an edit under its namespace lock and syncs the log
//! after letting the lock go (`logEdit`, then `logSync`), so the fsync of
//! one caller's edit covers every edit logged meanwhile. Thaw does the same:
//! a mutation and the queueing of its journal ops happen under the master's
//! state lock (the journal's order is the state's order), and an RPC waits
//! for its commits to be durable after the lock is let go, before it answers
//! ([`await_commits`]). A single master's ops go to [`GroupCommit`], whose
//! writer thread takes whatever queued while the last record was written
//! and appends it to the journal's log ([`crate::wal`]) as one record: one
//! fsync for all of them. Every [`CHECKPOINT_OPS`] changes the thread folds
//! the log into the redb store in one transaction and empties it. (Before,
//! each commit was its own transaction, fsynced under the state lock, so
//! every master operation queued behind every fsync; then each batch was one
//! redb transaction, 1-1.5 ms of scattered page writes.) A group of masters
//! queues its ops in the Raft log instead (`crate::ha`).
//!
//! What this allows, as in HDFS: a change is visible to other callers from
//! the moment it is made, a little before it is durable. No caller is told
//! it succeeded before it is, and a master that stops before the fsync comes
//! back without it, as if that RPC had never been answered.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use thaw_common::{Result, ThawError};
use tokio::sync::oneshot;

use crate::journal::{Commit, Journal, JournalOp, encode_batch};
use crate::wal::{self, Wal};

/// Changes the log holds before the writer checkpoints them into redb (or
/// [`wal::CHECKPOINT_BYTES`] of log). A checkpoint is one redb transaction
/// of these changes (tens of ms for this many), during which commits wait.
pub const CHECKPOINT_OPS: usize = 20_000;

/// A commit's outcome, awaited before its RPC answers.
pub type Pending = std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send>>;

tokio::task_local! {
    /// The commits an RPC made, awaited before it answers.
    static PENDING: std::cell::RefCell<Vec<Pending>>;
}

/// Runs `rpc`, then waits until every journal commit it made is durable (on
/// a group of masters: held by a majority): an acknowledged change is never
/// lost by a crash or a failover.
pub async fn await_commits<T>(
    rpc: impl std::future::Future<Output = std::result::Result<T, tonic::Status>>,
) -> std::result::Result<T, tonic::Status> {
    PENDING
        .scope(std::cell::RefCell::new(Vec::new()), async move {
            let answer = rpc.await;
            let pending = PENDING.with(|p| p.take());
            for p in pending {
                p.await?;
            }
            answer
        })
        .await
}

/// Hands `wait` to the RPC being served, to be awaited before it answers.
/// Outside an RPC (a lease expiry, a checkpoint's record: work of the
/// master's own loops) it is given back.
pub fn defer(wait: Pending) -> Option<Pending> {
    let mut wait = Some(wait);
    let _ = PENDING.try_with(|p| p.borrow_mut().extend(wait.take()));
    wait
}

/// One caller's ops, waiting for the writer thread.
struct Entry {
    ops: Vec<JournalOp>,
    next_id: u64,
    done: oneshot::Sender<Result<()>>,
}

#[derive(Default)]
struct Queue {
    entries: Vec<Entry>,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Transactions written and commits they held (the metrics show both).
    transactions: AtomicU64,
    commits: AtomicU64,
}

/// A single master's journal with group commit: [`Commit::commit`] queues
/// the ops and returns; a writer thread appends everything queued as one
/// log record. An RPC's commits are awaited before it answers; a commit
/// outside an RPC waits where it is made, as before. Dropped, it
/// checkpoints what the log holds, so a clean stop leaves it empty.
pub struct GroupCommit {
    shared: Arc<Shared>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl GroupCommit {
    /// The writer of `journal` (opened on `dir`, so its log is empty).
    /// It checkpoints every `checkpoint_ops` changes.
    pub fn new(journal: Journal, dir: &Path, checkpoint_ops: usize) -> Result<Self> {
        let mut log = Wal::open(dir, journal.wal_seq()?)?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let writer = std::thread::Builder::new()
            .name("thaw-journal".into())
            .spawn(move || write_loop(&journal, &mut log, &s, checkpoint_ops.max(1)))
            .map_err(|e| ThawError::internal(format!("starting the journal writer: {e}")))?;
        Ok(Self { shared, writer: Some(writer) })
    }
}

/// What the log holds beyond redb, for the next checkpoint.
#[derive(Default)]
struct Unapplied {
    ops: Vec<JournalOp>,
    next_id: u64,
}

/// Logs what queued, a batch at a time, until closed and drained; then
/// checkpoints.
fn write_loop(journal: &Journal, log: &mut Wal, s: &Shared, checkpoint_ops: usize) {
    let mut unapplied = Unapplied::default();
    loop {
        let batch = {
            let mut q = s.queue.lock().unwrap_or_else(|e| e.into_inner());
            while q.entries.is_empty() && !q.closed {
                q = s.ready.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            if q.entries.is_empty() {
                break;
            }
            std::mem::take(&mut q.entries)
        };
        let next_id = batch.last().map_or(0, |e| e.next_id);
        let commits = batch.len() as u64;
        let mut ops = Vec::new();
        let mut done = Vec::with_capacity(batch.len());
        for e in batch {
            ops.extend(e.ops);
            done.push(e.done);
        }
        let result = log.append(&encode_batch(&ops, next_id)).map(drop);
        s.transactions.fetch_add(1, Ordering::Relaxed);
        s.commits.fetch_add(commits, Ordering::Relaxed);
        match &result {
            Ok(()) => {
                unapplied.ops.extend(ops);
                unapplied.next_id = next_id;
            }
            Err(e) => tracing::error!(error = %e, ops = ops.len(), "a journal commit failed"),
        }
        for d in done {
            let _ = d.send(result.clone());
        }
        if unapplied.ops.len() >= checkpoint_ops || log.len() >= wal::CHECKPOINT_BYTES {
            checkpoint(journal, log, &mut unapplied);
        }
    }
    if !log.is_empty() {
        checkpoint(journal, log, &mut unapplied);
    }
}

/// Folds the log into redb and empties it. A failure leaves both as they
/// were (the log still holds every change: tried again after the next
/// record, and at start-up).
fn checkpoint(journal: &Journal, log: &mut Wal, unapplied: &mut Unapplied) {
    let started = std::time::Instant::now();
    if let Err(e) = journal.checkpoint(&unapplied.ops, unapplied.next_id, log.seq()) {
        tracing::error!(error = %e, ops = unapplied.ops.len(), "a journal checkpoint failed (the log keeps the changes)");
        return;
    }
    if let Err(e) = log.checkpointed() {
        // Its records are applied (their numbers say so): harmless at start-up.
        tracing::error!(error = %e, "emptying the journal log after a checkpoint failed");
        return;
    }
    tracing::debug!(ops = unapplied.ops.len(), took = ?started.elapsed(), "journal checkpoint");
    unapplied.ops.clear();
}

impl Commit for GroupCommit {
    fn commit(&self, ops: &[JournalOp], next_id: u64) -> Result<()> {
        let (done, rx) = oneshot::channel();
        {
            let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.closed {
                return Err(ThawError::unavailable("the master is stopping: its journal takes no more writes"));
            }
            q.entries.push(Entry { ops: ops.to_vec(), next_id, done });
        }
        self.shared.ready.notify_one();
        let wait: Pending = Box::pin(async move {
            rx.await.unwrap_or_else(|_| Err(ThawError::internal("the journal writer stopped before committing")))
        });
        match defer(wait) {
            None => Ok(()),
            // Not within an RPC: the caller waits, as it always did.
            Some(wait) => futures::executor::block_on(wait),
        }
    }

    fn counts(&self) -> Option<(u64, u64)> {
        Some((self.shared.transactions.load(Ordering::Relaxed), self.shared.commits.load(Ordering::Relaxed)))
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.shared.queue.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.shared.ready.notify_one();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thaw_common::proto::InodeRecord;

    fn rec(id: u64) -> InodeRecord {
        InodeRecord { version: 1, id, parent_id: 1, name: format!("f{id}"), complete: true, ..Default::default() }
    }

    /// Commits queued by many concurrent RPCs are all durable when each RPC
    /// answers, in the order they were queued, and fewer transactions than
    /// commits were needed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_rpcs_share_transactions_and_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let order = Arc::new(Mutex::new(()));
        {
            let g = Arc::new(GroupCommit::new(Journal::open(dir.path()).unwrap(), dir.path(), 20).unwrap());
            let mut tasks = Vec::new();
            for t in 0..8u64 {
                let (g, order) = (g.clone(), order.clone());
                tasks.push(tokio::spawn(await_commits(async move {
                    for i in 0..50u64 {
                        let id = 2 + t * 1000 + i;
                        // As the master does: queued under its lock, in order.
                        let _lock = order.lock().unwrap();
                        g.commit(&[JournalOp::Put(rec(id)), JournalOp::Delete(id)], id + 1)
                            .map_err(|e| tonic::Status::internal(e.message))?;
                    }
                    let _lock = order.lock().unwrap();
                    g.commit(&[JournalOp::Put(rec(2 + t * 1000))], 9000 + t)
                        .map_err(|e| tonic::Status::internal(e.message))
                })));
            }
            for t in tasks {
                t.await.unwrap().unwrap();
            }
            // Outside an RPC a commit waits where it is made.
            g.commit(&[JournalOp::Put(rec(5))], 9100).unwrap();
            let (transactions, commits) = g.counts().unwrap();
            assert_eq!(commits, 8 * 51 + 1);
            assert!(transactions < commits, "{transactions} transactions for {commits} commits: none shared");
        }
        let loaded = Journal::open(dir.path()).unwrap().load().unwrap();
        let mut ids: Vec<u64> = loaded.inodes.iter().map(|r| r.id).collect();
        ids.sort();
        let mut want: Vec<u64> = (0..8).map(|t| 2 + t * 1000).chain([5]).collect();
        want.sort();
        assert_eq!(ids, want, "each put-then-delete kept its order; the last puts survive");
        assert_eq!(loaded.next_id, 9100);
    }

    /// A commit after the journal closed is refused, not lost silently.
    #[test]
    fn a_closed_journal_refuses_commits() {
        let dir = tempfile::tempdir().unwrap();
        let g = GroupCommit::new(Journal::open(dir.path()).unwrap(), dir.path(), 20).unwrap();
        g.shared.queue.lock().unwrap().closed = true;
        let e = g.commit(&[JournalOp::Put(rec(2))], 3).unwrap_err();
        assert!(e.message.contains("stopping"), "{e}");
    }
}

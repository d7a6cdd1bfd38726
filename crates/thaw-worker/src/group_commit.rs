//! Group commit of blocks: the commits that queue while one call to the
//! master is out go together in the next (`CommitBlocks`), as a journal's
//! group commit takes every record queued during the last fsync.
//!
//! A worker tells the master of every block it stores (a migration, a
//! read's fill, a write). One call per block made the call the larger half
//! of a small block's migration: a 64 KiB block took ~1.2 ms to copy and
//! ~1.4 ms to commit, each commit taking the master's state lock on its own
//! (issue 33: 100,000 files of 64 KiB). Here a lone commit is sent at once,
//! as before (no timer, no added latency); commits that arrive while a call
//! is out wait for it and then go as one call of up to [`MAX_BATCH`], which
//! the master applies under one hold of its lock, answering each on its
//! own. A master without `CommitBlocks` (older) gets one call each.

use std::sync::{Arc, Mutex};

use thaw_common::auth::MasterClient;
use thaw_common::proto::{CommitBlockRequest, CommitBlockResponse, CommitBlocksRequest};
use thaw_common::{ErrorKind, Result, ThawError};
use tokio::sync::oneshot;

/// Commits in one call at most.
pub const MAX_BATCH: usize = 512;

type Waiting = (CommitBlockRequest, oneshot::Sender<Result<CommitBlockResponse>>);

/// The commits waiting for a call, and whether one is out.
#[derive(Default)]
pub(crate) struct CommitQueue {
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    waiting: Vec<Waiting>,
    /// A sender task is running (it sends what waits until nothing does).
    sending: bool,
    /// The master does not know `CommitBlocks`: one call per commit.
    one_by_one: bool,
}

impl CommitQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `req` to the master with whatever else is waiting; returns the
    /// master's answer to it.
    pub(crate) async fn commit(
        self: &Arc<Self>,
        master: &MasterClient,
        req: CommitBlockRequest,
    ) -> Result<CommitBlockResponse> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut q = self.lock();
            q.waiting.push((req, tx));
            !std::mem::replace(&mut q.sending, true)
        };
        if start {
            // A task of its own: a caller that gives up waiting must not
            // strand the commits queued behind it.
            tokio::spawn(self.clone().send_all(master.clone()));
        }
        rx.await.map_err(|_| ThawError::unavailable("the commit's call to the master was dropped"))?
    }

    /// Sends what waits, a call at a time, until nothing does.
    async fn send_all(self: Arc<Self>, master: MasterClient) {
        loop {
            let (batch, one_by_one) = {
                let mut q = self.lock();
                if q.waiting.is_empty() {
                    q.sending = false;
                    return;
                }
                let n = q.waiting.len().min(MAX_BATCH);
                (q.waiting.drain(..n).collect::<Vec<_>>(), q.one_by_one)
            };
            if batch.len() == 1 || one_by_one {
                send_each(&master, batch).await;
                continue;
            }
            let (reqs, txs): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            match master.clone().commit_blocks(CommitBlocksRequest { commits: reqs.clone() }).await {
                Ok(resp) => {
                    let results = resp.into_inner().results;
                    let mut results = results.into_iter();
                    for tx in txs {
                        let r = match results.next() {
                            Some(r) if r.error_kind.is_empty() && r.error.is_empty() => {
                                Ok(r.response.unwrap_or_default())
                            }
                            Some(r) => Err(ThawError::new(
                                ErrorKind::parse(&r.error_kind).unwrap_or(ErrorKind::Internal),
                                r.error,
                            )),
                            None => Err(ThawError::internal("the master answered fewer commits than it was sent")),
                        };
                        let _ = tx.send(r);
                    }
                }
                Err(s) if s.code() == tonic::Code::Unimplemented => {
                    tracing::info!("the master does not take commits in batches: one call each");
                    self.lock().one_by_one = true;
                    send_each(&master, reqs.into_iter().zip(txs).collect()).await;
                }
                Err(s) => {
                    let e = ThawError::from(s);
                    for tx in txs {
                        let _ = tx.send(Err(e.clone()));
                    }
                }
            }
        }
    }
}

/// One `CommitBlock` call per commit, all at once.
async fn send_each(master: &MasterClient, batch: Vec<Waiting>) {
    let calls = batch.into_iter().map(|(req, tx)| {
        let mut m = master.clone();
        async move {
            let r = m.commit_block(req).await.map(|r| r.into_inner()).map_err(ThawError::from);
            let _ = tx.send(r);
        }
    });
    futures::future::join_all(calls).await;
}

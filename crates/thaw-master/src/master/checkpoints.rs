//! The master's side of asynchronous checkpointing (Tachyon, section 2.7): orders
//! to workers with their heartbeats, the persist call, and moving a finished
//! checkpoint to its file's path. The order itself (the decision) is
//! [`crate::checkpoint_order`].

use std::time::Instant;

use thaw_common::ids::{block_count, block_id};
use thaw_common::proto::*;
use thaw_common::write_type;
use thaw_common::{Result, ThawError};

use super::{Master, State};
use crate::checkpoint_order::{Checkpoints, Order};
use crate::namespace::{Inode, ROOT_ID};

/// The files waiting for a checkpoint after a (re)start: every complete,
/// unpersisted async-through file, and every file whose persist was asked for.
pub(super) fn waiting_from<'a>(files: impl Iterator<Item = (u64, &'a Inode)>, order: Order) -> Checkpoints {
    let mut cp = Checkpoints::new(order);
    let mut files: Vec<(u64, &Inode)> = files.collect();
    files.sort_unstable_by_key(|(f, _)| *f);
    for (f, r) in files {
        if r.complete() && !r.persisted() && (write_type::of(r.write_type()).checkpointed || r.persist_requested()) {
            cp.add(f, r.mtime_ms(), r.temporary(), r.persist_requested());
        }
    }
    cp
}

/// A file's persistence state; `lost`: some block has no replica.
pub(super) fn persistence(st: &State, id: u64, r: &Inode, lost: bool) -> Persistence {
    if r.is_dir() || r.persisted() {
        Persistence::Persisted
    } else if lost {
        Persistence::Lost
    } else if st.checkpoints.in_flight(id) {
        Persistence::Persisting
    } else {
        Persistence::NotPersisted
    }
}

/// Files by persistence state over the whole namespace.
pub(super) fn totals(st: &State) -> PersistenceTotals {
    let mut t = PersistenceTotals::default();
    for f in st.ns.files_under(ROOT_ID) {
        let r = st.ns.get(f).expect("listed");
        let lost =
            r.complete() && !r.persisted() && st.cluster.missing_block(f, block_count(r.length(), r.block_size()));
        match persistence(st, f, r, lost) {
            Persistence::Persisted => t.persisted += 1,
            Persistence::Lost => t.lost += 1,
            Persistence::Persisting => {
                t.persisting += 1;
                t.not_persisted_bytes += r.length();
            }
            _ => {
                t.not_persisted += 1;
                t.not_persisted_bytes += r.length();
            }
        }
    }
    st.checkpoints.fill_totals(&mut t);
    st.recomputer.fill_totals(&mut t);
    t
}

/// Blocks of a file (ids).
fn blocks_of(r: &InodeRecord) -> Vec<u64> {
    (0..block_count(r.length, r.block_size)).map(|i| block_id(r.id, i)).collect()
}

impl Master {
    /// The checkpoint order for `worker` in this heartbeat answer, if it is free
    /// and holds a waiting file whole, or some of a file spread over several
    /// workers (it reads the rest from them: `block_sources`, with a grant).
    pub(super) fn checkpoint_orders(&self, st: &mut State, worker: u64) -> Vec<CheckpointCommand> {
        let State { ns, cluster, checkpoints, .. } = st;
        let holders = |f: u64| {
            ns.get(f)
                .map(|i| cluster.checkpoint_writers(f, block_count(i.length(), i.block_size())))
                .unwrap_or_default()
        };
        let orders = checkpoints.next_for(worker, Instant::now(), &holders);
        orders
            .into_iter()
            .map(|(f, urgent)| {
                let r = ns.get(f).expect("waiting files exist");
                let path = ns.path_of(f);
                let block_sources = cluster.block_sources(f, block_count(r.length(), r.block_size()), worker);
                let access = if block_sources.is_empty() { None } else { self.grant(false, f, &path) };
                tracing::debug!(file_id = f, worker, path = %path, urgent, spread = !block_sources.is_empty(), "checkpoint ordered");
                CheckpointCommand {
                    file_id: f,
                    length: r.length(),
                    block_size: r.block_size(),
                    path,
                    block_sources,
                    access,
                    urgent,
                }
            })
            .collect()
    }

    /// What the checkpoint of file `id` waits for now, in words ("" if none).
    pub(super) fn persist_waiting(st: &State, id: u64) -> String {
        let holders = |f: u64| {
            st.ns
                .get(f)
                .map(|i| st.cluster.checkpoint_writers(f, block_count(i.length(), i.block_size())))
                .unwrap_or_default()
        };
        let path = |f: u64| st.ns.path_of(f);
        st.checkpoints.waiting_for(id, Instant::now(), &path, &holders).unwrap_or_default()
    }

    /// Whether a held ask of `worker` should return for a checkpoint.
    pub(super) fn has_checkpoint(st: &State, worker: u64) -> bool {
        let holders = |f: u64| {
            st.ns
                .get(f)
                .map(|i| st.cluster.checkpoint_writers(f, block_count(i.length(), i.block_size())))
                .unwrap_or_default()
        };
        st.checkpoints.has_work(worker, Instant::now(), &holders)
    }

    /// Has a file written now (`thaw fs persist`): in the worker's asked-for
    /// lane, beside its background checkpoint (see `crate::checkpoint_order`). A
    /// persisted file answers at once; a directory, an incomplete file or a
    /// lost one is an error.
    pub async fn persist(&self, req: PersistRequest) -> Result<PersistResponse> {
        let (p, id) = self.resolve_file(&req.path, "persist").await?;
        let mut guard = self.write();
        let st = &mut *guard;
        let ino = st.ns.get(id).ok_or_else(|| ThawError::not_found(format!("{p} was deleted meanwhile")))?;
        let r = ino.record(id);
        if !r.complete {
            return Err(ThawError::precondition(format!("{p} is still being written: persist it once it is closed")));
        }
        if !r.persisted {
            if st.cluster.missing_block(id, block_count(r.length, r.block_size)) {
                return Err(ThawError::data_lost(format!(
                    "{p} is lost: a block has no replica left and no checkpoint was ever made"
                )));
            }
            if !r.persist_requested {
                let op = st.ns.update(id, |r| r.persist_requested = true)?;
                self.commit(st, &[op])?;
            }
            st.checkpoints.add(id, r.mtime_ms, r.temporary, true);
            self.work_ready();
        }
        Ok(PersistResponse { info: Some(Self::file_info(st, id, false, &Position::default())) })
    }

    /// A worker finished (or failed) the checkpoint of a file: move it to the
    /// path the file has now and mark the file persisted, or count the failure
    /// and let the file wait again. A file deleted meanwhile has its copy dropped.
    pub async fn checkpoint_done(&self, req: CheckpointDoneRequest) -> Result<CheckpointDoneResponse> {
        if req.master_epoch != self.epoch {
            return Err(ThawError::unavailable("the master restarted: register again"));
        }
        let fid = req.file_id;
        let _moves = self.ufs_moves.lock().await;
        let now = Instant::now();
        let target = {
            let mut st = self.write();
            if st.cluster.live_worker_mut(req.worker_id).is_none() {
                return Err(ThawError::unavailable(format!("worker {} is not registered", req.worker_id)));
            }
            match st.ns.record(fid) {
                None => None,
                Some(r) if r.persisted => {
                    st.checkpoints.drop_file(fid);
                    return Ok(CheckpointDoneResponse { persisted: true, blocks: blocks_of(&r) });
                }
                Some(_) if !req.error.is_empty() => {
                    tracing::warn!(file_id = fid, worker = req.worker_id, error = %req.error, "checkpoint failed");
                    st.checkpoints.failed(fid, now, &req.error);
                    return Ok(CheckpointDoneResponse::default());
                }
                Some(r) => Some((st.ns.path_of(fid), r)),
            }
        };
        let Some((p, r)) = target else {
            // Deleted before its checkpoint landed: never persisted.
            self.ufs.discard_checkpoint(fid).await?;
            return Ok(CheckpointDoneResponse::default());
        };
        let published = async {
            let have = self.ufs.checkpoint_length(fid).await?;
            if have != Some(r.length) {
                return Err(ThawError::precondition(format!(
                    "the checkpoint of {p} holds {} bytes; the file has {}",
                    have.map_or("no".to_string(), |n| n.to_string()),
                    r.length
                )));
            }
            self.ufs.publish_checkpoint(fid, &p).await
        }
        .await;
        let ufs = match published {
            Ok(ufs) => ufs,
            Err(e) => {
                tracing::warn!(file_id = fid, path = %p, error = %e, "checkpoint could not be published");
                self.write().checkpoints.failed(fid, now, &e.to_string());
                self.ufs.discard_checkpoint(fid).await?;
                return Ok(CheckpointDoneResponse::default());
            }
        };
        let mut st = self.write();
        let st = &mut *st;
        let op = st.ns.update(fid, |r| {
            r.persisted = true;
            r.persist_requested = false;
            r.ufs_mtime_ms = ufs.mtime_ms;
        })?;
        self.commit(st, &[op])?;
        st.checkpoints.succeeded(fid);
        st.unpersisted.remove(&fid);
        // The other holders of a spread file's blocks: cache now, as this worker's.
        st.cluster.unpin_file(fid, block_count(r.length, r.block_size), req.worker_id);
        tracing::debug!(file_id = fid, path = %p, bytes = r.length, "checkpoint published");
        Ok(CheckpointDoneResponse { persisted: true, blocks: blocks_of(&r) })
    }
}

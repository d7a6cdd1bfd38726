//! Writers of unfinished files: their leases (crate::leases), renewed by
//! the writers and expired by the master's liveness loop.

use super::*;

/// Longest writer name a create call may give (it is journaled with the file).
pub const MAX_WRITER_NAME: usize = 256;

impl Master {
    /// A writer renews its leases on the unfinished files it still writes;
    /// the answer names those it no longer holds (their writes have failed).
    pub fn renew_writer_lease(&self, req: RenewWriterLeaseRequest) -> Result<RenewWriterLeaseResponse> {
        if req.writer.is_empty() {
            return Err(ThawError::invalid("a writer must name itself"));
        }
        let mut st = self.write();
        let lost = st.leases.renew(&req.writer, &req.file_ids, Instant::now(), now_ms());
        Ok(RenewWriterLeaseResponse { lost, lease_ms: st.leases.limit().as_millis() as u64 })
    }

    /// Deletes the unfinished files whose writers stopped renewing their
    /// leases (killed, or cut off for longer than a lease): the namespace
    /// entry, its journal record and the blocks some worker committed. The
    /// workers dropped the writer's staged bytes when its connection ended.
    /// Returns the paths whose under-store copy may be in place (through and
    /// cache-through writes, and those of `State::deleted_writes` that waited
    /// long enough), for [`Master::drop_ufs_copies`].
    pub fn expire_writer_leases(&self) -> Vec<String> {
        let mut guard = self.write();
        let st = &mut *guard;
        let expired = st.leases.take_expired(Instant::now());
        let mut ufs_copies = Vec::new();
        for (file, writer) in expired {
            let Some(ino) = st.ns.get(file).filter(|i| !i.rec.complete) else {
                continue;
            };
            let wrote_ufs = write_type::of(ino.rec.write_type()).writes_under_store;
            let path = st.ns.path_of(file);
            if wrote_ufs {
                ufs_copies.push(path.clone());
            }
            let (_, ops) = st.remove_tree(file);
            if let Err(e) = self.commit(st, &ops) {
                tracing::error!(path, error = %e, "could not journal the recovery of an unfinished file");
                continue;
            }
            tracing::warn!(
                path,
                writer,
                "the writer of an unfinished file stopped renewing its lease: the file is deleted"
            );
        }
        // Writes deleted while written whose writer never completed: their
        // copies go once more, in case a worker closed one since.
        let ttl = st.leases.limit() * DELETED_WRITE_TTL_LEASES;
        let now = Instant::now();
        st.deleted_writes.retain(|_, (path, at)| {
            let keep = now.saturating_duration_since(*at) < ttl;
            if !keep {
                ufs_copies.push(path.clone());
            }
            keep
        });
        ufs_copies
    }

    /// Deletes the under-store copies of unfinished files the master dropped,
    /// unless a new entry took the path meanwhile.
    pub async fn drop_ufs_copies(&self, paths: Vec<String>) {
        for p in paths {
            let _moves = self.ufs_moves.lock().await;
            let taken = path::components(&p).is_ok_and(|c| self.read().ns.lookup(&c).is_some());
            if taken {
                continue;
            }
            if let Err(e) = self.ufs.delete(&p).await {
                tracing::warn!(path = %p, error = %e, "could not delete an unfinished file's under-store copy");
            }
        }
    }
}

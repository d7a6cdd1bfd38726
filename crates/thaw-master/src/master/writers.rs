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
    pub fn expire_writer_leases(&self) {
        let mut guard = self.write();
        let st = &mut *guard;
        let expired = st.leases.take_expired(Instant::now());
        for (file, writer) in expired {
            if st.ns.get(file).is_none_or(|i| i.rec.complete) {
                continue;
            }
            let path = st.ns.path_of(file);
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
    }
}

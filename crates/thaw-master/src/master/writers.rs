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
    ///
    /// A through or cache-through file may have its copy in the under-store
    /// already: that copy goes first, then the entry, as a delete does it.
    /// (The other way round, a lookup in between found the path missing,
    /// listed the under-store and took the dead writer's partial copy in as a
    /// complete file, which then stayed.) A copy the under-store would not
    /// delete keeps its entry for one more lease, then is tried again.
    /// Writes deleted while written (`State::deleted_writes`) that waited long
    /// enough lose their copies here too.
    pub async fn expire_writer_leases(&self) {
        let (through, copies) = {
            let mut guard = self.write();
            let st = &mut *guard;
            let mut through = Vec::new();
            for (file, writer) in st.leases.take_expired(Instant::now()) {
                let Some(ino) = st.ns.get(file).filter(|i| !i.complete()) else {
                    continue;
                };
                if write_type::of(ino.write_type()).writes_under_store {
                    through.push((file, writer));
                } else {
                    self.drop_unfinished(st, file, &writer);
                }
            }
            // Writes deleted while written whose writer never completed: their
            // copies go once more, in case a worker closed one since.
            let ttl = st.leases.limit() * DELETED_WRITE_TTL_LEASES;
            let now = Instant::now();
            let mut copies = Vec::new();
            st.deleted_writes.retain(|_, (path, at)| {
                let keep = now.saturating_duration_since(*at) < ttl;
                if !keep {
                    copies.push(path.clone());
                }
                keep
            });
            (through, copies)
        };
        for (file, writer) in through {
            // No rename or checkpoint moves the copy meanwhile.
            let _moves = self.ufs_moves.lock().await;
            let path = {
                let st = self.read();
                match st.ns.get(file) {
                    Some(i) if !i.complete() => st.ns.path_of(file),
                    _ => continue,
                }
            };
            if let Err(e) = self.ufs.delete(&path).await {
                tracing::warn!(path, error = %e, "could not delete an unfinished file's under-store copy: tried again after another lease");
                self.write().leases.grant(file, &writer, Instant::now(), now_ms());
                continue;
            }
            let mut guard = self.write();
            // Its writer cannot complete it now (no lease), but a delete may
            // have taken it.
            if guard.ns.get(file).is_some_and(|i| !i.complete()) {
                self.drop_unfinished(&mut guard, file, &writer);
            }
        }
        self.drop_ufs_copies(copies).await;
    }

    /// Removes an unfinished file whose lease ran out, with its soft state.
    fn drop_unfinished(&self, st: &mut State, file: u64, writer: &str) {
        let path = st.ns.path_of(file);
        let (_, ops) = st.remove_tree(file);
        if let Err(e) = self.commit(st, &ops) {
            tracing::error!(path, error = %e, "could not journal the recovery of an unfinished file");
            return;
        }
        tracing::warn!(
            path,
            writer,
            "the writer of an unfinished file stopped renewing its lease: the file is deleted"
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn master(lease: Duration) -> (Master, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ufs")).unwrap();
        let ufs = dir.path().join("ufs").display().to_string();
        let mut config = crate::config::MasterConfig::new(dir.path().join("journal"), ufs);
        config.writer_lease = lease;
        let m = Master::open(config).unwrap();
        // A through write needs a live worker to write through.
        let req = RegisterWorkerRequest { data_address: "127.0.0.1:1".into(), host: "h".into(), ..Default::default() };
        m.register_worker(req).unwrap();
        (m, dir)
    }

    /// A through write whose copy is in place, its writer about to die.
    async fn unfinished(m: &Master, dir: &std::path::Path, name: &str) -> u64 {
        let req = CreateFileRequest {
            path: format!("/{name}"),
            write_type: WriteType::Through as i32,
            writer: "w".into(),
            ..Default::default()
        };
        let id = m.create_file(req).await.unwrap().info.unwrap().file_id;
        std::fs::write(dir.join("ufs").join(name), b"partial").unwrap();
        id
    }

    async fn stat(m: &Master, path: &str) -> Result<GetStatusResponse> {
        m.get_status(GetStatusRequest { path: path.into(), ..Default::default() }).await
    }

    #[tokio::test]
    async fn an_expired_through_write_loses_its_copy_and_its_entry_and_a_lookup_does_not_bring_it_back() {
        let (m, dir) = master(Duration::from_millis(50));
        unfinished(&m, dir.path(), "f").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        m.expire_writer_leases().await;
        assert!(!dir.path().join("ufs/f").exists(), "the dead writer's copy stayed");
        let e = stat(&m, "/f").await.unwrap_err();
        assert_eq!(e.kind, thaw_common::ErrorKind::NotFound, "{e}");
    }

    /// Between the lease running out and the entry going (its copy is being
    /// deleted then), the writer cannot complete the file.
    #[tokio::test]
    async fn a_writer_whose_lease_ran_out_cannot_complete() {
        let (m, dir) = master(Duration::from_millis(50));
        let id = unfinished(&m, dir.path(), "f").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(m.write().leases.take_expired(Instant::now()).len(), 1);
        let e =
            m.complete_file(CompleteFileRequest { file_id: id, length: 7, ..Default::default() }).await.unwrap_err();
        assert!(e.message.contains("lease ran out"), "{e}");
        assert!(!stat(&m, "/f").await.unwrap().info.unwrap().complete);
        // With its lease, another file completes.
        let other = unfinished(&m, dir.path(), "g").await;
        m.complete_file(CompleteFileRequest { file_id: other, length: 7, ..Default::default() }).await.unwrap();
    }
}

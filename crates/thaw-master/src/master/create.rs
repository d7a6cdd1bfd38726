//! A file's write at the master, from its create (the checks, the writers
//! placed by `placement.rs`, its writer's lease) to its complete (its blocks
//! and under-store copy checked against the length its writer wrote).

use std::time::Instant;

use thaw_common::ids::{MAX_BLOCKS_PER_FILE, block_count, block_id, block_length};
use thaw_common::proto::*;
use thaw_common::write_type;
use thaw_common::{MAX_BLOCK_SIZE, MIN_BLOCK_SIZE, Result, ThawError, now_ms, path};

use super::{MAX_WRITER_NAME, Master, permissions, take_crcs};
use crate::namespace::NewInode;

impl Master {
    pub async fn create_file(&self, req: CreateFileRequest) -> Result<CreateFileResponse> {
        if let Some(next) = &req.next_segment {
            return self.next_segment(&req, next);
        }
        let comps = path::components(&req.path)?;
        let Some((name, parent_comps)) = comps.split_last() else {
            return Err(ThawError::is_dir("/ is a directory"));
        };
        let meaning = WriteType::try_from(req.write_type)
            .ok()
            .map(write_type::of)
            .filter(|m| m.is_known())
            .ok_or_else(|| ThawError::invalid(format!("unknown write type {}", req.write_type)))?;
        let write_type = meaning.write_type;
        if req.temporary && !meaning.checkpointed {
            return Err(ThawError::invalid(
                "temporary applies to async-through writes (the only ones checkpointed in the background)",
            ));
        }
        let block_size = if req.block_size == 0 { self.config.default_block_size } else { req.block_size };
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
            return Err(ThawError::invalid(format!(
                "block size {block_size} is outside [{MIN_BLOCK_SIZE}, {MAX_BLOCK_SIZE}]"
            )));
        }
        if req.writer.is_empty() && req.recover_lineage == 0 {
            return Err(ThawError::invalid("a file's writer must name itself (CreateFileRequest.writer)"));
        }
        if req.writer.len() > MAX_WRITER_NAME {
            return Err(ThawError::invalid(format!("a writer's name is at most {MAX_WRITER_NAME} bytes")));
        }
        let parent_path = path::join(parent_comps);
        if req.recursive && !req.recursive_under.is_empty() {
            let under = path::normalize(&req.recursive_under)?;
            let inside = parent_path == under || under == "/" || parent_path.starts_with(&format!("{under}/"));
            if !inside {
                return Err(ThawError::invalid(format!("{under} is not a directory above {}", req.path)));
            }
            let id = self.resolve(&under).await?;
            if !self.read().ns.get(id).is_some_and(|i| i.is_dir()) {
                return Err(ThawError::not_dir(format!("{under} is not a directory")));
            }
        }
        let parent = if req.recursive {
            self.mkdir(MkdirRequest { path: parent_path.clone(), recursive: true, exist_ok: true, mode: None }).await?;
            self.resolve(&parent_path).await?
        } else {
            self.resolve(&parent_path).await.map_err(|e| e.context("parent directory"))?
        };
        self.read().check_parent(parent)?;
        let full = path::join(&comps);
        let client = req.client.clone().unwrap_or_default();
        // A recomputation's write of a lineage output rebuilds the lost file in
        // place: before anything could replace it.
        if req.recover_lineage != 0 {
            let mut st = self.write();
            if let Some(resp) = self.recovery_session(&mut st, req.recover_lineage, &full, &client, req.segments)? {
                return Ok(resp);
            }
        }
        match self.resolve(&full).await {
            Ok(id) if req.overwrite => {
                // An unfinished file another writer still renews is that writer's.
                if let Some((writer, until)) = self.read().leases.holder(id)
                    && writer != req.writer
                {
                    return Err(ThawError::already_exists(format!(
                        "{full} is being written by {writer} (its lease runs {} s more unless renewed)",
                        until.saturating_sub(now_ms()).div_ceil(1000)
                    )));
                }
                self.delete(DeleteRequest { path: full.clone(), recursive: false, file_id: id }).await?;
            }
            // An existing file is replaced when the new one completes: the
            // new one is written at `stage_at` meanwhile.
            Ok(id) if !req.stage_at.is_empty() => {
                if self.read().ns.get(id).is_none_or(|i| i.is_dir()) {
                    return Err(ThawError::already_exists(format!("{full} is a directory")));
                }
                let staged = CreateFileRequest {
                    path: req.stage_at.clone(),
                    stage_at: String::new(),
                    recursive: true,
                    recursive_under: String::new(),
                    ..req
                };
                return Box::pin(self.create_file(staged)).await;
            }
            Ok(_) => return Err(ThawError::already_exists(format!("{full} already exists"))),
            Err(e) if e.kind == thaw_common::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let length = (req.length > 0 || req.length_known).then_some(req.length);
        let mut st = self.write();
        let now = Instant::now();
        let (workers, plan) =
            st.writers(&client, write_type, req.replication, req.segments, block_size, length, now)?;
        // A file at an output path of a lineage is that lineage's output.
        let owner = st.lineages.pending_output(&full);
        let lineage_id = owner.map_or(0, |(l, _)| l);
        let new = NewInode {
            block_size,
            write_type,
            temporary: req.temporary,
            lineage_id,
            writer: req.writer.clone(),
            ..self.new_entry(&st, parent, req.mode)
        };
        let (id, op) = st.ns.add(parent, name, new)?;
        let mut ops = vec![op];
        if let Some((l, index)) = owner {
            ops.extend(st.lineages.tie(l, index, id));
        }
        self.commit(&st, &ops)?;
        let segment_blocks = plan.first().map_or(0, |s| s.blocks);
        st.hold_segments(id, plan, block_size, now);
        st.leases.grant(id, &req.writer, now, now_ms());
        let info = Self::file_info(&st, id, false, &client);
        tracing::debug!(path = %full, file_id = id, ?write_type, writer = %req.writer, "file created");
        let writer_lease_ms = st.leases.limit().as_millis() as u64;
        let access = self.grant(true, id, &full);
        Ok(CreateFileResponse { info: Some(info), workers, recovery: false, writer_lease_ms, access, segment_blocks })
    }

    pub async fn complete_file(&self, mut req: CompleteFileRequest) -> Result<CompleteFileResponse> {
        let rename_to = std::mem::take(&mut req.rename_to);
        let done = self.complete_in_place(req).await?;
        if rename_to.is_empty() {
            return Ok(done);
        }
        let src = done.info.map(|i| i.path).unwrap_or_default();
        let rename = || RenameRequest { src: src.clone(), dst: rename_to.clone(), overwrite: true };
        let moved = match self.rename(rename()).await {
            // Its directory went meanwhile (its last key deleted): made again.
            Err(e) if e.kind == thaw_common::ErrorKind::NotFound => {
                let comps = path::components(&rename_to)?;
                let parent = path::join(&comps[..comps.len().saturating_sub(1)]);
                self.mkdir(MkdirRequest { path: parent, recursive: true, exist_ok: true, mode: None }).await?;
                self.rename(rename()).await
            }
            r => r,
        };
        Ok(CompleteFileResponse { info: moved?.info })
    }

    /// Completes a file where it was written.
    async fn complete_in_place(&self, req: CompleteFileRequest) -> Result<CompleteFileResponse> {
        let found = {
            let mut guard = self.write();
            let st = &mut *guard;
            match st.ns.get(req.file_id).filter(|i| !i.is_dir()) {
                Some(_) => None,
                None => Some(st.deleted_writes.remove(&req.file_id)),
            }
        };
        match found {
            // Deleted while it was written: its under-store copy, closed
            // since, goes too (see `State::deleted_writes`).
            Some(Some((p, _))) => {
                self.drop_ufs_copies(vec![p.clone()]).await;
                return Err(ThawError::not_found(format!("{p} was deleted while it was being written")));
            }
            Some(None) => return Err(ThawError::not_found(format!("file id {} does not exist", req.file_id))),
            None => {}
        }
        let (p, write_type, block_size) = {
            let mut guard = self.write();
            let st = &mut *guard;
            let ino = st
                .ns
                .get(req.file_id)
                .filter(|i| !i.is_dir())
                .ok_or_else(|| ThawError::not_found(format!("file id {} does not exist", req.file_id)))?;
            st.check(req.file_id, permissions::WRITE)?;
            // The write is over: what is left set aside for it is free again.
            st.cluster.release_reservations(req.file_id);
            if ino.complete() && st.recomputer.is_recovering(req.file_id) {
                let info = Self::finish_rebuild(st, req.file_id, req.length)?;
                return Ok(CompleteFileResponse { info: Some(info) });
            }
            if ino.complete() {
                return Err(ThawError::precondition(format!("{} is already complete", st.ns.path_of(req.file_id))));
            }
            (st.ns.path_of(req.file_id), ino.write_type(), ino.block_size())
        };
        let meaning = write_type::of(write_type);
        let blocks = block_count(req.length, block_size);
        if blocks > MAX_BLOCKS_PER_FILE {
            return Err(ThawError::invalid(format!("{} blocks is more than a file may have", blocks)));
        }
        let mut ufs_mtime = 0;
        if meaning.writes_under_store {
            let st = self.ufs.stat(&p).await?.ok_or_else(|| {
                ThawError::precondition(format!("{p}: the under-store copy is missing; the write did not finish"))
            })?;
            if st.length != req.length {
                return Err(ThawError::precondition(format!(
                    "{p}: the under-store copy has {} bytes, the client wrote {}",
                    st.length, req.length
                )));
            }
            ufs_mtime = st.mtime_ms;
        }
        let mut st = self.write();
        if st.ns.get(req.file_id).is_none_or(|i| i.complete()) {
            return Err(ThawError::precondition(format!("{p} changed while completing")));
        }
        // A writer whose lease ran out has lost the file: the master is
        // deleting it (its under-store copy first: `expire_writer_leases`).
        if st.leases.holder(req.file_id).is_none() {
            return Err(ThawError::precondition(format!(
                "{p}: no writer holds a lease on it (its lease ran out): the write did not finish"
            )));
        }
        if meaning.tier.is_some() {
            for index in 0..blocks {
                let want = block_length(req.length, block_size, index);
                let have = st.cluster.block(block_id(req.file_id, index));
                match have {
                    Some(e) if e.length == want => {}
                    Some(e) => {
                        return Err(ThawError::precondition(format!(
                            "{p}: block {index} holds {} bytes, expected {want}",
                            e.length
                        )));
                    }
                    // A cache-through file's blocks are cache: one evicted
                    // already (by the write's own later blocks, memory being
                    // full) is read from the under-store copy, checked above.
                    None if meaning.writes_under_store => {}
                    None => {
                        return Err(ThawError::precondition(format!(
                            "{p}: block {index} was never stored (truncated write or its worker died)"
                        )));
                    }
                }
            }
        }
        // A lineage output keeps its blocks' CRC-32s: a rebuild must match them.
        let lineage_output = st.ns.get(req.file_id).is_some_and(|i| i.lineage_id() != 0);
        let taken = take_crcs(&mut st.block_crcs, req.file_id);
        let crcs: Vec<u32> = if lineage_output {
            (0..blocks).map_while(|i| taken.get(&block_id(req.file_id, i)).copied()).collect()
        } else {
            Vec::new()
        };
        if lineage_output && crcs.len() as u64 != blocks {
            tracing::warn!(path = %p, "a lineage output was written without block checksums: a rebuild cannot be checked");
        }
        let op = st.ns.update(req.file_id, |r| {
            r.complete = true;
            r.length = req.length;
            r.persisted = meaning.writes_under_store;
            r.ufs_mtime_ms = ufs_mtime;
            r.block_crc32 = if crcs.len() as u64 == blocks { crcs } else { Vec::new() };
            r.writer.clear();
        })?;
        self.commit(&st, &[op])?;
        st.leases.release(req.file_id);
        if !meaning.writes_under_store {
            st.unpersisted.insert(req.file_id);
        }
        if meaning.checkpointed {
            let rec = st.ns.get(req.file_id).expect("just completed");
            let (written, temporary) = (rec.mtime_ms(), rec.temporary());
            st.checkpoints.add(req.file_id, written, temporary, false);
            self.work_ready();
        }
        Ok(CompleteFileResponse { info: Some(Self::file_info(&st, req.file_id, false, &Position::default())) })
    }
}

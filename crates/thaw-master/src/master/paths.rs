//! The namespace calls over the under-store mount: a path resolved (loaded
//! from the under-store the first time it is seen), a directory brought in
//! line with its listing, a file described (`file_info`), status and
//! listing, mkdir, delete and rename. Under-store I/O happens before the
//! state lock is taken.

use std::time::Instant;

use thaw_common::ids::{block_count, block_id, block_length};
use thaw_common::proto::*;
use thaw_common::{Result, ThawError, now_ms, path};

use super::{Master, State, checkpoints, permissions};
use crate::namespace::{NewInode, ROOT_ID};

/// The most entries one `ListStatus` answer holds (see `Master::list_status`):
/// 1,000 files with their blocks are a few hundred KiB.
pub const MAX_LIST_PAGE: usize = 1000;

impl Master {
    /// The inode of an entry found in the under-store: complete and persisted.
    pub(super) fn ufs_inode(&self, st: &thaw_ufs::UfsStatus) -> NewInode {
        NewInode {
            is_dir: st.is_dir,
            length: st.length,
            block_size: self.config.default_block_size,
            complete: true,
            persisted: true,
            write_type: WriteType::Through,
            ufs_mtime_ms: st.mtime_ms,
            temporary: false,
            lineage_id: 0,
            writer: String::new(),
            owner: String::new(),
            group: String::new(),
            mode: None,
        }
    }

    /// The inode at `p`, loading it (and missing parents) from the under-store if
    /// Thaw has not seen it yet: the under-store root is mounted at '/'.
    pub(super) async fn resolve(&self, p: &str) -> Result<u64> {
        let comps = path::components(p)?;
        if let Some(id) = self.read().ns.lookup(&comps) {
            return Ok(id);
        }
        let mut parent = ROOT_ID;
        for depth in 0..comps.len() {
            let prefix = &comps[..=depth];
            if let Some(id) = self.read().ns.lookup(prefix) {
                parent = id;
                continue;
            }
            let here = path::join(prefix);
            let Some(st) = self.ufs.stat(&here).await? else {
                return Err(ThawError::not_found(format!("no such file or directory: {}", path::join(&comps))));
            };
            let mut state = self.write();
            if let Some(id) = state.ns.lookup(prefix) {
                parent = id;
                continue;
            }
            let (id, op) = state.ns.add(parent, prefix[depth], self.ufs_inode(&st))?;
            self.commit(&state, &[op])?;
            parent = id;
        }
        Ok(parent)
    }

    /// Brings directory `id` (at `p`) in line with its under-store listing: new
    /// entries appear, changed files get a new id, persisted entries deleted from
    /// the under-store disappear (unless changed in Thaw since the listing began).
    pub(super) async fn sync_dir(&self, id: u64, p: &str) -> Result<()> {
        let started = now_ms();
        let listing = self.ufs.list(p).await?;
        let mut state = self.write();
        let st = &mut *state;
        if !st.ns.get(id).is_some_and(|i| i.is_dir()) {
            return Ok(());
        }
        let mut ops = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (name, ufs) in &listing {
            if path::components(&format!("/{name}")).is_err() {
                continue; // a name Thaw cannot address
            }
            seen.insert(name.clone());
            let existing = st.ns.get(id).and_then(|i| i.child(name));
            if let Some(child) = existing {
                let rec = st.ns.get(child).expect("child");
                let changed = !rec.is_dir()
                    && !ufs.is_dir
                    && rec.persisted()
                    && rec.complete()
                    && rec.mtime_ms() < started
                    && (rec.length() != ufs.length || (rec.ufs_mtime_ms() != 0 && rec.ufs_mtime_ms() != ufs.mtime_ms));
                if !changed {
                    continue;
                }
                let (_, mut removed) = st.remove_tree(child);
                ops.append(&mut removed);
            }
            let (_, op) = st.ns.add(id, name, self.ufs_inode(ufs))?;
            ops.push(op);
        }
        // Entries the under-store no longer lists, found without copying the
        // directory's names (a million of them were a tenth of a listing).
        let gone: Vec<u64> = st
            .ns
            .get(id)
            .and_then(|d| d.children())
            .into_iter()
            .flatten()
            .filter(|(name, child)| {
                !seen.contains(name.as_str())
                    && st.ns.get(**child).is_some_and(|r| r.persisted() && r.mtime_ms() < started)
            })
            .map(|(_, child)| *child)
            .collect();
        for child in gone {
            let keeps_unpersisted =
                st.ns.files_under(child).iter().any(|f| !st.ns.get(*f).is_some_and(|i| i.persisted()));
            if keeps_unpersisted {
                ops.push(st.ns.update(child, |r| r.persisted = false)?);
            } else {
                let (_, mut removed) = st.remove_tree(child);
                ops.append(&mut removed);
            }
        }
        if !ops.is_empty() {
            self.commit(st, &ops)?;
        }
        Ok(())
    }

    pub(super) fn file_info(st: &State, id: u64, with_blocks: bool, client: &Position) -> FileInfo {
        let ino = st.ns.get(id).expect("caller resolved the id");
        let r = ino;
        let mut info = FileInfo {
            file_id: id,
            path: st.ns.path_of(id),
            name: r.name().to_string(),
            is_dir: r.is_dir(),
            length: r.length(),
            block_size: r.block_size(),
            complete: r.complete(),
            persisted: r.persisted(),
            write_type: r.write_type() as i32,
            mtime_ms: r.mtime_ms(),
            ..Default::default()
        };
        permissions::describe(&mut info, r);
        if r.is_dir() {
            info.persistence = Persistence::Persisted as i32;
            return info;
        }
        let n = if r.complete() { block_count(r.length(), r.block_size()) } else { 0 };
        for index in 0..n {
            let bid = block_id(id, index);
            let length = block_length(r.length(), r.block_size(), index);
            let mut replicas = st.cluster.ordered_replicas(bid, client);
            if replicas.iter().any(|x| x.tier == Tier::Mem as i32) {
                info.in_memory_bytes += length;
            } else if let Some(w) = st.migrations.disk_migration_worker(bid) {
                // A block on its way into memory: read it at the worker moving it,
                // which serves it from memory once the copy lands (or drops the
                // queued copy and reads its disk once), instead of a second disk
                // reading the same block alongside the migration.
                if let Some(i) = replicas.iter().position(|x| x.worker_id == w && x.tier == Tier::Disk as i32) {
                    let r = replicas.remove(i);
                    replicas.insert(0, r);
                }
            }
            // Right after a start, the workers holding it may not have
            // re-registered yet: not lost, only unavailable for now.
            if replicas.is_empty() && !r.persisted() && Instant::now() >= st.warm_until {
                info.lost = true;
            }
            if with_blocks {
                // Where a pending migration will copy it (none once it is in memory).
                let migration_target = st
                    .migrations
                    .target_of(bid)
                    .filter(|_| !replicas.iter().any(|x| x.tier == Tier::Mem as i32))
                    .and_then(|(w, _)| st.cluster.replica_at(w, Tier::Mem, client));
                let offset = index * r.block_size();
                info.blocks.push(BlockInfo { block_id: bid, offset, length, replicas, migration_target });
            }
        }
        info.temporary = r.temporary();
        if !r.complete()
            && let Some((writer, until)) = st.leases.holder(id)
        {
            info.writer = writer.to_string();
            info.lease_expires_ms = until;
        }
        info.lineage_id = r.lineage_id();
        let (rebuild, detail) =
            if info.lost { Self::rebuild_state(st, id, r.lineage_id()) } else { (Rebuild::None, String::new()) };
        info.rebuild = rebuild as i32;
        info.rebuild_detail = detail;
        st.recomputer.fill_rebuilds(id, &mut info);
        info.persistence = checkpoints::persistence(st, id, r, info.lost) as i32;
        info.persist_error = st.checkpoints.error(id).unwrap_or_default().to_string();
        info.persist_waiting = Self::persist_waiting(st, id);
        info
    }

    /// The normalized path and id of the file at `path`, for a call (`verb`)
    /// that names files only.
    pub(super) async fn resolve_file(&self, path: &str, verb: &str) -> Result<(String, u64)> {
        let p = path::normalize(path)?;
        let id = self.resolve(&p).await?;
        if self.read().ns.get(id).is_some_and(|i| i.is_dir()) {
            return Err(ThawError::is_dir(format!("{p} is a directory: {verb} names files")));
        }
        Ok((p, id))
    }

    pub async fn get_status(&self, req: GetStatusRequest) -> Result<GetStatusResponse> {
        let id = self.resolve(&req.path).await?;
        let client = req.client.unwrap_or_default();
        let st = self.read();
        if st.ns.get(id).is_none() {
            return Err(ThawError::not_found(format!("no such file or directory: {}", req.path)));
        }
        let is_dir = st.ns.get(id).is_some_and(|i| i.is_dir());
        st.check(id, if req.blocks && !is_dir { permissions::READ } else { 0 })?;
        let mut info = Self::file_info(&st, id, req.blocks, &client);
        self.grant_reads(&st, &mut info);
        let read_through_workers = if req.blocks && !info.is_dir {
            let now = Instant::now();
            st.cluster.nearest_workers(&client).into_iter().map(|w| w.info(now)).collect()
        } else {
            Vec::new()
        };
        Ok(GetStatusResponse { info: Some(info), read_through_workers })
    }

    /// A page of a directory's entries in name order (a file: its own
    /// status). Pages hold at most [`MAX_LIST_PAGE`] entries whatever the
    /// caller asks (0 included), so no answer outgrows a message and no call
    /// holds the state lock for a whole million-entry directory; the cursor is
    /// a name, so entries added or removed between pages cost nothing and a
    /// stale or made-up cursor only starts the page elsewhere. The directory
    /// is brought in line with its under-store listing at its first page only:
    /// once per listing, not once per page.
    pub async fn list_status(&self, req: ListStatusRequest) -> Result<ListStatusResponse> {
        let id = self.resolve(&req.path).await?;
        let is_dir = self.read().ns.get(id).is_some_and(|i| i.is_dir());
        self.read().check(id, if is_dir { permissions::READ | permissions::EXEC } else { 0 })?;
        if is_dir && req.start_after.is_empty() {
            let p = path::normalize(&req.path)?;
            self.sync_dir(id, &p).await?;
        }
        let st = self.read();
        let client = req.client.unwrap_or_default();
        let limit = match req.limit as usize {
            0 => MAX_LIST_PAGE,
            n => n.min(MAX_LIST_PAGE),
        };
        let (mut entries, truncated) = if is_dir {
            if st.ns.get(id).is_none_or(|i| !i.is_dir()) {
                return Err(ThawError::not_found(format!("{} was deleted during the listing", req.path)));
            }
            let (page, more) = st.ns.children_page(id, &req.start_after, limit);
            (page.into_iter().map(|(_, c)| Self::file_info(&st, c, req.blocks, &client)).collect(), more)
        } else {
            (vec![Self::file_info(&st, id, req.blocks, &client)], false)
        };
        for e in &mut entries {
            self.grant_reads(&st, e);
        }
        Ok(ListStatusResponse { entries, truncated })
    }

    pub async fn mkdir(&self, req: MkdirRequest) -> Result<MkdirResponse> {
        let comps = path::components(&req.path)?;
        if comps.is_empty() {
            return if req.exist_ok {
                Ok(MkdirResponse { info: Some(Self::file_info(&self.read(), ROOT_ID, false, &Position::default())) })
            } else {
                Err(ThawError::already_exists("/ already exists"))
            };
        }
        let mut parent = ROOT_ID;
        for depth in 0..comps.len() {
            let here = path::join(&comps[..=depth]);
            let last = depth + 1 == comps.len();
            match self.resolve(&here).await {
                Ok(id) => {
                    let is_dir = self.read().ns.get(id).is_some_and(|i| i.is_dir());
                    if !is_dir {
                        return Err(ThawError::not_dir(format!("{here} is a file")));
                    }
                    if last && !req.exist_ok {
                        return Err(ThawError::already_exists(format!("{here} already exists")));
                    }
                    parent = id;
                }
                Err(e) if e.kind == thaw_common::ErrorKind::NotFound => {
                    if !last && !req.recursive {
                        return Err(ThawError::not_found(format!("parent directory {here} does not exist")));
                    }
                    self.read().check_parent(parent)?;
                    self.ufs.create_dir(&here).await?;
                    let mut st = self.write();
                    let new = NewInode {
                        is_dir: true,
                        complete: true,
                        persisted: true,
                        ..self.new_entry(&st, parent, req.mode)
                    };
                    let (id, op) = match st.ns.add(parent, comps[depth], new) {
                        Ok(x) => x,
                        Err(e) if e.kind == thaw_common::ErrorKind::AlreadyExists && (req.exist_ok || !last) => {
                            parent = st.ns.lookup(&comps[..=depth]).expect("exists");
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    self.commit(&st, &[op])?;
                    parent = id;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(MkdirResponse { info: Some(Self::file_info(&self.read(), parent, false, &Position::default())) })
    }

    pub async fn delete(&self, req: DeleteRequest) -> Result<DeleteResponse> {
        let p = path::normalize(&req.path)?;
        if p == "/" {
            return Err(ThawError::invalid("refusing to delete /"));
        }
        let id = self.resolve(&p).await?;
        if req.file_id != 0 && id != req.file_id {
            return Err(ThawError::not_found(format!(
                "{p} is no longer file {} (another file took the path)",
                req.file_id
            )));
        }
        {
            let st = self.read();
            let parent = st.ns.get(id).map_or(ROOT_ID, |i| i.parent_id());
            st.check_parent(parent)?;
        }
        // Before reading `persisted`: a checkpoint may be moving into place.
        let _moves = self.ufs_moves.lock().await;
        // Where it is now (a rename may have moved it meanwhile).
        let (p, is_dir) = {
            let st = self.read();
            let i = st.ns.get(id).ok_or_else(|| ThawError::not_found(format!("no such file or directory: {p}")))?;
            (st.ns.path_of(id), i.is_dir())
        };
        if is_dir {
            self.sync_dir(id, &p).await?;
            if !req.recursive && !self.read().ns.children(id).is_empty() {
                return Err(ThawError::not_empty(format!("{p} is not empty")));
            }
        }
        // Whatever the under-store holds at the path goes, whether or not the
        // journal says the file is persisted: the next listing would bring it
        // back. Not only a persisted file has a copy there: an unfinished
        // through or cache-through file may have it in place already (its
        // writer died before completing it: the fault campaign's finding 1),
        // and a checkpoint may have been published by a master killed before
        // it journaled the file persisted. (A file absent there costs a stat.)
        self.ufs.delete(&p).await?;
        let mut st = self.write();
        let st = &mut *st;
        if st.ns.get(id).is_none() {
            return Ok(DeleteResponse {});
        }
        // A large tree leaves the namespace in one small commit and its
        // records go in batches behind it (`namespace::reaper`), so the
        // master goes on serving meanwhile.
        let batch = self.config.delete_batch.max(1);
        let large = st.ns.larger_than(id, batch);
        let (files, ops) = if large { st.detach_tree(id)? } else { st.remove_tree(id) };
        self.commit(st, &ops)?;
        tracing::debug!(path = %p, files = files.len(), large, "deleted");
        if large {
            self.reap_soon.notify_one();
        }
        Ok(DeleteResponse {})
    }

    /// Removes the records of deleted trees from the journal, a batch of
    /// `delete_batch` per commit, the lock released between batches. Returns
    /// how many it removed; stops at a failed commit (the records stay in the
    /// journal, gone from memory: the next start takes them up again).
    pub async fn reap(&self) -> usize {
        let batch = self.config.delete_batch.max(1);
        let mut removed = 0;
        loop {
            {
                let mut st = self.write();
                let ops = st.ns.reap(batch);
                if ops.is_empty() {
                    break;
                }
                if let Err(e) = self.commit(&st, &ops) {
                    tracing::warn!(error = %e, left = st.ns.doomed_len(), "removing a deleted tree's records failed");
                    break;
                }
                removed += ops.len();
            }
            tokio::task::yield_now().await;
        }
        if removed > 0 {
            tracing::debug!(removed, "deleted trees' records removed");
        }
        removed
    }

    /// Inodes of deleted trees whose records are still being removed.
    pub fn inodes_being_deleted(&self) -> usize {
        self.read().ns.doomed_len()
    }

    pub async fn rename(&self, req: RenameRequest) -> Result<RenameResponse> {
        let src = path::normalize(&req.src)?;
        let dst_comps = path::components(&req.dst)?;
        let Some((name, parent_comps)) = dst_comps.split_last() else {
            return Err(ThawError::already_exists("/ already exists"));
        };
        let dst = path::join(&dst_comps);
        if src == "/" {
            return Err(ThawError::invalid("cannot rename /"));
        }
        if dst.starts_with(&format!("{src}/")) {
            return Err(ThawError::invalid(format!("cannot move {src} into itself ({dst})")));
        }
        let id = self.resolve(&src).await?;
        // A file replaced (with `overwrite`): removed in the rename's commit.
        let replaced = match self.resolve(&dst).await {
            Ok(d) if req.overwrite && d != id && self.read().ns.get(d).is_some_and(|i| !i.is_dir()) => Some(d),
            Ok(d) if req.overwrite && d != id => {
                return Err(ThawError::already_exists(format!("{dst} is a directory: a rename replaces files only")));
            }
            Ok(_) => return Err(ThawError::already_exists(format!("{dst} already exists"))),
            Err(e) if e.kind == thaw_common::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let parent = self.resolve(&path::join(parent_comps)).await.map_err(|e| e.context("rename target parent"))?;
        if !self.read().ns.get(parent).is_some_and(|i| i.is_dir()) {
            return Err(ThawError::not_dir(format!("{} is not a directory", path::join(parent_comps))));
        }
        {
            let st = self.read();
            st.check_parent(st.ns.get(id).map_or(ROOT_ID, |i| i.parent_id()))?;
            st.check_parent(parent)?;
        }
        let _moves = self.ufs_moves.lock().await;
        let mut copied = Vec::new();
        if self.ufs.stat(&src).await?.is_some() {
            // Over a replaced file's copy, in one step on every store.
            copied = self.ufs.rename(&src, &dst, replaced.is_some()).await?;
        } else if replaced.is_some() {
            // The replaced file's copy goes, or the next listing would bring
            // it back over the moved file (as a delete removes it first).
            self.ufs.delete(&dst).await?;
        }
        let mut st = self.write();
        let mut ops = Vec::new();
        if let Some(d) = replaced
            && st.ns.get(d).is_some()
        {
            ops.extend(st.remove_tree(d).1);
        }
        ops.push(st.ns.rename(id, parent, name)?);
        ops.extend(st.record_copies(id, &dst, copied)?);
        self.commit(&st, &ops)?;
        Ok(RenameResponse { info: Some(Self::file_info(&st, id, false, &Position::default())) })
    }
}

//! Where a write's bytes go. A memory write (must-cache, async-through,
//! cache-through) from a client that writes in segments
//! (`CreateFileRequest.segments`) is placed a segment at a time, each a run
//! of whole blocks on one worker: the writer's own worker while it has room,
//! then the others by free memory ([`crate::cluster::Cluster::choose_segment`]),
//! the master setting each segment's memory aside until its blocks are
//! committed, so two writers are not handed the same free space. A file may
//! then be as large as the cluster's free memory, not one worker's, and its
//! length need not be known in advance: the client asks for the next segment
//! (CreateFile with `next_segment`) when it has filled the last one.
//!
//! Why segments asked for one at a time, and through CreateFile: the client
//! streams (a file's length is unknown until it closes), and a worker refuses
//! a block only once its bytes are on the way, too late to send them
//! elsewhere without holding a whole block back; a placement known before the
//! bytes leave needs none of that. The ask reuses CreateFile because it needs
//! what a create checks (the writer and its lease, write permission, a worker
//! with room) and answers what a create answers (the worker, the grant). Every
//! other write, and a client that does not write in segments (an older one),
//! is placed as before ([`crate::cluster::Cluster::choose_writers`]).

use thaw_common::write_type;

use super::*;
use crate::cluster::Segment;

impl State {
    /// The workers of a new write (or a rebuild) of a file of `block_size`,
    /// and, for a segmented memory write, its segments: the first, and for a
    /// write whose blocks are the only copy (must-cache, async-through) of a
    /// `length` its writer knows (0: unknown), every later one too, the
    /// whole file's memory found before a byte is sent
    /// ([`crate::cluster::Cluster::plan_write`]; to set aside once the file
    /// has its id: [`State::hold_segments`]). A cache-through write is never
    /// refused for memory it could evict (its bytes are in the under-store,
    /// its blocks cache), so it is placed a segment at a time. A memory-only
    /// write declared empty (`length` known and 0) is placed nowhere: no
    /// worker, nothing set aside (a thousand concurrent creates of empty
    /// files would each hold a block otherwise, and fail on a small tier).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn writers(
        &self,
        client: &Position,
        wt: WriteType,
        replication: u32,
        segments: bool,
        block_size: u64,
        length: Option<u64>,
        now: Instant,
    ) -> Result<(Vec<WorkerInfo>, Vec<Segment>)> {
        let meaning = write_type::of(wt);
        if length == Some(0) && meaning.in_memory() && meaning.memory_only_copy() {
            return Ok((Vec::new(), Vec::new()));
        }
        let length = length.unwrap_or(0);
        if segments && meaning.in_memory() {
            let plan = if length > 0 && meaning.memory_only_copy() {
                let blocks = thaw_common::ids::block_count(length, block_size);
                if blocks > thaw_common::ids::MAX_BLOCKS_PER_FILE {
                    return Err(ThawError::invalid(format!(
                        "a file of {length} bytes in blocks of {block_size} has more blocks than a file may have"
                    )));
                }
                self.cluster.plan_write(client, blocks, block_size, now)?
            } else {
                vec![self.cluster.choose_segment(client, 0, block_size, 0, now)?]
            };
            let w = self.cluster.worker(plan[0].worker).expect("chosen among live workers");
            return Ok((vec![w.info(now)], plan));
        }
        let workers = self.cluster.choose_writers(client, wt, replication)?.into_iter().map(|w| w.info(now)).collect();
        Ok((workers, Vec::new()))
    }

    /// Sets a new write's segments aside for file `id` (from [`State::writers`]).
    pub(super) fn hold_segments(&mut self, id: u64, plan: Vec<Segment>, block_size: u64, now: Instant) {
        let mut plan = plan.into_iter();
        if let Some(first) = plan.next() {
            self.cluster.reserve(first, id, block_size, now);
            self.cluster.hold_plan(id, plan.collect(), block_size, now);
        }
    }
}

impl Master {
    /// CreateFile with `next_segment`: the next segment of an unfinished
    /// memory file its writer is writing (or of a file a lineage rerun is
    /// rebuilding).
    pub(super) fn next_segment(&self, req: &CreateFileRequest, next: &NextSegment) -> Result<CreateFileResponse> {
        let mut guard = self.write();
        let st = &mut *guard;
        let id = next.file_id;
        let rec = st
            .ns
            .get(id)
            .filter(|i| !i.is_dir())
            .map(|i| i.record(id))
            .ok_or_else(|| ThawError::not_found(format!("file id {id} does not exist (deleted meanwhile?)")))?;
        let path = st.ns.path_of(id);
        st.check(id, permissions::WRITE)?;
        let recovery = rec.complete && st.recomputer.is_recovering(id);
        if rec.complete && !recovery {
            return Err(ThawError::precondition(format!("{path} is complete: no more segments")));
        }
        if !recovery {
            match st.leases.holder(id) {
                Some((writer, _)) if writer == req.writer => {}
                Some((writer, _)) => {
                    return Err(ThawError::precondition(format!(
                        "{path} is being written by {writer}, not by {}",
                        req.writer
                    )));
                }
                None => {
                    return Err(ThawError::precondition(format!(
                        "{path}: no writer holds a lease on it (its lease ran out?)"
                    )));
                }
            }
        }
        let wt = rec.write_type();
        if !write_type::of(wt).in_memory() {
            return Err(ThawError::invalid(format!("{path} is not a memory write: it has no segments")));
        }
        if next.first_block >= thaw_common::ids::MAX_BLOCKS_PER_FILE {
            return Err(ThawError::invalid("file has more blocks than a file may have"));
        }
        let client = req.client.clone().unwrap_or_default();
        let now = Instant::now();
        // Planned at create (its length known): already set aside.
        let seg = match st.cluster.next_planned(id, now) {
            Some(seg) => seg,
            None => {
                let seg = st
                    .cluster
                    .choose_segment(&client, next.first_block, rec.block_size, next.previous_worker, now)
                    .map_err(|e| e.context(path.clone()))?;
                st.cluster.reserve(seg, id, rec.block_size, now);
                seg
            }
        };
        let worker = st.cluster.worker(seg.worker).expect("chosen among live workers").info(now);
        tracing::debug!(
            path,
            file_id = id,
            first_block = next.first_block,
            worker = seg.worker,
            blocks = seg.blocks,
            "segment placed"
        );
        let info = Self::file_info(st, id, false, &client);
        let access = self.grant(true, id, &path);
        Ok(CreateFileResponse {
            info: Some(info),
            workers: vec![worker],
            recovery,
            writer_lease_ms: 0,
            access,
            segment_blocks: seg.blocks,
        })
    }
}

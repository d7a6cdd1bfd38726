//! The master's side of the worker protocol: registration, heartbeats and held
//! asks, block commits, liveness and the planner's rounds; and the cluster's
//! status as clients see it.
//!
//! Liveness: a worker silent for `worker_timeout` is declared dead
//! ([`Master::expire_workers`]). One whose process is gone is found sooner: a
//! live worker silent for one and a half heartbeat intervals is probed, and a
//! refused connection to its data port (nothing listens there) with no
//! heartbeat since declares it dead at once ([`Master::probe_silent_workers`];
//! the decision in [`crate::liveness`]).

use std::time::{Duration, Instant};

use thaw_common::proto::*;
use thaw_common::write_type;
use thaw_common::{Result, ThawError};

use thaw_common::ids::{block_count, block_length, file_of_block, index_of_block};

use super::{Master, State, checkpoints, live_workers};
use crate::liveness::Probe;
use crate::namespace::Namespace;

/// How long [`Master::probe_silent_workers`] waits for a worker's data port
/// to answer (no answer: a host down or cut off, left to the timeout).
const PROBE_WAIT: Duration = Duration::from_secs(1);

impl Master {
    pub fn cluster_status(&self) -> GetClusterStatusResponse {
        let st = self.read();
        let now = Instant::now();
        GetClusterStatusResponse {
            workers: st
                .cluster
                .workers()
                .map(|w| {
                    let mut info = w.info(now);
                    info.migration = st.migrations.worker_load(w.id).map(|l| WorkerMigrationState {
                        room: st.migrations.room_left(&st.cluster, w.id, now),
                        ..migration_state(l)
                    });
                    info
                })
                .collect(),
            ufs_uri: self.ufs.uri().to_string(),
            default_block_size: self.config.default_block_size,
            files: st.ns.file_count() as u64,
            blocks_in_memory: st.cluster.blocks_in_memory() as u64,
            master_epoch: self.epoch,
            persistence: Some(checkpoints::totals(&st)),
            masters: Vec::new(),
        }
    }

    /// Whether a stored block fits the namespace: its file exists and, if the file
    /// is complete, the block's index and length match.
    fn block_fits(st: &State, block: u64, length: u64) -> Result<()> {
        Self::block_fits_ns(&st.ns, block, length)
    }

    pub(super) fn block_fits_ns(ns: &Namespace, block: u64, length: u64) -> Result<()> {
        let file = file_of_block(block);
        let ino = ns
            .get(file)
            .filter(|i| !i.is_dir())
            .ok_or_else(|| ThawError::not_found(format!("block {block}: its file ({file}) does not exist")))?;
        if ino.complete() {
            let index = index_of_block(block);
            let want = block_length(ino.length(), ino.block_size(), index);
            if index >= block_count(ino.length(), ino.block_size()) || want != length {
                return Err(ThawError::invalid(format!(
                    "block {block}: {length} bytes do not fit file {file} (expected {want})"
                )));
            }
        }
        Ok(())
    }

    /// Whether under-store bytes `src` are block `block`'s: its persisted file's
    /// path, at the block's offset and length.
    fn source_fits(st: &State, block: u64, src: &UfsSource) -> Result<()> {
        let file = file_of_block(block);
        let ino = st.ns.get(file).ok_or_else(|| ThawError::not_found(format!("block {block}: file is gone")))?;
        let offset = index_of_block(block) * ino.block_size();
        let want = block_length(ino.length(), ino.block_size(), index_of_block(block));
        let path = st.ns.path_of(file);
        if !ino.persisted() || path != src.path || offset != src.offset || want != src.length {
            return Err(ThawError::invalid(format!(
                "block {block} was filled from {}@{}+{}, but it is {path}@{offset}+{want}",
                src.path, src.offset, src.length
            )));
        }
        Ok(())
    }

    pub fn register_worker(&self, req: RegisterWorkerRequest) -> Result<RegisterWorkerResponse> {
        if req.data_address.is_empty() {
            return Err(ThawError::invalid("worker registration without a data address"));
        }
        let mut st = self.write();
        let st = &mut *st;
        let id = st.cluster.register(&req.data_address, &req.host, &req.rack, req.tiers, Instant::now());
        if let Some(w) = st.cluster.live_worker_mut(id) {
            w.metrics_address = req.metrics_address;
        }
        let mut remove_blocks = Vec::new();
        let mut unpin_blocks = Vec::new();
        for b in req.blocks {
            let tier = Tier::try_from(b.tier).unwrap_or(Tier::Unspecified);
            if tier != Tier::Unspecified && Self::block_fits_ns(&st.ns, b.block_id, b.length).is_ok() {
                st.cluster.add_replica(b.block_id, id, tier, b.length);
                if st.ns.get(file_of_block(b.block_id)).is_some_and(|i| i.persisted()) {
                    unpin_blocks.push(b.block_id);
                }
            } else {
                remove_blocks.push(b.block_id);
            }
        }
        // A (re)registered worker starts without migration state (it purged its
        // own): what was bound to it goes elsewhere. Checkpoints it was writing
        // it names again with its next heartbeat.
        st.migrations.worker_lost(&st.cluster, id);
        st.checkpoints.worker_lost(id);
        st.recomputer.mark_dirty();
        tracing::info!(worker = id, address = %req.data_address, host = %req.host, rack = %req.rack, stale = remove_blocks.len(), "worker registered");
        Ok(RegisterWorkerResponse {
            worker_id: id,
            master_epoch: self.epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval.as_millis() as u64,
            ufs_uri: self.ufs.uri().to_string(),
            remove_blocks,
            default_block_size: self.config.default_block_size,
            unpin_blocks,
        })
    }

    pub fn heartbeat(&self, req: HeartbeatRequest) -> HeartbeatResponse {
        let again = HeartbeatResponse { reregister: true, ..Default::default() };
        if req.master_epoch != self.epoch {
            return again;
        }
        let mut st = self.write();
        let st = &mut *st;
        let Some(w) = st.cluster.live_worker_mut(req.worker_id) else {
            return again;
        };
        w.last_heartbeat = Instant::now();
        let light = req.light;
        // A light ask leaves tier use, job counters, devices and removals (and
        // the removals the master asks for) to the next full heartbeat.
        let (remove_blocks, unpin_blocks) = if light {
            (Vec::new(), Vec::new())
        } else {
            w.jobs = req.jobs;
            w.cache_files = req.files;
            w.devices = req.devices;
            let unpin_blocks = std::mem::take(&mut w.pending_unpins);
            st.checkpoints.reconcile(
                req.worker_id,
                &req.checkpointing,
                Instant::now(),
                3 * self.config.heartbeat_interval,
            );
            let remove_blocks = Self::block_changes(st, req.worker_id, req.tiers, req.removed_blocks);
            (remove_blocks, unpin_blocks)
        };
        let interval = self.config.heartbeat_interval;
        let mut orders = if light {
            st.migrations.ask(&st.cluster, req.worker_id, req.migration, req.reads, interval)
        } else {
            st.migrations.heartbeat(&st.cluster, req.worker_id, req.migration, req.reads, interval)
        };
        // Under-store sources as of now: a file renamed since the migrate call
        // is read at its new path.
        for cmd in &mut orders.migrations {
            if let Some(ufs) = cmd.ufs.as_mut() {
                let file = file_of_block(cmd.block_id);
                if st.ns.get(file).is_some_and(|i| i.persisted()) {
                    ufs.path = st.ns.path_of(file);
                }
            }
        }
        let checkpoints = self.checkpoint_orders(st, req.worker_id);
        let (affinities, default_affinity) = if light { (Vec::new(), 0.0) } else { Self::affinity_table(st) };
        HeartbeatResponse {
            affinities,
            default_affinity,
            reregister: false,
            checkpoints,
            remove_blocks,
            migrations: orders.migrations,
            references: orders.references,
            evictions: orders.evictions,
            migrating_jobs: orders.migrating_jobs,
            dead_jobs: orders.dead_jobs,
            migrations_waiting: orders.migrations_waiting,
            light,
            waiting_sources: orders.waiting_sources.into_iter().map(|s| s as i32).collect(),
            unpin_blocks,
        }
    }

    /// A worker's tier use and the blocks it dropped, from a full heartbeat
    /// or an incremental report: the block map forgets the dropped replicas
    /// at once. Returns the blocks the worker must delete (sent with this
    /// answer).
    fn block_changes(st: &mut State, worker: u64, tiers: Vec<TierUsage>, removed: Vec<BlockReport>) -> Vec<u64> {
        let Some(w) = st.cluster.live_worker_mut(worker) else {
            return Vec::new();
        };
        w.tiers = tiers;
        let remove_blocks = std::mem::take(&mut w.pending_removals);
        st.cluster.reported(worker, Instant::now());
        for b in removed {
            let tier = Tier::try_from(b.tier).unwrap_or(Tier::Unspecified);
            st.cluster.remove_replica(b.block_id, worker, tier);
            // Only an unpersisted file can be lost (evicted cache cannot).
            if st.ns.get(file_of_block(b.block_id)).is_some_and(|i| !i.persisted()) {
                st.recomputer.mark_dirty();
            }
            if tier == Tier::Mem {
                st.migrations.mark_dirty();
            }
        }
        remove_blocks
    }

    /// An incremental block report (HDFS's): a worker's evictions, fills and
    /// drops between its heartbeats, so locations and use lag it by the
    /// report's batching (tens of milliseconds), not a heartbeat interval.
    /// Counts as a sign of life; carries the jobs' reads not reported yet
    /// (an implicit eviction's removal comes with the read that caused it);
    /// leaves the rest of migration state, job counters and checkpoints to
    /// the heartbeat.
    pub fn block_changes_report(&self, req: BlockChangesRequest) -> BlockChangesResponse {
        let again = BlockChangesResponse { reregister: true, ..Default::default() };
        if req.master_epoch != self.epoch {
            return again;
        }
        let mut st = self.write();
        let st = &mut *st;
        let Some(w) = st.cluster.live_worker_mut(req.worker_id) else {
            return again;
        };
        w.last_heartbeat = Instant::now();
        // Reads first: a block a job read and that left memory for it is
        // not one the job still expects.
        st.migrations.note_reads(&req.reads);
        let remove_blocks = Self::block_changes(st, req.worker_id, req.tiers, req.removed_blocks);
        BlockChangesResponse { reregister: false, remove_blocks }
    }

    /// A light ask that may wait (`wait_ms`, at most a heartbeat interval) until
    /// the master has migration work for the worker: an idle worker holds one
    /// open between its heartbeats, so a migrate call's blocks reach it as soon
    /// as they are planned (DYRS, section III-A: "when a slave queries the master for
    /// more work"; the paper's slaves wait for their next heartbeat). A full
    /// heartbeat, or a light one without a wait, is answered at once.
    /// The reads an ask carries are noted at once, not only when it is
    /// answered: held, they would reach the migration state after the
    /// removals the same reads caused (sent meanwhile in an incremental
    /// report), and the master would migrate those blocks again for a job
    /// that has read them.
    pub async fn ask(&self, req: HeartbeatRequest) -> HeartbeatResponse {
        if !req.light || req.wait_ms == 0 {
            return self.heartbeat(req);
        }
        if req.master_epoch == self.epoch && !req.reads.is_empty() {
            self.write().migrations.note_reads(&req.reads);
        }
        let wait = Duration::from_millis(req.wait_ms as u64).min(self.config.heartbeat_interval);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.work.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let ready = req.master_epoch != self.epoch || {
                let st = self.read();
                st.cluster.worker(req.worker_id).is_none_or(|w| !w.alive)
                    || st.migrations.has_work(req.worker_id)
                    || Self::has_checkpoint(&st, req.worker_id)
            };
            if ready || tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        self.heartbeat(req)
    }

    /// Wakes held light asks: some worker may have work now.
    pub(crate) fn work_ready(&self) {
        self.work.notify_waiters();
    }

    pub fn commit_block(&self, req: CommitBlockRequest) -> Result<CommitBlockResponse> {
        Self::commit_locked(&mut self.write(), self.epoch, req)
    }

    /// Several commits under one hold of the state lock (a worker's group
    /// commit), each checked and answered on its own, in order.
    pub fn commit_blocks(&self, req: CommitBlocksRequest) -> CommitBlocksResponse {
        let mut st = self.write();
        let results = req
            .commits
            .into_iter()
            .map(|c| match Self::commit_locked(&mut st, self.epoch, c) {
                Ok(response) => CommitBlockResult { response: Some(response), ..Default::default() },
                Err(e) => {
                    CommitBlockResult { error_kind: e.kind.as_str().to_string(), error: e.message, response: None }
                }
            })
            .collect();
        CommitBlocksResponse { results }
    }

    fn commit_locked(st: &mut State, epoch: u64, req: CommitBlockRequest) -> Result<CommitBlockResponse> {
        if req.master_epoch != epoch {
            return Err(ThawError::unavailable("the master restarted: register again"));
        }
        let tier = Tier::try_from(req.tier)
            .ok()
            .filter(|t| *t != Tier::Unspecified)
            .ok_or_else(|| ThawError::invalid("commit of a block without a tier"))?;
        if st.cluster.live_worker_mut(req.worker_id).is_none() {
            return Err(ThawError::unavailable(format!("worker {} is not registered", req.worker_id)));
        }
        Self::check_rebuilt_block(st, req.block_id, req.length, req.crc32)?;
        Self::block_fits(st, req.block_id, req.length)?;
        if let Some(src) = &req.filled_from {
            Self::source_fits(st, req.block_id, src)?;
        }
        let file_complete = st.ns.get(file_of_block(req.block_id)).is_some_and(|i| i.complete());
        if let Some(crc) = req.crc32.filter(|_| !file_complete) {
            st.block_crcs.insert(req.block_id, crc);
        }
        if tier == Tier::Mem {
            // Cache the worker may evict: a read's fill, a block of a file
            // the under-store has (a cache-through write's); not a migration's.
            let persisted = st
                .ns
                .get(file_of_block(req.block_id))
                .is_some_and(|i| i.persisted() || write_type::of(i.write_type()).writes_under_store);
            let evictable = req.read_fill || (req.filled_from.is_none() && persisted);
            st.cluster.mem_committed(req.worker_id, req.block_id, req.length, evictable);
        }
        if let Some(at) = Self::cached_elsewhere(st, &req, tier) {
            if let Some(w) = st.cluster.live_worker_mut(req.worker_id) {
                w.pending_removals.push(req.block_id);
            }
            tracing::debug!(block = req.block_id, worker = req.worker_id, at, "second cached copy: dropped");
            return Ok(CommitBlockResponse { cached_at: at });
        }
        st.cluster.add_replica(req.block_id, req.worker_id, tier, req.length);
        Ok(CommitBlockResponse::default())
    }

    /// Declares silent workers dead (their migrations go elsewhere) and ends jobs
    /// whose lease ran out; run every heartbeat interval.
    pub fn expire_workers(&self) {
        let mut st = self.write();
        let st = &mut *st;
        let now = Instant::now();
        // A check that comes late, by more than half a timeout past its
        // interval, means the master itself was stopped (SIGSTOP, a VM pause)
        // or starved: the workers' heartbeats waited in its sockets. Declaring
        // them dead now would drop every replica and report memory-only files
        // lost (the fault campaign's finding 2); they get a fresh timeout.
        let late = self.config.heartbeat_interval + self.config.worker_timeout / 2;
        if let Some(last) = st.last_expiry
            && now.saturating_duration_since(last) > late
        {
            tracing::warn!(
                late_ms = now.saturating_duration_since(last).as_millis() as u64,
                "the master was not running for a while: workers get a fresh heartbeat timeout"
            );
            st.cluster.forgive_silence(now);
        }
        st.last_expiry = Some(now);
        let dead = st.cluster.expire(now, self.config.worker_timeout);
        for id in dead {
            tracing::warn!(worker = id, "worker missed its heartbeats: declared dead, replicas dropped");
            self.worker_gone(st, id);
        }
        let live = live_workers(&st.cluster);
        st.migrations.expire(now, &live);
        st.migrations.repair(&st.cluster);
        self.work_ready();
    }

    /// Probes the data port of every live worker silent for longer than
    /// [`crate::liveness::suspect_after`] (each at most once per such
    /// silence), all at once, each for at most [`PROBE_WAIT`]; a worker whose
    /// port refuses the connection, and which sent no heartbeat since, is
    /// declared dead now, not after `worker_timeout` (see [`crate::liveness`]
    /// for why only a refusal counts). Returns the workers declared dead.
    pub async fn probe_silent_workers(&self) -> Vec<u64> {
        let now = Instant::now();
        let suspects: Vec<(u64, String)> = {
            let mut st = self.write();
            let st = &mut *st;
            let live: Vec<(u64, Instant)> =
                st.cluster.workers().filter(|w| w.alive).map(|w| (w.id, w.last_heartbeat)).collect();
            let after = crate::liveness::suspect_after(self.config.heartbeat_interval);
            let due = st.suspicion.due(&live, now, after);
            due.into_iter().filter_map(|id| st.cluster.worker(id).map(|w| (id, w.data_address.clone()))).collect()
        };
        if suspects.is_empty() {
            return Vec::new();
        }
        let probes = suspects.into_iter().map(|(id, addr)| async move {
            let connect = tokio::time::timeout(PROBE_WAIT, tokio::net::TcpStream::connect(addr.clone()));
            let outcome = connect.await.ok().map(|r| r.map(drop));
            (id, addr, Probe::of(outcome))
        });
        let outcomes = futures::future::join_all(probes).await;
        let mut dead = Vec::new();
        let mut st = self.write();
        let st = &mut *st;
        for (id, addr, probe) in outcomes {
            let Some(w) = st.cluster.worker(id).filter(|w| w.alive) else { continue };
            if !crate::liveness::verdict(probe, w.last_heartbeat > now) || !st.cluster.declare_dead(id) {
                continue;
            }
            tracing::warn!(worker = id, address = %addr, "worker is silent and its data port refuses connections: declared dead, replicas dropped");
            self.worker_gone(st, id);
            dead.push(id);
        }
        if !dead.is_empty() {
            let live = live_workers(&st.cluster);
            st.migrations.expire(Instant::now(), &live);
            st.migrations.repair(&st.cluster);
            self.work_ready();
        }
        dead
    }

    /// What follows a worker's death: its migrations and checkpoints go
    /// elsewhere, and its lost files are rebuilt.
    fn worker_gone(&self, st: &mut State, id: u64) {
        st.migrations.worker_lost(&st.cluster, id);
        st.checkpoints.worker_lost(id);
        st.recomputer.mark_dirty();
        self.recompute_soon.notify_one();
    }

    /// One planning pass (DYRS, Algorithm 1), off the heartbeat path.
    pub fn plan(&self) {
        let targeted = {
            let mut st = self.write();
            let st = &mut *st;
            st.migrations.plan(&st.cluster);
            st.migrations.targeted()
        };
        if targeted {
            self.work_ready();
        }
    }
}

/// A worker's last migration report, for status.
fn migration_state(l: &crate::migration::WorkerLoad) -> WorkerMigrationState {
    let r = &l.report;
    WorkerMigrationState {
        devices: r
            .sources
            .iter()
            .map(|s| DeviceMigrationState {
                device: match MigrationSource::try_from(s.source) {
                    Ok(MigrationSource::Disk) => "disk".into(),
                    Ok(MigrationSource::Ufs) => "ufs".into(),
                    _ => "?".into(),
                },
                ns_per_byte: s.ns_per_byte,
                ns_per_migration: s.ns_per_migration,
                queued: s.queued,
                active: s.active,
                active_ms: s.active_ms,
            })
            .collect(),
        buffer_used: r.buffer_used,
        buffer_limit: r.buffer_limit,
        referenced_blocks: r.referenced_blocks,
        migrations_done: l.done,
        room: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master(timeout: Duration) -> (Master, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ufs")).unwrap();
        let ufs = dir.path().join("ufs").display().to_string();
        let mut config = crate::config::MasterConfig::new(dir.path().join("journal"), ufs);
        config.worker_timeout = timeout;
        config.heartbeat_interval = Duration::from_millis(100);
        (Master::open(config).unwrap(), dir)
    }

    fn register(m: &Master) {
        let req = RegisterWorkerRequest { data_address: "127.0.0.1:1".into(), host: "h".into(), ..Default::default() };
        m.register_worker(req).unwrap();
    }

    fn alive(m: &Master) -> usize {
        m.cluster_status().workers.iter().filter(|w| w.alive).count()
    }

    /// The fault campaign's finding 2: the liveness check comes late when the
    /// master itself was stopped; the workers' silence then was not theirs.
    #[test]
    fn a_master_that_was_not_running_gives_its_workers_a_fresh_timeout() {
        let (m, _dir) = master(Duration::from_millis(400));
        register(&m);
        m.expire_workers();
        // The master "stops" for longer than the timeout, then checks.
        std::thread::sleep(Duration::from_millis(600));
        m.expire_workers();
        assert_eq!(alive(&m), 1, "declared dead for the master's own pause");
        // Checked on time, a silent worker still dies.
        for _ in 0..6 {
            std::thread::sleep(Duration::from_millis(100));
            m.expire_workers();
        }
        assert_eq!(alive(&m), 0, "a silent worker checked on time stays alive");
    }
}

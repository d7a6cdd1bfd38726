//! The master: its state (here: `State` under one lock, and how a
//! [`Master`] opens on its journal) and its operations, one file per
//! responsibility: the namespace calls (`paths.rs`, `renames.rs`), a file's write
//! (`create.rs`, `placement.rs`, `writers.rs`), the worker protocol and
//! liveness (`workers.rs`), jobs and migrations (`jobs.rs`), checkpoints
//! (`checkpoints.rs`), lineage (`lineage.rs`) and its rebuilds
//! (`recompute.rs`), cache affinity (`cache.rs`), permissions, and what
//! metrics and the dashboard read. A mutation and the queueing of its journal
//! commit happen under the lock, so the journal order is the state order; an
//! RPC waits for its commits to be durable after letting the lock go
//! ([`crate::commits`]); under-store I/O (stat, list, rename, delete) happens
//! before taking it.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use thaw_common::ids::{block_count, block_id, block_length, file_of_block};
use thaw_common::proto::*;
use thaw_common::write_type;
use thaw_common::{Result, ThawError, now_ms, path};
use thaw_ufs::UnderStore;

use crate::checkpoint_order::Checkpoints;
use crate::cluster::Cluster;
use crate::journal::{Commit, Journal, JournalOp, Loaded};
use crate::leases::WriterLeases;
use crate::lineage::Lineages;
use crate::migration::Migrations;
use crate::namespace::{Builder, Built, DirTotals, Namespace};

mod cache;
mod checkpoints;
mod create;
mod dashboard;
mod jobs;
mod lineage;
mod metrics;
mod paths;
pub mod permissions;
mod placement;
mod recompute;
mod renames;
mod s3_keys;
mod workers;
mod writers;

pub use writers::MAX_WRITER_NAME;

pub use crate::config::{MasterConfig, RecomputeExecutor, RecomputeMode};
pub use jobs::{MAX_JOB_ID, MIN_LEASE_MS};
pub use metrics::{Gauges, SubmitterJobs};

struct State {
    ns: Namespace,
    cluster: Cluster,
    migrations: Migrations,
    checkpoints: Checkpoints,
    lineages: Lineages,
    recomputer: recompute::Recomputer,
    recomputer_mode: RecomputeMode,
    /// CRC-32s of blocks of files being written, until the file completes.
    block_crcs: std::collections::BTreeMap<u64, u32>,
    /// Complete files not persisted: the only ones that can be lost (the
    /// workflow manager looks for losses among these, not the whole namespace).
    unpersisted: std::collections::BTreeSet<u64>,
    /// Unfinished files' writers (soft state: restarted from the journal).
    leases: WriterLeases,
    /// Applications' cache affinities and caching probabilities (soft state).
    apps: crate::affinity::Apps,
    apps_refreshed: Option<Instant>,
    /// The S3 gateway's access keys, by access key (journaled).
    s3_keys: std::collections::BTreeMap<String, thaw_common::proto::S3KeyRecord>,
    /// Jobs' submitters, on a secured master (`permissions`; soft state).
    job_owners: std::collections::HashMap<String, String>,
    /// Until then (a worker timeout after a start with memory-only files in
    /// the journal) workers may still be re-registering: a block without
    /// replicas is not yet lost.
    warm_until: Instant,
    /// When silent workers were last looked for (`expire_workers`).
    last_expiry: Option<Instant>,
    /// Silent workers probed for death (`probe_silent_workers`).
    suspicion: crate::liveness::Suspicion,
    /// Unfinished through and cache-through files removed (deleted, or their
    /// writer's lease ran out) while a writer may still be writing them, with
    /// their paths: a worker that closes the under-store copy after that puts
    /// it at the path, and the next listing would load the file back. The
    /// copy is deleted again when the writer's CompleteFile comes (and is
    /// refused), or after [`DELETED_WRITE_TTL_LEASES`] leases if none does, unless a new
    /// file took the path. Soft state (a restarted master's copies of
    /// writes it knew as unfinished go with their leases).
    deleted_writes: std::collections::HashMap<u64, (String, Instant)>,
}

/// How long [`State::deleted_writes`] waits for a writer's CompleteFile,
/// in writer leases: a writer still alive learns at its next renewal that its
/// file is gone, and ends its write.
const DELETED_WRITE_TTL_LEASES: u32 = 2;

impl State {
    /// Drops all soft state of files just removed from the namespace.
    fn forget_files(&mut self, files: &[u64]) {
        for f in files {
            self.cluster.drop_file(*f);
            self.migrations.drop_file(*f);
            self.checkpoints.drop_file(*f);
            self.recomputer.forget_file(*f);
            self.unpersisted.remove(f);
            self.leases.release(*f);
            take_crcs(&mut self.block_crcs, *f);
        }
    }

    /// Removes `id` and everything under it from the namespace, with its soft
    /// state and what the removal means for lineage. Returns the removed files
    /// and the journal ops.
    fn remove_tree(&mut self, id: u64) -> (Vec<u64>, Vec<JournalOp>) {
        self.drop_tree(id, false).expect("a removal cannot fail")
    }

    /// Takes `id` and everything under it out of the namespace at once, to be
    /// removed from the journal in batches (`namespace::reaper`): as
    /// [`Self::remove_tree`], but with one op to commit.
    fn detach_tree(&mut self, id: u64) -> Result<(Vec<u64>, Vec<JournalOp>)> {
        self.drop_tree(id, true)
    }

    fn drop_tree(&mut self, id: u64, detach: bool) -> Result<(Vec<u64>, Vec<JournalOp>)> {
        // Only the files lineage or an unfinished write cares about: their
        // paths, for a million files, would be more memory than the tree.
        let concerned: Vec<(u64, u64, bool, String)> = self
            .ns
            .files_under(id)
            .into_iter()
            .filter_map(|f| {
                let i = self.ns.get(f)?;
                let unfinished = !i.complete() && write_type::of(i.write_type()).writes_under_store;
                (unfinished || self.lineages.concerns(f, i.lineage_id()))
                    .then(|| (f, i.lineage_id(), i.complete(), self.ns.path_of(f)))
            })
            .collect();
        let now = Instant::now();
        for (f, _, complete, path) in &concerned {
            if !complete && self.ns.get(*f).is_some_and(|i| write_type::of(i.write_type()).writes_under_store) {
                self.deleted_writes.insert(*f, (path.clone(), now));
            }
        }
        let (files, mut ops) = if detach {
            let (files, op) = self.ns.detach(id)?;
            (files, vec![op])
        } else {
            self.ns.remove(id)
        };
        self.forget_files(&files);
        let ns = &self.ns;
        let gone: Vec<_> = concerned.into_iter().filter(|(f, l, ..)| self.lineages.concerns(*f, *l)).collect();
        ops.extend(self.lineages.files_removed(&gone, &|f| ns.get(f).is_some()));
        Ok((files, ops))
    }
}

pub struct Master {
    state: RwLock<State>,
    /// Where commits go: this master's journal, or its group's replicated log.
    journal: Arc<dyn Commit>,
    ufs: UnderStore,
    /// Random per start: workers that see a new epoch re-register.
    epoch: u64,
    config: MasterConfig,
    /// Wakes light asks held for work (see [`Master::ask`]): new commands or
    /// targets for some worker.
    work: tokio::sync::Notify,
    /// Wakes the planner before its next tick (a migrate call came).
    pub(crate) plan_soon: tokio::sync::Notify,
    /// Held across the under-store side and the namespace side of every change
    /// of where a file's under-store copy is (rename, delete, a checkpoint moved
    /// to its path), so a checkpoint lands at the path its file has then.
    ufs_moves: tokio::sync::Mutex<()>,
    /// Wakes the workflow manager before its next tick (a loss, a request, a run's end).
    pub(crate) recompute_soon: tokio::sync::Notify,
    /// Wakes the reaper (a large tree was deleted: `Master::reap`).
    pub(crate) reap_soon: tokio::sync::Notify,
}

impl Master {
    pub fn open(config: MasterConfig) -> Result<Self> {
        let journal = Journal::open(&config.journal_dir)?;
        let loaded = Self::load(&journal)?;
        let commits = crate::commits::GroupCommit::new(journal, &config.journal_dir, config.journal_checkpoint_ops)?;
        Self::open_with(config, loaded, Arc::new(commits))
    }

    /// What `journal` holds, its records made into the namespace as they are read.
    pub fn load(journal: &Journal) -> Result<(Built, Loaded)> {
        let b = std::cell::RefCell::new(Builder::default());
        let loaded = journal.load_each_inode(|n| b.borrow_mut().reserve(n as usize), |rec| b.borrow_mut().push(rec))?;
        let b = b.into_inner();
        Ok((b.finish(loaded.next_id), loaded))
    }

    /// A master on a journal loaded already ([`Self::load`]), committing to
    /// `journal`: a group's new leader starts here, on its copy of the
    /// replicated journal.
    pub fn open_with(config: MasterConfig, (built, loaded): (Built, Loaded), journal: Arc<dyn Commit>) -> Result<Self> {
        config.affinity.check()?;
        let Built { ns, problems, dropped } = built;
        if !problems.is_empty() {
            let dir = config.journal_dir.display();
            if !config.salvage_journal {
                let shown: Vec<&str> = problems.iter().take(5).map(String::as_str).collect();
                return Err(ThawError::internal(format!(
                    "the journal in {dir} is inconsistent ({} problems: {}{}); nothing was loaded. \
                     Restore it from a copy, or start with --salvage-journal to drop the records that do not fit",
                    problems.len(),
                    shown.join("; "),
                    if problems.len() > shown.len() { "; ..." } else { "" }
                )));
            }
            for p in &problems {
                tracing::warn!(journal = %dir, "salvaging the journal: dropped {p}");
            }
            // Journal the drops, so the next start finds a consistent journal.
            // Journal ids are keys: each appears once.
            let ops: Vec<JournalOp> = dropped.into_iter().map(JournalOp::Delete).collect();
            journal.commit(&ops, ns.next_id())?;
            tracing::warn!(journal = %dir, problems = problems.len(), "journal salvaged");
        }
        let lineages = Lineages::from_records(loaded.lineages, loaded.next_lineage_id);
        let ufs = UnderStore::open(&config.ufs_uri)?;
        tracing::info!(
            inodes = ns.len(),
            deleting = ns.doomed_len(),
            lineages = lineages.len(),
            ufs = ufs.uri(),
            "master namespace loaded from journal"
        );
        let policy = config.migration_policy;
        let priority = config.priority.unwrap_or(policy.default_priority());
        let migrations = Migrations::new(policy, priority, config.default_lease);
        tracing::info!(policy = policy.name(), priority = priority.name(), "migration planner");
        // One pass over the inodes for the three, in memory order (a walk of
        // the tree, looking each file up, was a fifth of a million-file start).
        let checkpoints = checkpoints::waiting_from(ns.files(), config.checkpoint_order);
        let mut unpersisted = Vec::new();
        // Every unfinished file starts a fresh lease for its recorded writer,
        // which goes on renewing it if it is still alive.
        let mut leases = WriterLeases::new(config.writer_lease);
        let (now, wall) = (Instant::now(), now_ms());
        for (f, i) in ns.files() {
            if !i.complete() {
                leases.grant(f, i.writer(), now, wall);
            } else if !i.persisted() {
                unpersisted.push(f);
            }
        }
        unpersisted.sort_unstable();
        let unpersisted: std::collections::BTreeSet<u64> = unpersisted.into_iter().collect();
        if !leases.is_empty() {
            tracing::info!(files = leases.len(), "unfinished files: their writers have one lease to renew them");
        }
        let unpersisted_at_start = !unpersisted.is_empty();
        Ok(Master {
            state: RwLock::new(State {
                ns,
                cluster: Cluster::default(),
                migrations,
                checkpoints,
                lineages,
                recomputer: Default::default(),
                recomputer_mode: config.recompute_mode,
                block_crcs: Default::default(),
                unpersisted,
                leases,
                apps: crate::affinity::Apps::new(config.affinity.clone()),
                apps_refreshed: None,
                job_owners: Default::default(),
                s3_keys: loaded.s3_keys.into_iter().map(|k| (k.access_key.clone(), k)).collect(),
                // Only memory-only files known from the journal can have
                // replicas on workers that have not re-registered yet.
                warm_until: Instant::now() + if unpersisted_at_start { config.worker_timeout } else { Duration::ZERO },
                last_expiry: None,
                suspicion: Default::default(),
                deleted_writes: Default::default(),
            }),
            journal,
            ufs,
            epoch: rand::random::<u64>() | 1,
            config,
            work: tokio::sync::Notify::new(),
            plan_soon: tokio::sync::Notify::new(),
            ufs_moves: tokio::sync::Mutex::new(()),
            recompute_soon: tokio::sync::Notify::new(),
            reap_soon: tokio::sync::Notify::new(),
        })
    }

    pub fn config(&self) -> &MasterConfig {
        &self.config
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Journal transactions written and the commits they held (group commit).
    pub fn journal_counts(&self) -> Option<(u64, u64)> {
        self.journal.counts()
    }

    fn commit(&self, st: &State, ops: &[JournalOp]) -> Result<()> {
        self.journal.commit(ops, st.ns.next_id())
    }

    /// One request to the under-store (see `UnderStore::check`).
    pub async fn check_under_store(&self) -> Result<()> {
        self.ufs.check().await
    }
}

fn live_workers(c: &Cluster) -> Vec<u64> {
    c.workers().filter(|w| w.alive).map(|w| w.id).collect()
}

/// Takes the CRC-32s noted for file `f`'s blocks out of `crcs`.
fn take_crcs(crcs: &mut std::collections::BTreeMap<u64, u32>, f: u64) -> std::collections::BTreeMap<u64, u32> {
    let mut file = crcs.split_off(&block_id(f, 0));
    let mut after = file.split_off(&block_id(f + 1, 0));
    crcs.append(&mut after);
    file
}

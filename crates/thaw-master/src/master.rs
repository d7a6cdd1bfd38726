//! The master: namespace operations over the under-store mount (here), the
//! worker protocol and liveness (`workers.rs`). One lock guards namespace and cluster state; a mutation
//! and its journal commit happen under it, so the journal order is the state order.
//! Under-store I/O (stat, list, rename, delete) happens before taking the lock.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use thaw_common::ids::{MAX_BLOCKS_PER_FILE, block_count, block_id, block_length, file_of_block};
use thaw_common::proto::*;
use thaw_common::{DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE, Result, ThawError, now_ms, path};
use thaw_ufs::UnderStore;

use crate::checkpoint::{Checkpoints, Order};
use crate::cluster::Cluster;
use crate::journal::{Commit, Journal, JournalOp, Loaded};
use crate::leases::WriterLeases;
use crate::lineage::Lineages;
use crate::migration::{Migrations, Policy, Priority};
use crate::namespace::{DirTotals, Namespace, NewInode, ROOT_ID};

mod cache;
mod checkpoints;
mod dashboard;
mod jobs;
mod lineage;
mod metrics;
pub mod permissions;
mod placement;
mod recompute;
mod renames;
mod workers;
mod writers;

pub use writers::MAX_WRITER_NAME;

pub use jobs::{MAX_JOB_ID, MIN_LEASE_MS};
pub use metrics::Gauges;
pub use recompute::{Executor as RecomputeExecutor, Mode as RecomputeMode};

#[derive(Debug, Clone)]
pub struct MasterConfig {
    pub journal_dir: std::path::PathBuf,
    pub ufs_uri: String,
    pub default_block_size: u64,
    pub heartbeat_interval: Duration,
    /// A worker silent this long is declared dead.
    pub worker_timeout: Duration,
    pub migration_policy: Policy,
    /// Order of pending and queued migrations (default: the policy's paper's).
    pub priority: Option<Priority>,
    /// Lease of a job whose migrate call names none.
    pub default_lease: Duration,
    /// How often the planner retargets pending migrations (dyrs).
    pub plan_interval: Duration,
    /// Which unpersisted file a worker checkpoints next (Tachyon, section 2.7).
    pub checkpoint_order: Order,
    /// When lost files are rebuilt from lineage (Tachyon, section 2.6).
    pub recompute_mode: RecomputeMode,
    /// Attempts of a lineage's rerun before it is given up on.
    pub recompute_attempts: u32,
    /// Lineage reruns at once.
    pub recompute_parallel: usize,
    /// A rerun running longer is killed (and counts as a failed attempt).
    pub recompute_timeout: Duration,
    /// Who runs lineage reruns: the master itself, or an external executor (Dask).
    pub recompute_executor: RecomputeExecutor,
    /// The master's own address, given to the commands it runs (set by `serve`).
    pub address: String,
    /// Cache affinity classes and their thresholds (CAVA, section IV-A).
    pub affinity: crate::affinity::AffinityConfig,
    /// An unfinished file whose writer has not renewed its lease for this
    /// long is deleted (crate::leases).
    pub writer_lease: Duration,
    /// Start on a journal whose records do not form a tree by dropping the
    /// records that do not fit (each logged), instead of refusing to start.
    pub salvage_journal: bool,
    /// The cluster secret (`--secret-file`): with it every call must carry a
    /// token signed with it and permissions are checked (`permissions`).
    pub secret: Option<std::sync::Arc<thaw_common::auth::Secret>>,
    /// Lifetime of tokens handed out by `IssueToken`: by default, and at most.
    pub token_ttl: Duration,
    pub token_max_ttl: Duration,
    /// A superuser besides [`thaw_common::auth::SUPERUSER`]: the OS user
    /// the master runs as (HDFS's rule for the NameNode's user).
    pub superuser: String,
    /// TLS on the gRPC service (`--tls-cert`, `--tls-key`), and the CA file
    /// the commands the master runs are given (`THAW_TLS_CA`).
    pub tls: Option<std::sync::Arc<thaw_common::tls::ServerTls>>,
    pub tls_ca: Option<std::path::PathBuf>,
    /// A member of a group of masters (`--id`, `--peers`): serves while it
    /// leads, over a replicated journal ([`crate::ha`]).
    pub group: Option<crate::ha::GroupConfig>,
}

impl MasterConfig {
    pub fn new(journal_dir: impl Into<std::path::PathBuf>, ufs_uri: impl Into<String>) -> Self {
        MasterConfig {
            journal_dir: journal_dir.into(),
            ufs_uri: ufs_uri.into(),
            default_block_size: DEFAULT_BLOCK_SIZE,
            heartbeat_interval: Duration::from_millis(1000),
            worker_timeout: Duration::from_secs(10),
            migration_policy: Policy::Dyrs,
            priority: None,
            default_lease: Duration::from_secs(60),
            plan_interval: Duration::from_millis(100),
            checkpoint_order: Order::NewestFirst,
            recompute_mode: RecomputeMode::Proactive,
            recompute_attempts: 3,
            recompute_parallel: 2,
            recompute_timeout: Duration::from_secs(600),
            recompute_executor: RecomputeExecutor::Local,
            address: String::new(),
            affinity: Default::default(),
            writer_lease: Duration::from_secs(60),
            salvage_journal: false,
            secret: None,
            token_ttl: Duration::from_secs(24 * 3600),
            token_max_ttl: Duration::from_secs(7 * 24 * 3600),
            superuser: thaw_common::auth::os_user(),
            tls: None,
            tls_ca: None,
            group: None,
        }
    }
}

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
    /// Jobs' submitters, on a secured master (`permissions`; soft state).
    job_owners: std::collections::HashMap<String, String>,
    /// Until then (a worker timeout after a start with memory-only files in
    /// the journal) workers may still be re-registering: a block without
    /// replicas is not yet lost.
    warm_until: Instant,
    /// When silent workers were last looked for (`expire_workers`).
    last_expiry: Option<Instant>,
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
        let gone: Vec<(u64, u64, bool, String)> = self
            .ns
            .files_under(id)
            .into_iter()
            .filter_map(|f| self.ns.get(f).map(|i| (f, i.rec.lineage_id, i.rec.complete, self.ns.path_of(f))))
            .collect();
        let now = Instant::now();
        for (f, _, complete, path) in &gone {
            if !complete && self.ns.get(*f).is_some_and(|i| is_persisted_write(i.rec.write_type())) {
                self.deleted_writes.insert(*f, (path.clone(), now));
            }
        }
        let (files, mut ops) = self.ns.remove(id);
        self.forget_files(&files);
        let ns = &self.ns;
        ops.extend(self.lineages.files_removed(&gone, &|f| ns.get(f).is_some()));
        (files, ops)
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
}

fn is_persisted_write(wt: WriteType) -> bool {
    matches!(wt, WriteType::CacheThrough | WriteType::Through)
}

impl Master {
    pub fn open(config: MasterConfig) -> Result<Self> {
        let journal = Journal::open(&config.journal_dir)?;
        let loaded = journal.load()?;
        Self::open_with(config, loaded, Arc::new(journal))
    }

    /// A master on a journal loaded already, committing to `journal`: a
    /// group's new leader starts here, on its copy of the replicated journal.
    pub fn open_with(config: MasterConfig, loaded: Loaded, journal: Arc<dyn Commit>) -> Result<Self> {
        config.affinity.check()?;
        let loaded_ids: Vec<u64> = loaded.inodes.iter().map(|r| r.id).collect();
        let (ns, problems) = Namespace::from_records(loaded.inodes, loaded.next_id);
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
            let ops: Vec<JournalOp> = loaded_ids
                .into_iter()
                .filter(|id| *id == ROOT_ID || ns.get(*id).is_none())
                .map(JournalOp::Delete)
                .collect();
            journal.commit(&ops, ns.next_id())?;
            tracing::warn!(journal = %dir, problems = problems.len(), "journal salvaged");
        }
        let lineages = Lineages::from_records(loaded.lineages, loaded.next_lineage_id);
        let ufs = UnderStore::open(&config.ufs_uri)?;
        tracing::info!(
            inodes = ns.len(),
            lineages = lineages.len(),
            ufs = ufs.uri(),
            "master namespace loaded from journal"
        );
        let policy = config.migration_policy;
        let priority = config.priority.unwrap_or(policy.default_priority());
        let migrations = Migrations::new(policy, priority, config.default_lease);
        tracing::info!(policy = policy.name(), priority = priority.name(), "migration planner");
        let checkpoints = checkpoints::waiting_from(&ns, config.checkpoint_order);
        let unpersisted: std::collections::BTreeSet<u64> = ns
            .files_under(ROOT_ID)
            .into_iter()
            .filter(|f| ns.get(*f).is_some_and(|i| i.rec.complete && !i.rec.persisted))
            .collect();
        // Every unfinished file starts a fresh lease for its recorded writer,
        // which goes on renewing it if it is still alive.
        let mut leases = WriterLeases::new(config.writer_lease);
        let (now, wall) = (Instant::now(), now_ms());
        for f in ns.files_under(ROOT_ID) {
            if let Some(i) = ns.get(f).filter(|i| !i.rec.complete) {
                leases.grant(f, &i.rec.writer, now, wall);
            }
        }
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
                // Only memory-only files known from the journal can have
                // replicas on workers that have not re-registered yet.
                warm_until: Instant::now() + if unpersisted_at_start { config.worker_timeout } else { Duration::ZERO },
                last_expiry: None,
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

    fn commit(&self, st: &State, ops: &[JournalOp]) -> Result<()> {
        self.journal.commit(ops, st.ns.next_id())
    }

    // ---- namespace ----

    /// The inode of an entry found in the under-store: complete and persisted.
    fn ufs_inode(&self, st: &thaw_ufs::UfsStatus) -> NewInode {
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
    async fn resolve(&self, p: &str) -> Result<u64> {
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
    async fn sync_dir(&self, id: u64, p: &str) -> Result<()> {
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
            let existing = st.ns.get(id).and_then(|i| i.children.get(name).copied());
            if let Some(child) = existing {
                let rec = &st.ns.get(child).expect("child").rec;
                let changed = !rec.is_dir
                    && !ufs.is_dir
                    && rec.persisted
                    && rec.complete
                    && rec.mtime_ms < started
                    && (rec.length != ufs.length || (rec.ufs_mtime_ms != 0 && rec.ufs_mtime_ms != ufs.mtime_ms));
                if !changed {
                    continue;
                }
                let (_, mut removed) = st.remove_tree(child);
                ops.append(&mut removed);
            }
            let (_, op) = st.ns.add(id, name, self.ufs_inode(ufs))?;
            ops.push(op);
        }
        for (name, child) in st.ns.children(id) {
            let rec = &st.ns.get(child).expect("child").rec;
            if seen.contains(&name) || !rec.persisted || rec.mtime_ms >= started {
                continue;
            }
            let keeps_unpersisted =
                st.ns.files_under(child).iter().any(|f| !st.ns.get(*f).is_some_and(|i| i.rec.persisted));
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

    fn file_info(st: &State, id: u64, with_blocks: bool, client: &Position) -> FileInfo {
        let ino = st.ns.get(id).expect("caller resolved the id");
        let r = &ino.rec;
        let mut info = FileInfo {
            file_id: r.id,
            path: st.ns.path_of(id),
            name: r.name.clone(),
            is_dir: r.is_dir,
            length: r.length,
            block_size: r.block_size,
            complete: r.complete,
            persisted: r.persisted,
            write_type: r.write_type,
            mtime_ms: r.mtime_ms,
            ..Default::default()
        };
        permissions::describe(&mut info, r);
        if r.is_dir {
            info.persistence = Persistence::Persisted as i32;
            return info;
        }
        let n = if r.complete { block_count(r.length, r.block_size) } else { 0 };
        for index in 0..n {
            let bid = block_id(r.id, index);
            let length = block_length(r.length, r.block_size, index);
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
            if replicas.is_empty() && !r.persisted && Instant::now() >= st.warm_until {
                info.lost = true;
            }
            if with_blocks {
                info.blocks.push(BlockInfo { block_id: bid, offset: index * r.block_size, length, replicas });
            }
        }
        info.temporary = r.temporary;
        if !r.complete
            && let Some((writer, until)) = st.leases.holder(id)
        {
            info.writer = writer.to_string();
            info.lease_expires_ms = until;
        }
        info.lineage_id = r.lineage_id;
        let (rebuild, detail) =
            if info.lost { Self::rebuild_state(st, id, r.lineage_id) } else { (Rebuild::None, String::new()) };
        info.rebuild = rebuild as i32;
        info.rebuild_detail = detail;
        st.recomputer.fill_rebuilds(id, &mut info);
        info.persistence = checkpoints::persistence(st, r, info.lost) as i32;
        info.persist_error = st.checkpoints.error(id).unwrap_or_default().to_string();
        info.persist_waiting = Self::persist_waiting(st, id);
        info
    }

    /// The normalized path and id of the file at `path`, for a call (`verb`)
    /// that names files only.
    async fn resolve_file(&self, path: &str, verb: &str) -> Result<(String, u64)> {
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

    pub async fn list_status(&self, req: ListStatusRequest) -> Result<ListStatusResponse> {
        let id = self.resolve(&req.path).await?;
        let is_dir = self.read().ns.get(id).is_some_and(|i| i.is_dir());
        self.read().check(id, if is_dir { permissions::READ | permissions::EXEC } else { 0 })?;
        if is_dir {
            let p = path::normalize(&req.path)?;
            self.sync_dir(id, &p).await?;
        }
        let st = self.read();
        let client = req.client.unwrap_or_default();
        let mut entries: Vec<FileInfo> = if is_dir {
            st.ns.children(id).into_iter().map(|(_, c)| Self::file_info(&st, c, req.blocks, &client)).collect()
        } else {
            vec![Self::file_info(&st, id, req.blocks, &client)]
        };
        for e in &mut entries {
            self.grant_reads(&st, e);
        }
        Ok(ListStatusResponse { entries })
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

    pub async fn create_file(&self, req: CreateFileRequest) -> Result<CreateFileResponse> {
        if let Some(next) = &req.next_segment {
            return self.next_segment(&req, next);
        }
        let comps = path::components(&req.path)?;
        let Some((name, parent_comps)) = comps.split_last() else {
            return Err(ThawError::is_dir("/ is a directory"));
        };
        let write_type = WriteType::try_from(req.write_type)
            .ok()
            .filter(|w| *w != WriteType::Unspecified)
            .ok_or_else(|| ThawError::invalid(format!("unknown write type {}", req.write_type)))?;
        if req.temporary && write_type != WriteType::AsyncThrough {
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
            Ok(_) => return Err(ThawError::already_exists(format!("{full} already exists"))),
            Err(e) if e.kind == thaw_common::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut st = self.write();
        let now = Instant::now();
        let (workers, plan) =
            st.writers(&client, write_type, req.replication, req.segments, block_size, req.length, now)?;
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

    pub async fn complete_file(&self, req: CompleteFileRequest) -> Result<CompleteFileResponse> {
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
            if ino.rec.complete && st.recomputer.is_recovering(req.file_id) {
                let info = Self::finish_rebuild(st, req.file_id, req.length)?;
                return Ok(CompleteFileResponse { info: Some(info) });
            }
            if ino.rec.complete {
                return Err(ThawError::precondition(format!("{} is already complete", st.ns.path_of(req.file_id))));
            }
            (st.ns.path_of(req.file_id), ino.rec.write_type(), ino.rec.block_size)
        };
        let blocks = block_count(req.length, block_size);
        if blocks > MAX_BLOCKS_PER_FILE {
            return Err(ThawError::invalid(format!("{} blocks is more than a file may have", blocks)));
        }
        let mut ufs_mtime = 0;
        if is_persisted_write(write_type) {
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
        if st.ns.get(req.file_id).is_none_or(|i| i.rec.complete) {
            return Err(ThawError::precondition(format!("{p} changed while completing")));
        }
        if write_type != WriteType::Through {
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
                    None if is_persisted_write(write_type) => {}
                    None => {
                        return Err(ThawError::precondition(format!(
                            "{p}: block {index} was never stored (truncated write or its worker died)"
                        )));
                    }
                }
            }
        }
        // A lineage output keeps its blocks' CRC-32s: a rebuild must match them.
        let lineage_output = st.ns.get(req.file_id).is_some_and(|i| i.rec.lineage_id != 0);
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
            r.persisted = is_persisted_write(write_type);
            r.ufs_mtime_ms = ufs_mtime;
            r.block_crc32 = if crcs.len() as u64 == blocks { crcs } else { Vec::new() };
            r.writer.clear();
        })?;
        self.commit(&st, &[op])?;
        st.leases.release(req.file_id);
        if !is_persisted_write(write_type) {
            st.unpersisted.insert(req.file_id);
        }
        if write_type == WriteType::AsyncThrough {
            let rec = &st.ns.get(req.file_id).expect("just completed").rec;
            let (written, temporary) = (rec.mtime_ms, rec.temporary);
            st.checkpoints.add(req.file_id, written, temporary, false);
            self.work_ready();
        }
        Ok(CompleteFileResponse { info: Some(Self::file_info(&st, req.file_id, false, &Position::default())) })
    }

    /// One request to the under-store (see `UnderStore::check`).
    pub async fn check_under_store(&self) -> Result<()> {
        self.ufs.check().await
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
            let parent = st.ns.get(id).map_or(ROOT_ID, |i| i.rec.parent_id);
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
        let (files, ops) = st.remove_tree(id);
        self.commit(st, &ops)?;
        tracing::debug!(path = %p, files = files.len(), "deleted");
        Ok(DeleteResponse {})
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
        match self.resolve(&dst).await {
            Ok(_) => return Err(ThawError::already_exists(format!("{dst} already exists"))),
            Err(e) if e.kind == thaw_common::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let parent = self.resolve(&path::join(parent_comps)).await.map_err(|e| e.context("rename target parent"))?;
        if !self.read().ns.get(parent).is_some_and(|i| i.is_dir()) {
            return Err(ThawError::not_dir(format!("{} is not a directory", path::join(parent_comps))));
        }
        {
            let st = self.read();
            st.check_parent(st.ns.get(id).map_or(ROOT_ID, |i| i.rec.parent_id))?;
            st.check_parent(parent)?;
        }
        let _moves = self.ufs_moves.lock().await;
        let mut copied = Vec::new();
        if self.ufs.stat(&src).await?.is_some() {
            copied = self.ufs.rename(&src, &dst).await?;
        }
        let mut st = self.write();
        let mut ops = vec![st.ns.rename(id, parent, name)?];
        ops.extend(st.record_copies(id, &dst, copied)?);
        self.commit(&st, &ops)?;
        Ok(RenameResponse { info: Some(Self::file_info(&st, id, false, &Position::default())) })
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

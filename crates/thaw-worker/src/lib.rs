//! A Thaw worker: MEM and DISK tiers of block files and what fills and empties
//! them, the data service, and the link to the master. The system map is
//! docs/architecture.md ("The parts").
//!
//! - Tiers and their cache: [`tier`] (a tier's index, accounting and files),
//!   [`replacement`] (which blocks a full tier evicts, CAVA's policies),
//!   [`affinity`] (the master's application table they rank by), `cache`
//!   (block files being written, fills from the under-store), [`page_cache`]
//!   (drop-behind).
//! - Moving blocks: [`migration`] (the executor and the reference lists,
//!   Ignem and DYRS), [`checkpoint`] (persisting written files, Tachyon),
//!   [`device`] and [`ioprio`] (the emulated devices and the idle I/O class).
//! - Serving: [`data`] (reads, writes, short-circuit opens, stats) and
//!   [`authorize`] (which requests a secured worker serves).
//! - The master and observers: [`master_link`] (registration, heartbeats,
//!   commits), [`block_changes`] (incremental block reports), [`stats`] (per
//!   job counters), [`metrics`] (Prometheus).

pub mod affinity;
pub mod authorize;
pub mod block_changes;
mod cache;
pub mod checkpoint;
pub mod data;
pub mod device;
mod group_commit;
pub mod ioprio;
pub mod master_link;
pub mod metrics;
pub mod migration;
pub mod page_cache;
pub mod replacement;
pub mod stats;
pub mod tier;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use thaw_common::auth::Credentials;
use thaw_common::proto::{BlockReport, Tier};
use thaw_common::{Result, ThawError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::device::{Device, DeviceKind, DeviceModels};
use crate::master_link::Registration;
use crate::migration::{Effects, Migrator, Source, Task};
pub use crate::migration::{MigrationConfig, MigrationIo};
use crate::stats::JobStats;
use crate::tier::TierStore;

/// A read of a block this worker is migrating waits at least this long for the
/// copy, polling this often; this long when the device is not measured yet.
const JOIN_MIN: Duration = Duration::from_millis(50);
const JOIN_POLL: Duration = Duration::from_millis(2);
const JOIN_UNMEASURED: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct TierConfig {
    pub dir: PathBuf,
    pub capacity: u64,
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Master address, host:port.
    pub master: String,
    pub host: String,
    pub rack: String,
    pub mem: Option<TierConfig>,
    pub disk: Option<TierConfig>,
    /// Which cached blocks a full tier evicts to make room.
    pub replacement: replacement::Policy,
    /// The benefit policies' sliding window (CAVA, section IV-B).
    pub cache_window: Duration,
    /// Address clients use to reach the data service (default: the listener's).
    pub advertise: Option<String>,
    /// Delete the MEM tier directory on exit (a local cluster's tmpfs files).
    pub remove_mem_on_exit: bool,
    /// Data connections served at once; past it a client is told the worker is busy.
    pub max_connections: usize,
    /// On a secured worker, connections one user may hold (the user of each
    /// connection's first request); past it the user is told so.
    pub max_connections_per_user: usize,
    /// Mid-request, a client that sends or takes nothing for this long is cut off.
    pub stall_timeout: Duration,
    pub migration: MigrationConfig,
    /// Emulated devices in front of DISK-tier and under-store reads (evaluation
    /// only; default none: reads run at the machine's speed).
    pub device_models: DeviceModels,
    /// Checkpoint copies to the under-store are paced to this many bytes per
    /// second (0: as fast as the idle I/O class lets them).
    pub checkpoint_bandwidth: u64,
    /// Leave what cold copies read or write in the page cache (no
    /// drop-behind: see [`page_cache`]), for a local under-store whose files
    /// other programs read too.
    pub keep_page_cache: bool,
    /// The cluster secret (`--secret-file`): the worker authenticates to the
    /// master with it, and serves only requests the master granted
    /// (`authorize`).
    pub secret: Option<Arc<thaw_common::auth::Secret>>,
    /// TLS on the data service (`--tls-cert`, `--tls-key`).
    pub tls: Option<Arc<thaw_common::tls::ServerTls>>,
    /// TLS to the master, trusting this CA (`--tls-ca`).
    pub master_tls: Option<Arc<thaw_common::tls::ClientTls>>,
    /// Told the worker id at each registration: `thaw local` starts its
    /// workers one at a time so that worker I is the master's worker I.
    pub registered: Option<tokio::sync::mpsc::UnboundedSender<u64>>,
}

/// Default of `WorkerConfig::max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

pub struct Worker {
    pub config: WorkerConfig,
    /// Connections per user (a secured worker; `authorize`).
    user_connections: Arc<authorize::UserConnections>,
    pub address: String,
    mem: Option<Arc<TierStore>>,
    disk: Option<Arc<TierStore>>,
    pub stats: JobStats,
    master: thaw_common::auth::MasterClient,
    registration: Mutex<Option<Registration>>,
    removed: Mutex<Vec<BlockReport>>,
    /// Of those, the ones a report in flight carries.
    sending: Mutex<Vec<BlockReport>>,
    /// Block changes (removals, commits) to tell the master: woken on each.
    changed: tokio::sync::Notify,
    /// Held by a report of tier use and removals while it is sent (a full
    /// heartbeat or an incremental report), so the master gets them in order.
    reporting: tokio::sync::Mutex<()>,
    /// Block commits waiting for a call to the master (group commit).
    commits: Arc<group_commit::CommitQueue>,
    ufs: OnceLock<thaw_ufs::UnderStore>,
    /// Fills from the under-store in progress, by block.
    fills: Mutex<HashMap<u64, cache::FillState>>,
    pub migrator: Migrator,
    tasks: TaskTracker,
    disk_device: Option<Arc<Device>>,
    ufs_device: Option<Arc<Device>>,
    /// Per migration device: how many streams a copy reads it with (measured).
    copy_parallelism: Mutex<HashMap<Source, migration::parallelism::Parallelism>>,
    pub checkpoints: checkpoint::Checkpointer,
    /// Applications' cache affinities and caching probabilities (the master's).
    pub affinities: Arc<affinity::Affinities>,
    /// Data service request durations by kind (served as metrics when asked).
    pub(crate) request_latency: thaw_common::metrics::Latencies,
    /// Where metrics are served, if they are (told to the master for status).
    pub metrics_address: Option<String>,
}

impl Worker {
    pub fn new(config: WorkerConfig, address: String) -> Result<Self> {
        let affinities = Arc::new(affinity::Affinities::default());
        let cache = tier::CacheConfig {
            policy: config.replacement,
            window: config.cache_window,
            affinities: affinities.clone(),
        };
        let open = |t: &TierConfig, tier, wipe| TierStore::open(tier, &t.dir, t.capacity, wipe, cache.clone());
        let mem = config.mem.as_ref().map(|t| open(t, Tier::Mem, true)).transpose()?;
        let disk = config.disk.as_ref().map(|t| open(t, Tier::Disk, false)).transpose()?;
        if config.secret.is_some() {
            for t in [&mem, &disk].into_iter().flatten() {
                authorize::restrict_dir(t.dir())?;
            }
        }
        // The worker acts as the superuser.
        let credentials = match &config.secret {
            Some(s) => Some(Arc::new(Credentials::from_secret(s.clone(), thaw_common::auth::SUPERUSER, Vec::new())?)),
            None => None,
        };
        let master = thaw_common::auth::master_client(&config.master, credentials, config.master_tls.as_deref())?;
        let migrator = Migrator::new(config.migration.clone(), config.mem.as_ref().map(|m| m.capacity).unwrap_or(0));
        let device = |kind| config.device_models.get(kind).map(|m| Device::new(kind, m));
        let (disk_device, ufs_device) = (device(DeviceKind::Disk), device(DeviceKind::Ufs));
        Ok(Worker {
            checkpoints: checkpoint::Checkpointer::new(config.checkpoint_bandwidth),
            migrator,
            master,
            config,
            address,
            mem,
            disk,
            stats: JobStats::default(),
            registration: Mutex::new(None),
            removed: Mutex::new(Vec::new()),
            sending: Mutex::new(Vec::new()),
            changed: tokio::sync::Notify::new(),
            commits: Default::default(),
            reporting: tokio::sync::Mutex::new(()),
            ufs: OnceLock::new(),
            fills: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
            disk_device,
            ufs_device,
            copy_parallelism: Mutex::new(HashMap::new()),
            affinities,
            request_latency: thaw_common::metrics::Latencies::new("request"),
            metrics_address: None,
            user_connections: Arc::default(),
        })
    }

    /// The tiers, fastest first.
    pub fn tiers(&self) -> impl Iterator<Item = &Arc<TierStore>> {
        self.mem.iter().chain(self.disk.iter())
    }

    pub fn tier(&self, tier: Tier) -> Option<Arc<TierStore>> {
        match tier {
            Tier::Mem => self.mem.clone(),
            Tier::Disk => self.disk.clone(),
            Tier::Unspecified => None,
        }
    }

    /// Holds `bytes` of `store`, evicting cached blocks by the tier's replacement
    /// policy when it is full: never a block a job still expects (the migrator's
    /// reference lists), one with no other copy, or one being written. The
    /// evictions go to the master at once (an incremental report). A tier full of such
    /// blocks fails with what holds it, by job.
    pub(crate) fn reserve(&self, store: &Arc<TierStore>, bytes: u64) -> Result<tier::Reservation> {
        self.reserve_for(store, bytes, tier::Need::Required)
    }

    /// [`Worker::reserve`] for a migration or write (`Need::Required`) or a
    /// read's fill, which the cache policy may drop.
    pub(crate) fn reserve_for(
        &self,
        store: &Arc<TierStore>,
        bytes: u64,
        need: tier::Need<'_>,
    ) -> Result<tier::Reservation> {
        let (r, evicted) =
            self.migrator.protecting(|held| store.reserve_for(bytes, &|b| held(b) || store.in_use(b), need));
        for &(b, len) in &evicted {
            tracing::debug!(
                block = b,
                bytes = len,
                tier = store.name(),
                policy = store.policy().name(),
                "evicted to make room"
            );
            self.note_removed(b, store.tier, len);
        }
        r.map_err(|mut e| {
            // Name the jobs where the message counts what they hold (not as
            // the reason when it is a small part: the largest part leads).
            if let Some(who) = self.migrator.holders_text()
                && e.message.contains(" held for jobs")
            {
                e.message = e.message.replacen(" held for jobs", &format!(" held for {who}"), 1);
            }
            e
        })
    }

    /// A tier's use, its held bytes being the blocks jobs still expect here
    /// that no migration may evict (all of them under do-not-harm).
    pub fn tier_usage(&self, store: &TierStore) -> thaw_common::proto::TierUsage {
        self.migrator.protecting_from_migrations(|held| store.usage(held))
    }

    /// Runs one migration: copies the block into the MEM tier from the DISK tier
    /// or the under-store. `Ok(true)`: migrated; `Ok(false)`: it was in memory
    /// already; `Err((true, _))`: no room in the tier yet (retry later).
    /// `slots`: an order's copies at once (see [`cache::CopySlots`]).
    pub(crate) async fn migrate_block(
        self: &Arc<Self>,
        task: &Task,
        slots: Option<cache::CopySlots>,
    ) -> std::result::Result<bool, (bool, String)> {
        let Some(mem) = self.mem.clone() else {
            return Err((false, "this worker has no MEM tier".into()));
        };
        if mem.get(task.block).is_some() {
            return Ok(false);
        }
        let r = match (task.source, &task.ufs) {
            (Source::Disk, _) => self.copy_from_disk(task.block, &mem, slots).await,
            (Source::Ufs, Some(ufs)) => self.migrate_fill(task.block, ufs, &mem, slots).await,
            (Source::Ufs, None) => Err(ThawError::invalid("under-store migration without a source")),
        };
        match r {
            Ok(()) => {
                tracing::debug!(block = task.block, source = ?task.source, "migrated");
                Ok(true)
            }
            Err(e) if e.kind == thaw_common::ErrorKind::ResourceExhausted => Err((true, e.message)),
            Err(e) => Err((false, e.to_string())),
        }
    }

    /// Copies a DISK-tier block into the MEM tier (sendfile between the files).
    async fn copy_from_disk(&self, block: u64, mem: &Arc<TierStore>, slots: Option<cache::CopySlots>) -> Result<()> {
        let slot = cache::take_slot(slots).await;
        let disk = self.disk.clone().ok_or_else(|| ThawError::not_found("this worker has no DISK tier"))?;
        let len = disk.get(block).ok_or_else(|| ThawError::not_found(format!("block {block} is not on DISK here")))?;
        let mut file = cache::BlockFile::create(self, mem, block, len, false)?;
        // The DISK device, if modelled, paces the copy like any DISK read, in the
        // background class unless configured otherwise (`instant`: not at all);
        // the real disk sees the copying thread in the kernel's idle class likewise.
        let io = self.config.migration.io;
        let idle = io == MigrationIo::Idle;
        let mut device = match io {
            MigrationIo::Instant => None,
            MigrationIo::Idle => self.device(DeviceKind::Disk).map(|d| d.open_background_stream()),
            MigrationIo::Normal => self.device(DeviceKind::Disk).map(|d| d.open_stream()),
        };
        let streams = self.copy_streams(Source::Disk, len, device.is_some());
        let started = std::time::Instant::now();
        // Drop-behind: the block is read from memory from now on (see `page_cache`).
        let mode = cache::CopyMode { idle_io: idle, streams, drop_behind: !self.config.keep_page_cache };
        file.copy_paced(disk.block_path(block), 0, len, device.as_mut(), mode).await?;
        if device.is_none() && file.written == len {
            self.copy_took(Source::Disk, streams, len, started.elapsed());
        }
        drop(device);
        drop(slot);
        if file.written != len {
            return Err(ThawError::data_lost(format!(
                "DISK block {block} ended after {} of {len} bytes",
                file.written
            )));
        }
        file.commit(self, None).await
    }

    /// Streams the next migration copy of `len` bytes from `source` uses: the
    /// device's measured parallelism; one through a device model (its
    /// concurrency penalty is the model's to charge, as a hard disk's seeks).
    pub(crate) fn copy_streams(&self, source: Source, len: u64, modelled: bool) -> usize {
        if modelled {
            return 1;
        }
        let mut p = self.copy_parallelism.lock().unwrap_or_else(|e| e.into_inner());
        let streams = p.entry(source).or_default().streams(len);
        tracing::trace!(?source, len, streams, "migration copy");
        streams
    }

    /// Whether a device model paces migrations from `source` (then an order's
    /// blocks copy one at a time: concurrent streams are the model's to charge).
    pub(crate) fn modelled(&self, source: Source) -> bool {
        let kind = match source {
            Source::Disk => DeviceKind::Disk,
            Source::Ufs => DeviceKind::Ufs,
        };
        self.config.migration.io != MigrationIo::Instant && self.device(kind).is_some()
    }

    /// Records how long a migration copy from `source` took with `streams`.
    pub(crate) fn copy_took(&self, source: Source, streams: usize, len: u64, took: Duration) {
        let mut p = self.copy_parallelism.lock().unwrap_or_else(|e| e.into_inner());
        let p = p.entry(source).or_default();
        p.record(streams, len, took.as_nanos() as u64);
        tracing::trace!(?source, streams, len, took_ms = took.as_millis() as u64, chosen = p.chosen(), "copy measured");
    }

    /// Evicts the migrated blocks the reference lists released.
    pub(crate) fn carry_out(&self, fx: Effects) {
        let Some(mem) = &self.mem else {
            return;
        };
        let mut removed = Vec::new();
        self.migrator.evict_unwanted(fx, |b| removed.extend(mem.remove(b).map(|len| (b, len))));
        for (b, len) in removed {
            tracing::debug!(block = b, "migrated block evicted: no job references it");
            self.note_removed(b, Tier::Mem, len);
        }
    }

    /// Notes a read by `job` of `bytes` of `block` (0: a short-circuit open) for
    /// the migration state: implicit eviction, reads the master wants to know.
    /// Waits while this worker is copying `block` from its DISK tier into
    /// memory, so the read is served from memory when the copy lands instead of
    /// reading the disk a second time beside it (each extra stream costs a disk
    /// its throughput). An improvement on the papers, where a task reading a
    /// block under migration reads it from disk. Bounded: a copy running past
    /// twice its estimate (or 5 s unmeasured) is left to finish alone.
    pub(crate) async fn join_migration(&self, block: u64) {
        let source = Source::Disk;
        if !self.migrator.copying(source, block) || self.mem.as_ref().is_some_and(|m| m.get(block).is_some()) {
            return;
        }
        let bytes = self.disk.as_ref().and_then(|d| d.get(block)).unwrap_or(0);
        let budget = match self.migrator.estimate(source) {
            Some(ns) if ns > 0.0 => Duration::from_nanos((2.0 * ns * bytes as f64) as u64).max(JOIN_MIN),
            _ => JOIN_UNMEASURED,
        };
        let deadline = tokio::time::Instant::now() + budget;
        while self.migrator.copying(source, block) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(JOIN_POLL).await;
        }
    }

    /// Whether a read by `job` that misses `tier` asks to cache `block`
    /// there: the application's caching probability (CAVA, section II) draws it.
    /// Either way the read counts in the policy's window (the file was read).
    pub(crate) fn admits(&self, tier: &TierStore, block: u64, job: &str) -> bool {
        if tier.get(block).is_some() {
            return true;
        }
        tier.note_request(block, job);
        let p = if tier.policy().uses_benefit() { self.affinities.probability(job) } else { 1.0 };
        let yes = affinity::chosen(block, p);
        if !yes {
            tier.note_skipped();
            tracing::debug!(job, block, probability = p, "not cached: the job's caching probability left it out");
        }
        yes
    }

    pub(crate) fn note_read(&self, job: &str, block: u64, bytes: u64) {
        let fx = self.migrator.on_read(job, block, bytes);
        self.carry_out(fx);
    }

    /// The emulated device of `kind`; `None` when it is not modelled.
    pub fn device(&self, kind: DeviceKind) -> Option<&Arc<Device>> {
        match kind {
            DeviceKind::Disk => self.disk_device.as_ref(),
            DeviceKind::Ufs => self.ufs_device.as_ref(),
        }
    }

    /// The modelled devices' states, for stats and heartbeats.
    pub fn device_states(&self) -> Vec<thaw_common::proto::DeviceState> {
        DeviceKind::ALL.iter().filter_map(|&k| self.device(k)).map(|d| d.state()).collect()
    }

    /// A stream on the device of `kind`, if it is modelled: a read of it waits
    /// for the device time each chunk costs.
    pub(crate) fn device_stream(&self, kind: DeviceKind) -> Option<device::DeviceStream> {
        self.device(kind).map(|d| d.open_stream())
    }

    /// The under-store, known once the master has told us at registration.
    pub fn ufs(&self) -> Result<&thaw_ufs::UnderStore> {
        self.ufs.get().ok_or_else(|| ThawError::unavailable("worker has not registered with the master yet"))
    }
}

/// Runs a worker on `listener` until `shutdown`: the data service and the master
/// link, both owned tasks that stop with it.
pub async fn serve(config: WorkerConfig, listener: TcpListener, shutdown: CancellationToken) -> Result<()> {
    serve_with_metrics(config, listener, None, shutdown).await
}

/// [`serve`], and Prometheus metrics at `/metrics` on `metrics` if given.
pub async fn serve_with_metrics(
    config: WorkerConfig,
    listener: TcpListener,
    metrics: Option<TcpListener>,
    shutdown: CancellationToken,
) -> Result<()> {
    let address = match &config.advertise {
        Some(a) => a.clone(),
        None => listener.local_addr()?.to_string(),
    };
    let mut worker = Worker::new(config, address.clone())?;
    if let Some(l) = &metrics {
        let at = l.local_addr()?;
        worker.metrics_address = Some(if at.ip().is_unspecified() {
            // On every interface: reachable where the data service is.
            let host = address.rsplit_once(':').map_or(address.as_str(), |(h, _)| h);
            format!("{host}:{}", at.port())
        } else {
            at.to_string()
        });
    }
    let worker = Arc::new(worker);
    if let Some(l) = metrics {
        let registry = Arc::new(metrics::registry(&worker));
        let stop = shutdown.clone();
        worker.tasks.spawn(async move {
            if let Err(e) = thaw_common::metrics::serve(l, registry, stop.cancelled_owned()).await {
                tracing::warn!(error = %e, "metrics server stopped");
            }
        });
    }
    tracing::info!(%address, host = %worker.config.host, rack = %worker.config.rack, "worker data service listening");
    if !worker.config.device_models.is_empty() {
        tracing::info!(models = ?worker.config.device_models, "emulated devices: reads are throttled");
    }
    let link = tokio::spawn(worker.clone().run_master_link(shutdown.clone()));
    for source in Source::ALL {
        worker.tasks.spawn(migration::run_device(worker.clone(), source, shutdown.clone()));
    }
    worker.tasks.spawn(checkpoint::run(worker.clone(), shutdown.clone()));
    worker.tasks.spawn(worker.clone().run_block_reports(shutdown.clone()));
    data::serve(worker.clone(), listener, shutdown.clone()).await;
    let _ = link.await;
    worker.tasks.close();
    worker.tasks.wait().await;
    for d in DeviceKind::ALL.iter().filter_map(|&k| worker.device(k)) {
        d.set_interference(0);
    }
    if worker.config.remove_mem_on_exit
        && let Some(m) = &worker.mem
    {
        m.destroy();
    }
    Ok(())
}

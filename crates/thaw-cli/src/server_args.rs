//! The command-line arguments of the servers (`thaw local`, `thaw master`,
//! `thaw worker`) and their parsers; `servers` runs them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use thaw_common::auth::Secret;
use thaw_common::tls::{ClientTls, ServerTls};
use thaw_master::checkpoint::Order as CheckpointOrder;
use thaw_master::master::{RecomputeExecutor, RecomputeMode};
use thaw_master::migration::{Policy, Priority};
use thaw_worker::device::DeviceModels;
use thaw_worker::{MigrationConfig, MigrationIo};

use crate::{dir_arg, size_arg};

/// The rack of a worker not told its rack, in `thaw local` and `thaw worker`
/// alike.
pub const DEFAULT_RACK: &str = "rack0";

#[derive(Args, Clone)]
pub struct LocalArgs {
    /// Under-store mounted at '/': a directory (made if missing),
    /// s3://BUCKET/PREFIX?endpoint=URL&region=NAME (credentials from
    /// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) or hdfs://NAMENODE:PORT/PATH.
    /// Files already there are readable.
    #[arg(long)]
    pub ufs: String,
    /// Number of workers.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Masters: 1, or a group of highly available masters (3 survive the
    /// loss of one) over a replicated journal, the first on --port, the
    /// others on free ports; clients name them all (THAW_MASTER=a,b,c).
    #[arg(long, default_value_t = 1)]
    pub masters: usize,
    /// Master port.
    #[arg(long, default_value_t = 19998)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// MEM tier capacity per worker.
    #[arg(long, value_parser = size_arg, default_value = "1GiB")]
    pub mem_capacity: u64,
    /// DISK tier capacity per worker.
    #[arg(long, value_parser = size_arg, default_value = "4GiB")]
    pub disk_capacity: u64,
    /// Where the MEM tiers live (a tmpfs).
    #[arg(long, value_parser = dir_arg, default_value = "/dev/shm")]
    pub mem_root: PathBuf,
    /// Keep the journal (the namespace) and the DISK tiers in this directory
    /// across runs: a later `thaw local --state-dir DIR` starts from them.
    /// Default: a new directory under the temp dir, removed when the cluster
    /// stops, so each run starts empty.
    #[arg(long, value_parser = dir_arg)]
    pub state_dir: Option<PathBuf>,
    /// Default block size.
    #[arg(long, value_parser = size_arg, default_value = "64MiB")]
    pub block_size: u64,
    /// Stop when standard input closes: a parent process that holds the other
    /// end (the Python `LocalCluster`) takes the cluster down with it, even if it
    /// is killed.
    #[arg(long)]
    pub exit_with_stdin: bool,
    /// A directory the cluster owns (its caller's scratch space): removed when
    /// the cluster stops, however it stops.
    #[arg(long, value_parser = dir_arg)]
    pub remove_on_exit: Option<PathBuf>,
    /// Serve Prometheus metrics at /metrics: the master on this port, worker I
    /// on the port + I (0: any free ports; every address is printed).
    /// Default: no metrics.
    #[arg(long)]
    pub metrics_port: Option<u16>,
    /// Serve the web dashboard (workers, jobs, files, migration events) from
    /// the master on this port (0: any free port; the URL is printed).
    /// Default: no dashboard.
    #[arg(long)]
    pub web_port: Option<u16>,
    /// Serve S3 (`thaw gateway`, with its default keys and write type) on
    /// this port (0: any free port; the address is printed). Default: none.
    #[arg(long)]
    pub s3_port: Option<u16>,
    /// Emulated devices of every worker (evaluation), e.g.
    /// disk=40MiB/s,ufs=20MiB/s,penalty=0.3: see `thaw worker --device-model`.
    #[arg(long, value_parser = device_model_arg)]
    pub device_model: Option<DeviceModels>,
    /// I:SPEC: worker I's device model instead of --device-model's (workers
    /// are numbered from 1, as `thaw status` shows them). Repeatable.
    #[arg(long, value_parser = worker_device_model_arg)]
    pub worker_device_model: Vec<(usize, DeviceModels)>,
    #[command(flatten)]
    pub timing: Timing,
    #[command(flatten)]
    pub planner: PlannerArgs,
    #[command(flatten)]
    pub buffer: BufferArgs,
    #[command(flatten)]
    pub checkpoint: CheckpointArgs,
    #[command(flatten)]
    pub recompute: RecomputeArgs,
    #[command(flatten)]
    pub affinity: AffinityArgs,
    #[command(flatten)]
    pub secret: SecretArgs,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// How the master rebuilds lost files from lineage (Tachyon, section 2.6).
#[derive(Args, Clone)]
pub struct RecomputeArgs {
    /// proactive: rebuild lost files as soon as the loss is seen; reactive:
    /// when one is read (the reader waits); off.
    #[arg(long = "recompute", default_value = "proactive", value_parser = recompute_mode_arg)]
    pub recompute_mode: RecomputeMode,
    /// Attempts of a lineage's rerun before it is given up on.
    #[arg(long, default_value_t = 3)]
    pub recompute_attempts: u32,
    /// Lineage reruns at once.
    #[arg(long, default_value_t = 2)]
    pub recompute_parallel: usize,
    /// A rerun running longer is killed, e.g. 10m.
    #[arg(long, default_value = "10m", value_parser = crate::jobs::duration_arg)]
    pub recompute_timeout: Duration,
    /// Who runs reruns: local (processes on the master's host) or external
    /// (the Dask integration, `thaw.dask.install(client, recompute=True)`,
    /// runs them as Dask tasks).
    #[arg(long, default_value = "local", value_parser = recompute_executor_arg)]
    pub recompute_executor: RecomputeExecutor,
}

impl Default for RecomputeArgs {
    fn default() -> Self {
        RecomputeArgs {
            recompute_mode: RecomputeMode::Proactive,
            recompute_attempts: 3,
            recompute_parallel: 2,
            recompute_timeout: Duration::from_secs(600),
            recompute_executor: RecomputeExecutor::Local,
        }
    }
}

fn recompute_executor_arg(s: &str) -> Result<RecomputeExecutor, String> {
    RecomputeExecutor::parse(s).map_err(|e| e.message)
}

fn recompute_mode_arg(s: &str) -> Result<RecomputeMode, String> {
    RecomputeMode::parse(s).map_err(|e| e.message)
}

/// How the master classifies applications' cache affinity (CAVA, section IV-A).
#[derive(Args, Clone)]
pub struct AffinityArgs {
    /// CPU use (cores busy per task, e.g. 0.5) above which an application
    /// whose inputs are mostly not in memory counts as CPU-heavy; auto: the
    /// mean of the applications measured in the last ten minutes (CAVA's
    /// "more than average").
    #[arg(long, default_value = "auto", value_parser = threshold_arg)]
    pub ca_cpu_threshold: Threshold,
    /// Write rate per task (bytes per second, e.g. 4MiB) above which an
    /// application counts as write-heavy; auto: the mean of the applications
    /// measured in the last ten minutes.
    #[arg(long, default_value = "auto", value_parser = rate_arg)]
    pub ca_write_threshold: Threshold,
    /// Cache affinity of the high, medium and low classes.
    #[arg(long, default_value = "0.4,0.2,0.05", value_parser = values_arg)]
    pub ca_values: [f64; 3],
    /// An application whose read bytes came from memory at least this much
    /// counts as mostly cached (then only its writes decide its class).
    #[arg(long, default_value_t = 0.5)]
    pub ca_mostly_cached: f64,
}

impl Default for AffinityArgs {
    fn default() -> Self {
        let d = thaw_master::affinity::AffinityConfig::default();
        AffinityArgs {
            ca_cpu_threshold: Threshold(d.cpu_threshold),
            ca_write_threshold: Threshold(d.write_threshold),
            ca_values: d.values,
            ca_mostly_cached: d.mostly_cached,
        }
    }
}

impl AffinityArgs {
    pub(crate) fn config(&self) -> thaw_master::affinity::AffinityConfig {
        thaw_master::affinity::AffinityConfig {
            cpu_threshold: self.ca_cpu_threshold.0,
            write_threshold: self.ca_write_threshold.0,
            values: self.ca_values,
            mostly_cached: self.ca_mostly_cached,
            ..Default::default()
        }
    }
}

/// A classifier threshold: fixed, or `None` for the live applications' mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold(pub Option<f64>);

fn threshold_arg(s: &str) -> Result<Threshold, String> {
    if s == "auto" {
        return Ok(Threshold(None));
    }
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(Threshold(Some(x))),
        _ => Err(format!("a threshold is auto or a number >= 0, not {s:?}")),
    }
}

fn rate_arg(s: &str) -> Result<Threshold, String> {
    if s == "auto" {
        return Ok(Threshold(None));
    }
    let bytes = s.strip_suffix("/s").unwrap_or(s);
    size_arg(bytes)
        .map(|b| Threshold(Some(b as f64)))
        .map_err(|e| format!("{e} (a write rate is auto or bytes per second)"))
}

fn values_arg(s: &str) -> Result<[f64; 3], String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("cache affinities are three numbers high,medium,low within [0, 1], not {s:?}"))?;
    let [h, m, l] = v[..] else {
        return Err(format!("cache affinities are three numbers high,medium,low, not {s:?}"));
    };
    let cfg = thaw_master::affinity::AffinityConfig { values: [h, m, l], ..Default::default() };
    cfg.check().map_err(|e| e.message)?;
    Ok([h, m, l])
}

/// How a worker writes checkpoints to the under-store (Tachyon, section 2.7).
#[derive(Args, Clone, Default)]
pub struct CheckpointArgs {
    /// Caps each worker's checkpoint copies to the under-store, bytes per second
    /// (e.g. 200MiB; default: no cap beyond the idle I/O class they run in).
    #[arg(long, value_parser = size_arg)]
    pub checkpoint_bandwidth: Option<u64>,
}

/// How the master plans migrations (Ignem, section III-A, DYRS, section III-A).
#[derive(Args, Clone)]
pub struct PlannerArgs {
    /// none (the baseline), ignem (bind at once to a random replica holder),
    /// dyrs (late binding to the replica expected to finish soonest) or naive
    /// (DYRS, Fig. 10: late binding to the replica holder with the fewest
    /// outstanding migrations, into free queue slots, no estimates). Also `--policy`.
    #[arg(long, visible_alias = "policy", default_value = "dyrs", value_parser = policy_arg)]
    pub migration_policy: Policy,
    /// Order of migrations: fifo or smallest-job-first (default:
    /// smallest-job-first for ignem, as in its paper, and for dyrs, whose paper
    /// ordered FIFO (measured slower for small jobs); fifo for naive).
    #[arg(long, value_parser = priority_arg)]
    pub priority: Option<Priority>,
    /// Lease of a job whose submitter names none, milliseconds.
    #[arg(long, default_value_t = 60_000)]
    pub job_lease_ms: u64,
    /// How often the dyrs planner retargets pending migrations, milliseconds.
    #[arg(long, default_value_t = 100)]
    pub plan_interval_ms: u64,
    /// Which unpersisted async-through file is checkpointed next: newest (the
    /// most recently written first, Tachyon, section 2.7) or creation (write order).
    #[arg(long, default_value = "newest", value_parser = checkpoint_order_arg)]
    pub checkpoint_order: CheckpointOrder,
}

/// A worker's memory: the migration buffer (Ignem, section III-B2) and what a full
/// tier evicts.
#[derive(Args, Clone)]
pub struct BufferArgs {
    /// Memory for migrated blocks, held and in flight (default: 80% of the MEM tier).
    #[arg(long, value_parser = size_arg)]
    pub migration_buffer: Option<u64>,
    /// An implicitly evicted job releases a block it read in part after this
    /// long without touching it, milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub implicit_eviction_delay_ms: u64,
    /// How migrations read the DISK tier: idle (only while no job reads it, so
    /// they never slow running jobs: the device model's idle class, and the
    /// kernel's via ioprio_set on a real disk, honoured by the BFQ scheduler) or
    /// normal (a stream like any other, as in the papers) or instant (not paced
    /// by the device model at all: Ignem's hypothetical instantaneous migration,
    /// the bound of its Fig. 7; for evaluation).
    #[arg(long, default_value = "idle", value_parser = migration_io_arg)]
    pub migration_io: MigrationIo,
    /// A migration waits this long for room in a full migration buffer in
    /// which nothing frees up, then fails saying which jobs hold it, milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub migration_room_wait_ms: u64,
    /// Ignem's do-not-harm rule (section III-A3): on, a migration never evicts a
    /// migrated block a job has yet to read (it waits for room); off, for the
    /// ablation, it evicts the least recently used of them.
    #[arg(long, default_value = "on", action = clap::ArgAction::Set, value_parser = on_off_arg)]
    pub do_not_harm: bool,
    /// Which cached blocks (read into memory, released by their jobs, or with
    /// another copy) a full tier evicts to make room: lru (least recently read),
    /// lfu (least often read since admitted, least recently among equals),
    /// cava (CAVA, section IV-B: lowest benefit = reads in the window x the highest
    /// cache affinity of their applications; a read's fill is dropped when
    /// its benefit is not above its victims', and never evicts its own
    /// application's blocks) or ca (CA-Only: the same by affinity alone).
    /// Blocks a job still expects and blocks with no other copy are never
    /// evicted. Also `--replacement`.
    #[arg(long = "cache-policy", visible_alias = "replacement", default_value = "lru", value_parser = replacement_arg)]
    pub replacement: thaw_worker::replacement::Policy,
    /// The cava and ca policies' sliding window: a file's benefit counts the
    /// reads of this much of the past (e.g. 10m, 90s).
    #[arg(long, default_value = "10m", value_parser = crate::jobs::duration_arg)]
    pub cache_window: Duration,
    /// Leave what migrations, fills and checkpoints read from or write to a
    /// local under-store (or the DISK tier) in the page cache. By default they
    /// drop it behind them (posix_fadvise DONTNEED): the MEM tier holds those
    /// bytes, and a second copy in RAM slows large loads. For an under-store
    /// directory other programs read too.
    #[arg(long)]
    pub keep_page_cache: bool,
}

impl Default for PlannerArgs {
    fn default() -> Self {
        PlannerArgs {
            migration_policy: Policy::Dyrs,
            priority: None,
            job_lease_ms: 60_000,
            plan_interval_ms: 100,
            checkpoint_order: CheckpointOrder::NewestFirst,
        }
    }
}

impl Default for BufferArgs {
    fn default() -> Self {
        BufferArgs {
            migration_buffer: None,
            implicit_eviction_delay_ms: 2000,
            migration_io: MigrationIo::Idle,
            migration_room_wait_ms: 5000,
            do_not_harm: true,
            replacement: thaw_worker::replacement::Policy::Lru,
            cache_window: thaw_worker::tier::DEFAULT_WINDOW,
            keep_page_cache: false,
        }
    }
}

impl BufferArgs {
    pub(crate) fn config(&self) -> MigrationConfig {
        MigrationConfig {
            buffer_limit: self.migration_buffer,
            implicit_delay: Duration::from_millis(self.implicit_eviction_delay_ms),
            io: self.migration_io,
            room_wait: Duration::from_millis(self.migration_room_wait_ms),
            do_not_harm: self.do_not_harm,
            ..Default::default()
        }
    }
}

fn replacement_arg(s: &str) -> Result<thaw_worker::replacement::Policy, String> {
    thaw_worker::replacement::Policy::parse(s).map_err(|e| e.message)
}

fn checkpoint_order_arg(s: &str) -> Result<CheckpointOrder, String> {
    CheckpointOrder::parse(s).map_err(|e| e.message)
}

fn on_off_arg(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected on or off, not {s:?}")),
    }
}

fn migration_io_arg(s: &str) -> Result<MigrationIo, String> {
    MigrationIo::parse(s).map_err(|e| e.message)
}

fn policy_arg(s: &str) -> Result<Policy, String> {
    Policy::parse(s).map_err(|e| e.message)
}

fn priority_arg(s: &str) -> Result<Priority, String> {
    Priority::parse(s).map_err(|e| e.message)
}

/// The cluster secret: security on (thaw_common::auth).
#[derive(Args, Clone, Default)]
pub struct SecretArgs {
    /// A file holding the cluster secret (at least 32 bytes, mode 600; `thaw
    /// auth secret` makes one), the same on the master and every worker. With
    /// it, every call must carry a token signed with it (clients: THAW_TOKEN,
    /// THAW_TOKEN_FILE or THAW_SECRET_FILE), workers serve only reads and
    /// writes the master granted, and paths have owners and modes that are
    /// enforced. Without it, anyone who reaches the ports can do anything.
    #[arg(long, env = "THAW_SECRET_FILE")]
    pub secret_file: Option<PathBuf>,
}

impl SecretArgs {
    pub fn load(&self) -> anyhow::Result<Option<Arc<Secret>>> {
        self.secret_file.as_deref().map(|p| Secret::load(p).map(Arc::new)).transpose().map_err(Into::into)
    }
}

/// TLS on the master's and workers' ports (thaw_common::tls).
#[derive(Args, Clone, Default)]
pub struct TlsArgs {
    /// This server's certificate chain (PEM): TLS on its port. It must name
    /// the host or IP address clients dial. `thaw auth certs` makes one.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The cluster's CA (PEM), trusted when connecting to a TLS master (a
    /// worker) and given to the commands the master runs. Clients:
    /// THAW_TLS_CA.
    #[arg(long, env = "THAW_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
}

impl TlsArgs {
    pub fn server(&self) -> anyhow::Result<Option<Arc<ServerTls>>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Ok(Some(Arc::new(ServerTls::load(c, k)?))),
            _ => Ok(None),
        }
    }

    pub fn client(&self) -> anyhow::Result<Option<Arc<ClientTls>>> {
        Ok(self.tls_ca.as_deref().map(ClientTls::load).transpose()?.map(Arc::new))
    }
}

#[derive(Args, Clone)]
pub struct Timing {
    /// Worker heartbeat interval, milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_ms: u64,
    /// A worker silent this long (milliseconds) is declared dead.
    #[arg(long, default_value_t = 10_000)]
    pub worker_timeout_ms: u64,
    /// An unfinished file whose writer has not renewed its lease for this
    /// long (milliseconds; writers renew every third of it) is deleted, as a
    /// write that will never finish.
    #[arg(long, default_value_t = 60_000)]
    pub writer_lease_ms: u64,
}

#[derive(Args)]
pub struct MasterArgs {
    /// Under-store mounted at '/': fs:///dir, an absolute directory,
    /// hdfs://NAMENODE:PORT/PATH, or
    /// s3://BUCKET/PREFIX?endpoint=URL&region=NAME (endpoint and region may come
    /// from AWS_ENDPOINT_URL and AWS_REGION; credentials from AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY, never the URI). Workers are told the same URI and
    /// read their own credentials.
    #[arg(long)]
    pub(crate) ufs: String,
    /// Directory of the journal (the namespace survives restarts here).
    #[arg(long, value_parser = dir_arg)]
    pub(crate) journal_dir: PathBuf,
    /// Start even if the journal's records do not form a tree (a disk error,
    /// a hand edit), dropping the records that do not fit, each logged. By
    /// default the master refuses to start on such a journal, saying why.
    #[arg(long)]
    pub(crate) salvage_journal: bool,
    /// A recursive delete of more entries than this takes the tree out of the
    /// namespace in one step and removes its journal records in batches of
    /// this many behind it, so the master goes on serving meanwhile.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) delete_batch: u64,
    /// A single master's journal: changes are appended to its log (one sync
    /// a group commit) and folded into its store after this many, in one
    /// transaction, the log emptied then.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) journal_checkpoint_ops: u64,
    /// Port (0: any free port; the chosen address is printed). In a group:
    /// by default the port of this master's --peers entry.
    #[arg(long)]
    pub(crate) port: Option<u16>,
    /// Address to listen on (0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) bind: String,
    /// This master's position (1, 2, ...) in --peers: it runs as one of a
    /// group of highly available masters over a replicated journal (Raft),
    /// serving while it leads. Clients and workers name the group
    /// (THAW_MASTER=a,b,c) and follow its leader.
    #[arg(long, requires = "peers")]
    pub(crate) id: Option<u64>,
    /// Every master of the group, comma-separated, in id order, the same list
    /// on each (3 masters survive the loss of 1; 5 of 2).
    #[arg(long, requires = "id", value_delimiter = ',')]
    pub(crate) peers: Vec<String>,
    /// Serve Prometheus metrics at /metrics on this port of --bind (0: any free
    /// port; the chosen address is printed). Default: no metrics.
    #[arg(long)]
    pub(crate) metrics_port: Option<u16>,
    /// Serve the web dashboard (workers, jobs, files, migration events) on
    /// this port of --bind (0: any free port; the chosen address is printed).
    /// Default: no dashboard.
    #[arg(long)]
    pub(crate) web_port: Option<u16>,
    /// Default block size of new files.
    #[arg(long, value_parser = size_arg, default_value = "64MiB")]
    pub(crate) block_size: u64,
    #[command(flatten)]
    pub(crate) timing: Timing,
    #[command(flatten)]
    pub(crate) planner: PlannerArgs,
    #[command(flatten)]
    pub(crate) recompute: RecomputeArgs,
    #[command(flatten)]
    pub(crate) affinity: AffinityArgs,
    #[command(flatten)]
    pub(crate) secret: SecretArgs,
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
}

#[derive(Args)]
pub struct WorkerArgs {
    /// The master (or group of masters: a,b,c) to register with, HOST:PORT.
    #[arg(long, env = "THAW_MASTER", value_name = "HOST:PORT")]
    pub(crate) master: Option<String>,
    /// Host name for locality (default: this machine's).
    #[arg(long)]
    pub(crate) host: Option<String>,
    /// Rack name for locality (workers on one rack read each other's memory
    /// before other racks').
    #[arg(long, default_value = DEFAULT_RACK)]
    pub(crate) rack: String,
    /// Directory of the MEM tier (a tmpfs, e.g. /dev/shm/thaw).
    #[arg(long, value_parser = dir_arg)]
    pub(crate) mem_dir: Option<PathBuf>,
    /// MEM tier capacity.
    #[arg(long, value_parser = size_arg, default_value = "1GiB")]
    pub(crate) mem_capacity: u64,
    /// Directory of the DISK tier.
    #[arg(long, value_parser = dir_arg)]
    pub(crate) disk_dir: Option<PathBuf>,
    /// DISK tier capacity.
    #[arg(long, value_parser = size_arg, default_value = "4GiB")]
    pub(crate) disk_capacity: u64,
    /// Data service port (0: any free port; the chosen address is printed).
    #[arg(long, default_value_t = 0)]
    pub(crate) port: u16,
    /// Address to listen on (0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) bind: String,
    /// Address clients should use, if not the listening one.
    #[arg(long)]
    pub(crate) advertise: Option<String>,
    /// Serve Prometheus metrics at /metrics on this port of --bind (0: any free
    /// port; the chosen address is printed). Default: no metrics.
    #[arg(long)]
    pub(crate) metrics_port: Option<u16>,
    /// Data connections served at once; past it clients are told the worker is busy.
    #[arg(long, default_value_t = thaw_worker::DEFAULT_MAX_CONNECTIONS)]
    pub(crate) max_connections: usize,
    /// With --secret-file: connections one user may hold (default: half of
    /// --max-connections), so one user's clients cannot take them all.
    #[arg(long)]
    pub(crate) max_connections_per_user: Option<usize>,
    /// Mid-request, a client that sends or takes no byte for this long
    /// (milliseconds) is cut off, so slow or stopped clients cannot hold
    /// connections and blocks.
    #[arg(long, default_value_t = thaw_worker::data::DEFAULT_STALL_TIMEOUT.as_millis() as u64)]
    pub(crate) stall_timeout_ms: u64,
    #[command(flatten)]
    pub(crate) buffer: BufferArgs,
    #[command(flatten)]
    pub(crate) checkpoint: CheckpointArgs,
    /// Emulated devices (evaluation only; default none): reads of the DISK tier
    /// and of the under-store are paced as on a slow disk that loses throughput
    /// to concurrent streams, e.g. disk=40MiB/s,ufs=20MiB/s,penalty=0.3 (either
    /// device optional; penalty default 0.3; n streams share
    /// bandwidth / (1 + penalty * (n - 1))). `thaw interfere` adds synthetic load.
    #[arg(long, value_parser = device_model_arg)]
    pub(crate) device_model: Option<DeviceModels>,
    #[command(flatten)]
    pub(crate) secret: SecretArgs,
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
}

fn device_model_arg(s: &str) -> Result<DeviceModels, String> {
    DeviceModels::parse(s).map_err(|e| e.message)
}

/// `I:SPEC`, a worker index and its device model.
fn worker_device_model_arg(s: &str) -> Result<(usize, DeviceModels), String> {
    let (i, spec) = s.split_once(':').ok_or_else(|| format!("{s:?}: expected I:SPEC, e.g. 1:disk=40MiB/s"))?;
    let i = i.trim().parse().map_err(|_| format!("{s:?}: worker index {i:?} is not a number"))?;
    Ok((i, device_model_arg(spec)?))
}

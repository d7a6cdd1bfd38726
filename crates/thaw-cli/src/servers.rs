//! `thaw local`, `thaw master`, `thaw worker`: servers in the foreground that stop
//! cleanly on Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use thaw_common::auth::Secret;
use thaw_common::size::format_size;
use thaw_common::tls::{ClientTls, ServerTls};
use thaw_master::MasterConfig;
use thaw_master::checkpoint::Order as CheckpointOrder;
use thaw_master::master::{RecomputeExecutor, RecomputeMode};
use thaw_master::migration::{Policy, Priority};
use thaw_worker::device::DeviceModels;
use thaw_worker::{MigrationConfig, TierConfig, WorkerConfig};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{dir_arg, size_arg};

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
    fn config(&self) -> thaw_master::affinity::AffinityConfig {
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
    /// none (the baseline), ignem (bind at once to a random replica holder) or
    /// dyrs (late binding to the replica expected to finish soonest).
    #[arg(long, default_value = "dyrs", value_parser = policy_arg)]
    pub migration_policy: Policy,
    /// Order of migrations: fifo or smallest-job-first (default: fifo for dyrs,
    /// smallest-job-first for ignem, as in the papers).
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
    /// normal (a stream like any other, as in the papers).
    #[arg(long, default_value = "idle", value_parser = ["idle", "normal"])]
    pub migration_io: String,
    /// A migration waits this long for room in a full migration buffer in
    /// which nothing frees up, then fails saying which jobs hold it, milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub migration_room_wait_ms: u64,
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
            migration_io: "idle".into(),
            migration_room_wait_ms: 5000,
            replacement: thaw_worker::replacement::Policy::Lru,
            cache_window: thaw_worker::tier::DEFAULT_WINDOW,
            keep_page_cache: false,
        }
    }
}

impl BufferArgs {
    fn config(&self) -> MigrationConfig {
        MigrationConfig {
            buffer_limit: self.migration_buffer,
            implicit_delay: Duration::from_millis(self.implicit_eviction_delay_ms),
            background_io: self.migration_io == "idle",
            room_wait: Duration::from_millis(self.migration_room_wait_ms),
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
    ufs: String,
    /// Directory of the journal (the namespace survives restarts here).
    #[arg(long, value_parser = dir_arg)]
    journal_dir: PathBuf,
    /// Start even if the journal's records do not form a tree (a disk error,
    /// a hand edit), dropping the records that do not fit, each logged. By
    /// default the master refuses to start on such a journal, saying why.
    #[arg(long)]
    salvage_journal: bool,
    /// Port (0: any free port; the chosen address is printed). In a group:
    /// by default the port of this master's --peers entry.
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on (0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// This master's position (1, 2, ...) in --peers: it runs as one of a
    /// group of highly available masters over a replicated journal (Raft),
    /// serving while it leads. Clients and workers name the group
    /// (THAW_MASTER=a,b,c) and follow its leader.
    #[arg(long, requires = "peers")]
    id: Option<u64>,
    /// Every master of the group, comma-separated, in id order, the same list
    /// on each (3 masters survive the loss of 1; 5 of 2).
    #[arg(long, requires = "id", value_delimiter = ',')]
    peers: Vec<String>,
    /// Serve Prometheus metrics at /metrics on this port of --bind (0: any free
    /// port; the chosen address is printed). Default: no metrics.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Serve the web dashboard (workers, jobs, files, migration events) on
    /// this port of --bind (0: any free port; the chosen address is printed).
    /// Default: no dashboard.
    #[arg(long)]
    web_port: Option<u16>,
    /// Default block size of new files.
    #[arg(long, value_parser = size_arg, default_value = "64MiB")]
    block_size: u64,
    #[command(flatten)]
    timing: Timing,
    #[command(flatten)]
    planner: PlannerArgs,
    #[command(flatten)]
    recompute: RecomputeArgs,
    #[command(flatten)]
    affinity: AffinityArgs,
    #[command(flatten)]
    secret: SecretArgs,
    #[command(flatten)]
    tls: TlsArgs,
}

#[derive(Args)]
pub struct WorkerArgs {
    /// The master (or group of masters: a,b,c) to register with, HOST:PORT.
    #[arg(long, env = "THAW_MASTER", value_name = "HOST:PORT")]
    master: Option<String>,
    /// Host name for locality (default: this machine's).
    #[arg(long)]
    host: Option<String>,
    /// Rack name for locality (workers on one rack read each other's memory
    /// before other racks').
    #[arg(long, default_value = DEFAULT_RACK)]
    rack: String,
    /// Directory of the MEM tier (a tmpfs, e.g. /dev/shm/thaw).
    #[arg(long, value_parser = dir_arg)]
    mem_dir: Option<PathBuf>,
    /// MEM tier capacity.
    #[arg(long, value_parser = size_arg, default_value = "1GiB")]
    mem_capacity: u64,
    /// Directory of the DISK tier.
    #[arg(long, value_parser = dir_arg)]
    disk_dir: Option<PathBuf>,
    /// DISK tier capacity.
    #[arg(long, value_parser = size_arg, default_value = "4GiB")]
    disk_capacity: u64,
    /// Data service port (0: any free port; the chosen address is printed).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to listen on (0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Address clients should use, if not the listening one.
    #[arg(long)]
    advertise: Option<String>,
    /// Serve Prometheus metrics at /metrics on this port of --bind (0: any free
    /// port; the chosen address is printed). Default: no metrics.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Data connections served at once; past it clients are told the worker is busy.
    #[arg(long, default_value_t = thaw_worker::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// With --secret-file: connections one user may hold (default: half of
    /// --max-connections), so one user's clients cannot take them all.
    #[arg(long)]
    max_connections_per_user: Option<usize>,
    /// Mid-request, a client that sends or takes no byte for this long
    /// (milliseconds) is cut off, so slow or stopped clients cannot hold
    /// connections and blocks.
    #[arg(long, default_value_t = thaw_worker::data::DEFAULT_STALL_TIMEOUT.as_millis() as u64)]
    stall_timeout_ms: u64,
    #[command(flatten)]
    buffer: BufferArgs,
    #[command(flatten)]
    checkpoint: CheckpointArgs,
    /// Emulated devices (evaluation only; default none): reads of the DISK tier
    /// and of the under-store are paced as on a slow disk that loses throughput
    /// to concurrent streams, e.g. disk=40MiB/s,ufs=20MiB/s,penalty=0.3 (either
    /// device optional; penalty default 0.3; n streams share
    /// bandwidth / (1 + penalty * (n - 1))). `thaw interfere` adds synthetic load.
    #[arg(long, value_parser = device_model_arg)]
    device_model: Option<DeviceModels>,
    #[command(flatten)]
    secret: SecretArgs,
    #[command(flatten)]
    tls: TlsArgs,
}

fn device_model_arg(s: &str) -> Result<DeviceModels, String> {
    DeviceModels::parse(s).map_err(|e| e.message)
}

/// `I:SPEC`, a worker index and its device model.
fn worker_device_model_arg(s: &str) -> Result<(usize, DeviceModels), String> {
    let (i, spec) = s.split_once(':').ok_or_else(|| format!("{s:?}: expected I:SPEC, e.g. 0:disk=40MiB/s"))?;
    let i = i.trim().parse().map_err(|_| format!("{s:?}: worker index {i:?} is not a number"))?;
    Ok((i, device_model_arg(spec)?))
}

async fn listen(bind: &str, port: u16) -> anyhow::Result<TcpListener> {
    let addr: SocketAddr =
        format!("{bind}:{port}").parse().with_context(|| format!("bad listen address {bind}:{port}"))?;
    TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))
}

/// The metrics listener for `--metrics-port`, if given.
async fn listen_metrics(bind: &str, port: Option<u16>) -> anyhow::Result<Option<TcpListener>> {
    listen_optional(bind, port, "--metrics-port").await
}

/// A listener on `port` if given; an error names the `flag`.
async fn listen_optional(bind: &str, port: Option<u16>, flag: &str) -> anyhow::Result<Option<TcpListener>> {
    let Some(port) = port else {
        return Ok(None);
    };
    let l = listen(bind, port).await.with_context(|| format!("{flag} {port}"))?;
    Ok(Some(l))
}

/// Prints a line for whoever started the server; a closed stdout is no reason to
/// stop serving.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Cancels the token on Ctrl-C or SIGTERM.
pub fn stop_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
        }
        t.cancel();
    });
    token
}

fn master_config(
    ufs: String,
    journal: PathBuf,
    block_size: u64,
    t: &Timing,
    p: &PlannerArgs,
    r: &RecomputeArgs,
    a: &AffinityArgs,
) -> MasterConfig {
    let mut c = MasterConfig::new(journal, ufs);
    c.default_block_size = block_size;
    c.heartbeat_interval = Duration::from_millis(t.heartbeat_ms.max(10));
    c.worker_timeout = Duration::from_millis(t.worker_timeout_ms.max(t.heartbeat_ms * 2));
    c.writer_lease = Duration::from_millis(t.writer_lease_ms.max(300));
    c.migration_policy = p.migration_policy;
    c.priority = p.priority;
    c.default_lease = Duration::from_millis(p.job_lease_ms.max(100));
    c.plan_interval = Duration::from_millis(p.plan_interval_ms.max(1));
    c.checkpoint_order = p.checkpoint_order;
    c.recompute_mode = r.recompute_mode;
    c.recompute_attempts = r.recompute_attempts.max(1);
    c.recompute_parallel = r.recompute_parallel.max(1);
    c.recompute_timeout = r.recompute_timeout;
    c.recompute_executor = r.recompute_executor;
    c.affinity = a.config();
    c
}

pub async fn run_master(args: MasterArgs) -> anyhow::Result<()> {
    let group = match args.id {
        Some(id) => Some(thaw_master::ha::GroupConfig::new(id, args.peers.clone())?),
        None => None,
    };
    let port = match (args.port, &group) {
        (Some(p), _) => p,
        (None, Some(g)) => g
            .address()
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .with_context(|| format!("--peers entry {} has no port", g.address()))?,
        (None, None) => 19998,
    };
    let listener = listen(&args.bind, port).await?;
    let addr = listener.local_addr()?;
    let metrics = listen_metrics(&args.bind, args.metrics_port).await?;
    let web = listen_optional(&args.bind, args.web_port, "--web-port").await?;
    let mut config = master_config(
        args.ufs,
        args.journal_dir,
        args.block_size,
        &args.timing,
        &args.planner,
        &args.recompute,
        &args.affinity,
    );
    config.salvage_journal = args.salvage_journal;
    config.secret = args.secret.load()?;
    config.tls = args.tls.server()?;
    config.tls_ca = args.tls.tls_ca.clone();
    // A wrong bucket, endpoint or key is the master's one line of output, not
    // a failure right after it said it listens.
    thaw_master::check_under_store(&config.ufs_uri).await?;
    match &group {
        Some(g) => say(format_args!("thaw master {} of {} listening on {addr}", g.id, g.peers.len())),
        None => say(format_args!("thaw master listening on {addr}")),
    }
    config.group = group;
    if let Some(m) = &metrics {
        say(format_args!("thaw master metrics listening on {}", m.local_addr()?));
    }
    if let Some(w) = &web {
        say(format_args!("thaw master web listening on {}", w.local_addr()?));
    }
    let shutdown = stop_on_signal();
    thaw_master::serve_with_http(config, listener, thaw_master::HttpListeners { metrics, web }, shutdown).await?;
    Ok(())
}

/// The rack of a worker not told its rack, in `thaw local` and `thaw worker`
/// alike.
pub const DEFAULT_RACK: &str = "rack0";

/// `master`: `thaw --master X worker`'s, which comes before the worker's own.
pub async fn run_worker(args: WorkerArgs, master: Option<String>) -> anyhow::Result<()> {
    let master = master.or(args.master).context("--master (or THAW_MASTER) is required")?;
    if args.mem_dir.is_none() && args.disk_dir.is_none() {
        anyhow::bail!("a worker needs a tier: give --mem-dir and/or --disk-dir");
    }
    let listener = listen(&args.bind, args.port).await?;
    let addr = listener.local_addr()?;
    let metrics = listen_metrics(&args.bind, args.metrics_port).await?;
    let config = WorkerConfig {
        master,
        host: args.host.unwrap_or_else(thaw_common::hostname),
        rack: args.rack,
        mem: args.mem_dir.map(|dir| TierConfig { dir, capacity: args.mem_capacity }),
        disk: args.disk_dir.map(|dir| TierConfig { dir, capacity: args.disk_capacity }),
        advertise: args.advertise,
        remove_mem_on_exit: false,
        max_connections: args.max_connections,
        max_connections_per_user: args.max_connections_per_user.unwrap_or(args.max_connections.div_ceil(2)),
        stall_timeout: Duration::from_millis(args.stall_timeout_ms.max(100)),
        migration: args.buffer.config(),
        replacement: args.buffer.replacement,
        cache_window: args.buffer.cache_window,
        device_models: args.device_model.unwrap_or_default(),
        checkpoint_bandwidth: args.checkpoint.checkpoint_bandwidth.unwrap_or(0),
        keep_page_cache: args.buffer.keep_page_cache,
        secret: args.secret.load()?,
        tls: args.tls.server()?,
        master_tls: args.tls.client()?,
        registered: None,
    };
    say(format_args!("thaw worker listening on {}", config.advertise.clone().unwrap_or(addr.to_string())));
    if let Some(m) = &metrics {
        say(format_args!("thaw worker metrics listening on {}", m.local_addr()?));
    }
    let shutdown = stop_on_signal();
    thaw_worker::serve_with_metrics(config, listener, metrics, shutdown).await?;
    Ok(())
}

/// A URI as it is; a directory (`fs://`, `file://` or a path) made if missing and
/// named by its canonical path.
fn local_ufs(ufs: &str) -> anyhow::Result<String> {
    if let Some((scheme, _)) = ufs.split_once("://")
        && !matches!(scheme, "fs" | "file")
    {
        return Ok(ufs.to_string());
    }
    let dir = ufs.strip_prefix("fs://").or_else(|| ufs.strip_prefix("file://")).unwrap_or(ufs);
    std::fs::create_dir_all(dir).with_context(|| format!("under-store directory {dir}"))?;
    Ok(std::fs::canonicalize(dir)?.display().to_string())
}

/// A master and its workers running in this process.
pub struct LocalCluster {
    /// The master's address, or the group's (`a,b,c`): what clients use.
    pub master_addr: String,
    /// Where each part serves its metrics ("master", "worker 1", ...), if asked.
    pub metrics_addrs: Vec<(String, SocketAddr)>,
    /// Where the master serves the web dashboard, if asked.
    pub web_addr: Option<SocketAddr>,
    pub mem_root: PathBuf,
    /// The under-store's URI (a local one as its canonical directory).
    pub ufs: String,
    /// Directories of dead clusters removed at start.
    pub swept: Vec<PathBuf>,
    shutdown: CancellationToken,
    tasks: tokio::task::JoinSet<thaw_common::Result<()>>,
    /// Its MEM root and, unless kept (--state-dir), its state: removed when it
    /// stops (dropped), by the next cluster if it is killed.
    _owned: Vec<crate::local_dirs::Owned>,
}

impl LocalCluster {
    pub async fn start(args: &LocalArgs, shutdown: CancellationToken) -> anyhow::Result<Self> {
        if args.workers == 0 {
            anyhow::bail!("--workers must be at least 1");
        }
        if let Some((i, _)) = args.worker_device_model.iter().find(|(i, _)| *i == 0 || *i > args.workers) {
            anyhow::bail!(
                "--worker-device-model {i}: there are {} worker(s), numbered 1 to {} as `thaw status` shows them",
                args.workers,
                args.workers
            );
        }
        // What clusters killed before they could clean up left behind goes first.
        let temp = std::env::temp_dir();
        let mut swept = crate::local_dirs::sweep(&args.mem_root);
        swept.extend(crate::local_dirs::sweep(&temp));
        let mut owned = vec![crate::local_dirs::claim(&args.mem_root, args.port)?];
        let mem_root = owned[0].dir.clone();
        // A state directory named is kept across runs; else each run starts empty.
        let state = match &args.state_dir {
            Some(dir) => dir.clone(),
            None => {
                owned.push(crate::local_dirs::claim(&temp, args.port)?);
                owned[1].dir.clone()
            }
        };
        std::fs::create_dir_all(&state).with_context(|| format!("state directory {}", state.display()))?;
        let state = std::fs::canonicalize(&state)?;
        let ufs = local_ufs(&args.ufs)?;
        if args.masters == 0 {
            anyhow::bail!("--masters must be at least 1");
        }
        let mut master_listeners = vec![listen(&args.bind, args.port).await?];
        for _ in 1..args.masters {
            master_listeners.push(listen(&args.bind, 0).await?);
        }
        let peers: Vec<String> =
            master_listeners.iter().map(|l| l.local_addr().map(|a| a.to_string())).collect::<Result<_, _>>()?;
        let master_addr = peers.join(",");
        let secret = args.secret.load()?;
        let mut config = master_config(
            ufs.clone(),
            state.join("journal"),
            args.block_size,
            &args.timing,
            &args.planner,
            &args.recompute,
            &args.affinity,
        );
        config.secret = secret.clone();
        // Its workers reach its master over TLS when the master serves it.
        let tls = args.tls.server()?;
        let master_tls = if tls.is_some() { args.tls.client()? } else { None };
        anyhow::ensure!(
            tls.is_none() || master_tls.is_some(),
            "--tls-cert needs --tls-ca on a local cluster: its workers connect to its master"
        );
        config.tls = tls.clone();
        config.tls_ca = args.tls.tls_ca.clone();
        // Every listener is bound before anything starts: a taken port fails the start.
        let mut metrics = Vec::new();
        for i in 0..=args.workers {
            // The master on the port, worker I on port + I (0: any free).
            let port = match args.metrics_port {
                None | Some(0) => args.metrics_port,
                Some(p) => Some(u16::try_from(i).ok().and_then(|i| p.checked_add(i)).with_context(|| {
                    format!("--metrics-port {p}: {} worker(s) need ports past 65535", args.workers)
                })?),
            };
            metrics.push(listen_metrics(&args.bind, port).await?);
        }
        let mut metrics_addrs = Vec::new();
        for (i, m) in metrics.iter().enumerate() {
            if let Some(m) = m {
                let who = if i == 0 { "master".to_string() } else { format!("worker {i}") };
                metrics_addrs.push((who, m.local_addr()?));
            }
        }
        let web = listen_optional(&args.bind, args.web_port, "--web-port").await?;
        let web_addr = web.as_ref().map(|w| w.local_addr()).transpose()?;
        let mut metrics = metrics.into_iter();
        let mut tasks = tokio::task::JoinSet::new();
        let mut http = Some(thaw_master::HttpListeners { metrics: metrics.next().flatten(), web });
        let group = args.masters > 1;
        for (i, listener) in master_listeners.into_iter().enumerate() {
            let mut config = config.clone();
            if group {
                config.journal_dir = state.join(format!("journal-{}", i + 1));
                config.group = Some(thaw_master::ha::GroupConfig::new(i as u64 + 1, peers.clone())?);
            }
            // The first master serves the dashboard and metrics (in a group:
            // while it leads).
            let http = http.take().unwrap_or_default();
            if !group {
                tasks.spawn(thaw_master::serve_with_http(config, listener, http, shutdown.clone()));
                continue;
            }
            // Each master of a group on threads of its own, as if in its own
            // process: a leader's commit blocks its caller's thread until
            // the followers answer, and they must not need that thread.
            let (done, result) = tokio::sync::oneshot::channel();
            let (shutdown, listener) = (shutdown.clone(), listener.into_std()?);
            std::thread::Builder::new().name(format!("thaw-master-{}", i + 1)).spawn(move || {
                let r = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(thaw_common::ThawError::from)
                    .and_then(|rt| {
                        rt.block_on(async move {
                            let listener = tokio::net::TcpListener::from_std(listener)?;
                            thaw_master::serve_with_http(config, listener, http, shutdown).await
                        })
                    });
                let _ = done.send(r);
            })?;
            tasks.spawn(async move {
                result.await.unwrap_or_else(|_| Err(thaw_common::ThawError::internal("a master's thread died")))
            });
        }
        let host = thaw_common::hostname();
        // Worker I (from 1) is the master's worker I, as `thaw status`, the
        // dashboard and --worker-device-model number it: each starts once
        // the one before it has registered (ids go by registration).
        let (registered, mut ids) = tokio::sync::mpsc::unbounded_channel();
        for i in 1..=args.workers {
            let listener = listen(&args.bind, 0).await?;
            let config = WorkerConfig {
                master: master_addr.clone(),
                host: host.clone(),
                rack: DEFAULT_RACK.into(),
                mem: Some(TierConfig { dir: mem_root.join(format!("worker-{i}")), capacity: args.mem_capacity }),
                disk: Some(TierConfig { dir: state.join(format!("worker-{i}/disk")), capacity: args.disk_capacity }),
                advertise: None,
                remove_mem_on_exit: true,
                max_connections: thaw_worker::DEFAULT_MAX_CONNECTIONS,
                max_connections_per_user: thaw_worker::DEFAULT_MAX_CONNECTIONS / 2,
                stall_timeout: thaw_worker::data::DEFAULT_STALL_TIMEOUT,
                migration: args.buffer.config(),
                replacement: args.buffer.replacement,
                cache_window: args.buffer.cache_window,
                // The last model given for this worker, else the one of all workers.
                device_models: args
                    .worker_device_model
                    .iter()
                    .rev()
                    .find(|(w, _)| *w == i)
                    .map(|(_, m)| m.clone())
                    .or_else(|| args.device_model.clone())
                    .unwrap_or_default(),
                checkpoint_bandwidth: args.checkpoint.checkpoint_bandwidth.unwrap_or(0),
                keep_page_cache: args.buffer.keep_page_cache,
                secret: secret.clone(),
                tls: tls.clone(),
                master_tls: master_tls.clone(),
                registered: Some(registered.clone()),
            };
            tasks.spawn(thaw_worker::serve_with_metrics(config, listener, metrics.next().flatten(), shutdown.clone()));
            let id = tokio::select! {
                id = ids.recv() => id,
                Some(ended) = tasks.join_next() => {
                    shutdown.cancel();
                    let why = match ended {
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(())) => "it stopped".to_string(),
                        Err(e) => e.to_string(),
                    };
                    anyhow::bail!("the local cluster did not start: {why}");
                }
                _ = tokio::time::sleep(Duration::from_secs(60)) => None,
            };
            match id {
                Some(id) if id == i as u64 => {}
                Some(id) => eprintln!("thaw local: worker {i} registered with the master as worker {id}"),
                None => {
                    shutdown.cancel();
                    anyhow::bail!("worker {i} did not register with the master within 60 s");
                }
            }
        }
        Ok(LocalCluster { master_addr, metrics_addrs, web_addr, mem_root, ufs, swept, shutdown, tasks, _owned: owned })
    }

    /// Waits until the cluster stops (shutdown, or one part failing, which stops
    /// the rest), then removes the tmpfs files.
    pub async fn wait(mut self) -> anyhow::Result<()> {
        let mut first_error = None;
        while let Some(r) = self.tasks.join_next().await {
            self.shutdown.cancel();
            match r {
                Ok(Err(e)) if first_error.is_none() => first_error = Some(anyhow::Error::from(e)),
                Err(e) if first_error.is_none() => first_error = Some(e.into()),
                _ => {}
            }
        }
        let _ = std::fs::remove_dir_all(&self.mem_root);
        first_error.map_or(Ok(()), Err)
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.wait().await
    }
}

pub async fn run_local(args: LocalArgs) -> anyhow::Result<()> {
    let shutdown = stop_on_signal();
    if args.exit_with_stdin {
        // A plain thread: a blocked read must not hold up the runtime's shutdown.
        let token = shutdown.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            token.cancel();
        });
    }
    let cluster = LocalCluster::start(&args, shutdown).await?;
    for dir in &cluster.swept {
        eprintln!("thaw local: removed {}, left by a cluster that was killed", dir.display());
    }
    say(format_args!(
        "thaw local: master at {}; {} worker(s), MEM {} each under {}, under-store {}\n  export THAW_MASTER={}   # then: thaw fs ls /   (Ctrl-C stops the cluster)",
        cluster.master_addr,
        args.workers,
        format_size(args.mem_capacity),
        cluster.mem_root.display(),
        cluster.ufs,
        cluster.master_addr
    ));
    for (who, addr) in &cluster.metrics_addrs {
        say(format_args!("thaw local: {who} metrics listening on {addr}"));
    }
    if let Some(addr) = cluster.web_addr {
        say(format_args!("thaw local: dashboard at http://{addr}/"));
    }
    let result = cluster.wait().await;
    if let Some(dir) = &args.remove_on_exit {
        let _ = std::fs::remove_dir_all(dir);
    }
    result?;
    eprintln!("thaw local: stopped");
    Ok(())
}

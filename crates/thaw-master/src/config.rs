//! The master's configuration: what `thaw master` is told on its command
//! line, for the master's state, its group ([`GroupConfig`]) and
//! its workflow manager ([`RecomputeMode`], [`RecomputeExecutor`]). It names
//! the decisions' own settings (the migration policy, the checkpoint order,
//! the affinity classes) and nothing above it.

use std::time::Duration;

use thaw_common::{DEFAULT_BLOCK_SIZE, Result, ThawError};

use crate::affinity::AffinityConfig;
use crate::checkpoint_order::Order;
use crate::migration::{Policy, Priority};

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
    pub affinity: AffinityConfig,
    /// An unfinished file whose writer has not renewed its lease for this
    /// long is deleted ([`crate::leases`]).
    pub writer_lease: Duration,
    /// Start on a journal whose records do not form a tree by dropping the
    /// records that do not fit (each logged), instead of refusing to start.
    pub salvage_journal: bool,
    /// A recursive delete of more inodes than this detaches the tree in one
    /// commit and removes its records in batches of this many, in the
    /// background (`namespace::reaper`); a smaller one removes them at once.
    pub delete_batch: usize,
    /// A single master folds its journal's log into the redb store after
    /// this many changes (`crate::commits`; also after 64 MiB of log).
    pub journal_checkpoint_ops: usize,
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
    /// leads, over a replicated journal.
    pub group: Option<GroupConfig>,
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
            delete_batch: 10_000,
            journal_checkpoint_ops: crate::commits::CHECKPOINT_OPS,
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

/// When lost files are rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecomputeMode {
    /// As soon as a loss is seen (permanent files), or when asked (temporary).
    #[default]
    Proactive,
    /// Only when asked for (a reader, `thaw fs recompute`).
    Reactive,
    Off,
}

impl RecomputeMode {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "proactive" => Ok(RecomputeMode::Proactive),
            "reactive" => Ok(RecomputeMode::Reactive),
            "off" => Ok(RecomputeMode::Off),
            _ => Err(ThawError::invalid(format!("recompute mode {s:?}: proactive, reactive or off"))),
        }
    }
}

/// Who runs lineage reruns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecomputeExecutor {
    /// Processes the master starts on its own host.
    #[default]
    Local,
    /// An outside executor claims them (the Dask integration: `thaw.dask.install(..., recompute=True)`).
    External,
}

impl RecomputeExecutor {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "local" => Ok(RecomputeExecutor::Local),
            "external" | "dask" => Ok(RecomputeExecutor::External),
            _ => Err(ThawError::invalid(format!("recompute executor {s:?}: local or external"))),
        }
    }
}

/// This master's place in its group.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// 1-based: this master is `peers[id - 1]`.
    pub id: u64,
    /// Every master's gRPC address, in id order (the same list on each).
    pub peers: Vec<String>,
}

impl GroupConfig {
    pub fn new(id: u64, peers: Vec<String>) -> Result<Self> {
        if peers.len() < 2 {
            return Err(ThawError::invalid("a group of masters needs at least 2 peers (3 to survive a failure)"));
        }
        if id == 0 || id as usize > peers.len() {
            return Err(ThawError::invalid(format!("--id {id} is not a position in --peers (1 to {})", peers.len())));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = peers.iter().find(|p| !seen.insert(p.as_str())) {
            return Err(ThawError::invalid(format!("--peers names {dup} twice")));
        }
        Ok(GroupConfig { id, peers })
    }

    pub fn address(&self) -> &str {
        &self.peers[self.id as usize - 1]
    }

    pub(crate) fn address_of(&self, id: u64) -> Option<&str> {
        self.peers.get((id as usize).checked_sub(1)?).map(String::as_str)
    }
}

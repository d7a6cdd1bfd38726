//! `thaw master`: a master (or one of a group) serving until stopped, and the
//! master configuration it shares with `thaw local`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use thaw_master::MasterConfig;

use super::{AffinityArgs, MasterArgs, PlannerArgs, RecomputeArgs, Timing};
use super::{listen, listen_metrics, listen_optional, say, stop_on_signal};

/// The master's configuration from the arguments `thaw master` and `thaw
/// local` share.
pub(super) fn master_config(
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
    config.delete_batch = args.delete_batch as usize;
    config.journal_checkpoint_ops = args.journal_checkpoint_ops as usize;
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

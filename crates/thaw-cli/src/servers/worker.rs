//! `thaw worker`: a worker serving until stopped, registered with its master.

use std::time::Duration;

use anyhow::Context;
use thaw_worker::{TierConfig, WorkerConfig};

use super::WorkerArgs;
use super::{listen, listen_metrics, say, stop_on_signal};

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

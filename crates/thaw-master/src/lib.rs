//! The Thaw master: namespace (paths, immutable file ids, blocks) over the mounted
//! under-store, block locations per (worker, tier), the worker registry and
//! liveness, and the journal. See docs/architecture.md, "The parts".

pub mod affinity;
pub mod checkpoint;
pub mod cluster;
pub mod ha;
pub mod journal;
pub mod leases;
pub mod lineage;
pub mod master;
pub mod metrics;
pub mod migration;
pub mod namespace;
pub mod recompute;
pub mod service;
pub mod web;

use std::sync::Arc;

pub use master::{Master, MasterConfig};
use thaw_common::proto::master_raft_server::MasterRaftServer;
use thaw_common::proto::master_service_server::MasterServiceServer;
use thaw_common::{Result, ThawError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Largest gRPC message the master accepts (a path is at most 4 KiB; block reports
/// of big workers are the largest messages).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Opens the under-store at `uri` and asks it once (see
/// `thaw_ufs::UnderStore::check`): a master calls this before it says it
/// listens, so a wrong bucket, endpoint or key is all it prints.
pub async fn check_under_store(uri: &str) -> Result<()> {
    thaw_ufs::UnderStore::open(uri)?.check().await
}

/// Serves the master on `listener` until `shutdown` is cancelled. The liveness
/// checker runs as an owned task and stops with the server.
pub async fn serve(config: MasterConfig, listener: TcpListener, shutdown: CancellationToken) -> Result<()> {
    serve_with_metrics(config, listener, None, shutdown).await
}

/// [`serve`], and Prometheus metrics at `/metrics` on `metrics` if given.
pub async fn serve_with_metrics(
    config: MasterConfig,
    listener: TcpListener,
    metrics: Option<TcpListener>,
    shutdown: CancellationToken,
) -> Result<()> {
    serve_with_http(config, listener, HttpListeners { metrics, web: None }, shutdown).await
}

/// The master's HTTP servers beside its gRPC port, each optional.
#[derive(Debug, Default)]
pub struct HttpListeners {
    /// Prometheus metrics at `/metrics`.
    pub metrics: Option<TcpListener>,
    /// The web dashboard ([`web`]).
    pub web: Option<TcpListener>,
}

/// [`serve`], and the HTTP servers of `http`; they stop with it. With
/// `config.group` this master joins a group ([`ha`]) and serves while it
/// leads.
pub async fn serve_with_http(
    mut config: MasterConfig,
    listener: TcpListener,
    http: HttpListeners,
    shutdown: CancellationToken,
) -> Result<()> {
    if let Some(g) = &config.group {
        // The commands the master runs follow the group's leader.
        config.address = g.peers.join(",");
    } else if config.address.is_empty() {
        // The commands the master runs (recomputations) reach it here.
        let mut addr = listener.local_addr()?;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        config.address = addr.to_string();
    }
    let rpc = thaw_common::metrics::Latencies::new("method");
    let tls = config.tls.clone();
    let (serving, raft, tasks) = match config.group.clone() {
        None => {
            let master = Arc::new(Master::open(config)?);
            // A wrong bucket, endpoint or key stops the master here, saying which.
            master.check_under_store().await?;
            let tasks = spawn_background(&master, http, &rpc, &shutdown);
            (service::Serving::One(master), None, tasks)
        }
        Some(g) => {
            let group = ha::Group::start(g, config, http, rpc.clone(), shutdown.clone()).await?;
            let raft = MasterRaftServer::new(service::RaftRpc { group: group.clone() })
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            (service::Serving::Group(group), Some(raft), Vec::new())
        }
    };
    let svc = MasterServiceServer::new(service::MasterRpc { serving })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        server = server.tls_config(tls.tonic()).map_err(|e| ThawError::invalid(format!("TLS: {e}")))?;
    }
    let result = server
        .layer(metrics::TimeRpcs(rpc))
        .add_service(svc)
        .add_optional_service(raft)
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled())
        .await;
    shutdown.cancel();
    for t in tasks {
        let _ = t.await;
    }
    result.map_err(|e| ThawError::internal(format!("master server: {e}")))
}

/// The serving master's background tasks, all stopping with `stop`: the
/// liveness checker, the migration planner, the workflow manager (lineage
/// reruns), and the HTTP servers of `http`.
pub(crate) fn spawn_background(
    master: &Arc<Master>,
    http: HttpListeners,
    rpc: &thaw_common::metrics::Latencies,
    stop: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    let interval = master.config().heartbeat_interval;
    tasks.push({
        let master = master.clone();
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => {
                        master.expire_workers();
                        let copies = master.expire_writer_leases();
                        master.drop_ufs_copies(copies).await;
                    }
                }
            }
        })
    });
    // The planner: retargets pending migrations off the heartbeat path.
    tasks.push({
        let master = master.clone();
        let shutdown = stop.clone();
        let every = master.config().plan_interval.max(std::time::Duration::from_millis(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => master.plan(),
                    _ = master.plan_soon.notified() => master.plan(),
                }
            }
        })
    });
    // The workflow manager: rebuilds lost files from lineage (Tachyon, section 2.6).
    tasks.push({
        let master = master.clone();
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => master.recompute_tick().await,
                    _ = master.recompute_soon.notified() => master.recompute_tick().await,
                }
            }
        })
    });
    if let Some(l) = http.web {
        let (master, stop) = (master.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = web::serve(l, master, stop.cancelled_owned()).await {
                tracing::warn!(error = %e, "web dashboard stopped");
            }
        }));
    }
    if let Some(l) = http.metrics {
        let registry = Arc::new(metrics::registry(master, rpc));
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = thaw_common::metrics::serve(l, registry, stop.cancelled_owned()).await {
                tracing::warn!(error = %e, "metrics server stopped");
            }
        }));
    }
    tasks
}

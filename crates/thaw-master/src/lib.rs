//! The Thaw master: the namespace (paths, immutable file ids, blocks) over the
//! mounted under-store, block locations per (worker, tier), the workers and their
//! liveness, the journal, and the decisions and services built on them (jobs and
//! migration planning, writer leases, checkpoints, lineage and recomputation,
//! cache affinity, a group of masters, gRPC, the dashboard and metrics). See
//! docs/architecture.md, "The parts".
//!
//! The crate reads top-down, in floors; a module uses only its own floor's
//! neighbours and the floors below it, never one above:
//!
//! 1. Records: [`wal`], the log each commit is appended to; [`journal`], the
//!    durable record format and its redb file (with the log's recovery); and
//!    [`commits`], when a commit is waited for (group commit, checkpoints).
//! 2. State and decisions, each alone (no locks, no I/O, no RPC):
//!    [`namespace`], [`lineage`], [`leases`], [`cluster`] (membership and
//!    block locations), [`migration`] (planning), [`affinity`] (CAVA),
//!    [`checkpoint_order`] (which file is checkpointed next), [`liveness`]
//!    (which silent workers to probe, and what a probe means) and
//!    [`recompute_plan`] (which lineages rebuild the lost files, on which
//!    partitions, in what order). Their services are `master/checkpoints.rs` and
//!    `master/recompute.rs`.
//! 3. Settings: [`config`], which names the decisions' own settings.
//! 4. The master: [`master`], all state under one lock, every operation,
//!    each asking the decisions and committing to the journal.
//! 5. Serving: [`metrics`] and [`web`] read the master; [`tasks`] runs its
//!    loops and HTTP servers; [`ha`] runs a master while it leads a group;
//!    [`service`] answers gRPC for one master or a group; this file starts
//!    them ([`serve`]).

pub mod commits;
pub mod journal;
pub mod wal;

pub mod affinity;
pub mod checkpoint_order;
pub mod cluster;
pub mod leases;
pub mod lineage;
pub mod liveness;
pub mod migration;
pub mod namespace;
pub mod recompute_plan;

pub mod config;

pub mod master;

pub mod ha;
pub mod metrics;
pub mod service;
pub mod tasks;
pub mod web;

use std::sync::Arc;

/// The checkpoint order's old path, for callers outside the crate.
pub use checkpoint_order as checkpoint;
pub use config::MasterConfig;
pub use master::Master;
pub use tasks::HttpListeners;
use tasks::spawn_background;
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

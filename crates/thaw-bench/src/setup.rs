//! The cluster under test: the release `thaw` binary run as a testkit mini cluster
//! (one master, one worker on host "h0", all on loopback).

use std::path::PathBuf;

use anyhow::{Result, ensure};
use thaw_client::{Client, ClientConfig};
use thaw_common::auth::Credentials;
use thaw_common::proto::{Position, Tier};
use thaw_testkit::{Cluster, ClusterOptions};

/// The `thaw` binary: `THAW_BIN`, else the workspace's release build.
pub fn thaw_bin() -> Result<PathBuf> {
    let bin = match std::env::var_os("THAW_BIN") {
        Some(b) => PathBuf::from(b),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/thaw")),
    };
    ensure!(
        bin.is_file(),
        "no thaw binary at {}: run `cargo build --release -p thaw-cli` or set THAW_BIN",
        bin.display()
    );
    Ok(bin)
}

/// Starts one master and one worker ("h0", rack "r0") whose MEM tier (on tmpfs)
/// holds `mem_capacity` bytes, with `block_size`-byte blocks.
pub async fn one_worker(block_size: u64, mem_capacity: u64) -> Result<Cluster> {
    let mut options = ClusterOptions::workers(1);
    options.block_size = block_size;
    options.workers[0].mem_capacity = mem_capacity;
    Cluster::start(thaw_bin()?, options).await
}

/// A client placed at (`host`, `rack`) with the default read settings pinned
/// (short-circuit on, read-through cached in MEM), whatever `THAW_*` variables
/// the environment holds, so every run measures the same thing.
pub fn client(cluster: &Cluster, host: &str, rack: &str) -> Result<Client> {
    client_as(cluster, host, rack, thaw_common::auth::SUPERUSER)
}

/// [`client`], acting as `user` on a cluster with a secret (credentials
/// minted with it; none on a cluster without one, whatever the environment says).
pub fn client_as(cluster: &Cluster, host: &str, rack: &str, user: &str) -> Result<Client> {
    let mut cfg = ClientConfig::from_env(Some(cluster.master_addr().to_string()));
    cfg.position = Position { host: host.into(), rack: rack.into(), worker_address: String::new() };
    cfg.job_id = "thaw-bench".into();
    cfg.short_circuit = true;
    cfg.cache_on_read = Some(Tier::Mem);
    if let Some(certs) = &cluster.certs {
        cfg.tls = Some(std::sync::Arc::new(thaw_common::tls::ClientTls::load(&certs.ca)?));
    }
    let credentials = match &cluster.secret {
        Some(s) => Some(std::sync::Arc::new(Credentials::from_secret(s.clone(), user, Vec::new())?)),
        None => None,
    };
    Ok(Client::with_credentials(cfg, credentials)?)
}

/// A client on a host no worker is on: every byte crosses loopback TCP.
pub fn remote_client(cluster: &Cluster) -> Result<Client> {
    client(cluster, "elsewhere", "r9")
}

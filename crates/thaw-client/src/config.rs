//! Client settings, from the API or the environment.

use std::time::Duration;

use thaw_common::proto::{Position, Tier};

/// Default master address, also used by `thaw local`.
pub const DEFAULT_MASTER: &str = "127.0.0.1:19998";

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub master: String,
    /// Carried by every read and write (`THAW_JOB_ID`).
    pub job_id: String,
    /// Where this client runs (`THAW_HOST`, default the host name; `THAW_RACK`;
    /// `THAW_WORKER`, the data address of the worker it runs beside).
    pub position: Position,
    /// Map local replicas instead of streaming them through the worker.
    pub short_circuit: bool,
    /// On a read through from the under-store, keep the block in this tier
    /// (`THAW_READ_CACHE`: mem, the default; disk; or 0 for none).
    pub cache_on_read: Option<Tier>,
    /// How long a read keeps retrying when every replica of a block fails, before
    /// giving up (a dead worker's replicas vanish from the master after its
    /// heartbeat timeout).
    pub retry_for: Duration,
    /// Set in a recomputation's process (`THAW_RECOVER_LINEAGE`, by the
    /// master's executor): writes at that lineage's output paths rebuild the
    /// lost files in place.
    pub recover_lineage: u64,
    /// How long a read of a lost file with lineage waits for its rebuild
    /// (`THAW_REBUILD_WAIT`, seconds; default 600; 0: fail at once).
    pub rebuild_wait: Duration,
    /// TLS to the master and the workers, trusting this CA (`THAW_TLS_CA`;
    /// `Client::new` loads it).
    pub tls: Option<std::sync::Arc<thaw_common::tls::ClientTls>>,
}

impl ClientConfig {
    /// Settings from the environment; `master` overrides `THAW_MASTER`.
    pub fn from_env(master: Option<String>) -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        ClientConfig {
            master: master.or_else(|| var("THAW_MASTER")).unwrap_or_else(|| DEFAULT_MASTER.to_string()),
            job_id: var("THAW_JOB_ID").unwrap_or_default(),
            position: Position {
                host: var("THAW_HOST").unwrap_or_else(thaw_common::hostname),
                rack: var("THAW_RACK").unwrap_or_default(),
                worker_address: var("THAW_WORKER").unwrap_or_default(),
            },
            short_circuit: var("THAW_SHORT_CIRCUIT").is_none_or(|v| v != "0" && v != "false"),
            cache_on_read: match var("THAW_READ_CACHE").as_deref() {
                Some("0" | "false" | "none") => None,
                Some("disk" | "DISK") => Some(Tier::Disk),
                _ => Some(Tier::Mem),
            },
            retry_for: Duration::from_secs(30),
            recover_lineage: var("THAW_RECOVER_LINEAGE").and_then(|v| v.parse().ok()).unwrap_or(0),
            rebuild_wait: Duration::from_secs_f64(
                var("THAW_REBUILD_WAIT")
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .unwrap_or(600.0),
            ),
            tls: None,
        }
    }
}

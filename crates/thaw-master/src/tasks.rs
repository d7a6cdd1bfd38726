//! The serving master's companions, spawned beside its gRPC service (by
//! `serve_with_http` for a lone master, by the group for its leader): the
//! periodic loops that drive [`Master`] (liveness and the dead-worker probe,
//! the migration planner, the workflow manager) and its HTTP servers.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::master::Master;
use crate::{metrics, web};

/// A planning pass is followed by at least this many times its own length
/// without one (see the planner below).
const PLAN_PAUSES: u32 = 9;

/// The master's HTTP servers beside its gRPC port, each optional.
#[derive(Debug, Default)]
pub struct HttpListeners {
    /// Prometheus metrics at `/metrics`.
    pub metrics: Option<TcpListener>,
    /// The web dashboard ([`web`]).
    pub web: Option<TcpListener>,
}

/// The serving master's background tasks, all stopping with `stop`: the
/// liveness checker and the dead-worker probe, the migration planner, the workflow manager (lineage
/// reruns), the reaper of deleted trees, and the HTTP servers of `http`.
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
                        master.expire_writer_leases().await;
                    }
                }
            }
        })
    });
    // The dead-worker probe: silent workers whose port refuses are dead now.
    tasks.push({
        let master = master.clone();
        let shutdown = stop.clone();
        let every = (interval / 4).max(std::time::Duration::from_millis(10));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => { master.probe_silent_workers().await; }
                }
            }
        })
    });
    // The planner: retargets pending migrations off the heartbeat path. A pass
    // holds the master's lock for time linear in the pending migrations (45 ms
    // at 100,000), so the next waits PLAN_PAUSES passes' time, at least the
    // interval: planning takes at most ~1/(PLAN_PAUSES+1) of the lock, and
    // heartbeats, commits and reads get the rest.
    tasks.push({
        let master = master.clone();
        let shutdown = stop.clone();
        let every = master.config().plan_interval.max(std::time::Duration::from_millis(1));
        tokio::spawn(async move {
            let mut pause = every;
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(pause) => {}
                    _ = master.plan_soon.notified() => {}
                }
                let started = std::time::Instant::now();
                master.plan();
                pause = every.max(started.elapsed() * PLAN_PAUSES);
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
    // The reaper: removes deleted trees' records in batches (`namespace::reaper`),
    // also those a previous run left.
    tasks.push({
        let master = master.clone();
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tick.tick() => { master.reap().await; }
                    _ = master.reap_soon.notified() => { master.reap().await; }
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

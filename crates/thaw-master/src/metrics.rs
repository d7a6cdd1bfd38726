//! The master's Prometheus metrics: workers, namespace, block map, jobs and
//! migrations read from its state at each scrape, and RPC durations timed by a
//! tower layer on the gRPC server (one place for every method).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use thaw_common::metrics::{Collector, DescriptorEncoder, Labels, Latencies, Registry, Scrape, Unit, label};

use crate::master::{Master, SubmitterJobs};

/// The gRPC service whose methods are timed; other paths count as "other", so
/// a client cannot grow the label set.
const SERVICE_PREFIX: &str = "/thaw.v1.MasterService/";

struct MasterCollector(Arc<Master>);

impl fmt::Debug for MasterCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterCollector")
    }
}

fn pairs<V: Copy>(key: &'static str, names: &[&str], values: &[V]) -> Vec<(Labels, V)> {
    names.iter().zip(values).map(|(n, v)| (label(key, *n), *v)).collect()
}

impl Collector for MasterCollector {
    fn encode(&self, e: DescriptorEncoder) -> fmt::Result {
        let g = self.0.gauges();
        let mut s = Scrape(e);
        s.gauge(
            "thaw_master_workers",
            "Registered workers: live (heartbeating), dead (missed heartbeats for the worker timeout).",
            None,
            pairs("state", &["live", "dead"], &[g.workers_live, g.workers_dead]),
        )?;
        s.gauge("thaw_master_files", "Files in the namespace.", None, [(Labels::new(), g.files)])?;
        s.gauge(
            "thaw_master_inodes_being_deleted",
            "Inodes of deleted trees whose journal records the master is still removing, in batches.",
            None,
            [(Labels::new(), self.0.inodes_being_deleted() as u64)],
        )?;
        if let Some((transactions, commits)) = self.0.journal_counts() {
            s.counter(
                "thaw_master_journal_transactions",
                "Journal transactions written (each one fsync); group commit puts several commits in one.",
                None,
                [(Labels::new(), transactions)],
            )?;
            s.counter(
                "thaw_master_journal_commits",
                "Journal commits made (a mutation's ops); their ratio to transactions is the group-commit batch.",
                None,
                [(Labels::new(), commits)],
            )?;
        }
        s.gauge("thaw_master_blocks", "Blocks with a replica on some worker.", None, [(Labels::new(), g.blocks[0])])?;
        s.gauge(
            "thaw_master_tier_blocks",
            "Blocks with a replica in the tier on some worker (a block may be in both tiers).",
            None,
            pairs("tier", &["mem", "disk"], &g.blocks[1..]),
        )?;
        s.gauge(
            "thaw_master_jobs",
            "Live jobs (with a lease), by eviction mode.",
            None,
            pairs("eviction", &["explicit", "implicit"], &g.jobs),
        )?;
        let by = |f: fn(&SubmitterJobs) -> u64| -> Vec<(Labels, u64)> {
            g.submitters.iter().map(|s| (label("submitter", s.submitter.clone()), f(s))).collect()
        };
        s.gauge(
            "thaw_master_submitter_jobs",
            "Live jobs by submitter: the first two words of their origin (`spark <app id>`, `dask <client>`), at most 16 named, the rest as `other`.",
            None,
            by(|s| s.jobs as u64),
        )?;
        s.gauge(
            "thaw_master_submitter_asked",
            "Bytes live jobs asked for, by submitter.",
            Some(Unit::Bytes),
            by(|s| s.bytes),
        )?;
        s.gauge(
            "thaw_master_submitter_migrated",
            "Bytes migrated into memory for live jobs, by submitter.",
            Some(Unit::Bytes),
            by(|s| s.migrated_bytes),
        )?;
        s.gauge(
            "thaw_master_migrations",
            "Migrations at the master: pending (not bound yet), bound (sent to a worker, until it reports the end).",
            None,
            pairs("state", &["pending", "bound"], &g.migrations),
        )?;
        let caps: Vec<u64> = g.tiers.iter().map(|t| t.0).collect();
        let used: Vec<u64> = g.tiers.iter().map(|t| t.1).collect();
        s.gauge(
            "thaw_master_tier_capacity",
            "Tier capacity summed over live workers, as of their last heartbeats.",
            Some(Unit::Bytes),
            pairs("tier", &["mem", "disk"], &caps),
        )?;
        s.gauge(
            "thaw_master_tier_used",
            "Tier use summed over live workers, as of their last heartbeats.",
            Some(Unit::Bytes),
            pairs("tier", &["mem", "disk"], &used),
        )?;
        Ok(())
    }
}

/// The master's registry: its state and `rpc` (the durations [`TimeRpcs`] keeps).
pub fn registry(master: &Arc<Master>, rpc: &Latencies) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(MasterCollector(master.clone())));
    rpc.register(
        &mut r,
        "thaw_master_rpc_duration",
        "Duration of gRPC calls by method, until the response is ready (a heartbeat may be held open up to a heartbeat interval)",
    );
    r
}

/// A tower layer that times each gRPC call into a [`Latencies`] by method.
#[derive(Clone)]
pub struct TimeRpcs(pub Latencies);

impl<S> tower_layer::Layer<S> for TimeRpcs {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed { inner, latencies: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct Timed<S> {
    inner: S,
    latencies: Latencies,
}

impl<S, B> tower_service::Service<http::Request<B>> for Timed<S>
where
    S: tower_service::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.uri().path().strip_prefix(SERVICE_PREFIX).filter(|m| !m.contains('/')).unwrap_or("other");
        let method = method.to_string();
        let latencies = self.latencies.clone();
        let started = Instant::now();
        let call = self.inner.call(req);
        Box::pin(async move {
            let r = call.await;
            latencies.observe(&method, started.elapsed());
            r
        })
    }
}

//! What the migrator tells: the report that goes to the master with each
//! heartbeat, and its state for status pages and tests.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use thaw_common::proto::{JobBlockRead, SourceEstimate, WorkerMigrationReport};

use super::{Migrator, Outcome, Source, State};

/// A device's estimates (raised for a migration running past its estimate,
/// DYRS, section IV-A) and queue.
fn source_estimate(st: &State, s: Source, now: Instant) -> SourceEstimate {
    let q = st.queues.get(&s);
    // The running order: one block, or several small ones started together.
    let order: Vec<_> = st.active.values().filter(|a| a.task.source == s).collect();
    let started = order.iter().map(|a| a.started).min();
    let order_bytes: u64 = order.iter().map(|a| a.task.length).sum();
    let est = st.estimates.get(&s).map(|e| match started {
        // A small block's share of its order's age is what it measures so far.
        Some(t) => {
            let age = now.saturating_duration_since(t).as_nanos() as f64;
            let n = order.len().max(1) as f64;
            if n > 1.0 { e.raised(order_bytes / order.len() as u64, age / n) } else { e.raised(order_bytes, age) }
        }
        None => *e,
    });
    SourceEstimate {
        source: s.proto() as i32,
        ns_per_byte: est.and_then(|e| e.per_byte).unwrap_or(0.0),
        ns_per_migration: est.and_then(|e| e.per_migration).unwrap_or(0.0),
        queued: q.map(|q| q.len() as u32).unwrap_or(0),
        active: order.len() as u32,
        active_ms: started.map(|t| now.saturating_duration_since(t).as_millis() as u64).unwrap_or(0),
        queued_bytes: q.map(|q| q.values().map(|t| t.length).sum()).unwrap_or(0) + order_bytes,
    }
}

impl Migrator {
    /// What goes to the master with a heartbeat: estimates (raised for a migration
    /// running past its estimate, DYRS, section IV-A), queues, buffer, the migrations
    /// that ended, and reads of jobs with migration state.
    pub fn report(&self) -> (WorkerMigrationReport, Vec<JobBlockRead>) {
        let mut st = self.lock();
        let now = Instant::now();
        let sources = Source::ALL.iter().map(|&s| source_estimate(&st, s, now)).collect();
        let over = self.limit > 0 && st.used as f64 >= self.config.dead_job_threshold * self.limit as f64;
        let referenced_jobs = if over {
            let jobs: HashSet<&String> = st.held.values().flat_map(|h| h.refs.keys()).collect();
            let mut v: Vec<String> = jobs.into_iter().cloned().collect();
            v.sort();
            v
        } else {
            Vec::new()
        };
        let active_blocks: Vec<u64> = st.active.values().map(|a| a.task.block).collect();
        let mut migrating_blocks: Vec<u64> = st.queued.keys().copied().collect();
        migrating_blocks.extend(&active_blocks);
        let report = WorkerMigrationReport {
            sources,
            buffer_used: st.used,
            buffer_limit: self.limit,
            events: std::mem::take(&mut st.events),
            referenced_jobs,
            referenced_blocks: st.held.len() as u64,
            migrating_blocks,
            active_blocks,
        };
        let older = std::mem::take(&mut st.recent_reads[0]);
        st.recent_reads[1] = older;
        let reads = std::mem::take(&mut st.reads)
            .into_iter()
            .map(|(job_id, block_id)| JobBlockRead { job_id, block_id })
            .collect();
        (report, reads)
    }

    /// The reads the next heartbeat reports, left for it: an incremental
    /// block report tells them ahead.
    pub fn reads_to_report(&self) -> Vec<JobBlockRead> {
        let st = self.lock();
        st.reads.iter().map(|(job_id, block_id)| JobBlockRead { job_id: job_id.clone(), block_id: *block_id }).collect()
    }

    /// Gives back a report that could not be sent, to go with the next heartbeat.
    pub fn unreport(&self, report: WorkerMigrationReport, reads: Vec<JobBlockRead>) {
        let mut st = self.lock();
        let mut events = report.events;
        events.append(&mut st.events);
        st.events = events;
        st.reads.extend(reads.into_iter().map(|r| (r.job_id, r.block_id)));
    }

    /// Each device's estimates and queue as the next report would tell them,
    /// without taking anything from it (for the metrics).
    pub fn devices(&self) -> Vec<(Source, SourceEstimate)> {
        let st = self.lock();
        let now = Instant::now();
        Source::ALL.iter().map(|&s| (s, source_estimate(&st, s, now))).collect()
    }

    /// Migrations ended since the worker started, by device (`None`: a bad
    /// command's) and outcome.
    pub fn ended(&self) -> Vec<(Option<Source>, Outcome, u64)> {
        let st = self.lock();
        let mut v: Vec<_> = st.ended.iter().map(|(&(s, o), &n)| (Source::from_proto(s), o, n)).collect();
        v.sort();
        v
    }

    /// The file system's default block size (0 until registration).
    pub fn block_size(&self) -> u64 {
        self.lock().block_size
    }

    /// Held migrated blocks and the jobs referencing each (for tests and status).
    pub fn held(&self) -> BTreeMap<u64, Vec<String>> {
        let st = self.lock();
        st.held
            .iter()
            .map(|(b, h)| {
                let mut j: Vec<String> = h.refs.keys().cloned().collect();
                j.sort();
                (*b, j)
            })
            .collect()
    }

    /// Queued blocks of a device, in the order they will run.
    pub fn queue(&self, source: Source) -> Vec<u64> {
        self.lock().queues.get(&source).map(|q| q.values().map(|t| t.block).collect()).unwrap_or_default()
    }

    /// The running migration of `source` (the lowest block of its order).
    pub fn active(&self, source: Source) -> Option<u64> {
        self.lock().active.values().filter(|a| a.task.source == source).map(|a| a.task.block).min()
    }

    /// Whether `block` is being copied from `source`.
    pub fn copying(&self, source: Source, block: u64) -> bool {
        self.lock().active.get(&block).is_some_and(|a| a.task.source == source)
    }

    pub fn estimate(&self, source: Source) -> Option<f64> {
        self.lock().estimates.get(&source).and_then(|e| e.per_byte)
    }
}

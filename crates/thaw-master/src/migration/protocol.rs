//! The worker protocol of migration: a worker's heartbeat (or light ask)
//! brings its estimates, queues, finished migrations and reads; the answer
//! carries its orders (DYRS, section III-B: just enough work until the next
//! heartbeat). Also what a lost worker leaves behind, and the event log.

use std::time::Duration;

use thaw_common::proto::{JobBlockRead, MigrationEvent, MigrationSource, WorkerMigrationReport};

use super::*;

impl Migrations {
    /// Takes a worker's heartbeat report (estimates, queue, finished migrations,
    /// reads) and answers with its orders: under `dyrs`, the blocks targeted at
    /// it, just enough that no device queue drains before the next heartbeat.
    pub fn heartbeat(
        &mut self,
        cluster: &Cluster,
        worker: u64,
        report: Option<WorkerMigrationReport>,
        reads: Vec<JobBlockRead>,
        interval: Duration,
    ) -> HeartbeatOrders {
        self.beat(cluster, worker, report, reads, interval, false)
    }

    /// A light ask (an early heartbeat): the same migration report and orders,
    /// but neither the live-job list (`migrating_jobs`, whose absence must not
    /// release anything) nor dead jobs.
    pub fn ask(
        &mut self,
        cluster: &Cluster,
        worker: u64,
        report: Option<WorkerMigrationReport>,
        reads: Vec<JobBlockRead>,
        interval: Duration,
    ) -> HeartbeatOrders {
        self.beat(cluster, worker, report, reads, interval, true)
    }

    /// Whether the last planning pass targeted any migration at some worker.
    pub fn targeted(&self) -> bool {
        !self.targets.is_empty()
    }

    /// Whether an answer to `worker` now would carry work: commands waiting for
    /// it, or (dyrs) migrations targeted at it.
    pub fn has_work(&self, worker: u64) -> bool {
        self.targets.keys().any(|(w, _)| *w == worker)
            || self.workers.get(&worker).is_some_and(|l| {
                !l.out_migrations.is_empty() || !l.out_references.is_empty() || !l.out_evictions.is_empty()
            })
    }

    fn beat(
        &mut self,
        cluster: &Cluster,
        worker: u64,
        report: Option<WorkerMigrationReport>,
        reads: Vec<JobBlockRead>,
        interval: Duration,
        light: bool,
    ) -> HeartbeatOrders {
        let mut dead_jobs = Vec::new();
        self.load(worker).beats += 1;
        if let Some(r) = report {
            let load = self.load(worker);
            let beats = load.beats;
            // Commands that went out with an earlier answer and that the worker
            // neither holds nor reported ended: the answer was lost.
            let holding: std::collections::HashSet<u64> = r.migrating_blocks.iter().copied().collect();
            let ended: std::collections::HashSet<u64> = r.events.iter().map(|e| e.block_id).collect();
            let lost: Vec<u64> = load
                .sent
                .iter()
                .filter(|(b, at)| **at < beats && !holding.contains(b) && !ended.contains(b))
                .map(|(b, _)| *b)
                .collect();
            for b in &lost {
                load.sent.remove(b);
            }
            for b in &ended {
                load.sent.remove(b);
            }
            let load = self.load(worker);
            load.costs.clear();
            load.queued.clear();
            load.queued_bytes.clear();
            for s in &r.sources {
                if let Some(d) = Device::from_source(s.source) {
                    let cost = Cost { per_byte: s.ns_per_byte.max(0.0), per_migration: s.ns_per_migration.max(0.0) };
                    load.costs.insert(d, cost);
                    load.queued.insert(d, s.queued + s.active);
                    load.queued_bytes.insert(d, s.queued_bytes);
                }
            }
            // Bound since the worker made its report (still to go out): they
            // count against its queue and its room until it reports them.
            for cmd in &load.out_migrations {
                if let Some(d) = Device::from_source(cmd.source) {
                    *load.queued.entry(d).or_default() += 1;
                    *load.queued_bytes.entry(d).or_default() += cmd.length;
                }
            }
            if !light {
                dead_jobs = r.referenced_jobs.iter().filter(|j| !self.jobs.contains_key(*j)).cloned().collect();
            }
            self.load(worker).done += r.events.iter().filter(|e| e.outcome == "done").count() as u64;
            for e in &r.events {
                self.finished(cluster, worker, e.clone());
            }
            let mut kept = r;
            kept.events.clear();
            kept.referenced_jobs.clear();
            kept.migrating_blocks.clear();
            self.load(worker).report = kept;
            for b in lost {
                let here = matches!(
                    self.migrations.get(&b).map(|m| m.state),
                    Some(State::Bound { worker: w, .. }) if w == worker
                );
                if !here {
                    continue;
                }
                tracing::info!(worker, block = b, "migration command lost on the way: pending again");
                self.migrations.get_mut(&b).expect("checked").state = State::Pending { target: None };
                if self.policy == Policy::Ignem {
                    self.bind_at_random(cluster, b);
                }
            }
        }
        for read in reads {
            self.read(&read.job_id, read.block_id);
        }
        if self.policy.binds_late() {
            self.feed(cluster, worker, interval);
        }
        let mut waiting_sources: Vec<MigrationSource> =
            self.targets.keys().filter(|(w, _)| *w == worker).map(|(_, d)| d.source()).collect();
        waiting_sources.sort();
        let migrations_waiting = !waiting_sources.is_empty();
        let load = self.load(worker);
        let beats = load.beats;
        for cmd in &load.out_migrations {
            load.sent.insert(cmd.block_id, beats);
        }
        HeartbeatOrders {
            migrations: std::mem::take(&mut load.out_migrations),
            references: std::mem::take(&mut load.out_references),
            evictions: std::mem::take(&mut load.out_evictions),
            migrating_jobs: if light { Vec::new() } else { self.jobs.keys().cloned().collect() },
            dead_jobs,
            migrations_waiting,
            waiting_sources,
        }
    }

    /// A worker says a migration ended.
    fn finished(&mut self, cluster: &Cluster, worker: u64, mut e: MigrationEvent) {
        e.worker_id = worker;
        let block = e.block_id;
        if let Some(m) = self.migrations.get(&block) {
            e.jobs = m.jobs.iter().cloned().collect();
        }
        if e.outcome == "done" {
            for j in &e.jobs {
                if let Some(job) = self.jobs.get_mut(j) {
                    job.migrated.0 += 1;
                    job.migrated.1 += e.bytes;
                }
            }
        }
        // A block evicted unread (a worker without do-not-harm) ends no
        // migration: one bound there now is the block's next.
        let bound_here = e.outcome != "evicted unread"
            && matches!(
                self.migrations.get(&block).map(|m| m.state),
                Some(State::Bound { worker: w, .. }) if w == worker
            );
        if bound_here {
            if e.outcome.starts_with("failed") {
                let why = e.outcome.trim_start_matches("failed: ").to_string();
                let m = self.migrations.get_mut(&block).expect("checked");
                for j in &m.jobs {
                    if let Some(job) = self.jobs.get_mut(j) {
                        job.failure = Some(why.clone());
                    }
                }
                m.attempts += 1;
                m.failed_on.push(worker);
                m.state = State::Pending { target: None };
                if m.attempts >= MAX_ATTEMPTS {
                    let why = e.outcome.clone();
                    self.log(e);
                    self.give_up(block, Some(worker), &why);
                    return;
                }
                if self.policy == Policy::Ignem {
                    self.bind_at_random(cluster, block);
                }
            } else {
                self.migrations.remove(&block);
            }
        }
        self.log(e);
    }

    /// Reads heard ahead of the heartbeat that brings them (with the
    /// removals they caused: see `Master::block_changes_report`), marked so
    /// that `repair` does not migrate those blocks again. The rest of what a
    /// read means waits for that heartbeat, in order with its finished
    /// migrations (a migration that ended before the read counts for the job).
    pub fn note_reads(&mut self, reads: &[JobBlockRead]) {
        for r in reads {
            if let Some(jb) = self.jobs.get_mut(&r.job_id).and_then(|j| j.blocks.get_mut(&r.block_id)) {
                jb.read = true;
            }
        }
    }

    /// `job` read `block`: it no longer needs migrating for it.
    fn read(&mut self, job_id: &str, block: u64) {
        let Some(jb) = self.jobs.get_mut(job_id).and_then(|j| j.blocks.get_mut(&block)) else {
            return;
        };
        jb.read = true;
        let pending_only_for_it = self
            .migrations
            .get(&block)
            .is_some_and(|m| matches!(m.state, State::Pending { .. }) && m.jobs.len() == 1 && m.jobs.contains(job_id));
        if pending_only_for_it {
            let m = self.migrations.remove(&block).expect("checked");
            self.log(MigrationEvent {
                block_id: block,
                bytes: m.length,
                outcome: "read-first".into(),
                jobs: vec![job_id.to_string()],
                end_ms: now_ms(),
                ..Default::default()
            });
        } else if let Some(m) = self.migrations.get_mut(&block) {
            m.jobs.remove(job_id);
            if let State::Bound { worker, .. } = m.state {
                // Bound elsewhere: that worker drops the job from it (and the
                // migration, if no other job wants it).
                let cmd = EvictCommand { job_id: job_id.to_string(), blocks: vec![block] };
                self.load(worker).out_evictions.push(cmd);
            }
        }
    }

    /// Drops pending migrations no live job wants any more (their jobs left while
    /// they were bound to a worker that then died).
    pub(super) fn prune(&mut self) {
        let jobs = &self.jobs;
        self.migrations
            .retain(|_, m| !matches!(m.state, State::Pending { .. }) || m.jobs.iter().any(|j| jobs.contains_key(j)));
    }

    /// A worker died or restarted: what was bound to it goes back to pending (and
    /// elsewhere), its reports are forgotten.
    pub fn worker_lost(&mut self, cluster: &Cluster, worker: u64) {
        self.dirty = true;
        self.workers.remove(&worker);
        self.targets.retain(|(w, _), _| *w != worker);
        let back: Vec<u64> = self
            .migrations
            .iter()
            .filter(|(_, m)| matches!(m.state, State::Bound { worker: w, .. } if w == worker))
            .map(|(b, _)| *b)
            .collect();
        for b in &back {
            if let Some(m) = self.migrations.get_mut(b) {
                m.state = State::Pending { target: None };
            }
        }
        self.prune();
        let back: Vec<u64> = back.into_iter().filter(|b| self.migrations.contains_key(b)).collect();
        if !back.is_empty() {
            tracing::info!(worker, migrations = back.len(), "worker lost: its migrations return to pending");
        }
        if self.policy == Policy::Ignem {
            for b in back {
                self.bind_at_random(cluster, b);
            }
        }
    }

    pub(super) fn log(&mut self, mut e: MigrationEvent) {
        e.seq = self.next_event;
        self.next_event += 1;
        self.events.push_back(e);
        while self.events.len() > EVENT_LOG {
            self.events.pop_front();
        }
    }

    /// The newest `n` events, newest first (the dashboard's live view).
    pub fn recent_events(&self, n: usize) -> impl Iterator<Item = &MigrationEvent> {
        self.events.iter().rev().take(n)
    }

    /// Events with `seq >= since` (at most `limit`, 0 = all kept), and the next seq.
    pub fn events(&self, since: u64, limit: usize) -> (Vec<MigrationEvent>, u64) {
        let first = self.events.front().map(|e| e.seq).unwrap_or(self.next_event);
        let skip = since.saturating_sub(first) as usize;
        let it = self.events.iter().skip(skip);
        let out: Vec<MigrationEvent> =
            if limit == 0 { it.cloned().collect() } else { it.take(limit).cloned().collect() };
        let next = out.last().map(|e| e.seq + 1).unwrap_or(since.max(first).min(self.next_event));
        (out, next)
    }

    /// The migration each pending block is targeted at (for tests and status).
    pub fn target_of(&self, block: u64) -> Option<(u64, Device)> {
        match self.migrations.get(&block)?.state {
            State::Pending { target } => target,
            State::Bound { worker, device } => Some((worker, device)),
        }
    }

    /// The worker copying a block from its DISK tier right now (as of its last
    /// heartbeat).
    pub fn disk_migration_worker(&self, block: u64) -> Option<u64> {
        match self.migrations.get(&block)?.state {
            State::Bound { worker, device: Device::Disk }
                if self.workers.get(&worker).is_some_and(|l| l.report.active_blocks.contains(&block)) =>
            {
                Some(worker)
            }
            _ => None,
        }
    }

    pub fn is_bound(&self, block: u64) -> bool {
        matches!(self.migrations.get(&block).map(|m| m.state), Some(State::Bound { .. }))
    }
}

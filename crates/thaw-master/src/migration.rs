//! Jobs and the migration planner: which cold blocks go up into memory, for whom,
//! and on which worker (Ignem, section III-A, DYRS, section III-A/B and IV-A). Pure state and
//! decisions, like `cluster.rs`: the master's RPC layer feeds it requests,
//! heartbeats and time. All of it is soft state (DYRS, section III-C): a restarted
//! master starts empty, and workers that see it purge theirs.
//!
//! A block has at most one migration, shared by every job that asked for it; a
//! block already in memory only gains the job as a reference. Policies:
//! - `ignem`: a migration is bound at once to a random holder of a replica (any
//!   live worker for a block that is only in the under-store) with room for it
//!   in memory; workers order their queue by priority.
//! - `dyrs`: migrations stay pending at the master; [`Migrations::plan`] sets each
//!   one's target by Algorithm 1 (earliest estimated finish) off the heartbeat path,
//!   and a heartbeat binds to its worker only blocks targeted at it, just enough
//!   that its queue does not drain before the next heartbeat. Binding is final.
//! - `naive`: DYRS, Fig. 10's naive load balancing: pending like `dyrs`, but
//!   each block goes to the replica holder with the fewest outstanding
//!   migrations, into free queue slots, with no time estimates (`naive.rs`).
//! - `none`: jobs and leases are kept, nothing migrates (the baseline).
//!
//! Improvements on the papers, each for a reason:
//! - Estimates are a model of a block's size, not a per-block time: a fixed
//!   cost per migration and a speed per byte (see [`Cost`]), so a file's short
//!   last block, or a 3 KB file, is charged neither a whole block's time nor
//!   only its bytes' share of one; and per device (DISK tier, under-store), as a
//!   worker runs one migration per device at a time.
//! - A worker whose device runs dry while more is targeted at it asks at once
//!   (an early heartbeat) instead of idling until its next heartbeat.
//! - Early asks are light ([`Migrations::ask`]): the worker's migration report
//!   and reads go up, migration orders come back, and nothing else: no tier
//!   use or job counters (they wait for the full heartbeat), and no list of
//!   every live job, whose absence the worker must not read as "release".
//!   SWIM's workers asked ~17 times a second each, every answer carrying the
//!   whole job list.
//! - An idle worker holds a light ask open at the master until its next full
//!   heartbeat (the master's `ask`); a migrate call plans at once
//!   and answers it. The papers' slaves learn of new work at their next
//!   heartbeat: on a 1 s heartbeat that was 350-840 ms of a 2 s load of 1 GiB,
//!   now the first copy starts 4-8 ms after the call.
//! - The pending order is a choice for both policies (`fifo`, as DYRS used, or
//!   `smallest-job-first`, which Ignem showed helps, the default for both: see
//!   [`Policy::default_priority`] for why DYRS's FIFO is not), so they can be compared.
//! - Both policies bind only where the block fits: a worker's room is its free
//!   MEM plus what a migration may evict there, less what is bound to it (see
//!   [`room`]). A worker full of unpersisted or held data is never chosen while
//!   another has room; when none has, the block waits at the master and its
//!   job's progress says why, where the papers bound it to the idle-looking
//!   full worker to wait, fail and be bound again.
//! - Reads are reported by workers for jobs with migration state, so a pending
//!   migration whose block the job already read is dropped at the master too, and
//!   a job's progress counts blocks read.

mod history;
mod naive;
mod plan;
mod policy;
mod protocol;
mod room;
pub use history::{ENDED_JOBS, ENDED_KEEP, EndedJobs};
pub use naive::NAIVE_SLOTS;
pub use plan::{Cost, PLAN_WINDOW, PLAN_WINDOW_PER_WORKER};
pub use policy::{Policy, Priority};
pub use room::{Devices, Room, devices, waiting_text};

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use rand::seq::IndexedRandom;
use thaw_common::ids::{block_id, file_of_block};
use thaw_common::proto::{
    BlockReference, EvictCommand, EvictionMode, JobInfo, JobRef, JobTasks, MigrationCommand, MigrationEvent,
    MigrationSource, Tier, TierUsage, UfsSource, WorkerMigrationReport,
};
use thaw_common::{Result, ThawError, now_ms};

use crate::cluster::Cluster;

/// A worker's device a migration reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    Disk,
    Ufs,
}

impl Device {
    pub fn source(self) -> MigrationSource {
        match self {
            Device::Disk => MigrationSource::Disk,
            Device::Ufs => MigrationSource::Ufs,
        }
    }
    fn from_source(s: i32) -> Option<Device> {
        match MigrationSource::try_from(s).ok()? {
            MigrationSource::Disk => Some(Device::Disk),
            MigrationSource::Ufs => Some(Device::Ufs),
            MigrationSource::Unspecified => None,
        }
    }
}

/// Assumed migration time per byte on a device nobody has measured yet
/// (10 ns/B = 100 MB/s); replaced by the first measurement.
pub const DEFAULT_NS_PER_BYTE: f64 = 10.0;

/// A migration that failed this many times is given up (its blocks are read from
/// where they are).
pub const MAX_ATTEMPTS: u32 = 3;

/// Events kept for `MigrationEvents`.
pub const EVENT_LOG: usize = 100_000;

/// What a migrate call asks for, per block.
#[derive(Debug, Clone)]
pub struct BlockSpec {
    pub block: u64,
    pub length: u64,
    /// Where the block is in the under-store, if its file is persisted.
    pub ufs: Option<UfsSource>,
}

#[derive(Debug, Clone, Default)]
struct JobBlock {
    length: u64,
    ufs: Option<UfsSource>,
    read: bool,
    failed: bool,
}

#[derive(Debug, Clone)]
struct Job {
    submitted_ms: u64,
    /// Order of first submission, the last tie-breaker.
    order: u64,
    implicit: bool,
    lease: Duration,
    lease_until: Instant,
    blocks: BTreeMap<u64, JobBlock>,
    bytes: u64,
    /// Why its latest failed migration failed (shown with its progress).
    failure: Option<String>,
    /// Who submitted it (free text from its migrate calls; empty: nobody said).
    /// Like the rest of the job, soft state: a restarted master forgets it.
    origin: String,
    /// Its submitter's latest record of the job's tasks, if any (soft state too:
    /// the submitter reports again after a restart).
    tasks: Option<JobTasks>,
    /// Migrations into memory done for it: blocks, bytes.
    migrated: (u64, u64),
    /// Every block it asked for, and their bytes, including those it released
    /// since (what it ended having had).
    asked: (u64, u64),
}

impl Job {
    fn job_ref(&self, id: &str) -> JobRef {
        JobRef {
            job_id: id.to_string(),
            implicit: self.implicit,
            job_bytes: self.bytes,
            submitted_ms: self.submitted_ms,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// At the master; `target` is the planner's latest choice.
    Pending { target: Option<(u64, Device)> },
    /// Bound (final) to a worker's device queue.
    Bound { worker: u64, device: Device },
}

#[derive(Debug, Clone)]
struct Migration {
    length: u64,
    ufs: Option<UfsSource>,
    jobs: BTreeSet<String>,
    /// Creation order (FIFO).
    seq: u64,
    state: State,
    attempts: u32,
    /// Workers where it failed: not tried again while others can take it.
    failed_on: Vec<u64>,
    /// At the last look, it had sources but no worker had room for it: it
    /// waits at the master (see [`room`]).
    no_room: bool,
}

/// What the master knows of a worker's executor, from its last heartbeat.
#[derive(Debug, Clone, Default)]
pub struct WorkerLoad {
    pub costs: HashMap<Device, Cost>,
    pub queued_bytes: HashMap<Device, u64>,
    pub queued: HashMap<Device, u32>,
    pub report: WorkerMigrationReport,
    /// Heartbeats seen from this worker.
    beats: u64,
    /// Migrations it finished since the master learned of it.
    pub done: u64,
    /// Migrations sent to it, with the heartbeat whose answer carried them.
    sent: HashMap<u64, u64>,
    /// Commands for the next heartbeat answer.
    out_migrations: Vec<MigrationCommand>,
    out_references: Vec<BlockReference>,
    out_evictions: Vec<EvictCommand>,
}

/// What a heartbeat answer carries for migration.
#[derive(Debug, Default)]
pub struct HeartbeatOrders {
    pub migrations: Vec<MigrationCommand>,
    pub references: Vec<BlockReference>,
    pub evictions: Vec<EvictCommand>,
    pub migrating_jobs: Vec<String>,
    pub dead_jobs: Vec<String>,
    /// More migrations are targeted at this worker than were bound now.
    pub migrations_waiting: bool,
    /// The devices they are targeted at.
    pub waiting_sources: Vec<MigrationSource>,
}

pub struct Migrations {
    pub policy: Policy,
    pub priority: Priority,
    pub default_lease: Duration,
    jobs: BTreeMap<String, Job>,
    migrations: HashMap<u64, Migration>,
    workers: HashMap<u64, WorkerLoad>,
    /// The planner's last pass: per device, the blocks targeted at it, in order.
    targets: HashMap<(u64, Device), VecDeque<u64>>,
    events: VecDeque<MigrationEvent>,
    next_event: u64,
    next_seq: u64,
    next_job: u64,
    /// Memory copies may have been lost since the last `repair`.
    dirty: bool,
    /// Jobs that ended lately, as they stood then (for `thaw jobs`).
    pub ended: EndedJobs,
    /// Workers that had no room for a block at the last look (for the
    /// waiting jobs' progress).
    refused: BTreeSet<u64>,
    /// Per job id, live or ended lately: each worker's read counters for that
    /// id (bytes, from memory) when the job started. The workers count by id
    /// for as long as they run, and a job of an id used before must not show
    /// its predecessor's reads.
    pub read_base: HashMap<String, HashMap<u64, (u64, u64)>>,
}

impl Migrations {
    pub fn new(policy: Policy, priority: Priority, default_lease: Duration) -> Self {
        Migrations {
            policy,
            priority,
            default_lease,
            jobs: BTreeMap::new(),
            migrations: HashMap::new(),
            workers: HashMap::new(),
            targets: HashMap::new(),
            events: VecDeque::new(),
            next_event: 1,
            next_seq: 0,
            next_job: 0,
            dirty: false,
            ended: EndedJobs::default(),
            refused: BTreeSet::new(),
            read_base: HashMap::new(),
        }
    }

    /// Notes that memory copies may have gone (a worker dropped blocks, died or
    /// re-registered): the next `repair` looks for blocks to migrate again.
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Live jobs (explicit, implicit eviction) and migrations (pending at the
    /// master, bound to a worker), for the metrics.
    pub fn counts(&self) -> ([usize; 2], [usize; 2]) {
        let implicit = self.jobs.values().filter(|j| j.implicit).count();
        let pending = self.pending();
        ([self.jobs.len() - implicit, implicit], [pending, self.migrations.len() - pending])
    }

    /// Each live job's origin, the bytes it asked for and those migrated into
    /// memory for it, for the metrics by submitter.
    pub fn job_origins(&self) -> impl Iterator<Item = (&str, u64, u64)> {
        self.jobs.values().map(|j| (j.origin.as_str(), j.bytes, j.migrated.1))
    }

    pub fn pending(&self) -> usize {
        self.migrations.values().filter(|m| matches!(m.state, State::Pending { .. })).count()
    }

    pub fn worker_load(&self, worker: u64) -> Option<&WorkerLoad> {
        self.workers.get(&worker)
    }

    fn load(&mut self, worker: u64) -> &mut WorkerLoad {
        self.workers.entry(worker).or_default()
    }

    // ---- jobs ----

    /// Registers `job` (or adds to it) and starts migrating the blocks it does not
    /// have yet. Returns at once; progress is in [`Migrations::job_info`].
    pub fn migrate(
        &mut self,
        cluster: &Cluster,
        job_id: &str,
        eviction: EvictionMode,
        lease: Option<Duration>,
        blocks: Vec<BlockSpec>,
        now: Instant,
    ) -> Result<()> {
        if job_id.is_empty() {
            return Err(ThawError::invalid("migrate needs a job id"));
        }
        let lease = lease.unwrap_or(self.default_lease);
        // A new job of an ended job's id: the old one is no longer listed.
        self.ended.forget(job_id);
        if !self.jobs.contains_key(job_id) {
            let base = cluster
                .workers()
                .filter_map(|w| w.jobs.iter().find(|a| a.job_id == job_id).map(|a| (w.id, a)))
                .map(|(w, a)| (w, (a.bytes_read, a.bytes_from_memory)))
                .collect();
            self.read_base.insert(job_id.to_string(), base);
            let (jobs, ended) = (&self.jobs, &self.ended);
            self.read_base.retain(|id, _| id == job_id || jobs.contains_key(id) || ended.get(id, now).is_some());
        }
        let order = self.next_job;
        let job = self.jobs.entry(job_id.to_string()).or_insert_with(|| Job {
            submitted_ms: now_ms(),
            order,
            implicit: eviction == EvictionMode::Implicit,
            lease,
            lease_until: now + lease,
            blocks: BTreeMap::new(),
            bytes: 0,
            failure: None,
            origin: String::new(),
            tasks: None,
            migrated: (0, 0),
            asked: (0, 0),
        });
        if job.order == order {
            self.next_job += 1;
        } else if eviction != EvictionMode::Unspecified {
            job.implicit = eviction == EvictionMode::Implicit;
        }
        job.lease = lease;
        job.lease_until = now + lease;
        let mut new = Vec::new();
        for b in blocks {
            if let Some(jb) = job.blocks.get_mut(&b.block) {
                // Asked again: a block given up on (or lost) gets another chance.
                let settled =
                    jb.read || self.migrations.contains_key(&b.block) || mem_holder(cluster, b.block).is_some();
                if !settled {
                    jb.failed = false;
                    jb.ufs = b.ufs.clone();
                    new.push(b);
                }
                continue;
            }
            job.blocks.insert(b.block, JobBlock { length: b.length, ufs: b.ufs.clone(), ..Default::default() });
            job.bytes += b.length;
            job.asked.0 += 1;
            job.asked.1 += b.length;
            new.push(b);
        }
        for b in new {
            self.add_block(cluster, job_id, b);
        }
        Ok(())
    }

    /// One block of a job: a reference if it is in memory, else (a share of) its
    /// migration.
    fn add_block(&mut self, cluster: &Cluster, job_id: &str, b: BlockSpec) {
        let job_ref = self.jobs[job_id].job_ref(job_id);
        if let Some(w) = mem_holder(cluster, b.block) {
            self.load(w).out_references.push(BlockReference { block_id: b.block, job: Some(job_ref) });
            return;
        }
        if let Some(m) = self.migrations.get_mut(&b.block) {
            m.jobs.insert(job_id.to_string());
            if let State::Bound { worker, .. } = m.state {
                self.load(worker).out_references.push(BlockReference { block_id: b.block, job: Some(job_ref) });
            }
            return;
        }
        if self.policy == Policy::None {
            return;
        }
        if no_copy(cluster, b.block, b.ufs.is_some()) {
            // Nothing to migrate from (a lost, never persisted block): reads will
            // say so; waiting would not help.
            if let Some(jb) = self.jobs.get_mut(job_id).and_then(|j| j.blocks.get_mut(&b.block)) {
                jb.failed = true;
            }
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let m = Migration {
            length: b.length,
            ufs: b.ufs,
            jobs: BTreeSet::from([job_id.to_string()]),
            seq,
            state: State::Pending { target: None },
            attempts: 0,
            failed_on: Vec::new(),
            no_room: false,
        };
        self.migrations.insert(b.block, m);
        if self.policy == Policy::Ignem {
            self.bind_at_random(cluster, b.block);
        }
    }

    /// Migrates again the blocks that jobs still expect but that are neither in
    /// memory nor on their way: their memory copy went with a dead or restarted
    /// worker. Run with the liveness check.
    pub fn repair(&mut self, cluster: &Cluster) {
        if self.policy == Policy::None {
            return;
        }
        if self.policy == Policy::Ignem {
            // Migrations no worker could take when they came: try again.
            self.refused.clear();
            let waiting: Vec<u64> = self
                .migrations
                .iter()
                .filter(|(_, m)| m.state == State::Pending { target: None })
                .map(|(b, _)| *b)
                .collect();
            for b in waiting {
                self.bind_at_random(cluster, b);
            }
        }
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        let mut lost = Vec::new();
        for (id, job) in &self.jobs {
            for (&b, jb) in &job.blocks {
                if !jb.read && !jb.failed && !self.migrations.contains_key(&b) && mem_holder(cluster, b).is_none() {
                    lost.push((id.clone(), BlockSpec { block: b, length: jb.length, ufs: jb.ufs.clone() }));
                }
            }
        }
        if !lost.is_empty() {
            tracing::info!(blocks = lost.len(), "blocks jobs still expect left memory: migrating them again");
        }
        for (job, spec) in lost {
            self.add_block(cluster, &job, spec);
        }
    }

    /// Ignem's binding: a random replica holder with room for the block, at
    /// once; none with room: it waits (see `repair`).
    fn bind_at_random(&mut self, cluster: &Cluster, block: u64) {
        let Some(m) = self.migrations.get(&block) else {
            return;
        };
        let now = Instant::now();
        let choice = self.devices_for(cluster, block, m, |w| self.room_left(cluster, w, now) >= m.length);
        let cands = match choice {
            Devices::Fit(c) => c,
            Devices::NoSource => {
                if no_copy(cluster, block, m.ufs.is_some()) {
                    self.give_up(block, None, "no copy of it is left to migrate from");
                }
                // Else no live worker can take it now: it waits (see `repair`).
                return;
            }
            Devices::Full(ws) => {
                self.refused.extend(ws);
                if let Some(m) = self.migrations.get_mut(&block) {
                    m.no_room = true;
                }
                return;
            }
        };
        let &(worker, device) = cands.choose(&mut rand::rng()).expect("not empty");
        self.bind(block, worker, device);
    }

    /// Binds a pending migration to a worker's device: it goes out with the
    /// worker's next heartbeat answer.
    fn bind(&mut self, block: u64, worker: u64, device: Device) {
        let Some(m) = self.migrations.get_mut(&block) else {
            return;
        };
        m.state = State::Bound { worker, device };
        m.no_room = false;
        let jobs: Vec<JobRef> = m.jobs.iter().filter_map(|j| self.jobs.get(j).map(|job| job.job_ref(j))).collect();
        let cmd = MigrationCommand {
            block_id: block,
            length: m.length,
            source: device.source() as i32,
            ufs: if device == Device::Ufs { m.ufs.clone() } else { None },
            jobs,
            seq: m.seq,
            smallest_job_first: self.priority == Priority::SmallestJobFirst,
        };
        let load = self.load(worker);
        *load.queued.entry(device).or_default() += 1;
        *load.queued_bytes.entry(device).or_default() += cmd.length;
        load.out_migrations.push(cmd);
    }

    /// Drops a migration for good; its jobs count the block as failed.
    /// Drops a migration for good (`worker`: where it failed last); its jobs
    /// count the block as failed until they ask for it again.
    fn give_up(&mut self, block: u64, worker: Option<u64>, why: &str) {
        let Some(m) = self.migrations.remove(&block) else {
            return;
        };
        tracing::warn!(block, why, "migration given up");
        for j in &m.jobs {
            if let Some(job) = self.jobs.get_mut(j) {
                job.failure = Some(why.trim_start_matches("failed: ").to_string());
                if let Some(jb) = job.blocks.get_mut(&block) {
                    jb.failed = true;
                }
            }
        }
        let now = now_ms();
        self.log(MigrationEvent {
            block_id: block,
            worker_id: worker.unwrap_or(0),
            source: if m.ufs.is_some() { MigrationSource::Ufs } else { MigrationSource::Disk } as i32,
            start_ms: now,
            end_ms: now,
            bytes: m.length,
            outcome: format!("given up: {}", why.trim_start_matches("failed: ")),
            jobs: m.jobs.iter().cloned().collect(),
            ..Default::default()
        });
    }

    /// A file was deleted (or replaced): its blocks' migrations go, and jobs
    /// that expected them count them as failed.
    pub fn drop_file(&mut self, file_id: u64) {
        let blocks: Vec<u64> = self.migrations.keys().copied().filter(|b| file_of_block(*b) == file_id).collect();
        for b in blocks {
            self.give_up(b, None, "its file was deleted");
        }
        let range = block_id(file_id, 0)..block_id(file_id + 1, 0);
        for job in self.jobs.values_mut() {
            for (_, jb) in job.blocks.range_mut(range.clone()) {
                if !jb.read {
                    jb.failed = true;
                }
            }
        }
    }

    /// Removes `job` from blocks (all of its blocks if `blocks` is `None`, and then
    /// the job itself): pending migrations nobody else wants are dropped, workers
    /// are told to release the job's references.
    pub fn evict(&mut self, job_id: &str, blocks: Option<&[u64]>, live_workers: &[u64]) -> Result<()> {
        self.evict_for(job_id, blocks, live_workers, "evicted")
    }

    /// [`Migrations::evict`], saying why a job that ends ended.
    fn evict_for(&mut self, job_id: &str, blocks: Option<&[u64]>, live_workers: &[u64], why: &str) -> Result<()> {
        // As it stood before letting go, for the ended jobs' list.
        let Some(info) = self.ended_info(job_id, why) else {
            return Err(no_job(job_id));
        };
        let job = self.jobs.get_mut(job_id).expect("checked");
        let which: Vec<u64> = match blocks {
            Some(b) => b.iter().copied().filter(|b| job.blocks.contains_key(b)).collect(),
            None => job.blocks.keys().copied().collect(),
        };
        for b in &which {
            job.blocks.remove(b);
        }
        job.bytes = job.blocks.values().map(|b| b.length).sum();
        let ended = blocks.is_none() || job.blocks.is_empty();
        if ended {
            self.jobs.remove(job_id);
            self.ended.push(info, Instant::now());
        }
        for b in &which {
            self.release(*b, job_id);
        }
        if !ended && which.is_empty() {
            return Ok(()); // none of the paths is the job's: nothing to release
        }
        let cmd = EvictCommand { job_id: job_id.to_string(), blocks: if ended { Vec::new() } else { which } };
        for w in live_workers {
            self.load(*w).out_evictions.push(cmd.clone());
        }
        Ok(())
    }

    /// `job` no longer wants `block`'s migration.
    fn release(&mut self, block: u64, job_id: &str) {
        let Some(m) = self.migrations.get_mut(&block) else {
            return;
        };
        m.jobs.remove(job_id);
        if m.jobs.is_empty() && matches!(m.state, State::Pending { .. }) {
            self.migrations.remove(&block);
        }
    }

    /// Renews leases; returns the ids the master does not know.
    pub fn renew(&mut self, ids: &[String], now: Instant) -> Vec<String> {
        let mut unknown = Vec::new();
        for id in ids {
            match self.jobs.get_mut(id) {
                Some(j) => j.lease_until = now + j.lease,
                None => unknown.push(id.clone()),
            }
        }
        unknown
    }

    /// Ends every job whose lease ran out: it counts as failed, its references go.
    pub fn expire(&mut self, now: Instant, live_workers: &[u64]) -> Vec<String> {
        let dead: Vec<String> =
            self.jobs.iter().filter(|(_, j)| j.lease_until < now).map(|(id, _)| id.clone()).collect();
        for id in &dead {
            tracing::info!(job = %id, "job lease expired: its migrations and references are dropped");
            let _ = self.evict_for(id, None, live_workers, "lease expired");
        }
        dead
    }

    /// Replaces the job's origin (an empty one leaves it as it is).
    pub fn set_origin(&mut self, job_id: &str, origin: &str) -> Result<()> {
        let job = self.jobs.get_mut(job_id).ok_or_else(|| no_job(job_id))?;
        if !origin.is_empty() {
            job.origin = origin.to_string();
        }
        Ok(())
    }

    /// Replaces the job's task counters with a submitter's report (absolute
    /// values, not deltas: a submitter reports again after a master restart).
    pub fn report_tasks(&mut self, job_id: &str, tasks: JobTasks) -> Result<()> {
        check_tasks(&tasks)?;
        if let Some(job) = self.jobs.get_mut(job_id) {
            job.tasks = Some(tasks);
        } else {
            // A submitter's last report can land after it ended the job.
            let ended = self.ended.get_mut(job_id, Instant::now()).ok_or_else(|| no_job(job_id))?;
            ended.tasks = Some(tasks);
        }
        Ok(())
    }

    pub fn is_live(&self, job_id: &str) -> bool {
        self.jobs.contains_key(job_id)
    }

    pub fn job_ids(&self) -> impl Iterator<Item = &String> {
        self.jobs.keys()
    }

    /// Where each of a job's blocks stands.
    /// Whether job `job_id` is known (running or finished, not yet forgotten).
    pub fn has_job(&self, job_id: &str) -> bool {
        self.jobs.contains_key(job_id)
    }

    pub fn job_info(&self, cluster: &Cluster, job_id: &str, now: Instant) -> Option<JobInfo> {
        let job = self.jobs.get(job_id)?;
        let mut info = JobInfo {
            job_id: job_id.to_string(),
            submitted_ms: job.submitted_ms,
            eviction: if job.implicit { EvictionMode::Implicit } else { EvictionMode::Explicit } as i32,
            lease_remaining_ms: job.lease_until.saturating_duration_since(now).as_millis() as u64,
            blocks: job.blocks.len() as u64,
            bytes: job.bytes,
            failure: job.failure.clone().unwrap_or_default(),
            origin: job.origin.clone(),
            tasks: job.tasks,
            blocks_migrated: job.migrated.0,
            bytes_migrated: job.migrated.1,
            ..Default::default()
        };
        for (b, jb) in &job.blocks {
            if jb.read {
                info.blocks_read += 1;
                info.bytes_read += jb.length;
            } else if mem_holder(cluster, *b).is_some() {
                info.blocks_in_memory += 1;
                info.bytes_in_memory += jb.length;
            } else if jb.failed {
                info.blocks_failed += 1;
            } else if matches!(self.migrations.get(b).map(|m| m.state), Some(State::Bound { .. })) {
                info.blocks_queued += 1;
            } else if self.policy == Policy::None {
                info.blocks_not_migrated += 1;
            } else {
                info.blocks_pending += 1;
                if self.migrations.get(b).is_some_and(|m| m.no_room) {
                    info.blocks_waiting_for_memory += 1;
                }
            }
        }
        if info.blocks_waiting_for_memory > 0 {
            info.waiting = self.waiting(cluster, info.blocks_waiting_for_memory);
        }
        Some(info)
    }
}

/// The error of a call about a job the master does not know.
pub fn no_job(job_id: &str) -> ThawError {
    ThawError::not_found(format!("no job {job_id:?} (never migrated, evicted, or its lease ran out)"))
}

/// Checks a task report's invariants; the error names the rule it breaks.
pub fn check_tasks(t: &JobTasks) -> Result<()> {
    let rules = [
        ("placed", t.placed, "tasks", t.tasks),
        ("done", t.done, "tasks", t.tasks),
        ("memory_local", t.memory_local, "placed", t.placed),
        ("inputs_in_memory", t.inputs_in_memory, "placed", t.placed),
        ("delay_ms_median", t.delay_ms_median, "delay_ms_p99", t.delay_ms_p99),
        ("delay_ms_p99", t.delay_ms_p99, "delay_ms_max", t.delay_ms_max),
    ];
    for (a, x, b, y) in rules {
        if x > y {
            return Err(ThawError::invalid(format!("task counters break {a} <= {b}: {a} is {x}, {b} is {y}")));
        }
    }
    Ok(())
}

/// A live worker holding the block in memory.
fn mem_holder(cluster: &Cluster, block: u64) -> Option<u64> {
    let e = cluster.block(block)?;
    e.replicas
        .iter()
        .find(|r| r.tier == Tier::Mem && cluster.worker(r.worker).is_some_and(|w| w.alive))
        .map(|r| r.worker)
}

/// Whether no copy of `block` is left anywhere: no replica on any worker, live or
/// not, and not in the under-store. Then no migration can ever happen.
fn no_copy(cluster: &Cluster, block: u64, in_ufs: bool) -> bool {
    !in_ufs && cluster.block(block).is_none_or(|e| e.replicas.is_empty())
}

#[cfg(test)]
mod room_tests;
#[cfg(test)]
mod tests;

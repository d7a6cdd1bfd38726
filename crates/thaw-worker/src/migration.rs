//! The migration executor and the migration buffer's reference lists (Ignem, section
//! III-A1/A3/A4 and III-B2, DYRS, section III-B, III-C3 and IV-A).
//!
//! - One migration at a time per device (the DISK tier, the under-store), highest
//!   priority first, never preempting the running one, never idle while a block
//!   is queued and fits in the buffer.
//! - Each finished migration updates the device's estimate (EWMAs of a fixed
//!   cost per migration and of a speed per byte: see `Estimate`); while one
//!   runs past its estimate, the estimate is raised at every heartbeat.
//! - When a device runs dry while the master holds more work for this worker,
//!   the worker asks for it at once (an early, light heartbeat: its answer
//!   carries no live-job list, so it releases nothing); an idle worker keeps
//!   such an ask open at the master, so new work arrives as soon as planned.
//! - A copy reads a fast device with the streams measured to move the most
//!   bytes per second ([`parallelism`]); still one block per device at a time,
//!   and one stream on a hard disk or a modelled device.
//! - A migrated block is held in memory while its reference list (the jobs that
//!   will read it) is not empty. References go on an explicit evict, on an
//!   implicit read, when the master says the job is dead (asked only once buffer
//!   use passes a threshold), and all at once when the master restarts.
//! - When the buffer is full, migrations wait: a referenced block is never evicted
//!   to make room (do-not-harm; `--do-not-harm off` turns the rule off for the
//!   ablation: see [`harm`]). A queued migration whose jobs have all read the
//!   block already is dropped.
//! - A block a job expects that was in memory already (a read cached it, a write
//!   left it) is held too, so the tier's replacement never evicts it; when its
//!   jobs let go it stays, as cache (only migrated blocks are evicted then).
//!
//! Improvement on the papers: the wait for room is bounded. When the buffer has
//! been full for `room_wait` with nothing freed and nothing started (its blocks
//! are held by jobs that have not read them: a job waiting for its own inputs
//! larger than the buffer, or jobs queued behind), the migrations that do not
//! fit fail, saying which jobs hold how much; the master tries another worker or
//! gives them up, and the job reads those blocks from where they are. The papers
//! let them wait, which leaves a `migrate --wait` hanging for good.
//!
//! Improvement on the papers: implicit eviction waits until the job has read the
//! whole block, or has not touched it for a short delay. Readers of columnar
//! files (Parquet footers, then column chunks) visit a block several times; the
//! papers' "as soon as the job reads the block" would evict it after the first
//! small read and send the rest of the reads back to disk.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod estimate;
mod executor;
pub mod harm;
pub(crate) mod parallelism;
mod reads;
mod refs;
mod report;
use estimate::Estimate;
pub(crate) use executor::run_device;
pub use executor::{BATCH_BLOCKS, BATCH_BYTES, BATCH_STREAMS, SMALL_BLOCK};
use refs::{add_reference, hold_cached, holders, holders_text, release};

use thaw_common::now_ms;
use thaw_common::proto::{HeartbeatResponse, JobRef, MigrationCommand, MigrationEvent, MigrationSource, UfsSource};

/// A migration that found no room in the MEM tier this many times (about 5 s:
/// the tier is full of blocks no migration can evict) is reported failed.
pub const NO_ROOM_TRIES: u32 = 25;

#[derive(Debug, Clone)]
pub struct MigrationConfig {
    /// Bytes of migrated blocks (held and in flight) the MEM tier may hold.
    /// `None`: 80% of the MEM tier.
    pub buffer_limit: Option<u64>,
    /// An implicitly evicted job lets go of a block it read partly after this long
    /// without touching it.
    pub implicit_delay: Duration,
    /// Past this share of the buffer, ask the master which referencing jobs are dead.
    pub dead_job_threshold: f64,
    /// How migrations read their device (see [`MigrationIo`]).
    pub io: MigrationIo,
    /// A migration waits this long for room in a full buffer in which nothing
    /// frees up, then fails with the reason.
    pub room_wait: Duration,
    /// Ignem's do-not-harm rule: a migrated block a job still expects is never
    /// evicted to make room for another migration. Off: the least recently
    /// used of them are ([`harm`]).
    pub do_not_harm: bool,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig {
            buffer_limit: None,
            implicit_delay: Duration::from_secs(2),
            dead_job_threshold: 0.8,
            io: MigrationIo::Idle,
            room_wait: Duration::from_secs(5),
            do_not_harm: true,
        }
    }
}

/// How a migration's copy reads its device (`--migration-io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationIo {
    /// In the background (idle) class: a modelled device only while no
    /// foreground read is open (see `Device::open_background_stream`), a real
    /// one with the copying thread in the kernel's idle class (see
    /// [`crate::ioprio`]).
    Idle,
    /// A stream like any other, as in the papers.
    Normal,
    /// Not paced by the device model at all: the copy runs at the speed of the
    /// files underneath (a few ms a block). The bound of Ignem, section IV-C4's
    /// hypothetical scheme that "can migrate and evict data instantaneously":
    /// for evaluation only, a modelled device's bandwidth is not spent on it.
    Instant,
}

impl MigrationIo {
    pub fn parse(s: &str) -> thaw_common::Result<MigrationIo> {
        match s {
            "idle" => Ok(MigrationIo::Idle),
            "normal" => Ok(MigrationIo::Normal),
            "instant" => Ok(MigrationIo::Instant),
            _ => Err(thaw_common::ThawError::invalid(format!("unknown migration I/O {s:?} (idle, normal or instant)"))),
        }
    }
}

/// A device a migration reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    Disk,
    Ufs,
}

impl Source {
    pub const ALL: [Source; 2] = [Source::Disk, Source::Ufs];

    /// Its name in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Source::Disk => "disk",
            Source::Ufs => "ufs",
        }
    }

    fn from_proto(s: i32) -> Option<Source> {
        match MigrationSource::try_from(s).ok()? {
            MigrationSource::Disk => Some(Source::Disk),
            MigrationSource::Ufs => Some(Source::Ufs),
            MigrationSource::Unspecified => None,
        }
    }

    fn proto(self) -> MigrationSource {
        match self {
            Source::Disk => MigrationSource::Disk,
            Source::Ufs => MigrationSource::Ufs,
        }
    }
}

/// Queue order: smaller first.
type Key = (u64, u64, u64, u64);

#[derive(Debug, Clone)]
pub struct Task {
    pub block: u64,
    pub length: u64,
    pub source: Source,
    pub ufs: Option<UfsSource>,
    jobs: Vec<JobRef>,
    key: Key,
    /// Jobs that read the block while it was being migrated.
    read_by: HashSet<String>,
    /// Jobs that opened its committed file by short-circuit before the end was
    /// booked: their references start idle-timed from the open.
    opened_by: HashSet<String>,
    /// Purge generation it was queued in.
    generation: u64,
    /// Times it found no room in the MEM tier.
    no_room: u32,
    /// When it first started: a failure after retries for room spans them all.
    first_try: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct Ref {
    implicit: bool,
    bytes_read: u64,
    last_read: Option<Instant>,
}

#[derive(Debug)]
struct Held {
    length: u64,
    refs: HashMap<String, Ref>,
    /// Brought in by a migration (counts in the buffer, evicted when released);
    /// else it was in memory already and stays there, as cache, when released.
    migrated: bool,
    /// When it was held (without do-not-harm, least recently used go first).
    since: Instant,
}

#[derive(Debug)]
struct Active {
    task: Task,
    started: Instant,
}

#[derive(Debug, Default)]
struct State {
    queues: HashMap<Source, BTreeMap<Key, Task>>,
    /// Where each queued block is.
    queued: HashMap<u64, (Source, Key)>,
    /// Running migrations, by block (one order per device at a time).
    active: HashMap<u64, Active>,
    estimates: HashMap<Source, Estimate>,
    /// foldhash, as the tier's block map (status tests each tier block here).
    held: foldhash::HashMap<u64, Held>,
    /// Bytes of held blocks plus running migrations.
    used: u64,
    events: Vec<MigrationEvent>,
    reads: HashSet<(String, u64)>,
    /// Every job's block reads of the last two heartbeat intervals: a migration
    /// or reference that arrives after the job read the block skips that job.
    recent_reads: [HashSet<(String, u64)>; 2],
    migrating_jobs: HashSet<String>,
    generation: u64,
    /// The devices the last answer said the master holds more migrations for.
    master_has_more: HashSet<Source>,
    /// The file system's default block size (from registration).
    block_size: u64,
    /// Per device whose queue head does not fit in the buffer: since when, and
    /// the buffer use then (any release resets the wait).
    room_wait: HashMap<Source, (Instant, u64)>,
    /// Migrations ended since the worker started, by device and [`Outcome`]
    /// (the events go to the master; these stay, for the metrics).
    ended: HashMap<(i32, Outcome), u64>,
    /// Without do-not-harm: migrated blocks evicted unread to make room, since
    /// the worker started, and those the tier has yet to delete.
    evicted_unread: u64,
    harmed: Vec<u64>,
}

/// How a migration ended, as its event's outcome says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// The block is in memory (moved, or found there).
    Done,
    Failed,
    /// No job wanted it any more (read first, evicted, released).
    Dropped,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [Outcome::Done, Outcome::Failed, Outcome::Dropped];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Failed => "failed",
            Outcome::Dropped => "dropped",
        }
    }
}

impl State {
    /// Records a migration's end: its event for the master, its count here.
    fn ended(&mut self, e: MigrationEvent) {
        let outcome = match e.outcome.as_str() {
            "done" => Outcome::Done,
            o if o.starts_with("failed") => Outcome::Failed,
            _ => Outcome::Dropped,
        };
        *self.ended.entry((e.source, outcome)).or_default() += 1;
        self.events.push(e);
    }
}

/// What the executor and the reference lists decided; the worker carries it out.
#[derive(Debug, Default, PartialEq)]
pub struct Effects {
    /// Migrated blocks no job references any more: delete them from MEM.
    pub evict: Vec<u64>,
}

pub struct Migrator {
    state: Mutex<State>,
    pub config: MigrationConfig,
    limit: u64,
    /// Wakes the device executors when work arrives or room frees up.
    pub wake: tokio::sync::Notify,
    /// Asks the master link for an early heartbeat: a device ran dry while the
    /// master holds more migrations for this worker.
    pub fetch: tokio::sync::Notify,
}

fn key(cmd: &MigrationCommand) -> Key {
    if cmd.smallest_job_first {
        let best = cmd.jobs.iter().map(|j| (j.job_bytes, j.submitted_ms)).min().unwrap_or((u64::MAX, u64::MAX));
        (best.0, best.1, cmd.seq, cmd.block_id)
    } else {
        (0, 0, cmd.seq, cmd.block_id)
    }
}

impl Migrator {
    pub fn new(config: MigrationConfig, mem_capacity: u64) -> Self {
        let limit = config.buffer_limit.unwrap_or(mem_capacity / 10 * 8).min(mem_capacity);
        Migrator {
            state: Mutex::new(State::default()),
            config,
            limit,
            wake: tokio::sync::Notify::new(),
            fetch: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file system's default block size: what a device's estimates call a
    /// large migration is measured against it.
    pub fn set_block_size(&self, block_size: u64) {
        let mut st = self.lock();
        st.block_size = block_size;
        for e in st.estimates.values_mut() {
            e.largest = e.largest.max(block_size);
        }
    }

    pub fn buffer_limit(&self) -> u64 {
        self.limit
    }

    pub fn buffer_used(&self) -> u64 {
        self.lock().used
    }

    // ---- orders from the master ----

    /// Applies a heartbeat answer's migration orders.
    /// `in_mem`: a block's length if it is in the MEM tier.
    pub fn apply(&self, resp: &HeartbeatResponse, in_mem: impl Fn(u64) -> Option<u64>) -> Effects {
        let mut fx = Effects::default();
        let mut st = self.lock();
        // A light answer (to an early ask) carries no live-job list: the last
        // full answer's stands, and nothing is released for want of it.
        let light = resp.light;
        if !light {
            st.migrating_jobs = resp.migrating_jobs.iter().cloned().collect();
        }
        // A job named in an order has migration state at the master, whatever
        // the last full answer said: a light answer can bring a job's first
        // orders, and a read of its block before the next full answer must
        // still be reported (else the master, told of the block's eviction
        // first, migrates the block again for a job that already read it).
        let named: Vec<String> = resp
            .migrations
            .iter()
            .flat_map(|c| c.jobs.iter().map(|j| &j.job_id))
            .chain(resp.references.iter().filter_map(|r| r.job.as_ref().map(|j| &j.job_id)))
            .cloned()
            .collect();
        st.migrating_jobs.extend(named);
        // Reads since the job became known: report them now.
        let known: Vec<(String, u64)> =
            st.recent_reads.iter().flatten().filter(|(j, _)| st.migrating_jobs.contains(j)).cloned().collect();
        st.reads.extend(known);
        st.master_has_more = if !resp.waiting_sources.is_empty() {
            resp.waiting_sources.iter().filter_map(|&s| Source::from_proto(s)).collect()
        } else if resp.migrations_waiting {
            Source::ALL.into_iter().collect()
        } else {
            HashSet::new()
        };
        for e in &resp.evictions {
            let blocks = (!e.blocks.is_empty()).then_some(&e.blocks[..]);
            release(&mut st, &e.job_id, blocks, &mut fx);
        }
        for cmd in &resp.migrations {
            let mut cmd = cmd.clone();
            cmd.jobs.retain(|j| !read_recently(&st, &j.job_id, cmd.block_id));
            if cmd.jobs.is_empty() {
                st.ended(event(cmd.block_id, cmd.source, cmd.length, "read-first"));
                continue;
            }
            self.enqueue(&mut st, &cmd, &in_mem);
        }
        for r in &resp.references {
            if let Some(job) = &r.job
                && !read_recently(&st, &job.job_id, r.block_id)
            {
                add_reference(&mut st, r.block_id, job);
                if let Some(length) = in_mem(r.block_id) {
                    hold_cached(&mut st, r.block_id, length, job);
                }
            }
        }
        for j in &resp.dead_jobs {
            tracing::info!(job = %j, "master reports the job dead: its references are dropped");
            release(&mut st, j, None, &mut fx);
        }
        // A job the master no longer knows (evicted or expired: an answer that
        // carried its eviction may have been lost) holds nothing here.
        let gone: HashSet<String> = if light {
            HashSet::new()
        } else {
            st.held
                .values()
                .flat_map(|h| h.refs.keys())
                .chain(st.queues.values().flat_map(|q| q.values().flat_map(|t| t.jobs.iter().map(|j| &j.job_id))))
                .filter(|j| !st.migrating_jobs.contains(*j))
                .cloned()
                .collect()
        };
        for j in gone {
            release(&mut st, &j, None, &mut fx);
        }
        drop(st);
        self.wake.notify_waiters();
        fx
    }

    fn enqueue(&self, st: &mut State, cmd: &MigrationCommand, in_mem: &impl Fn(u64) -> Option<u64>) {
        let block = cmd.block_id;
        let source = match MigrationSource::try_from(cmd.source) {
            Ok(MigrationSource::Disk) => Source::Disk,
            Ok(MigrationSource::Ufs) if cmd.ufs.is_some() => Source::Ufs,
            _ => {
                st.ended(event(block, cmd.source, cmd.length, "failed: bad migration command"));
                return;
            }
        };
        let generation = st.generation;
        if let Some(a) = st.active.values_mut().find(|a| a.task.block == block && a.task.generation != generation) {
            // A copy that started under the master before a purge: the new
            // master wants the block too, so the copy is kept for it alone
            // (else it would be dropped when it ends, after the new master
            // was told it is done).
            a.task.generation = generation;
            a.task.jobs.clear();
            a.task.read_by.clear();
            a.task.opened_by.clear();
        }
        let merged = st.queued.contains_key(&block)
            || st.active.values().any(|a| a.task.block == block)
            || st.held.contains_key(&block);
        if merged {
            for j in &cmd.jobs {
                add_reference(st, block, j);
            }
            if st.held.contains_key(&block) {
                // Migrated here before: this migration is done (the running or
                // queued one reports for itself).
                st.ended(event(block, cmd.source, 0, "done"));
            }
            return;
        }
        if in_mem(block).is_some() {
            // Already in memory (written or cached there): nothing to move, but
            // its jobs expect it, so it is held for them.
            for j in &cmd.jobs {
                hold_cached(st, block, cmd.length, j);
            }
            st.ended(event(block, cmd.source, 0, "done"));
            return;
        }
        let k = key(cmd);
        let task = Task {
            block,
            length: cmd.length,
            source,
            ufs: cmd.ufs.clone(),
            jobs: cmd.jobs.clone(),
            key: k,
            read_by: HashSet::new(),
            opened_by: HashSet::new(),
            generation: st.generation,
            no_room: 0,
            first_try: None,
        };
        st.queues.entry(source).or_default().insert(k, task);
        st.queued.insert(block, (source, k));
    }

    /// The blocks [`Migrator::next`] evicted unread to make room (do-not-harm
    /// off), for the tier to delete before the copy starts.
    pub fn take_evictions(&self) -> Effects {
        Effects { evict: std::mem::take(&mut self.lock().harmed) }
    }

    /// Migrated blocks evicted unread to make room since the worker started
    /// (always 0 with do-not-harm).
    pub fn evicted_unread(&self) -> u64 {
        self.lock().evicted_unread
    }

    /// Who holds memory here, for error messages: "jobs a (1.0 GiB), b (64.0
    /// MiB)", most first; `None` if no job does.
    pub fn holders_text(&self) -> Option<String> {
        let st = self.lock();
        (!holders(&st).is_empty()).then(|| holders_text(&st))
    }

    /// Runs `f` with the test "is this block one a job still expects here",
    /// while no reference can be added or dropped: the tier's replacement
    /// decides under it, so it never evicts a block a job was just given.
    pub fn protecting<R>(&self, f: impl FnOnce(&dyn Fn(u64) -> bool) -> R) -> R {
        let st = self.lock();
        f(&|b| st.held.contains_key(&b))
    }

    /// The queue of `source` is empty (its last block started, or it had none).
    /// If the master said it holds more work for this device, asks for it with
    /// an early, light heartbeat (once per answer), so the answer comes back
    /// while the last block copies and the device does not idle.
    ///
    /// Improvement on DYRS, section III-B, which sizes each slave's queue so it does
    /// not drain before the next heartbeat but lets it idle when it does (an
    /// estimate off by a little, a heartbeat late): here the slave "queries the
    /// master for more work" as soon as its queue is empty. Only the device the
    /// work is targeted at asks: an idle device beside a busy one asked again
    /// and again for the busy one's backlog.
    pub fn ran_dry(&self, source: Source) -> bool {
        let mut st = self.lock();
        let empty = st.queues.get(&source).is_none_or(|q| q.is_empty());
        if !(empty && st.master_has_more.remove(&source)) {
            return false;
        }
        drop(st);
        self.fetch.notify_one();
        true
    }

    /// No device has a migration queued or running: the worker may hold a
    /// light ask open at the master until work comes.
    pub fn idle(&self) -> bool {
        let st = self.lock();
        st.active.is_empty() && st.queues.values().all(|q| q.is_empty())
    }

    /// Forgets all migration state (the master restarted or forgot this worker):
    /// queued migrations go, every held block is released.
    pub fn purge(&self) -> Effects {
        let mut st = self.lock();
        st.generation += 1;
        st.queues.clear();
        st.queued.clear();
        st.events.clear();
        st.reads.clear();
        st.migrating_jobs.clear();
        let evict: Vec<u64> = st.held.iter().filter(|(_, h)| h.migrated).map(|(b, _)| *b).collect();
        let held: u64 = st.held.values().filter(|h| h.migrated).map(|h| h.length).sum();
        st.held.clear();
        st.used = st.used.saturating_sub(held);
        if !evict.is_empty() {
            tracing::info!(blocks = evict.len(), "new master: reference lists purged, migrated blocks released");
        }
        Effects { evict }
    }

    /// A block left the MEM tier for another reason (its file was deleted).
    pub fn forget(&self, block: u64) {
        let mut st = self.lock();
        if let Some(h) = st.held.remove(&block)
            && h.migrated
        {
            st.used = st.used.saturating_sub(h.length);
        }
        if let Some((s, k)) = st.queued.remove(&block)
            && let Some(q) = st.queues.get_mut(&s)
        {
            q.remove(&k);
        }
    }
}

fn read_recently(st: &State, job: &str, block: u64) -> bool {
    let key = (job.to_string(), block);
    st.recent_reads.iter().any(|r| r.contains(&key))
}

fn event(block: u64, source: i32, bytes: u64, outcome: &str) -> MigrationEvent {
    let now = now_ms();
    MigrationEvent {
        block_id: block,
        source,
        start_ms: now,
        end_ms: now,
        bytes,
        outcome: outcome.to_string(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;

//! A randomized fault campaign (issue 18, item 2): a multi-process cluster
//! under a mixed load from several clients at once, each its own [`Client`],
//! while a seeded driver kills -9 and restarts workers and the master, stops
//! either (SIGSTOP) for a while, or fills a worker's MEM or DISK tier. The
//! load runs *during* each fault, and every operation's outcome is recorded:
//! acknowledged, refused (a full tier), or failed. After each cycle it checks
//! what Thaw promises:
//! - every acknowledged durable write (cache-through, through, replicated, and
//!   async-through once persisted) reads back byte for byte;
//! - no read ever returns wrong bytes (a read may fail while a copy is gone);
//! - the namespace holds exactly what was acknowledged: no acknowledged file
//!   missing, nothing unacknowledged, nothing deleted or renamed away come
//!   back (paths of operations whose outcome a fault hid are left out, and
//!   read back and deleted if they are there);
//! - a write refused because a tier is full leaves no file;
//! - no block stays held for a job once the job is evicted or its lease ran
//!   out (some jobs are abandoned: their submitter stops renewing them).
//!
//! Seeded: each cycle's driver and each client draw from their own stream,
//! derived from the seed, the cycle and the client, so the same seed makes the
//! same choices (their timing against the servers still varies, and with it
//! which operations fail and what follows). `thaw-bench chaos` runs the long
//! campaign; a test runs a few cycles in `make test`. The parts: `load` (the
//! clients), `faults` (the driver's), `checks` (after each cycle).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use thaw_client::{Client, ClientConfig};
use thaw_common::proto::{Position, WriteType};

use crate::{Cluster, ClusterOptions};

mod checks;
mod faults;
mod load;

use checks::verify;
use faults::{choose, fault};
use load::Loader;

#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub seed: u64,
    pub cycles: usize,
    /// Workers (at least 3).
    pub workers: usize,
    /// Clients issuing operations at once, each its own [`Client`], client `k`
    /// on the host of worker `k` (at most as many as workers).
    pub clients: usize,
    /// Operations of the load in each cycle, over all clients. The load goes on
    /// while the cycle's fault lasts, so a cycle may run more.
    pub ops_per_cycle: usize,
    /// A line on stderr after each cycle.
    pub verbose: bool,
    /// Go on after a cycle whose checks found a problem (else the campaign
    /// stops there).
    pub keep_going: bool,
    /// Masters: 1, or a group (its leader is the one killed or stopped).
    pub masters: usize,
}

/// One kind of operation's outcomes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpTally {
    pub acknowledged: u64,
    /// Failed with an error (allowed: a fault may hide any operation's outcome).
    pub failed: u64,
    /// Writes refused because a tier was full (allowed; such a write must
    /// leave no file).
    pub refused_full: u64,
    /// Done on something gone, as allowed: another client's file it deleted
    /// or renamed since the cycle began, a job whose lease ran out.
    pub gone: u64,
}

/// What a campaign did and found. `wrong_reads`, `durable_lost`,
/// `namespace_mismatches`, `resurrected`, `refused_left` and `held_left` must
/// be 0.
#[derive(Debug, Default, Clone)]
pub struct ChaosReport {
    pub cycles: usize,
    pub faults: BTreeMap<&'static str, u64>,
    /// The load's operations by kind (writes by write type).
    pub ops: BTreeMap<&'static str, OpTally>,
    /// Operations each client issued.
    pub ops_per_client: Vec<u64>,
    pub ops_acknowledged: u64,
    pub writes_acknowledged: u64,
    /// Operations whose time overlapped a fault, and those of them that failed
    /// (refusals for a full tier not counted).
    pub ops_during_faults: u64,
    pub ops_failed_during_faults: u64,
    /// Operations that failed with no fault going on (allowed: a restarted
    /// worker's blocks may still be on their way back, say).
    pub ops_failed_outside_faults: u64,
    /// The first of them, with their errors.
    pub failures_outside_faults: Vec<String>,
    /// Failed and refused operations by fault, kind and error kind.
    pub failures: BTreeMap<String, u64>,
    /// Operations given up after a minute (allowed, counted: none expected).
    pub ops_timed_out: u64,
    /// Writes refused because a tier was full, by the load and the fills.
    pub writes_refused_full: u64,
    /// Files the tier fills wrote before their tier said it was full, and their
    /// bytes (each read back and deleted when the fill ends).
    pub fill_files: u64,
    pub fill_bytes: u64,
    /// Fills that ended on an error other than "full", or never saw one.
    pub fills_unclear: u64,
    pub reads_failed: u64,
    /// Of them, reads told "data lost" (no copy anywhere), and the first few.
    pub reads_data_lost: u64,
    pub data_lost_examples: Vec<String>,
    /// Files a client's read was told were lost that the checks after the
    /// cycle read back whole: the "lost" was a fault hiding them for a while.
    pub data_lost_then_read: u64,
    pub data_lost_then_read_examples: Vec<String>,
    /// Files written to memory only (must-cache, async-through not yet
    /// persisted) whose only copy died with a worker: allowed, counted.
    pub non_durable_lost: u64,
    /// Files of operations whose outcome a fault hid that were found in the
    /// namespace: read back (their bytes must be right) and deleted.
    pub leftovers_found: u64,
    pub leftovers_read: u64,
    /// Bytes read back and found right by the checks after the cycles (and the
    /// fills' read-backs).
    pub bytes_verified: u64,
    pub wrong_reads: u64,
    pub durable_lost: u64,
    pub namespace_mismatches: u64,
    /// Files that came back after an acknowledged delete.
    pub resurrected: u64,
    /// Writes refused for a full tier whose file stayed in the namespace.
    pub refused_left: u64,
    pub held_left: u64,
    /// What went wrong, for the first problems found.
    pub problems: Vec<String>,
    /// Log lines that name the problems' paths (only when there are problems).
    pub evidence: Vec<String>,
}

impl ChaosReport {
    pub fn clean(&self) -> bool {
        self.violations() == 0
    }

    /// The sum of the figures that must be 0.
    pub fn violations(&self) -> u64 {
        self.wrong_reads
            + self.durable_lost
            + self.namespace_mismatches
            + self.resurrected
            + self.refused_left
            + self.held_left
    }

    /// What the processes' logs say of the paths a problem names (kept for
    /// a run that found one: a failed CI run shows it).
    fn gather_evidence(&mut self, c: &Cluster) {
        let paths: std::collections::BTreeSet<String> = self
            .problems
            .iter()
            .filter_map(|p| p.split_whitespace().find(|w| w.starts_with("/chaos/")))
            .map(|w| w.trim_end_matches([':', ',', ';']).to_string())
            .collect();
        let Ok(dir) = std::fs::read_dir(c.root()) else { return };
        let mut logs: Vec<std::path::PathBuf> =
            dir.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "log")).collect();
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let name = log.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            for path in &paths {
                let hits: Vec<&str> = text.lines().filter(|l| l.contains(path.as_str())).collect();
                for l in hits.iter().rev().take(30).rev() {
                    self.evidence.push(format!("{name}: {l}"));
                }
            }
        }
    }

    fn problem(&mut self, what: String) {
        if self.problems.len() < 20 {
            self.problems.push(what);
        }
    }
}

/// The report, shared by the clients and the driver (never locked across an await).
type Shared<T> = Arc<Mutex<T>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A file's bytes (as a seed) and how it was written.
#[derive(Debug, Clone)]
struct Acked {
    seed: u64,
    len: usize,
    write_type: WriteType,
}

impl Acked {
    /// Whether an acknowledged write of this type survives any one process's
    /// death (async-through: once persisted, checked at verification).
    fn durable(&self) -> bool {
        matches!(self.write_type, WriteType::CacheThrough | WriteType::Through | WriteType::ReplicatedDisk)
    }

    fn bytes(&self) -> Vec<u8> {
        content(self.len, self.seed)
    }
}

/// Bytes of the campaign's files: [`bytes`] for the first 65,537 (a prime),
/// repeated. Quick to make (the campaign makes gigabytes), and still no two
/// files' bytes and no two blocks of a file (blocks and chunks are powers of
/// two long) are alike, so bytes from the wrong file or place are caught.
fn content(len: usize, seed: u64) -> Vec<u8> {
    let period = bytes(len.min(65_537), seed);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let k = period.len().min(len - out.len());
        out.extend_from_slice(&period[..k]);
    }
    out
}

/// Deterministic bytes (xorshift), as the integration tests make them.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A small seeded generator (splitmix64): no dependency, same sequence everywhere.
struct Rng(u64);

impl Rng {
    /// The stream of one party (0: the driver; k + 1: client k) in one cycle.
    fn stream(seed: u64, cycle: usize, party: u64) -> Rng {
        let mut r = Rng(seed);
        let mut r = Rng(r.next() ^ (cycle as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        let mut r = Rng(r.next() ^ (party + 1).wrapping_mul(0x8CB9_2BA7_2F3D_8DD7));
        Rng(r.next())
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Acknowledged files kept at once, over all clients (each cycle verifies all
/// of them).
const MAX_FILES: usize = 60;

/// How long one operation of the load may take before it is given up.
const OP_TIMEOUT: Duration = Duration::from_secs(60);

/// Pause of a client between operations.
const THINK_MS: u64 = 25;

/// A job's lease: abandoned jobs end when it runs out.
const JOB_LEASE: Duration = Duration::from_secs(3);

/// The campaign's workers' tiers: small, so that a fill is quick.
const MEM_CAPACITY: u64 = 64 << 20;
const DISK_CAPACITY: u64 = 96 << 20;

/// Size of each file a tier fill writes.
const FILL_FILE: usize = 8 << 20;

const WRITE_TYPES: [(WriteType, &str); 5] = [
    (WriteType::MustCache, "write must-cache"),
    (WriteType::CacheThrough, "write cache-through"),
    (WriteType::Through, "write through"),
    (WriteType::AsyncThrough, "write async-through"),
    (WriteType::ReplicatedDisk, "write replicated:2"),
];

/// Where a cycle's fault stands, as the clients see it.
const BEFORE: u8 = 0;
const DURING: u8 = 1;
const AFTER: u8 = 2;

/// What one party (a client, or the driver's fills) wrote and was told, kept
/// across cycles.
#[derive(Default)]
struct Ledger {
    /// Acknowledged files and their bytes.
    files: BTreeMap<String, Acked>,
    /// Paths an operation touched whose outcome a fault hid, and files that
    /// were not durable and lost their only copy (still in the namespace),
    /// with the bytes they would hold.
    uncertain: BTreeMap<String, Acked>,
    /// Paths of writes refused for a full tier: none may exist.
    refused: BTreeSet<String>,
    /// What was done to each path and how it ended, for a problem's report.
    history: BTreeMap<String, Vec<String>>,
    /// Paths whose delete was acknowledged, with the bytes they held: none may
    /// come back.
    deleted: BTreeMap<String, Acked>,
    /// Files a read of this cycle was told were lost (no copy anywhere), with
    /// what it was told: the checks see whether they were.
    told_lost: BTreeMap<String, String>,
}

impl Ledger {
    fn note(&mut self, path: &str, cycle: usize, what: impl std::fmt::Display) {
        self.history.entry(path.to_string()).or_default().push(format!("cycle {cycle}: {what}"));
    }
}

/// What the clients of one cycle share: where the fault stands, how many
/// operations they began, and every client's files as the cycle began (for
/// reads of another client's files).
struct Cycle {
    cycle: usize,
    clients: usize,
    phase: AtomicU8,
    /// The fault going on (once the phase is DURING).
    fault: Mutex<&'static str>,
    begun: AtomicUsize,
    others: Vec<(String, Acked)>,
}

/// A client at (host, rack) whose reads retry for `retry_for`.
fn client_at(c: &Cluster, host: &str, rack: &str, retry_for: Duration) -> Client {
    let mut cfg = ClientConfig::from_env(Some(c.master_addr().to_string()));
    cfg.position = Position { host: host.into(), rack: rack.into(), worker_address: String::new() };
    cfg.job_id = String::new();
    cfg.retry_for = retry_for;
    Client::new(cfg).expect("client config")
}

/// Runs the campaign on a fresh cluster of `bin`.
pub async fn run(bin: &std::path::Path, cfg: &ChaosConfig) -> Result<ChaosReport> {
    let mut options = ClusterOptions::workers(cfg.workers.max(3));
    options.masters = cfg.masters.max(1);
    // The master's debug lines name paths: a problem's evidence.
    options.env.push(("THAW_LOG".into(), "info,thaw_worker=debug,thaw_master=debug".into()));
    options.master_args = vec!["--writer-lease-ms".into(), "2000".into()];
    for w in &mut options.workers {
        w.mem_capacity = MEM_CAPACITY;
        w.disk_capacity = DISK_CAPACITY;
    }
    let mut c = Cluster::start(bin, options).await?;
    let clients = cfg.clients.clamp(1, c.workers());
    let report: Shared<ChaosReport> = Arc::default();
    lock(&report).ops_per_client = vec![0; clients];
    let mut loaders: Vec<Loader> = (0..clients)
        .map(|k| {
            let spec = &c.options.workers[k];
            Loader::new(k, client_at(&c, &spec.host, &spec.rack, Duration::from_secs(8)))
        })
        .collect();
    let mut fills = Ledger::default();
    let min_ops = cfg.ops_per_cycle.div_ceil(clients).max(2);
    for cycle in 0..cfg.cycles {
        let mut rng = Rng::stream(cfg.seed, cycle, 0);
        let violations = lock(&report).violations();
        let others = loaders.iter().flat_map(|l| l.ledger.files.iter().map(|(p, a)| (p.clone(), a.clone()))).collect();
        let shared = Arc::new(Cycle {
            cycle,
            clients,
            phase: AtomicU8::new(BEFORE),
            fault: Mutex::new(""),
            begun: AtomicUsize::new(0),
            others,
        });
        let tasks: Vec<_> = loaders
            .drain(..)
            .map(|l| {
                let rng = Rng::stream(cfg.seed, cycle, l.k as u64 + 1);
                tokio::spawn(l.load(rng, shared.clone(), report.clone(), min_ops))
            })
            .collect();
        // The fault lands while the load runs, once a seeded number of its
        // operations began, and the load goes on until it is over.
        let before = 1 + rng.below((min_ops * clients / 2) as u64) as usize;
        let deadline = Instant::now() + Duration::from_secs(30);
        while shared.begun.load(Ordering::Relaxed) < before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (kind, worker) = choose(&mut rng, c.workers(), clients);
        *lock(&shared.fault) = kind.name();
        shared.phase.store(DURING, Ordering::Relaxed);
        let fault_began = Instant::now();
        let faulted = fault(&mut c, &mut rng, &report, &mut fills, cycle, kind, worker).await;
        let fault_took = fault_began.elapsed();
        shared.phase.store(AFTER, Ordering::Relaxed);
        for t in tasks {
            loaders.push(t.await.context("a client of the load panicked")?);
        }
        faulted?;
        *lock(&report).faults.entry(kind.name()).or_default() += 1;
        let mut ledgers: Vec<&mut Ledger> = loaders.iter_mut().map(|l| &mut l.ledger).collect();
        ledgers.push(&mut fills);
        let checks_began = Instant::now();
        verify(&c, &mut ledgers, &report, cycle).await?;
        let mut r = lock(&report);
        r.cycles = cycle + 1;
        if cfg.verbose {
            let ops: u64 = r.ops_per_client.iter().sum();
            eprintln!(
                "cycle {cycle}: {} ({:.1} s; {} operations began before it), {} operations so far, checks {:.1} s, {}",
                kind.name(),
                fault_took.as_secs_f64(),
                before,
                ops,
                checks_began.elapsed().as_secs_f64(),
                match r.violations() - violations {
                    0 => "nothing wrong".to_string(),
                    n => format!("{n} PROBLEM(S)"),
                }
            );
        }
        if !r.clean() && !cfg.keep_going {
            break;
        }
    }
    let mut r = lock(&report).clone();
    if !r.clean() {
        r.gather_evidence(&c);
    }
    Ok(r)
}

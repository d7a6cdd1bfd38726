//! A randomized fault campaign (issue 18, item 2): a multi-process cluster
//! under a mixed load while a seeded driver kills -9 and restarts workers and
//! the master, and stops workers or the master (SIGSTOP) for a while. After
//! each cycle it
//! checks what Thaw promises:
//! - every acknowledged durable write (cache-through, through, replicated, and
//!   async-through once persisted) reads back byte for byte;
//! - no read ever returns wrong bytes (a read may fail while a copy is gone);
//! - the namespace holds exactly what was acknowledged (paths of operations
//!   whose outcome a fault hid are left out of that check);
//! - no block stays held for a job once the job is evicted.
//!
//! Seeded: the same seed makes the same operations and faults (their timing
//! against the servers still varies). `thaw-bench chaos` runs the long
//! campaign; a test runs a few cycles in `make test`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use thaw_client::{Client, WriteOptions};
use thaw_common::proto::{EvictionMode, WriteType};

use crate::{Cluster, ClusterOptions};

#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub seed: u64,
    pub cycles: usize,
    pub workers: usize,
    /// Operations of the load in each cycle.
    pub ops_per_cycle: usize,
}

/// What a campaign did and found. `wrong_reads`, `durable_lost` and
/// `held_left` must be 0.
#[derive(Debug, Default, Clone)]
pub struct ChaosReport {
    pub cycles: usize,
    pub faults: BTreeMap<&'static str, u64>,
    pub ops_acknowledged: u64,
    pub writes_acknowledged: u64,
    pub reads_failed: u64,
    /// Files written to memory only (must-cache, async-through not yet
    /// persisted) whose only copy died with a worker: allowed, counted.
    pub non_durable_lost: u64,
    pub bytes_verified: u64,
    pub wrong_reads: u64,
    pub durable_lost: u64,
    pub namespace_mismatches: u64,
    pub held_left: u64,
    /// What went wrong, for the first problems found.
    pub problems: Vec<String>,
}

impl ChaosReport {
    pub fn clean(&self) -> bool {
        self.wrong_reads == 0 && self.durable_lost == 0 && self.namespace_mismatches == 0 && self.held_left == 0
    }

    fn problem(&mut self, what: String) {
        if self.problems.len() < 20 {
            self.problems.push(what);
        }
    }
}

/// A file the campaign wrote and was told is stored.
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

/// Acknowledged files kept at once (each cycle verifies all of them).
const MAX_FILES: usize = 60;

const WRITE_TYPES: [WriteType; 5] = [
    WriteType::MustCache,
    WriteType::CacheThrough,
    WriteType::Through,
    WriteType::AsyncThrough,
    WriteType::ReplicatedDisk,
];

/// Runs the campaign on a fresh cluster of `bin`.
pub async fn run(bin: &std::path::Path, cfg: &ChaosConfig) -> Result<ChaosReport> {
    let mut options = ClusterOptions::workers(cfg.workers.max(3));
    options.master_args = vec!["--writer-lease-ms".into(), "2000".into()];
    let mut c = Cluster::start(bin, options).await?;
    let mut rng = Rng(cfg.seed);
    let mut report = ChaosReport::default();
    let mut files: BTreeMap<String, Acked> = BTreeMap::new();
    // Paths an operation touched whose outcome a fault hid, and files that
    // were not durable and lost their only copy (still in the namespace).
    let mut uncertain: BTreeSet<String> = BTreeSet::new();
    let mut next_file = 0u64;
    for cycle in 0..cfg.cycles {
        let client = c.client("h0", "r0");
        let jobs =
            load(&client, &mut rng, cfg.ops_per_cycle / 2, &mut files, &mut uncertain, &mut next_file, &mut report)
                .await;
        fault(&mut c, &mut rng, &mut report).await?;
        let client = c.client("h1", "r1");
        let more =
            load(&client, &mut rng, cfg.ops_per_cycle / 2, &mut files, &mut uncertain, &mut next_file, &mut report)
                .await;
        for job in jobs.into_iter().chain(more) {
            let _ = client.evict(&job, &[]).await;
        }
        verify(&c, &mut files, &mut uncertain, &mut report).await?;
        report.cycles = cycle + 1;
        if !report.clean() {
            break;
        }
    }
    Ok(report)
}

/// `n` operations of a mixed load; returns the jobs it started.
async fn load(
    client: &Client,
    rng: &mut Rng,
    n: usize,
    files: &mut BTreeMap<String, Acked>,
    uncertain: &mut BTreeSet<String>,
    next_file: &mut u64,
    report: &mut ChaosReport,
) -> Vec<String> {
    let mut jobs = Vec::new();
    let pick = |rng: &mut Rng, files: &BTreeMap<String, Acked>| {
        (!files.is_empty())
            .then(|| files.keys().nth(rng.below(files.len() as u64) as usize).cloned().expect("in range"))
    };
    for _ in 0..n {
        // A bounded working set (each cycle reads all of it back): past
        // MAX_FILES, writes give way to deletes.
        let mut roll = rng.below(100);
        if roll < 40 && files.len() >= MAX_FILES {
            roll = 70;
        }
        if roll < 40 || files.is_empty() {
            *next_file += 1;
            let path = format!("/chaos/d{}/f{}", *next_file % 7, *next_file);
            let acked = Acked {
                seed: rng.next(),
                len: rng.below(3 << 20) as usize,
                write_type: WRITE_TYPES[rng.below(WRITE_TYPES.len() as u64) as usize],
            };
            let replication = if acked.write_type == WriteType::ReplicatedDisk { 2 } else { 1 };
            let opts = WriteOptions { write_type: acked.write_type, replication, ..Default::default() };
            match client.write_all(&path, &bytes(acked.len, acked.seed), opts).await {
                Ok(_) => {
                    report.ops_acknowledged += 1;
                    report.writes_acknowledged += 1;
                    files.insert(path, acked);
                }
                Err(_) => {
                    uncertain.insert(path);
                }
            }
        } else if roll < 70 {
            let Some(path) = pick(rng, files) else { continue };
            let want = &files[&path];
            match client.read_all(&path).await {
                Ok(got) if got == bytes(want.len, want.seed) => report.ops_acknowledged += 1,
                Ok(got) => {
                    report.wrong_reads += 1;
                    report.problem(format!("{path}: read {} bytes that are not the {} written", got.len(), want.len));
                }
                Err(_) => report.reads_failed += 1,
            }
        } else if roll < 80 {
            let Some(path) = pick(rng, files) else { continue };
            match client.delete(&path, false).await {
                Ok(()) => {
                    report.ops_acknowledged += 1;
                    files.remove(&path);
                }
                Err(_) => {
                    files.remove(&path);
                    uncertain.insert(path);
                }
            }
        } else if roll < 90 {
            let Some(src) = pick(rng, files) else { continue };
            *next_file += 1;
            let dst = format!("/chaos/d{}/moved{}", *next_file % 7, *next_file);
            let acked = files.remove(&src).expect("picked");
            match client.rename(&src, &dst).await {
                Ok(_) => {
                    report.ops_acknowledged += 1;
                    files.insert(dst, acked);
                }
                Err(_) => {
                    uncertain.insert(src);
                    uncertain.insert(dst);
                }
            }
        } else {
            let Some(path) = pick(rng, files) else { continue };
            let job = format!("chaos-job-{}", rng.next() % 1_000_000);
            let lease = Some(Duration::from_secs(5));
            if client.migrate(&job, &[path], EvictionMode::Explicit, lease).await.is_ok() {
                report.ops_acknowledged += 1;
                jobs.push(job);
            }
        }
    }
    jobs
}

/// One fault: kill -9 and restart a worker or the master, or stop a worker
/// or the master for a second or two and let it go on.
async fn fault(c: &mut Cluster, rng: &mut Rng, report: &mut ChaosReport) -> Result<()> {
    let worker = rng.below(c.workers() as u64) as usize;
    let kind = match rng.below(13) {
        0..=4 => {
            c.kill_worker(worker);
            tokio::time::sleep(Duration::from_millis(300 + rng.below(1500))).await;
            c.restart_worker(worker).await?;
            "kill -9 and restart of a worker"
        }
        5..=7 => {
            c.kill_master();
            tokio::time::sleep(Duration::from_millis(200 + rng.below(800))).await;
            c.restart_master().await?;
            "kill -9 and restart of the master"
        }
        8..=9 => {
            let Some(pid) = c.worker_pid(worker) else { bail!("worker {worker} is not running") };
            signal(pid, libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(500 + rng.below(1500))).await;
            signal(pid, libc::SIGCONT);
            "SIGSTOP of a worker, then SIGCONT"
        }
        _ => {
            // Longer than a worker's heartbeat timeout and a writer's lease,
            // at times: the master wakes to workers it has not heard from.
            let Some(pid) = c.master_pid() else { bail!("the master is not running") };
            signal(pid, libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(500 + rng.below(2000))).await;
            signal(pid, libc::SIGCONT);
            "SIGSTOP of the master, then SIGCONT"
        }
    };
    *report.faults.entry(kind).or_default() += 1;
    Ok(())
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling a child process this cluster started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// The checks after a cycle (see the module's doc).
async fn verify(
    c: &Cluster,
    files: &mut BTreeMap<String, Acked>,
    uncertain: &mut BTreeSet<String>,
    report: &mut ChaosReport,
) -> Result<()> {
    c.wait_for_workers(c.workers(), Duration::from_secs(30)).await?;
    let client = c.remote_client();
    let mut lost = Vec::new();
    for (path, want) in files.iter() {
        let expected = bytes(want.len, want.seed);
        let durable = want.durable()
            || (want.write_type == WriteType::AsyncThrough && client.stat(path).await.is_ok_and(|i| i.persisted));
        // A durable file may need its worker's blocks reported again, or a
        // read through from the under-store: retry for a while.
        let deadline = Instant::now() + Duration::from_secs(if durable { 30 } else { 2 });
        loop {
            match client.read_all(path).await {
                Ok(got) if got == expected => {
                    report.bytes_verified += got.len() as u64;
                    break;
                }
                Ok(got) => {
                    report.wrong_reads += 1;
                    report.problem(format!("{path}: verification read {} wrong bytes", got.len()));
                    break;
                }
                Err(e) if Instant::now() >= deadline => {
                    if durable {
                        report.durable_lost += 1;
                        report.problem(format!(
                            "{path} ({:?}): acknowledged and durable, unreadable: {e}",
                            want.write_type
                        ));
                    } else {
                        // Its only copy died with a worker: no longer read.
                        lost.push(path.clone());
                    }
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    for path in lost {
        files.remove(&path);
        report.non_durable_lost += 1;
        uncertain.insert(path);
    }
    // The namespace: every acknowledged file, and nothing else but paths a
    // fault left in doubt.
    let mut listed = BTreeSet::new();
    let mut dirs = vec!["/chaos".to_string()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = client.list(&d).await else { continue };
        for e in entries {
            if e.is_dir {
                dirs.push(e.path);
            } else {
                listed.insert(e.path);
            }
        }
    }
    for path in files.keys().filter(|p| !listed.contains(*p)) {
        report.namespace_mismatches += 1;
        report.problem(format!("{path}: acknowledged, not in the namespace"));
    }
    for path in listed.iter().filter(|p| !files.contains_key(*p) && !uncertain.contains(*p)) {
        report.namespace_mismatches += 1;
        report.problem(format!("{path}: in the namespace, never acknowledged"));
    }
    // No block held for a job once every job was evicted.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let status = client.cluster_status().await?;
        let held: u64 = status.workers.iter().flat_map(|w| &w.tiers).map(|t| t.held).sum();
        if held == 0 {
            break;
        }
        if Instant::now() >= deadline {
            report.held_left += held;
            report.problem(format!("{held} bytes still held for jobs after every job was evicted"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

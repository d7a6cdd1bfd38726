//! The load: each client's mixed operations while the cycle's fault goes on,
//! and how each ended.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use thaw_client::{Client, WriteOptions};
use thaw_common::ErrorKind;
use thaw_common::proto::{EvictionMode, WriteType};

use super::{
    AFTER, Acked, BEFORE, ChaosReport, Cycle, DURING, JOB_LEASE, Ledger, MAX_FILES, OP_TIMEOUT, Rng, Shared, THINK_MS,
    WRITE_TYPES, lock,
};

/// One client of the load: its own [`Client`], files and jobs.
pub(super) struct Loader {
    pub(super) k: usize,
    client: Client,
    pub(super) ledger: Ledger,
    next_file: u64,
    /// Jobs it renews and evicts (abandoned ones are left to their lease).
    jobs: Vec<String>,
    next_job: u64,
}

/// What an operation's time overlapped when it overlapped no fault.
const NO_FAULT: &str = "no fault";

/// How one operation ended.
pub(super) enum Outcome {
    Acked,
    /// A write refused for a full tier.
    Refused(thaw_common::ThawError),
    /// An error.
    Failed(thaw_common::ThawError),
    /// What it was done on is gone, and that is allowed: another client's
    /// file it has deleted or renamed since, a job whose lease ran out.
    Gone,
    TimedOut,
    /// It read bytes that are not those written (already reported).
    Wrong,
}

/// An operation's outcome: acknowledged, failed, or given up.
pub(super) fn outcome<T>(r: Result<thaw_common::Result<T>, tokio::time::error::Elapsed>) -> Outcome {
    match r {
        Ok(Ok(_)) => Outcome::Acked,
        Ok(Err(e)) => Outcome::Failed(e),
        Err(_) => Outcome::TimedOut,
    }
}

/// How an operation ended, in a few words.
pub(super) fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Acked => "acknowledged".into(),
        Outcome::Refused(e) => format!("refused: {e}"),
        Outcome::Failed(e) => format!("failed ({}): {e}", e.kind.as_str()),
        Outcome::Gone => "gone".into(),
        Outcome::TimedOut => "no answer".into(),
        Outcome::Wrong => "wrong bytes".into(),
    }
}

impl ChaosReport {
    /// Counts one operation of client `k` and how it ended, with the fault
    /// its time overlapped (or [`NO_FAULT`]). Returns whether it failed.
    fn record(&mut self, cycle: usize, k: usize, kind: &'static str, outcome: &Outcome, fault: &str) -> bool {
        self.ops_per_client[k] += 1;
        let t = self.ops.entry(kind).or_default();
        match outcome {
            Outcome::Acked => t.acknowledged += 1,
            Outcome::Refused(_) => t.refused_full += 1,
            Outcome::Failed(_) | Outcome::TimedOut => t.failed += 1,
            Outcome::Gone => t.gone += 1,
            Outcome::Wrong => {}
        }
        match outcome {
            Outcome::Acked => {
                self.ops_acknowledged += 1;
                if kind.starts_with("write") {
                    self.writes_acknowledged += 1;
                }
            }
            Outcome::Refused(_) => self.writes_refused_full += 1,
            Outcome::TimedOut => {
                self.ops_timed_out += 1;
                self.problem(format!("cycle {cycle}: client {k}: a {kind} took over {OP_TIMEOUT:?}"));
            }
            _ => {}
        }
        if let Outcome::Failed(e) | Outcome::Refused(e) = outcome {
            *self.failures.entry(format!("{fault}: {kind}: {}", e.kind.as_str())).or_default() += 1;
        }
        let during = fault != NO_FAULT;
        if during {
            self.ops_during_faults += 1;
        }
        let failed = matches!(outcome, Outcome::Failed(_) | Outcome::TimedOut);
        if failed && during {
            self.ops_failed_during_faults += 1;
        } else if failed {
            self.ops_failed_outside_faults += 1;
            if self.failures_outside_faults.len() < 20 {
                let why = match outcome {
                    Outcome::Failed(e) => e.message.as_str(),
                    _ => "no answer",
                };
                self.failures_outside_faults.push(format!("cycle {cycle}: client {k}: {kind}: {why}"));
            }
        }
        failed
    }
}

impl Loader {
    pub(super) fn new(k: usize, client: Client) -> Self {
        Loader { k, client, ledger: Ledger::default(), next_file: 0, jobs: Vec::new(), next_job: 0 }
    }

    /// This cycle's load: at least `min_ops` operations, and on while the
    /// fault lasts, then a few more. Returns the loader for the next cycle.
    pub(super) async fn load(
        mut self,
        mut rng: Rng,
        cy: Arc<Cycle>,
        report: Shared<ChaosReport>,
        min_ops: usize,
    ) -> Self {
        let (mut done, mut after) = (0usize, 0usize);
        let post = min_ops.div_ceil(4);
        while done < min_ops * 10 {
            let phase = cy.phase.load(Ordering::Relaxed);
            if phase == AFTER && done >= min_ops && after >= post {
                break;
            }
            cy.begun.fetch_add(1, Ordering::Relaxed);
            let Some((kind, outcome)) = self.op(&mut rng, &cy, &report).await else { continue };
            let during = phase == DURING || cy.phase.load(Ordering::Relaxed) != phase;
            done += 1;
            if phase == AFTER {
                after += 1;
            }
            let fault = if during { *lock(&cy.fault) } else { NO_FAULT };
            let failed = lock(&report).record(cy.cycle, self.k, kind, &outcome, fault);
            // A client thinks a little between operations, longer after a
            // failure (a fault is going on: no need to spin against it).
            tokio::time::sleep(Duration::from_millis(if failed { 100 } else { THINK_MS })).await;
        }
        // Live jobs end explicitly (abandoned ones by their lease).
        for job in std::mem::take(&mut self.jobs) {
            let o = match tokio::time::timeout(OP_TIMEOUT, self.client.evict(&job, &[])).await {
                Ok(Err(e)) if e.kind == ErrorKind::NotFound => Outcome::Gone,
                r => outcome(r),
            };
            lock(&report).record(cy.cycle, self.k, "evict a job", &o, NO_FAULT);
        }
        self
    }

    fn pick(&self, rng: &mut Rng) -> Option<String> {
        let files = &self.ledger.files;
        (!files.is_empty())
            .then(|| files.keys().nth(rng.below(files.len() as u64) as usize).cloned().expect("in range"))
    }

    /// One operation of the mixed load: its kind and outcome (`None`: nothing
    /// to do it on).
    async fn op(&mut self, rng: &mut Rng, cy: &Cycle, report: &Mutex<ChaosReport>) -> Option<(&'static str, Outcome)> {
        let client = self.client.clone();
        let k = self.k;
        // A bounded working set (each cycle reads all of it back): past its
        // share of MAX_FILES, a client's writes give way to deletes.
        let mut roll = rng.below(100);
        let share = MAX_FILES / cy.clients;
        if roll < 35 && self.ledger.files.len() >= share {
            roll = 65;
        }
        if roll < 35 || self.ledger.files.is_empty() {
            self.next_file += 1;
            let n = self.next_file;
            let path = format!("/chaos/c{k}/d{}/f{n}", n % 5);
            let (write_type, kind) = WRITE_TYPES[rng.below(WRITE_TYPES.len() as u64) as usize];
            let acked = Acked { seed: rng.next(), len: rng.below(3 << 20) as usize, write_type };
            let replication = if write_type == WriteType::ReplicatedDisk { 2 } else { 1 };
            let opts = WriteOptions { write_type, replication, ..Default::default() };
            let data = acked.bytes();
            let outcome = match tokio::time::timeout(OP_TIMEOUT, client.write_all(&path, &data, opts)).await {
                Ok(Ok(_)) => {
                    self.ledger.files.insert(path.clone(), acked);
                    Outcome::Acked
                }
                Ok(Err(e)) if e.kind == ErrorKind::ResourceExhausted => {
                    self.ledger.refused.insert(path.clone());
                    Outcome::Refused(e)
                }
                r => {
                    self.ledger.uncertain.insert(path.clone(), acked);
                    outcome(r)
                }
            };
            let fault = *lock(&cy.fault);
            self.ledger.note(&path, cy.cycle, format_args!("{kind} ({fault}): {}", describe(&outcome)));
            Some((kind, outcome))
        } else if roll < 55 {
            let path = self.pick(rng)?;
            let want = self.ledger.files[&path].clone();
            let outcome = read(&client, &path, &want, false, report, cy).await;
            if let Outcome::Failed(e) = &outcome
                && e.kind == ErrorKind::DataLost
            {
                self.ledger.told_lost.insert(path.clone(), format!("cycle {}: {e}", cy.cycle));
            }
            Some(("read", outcome))
        } else if roll < 65 {
            // Another client's file as the cycle began: it may be gone since
            // (deleted, renamed), but a path never names other bytes.
            let mine = format!("/chaos/c{k}/");
            let others: Vec<&(String, Acked)> = cy.others.iter().filter(|(p, _)| !p.starts_with(&mine)).collect();
            let (path, want) = others.get(rng.below(others.len() as u64) as usize)?;
            Some(("read of another client's file", read(&client, path, want, true, report, cy).await))
        } else if roll < 75 {
            let path = self.pick(rng)?;
            let acked = self.ledger.files.remove(&path).expect("picked");
            let r = tokio::time::timeout(OP_TIMEOUT, client.delete(&path, false)).await;
            let outcome = self.settle(r.map(|r| r.map(|_| ())), &[&path], &acked, report, cy.cycle);
            if matches!(outcome, Outcome::Acked) {
                self.ledger.deleted.insert(path.clone(), acked);
            }
            let fault = *lock(&cy.fault);
            self.ledger.note(&path, cy.cycle, format_args!("delete ({fault}): {}", describe(&outcome)));
            Some(("delete", outcome))
        } else if roll < 85 {
            let src = self.pick(rng)?;
            self.next_file += 1;
            let n = self.next_file;
            // Into another directory, made first if it is not there.
            let dir = format!("/chaos/c{k}/d{}", n % 5);
            let dst = format!("{dir}/moved{n}");
            match outcome(tokio::time::timeout(OP_TIMEOUT, client.mkdir(&dir, true, true)).await) {
                Outcome::Acked => {}
                failed => return Some(("rename", failed)),
            }
            let acked = self.ledger.files.remove(&src).expect("picked");
            let r = tokio::time::timeout(OP_TIMEOUT, client.rename(&src, &dst)).await;
            let outcome = self.settle(r.map(|r| r.map(|_| ())), &[&src, &dst], &acked, report, cy.cycle);
            let fault = *lock(&cy.fault);
            let what = format!("rename {src} -> {dst} ({fault}): {}", describe(&outcome));
            self.ledger.note(&src, cy.cycle, &what);
            self.ledger.note(&dst, cy.cycle, &what);
            if matches!(outcome, Outcome::Acked) {
                self.ledger.deleted.insert(src, acked.clone());
                self.ledger.files.insert(dst, acked);
            }
            Some(("rename", outcome))
        } else {
            let roll = rng.below(4);
            if roll == 0 && !self.jobs.is_empty() {
                let r = tokio::time::timeout(OP_TIMEOUT, client.renew_leases(&self.jobs)).await;
                return Some(match r {
                    Ok(Ok(unknown)) => {
                        // Their lease ran out (a long fault), or the master restarted.
                        self.jobs.retain(|j| !unknown.contains(j));
                        ("renew job leases", Outcome::Acked)
                    }
                    r => ("renew job leases", outcome(r)),
                });
            }
            if roll == 1 && !self.jobs.is_empty() {
                let job = self.jobs.remove(rng.below(self.jobs.len() as u64) as usize);
                let r = tokio::time::timeout(OP_TIMEOUT, client.evict(&job, &[])).await;
                // A job not evicted ends with its lease.
                return Some(match r {
                    Ok(Err(e)) if e.kind == ErrorKind::NotFound => ("evict a job", Outcome::Gone),
                    r => ("evict a job", outcome(r)),
                });
            }
            let path = self.pick(rng)?;
            self.next_job += 1;
            let job = format!("chaos-c{k}-job{}", self.next_job);
            // A third of the jobs are abandoned: never renewed nor evicted.
            let abandoned = rng.below(3) == 0;
            let r = tokio::time::timeout(
                OP_TIMEOUT,
                client.migrate(&job, &[path], EvictionMode::Explicit, Some(JOB_LEASE)),
            )
            .await;
            Some(match r {
                Ok(Ok(_)) => {
                    if !abandoned {
                        self.jobs.push(job);
                    }
                    ("migrate (job with a lease)", Outcome::Acked)
                }
                r => ("migrate (job with a lease)", outcome(r)),
            })
        }
    }

    /// The outcome of a delete or rename of an acknowledged file at `paths[0]`
    /// (a rename's target second): acknowledged; failed (every path is then
    /// uncertain); or the file was not found, which nothing but this client
    /// could have done: a namespace mismatch.
    fn settle(
        &mut self,
        r: Result<thaw_common::Result<()>, tokio::time::error::Elapsed>,
        paths: &[&String],
        acked: &Acked,
        report: &Mutex<ChaosReport>,
        cycle: usize,
    ) -> Outcome {
        match &r {
            Ok(Ok(())) => return Outcome::Acked,
            Ok(Err(e)) if e.kind == ErrorKind::NotFound => {
                let mut r = lock(report);
                r.namespace_mismatches += 1;
                r.problem(format!("cycle {cycle}: {}: acknowledged, then not found by its own client: {e}", paths[0]));
            }
            _ => {}
        }
        for p in paths {
            self.ledger.uncertain.insert(p.to_string(), acked.clone());
        }
        outcome(r)
    }
}

/// Reads `path`, which must hold `want`'s bytes if it can be read.
async fn read(
    client: &Client,
    path: &str,
    want: &Acked,
    gone_ok: bool,
    report: &Mutex<ChaosReport>,
    cy: &Cycle,
) -> Outcome {
    let cycle = cy.cycle;
    match tokio::time::timeout(OP_TIMEOUT, client.read_all(path)).await {
        Ok(Ok(got)) if got == want.bytes() => Outcome::Acked,
        Ok(Ok(got)) => {
            let mut r = lock(report);
            r.wrong_reads += 1;
            r.problem(format!("cycle {cycle}: {path}: read {} bytes that are not the {} written", got.len(), want.len));
            Outcome::Wrong
        }
        // Another client's file may be gone since the cycle began.
        Ok(Err(e)) if e.kind == ErrorKind::NotFound && gone_ok => Outcome::Gone,
        r => {
            let mut report = lock(report);
            report.reads_failed += 1;
            if let Ok(Err(e)) = &r
                && e.kind == ErrorKind::DataLost
            {
                // "No copy holds these bytes any more": for a durable file,
                // or one a fault only hid for a while, a false alarm.
                report.reads_data_lost += 1;
                if report.data_lost_examples.len() < 10 {
                    let phase = cy.phase.load(Ordering::Relaxed);
                    let fault = if phase == DURING {
                        *lock(&cy.fault)
                    } else if phase == BEFORE {
                        "before the fault"
                    } else {
                        "after the fault"
                    };
                    report
                        .data_lost_examples
                        .push(format!("cycle {cycle} ({fault}): {path} ({:?}): {e}", want.write_type));
                }
            }
            outcome(r)
        }
    }
}

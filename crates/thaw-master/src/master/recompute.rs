//! The workflow manager (Tachyon, section 2.6): finds lost files, plans their
//! rebuild ([`crate::recompute_plan::plan`]), reruns lineages through the executor,
//! and takes the rebuilt bytes back into the same files.
//!
//! - Proactive mode rebuilds every lost permanent (non-temporary) file as soon
//!   as the loss is seen; reactive mode only files someone asks for (a reader
//!   of a lost file asks, and waits). Temporary files are rebuilt only when
//!   asked for, in both.
//! - The executor is a local process runner on the master's host: the
//!   lineage's command runs with `THAW_MASTER`, `THAW_RECOVER_LINEAGE` (the
//!   client library then writes the lineage's output paths as rebuilds of the
//!   lost files, same FIDs), `THAW_LINEAGE_ID`, `THAW_LOST_FILES` (the paths
//!   it rebuilds, newline separated), `THAW_DEPENDENCY_KIND` (`narrow` or
//!   `wide`), `THAW_REBUILD_OUTPUTS` (the 0-based indices of the outputs to
//!   produce, comma separated: a narrow lineage's lost partitions, every
//!   output of a wide one) and `THAW_LINEAGE_CONFIG` (a file holding the
//!   config bytes), its output in `<journal>/recompute/lineage-N-attempt-K.log`.
//!   A narrow program that writes other outputs too is not refused (their
//!   bytes are checked like the rest): it only wastes work.
//! - A rebuilt block must match the CRC-32 recorded when the file was first
//!   written, or the master refuses it: the rerun is reported non-deterministic
//!   and the file stays lost (never wrong bytes). A command that fails is tried
//!   again up to `recompute_attempts` times, then given up on with its reason.
//!
//! Soft state: a restarted master finds the lost files again once workers
//! re-register, and starts over.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thaw_common::ids::{block_count, file_of_block, index_of_block};
use thaw_common::proto::*;
use thaw_common::{Result, ThawError};

use super::{Master, State};
use crate::config::{RecomputeExecutor as Executor, RecomputeMode as Mode};
use crate::recompute_plan::{FileState, LineageView, plan};

/// A failed attempt is tried again after this times its number.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// A rerun no external executor claims within this long counts as failed.
const CLAIM_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
struct Run {
    attempt: u32,
    running_since: Option<Instant>,
    /// For an external executor: who claimed the attempt (empty: not yet).
    claimed_by: String,
    retry_at: Option<Instant>,
    last_error: String,
    /// Its outputs that were lost when the attempt started, and are rebuilt.
    outputs: Vec<u64>,
    /// The outputs (indices) the attempt was told to produce.
    produce: Vec<u32>,
}

/// The workflow manager's state.
#[derive(Debug, Default)]
pub(crate) struct Recomputer {
    /// Lost files someone asked for.
    requested: BTreeSet<u64>,
    runs: BTreeMap<u64, Run>,
    /// Lineages given up on, and why.
    failed: BTreeMap<u64, String>,
    /// Lineages whose rerun cannot be taken back: it wrote other bytes than
    /// the first run, or the first run left nothing to check them against. Why.
    nondeterministic: BTreeMap<u64, String>,
    /// Lost files that cannot be rebuilt, and why (as of the last plan).
    impossible: BTreeMap<u64, String>,
    /// Lost files whose rerun waits for lost inputs (as of the last plan).
    waiting: BTreeSet<u64>,
    /// Files being rebuilt now: file -> lineage.
    recovering: HashMap<u64, u64>,
    /// Reruns waiting for an external executor to claim them.
    claimable: std::collections::VecDeque<Start>,
    /// Something was lost or asked for since the last plan.
    dirty: bool,
    done: u64,
    failures: u64,
    /// Rebuilds since the master started, per file: how many, when the last
    /// ended (ms since the epoch), how long it took from its rerun's start.
    rebuilt: HashMap<u64, History>,
    /// The same per lineage: its reruns that rebuilt lost outputs.
    reran: HashMap<u64, History>,
}

/// Rebuilds of one file, or reruns of one lineage, that succeeded.
#[derive(Debug, Default, Clone)]
struct History {
    count: u32,
    last_ms: u64,
    took_ms: u64,
    /// A lineage's: the outputs (indices) its last rerun produced.
    produced: Vec<u32>,
}

impl History {
    fn add(&mut self, took: Duration) {
        self.count += 1;
        self.last_ms = thaw_common::now_ms();
        self.took_ms = took.as_millis() as u64;
    }
}

impl Recomputer {
    pub(crate) fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    pub(crate) fn is_recovering(&self, f: u64) -> bool {
        self.recovering.contains_key(&f)
    }

    /// A file left the namespace: its rebuild history goes.
    pub(crate) fn forget_file(&mut self, f: u64) {
        self.rebuilt.remove(&f);
    }

    /// A file's rebuilds, in its `FileInfo`.
    pub(crate) fn fill_rebuilds(&self, f: u64, info: &mut FileInfo) {
        if let Some(h) = self.rebuilt.get(&f) {
            (info.rebuilds, info.last_rebuild_ms, info.last_rebuild_took_ms) = (h.count, h.last_ms, h.took_ms);
        }
    }

    /// A lineage's reruns that rebuilt its lost outputs (the rest of a `LineageInfo` default).
    pub(crate) fn rerun_record(&self, l: u64) -> LineageInfo {
        let h = self.reran.get(&l).cloned().unwrap_or_default();
        LineageInfo {
            reruns: h.count,
            last_rerun_ms: h.last_ms,
            last_rerun_took_ms: h.took_ms,
            last_rerun_outputs: h.produced,
            ..Default::default()
        }
    }

    pub(crate) fn fill_totals(&self, t: &mut PersistenceTotals) {
        t.recomputations_done = self.done;
        t.recomputations_failed = self.failures;
        t.recomputations_running = self.runs.values().filter(|r| r.running_since.is_some()).count() as u64;
    }
}

/// A lineage rerun to start (taken from the state, run outside the lock).
#[derive(Debug, Clone)]
struct Start {
    lineage: u64,
    attempt: u32,
    command: Vec<String>,
    config: Vec<u8>,
    lost_paths: Vec<String>,
    narrow: bool,
    /// The outputs (indices) to produce.
    produce: Vec<u32>,
}

/// Whether file `f` is lost: complete, unpersisted, and some block without a replica.
fn is_lost(st: &State, f: u64) -> bool {
    is_lost_view(&st.ns, &st.cluster, f)
}

fn file_state(st: &State, f: u64) -> FileState {
    match st.ns.get(f) {
        None => FileState::Gone,
        Some(i) if is_lost(st, f) => FileState::Lost { lineage: i.lineage_id() },
        Some(_) => FileState::Available,
    }
}

impl Master {
    /// Where the rebuild of lost file `f` (of lineage `l`) stands.
    pub(super) fn rebuild_state(st: &State, f: u64, l: u64) -> (Rebuild, String) {
        let rc = &st.recomputer;
        if let Some(why) = rc.impossible.get(&f) {
            return (Rebuild::Impossible, format!("cannot be rebuilt: {why}"));
        }
        if l == 0 {
            return (Rebuild::Impossible, "cannot be rebuilt: it was written without lineage".into());
        }
        if let Some(why) = rc.failed.get(&l) {
            return (Rebuild::Failed, format!("lineage {l} failed: {why}"));
        }
        if let Some(why) = rc.nondeterministic.get(&l) {
            return (Rebuild::Failed, format!("lineage {l} cannot rebuild it: {why}"));
        }
        if self_mode(st) == Mode::Off {
            return (Rebuild::Off, "recomputation is off on this master".into());
        }
        if let Some(run) = rc.runs.get(&l).filter(|r| r.outputs.contains(&f)) {
            if let Some(since) = run.running_since {
                let secs = since.elapsed().as_secs_f64();
                return (Rebuild::Running, format!("lineage {l} running (attempt {}, {secs:.1} s)", run.attempt));
            }
            if run.retry_at.is_some() {
                return (
                    Rebuild::Retrying,
                    format!("lineage {l} attempt {} failed ({}); retrying", run.attempt, run.last_error),
                );
            }
        }
        if rc.waiting.contains(&f) {
            return (Rebuild::Waiting, format!("lineage {l} waits for lost inputs of this file to be rebuilt"));
        }
        let temporary = st.ns.get(f).is_some_and(|i| i.temporary());
        if !rc.requested.contains(&f)
            && (self_mode(st) == Mode::Reactive || temporary)
            && !rc.runs.get(&l).is_some_and(|r| r.outputs.contains(&f))
        {
            return (Rebuild::NotRequested, format!("lineage {l} reruns when the file is read"));
        }
        (Rebuild::Queued, format!("lineage {l} is queued to rerun"))
    }

    /// Asks for a lost file to be rebuilt (reactive mode, or a temporary file).
    pub async fn recompute(&self, req: RecomputeRequest) -> Result<RecomputeResponse> {
        let (p, id) = self.resolve_file(&req.path, "recompute").await?;
        let mut guard = self.write();
        let st = &mut *guard;
        let ino = st.ns.get(id).ok_or_else(|| ThawError::not_found(format!("{p} was deleted meanwhile")))?;
        let l = ino.lineage_id();
        if is_lost(st, id) {
            if l == 0 {
                return Err(ThawError::data_lost(format!(
                    "{p} is lost and has no lineage to rebuild it (it was written without one, and lost before its checkpoint)"
                )));
            }
            if st.recomputer_mode == Mode::Off {
                return Err(ThawError::precondition("recomputation is off on this master (--recompute off)"));
            }
            if req.retry {
                st.recomputer.failed.remove(&l);
                st.recomputer.runs.remove(&l);
            }
            st.recomputer.requested.insert(id);
            st.recomputer.dirty = true;
            self.recompute_soon.notify_one();
        }
        Ok(RecomputeResponse { info: Some(Self::file_info(st, id, false, &Position::default())) })
    }

    /// One pass of the workflow manager: plan, then start what may run.
    pub async fn recompute_tick(self: &Arc<Self>) {
        let (starts, overdue) = {
            let mut guard = self.write();
            let overdue = self.overdue_claims(&mut guard);
            (self.plan_recomputation(&mut guard), overdue)
        };
        for (l, attempt, why) in overdue {
            self.finish_run(l, attempt, Err(why));
        }
        for s in starts {
            if self.config.recompute_executor == Executor::External {
                self.write().recomputer.claimable.push_back(s);
                continue;
            }
            let master = self.clone();
            tokio::spawn(async move {
                let outcome = master.execute(&s).await;
                master.finish_run(s.lineage, s.attempt, outcome);
            });
        }
    }

    /// External runs never claimed, or claimed and never reported, in time.
    fn overdue_claims(&self, st: &mut State) -> Vec<(u64, u32, String)> {
        if self.config.recompute_executor != Executor::External {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (&l, run) in &st.recomputer.runs {
            let Some(since) = run.running_since else { continue };
            if run.claimed_by.is_empty() && since.elapsed() > CLAIM_WAIT {
                out.push((l, run.attempt, format!("no executor claimed it within {CLAIM_WAIT:?} (is the Dask integration running with recompute=True?)")));
            } else if !run.claimed_by.is_empty() && since.elapsed() > self.config.recompute_timeout + CLAIM_WAIT {
                out.push((
                    l,
                    run.attempt,
                    format!("{} did not report it within {:?}", run.claimed_by, self.config.recompute_timeout),
                ));
            }
        }
        let gone: BTreeSet<u64> = out.iter().map(|(l, _, _)| *l).collect();
        st.recomputer.claimable.retain(|s| !gone.contains(&s.lineage));
        out
    }

    /// Hands out reruns to an external executor.
    pub fn claim_recomputations(&self, req: ClaimRecomputationsRequest) -> Result<ClaimRecomputationsResponse> {
        if self.config.recompute_executor != Executor::External {
            return Err(ThawError::precondition(
                "this master runs recomputations itself (start it with --recompute-executor external)",
            ));
        }
        let executor = if req.executor.is_empty() { "an external executor".to_string() } else { req.executor };
        let mut st = self.write();
        let mut tasks = Vec::new();
        while tasks.len() < req.max.max(1) as usize {
            let Some(s) = st.recomputer.claimable.pop_front() else { break };
            let Some(run) = st.recomputer.runs.get_mut(&s.lineage).filter(|r| r.attempt == s.attempt) else {
                continue;
            };
            run.claimed_by = executor.clone();
            run.running_since = Some(Instant::now());
            tracing::info!(lineage = s.lineage, attempt = s.attempt, %executor, "recomputation claimed");
            tasks.push(RecomputeTask {
                lineage_id: s.lineage,
                attempt: s.attempt,
                env: self.run_env(&s).into_iter().collect(),
                command: s.command,
                config: s.config,
                timeout_ms: self.config.recompute_timeout.as_millis() as u64,
            });
        }
        Ok(ClaimRecomputationsResponse { tasks })
    }

    /// An external executor's report of a rerun.
    pub fn recomputation_done(&self, req: RecomputationDoneRequest) -> RecomputationDoneResponse {
        let outcome = if req.error.is_empty() { Ok(()) } else { Err(req.error) };
        self.finish_run(req.lineage_id, req.attempt, outcome);
        RecomputationDoneResponse {}
    }

    /// The environment a rerun's command gets (besides THAW_LINEAGE_CONFIG).
    fn run_env(&self, s: &Start) -> Vec<(String, String)> {
        let mut env = vec![
            ("THAW_MASTER".into(), self.config.address.clone()),
            ("THAW_RECOVER_LINEAGE".into(), s.lineage.to_string()),
            ("THAW_LINEAGE_ID".into(), s.lineage.to_string()),
            ("THAW_LOST_FILES".into(), s.lost_paths.join("\n")),
            ("THAW_DEPENDENCY_KIND".into(), if s.narrow { "narrow" } else { "wide" }.into()),
            ("THAW_REBUILD_OUTPUTS".into(), s.produce.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",")),
            ("THAW_JOB_ID".into(), format!("recompute-{}", s.lineage)),
        ];
        if let Some(ca) = &self.config.tls_ca {
            env.push(("THAW_TLS_CA".into(), ca.display().to_string()));
        }
        // On a secured cluster only the superuser registers the commands the
        // master runs (`submit_dependency`); a rerun acts as it, for as long as
        // it may run.
        if let Some(secret) = self.secret() {
            let ttl = self.config.recompute_timeout.as_millis() as u64 + 60_000;
            let claims = thaw_common::proto::TokenClaims {
                user: thaw_common::auth::SUPERUSER.into(),
                groups: Vec::new(),
                expires_ms: thaw_common::now_ms() + ttl,
            };
            env.push(("THAW_TOKEN".into(), secret.mint(&claims)));
        }
        env
    }

    fn plan_recomputation(&self, st: &mut State) -> Vec<Start> {
        let mode = st.recomputer_mode;
        let busy = !st.recomputer.runs.is_empty() || !st.recomputer.requested.is_empty();
        // Nothing is lost while the workers may still be re-registering.
        if mode == Mode::Off || !(st.recomputer.dirty || busy) || Instant::now() < st.warm_until {
            return Vec::new();
        }
        st.recomputer.dirty = false;
        let now = Instant::now();
        let mut targets: Vec<u64> = st.recomputer.requested.iter().copied().collect();
        if mode == Mode::Proactive {
            for &f in &st.unpersisted {
                let keep = st.ns.get(f).is_some_and(|i| i.lineage_id() != 0 && !i.temporary());
                if keep && is_lost(st, f) {
                    targets.push(f);
                }
            }
        }
        // Files running lineages are rebuilding stay targets until they finish.
        for run in st.recomputer.runs.values() {
            targets.extend(run.outputs.iter().copied());
        }
        let p = {
            let st = &*st;
            plan(
                &targets,
                &|f| file_state(st, f),
                &|l| {
                    st.lineages.get(l).map(|r| LineageView {
                        inputs: r.input_fids.clone(),
                        outputs: r.output_fids.clone(),
                        narrow: r.kind == DependencyKind::Narrow as i32,
                        broken: r.broken.clone(),
                    })
                },
                &|f| if st.ns.get(f).is_some() { st.ns.path_of(f) } else { format!("FID {f}") },
            )
        };
        let rc = &mut st.recomputer;
        rc.requested.retain(|f| is_lost_view(&st.ns, &st.cluster, *f) && !p.unrecoverable.contains_key(f));
        rc.impossible = p.unrecoverable;
        rc.waiting = p.waiting.iter().flat_map(|r| r.rebuilds.iter().copied()).collect();
        let planned: BTreeSet<u64> = p.ready.iter().chain(&p.waiting).map(|r| r.lineage).collect();
        // Runs no longer needed (their files came back, or went) end here.
        rc.runs.retain(|l, r| r.running_since.is_some() || planned.contains(l));
        let mut running = rc.runs.values().filter(|r| r.running_since.is_some()).count();
        let mut starts = Vec::new();
        for rerun in p.ready {
            let l = rerun.lineage;
            if running >= self.config.recompute_parallel {
                break;
            }
            if rc.failed.contains_key(&l) || rc.nondeterministic.contains_key(&l) {
                continue;
            }
            let run = rc.runs.entry(l).or_default();
            if run.running_since.is_some() || run.retry_at.is_some_and(|t| t > now) {
                continue;
            }
            let Some(rec) = st.lineages.get(l) else { continue };
            let outputs = rerun.rebuilds;
            if outputs.is_empty() {
                continue;
            }
            let produce: Vec<u32> = rerun.produce.iter().map(|i| *i as u32).collect();
            run.attempt += 1;
            run.running_since = Some(now);
            run.retry_at = None;
            run.outputs = outputs.clone();
            run.produce = produce.clone();
            running += 1;
            let lost_paths = rec
                .output_fids
                .iter()
                .zip(&rec.output_paths)
                .filter(|(f, _)| outputs.contains(f))
                .map(|(_, p)| p.clone())
                .collect();
            let narrow = rec.kind == DependencyKind::Narrow as i32;
            tracing::info!(
                lineage = l,
                attempt = run.attempt,
                lost = outputs.len(),
                produce = produce.len(),
                of = rec.output_paths.len(),
                narrow,
                "recomputing lost files"
            );
            starts.push(Start {
                lineage: l,
                attempt: run.attempt,
                command: rec.command.clone(),
                config: rec.config.clone(),
                lost_paths,
                narrow,
                produce,
            });
        }
        starts
    }

    /// Takes a rerun's outcome: its files back, or a failed attempt (tried
    /// again, or given up on). A report of an older attempt is ignored.
    fn finish_run(&self, lineage: u64, attempt: u32, outcome: std::result::Result<(), String>) {
        let mut guard = self.write();
        let st = &mut *guard;
        if st.recomputer.runs.get(&lineage).is_none_or(|r| r.attempt != attempt || r.running_since.is_none()) {
            return;
        }
        let still_lost: Vec<u64> = st
            .recomputer
            .runs
            .get(&lineage)
            .map(|r| r.outputs.iter().copied().filter(|f| is_lost_view(&st.ns, &st.cluster, *f)).collect())
            .unwrap_or_default();
        let names: Vec<String> = still_lost.iter().map(|f| st.ns.path_of(*f)).collect();
        let rc = &mut st.recomputer;
        rc.dirty = true;
        rc.recovering.retain(|_, l| *l != lineage);
        let Some(run) = rc.runs.get_mut(&lineage) else { return };
        let took = run.running_since.take().map(|t| t.elapsed()).unwrap_or_default();
        if still_lost.is_empty() && outcome.is_ok() {
            tracing::info!(lineage, attempt, "lost files rebuilt");
            let h = rc.reran.entry(lineage).or_default();
            h.add(took);
            h.produced = std::mem::take(&mut run.produce);
            rc.runs.remove(&lineage);
            rc.done += 1;
        } else if let Some(why) = rc.nondeterministic.get(&lineage).cloned() {
            tracing::warn!(lineage, %why, "recomputation refused: the files stay lost");
            rc.runs.remove(&lineage);
            rc.failures += 1;
            rc.failed.insert(lineage, why);
        } else {
            rc.failures += 1;
            run.last_error = match outcome {
                Err(e) => e,
                Ok(()) => format!("its command succeeded but did not rewrite {}", names.join(", ")),
            };
            if run.attempt >= self.config.recompute_attempts {
                let why = format!("gave up after {} attempts; the last: {}", run.attempt, run.last_error);
                tracing::warn!(lineage, %why, "recomputation failed");
                rc.failed.insert(lineage, why);
                rc.runs.remove(&lineage);
            } else {
                tracing::warn!(lineage, attempt, error = %run.last_error, "recomputation attempt failed");
                run.retry_at = Some(Instant::now() + RETRY_PAUSE * run.attempt);
            }
        }
        drop(guard);
        self.recompute_soon.notify_one();
    }

    /// The local process executor: the lineage's command with the rebuild's
    /// environment, bounded by `recompute_timeout`. `Err`: why it failed.
    async fn execute(&self, s: &Start) -> std::result::Result<(), String> {
        let dir = self.config.journal_dir.join("recompute");
        let log_path = dir.join(format!("lineage-{}-attempt-{}.log", s.lineage, s.attempt));
        let config_path = dir.join(format!("lineage-{}.config", s.lineage));
        let prepared = (|| -> std::io::Result<std::fs::File> {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(&config_path, &s.config)?;
            std::fs::File::create(&log_path)
        })();
        let log = prepared.map_err(|e| format!("cannot prepare the run in {}: {e}", dir.display()))?;
        let err_log = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = tokio::process::Command::new(&s.command[0]);
        cmd.args(&s.command[1..])
            .envs(self.run_env(s))
            .env("THAW_LINEAGE_CONFIG", &config_path)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err_log)
            // A process group of its own: what the command starts (a
            // spark-submit's JVM, a shell's pipeline) goes with it.
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {:?}: {e}", s.command[0]))?;
        let _group = child.id().map(KillGroup);
        let log_name = log_path.display();
        match tokio::time::timeout(self.config.recompute_timeout, child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("{status} (log: {log_name})")),
            Ok(Err(e)) => Err(format!("waiting for it: {e} (log: {log_name})")),
            Err(_) => Err(format!("killed after {:?} (log: {log_name})", self.config.recompute_timeout)),
        }
    }

    /// A recomputation's write at `path` (with `THAW_RECOVER_LINEAGE` = `l`):
    /// if the path is an output of lineage `l` whose file still exists, the
    /// write rebuilds that file (same FID) on workers chosen as for a new
    /// file. `None`: an ordinary create (a path the lineage does not own, or
    /// an output never written).
    pub(super) fn recovery_session(
        &self,
        st: &mut State,
        l: u64,
        full: &str,
        client: &Position,
        segments: bool,
    ) -> Result<Option<CreateFileResponse>> {
        let rec = st
            .lineages
            .get(l)
            .ok_or_else(|| ThawError::not_found(format!("lineage {l} (being recomputed) does not exist")))?;
        let Some(index) = rec.output_paths.iter().position(|p| p == full) else {
            return Ok(None);
        };
        let fid = rec.output_fids[index];
        let Some(ino) = st.ns.get(fid).filter(|i| i.complete()) else {
            return Ok(None);
        };
        // Only a rerun this master started may rebuild: one a killed master
        // started outlives it, and what it writes after the restart (its input
        // cut off mid-read, say) must not mark the lineage non-deterministic.
        // The new master reruns the lineage itself.
        if st.recomputer.runs.get(&l).is_none_or(|r| r.running_since.is_none()) {
            return Err(ThawError::precondition(format!(
                "refused: lineage {l} is not being rerun by this master (a rerun started by an earlier master, \
                 or run by hand); it reruns lost outputs itself"
            )));
        }
        let blocks = block_count(ino.length(), ino.block_size());
        if ino.block_crc32().len() as u64 != blocks {
            // Nothing to check a rebuild against: it could hand out other bytes.
            let why = format!("cannot be checked: the first write of {full} recorded no block checksums");
            st.recomputer.nondeterministic.entry(l).or_insert_with(|| why.clone());
            return Err(ThawError::precondition(format!("refused: {why}")));
        }
        st.check(fid, super::permissions::WRITE)?;
        let wt = ino.write_type();
        let now = Instant::now();
        // Its length is known: a rebuild's memory is found whole or not at all.
        let (workers, plan) =
            st.writers(client, wt, 1, segments, ino.block_size(), (ino.length() > 0).then_some(ino.length()), now)?;
        let segment_blocks = plan.first().map_or(0, |s| s.blocks);
        st.hold_segments(fid, plan, ino.block_size(), now);
        st.recomputer.recovering.insert(fid, l);
        tracing::debug!(lineage = l, file_id = fid, path = %full, "rebuilding a lost file");
        let info = Self::file_info(st, fid, false, client);
        let access = self.grant(true, fid, full);
        Ok(Some(CreateFileResponse {
            info: Some(info),
            workers,
            recovery: true,
            writer_lease_ms: 0,
            access,
            segment_blocks,
        }))
    }

    /// Checks a block of a file being rebuilt against the CRC-32 of the first
    /// write; a mismatch marks the lineage non-deterministic.
    pub(super) fn check_rebuilt_block(st: &mut State, block: u64, length: u64, crc: Option<u32>) -> Result<()> {
        let f = file_of_block(block);
        let Some(&l) = st.recomputer.recovering.get(&f) else {
            return Ok(());
        };
        let Some(ino) = st.ns.get(f) else { return Ok(()) };
        let index = index_of_block(block) as usize;
        let path = st.ns.path_of(f);
        let fits = Self::block_fits_ns(&st.ns, block, length);
        let why = match (fits, ino.block_crc32().get(index), crc) {
            (Err(e), _, _) => Some(format!("it wrote a different {path}: {}", e.message)),
            (Ok(()), Some(want), Some(got)) if *want != got => {
                Some(format!("block {index} of {path} has CRC-32 {got:08x}, the first write's was {want:08x}"))
            }
            _ => None,
        };
        match why {
            Some(why) => {
                st.recomputer.nondeterministic.entry(l).or_insert_with(|| format!("not deterministic: {why}"));
                Err(ThawError::precondition(format!("refused: the rebuild is not byte-identical: {why}")))
            }
            None => Ok(()),
        }
    }

    /// The end of a rebuild write: every block of the file has a replica again.
    pub(super) fn finish_rebuild(st: &mut State, fid: u64, length: u64) -> Result<FileInfo> {
        let path = st.ns.path_of(fid);
        let l = st.recomputer.recovering.get(&fid).copied().unwrap_or(0);
        let rec = st.ns.get(fid).expect("checked by the caller");
        if length != rec.length() {
            let why = format!("it wrote {length} bytes of {path}, the first write {}", rec.length());
            st.recomputer.nondeterministic.entry(l).or_insert_with(|| format!("not deterministic: {why}"));
            return Err(ThawError::precondition(format!("the rebuild is not byte-identical: {why}")));
        }
        if st.cluster.missing_block(fid, block_count(rec.length(), rec.block_size())) {
            return Err(ThawError::precondition(format!("the rebuild of {path} is missing blocks")));
        }
        st.recomputer.recovering.remove(&fid);
        st.recomputer.dirty = true;
        let since = st.recomputer.runs.get(&l).and_then(|r| r.running_since);
        let took = since.map(|t| t.elapsed()).unwrap_or_default();
        st.recomputer.rebuilt.entry(fid).or_default().add(took);
        tracing::info!(lineage = l, file_id = fid, path = %path, ?took, "lost file rebuilt");
        Ok(Self::file_info(st, fid, false, &Position::default()))
    }
}

fn self_mode(st: &State) -> Mode {
    st.recomputer_mode
}

pub(super) fn is_lost_view(ns: &crate::namespace::Namespace, cluster: &crate::cluster::Cluster, f: u64) -> bool {
    ns.get(f).is_some_and(|i| {
        let r = i;
        !r.is_dir()
            && r.complete()
            && !r.persisted()
            && cluster.missing_block(f, block_count(r.length(), r.block_size()))
    })
}

/// Kills a rerun's process group when its run ends, however it ends
/// (finished, timed out, or the master stopping): a rerun's command may leave
/// processes behind (a Spark driver whose job wrote its output, a pipeline's
/// other half), and those must not outlive the run. `kill_on_drop` alone
/// reaches only the command's own process.
struct KillGroup(u32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a negative pid signals that process group; the
        // group is the rerun's own (`process_group(0)` made it, led by its pid).
        unsafe {
            libc::kill(-(self.0 as libc::pid_t), libc::SIGKILL);
        }
    }
}

//! The master's job calls (Ignem, section III-A, DYRS, section III-A): migrate, evict,
//! lease renewal, job status, and the migration event log.

use crate::migration::BlockSpec;

use super::permissions::{EXEC, READ};
use super::*;

/// Longest job id accepted.
pub const MAX_JOB_ID: usize = 1024;
/// Shortest lease a migrate call may ask for.
pub const MIN_LEASE_MS: u64 = 100;
/// Longest job origin accepted (free text: who submitted the job).
pub const MAX_ORIGIN: usize = 200;

/// A job id as every call that names one takes it.
pub(super) fn check_job_id(job: &str) -> Result<()> {
    if job.is_empty() {
        return Err(ThawError::invalid("a job id is needed"));
    }
    if job.len() > MAX_JOB_ID {
        return Err(ThawError::invalid(format!("job id is longer than {MAX_JOB_ID} bytes")));
    }
    if job.chars().any(char::is_control) {
        return Err(ThawError::invalid("a job id may not contain control characters"));
    }
    Ok(())
}

/// What the job's reads took from the live workers, as they count them,
/// less what each counted for that id before the job started.
fn fill_reads(cluster: &crate::cluster::Cluster, m: &crate::migration::Migrations, j: &mut JobInfo) {
    let base = m.read_base.get(&j.job_id);
    for w in cluster.workers().filter(|w| w.alive) {
        let (read, memory) = base.and_then(|b| b.get(&w.id)).copied().unwrap_or_default();
        for a in w.jobs.iter().filter(|a| a.job_id == j.job_id) {
            j.read_bytes += a.bytes_read.saturating_sub(read);
            j.read_bytes_from_memory += a.bytes_from_memory.saturating_sub(memory);
        }
    }
}

impl Master {
    /// The blocks of the complete files at or under `paths` (directories expand
    /// recursively; files still being written inside them are skipped).
    async fn input_blocks(&self, paths: &[String]) -> Result<Vec<BlockSpec>> {
        let mut files = Vec::new();
        // Directories to expand: (id, path). A named path is resolved; a
        // directory's entries are taken by id under one hold of the lock
        // (100,000 files resolved one path at a time took seconds).
        let mut dirs: Vec<(u64, String)> = Vec::new();
        for p in paths {
            let p = path::normalize(p)?;
            let id = self.resolve(&p).await?;
            let st = self.read();
            let is_dir = st.ns.get(id).is_some_and(|i| i.is_dir());
            // Moving a file into memory is reading it.
            st.check(id, if is_dir { READ | EXEC } else { READ })?;
            if is_dir {
                dirs.push((id, p));
                continue;
            }
            if st.ns.get(id).is_some_and(|i| !i.complete()) {
                return Err(ThawError::precondition(format!("{p} is incomplete: it is still being written")));
            }
            files.push(id);
        }
        while let Some((id, p)) = dirs.pop() {
            self.sync_dir(id, &p).await?;
            let st = self.read();
            for (name, child) in st.ns.children(id) {
                let Some(ino) = st.ns.get(child) else { continue };
                let is_dir = ino.is_dir();
                st.check(child, if is_dir { READ | EXEC } else { READ })?;
                if is_dir {
                    dirs.push((child, if p == "/" { format!("/{name}") } else { format!("{p}/{name}") }));
                } else if ino.complete() {
                    files.push(child);
                }
            }
        }
        files.sort_unstable();
        files.dedup();
        let st = self.read();
        let mut out = Vec::new();
        for id in files {
            let Some(ino) = st.ns.get(id) else { continue };
            let r = ino;
            let path = st.ns.path_of(id);
            for index in 0..block_count(r.length(), r.block_size()) {
                let length = block_length(r.length(), r.block_size(), index);
                let offset = index * r.block_size();
                let ufs = r.persisted().then(|| UfsSource { path: path.clone(), offset, length });
                out.push(BlockSpec { block: block_id(id, index), length, ufs });
            }
        }
        Ok(out)
    }

    /// Registers the job and starts migrating its inputs; returns at once.
    pub async fn migrate(&self, req: MigrateRequest) -> Result<MigrateResponse> {
        if req.job_id.is_empty() {
            return Err(ThawError::invalid("migrate needs a job id"));
        }
        check_job_id(&req.job_id)?;
        if req.origin.len() > MAX_ORIGIN {
            return Err(ThawError::invalid(format!(
                "a job origin is at most {MAX_ORIGIN} bytes (this one is {})",
                req.origin.len()
            )));
        }
        if req.origin.chars().any(char::is_control) {
            return Err(ThawError::invalid("a job origin may not contain control characters"));
        }
        if req.lease_ms > 0 && req.lease_ms < MIN_LEASE_MS {
            return Err(ThawError::invalid(format!(
                "a lease of {} ms is too short to renew (at least {MIN_LEASE_MS} ms)",
                req.lease_ms
            )));
        }
        let eviction = EvictionMode::try_from(req.eviction)
            .map_err(|_| ThawError::invalid(format!("unknown eviction mode {}", req.eviction)))?;
        let blocks = self.input_blocks(&req.paths).await?;
        let lease = (req.lease_ms > 0).then(|| Duration::from_millis(req.lease_ms));
        let mut st = self.write();
        let st = &mut *st;
        st.check_job_owner(&req.job_id)?;
        let n = blocks.len();
        st.migrations.migrate(&st.cluster, &req.job_id, eviction, lease, blocks, Instant::now())?;
        st.migrations.set_origin(&req.job_id, &req.origin)?;
        tracing::info!(job = %req.job_id, blocks = n, origin = %req.origin, "migrate");
        let job = st.migrations.job_info(&st.cluster, &req.job_id, Instant::now());
        // Plan now rather than at the next tick, and wake idle workers' asks
        // (references and ignem's bindings are theirs already).
        self.plan_soon.notify_one();
        self.work_ready();
        Ok(MigrateResponse { job })
    }

    /// Releases a job's blocks (all of them, ending the job, if no paths).
    pub async fn evict(&self, req: EvictRequest) -> Result<EvictResponse> {
        let blocks = if req.paths.is_empty() {
            None
        } else {
            Some(self.input_blocks(&req.paths).await?.into_iter().map(|b| b.block).collect::<Vec<_>>())
        };
        let mut st = self.write();
        let st = &mut *st;
        st.check_job_owner(&req.job_id)?;
        let live = live_workers(&st.cluster);
        st.migrations.evict(&req.job_id, blocks.as_deref(), &live)?;
        tracing::info!(job = %req.job_id, all = blocks.is_none(), "evict");
        self.work_ready();
        Ok(EvictResponse { job: st.migrations.job_info(&st.cluster, &req.job_id, Instant::now()) })
    }

    pub fn renew_lease(&self, req: RenewLeaseRequest) -> RenewLeaseResponse {
        let unknown = self.write().migrations.renew(&req.job_ids, Instant::now());
        RenewLeaseResponse { unknown }
    }

    /// The live jobs, then those that ended lately (newest last); or one job,
    /// live or lately ended.
    pub fn list_jobs(&self, req: ListJobsRequest) -> Result<ListJobsResponse> {
        let st = self.read();
        let now = Instant::now();
        let mut jobs: Vec<JobInfo> = if req.job_id.is_empty() {
            let live = st.migrations.job_ids().filter_map(|j| st.migrations.job_info(&st.cluster, j, now));
            live.chain(st.migrations.ended.live(now).cloned()).collect()
        } else {
            let job = st.migrations.job_info(&st.cluster, &req.job_id, now);
            vec![
                job.or_else(|| st.migrations.ended_job(&req.job_id, now))
                    .ok_or_else(|| ThawError::not_found(format!("no job {:?}", req.job_id)))?,
            ]
        };
        for j in &mut jobs {
            fill_reads(&st.cluster, &st.migrations, j);
        }
        Ok(ListJobsResponse {
            jobs,
            policy: st.migrations.policy.name().to_string(),
            priority: st.migrations.priority.name().to_string(),
        })
    }

    /// Replaces the job's task counters with its submitter's report.
    pub fn report_job_tasks(&self, req: ReportJobTasksRequest) -> Result<ReportJobTasksResponse> {
        if req.job_id.is_empty() {
            return Err(ThawError::invalid("a task report needs a job id"));
        }
        let tasks = req.tasks.ok_or_else(|| ThawError::invalid("a task report needs its task counters"))?;
        let mut st = self.write();
        let st = &mut *st;
        st.migrations.report_tasks(&req.job_id, tasks)?;
        tracing::debug!(job = %req.job_id, ?tasks, "job tasks reported");
        Ok(ReportJobTasksResponse { job: st.migrations.job_info(&st.cluster, &req.job_id, Instant::now()) })
    }

    pub fn migration_events(&self, req: MigrationEventsRequest) -> MigrationEventsResponse {
        let (events, next) = self.read().migrations.events(req.since, req.limit as usize);
        MigrationEventsResponse { events, next }
    }
}

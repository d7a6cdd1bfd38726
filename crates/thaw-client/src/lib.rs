//! The Thaw client: metadata calls to the master, locality-ordered block reads with
//! fail-over and short-circuit, and writes by write type. Every read and write
//! carries the client's job id. The system map is docs/architecture.md
//! ("The parts").

mod config;
pub mod copy;
mod data;
pub mod json;
mod local_write;
mod options;
mod reader;
mod writer;

use std::sync::Arc;

pub use config::{ClientConfig, DEFAULT_MASTER};
pub use options::connect_with;
pub use reader::{FileReader, LocalBlock, ReadStats};
use thaw_common::auth::{Credentials, MasterClient};
use thaw_common::proto::*;
use thaw_common::{Result, ThawError};
pub use writer::{FileWriter, WriteOptions, parse_write_type};

/// Entries asked for per `ListStatus` call by whole listings (the master's
/// most per answer).
pub const LIST_PAGE: u32 = 1000;

/// A handle on a Thaw cluster. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Client {
    master: MasterClient,
    /// The connection under `master` (kept to make [`Client::as_user`]s).
    channel: thaw_common::failover::MasterChannel,
    /// What this client proves itself with (none: a cluster without a secret).
    credentials: Option<Arc<Credentials>>,
    config: Arc<ClientConfig>,
    pool: Arc<data::Pool>,
    /// This client's name as a writer: its leases on unfinished files.
    writer: Arc<str>,
}

/// A writer's name, unique to this client: who (the user), where (host, pid)
/// and which client of the process, as `thaw fs ls` shows the holder of an
/// unfinished file.
fn writer_name(config: &ClientConfig) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let user = ["USER", "LOGNAME"].iter().find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
    // SAFETY: getuid cannot fail.
    let user = user.unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }));
    let host = if config.position.host.is_empty() { thaw_common::hostname() } else { config.position.host.clone() };
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = format!("{user}@{host} pid {} client {n}", std::process::id());
    // A name too long for the master (a strange USER) is cut, staying unique.
    if name.len() > 200 {
        let mut cut = 120;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name = format!("{}... pid {} client {n}", &name[..cut], std::process::id());
    }
    name
}

/// Whether a transport error (not an answer of the master) says the
/// connection broke at the protocol level, as when a plain client reaches
/// a TLS port: HTTP/2 fails to parse, the connection drops ("transport
/// error"), or the call already sent on it is cut ("operation was
/// canceled"; which one comes first is a race).
fn protocol_broken(message: &str) -> bool {
    message.contains("h2 protocol error") || message == "transport error" || message.contains("operation was canceled")
}

impl Client {
    /// Connects to the master named in `config` (lazily: the first call dials),
    /// with the credentials of the environment (`THAW_TOKEN`,
    /// `THAW_TOKEN_FILE` or `THAW_SECRET_FILE`; see `thaw_common::auth`).
    pub fn new(config: ClientConfig) -> Result<Self> {
        let credentials = Credentials::from_env()?.map(Arc::new);
        Self::with_credentials(config, credentials)
    }

    /// [`Client::new`] with these credentials (none: a cluster without a
    /// secret). TLS: `config.tls`, else `THAW_TLS_CA`'s.
    pub fn with_credentials(mut config: ClientConfig, credentials: Option<Arc<Credentials>>) -> Result<Self> {
        if config.tls.is_none() {
            config.tls = thaw_common::tls::ClientTls::from_env()?.map(Arc::new);
        }
        let channel = thaw_common::failover::MasterChannel::new(&config.master, config.tls.as_deref())?;
        let master = thaw_common::auth::master_client_on(channel.clone(), credentials.clone());
        let writer = writer_name(&config).into();
        let pool = Arc::new(data::Pool::new(config.tls.clone()));
        Ok(Client { master, channel, credentials, config: Arc::new(config), pool, writer })
    }

    /// The same cluster and connections, acting with `credentials` (another
    /// user's: the S3 gateway's client for each access key's user).
    pub fn as_user(&self, credentials: Arc<Credentials>) -> Client {
        Client {
            master: thaw_common::auth::master_client_on(self.channel.clone(), Some(credentials.clone())),
            channel: self.channel.clone(),
            credentials: Some(credentials),
            config: self.config.clone(),
            pool: self.pool.clone(),
            writer: self.writer.clone(),
        }
    }

    /// The token this client sends (empty without credentials).
    pub fn token(&self) -> String {
        self.credentials.as_ref().map(|c| c.token()).unwrap_or_default()
    }

    /// This client's name as the writer of unfinished files.
    pub fn writer_name(&self) -> &str {
        &self.writer
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The same cluster, with another job id on every read and write.
    pub fn with_job(&self, job_id: impl Into<String>) -> Client {
        let mut config = (*self.config).clone();
        config.job_id = job_id.into();
        Client {
            master: self.master.clone(),
            channel: self.channel.clone(),
            credentials: self.credentials.clone(),
            config: Arc::new(config),
            pool: self.pool.clone(),
            writer: self.writer.clone(),
        }
    }

    /// The same cluster, its writes at lineage `lineage`'s output paths
    /// rebuilding that lineage's lost files in place (what
    /// `THAW_RECOVER_LINEAGE` does for a whole process): for a rerun run in
    /// a process that does other work too (a Dask worker's). 0: none.
    pub fn with_recovery(&self, lineage: u64) -> Client {
        let mut config = (*self.config).clone();
        config.recover_lineage = lineage;
        Client {
            master: self.master.clone(),
            channel: self.channel.clone(),
            credentials: self.credentials.clone(),
            config: Arc::new(config),
            pool: self.pool.clone(),
            writer: self.writer.clone(),
        }
    }

    /// The same cluster, with reads of lost files failing at once (`DataLost`)
    /// instead of waiting for their rebuild: for a caller that waits its own
    /// way (a Dask task gives its thread back first).
    pub fn without_rebuild_wait(&self) -> Client {
        let mut config = (*self.config).clone();
        config.rebuild_wait = std::time::Duration::ZERO;
        Client {
            master: self.master.clone(),
            channel: self.channel.clone(),
            credentials: self.credentials.clone(),
            config: Arc::new(config),
            pool: self.pool.clone(),
            writer: self.writer.clone(),
        }
    }

    fn rpc_err(&self, s: tonic::Status) -> ThawError {
        // An error the master sent names its kind; one without came from the transport.
        let from_master = s.metadata().contains_key(thaw_common::error::KIND_HEADER);
        // A TLS port answering plain HTTP/2 (or the reverse) breaks the
        // protocol, or drops the connection ("transport error"; "operation
        // was canceled" when the call was already sent on it).
        let broken = protocol_broken(s.message());
        if !from_master && broken {
            let hint =
                if self.config.tls.is_some() { "does it serve TLS?" } else { "if it serves TLS, set THAW_TLS_CA" };
            return ThawError::unavailable(format!(
                "master {} unreachable, or not speaking this client's protocol ({}): {hint}",
                self.config.master,
                s.message()
            ));
        }
        let e = ThawError::from(s);
        if e.kind == thaw_common::ErrorKind::Unavailable && !from_master {
            e.context(format!("master {} unreachable", self.config.master))
        } else {
            e
        }
    }

    pub async fn mkdir(&self, path: &str, recursive: bool, exist_ok: bool) -> Result<FileInfo> {
        self.mkdir_with_mode(path, recursive, exist_ok, None).await
    }

    /// [`Client::mkdir`], the directories it makes given `mode` (none:
    /// 0755); one that exists already keeps its own.
    pub async fn mkdir_with_mode(
        &self,
        path: &str,
        recursive: bool,
        exist_ok: bool,
        mode: Option<u32>,
    ) -> Result<FileInfo> {
        let req = MkdirRequest { path: path.to_string(), recursive, exist_ok, mode };
        let r = self.master.clone().mkdir(req).await.map_err(|s| self.rpc_err(s))?;
        r.into_inner().info.ok_or_else(|| ThawError::internal("mkdir answer without info"))
    }

    pub async fn stat(&self, path: &str) -> Result<FileInfo> {
        Ok(self.stat_blocks(path, false).await?.0)
    }

    /// Status with blocks (replicas ordered by locality to this client) and the
    /// workers that can read the file through from the under-store.
    pub async fn stat_blocks(&self, path: &str, blocks: bool) -> Result<(FileInfo, Vec<WorkerInfo>)> {
        let req = GetStatusRequest { path: path.to_string(), blocks, client: Some(self.config.position.clone()) };
        let r = self.master.clone().get_status(req).await.map_err(|s| self.rpc_err(s))?.into_inner();
        let info = r.info.ok_or_else(|| ThawError::internal("status answer without info"))?;
        Ok((info, r.read_through_workers))
    }

    pub async fn list(&self, path: &str) -> Result<Vec<FileInfo>> {
        self.list_blocks(path, false).await
    }

    /// A listing whose files carry their blocks, replicas ordered by locality
    /// (the whole directory, asked for page by page).
    pub async fn list_blocks(&self, path: &str, blocks: bool) -> Result<Vec<FileInfo>> {
        let mut out = Vec::new();
        self.list_each(path, blocks, |page| {
            out.extend(page);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// A directory's entries handed to `each` one page at a time, in name
    /// order, as they arrive: a listing of millions of entries never waits
    /// for (or holds) all of them. A directory deleted midway ends it with
    /// a not-found error.
    pub async fn list_each(
        &self,
        path: &str,
        blocks: bool,
        mut each: impl FnMut(Vec<FileInfo>) -> Result<()>,
    ) -> Result<()> {
        let mut after = String::new();
        loop {
            let page = self.list_page(path, blocks, &after, LIST_PAGE).await?;
            let more = page.truncated && !page.entries.is_empty();
            if let Some(last) = page.entries.last() {
                after.clone_from(&last.name);
            }
            each(page.entries)?;
            if !more {
                return Ok(());
            }
        }
    }

    /// A page of a directory's entries in name order: those after
    /// `start_after` ("": from the first), at most `limit` (0: all);
    /// `truncated` says more follow.
    pub async fn list_page(
        &self,
        path: &str,
        blocks: bool,
        start_after: &str,
        limit: u32,
    ) -> Result<ListStatusResponse> {
        let req = ListStatusRequest {
            path: path.to_string(),
            blocks,
            client: Some(self.config.position.clone()),
            start_after: start_after.to_string(),
            limit,
        };
        Ok(self.master.clone().list_status(req).await.map_err(|s| self.rpc_err(s))?.into_inner())
    }

    pub async fn delete(&self, path: &str, recursive: bool) -> Result<()> {
        let req = DeleteRequest { path: path.to_string(), recursive, file_id: 0 };
        self.master.clone().delete(req).await.map_err(|s| self.rpc_err(s))?;
        Ok(())
    }

    /// Deletes the file at `path` only if it is still file `file_id` (a
    /// NotFound error if the path names another file, or none).
    pub async fn delete_file(&self, path: &str, file_id: u64) -> Result<()> {
        let req = DeleteRequest { path: path.to_string(), recursive: false, file_id };
        self.master.clone().delete(req).await.map_err(|s| self.rpc_err(s))?;
        Ok(())
    }

    pub async fn rename(&self, src: &str, dst: &str) -> Result<FileInfo> {
        self.rename_with(src, dst, false).await
    }

    /// [`Client::rename`]; `overwrite`: a file at `dst` is replaced in the
    /// same step (POSIX rename(2), HDFS's `Rename.OVERWRITE`), never a
    /// directory.
    pub async fn rename_with(&self, src: &str, dst: &str, overwrite: bool) -> Result<FileInfo> {
        let req = RenameRequest { src: src.to_string(), dst: dst.to_string(), overwrite };
        let r = self.master.clone().rename(req).await.map_err(|s| self.rpc_err(s))?;
        r.into_inner().info.ok_or_else(|| ThawError::internal("rename answer without info"))
    }

    /// Puts a file first in the master's checkpoint order; returns its status
    /// (persisted already, or persisting soon). See [`Client::persist_wait`].
    pub async fn persist(&self, path: &str) -> Result<FileInfo> {
        let req = PersistRequest { path: path.to_string() };
        let r = self.master.clone().persist(req).await.map_err(|s| self.rpc_err(s))?;
        r.into_inner().info.ok_or_else(|| ThawError::internal("persist answer without info"))
    }

    /// Persists a file and waits until its under-store copy is in place, up to
    /// `timeout`. A file lost meanwhile, or one that stays unpersisted past the
    /// timeout, is an error naming its state, what its checkpoint waits for
    /// and the last checkpoint error.
    pub async fn persist_wait(&self, path: &str, timeout: std::time::Duration) -> Result<FileInfo> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut info = self.persist(path).await?;
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            match Persistence::try_from(info.persistence).unwrap_or(Persistence::Unspecified) {
                Persistence::Persisted => return Ok(info),
                Persistence::Lost => {
                    return Err(ThawError::data_lost(format!(
                        "{path} was lost before its checkpoint finished (its worker died)"
                    )));
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                let waiting =
                    if info.persist_waiting.is_empty() { String::new() } else { format!(": {}", info.persist_waiting) };
                let why = if info.persist_error.is_empty() {
                    String::new()
                } else {
                    format!("; last checkpoint error: {}", info.persist_error)
                };
                return Err(ThawError::timeout(format!(
                    "{path} is still {} after {:.1} s{waiting}{why}",
                    json::persistence_name(info.persistence),
                    timeout.as_secs_f64()
                )));
            }
            tokio::time::sleep(pause.min(deadline.saturating_duration_since(tokio::time::Instant::now()))).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(100));
            info = self.stat(path).await?;
        }
    }

    // ---- lineage (Tachyon, section 2.3-2.5) ----

    /// Records a lineage entry before its outputs are written: the program
    /// `command` (argv) with `config` (opaque bytes its framework wrapper
    /// understands) derives `outputs` from the files `inputs` (FIDs, ordered).
    pub async fn submit_dependency(
        &self,
        inputs: &[u64],
        outputs: &[String],
        command: &[String],
        config: &[u8],
        kind: DependencyKind,
    ) -> Result<LineageInfo> {
        let req = SubmitDependencyRequest {
            input_fids: inputs.to_vec(),
            output_paths: outputs.to_vec(),
            command: command.to_vec(),
            config: config.to_vec(),
            kind: kind as i32,
        };
        let r = self.master.clone().submit_dependency(req).await.map_err(|s| self.rpc_err(s))?;
        r.into_inner().lineage.ok_or_else(|| ThawError::internal("lineage answer without lineage"))
    }

    /// A lineage by id (`path` empty) or the one that wrote the file at `path`.
    pub async fn lineage(&self, id: u64, path: &str) -> Result<LineageInfo> {
        let req = GetLineageRequest { lineage_id: id, path: path.to_string() };
        let r = self.master.clone().get_lineage(req).await.map_err(|s| self.rpc_err(s))?;
        r.into_inner().lineage.ok_or_else(|| ThawError::internal("lineage answer without lineage"))
    }

    pub async fn lineages(&self) -> Result<Vec<LineageInfo>> {
        let r = self.master.clone().list_lineage(ListLineageRequest {}).await.map_err(|s| self.rpc_err(s))?;
        Ok(r.into_inner().lineages)
    }

    /// Asks the master to rebuild a lost file from its lineage (`retry`: even
    /// if its lineage failed for good before); returns its status at once.
    pub async fn recompute(&self, path: &str, retry: bool) -> Result<FileInfo> {
        let req = RecomputeRequest { path: path.to_string(), retry };
        let r = self.master.clone().recompute(req).await.map_err(|s| self.rpc_err(s))?;
        r.into_inner().info.ok_or_else(|| ThawError::internal("recompute answer without info"))
    }

    /// Asks for a lost file's rebuild and waits for it, up to `timeout`,
    /// logging progress (at warn level: a reader waiting is worth a line).
    /// An error if the file cannot be rebuilt, or is not rebuilt in time.
    pub async fn wait_rebuilt(&self, path: &str, timeout: std::time::Duration) -> Result<FileInfo> {
        let started = tokio::time::Instant::now();
        let mut info = self.recompute(path, false).await?;
        let mut said = None::<tokio::time::Instant>;
        loop {
            if !info.lost {
                if said.is_some() {
                    tracing::warn!(path, secs = started.elapsed().as_secs_f64(), "rebuilt from lineage");
                }
                return Ok(info);
            }
            let why = &info.rebuild_detail;
            match Rebuild::try_from(info.rebuild).unwrap_or(Rebuild::Unspecified) {
                Rebuild::Failed | Rebuild::Impossible | Rebuild::Off => {
                    return Err(ThawError::data_lost(format!("{path} is lost: {why}")));
                }
                _ => {}
            }
            if started.elapsed() >= timeout {
                return Err(ThawError::timeout(format!(
                    "{path} is lost and was not rebuilt within {:.0} s: {why}",
                    timeout.as_secs_f64()
                )));
            }
            if said.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(5)) {
                tracing::warn!(
                    path,
                    waited_s = started.elapsed().as_secs_f64() as u64,
                    "waiting for a lost file's rebuild: {why}"
                );
                said = Some(tokio::time::Instant::now());
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            info = self.stat(path).await?;
        }
    }

    /// For an external recomputation executor: takes up to `max` lineage reruns.
    pub async fn claim_recomputations(&self, executor: &str, max: u32) -> Result<Vec<RecomputeTask>> {
        let req = ClaimRecomputationsRequest { executor: executor.to_string(), max };
        let r = self.master.clone().claim_recomputations(req).await.map_err(|s| self.rpc_err(s))?;
        Ok(r.into_inner().tasks)
    }

    /// For an external recomputation executor: how a rerun went (`error` empty: it succeeded).
    pub async fn recomputation_done(&self, lineage: u64, attempt: u32, error: &str) -> Result<()> {
        let req = RecomputationDoneRequest { lineage_id: lineage, attempt, error: error.to_string() };
        self.master.clone().recomputation_done(req).await.map_err(|s| self.rpc_err(s))?;
        Ok(())
    }

    pub async fn cluster_status(&self) -> Result<GetClusterStatusResponse> {
        let r = self.master.clone().get_cluster_status(GetClusterStatusRequest {}).await;
        Ok(r.map_err(|s| self.rpc_err(s))?.into_inner())
    }

    /// Opens a complete file for reading.
    pub async fn open(&self, path: &str) -> Result<FileReader> {
        FileReader::open(self.clone(), path).await
    }

    /// Creates a file; bytes go straight to the chosen worker(s) as they are written.
    pub async fn create(&self, path: &str, opts: WriteOptions) -> Result<FileWriter> {
        FileWriter::create(self.clone(), path, opts).await
    }

    /// Reads a whole file.
    pub async fn read_all(&self, path: &str) -> Result<Vec<u8>> {
        let mut r = self.open(path).await?;
        let mut out = Vec::with_capacity(r.info().length as usize);
        r.read_to_end(&mut out).await?;
        Ok(out)
    }

    /// Writes a whole file.
    /// Its length is known: a memory write gets all its memory, or fails, at create.
    pub async fn write_all(&self, path: &str, data: &[u8], opts: WriteOptions) -> Result<FileInfo> {
        let opts = WriteOptions { length: Some(data.len() as u64), ..opts };
        let mut w = self.create(path, opts).await?;
        w.write(data).await?;
        w.close().await
    }

    // ---- jobs and migration ----

    /// Registers `job` with the master and starts moving the blocks of `paths`
    /// (directories expand recursively) into memory. Returns at once with the
    /// job's progress; the job lives while its lease is renewed.
    pub async fn migrate(
        &self,
        job: &str,
        paths: &[String],
        eviction: EvictionMode,
        lease: Option<std::time::Duration>,
    ) -> Result<JobInfo> {
        self.migrate_with_origin(job, paths, eviction, lease, "").await
    }

    /// [`Client::migrate`], also saying who submitted the job: free text shown
    /// with it (`thaw jobs`), at most 200 bytes without control characters.
    /// Empty: the job keeps the origin it has; else it replaces it.
    pub async fn migrate_with_origin(
        &self,
        job: &str,
        paths: &[String],
        eviction: EvictionMode,
        lease: Option<std::time::Duration>,
        origin: &str,
    ) -> Result<JobInfo> {
        let req = MigrateRequest {
            job_id: job.to_string(),
            paths: paths.to_vec(),
            eviction: eviction as i32,
            lease_ms: lease.map(|l| l.as_millis().max(1) as u64).unwrap_or(0),
            origin: origin.to_string(),
        };
        let r = self.master.clone().migrate(req).await.map_err(|s| self.rpc_err(s))?.into_inner();
        r.job.ok_or_else(|| ThawError::internal("migrate answer without job"))
    }

    /// Replaces the job's task counters at the master (absolute values: report
    /// the whole record each time, and again after a master restart, which
    /// forgets them with the job). Returns the job's progress, counters included.
    pub async fn report_job_tasks(&self, job: &str, tasks: JobTasks) -> Result<JobInfo> {
        let req = ReportJobTasksRequest { job_id: job.to_string(), tasks: Some(tasks) };
        let r = self.master.clone().report_job_tasks(req).await.map_err(|s| self.rpc_err(s))?.into_inner();
        r.job.ok_or_else(|| ThawError::internal("task report answer without job"))
    }

    /// Reports what application `job`'s tasks did so far (absolute figures);
    /// the master classifies its cache affinity from them (CAVA, section IV-A).
    pub async fn report_app_usage(&self, req: ReportAppUsageRequest) -> Result<AppCacheInfo> {
        let r = self.master.clone().report_app_usage(req).await.map_err(|s| self.rpc_err(s))?.into_inner();
        r.app.ok_or_else(|| ThawError::internal("usage report answer without application"))
    }

    /// Workers' memory, applications and files as the cache manager sees them.
    pub async fn cache_report(&self, max_files: u32) -> Result<GetCacheReportResponse> {
        let r = self.master.clone().get_cache_report(GetCacheReportRequest { max_files }).await;
        Ok(r.map_err(|s| self.rpc_err(s))?.into_inner())
    }

    /// Releases the job's blocks under `paths`, or all of them (ending the job)
    /// if `paths` is empty. Returns the job's state if it goes on.
    pub async fn evict(&self, job: &str, paths: &[String]) -> Result<Option<JobInfo>> {
        let req = EvictRequest { job_id: job.to_string(), paths: paths.to_vec() };
        Ok(self.master.clone().evict(req).await.map_err(|s| self.rpc_err(s))?.into_inner().job)
    }

    /// Renews the jobs' leases; returns those the master does not know (it
    /// restarted, or the lease ran out): their submitters should migrate again.
    pub async fn renew_leases(&self, jobs: &[String]) -> Result<Vec<String>> {
        let req = RenewLeaseRequest { job_ids: jobs.to_vec() };
        Ok(self.master.clone().renew_lease(req).await.map_err(|s| self.rpc_err(s))?.into_inner().unknown)
    }

    /// All jobs (or one), with the planner's policy and priority.
    pub async fn jobs(&self, job: Option<&str>) -> Result<ListJobsResponse> {
        let req = ListJobsRequest { job_id: job.unwrap_or_default().to_string() };
        Ok(self.master.clone().list_jobs(req).await.map_err(|s| self.rpc_err(s))?.into_inner())
    }

    /// Finished and dropped migrations with sequence numbers from `since` on.
    pub async fn migration_events(&self, since: u64, limit: u32) -> Result<MigrationEventsResponse> {
        let req = MigrationEventsRequest { since, limit };
        Ok(self.master.clone().migration_events(req).await.map_err(|s| self.rpc_err(s))?.into_inner())
    }

    /// A worker's tier use and per-job counters, asked of the worker itself.
    pub async fn worker_stats(&self, data_address: &str) -> Result<WorkerStats> {
        data::worker_stats(&self.pool, data_address, (&self.config.job_id, self.token())).await
    }

    /// Runs `streams` synthetic readers on a worker's emulated `device` ("disk" or
    /// "ufs"; 0 stops them), as the dd jobs of DYRS, section V-C; evaluation only, and
    /// the worker must model that device. Returns the worker's stats after.
    pub async fn device_control(&self, data_address: &str, device: &str, streams: u32) -> Result<WorkerStats> {
        data::device_control(&self.pool, data_address, (&self.config.job_id, self.token()), device, streams).await
    }

    pub(crate) fn pool(&self) -> &data::Pool {
        &self.pool
    }

    pub(crate) fn master(&self) -> MasterClient {
        self.master.clone()
    }

    /// chmod, chown, chgrp of `path` (each `None`: unchanged).
    pub async fn set_attributes(
        &self,
        path: &str,
        mode: Option<u32>,
        owner: Option<String>,
        group: Option<String>,
    ) -> Result<FileInfo> {
        let req = SetAttributesRequest { path: path.to_string(), mode, owner, group };
        let r = self.master.clone().set_attributes(req).await.map_err(|s| self.rpc_err(s))?;
        r.into_inner().info.ok_or_else(|| ThawError::internal("set-attributes answer without info"))
    }

    /// A token from the master: this client's own (`user` empty), or, for a
    /// superuser, `user`'s in `groups`. `ttl_ms` 0: the master's default.
    pub async fn issue_token(&self, user: &str, groups: &[String], ttl_ms: u64) -> Result<IssueTokenResponse> {
        let req = IssueTokenRequest { user: user.to_string(), groups: groups.to_vec(), ttl_ms };
        Ok(self.master.clone().issue_token(req).await.map_err(|s| self.rpc_err(s))?.into_inner())
    }

    /// A new S3 access key (the gateway's) for this client's user, or, for a
    /// superuser, `user`'s in `groups`; the answer holds its secret.
    pub async fn create_s3_key(&self, user: &str, groups: &[String], job: &str) -> Result<CreateS3KeyResponse> {
        let req = CreateS3KeyRequest { user: user.to_string(), groups: groups.to_vec(), job: job.to_string() };
        Ok(self.master.clone().create_s3_key(req).await.map_err(|s| self.rpc_err(s))?.into_inner())
    }

    /// S3 keys: this client's user's (a superuser's: all, or `user`'s), or
    /// the one `access_key`.
    pub async fn list_s3_keys(&self, user: &str, access_key: &str) -> Result<Vec<S3KeyRecord>> {
        let req = ListS3KeysRequest { user: user.to_string(), access_key: access_key.to_string() };
        Ok(self.master.clone().list_s3_keys(req).await.map_err(|s| self.rpc_err(s))?.into_inner().keys)
    }

    pub async fn delete_s3_key(&self, access_key: &str) -> Result<()> {
        let req = DeleteS3KeyRequest { access_key: access_key.to_string() };
        self.master.clone().delete_s3_key(req).await.map_err(|s| self.rpc_err(s))?;
        Ok(())
    }

    /// Sets (empty: clears) the job `access_key`'s requests count against.
    pub async fn set_s3_key_job(&self, access_key: &str, job: &str) -> Result<S3KeyRecord> {
        let req = SetS3KeyJobRequest { access_key: access_key.to_string(), job: job.to_string() };
        let r = self.master.clone().set_s3_key_job(req).await.map_err(|s| self.rpc_err(s))?.into_inner();
        r.keys.into_iter().next().ok_or_else(|| ThawError::internal("set-s3-key-job answer without the key"))
    }

    /// Whom the master takes this client for.
    pub async fn who_am_i(&self) -> Result<WhoAmIResponse> {
        Ok(self.master.clone().who_am_i(WhoAmIRequest {}).await.map_err(|s| self.rpc_err(s))?.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_connection_cut_by_a_tls_port_is_a_protocol_break() {
        for m in ["h2 protocol error: http2 error", "transport error", "operation was canceled"] {
            assert!(super::protocol_broken(m), "{m}");
        }
        assert!(!super::protocol_broken("tcp connect error: Connection refused (os error 111)"));
    }
}

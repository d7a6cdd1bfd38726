//! `thaw._native`: the Rust client under the Python package. Every call that may
//! wait on the network or a disk releases the GIL; reads of a block file on this
//! host can hand Python a read-only buffer over the mapped file (no copy at all).
//! The Python layer (`python/thaw/`) builds the public API on these classes.

mod buffer;
mod convert;
mod owned;
mod reader;
mod runtime;

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use thaw_client::{Client, FileWriter, WriteOptions};
use thaw_common::ThawError;
use thaw_common::proto::{DependencyKind, EvictionMode, LineageInfo};

use crate::buffer::RawView;
use crate::convert::{json_to_py, thaw_err};
use crate::owned::Owned;
use crate::runtime::{block_on, wait};

/// Bytes between progress reports of `put_file` and `get_file`.
const PROGRESS_STEP: u64 = 32 << 20;

/// A connection to one Thaw cluster, with a job id carried by every read and write.
#[pyclass(module = "thaw._native", frozen)]
struct NativeClient {
    client: Owned<Client>,
}

const CLIENT: &str = "this Thaw client";

impl NativeClient {
    /// The client, in the process that made it (a handle: clones share connections).
    fn c(&self) -> PyResult<Client> {
        Ok(self.client.get(CLIENT)?.clone())
    }
}

#[pymethods]
impl NativeClient {
    /// `master`: host:port (default `THAW_MASTER`, then 127.0.0.1:19998); the other
    /// settings default to the environment as for the CLI (`THAW_JOB_ID`,
    /// `THAW_HOST`, `THAW_RACK`, `THAW_WORKER`, `THAW_SHORT_CIRCUIT`, `THAW_READ_CACHE`).
    #[new]
    #[pyo3(signature = (master=None, job_id=None, host=None, rack=None, worker=None, short_circuit=None, read_cache=None, token=None, secret_file=None, tls_ca=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        master: Option<String>,
        job_id: Option<String>,
        host: Option<String>,
        rack: Option<String>,
        worker: Option<String>,
        short_circuit: Option<bool>,
        read_cache: Option<String>,
        token: Option<String>,
        secret_file: Option<String>,
        tls_ca: Option<String>,
    ) -> PyResult<Self> {
        // One parser of client options for every binding (thaw_client::connect_with).
        let named = [
            ("master", master),
            ("job", job_id),
            ("host", host),
            ("rack", rack),
            ("worker", worker),
            ("short_circuit", short_circuit.map(|b| b.to_string())),
            ("read_cache", read_cache),
            ("token", token),
            ("secret_file", secret_file),
            ("tls_ca", tls_ca),
        ];
        let options: Vec<(String, String)> =
            named.into_iter().filter_map(|(k, v)| v.map(|v| (k.to_string(), v))).collect();
        let client = runtime::enter(|| thaw_client::connect_with(&options)).map_err(thaw_err)?;
        Ok(NativeClient { client: Owned::new(client) })
    }

    #[getter]
    fn master(&self) -> PyResult<String> {
        Ok(self.c()?.config().master.clone())
    }

    #[getter]
    fn job_id(&self) -> PyResult<String> {
        Ok(self.c()?.config().job_id.clone())
    }

    /// The same cluster and connections, with another job id.
    fn with_job(&self, job_id: String) -> PyResult<NativeClient> {
        Ok(NativeClient { client: Owned::new(self.c()?.with_job(job_id)) })
    }

    /// The same cluster and connections, its writes rebuilding lineage
    /// `lineage`'s lost outputs (a rerun in this process; 0: none).
    fn with_recovery(&self, lineage: u64) -> PyResult<NativeClient> {
        Ok(NativeClient { client: Owned::new(self.c()?.with_recovery(lineage)) })
    }

    /// A file's or directory's status as a dict; with `blocks`, each block and its
    /// replicas (ordered by locality to this client).
    #[pyo3(signature = (path, blocks=false))]
    fn stat(&self, py: Python<'_>, path: String, blocks: bool) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let (info, _) = wait(py, async move { c.stat_blocks(&path, blocks).await })?;
        json_to_py(py, &thaw_client::json::file_json(&info))
    }

    /// A directory's entries (a file's own status if `path` is a file); with
    /// `blocks`, each file's blocks and replicas.
    #[pyo3(signature = (path, blocks=false))]
    fn list(&self, py: Python<'_>, path: String, blocks: bool) -> PyResult<Vec<Py<PyAny>>> {
        let c = self.c()?;
        let entries = wait(py, async move { c.list_blocks(&path, blocks).await })?;
        entries.iter().map(|f| json_to_py(py, &thaw_client::json::file_json(f))).collect()
    }

    /// One page of a directory's entries: those whose names sort after
    /// `start_after` ("": from the first), at most `limit` (the master
    /// answers 1,000 at most), and whether more follow.
    #[pyo3(signature = (path, blocks=false, start_after=String::new(), limit=1000))]
    fn list_page(
        &self,
        py: Python<'_>,
        path: String,
        blocks: bool,
        start_after: String,
        limit: u32,
    ) -> PyResult<(Vec<Py<PyAny>>, bool)> {
        let c = self.c()?;
        let page = wait(py, async move { c.list_page(&path, blocks, &start_after, limit).await })?;
        let entries: PyResult<Vec<_>> =
            page.entries.iter().map(|f| json_to_py(py, &thaw_client::json::file_json(f))).collect();
        Ok((entries?, page.truncated))
    }

    #[pyo3(signature = (path, recursive=false, exist_ok=false))]
    fn mkdir(&self, py: Python<'_>, path: String, recursive: bool, exist_ok: bool) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let info = wait(py, async move { c.mkdir(&path, recursive, exist_ok).await })?;
        json_to_py(py, &thaw_client::json::file_json(&info))
    }

    /// chmod, chown, chgrp of `path` (each `None`: unchanged).
    #[pyo3(signature = (path, mode=None, owner=None, group=None))]
    fn set_attributes(
        &self,
        py: Python<'_>,
        path: String,
        mode: Option<u32>,
        owner: Option<String>,
        group: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let info = wait(py, async move { c.set_attributes(&path, mode, owner, group).await })?;
        json_to_py(py, &thaw_client::json::file_json(&info))
    }

    /// A token from the master: (token, expires_ms).
    #[pyo3(signature = (user=String::new(), groups=Vec::new(), ttl_ms=0))]
    fn issue_token(&self, py: Python<'_>, user: String, groups: Vec<String>, ttl_ms: u64) -> PyResult<(String, u64)> {
        let c = self.c()?;
        let t = wait(py, async move { c.issue_token(&user, &groups, ttl_ms).await })?;
        Ok((t.token, t.expires_ms))
    }

    /// Whom the master takes this client for: (user, groups, superuser, security).
    fn who_am_i(&self, py: Python<'_>) -> PyResult<(String, Vec<String>, bool, bool)> {
        let c = self.c()?;
        let me = wait(py, async move { c.who_am_i().await })?;
        Ok((me.user, me.groups, me.superuser, me.security))
    }

    #[pyo3(signature = (path, recursive=false))]
    fn delete(&self, py: Python<'_>, path: String, recursive: bool) -> PyResult<()> {
        let c = self.c()?;
        wait(py, async move { c.delete(&path, recursive).await })
    }

    fn rename(&self, py: Python<'_>, src: String, dst: String) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let info = wait(py, async move { c.rename(&src, &dst).await })?;
        json_to_py(py, &thaw_client::json::file_json(&info))
    }

    /// The cluster: under-store, counts, workers with tiers and per-job counters.
    fn status(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let s = wait(py, async move { c.cluster_status().await })?;
        json_to_py(py, &thaw_client::json::status_json(&s))
    }

    /// One worker's tiers and per-job counters, asked of the worker itself (fresher
    /// than the master's copy, which comes with heartbeats).
    fn worker_stats(&self, py: Python<'_>, address: String) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let s = wait(py, async move { c.worker_stats(&address).await })?;
        json_to_py(py, &thaw_client::json::worker_stats_json(&s))
    }

    /// Registers a job and starts moving the blocks of `paths` into memory;
    /// returns at once with the job's progress. `lease_ms` 0: the master's default.
    /// `origin`: who submits the job (free text; empty: the job keeps its own).
    #[pyo3(signature = (job, paths, eviction="explicit", lease_ms=0, origin=String::new()))]
    fn migrate(
        &self,
        py: Python<'_>,
        job: String,
        paths: Vec<String>,
        eviction: &str,
        lease_ms: u64,
        origin: String,
    ) -> PyResult<Py<PyAny>> {
        let eviction = match eviction {
            "explicit" => EvictionMode::Explicit,
            "implicit" => EvictionMode::Implicit,
            other => {
                return Err(thaw_err(ThawError::invalid(format!("eviction {other:?}: explicit or implicit"))));
            }
        };
        let lease = (lease_ms > 0).then(|| std::time::Duration::from_millis(lease_ms));
        let c = self.c()?;
        let info = wait(py, async move { c.migrate_with_origin(&job, &paths, eviction, lease, &origin).await })?;
        json_to_py(py, &thaw_client::json::job_info_json(&info))
    }

    /// Reports what application `job`'s tasks did so far (absolute figures:
    /// each report replaces the last); returns how the cache manager sees it.
    #[pyo3(signature = (job, name="", wall_seconds=0.0, cpu_seconds=0.0, tasks=0, write_bytes=0, inputs=Vec::new(), declared_affinity=None, ended=false, reporter=String::new()))]
    #[allow(clippy::too_many_arguments)]
    fn report_app_usage(
        &self,
        py: Python<'_>,
        job: String,
        name: &str,
        wall_seconds: f64,
        cpu_seconds: f64,
        tasks: u64,
        write_bytes: u64,
        inputs: Vec<String>,
        declared_affinity: Option<f64>,
        ended: bool,
        reporter: String,
    ) -> PyResult<Py<PyAny>> {
        let req = thaw_common::proto::ReportAppUsageRequest {
            job_id: job,
            name: name.to_string(),
            wall_seconds,
            cpu_seconds,
            tasks,
            write_bytes,
            inputs,
            declared_affinity,
            ended,
            reporter,
        };
        let c = self.c()?;
        let info = wait(py, async move { c.report_app_usage(req).await })?;
        json_to_py(py, &thaw_client::json::app_cache_json(&info))
    }

    /// Workers' memory, applications and files as the cache manager sees them.
    #[pyo3(signature = (max_files=100))]
    fn cache_report(&self, py: Python<'_>, max_files: u32) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let r = wait(py, async move { c.cache_report(max_files).await })?;
        json_to_py(py, &thaw_client::json::cache_report_json(&r))
    }

    /// Replaces the job's task counters at the master (absolute values); returns
    /// the job's progress.
    #[pyo3(signature = (job, tasks, placed, done, memory_local, inputs_in_memory, delay_ms_median=0, delay_ms_p99=0, delay_ms_max=0))]
    #[allow(clippy::too_many_arguments)]
    fn report_job_tasks(
        &self,
        py: Python<'_>,
        job: String,
        tasks: u64,
        placed: u64,
        done: u64,
        memory_local: u64,
        inputs_in_memory: u64,
        delay_ms_median: u64,
        delay_ms_p99: u64,
        delay_ms_max: u64,
    ) -> PyResult<Py<PyAny>> {
        let t = thaw_common::proto::JobTasks {
            tasks,
            placed,
            done,
            memory_local,
            inputs_in_memory,
            delay_ms_median,
            delay_ms_p99,
            delay_ms_max,
        };
        let c = self.c()?;
        let info = wait(py, async move { c.report_job_tasks(&job, t).await })?;
        json_to_py(py, &thaw_client::json::job_info_json(&info))
    }

    /// Releases a job's blocks under `paths` (all, ending the job, if empty);
    /// the job's progress if it goes on, else None.
    #[pyo3(signature = (job, paths=Vec::new()))]
    fn evict(&self, py: Python<'_>, job: String, paths: Vec<String>) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let left = wait(py, async move { c.evict(&job, &paths).await })?;
        match left {
            Some(info) => json_to_py(py, &thaw_client::json::job_info_json(&info)),
            None => Ok(py.None()),
        }
    }

    /// Renews leases; returns the job ids the master does not know.
    fn renew_leases(&self, py: Python<'_>, jobs: Vec<String>) -> PyResult<Vec<String>> {
        let c = self.c()?;
        wait(py, async move { c.renew_leases(&jobs).await })
    }

    /// Jobs with migration state (all, or one), with the planner's settings.
    #[pyo3(signature = (job=None))]
    fn jobs(&self, py: Python<'_>, job: Option<String>) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let r = wait(py, async move { c.jobs(job.as_deref()).await })?;
        let v = serde_json::json!({
            "policy": r.policy,
            "priority": r.priority,
            "jobs": r.jobs.iter().map(thaw_client::json::job_info_json).collect::<Vec<_>>(),
        });
        json_to_py(py, &v)
    }

    /// Migrations that ended (block, worker, source, start/end ms, outcome), from
    /// sequence number `since` on, and the next one to ask for.
    #[pyo3(signature = (since=0, limit=0))]
    fn migration_events(&self, py: Python<'_>, since: u64, limit: u32) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let r = wait(py, async move { c.migration_events(since, limit).await })?;
        let v = serde_json::json!({
            "events": r.events.iter().map(thaw_client::json::event_json).collect::<Vec<_>>(),
            "next": r.next,
        });
        json_to_py(py, &v)
    }

    /// Runs `streams` synthetic readers on the emulated `device` ("disk" or "ufs")
    /// of the worker at `address` (0 stops them); returns that worker's stats,
    /// devices included. The worker must have been started with a device model.
    fn device_control(&self, py: Python<'_>, address: String, device: String, streams: u32) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let s = wait(py, async move { c.device_control(&address, &device, streams).await })?;
        json_to_py(py, &thaw_client::json::worker_stats_json(&s))
    }

    /// Puts a file first in the checkpoint order; with `wait`, returns once it
    /// is persisted (or fails after `timeout` seconds, or if it is lost).
    #[pyo3(signature = (path, wait_persisted=true, timeout=300.0))]
    fn persist(&self, py: Python<'_>, path: String, wait_persisted: bool, timeout: f64) -> PyResult<Py<PyAny>> {
        if !timeout.is_finite() || timeout < 0.0 {
            return Err(thaw_err(ThawError::invalid("timeout must be a number of seconds >= 0")));
        }
        let c = self.c()?;
        let info = wait(py, async move {
            if wait_persisted {
                c.persist_wait(&path, std::time::Duration::from_secs_f64(timeout)).await
            } else {
                c.persist(&path).await
            }
        })?;
        json_to_py(py, &thaw_client::json::file_json(&info))
    }

    /// Records a lineage entry (Tachyon, section 2.5): `command` (argv) with
    /// `config` derives `outputs` (paths, not yet written) from `inputs` (FIDs).
    /// `kind`: "narrow" or "wide".
    #[pyo3(signature = (inputs, outputs, command, config=Vec::new(), kind="wide"))]
    fn submit_dependency(
        &self,
        py: Python<'_>,
        inputs: Vec<u64>,
        outputs: Vec<String>,
        command: Vec<String>,
        config: Vec<u8>,
        kind: &str,
    ) -> PyResult<Py<PyAny>> {
        let kind = match kind {
            "narrow" => DependencyKind::Narrow,
            "wide" => DependencyKind::Wide,
            other => return Err(thaw_err(ThawError::invalid(format!("kind {other:?}: narrow or wide")))),
        };
        let c = self.c()?;
        let l = wait(py, async move { c.submit_dependency(&inputs, &outputs, &command, &config, kind).await })?;
        lineage_to_py(py, &l)
    }

    /// A lineage by id, or (id 0) the one that wrote the file at `path`.
    #[pyo3(signature = (lineage_id=0, path=String::new()))]
    fn lineage(&self, py: Python<'_>, lineage_id: u64, path: String) -> PyResult<Py<PyAny>> {
        let c = self.c()?;
        let l = wait(py, async move { c.lineage(lineage_id, &path).await })?;
        lineage_to_py(py, &l)
    }

    /// Asks for a lost file's rebuild from lineage; with `wait_rebuilt`,
    /// returns once it is available (or fails after `timeout` seconds, or at
    /// once if it cannot be rebuilt).
    #[pyo3(signature = (path, wait_rebuilt=true, retry=false, timeout=600.0))]
    fn recompute(
        &self,
        py: Python<'_>,
        path: String,
        wait_rebuilt: bool,
        retry: bool,
        timeout: f64,
    ) -> PyResult<Py<PyAny>> {
        if !timeout.is_finite() || timeout < 0.0 {
            return Err(thaw_err(ThawError::invalid("timeout must be a number of seconds >= 0")));
        }
        let c = self.c()?;
        let info = wait(py, async move {
            let info = c.recompute(&path, retry).await?;
            if wait_rebuilt && info.lost {
                c.wait_rebuilt(&path, std::time::Duration::from_secs_f64(timeout)).await
            } else {
                Ok(info)
            }
        })?;
        json_to_py(py, &thaw_client::json::file_json(&info))
    }

    /// For an external recomputation executor: up to `max` lineage reruns, each
    /// a dict (lineage_id, attempt, command, config bytes, env, timeout_ms).
    #[pyo3(signature = (executor, max=1))]
    fn claim_recomputations(&self, py: Python<'_>, executor: String, max: u32) -> PyResult<Vec<Py<PyAny>>> {
        let c = self.c()?;
        let tasks = wait(py, async move { c.claim_recomputations(&executor, max).await })?;
        tasks
            .iter()
            .map(|t| {
                let v = serde_json::json!({
                    "lineage_id": t.lineage_id,
                    "attempt": t.attempt,
                    "command": t.command,
                    "env": t.env,
                    "timeout_ms": t.timeout_ms,
                });
                let d = json_to_py(py, &v)?;
                d.bind(py).set_item("config", pyo3::types::PyBytes::new(py, &t.config))?;
                Ok(d)
            })
            .collect()
    }

    /// For an external recomputation executor: how a rerun went.
    #[pyo3(signature = (lineage_id, attempt, error=String::new()))]
    fn recomputation_done(&self, py: Python<'_>, lineage_id: u64, attempt: u32, error: String) -> PyResult<()> {
        let c = self.c()?;
        wait(py, async move { c.recomputation_done(lineage_id, attempt, &error).await })
    }

    /// Every lineage entry.
    fn lineages(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let c = self.c()?;
        let all = wait(py, async move { c.lineages().await })?;
        all.iter().map(|l| lineage_to_py(py, l)).collect()
    }

    /// Opens a complete file for reading. A lost file with lineage is waited
    /// for (its rebuild asked for) unless `wait_rebuild` is false: then it is
    /// a `DataLost` error at once.
    #[pyo3(signature = (path, wait_rebuild=true))]
    fn open(&self, py: Python<'_>, path: String, wait_rebuild: bool) -> PyResult<reader::NativeReader> {
        let c = if wait_rebuild { self.c()? } else { self.c()?.without_rebuild_wait() };
        let r = wait(py, async move { c.open(&path).await })?;
        Ok(reader::NativeReader::new(r))
    }

    /// Creates a file for writing. `write_type`: must-cache, async-through,
    /// cache-through, through, or replicated:N. `block_size` 0: the master's
    /// default. `temporary`: never checkpointed unless persisted (async-through).
    /// `length`: the file's length if known (0: not known): a must-cache or
    /// async-through write then gets all its memory, or fails, at once.
    #[pyo3(signature = (path, write_type="cache-through", block_size=0, overwrite=false, recursive=true, temporary=false, length=0))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        py: Python<'_>,
        path: String,
        write_type: &str,
        block_size: u64,
        overwrite: bool,
        recursive: bool,
        temporary: bool,
        length: u64,
    ) -> PyResult<NativeWriter> {
        let opts = WriteOptions {
            length: (length > 0).then_some(length),
            ..write_options(write_type, block_size, overwrite, recursive, temporary)?
        };
        let c = self.c()?;
        let w = wait(py, async move { c.create(&path, opts).await })?;
        let path = w.info().path.clone();
        Ok(NativeWriter { writer: Owned::new(Mutex::new(Some(w))), path })
    }

    /// Copies a local file into Thaw; `progress(n)` is called after each chunk with
    /// the bytes it moved. Returns the new file's status.
    #[pyo3(signature = (local, path, write_type="cache-through", block_size=0, overwrite=false, progress=None, temporary=false))]
    #[allow(clippy::too_many_arguments)]
    fn put_file(
        &self,
        py: Python<'_>,
        local: std::path::PathBuf,
        path: String,
        write_type: &str,
        block_size: u64,
        overwrite: bool,
        progress: Option<Py<PyAny>>,
        temporary: bool,
    ) -> PyResult<Py<PyAny>> {
        let opts = write_options(write_type, block_size, overwrite, true, temporary)?;
        let c = self.c()?;
        let info = wait(py, async move {
            let file = std::fs::File::open(&local)
                .map_err(|e| ThawError::from(e).context(format!("cannot open {}", local.display())))?;
            let len = file
                .metadata()
                .map_err(|e| ThawError::from(e).context(format!("cannot open {}", local.display())))?
                .len();
            let mut w = c.create(&path, WriteOptions { length: Some(len), ..opts }).await?;
            // In steps when a progress bar wants to hear (each a kernel copy on this host).
            let step = if progress.is_some() { PROGRESS_STEP } else { u64::MAX };
            let mut at = 0u64;
            while at < len {
                let n = w.write_from_file(&file, at, step.min(len - at)).await?;
                if n == 0 {
                    break;
                }
                at += n;
                if let Err(e) = report(&progress, n as usize) {
                    w.abort().await;
                    return Ok(Err(e));
                }
            }
            Ok(Ok(w.close().await?))
        })??;
        json_to_py(py, &thaw_client::json::file_json(&info))
    }

    /// Copies a Thaw file to a local file (written beside it, then renamed into
    /// place, so a failed copy leaves no partial file). `progress` as for `put_file`.
    #[pyo3(signature = (path, local, progress=None))]
    fn get_file(
        &self,
        py: Python<'_>,
        path: String,
        local: std::path::PathBuf,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
        let c = self.c()?;
        wait(py, async move {
            let mut r = c.open(&path).await?;
            let name = local.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            let tmp = local.with_file_name(format!(".{name}.thaw-part"));
            let out = std::fs::File::create(&tmp)
                .map_err(|e| ThawError::from(e).context(format!("cannot create {}", tmp.display())))?;
            let copied = async {
                let step = if progress.is_some() { PROGRESS_STEP } else { u64::MAX };
                let mut total = 0u64;
                loop {
                    let n = r.copy_to(&out, step).await.map_err(|e| e.context(format!("writing {}", tmp.display())))?;
                    if n == 0 {
                        break;
                    }
                    total += n;
                    if let Err(e) = report(&progress, n as usize) {
                        return Ok(Err(e));
                    }
                }
                std::fs::rename(&tmp, &local)
                    .map_err(|e| ThawError::from(e).context(format!("cannot create {}", local.display())))?;
                Ok(Ok(total))
            }
            .await;
            if !matches!(copied, Ok(Ok(_))) {
                let _ = std::fs::remove_file(&tmp);
            }
            copied
        })?
    }
}

/// A lineage as a dict, its config as bytes.
fn lineage_to_py(py: Python<'_>, l: &LineageInfo) -> PyResult<Py<PyAny>> {
    let d = json_to_py(py, &thaw_client::json::lineage_json(l))?;
    d.bind(py).set_item("config", pyo3::types::PyBytes::new(py, &l.config))?;
    Ok(d)
}

/// Calls a Python progress callback (taking the GIL for the call only).
fn report(progress: &Option<Py<PyAny>>, n: usize) -> PyResult<()> {
    match progress {
        Some(cb) => Python::attach(|py| cb.call1(py, (n,)).map(drop)),
        None => Ok(()),
    }
}

fn write_options(
    write_type: &str,
    block_size: u64,
    overwrite: bool,
    recursive: bool,
    temporary: bool,
) -> PyResult<WriteOptions> {
    let (write_type, replication) = thaw_client::parse_write_type(write_type).map_err(thaw_err)?;
    Ok(WriteOptions { write_type, block_size, replication, recursive, overwrite, temporary, ..Default::default() })
}

/// A file being written. Bytes stream to the chosen workers as they come; `close`
/// completes the file, `abort` (or an error) deletes what was written. The lock
/// is only ever taken with the GIL released (a thread holding the GIL must never
/// wait on a writer that waits for the GIL).
#[pyclass(module = "thaw._native", frozen)]
struct NativeWriter {
    writer: Owned<Mutex<Option<FileWriter>>>,
    path: String,
}

impl NativeWriter {
    fn slot(&self) -> PyResult<&Mutex<Option<FileWriter>>> {
        self.writer.get("this Thaw file")
    }

    fn take(&self, py: Python<'_>) -> PyResult<FileWriter> {
        let slot = self.slot()?;
        py.detach(|| slot.lock().unwrap_or_else(|e| e.into_inner()).take())
            .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("{} is closed", self.path)))
    }
}

#[pymethods]
impl NativeWriter {
    #[getter]
    fn path(&self) -> String {
        self.path.clone()
    }

    /// Bytes accepted so far.
    #[getter]
    fn written(&self, py: Python<'_>) -> PyResult<u64> {
        let slot = self.slot()?;
        Ok(py.detach(|| slot.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map_or(0, FileWriter::written)))
    }

    /// Writes bytes, or the bytes of any contiguous buffer (bytearray, memoryview,
    /// numpy array of any dtype, pickle buffers).
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let slot = self.slot()?;
        let backed: PyBackedBytes;
        let view: RawView;
        let (addr, len) = if let Ok(b) = data.extract::<PyBackedBytes>() {
            backed = b;
            (backed.as_ptr() as usize, backed.len())
        } else {
            view = RawView::get(data, false)?;
            (view.addr(), view.len())
        };
        let r = py.detach(|| {
            // SAFETY: `backed` or `view` keeps these bytes alive and unmoved until
            // this method returns.
            let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
            let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
            let Some(w) = guard.as_mut() else { return Ok(Err(())) };
            let r = block_on(w.write(bytes));
            if r.is_err() {
                // The writer has already deleted the partial file; it is done.
                guard.take();
            }
            r.map(Ok)
        });
        match r {
            Ok(Ok(())) => Ok(len),
            Ok(Err(())) => Err(pyo3::exceptions::PyValueError::new_err(format!("{} is closed", self.path))),
            Err(e) => Err(thaw_err(e)),
        }
    }

    /// Completes the file; returns its status.
    fn close(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let w = self.take(py)?;
        let info = wait(py, w.close())?;
        json_to_py(py, &thaw_client::json::file_json(&info))
    }

    /// Gives the write up; the partial file is deleted. A no-op once closed.
    fn abort(&self, py: Python<'_>) {
        if let Ok(w) = self.take(py) {
            py.detach(|| block_on(w.abort()));
        }
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        let slot = self.slot()?;
        Ok(py.detach(|| slot.lock().unwrap_or_else(|e| e.into_inner()).is_none()))
    }
}

impl Drop for NativeWriter {
    /// A writer dropped without `close` is an abandoned write: delete it (in the
    /// process that opened it only).
    fn drop(&mut self) {
        if let Ok(slot) = self.writer.get("")
            && let Some(w) = slot.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            block_on(w.abort());
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeClient>()?;
    m.add_class::<NativeWriter>()?;
    m.add_class::<reader::NativeReader>()?;
    m.add_class::<reader::BlockBuffer>()?;
    m.add("DEFAULT_MASTER", thaw_client::DEFAULT_MASTER)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

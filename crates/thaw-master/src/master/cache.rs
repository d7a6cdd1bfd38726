//! The master's cache management calls (CAVA, section IV): applications report what
//! their tasks measurably do, the master classifies their cache affinity and
//! computes their caching probabilities (see [`crate::affinity`]), workers get
//! the table with each full heartbeat answer, and the cache report shows
//! workers, applications and files together.

use std::collections::HashMap;

use crate::affinity::{Access, App, FileView, Usage};

use super::*;

/// The applications are reclassified at most this often (heartbeats of many
/// workers would otherwise each redo it).
const REFRESH_EVERY: Duration = Duration::from_millis(200);

/// Input paths of one report looked up in the under-store at most.
const RESOLVE_INPUTS: usize = 1000;

/// Files a cache report lists by default.
const DEFAULT_FILES: usize = 100;

/// A path as a reporter may give it (`thaw://host:port/p`, `thaw:///p`, `/p`),
/// as the namespace's path.
fn namespace_path(p: &str) -> Option<String> {
    let rest = match p.strip_prefix("thaw://") {
        Some(r) => &r[r.find('/')?..],
        None => p,
    };
    path::normalize(rest).ok()
}

impl Master {
    /// Takes an application's figures (absolute so far) and answers with how
    /// the cache manager sees it now.
    pub async fn report_app_usage(&self, req: ReportAppUsageRequest) -> Result<ReportAppUsageResponse> {
        jobs::check_job_id(&req.job_id)?;
        let inputs: Vec<String> = req.inputs.iter().filter_map(|p| namespace_path(p)).collect();
        // Inputs the namespace has not loaded from the under-store yet are
        // looked up now, so the caching probability knows their sizes (a path
        // that does not exist counts as empty; the job's read will say so).
        for p in inputs.iter().take(RESOLVE_INPUTS) {
            let _ = self.resolve(p).await;
        }
        let usage = Usage {
            name: req.name,
            wall_seconds: req.wall_seconds,
            cpu_seconds: req.cpu_seconds,
            tasks: req.tasks,
            write_bytes: req.write_bytes,
            inputs,
            declared: req.declared_affinity,
            ended: req.ended,
            reporter: req.reporter,
        };
        let now = Instant::now();
        let mut st = self.write();
        st.apps.report(&req.job_id, usage, now)?;
        Self::refresh_apps(&mut st, now, true);
        let app = st.apps.get(&req.job_id).map(|a| app_info(a, now));
        Ok(ReportAppUsageResponse { app })
    }

    /// Reclassifies applications and recomputes caching probabilities from
    /// the workers' latest counters and file views (`force`: even if done
    /// lately).
    pub(super) fn refresh_apps(st: &mut State, now: Instant, force: bool) {
        if !force && st.apps_refreshed.is_some_and(|t| now.saturating_duration_since(t) < REFRESH_EVERY) {
            return;
        }
        st.apps_refreshed = Some(now);
        let mut access: HashMap<String, Access> = HashMap::new();
        let mut capacity = 0u64;
        let mut files: HashMap<String, FileView> = HashMap::new();
        for w in st.cluster.workers().filter(|w| w.alive) {
            for j in &w.jobs {
                let a = access.entry(j.job_id.clone()).or_default();
                a.bytes_written += j.bytes_written;
                a.bytes_from_memory += j.bytes_from_memory;
                a.bytes_cold += j.bytes_cold;
            }
            if let Some(m) = w.tier(Tier::Mem) {
                // Memory held for jobs is the live applications' own inputs
                // (counted in their needs), so only unpersisted blocks are
                // out of every application's reach.
                capacity += m.capacity.saturating_sub(m.pinned);
            }
            for f in &w.cache_files {
                let Some(ino) = st.ns.get(f.file_id) else { continue };
                let v = files.entry(st.ns.path_of(f.file_id)).or_default();
                v.length = ino.length();
                v.cached_bytes += f.cached_bytes;
                v.frequency = v.frequency.max(f.frequency);
                v.benefit = v.benefit.max(f.benefit);
            }
        }
        let ns = &st.ns;
        let length_of = |p: &str| {
            let comps: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
            ns.lookup(&comps).and_then(|id| ns.get(id)).filter(|i| !i.is_dir()).map(|i| i.length())
        };
        st.apps.refresh(now, &access, capacity, &files, &length_of);
    }

    /// The table a full heartbeat answer carries.
    pub(super) fn affinity_table(st: &mut State) -> (Vec<AppAffinity>, f64) {
        Self::refresh_apps(st, Instant::now(), false);
        let table = st
            .apps
            .table()
            .into_iter()
            .map(|(job_id, affinity, probability)| AppAffinity { job_id, affinity, probability })
            .collect();
        (table, st.apps.default_affinity())
    }

    /// CAVA, section IV-B: "only one copy of a data block is allowed to be cached".
    /// A read's fill into memory, on a worker whose memory runs a benefit
    /// policy, of a block another live worker holds in memory: that worker's
    /// address. (Readers are sent to the copy the master lists; a second copy
    /// comes only from two reads racing, or a reader's stale block list.)
    pub(super) fn cached_elsewhere(st: &State, req: &CommitBlockRequest, tier: Tier) -> Option<String> {
        if !req.read_fill || tier != Tier::Mem {
            return None;
        }
        let policy = st.cluster.worker(req.worker_id)?.tier(Tier::Mem)?.replacement.as_str();
        if !matches!(policy, "cava" | "ca") {
            return None;
        }
        let other = st.cluster.block(req.block_id)?.replicas.iter().find(|r| {
            r.tier == Tier::Mem && r.worker != req.worker_id && st.cluster.worker(r.worker).is_some_and(|w| w.alive)
        })?;
        st.cluster.worker(other.worker).map(|w| w.data_address.clone())
    }

    /// Workers' memory, applications and files as the cache manager sees them.
    pub fn cache_report(&self, req: GetCacheReportRequest) -> GetCacheReportResponse {
        let now = Instant::now();
        let mut st = self.write();
        Self::refresh_apps(&mut st, now, true);
        let limit = if req.max_files == 0 { DEFAULT_FILES } else { req.max_files as usize };
        let mut workers = Vec::new();
        let mut files: HashMap<u64, FileCacheReport> = HashMap::new();
        for w in st.cluster.workers().filter(|w| w.alive) {
            workers
                .push(WorkerCacheReport { data_address: w.data_address.clone(), memory: w.tier(Tier::Mem).cloned() });
            for f in &w.cache_files {
                let Some(ino) = st.ns.get(f.file_id) else { continue };
                let r = files.entry(f.file_id).or_insert_with(|| FileCacheReport {
                    path: st.ns.path_of(f.file_id),
                    file_id: f.file_id,
                    length: ino.length(),
                    ..Default::default()
                });
                r.cached_bytes += f.cached_bytes;
                r.frequency = r.frequency.max(f.frequency);
                r.affinity = r.affinity.max(f.affinity);
                r.benefit = r.benefit.max(f.benefit);
            }
        }
        workers.sort_by(|a, b| a.data_address.cmp(&b.data_address));
        let mut files: Vec<FileCacheReport> = files.into_values().collect();
        files.sort_by(|a, b| {
            b.benefit.total_cmp(&a.benefit).then(b.cached_bytes.cmp(&a.cached_bytes)).then(a.path.cmp(&b.path))
        });
        files.truncate(limit);
        let mut apps: Vec<AppCacheInfo> = st.apps.apps().map(|a| app_info(a, now)).collect();
        apps.sort_by(|a, b| b.live.cmp(&a.live).then(a.job_id.cmp(&b.job_id)));
        let v = st.apps.config.values;
        GetCacheReportResponse { workers, apps, files, high_affinity: v[0], medium_affinity: v[1], low_affinity: v[2] }
    }
}

fn app_info(a: &App, now: Instant) -> AppCacheInfo {
    AppCacheInfo {
        job_id: a.job_id.clone(),
        name: a.usage.name.clone(),
        class: a.class.map_or("unclassified", |c| c.name()).to_string(),
        affinity: a.affinity,
        source: a.source.name().to_string(),
        cpu_util: a.figures.cpu_util,
        write_rate: a.figures.write_rate,
        cached_fraction: a.figures.cached_fraction,
        probability: a.probability,
        input_bytes: a.input_bytes,
        live: a.live(now),
        tasks: a.usage.tasks,
        wall_seconds: a.usage.wall_seconds,
        cpu_threshold: a.thresholds.map_or(0.0, |t| t.cpu),
        write_threshold: a.thresholds.map_or(0.0, |t| t.write),
    }
}

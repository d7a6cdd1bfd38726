//! The dashboard's pages: rows of display strings built from the master's
//! state, rendered by the askama templates in `web/` (which escape them).

use askama::Template;
use axum::http::StatusCode;
use thaw_common::now_ms;
use thaw_common::proto::*;
use thaw_common::size::format_size;
use thaw_common::write_type;

use super::query::{file_href, files_href};
use crate::master::Master;

/// The one stylesheet, served at `/style.css`.
pub const CSS: &str = include_str!("style.css");

/// What every page's frame shows: its title, the active tab, the master.
pub struct Head {
    pub title: String,
    pub tab: &'static str,
    pub master: String,
}

fn head(m: &Master, title: impl Into<String>, tab: &'static str) -> Head {
    Head { title: title.into(), tab, master: m.config().address.clone() }
}

/// A share of a whole as a CSS width, e.g. "37.5".
fn pct(part: u64, whole: u64) -> String {
    if whole == 0 { "0".into() } else { format!("{:.1}", part.min(whole) as f64 * 100.0 / whole as f64) }
}

/// "1.2 s ago"-style ages from milliseconds.
fn ago(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms ago"),
        1000..120_000 => format!("{:.1} s ago", ms as f64 / 1000.0),
        _ => format!("{} min ago", ms / 60_000),
    }
}

/// A Unix time in milliseconds as UTC "HH:MM:SS.mmm".
fn clock(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}.{:03}", s / 3600 % 24, s / 60 % 60, s % 60, ms % 1000)
}

fn tier_name(t: i32) -> &'static str {
    match Tier::try_from(t) {
        Ok(Tier::Mem) => "MEM",
        Ok(Tier::Disk) => "DISK",
        _ => "?",
    }
}

fn persistence_name(p: i32) -> &'static str {
    match Persistence::try_from(p) {
        Ok(Persistence::NotPersisted) => "not persisted",
        Ok(Persistence::Persisting) => "persisting",
        Ok(Persistence::Persisted) => "persisted",
        Ok(Persistence::Lost) => "LOST",
        _ => "-",
    }
}

fn write_type_name(w: i32) -> &'static str {
    WriteType::try_from(w).ok().map(write_type::of).filter(|m| m.is_known()).map_or("-", |m| m.label)
}

// ---- overview ----

pub struct TierCell {
    pub text: String,
    pub pct: String,
}

pub struct WorkerRow {
    pub id: u64,
    pub address: String,
    pub host: String,
    pub rack: String,
    pub alive: bool,
    pub heartbeat: String,
    pub mem: Option<TierCell>,
    pub disk: Option<TierCell>,
    /// One line per migration device: speed estimate, queue, running copy.
    pub devices: Vec<String>,
    pub buffer: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct Overview {
    head: Head,
    totals: Vec<(&'static str, String)>,
    workers: Vec<WorkerRow>,
}

fn tier_cell(w: &WorkerInfo, t: Tier) -> Option<TierCell> {
    let u = w.tiers.iter().find(|u| u.tier == t as i32)?;
    Some(TierCell {
        text: format!("{} / {} ({} blocks)", format_size(u.used), format_size(u.capacity), u.blocks),
        pct: pct(u.used, u.capacity),
    })
}

/// "ufs: 120.0 MiB/s, 4 ms per small block; 3 queued, 1 running for 250 ms"
/// (DYRS, section IV-A's estimate as the worker last reported it).
fn device_line(d: &DeviceMigrationState) -> String {
    let speed = if d.ns_per_byte > 0.0 {
        format!("{}/s", format_size((1e9 / d.ns_per_byte) as u64))
    } else {
        "speed not measured yet".into()
    };
    let fixed = if d.ns_per_migration > 0.0 {
        format!(", {:.1} ms per small block", d.ns_per_migration / 1e6)
    } else {
        "".into()
    };
    let running = if d.active > 0 { format!(", {} running for {} ms", d.active, d.active_ms) } else { "".into() };
    format!("{}: {speed}{fixed}; {} queued{running}", d.device, d.queued)
}

fn worker_row(w: &WorkerInfo) -> WorkerRow {
    let (devices, buffer) = match &w.migration {
        Some(s) => (
            s.devices.iter().map(device_line).collect(),
            format!(
                "buffer {} / {}; {} migrations done",
                format_size(s.buffer_used),
                format_size(s.buffer_limit),
                s.migrations_done
            ),
        ),
        None => (Vec::new(), "no migration report yet".into()),
    };
    WorkerRow {
        id: w.id,
        address: w.data_address.clone(),
        host: w.host.clone(),
        rack: if w.rack.is_empty() { "-".into() } else { w.rack.clone() },
        alive: w.alive,
        heartbeat: ago(w.last_heartbeat_ms_ago),
        mem: tier_cell(w, Tier::Mem),
        disk: tier_cell(w, Tier::Disk),
        devices,
        buffer,
    }
}

pub fn overview(m: &Master) -> askama::Result<String> {
    let s = m.cluster_status();
    let g = m.gauges();
    let p = s.persistence.unwrap_or_default();
    let tier = |i: usize| format!("{} / {}", format_size(g.tiers[i].1), format_size(g.tiers[i].0));
    let totals = vec![
        ("workers", format!("{} live, {} dead", g.workers_live, g.workers_dead)),
        ("under-store", s.ufs_uri.clone()),
        ("files", s.files.to_string()),
        ("blocks in memory", s.blocks_in_memory.to_string()),
        ("MEM used / capacity", tier(0)),
        ("DISK used / capacity", tier(1)),
        ("jobs", format!("{} explicit, {} implicit eviction", g.jobs[0], g.jobs[1])),
        ("migrations", format!("{} pending, {} bound to workers", g.migrations[0], g.migrations[1])),
        (
            "persistence",
            format!(
                "{} persisted, {} not persisted ({}), {} persisting, {} lost",
                p.persisted,
                p.not_persisted,
                format_size(p.not_persisted_bytes),
                p.persisting,
                p.lost
            ),
        ),
        ("block size", format_size(s.default_block_size)),
    ];
    Overview { head: head(m, "Overview", "overview"), totals, workers: s.workers.iter().map(worker_row).collect() }
        .render()
}

// ---- jobs ----

/// A progress bar's segment: a CSS class and its width in percent.
pub struct Segment {
    pub class: &'static str,
    pub pct: String,
    pub label: String,
}

pub struct JobRow {
    pub id: String,
    pub origin: String,
    pub eviction: &'static str,
    pub submitted: String,
    pub lease: String,
    pub blocks: u64,
    pub bytes: String,
    pub counts: Vec<(&'static str, u64)>,
    pub bar: Vec<Segment>,
    pub done: String,
    pub failure: String,
}

#[derive(Template)]
#[template(path = "jobs.html")]
struct Jobs {
    head: Head,
    policy: String,
    priority: String,
    jobs: Vec<JobRow>,
}

fn job_row(j: &JobInfo, now: u64) -> JobRow {
    let counts = vec![
        ("pending", j.blocks_pending),
        ("queued", j.blocks_queued),
        ("in memory", j.blocks_in_memory),
        ("read", j.blocks_read),
        ("failed", j.blocks_failed),
        ("not migrated", j.blocks_not_migrated),
    ];
    let bar = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| Segment {
            class: match *name {
                "in memory" => "mem",
                "not migrated" => "none",
                other => other,
            },
            pct: pct(*n, j.blocks),
            label: format!("{n} {name}"),
        })
        .collect();
    JobRow {
        id: j.job_id.clone(),
        origin: j.origin.clone(),
        eviction: match EvictionMode::try_from(j.eviction) {
            Ok(EvictionMode::Implicit) => "implicit",
            _ => "explicit",
        },
        submitted: ago(now.saturating_sub(j.submitted_ms)),
        lease: format!("{:.1} s", j.lease_remaining_ms as f64 / 1000.0),
        blocks: j.blocks,
        bytes: format_size(j.bytes),
        counts,
        bar,
        done: pct(j.blocks_in_memory + j.blocks_read, j.blocks),
        failure: j.failure.clone(),
    }
}

pub fn jobs(m: &Master, r: ListJobsResponse) -> askama::Result<String> {
    let now = now_ms();
    Jobs {
        head: head(m, "Jobs", "jobs"),
        policy: r.policy,
        priority: r.priority,
        jobs: r.jobs.iter().map(|j| job_row(j, now)).collect(),
    }
    .render()
}

// ---- files ----

/// A link in the path above a listing: a component and its directory's page.
pub struct Crumb {
    pub name: String,
    pub href: String,
}

fn crumbs(path: &str) -> Vec<Crumb> {
    let mut out = vec![Crumb { name: "/".into(), href: files_href("/") }];
    let mut at = String::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        at.push('/');
        at.push_str(c);
        out.push(Crumb { name: c.to_string(), href: files_href(&at) });
    }
    out
}

pub struct EntryRow {
    pub name: String,
    pub href: String,
    pub is_dir: bool,
    /// A directory's file count ("2 files"), empty for a file.
    pub files: String,
    pub size: String,
    pub blocks: String,
    pub in_memory: String,
    pub persistence: &'static str,
    pub write_type: &'static str,
}

#[derive(Template)]
#[template(path = "files.html")]
struct Directory {
    head: Head,
    crumbs: Vec<Crumb>,
    entries: Vec<EntryRow>,
}

/// Files a directory page walks for its rows' totals, at most (past it a
/// row's figures are lower bounds, marked "≥").
pub const DIR_TOTALS_BUDGET: usize = 100_000;

pub fn directory(m: &Master, path: &str, mut entries: Vec<FileInfo>) -> askama::Result<String> {
    entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
    let entries = entries
        .iter()
        .map(|f| {
            if f.is_dir {
                // A directory's row sums its subtree (a listing race may have
                // removed it since: then it shows as empty).
                let t = m.dir_totals(&f.path, DIR_TOTALS_BUDGET).unwrap_or_default();
                let at_least = if t.whole || t.files == 0 { "" } else { "≥ " };
                let s = if t.files == 1 { "" } else { "s" };
                return EntryRow {
                    name: f.name.clone(),
                    href: files_href(&f.path),
                    is_dir: true,
                    files: format!("{at_least}{} file{s}", t.files),
                    size: format!("{at_least}{}", format_size(t.bytes)),
                    blocks: format!("{at_least}{}", t.blocks),
                    in_memory: format!("{at_least}{}", format_size(t.in_memory_bytes)),
                    persistence: persistence_name(f.persistence),
                    write_type: "-",
                };
            }
            EntryRow {
                name: f.name.clone(),
                href: file_href(&f.path),
                is_dir: false,
                files: String::new(),
                size: format_size(f.length),
                blocks: (if f.block_size == 0 { 0 } else { f.length.div_ceil(f.block_size) }).to_string(),
                in_memory: format_size(f.in_memory_bytes),
                persistence: persistence_name(f.persistence),
                write_type: write_type_name(f.write_type),
            }
        })
        .collect();
    Directory { head: head(m, format!("Files: {path}"), "files"), crumbs: crumbs(path), entries }.render()
}

pub struct ReplicaCell {
    pub worker: u64,
    pub address: String,
    pub tier: &'static str,
}

pub struct BlockRow {
    pub index: usize,
    pub id: u64,
    pub offset: u64,
    pub length: String,
    pub replicas: Vec<ReplicaCell>,
}

#[derive(Template)]
#[template(path = "file.html")]
struct File {
    head: Head,
    crumbs: Vec<Crumb>,
    facts: Vec<(&'static str, String)>,
    persisted: bool,
    blocks: Vec<BlockRow>,
}

pub fn file(m: &Master, f: FileInfo) -> askama::Result<String> {
    let mut facts = vec![
        ("size", format!("{} ({} bytes)", format_size(f.length), f.length)),
        ("block size", format_size(f.block_size)),
        ("in memory", format_size(f.in_memory_bytes)),
        ("persistence", persistence_name(f.persistence).to_string()),
        ("write type", write_type_name(f.write_type).to_string()),
        ("file id", f.file_id.to_string()),
        ("complete", if f.complete { "yes" } else { "no (being written)" }.to_string()),
    ];
    if !f.persist_waiting.is_empty() {
        facts.push(("checkpoint", f.persist_waiting.clone()));
    }
    if !f.persist_error.is_empty() {
        facts.push(("last checkpoint error", f.persist_error.clone()));
    }
    if f.lineage_id != 0 {
        facts.push(("lineage", f.lineage_id.to_string()));
    }
    let blocks = f
        .blocks
        .iter()
        .enumerate()
        .map(|(index, b)| BlockRow {
            index,
            id: b.block_id,
            offset: b.offset,
            length: format_size(b.length),
            replicas: b
                .replicas
                .iter()
                .map(|r| ReplicaCell { worker: r.worker_id, address: r.data_address.clone(), tier: tier_name(r.tier) })
                .collect(),
        })
        .collect();
    File {
        head: head(m, format!("File: {}", f.path), "files"),
        crumbs: crumbs(&f.path),
        facts,
        persisted: f.persisted,
        blocks,
    }
    .render()
}

// ---- events ----

pub struct EventRow {
    pub seq: u64,
    pub ended: String,
    pub block: u64,
    /// The block's file and its page; `None` when the file is gone.
    pub file: Option<Crumb>,
    pub worker: String,
    pub source: &'static str,
    pub bytes: String,
    pub took: String,
    pub outcome: String,
    pub ok: bool,
}

#[derive(Template)]
#[template(path = "events.html")]
struct Events {
    head: Head,
    refresh_s: u32,
    events: Vec<EventRow>,
}

pub fn events(m: &Master, events: Vec<(MigrationEvent, Option<String>)>) -> askama::Result<String> {
    let workers = m.cluster_status().workers;
    let events = events
        .into_iter()
        .map(|(e, path)| EventRow {
            seq: e.seq,
            ended: clock(e.end_ms),
            block: e.block_id,
            file: path.map(|p| Crumb { href: file_href(&p), name: p }),
            worker: workers
                .iter()
                .find(|w| w.id == e.worker_id)
                .map_or_else(|| format!("worker {}", e.worker_id), |w| w.data_address.clone()),
            source: match MigrationSource::try_from(e.source) {
                Ok(MigrationSource::Disk) => "DISK",
                Ok(MigrationSource::Ufs) => "under-store",
                _ => "?",
            },
            bytes: format_size(e.bytes),
            took: format!("{} ms", e.end_ms.saturating_sub(e.start_ms)),
            ok: e.outcome == "done",
            outcome: e.outcome,
        })
        .collect();
    Events { head: head(m, "Migration events", "events"), refresh_s: 2, events }.render()
}

// ---- errors ----

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    head: Head,
    message: String,
}

pub fn error_page(status: StatusCode, message: &str) -> askama::Result<String> {
    let head = Head { title: status.to_string(), tab: "", master: String::new() };
    ErrorPage { head, message: message.into() }.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(pct(1, 4), "25.0");
        assert_eq!(pct(5, 4), "100.0");
        assert_eq!(pct(3, 0), "0");
        assert_eq!(ago(250), "250 ms ago");
        assert_eq!(ago(1500), "1.5 s ago");
        assert_eq!(ago(600_000), "10 min ago");
        assert_eq!(clock(86_400_000 + 3_723_004), "01:02:03.004");
        let d = DeviceMigrationState {
            device: "ufs".into(),
            ns_per_byte: 1e9 / (2u64 << 20) as f64,
            ns_per_migration: 8e6,
            queued: 3,
            active: 1,
            active_ms: 250,
        };
        assert_eq!(device_line(&d), "ufs: 2.0 MiB/s, 8.0 ms per small block; 3 queued, 1 running for 250 ms");
        let idle = DeviceMigrationState { device: "disk".into(), ..Default::default() };
        assert_eq!(device_line(&idle), "disk: speed not measured yet; 0 queued");
    }

    #[test]
    fn error_pages_escape_what_they_echo() {
        let html = error_page(StatusCode::NOT_FOUND, "no such file: /<script>alert(1)</script> & \"q\"").unwrap();
        assert!(!html.contains("<script>") && !html.contains("& \"q\""), "{html}");
        assert!(html.contains("404 Not Found"), "{html}");
    }

    #[test]
    fn crumbs_link_every_ancestor() {
        let c = crumbs("/a b/c");
        let names: Vec<_> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["/", "a b", "c"]);
        assert_eq!(c[1].href, "/files?path=/a%20b");
        assert_eq!(c[2].href, "/files?path=/a%20b/c");
    }
}

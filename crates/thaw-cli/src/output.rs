//! Human and JSON output of files and cluster status.

pub use thaw_client::json::write_type_name;
use thaw_client::json::{file_json, locality_name, persistence_name, status_json, tier_name};
use thaw_common::proto::*;
use thaw_common::size::format_size;

fn flags(f: &FileInfo) -> String {
    let mut v = Vec::new();
    if !f.complete {
        v.push("incomplete".to_string());
    } else if f.lost {
        v.push("LOST".to_string());
    } else {
        v.push(persistence_name(f.persistence));
    }
    if f.temporary {
        v.push("temporary".to_string());
    }
    v.join(",")
}

/// Who holds an unfinished file and how much longer, unless renewed.
fn lease_note(f: &FileInfo) -> Option<String> {
    if f.complete || f.writer.is_empty() {
        return None;
    }
    let left = f.lease_expires_ms.saturating_sub(thaw_common::now_ms()).div_ceil(1000);
    Some(format!("written by {}, lease {left} s more unless renewed", f.writer))
}

/// The answer of `thaw fs recompute`.
pub fn print_rebuild(f: &FileInfo, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(&file_json(f)).expect("json"));
    } else if f.lost {
        println!("{}: lost; {}", f.path, f.rebuild_detail);
    } else {
        println!("{}: available", f.path);
    }
}

/// The answer of `thaw fs persist`.
pub fn print_persisted(f: &FileInfo, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(&file_json(f)).expect("json"));
    } else {
        println!("{}: {}", f.path, persistence_name(f.persistence));
    }
}

/// `thaw fs ls` printed a page at a time as the pages arrive (a listing of
/// a million entries starts printing at once and holds one page): columns
/// as wide as the widest owner and group seen so far; `--json`, one array.
pub struct Listing {
    json: bool,
    entries: usize,
    owner_w: usize,
    group_w: usize,
}

impl Listing {
    pub fn new(json: bool) -> Self {
        if json {
            print!("[");
        }
        Self { json, entries: 0, owner_w: 0, group_w: 0 }
    }

    /// Prints a page; fails if standard output is gone (`| head`), which
    /// ends the listing.
    pub fn page(&mut self, entries: &[FileInfo]) -> std::io::Result<()> {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for f in entries {
            if self.json {
                let sep = if self.entries == 0 { "\n  " } else { ",\n  " };
                write!(out, "{sep}{}", serde_json::to_string(&file_json(f)).expect("json"))
            } else {
                self.owner_w = self.owner_w.max(f.owner.len());
                self.group_w = self.group_w.max(f.group.len());
                let (owner_w, group_w) = (self.owner_w, self.group_w);
                let who = format!("{}  {:<owner_w$}  {:<group_w$}", permissions(f), f.owner, f.group);
                if f.is_dir {
                    writeln!(out, "{who}  {:>12}  {:>6}  {:<20}  {}/", "-", "-", "dir", f.name)
                } else {
                    let mem = (f.in_memory_bytes * 100).checked_div(f.length).unwrap_or(100);
                    match lease_note(f) {
                        Some(note) => {
                            writeln!(
                                out,
                                "{who}  {:>12}  {:>5}%  {:<20}  {}  ({note})",
                                f.length,
                                mem,
                                flags(f),
                                f.name
                            )
                        }
                        None => writeln!(out, "{who}  {:>12}  {:>5}%  {:<20}  {}", f.length, mem, flags(f), f.name),
                    }
                }
            }?;
            self.entries += 1;
        }
        out.flush()
    }

    pub fn finish(self) {
        if self.json {
            println!("{}]", if self.entries == 0 { "" } else { "\n" });
        }
    }
}

/// `drwxr-xr-x`, as `ls -l` shows an entry's type and mode.
pub fn permissions(f: &FileInfo) -> String {
    let mut s = String::with_capacity(10);
    s.push(if f.is_dir { 'd' } else { '-' });
    for shift in [6, 3, 0] {
        let bits = (f.mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

pub fn print_stat(f: &FileInfo, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(&file_json(f)).expect("json"));
        return;
    }
    println!("path        {}", f.path);
    println!("type        {}", if f.is_dir { "directory" } else { "file" });
    println!("permissions {} {} {} ({:o})", permissions(f), f.owner, f.group, f.mode);
    if f.is_dir {
        return;
    }
    println!("file id     {}", f.file_id);
    println!("length      {} ({})", f.length, format_size(f.length));
    println!("block size  {}", format_size(f.block_size));
    println!("write type  {}", write_type_name(f.write_type()));
    println!("state       {}", flags(f));
    if let Some(note) = lease_note(f) {
        println!("writer      {note}");
    }
    if !f.persist_waiting.is_empty() {
        println!("checkpoint  {}", f.persist_waiting);
    }
    if !f.persist_error.is_empty() {
        println!("checkpoint  last try failed: {}", f.persist_error);
    }
    if f.lost {
        println!("rebuild     {}", f.rebuild_detail);
    }
    if f.rebuilds > 0 {
        println!("rebuilt     {}", rebuilt(f.rebuilds, f.last_rebuild_ms, f.last_rebuild_took_ms, "from lineage"));
    }
    println!("in memory   {}", format_size(f.in_memory_bytes));
    if f.lineage_id != 0 {
        println!("lineage     {}", f.lineage_id);
    }
    for (i, b) in f.blocks.iter().enumerate() {
        let replicas: Vec<String> = b
            .replicas
            .iter()
            .map(|r| {
                format!(
                    "worker {} {} {} ({})",
                    r.worker_id,
                    r.data_address,
                    tier_name(r.tier),
                    locality_name(r.locality)
                )
            })
            .collect();
        let where_ = if replicas.is_empty() {
            if f.persisted { "under-store only".to_string() } else { "no replica".to_string() }
        } else {
            replicas.join("; ")
        };
        println!("block {i:<5} offset {:<12} length {:<10} {where_}", b.offset, b.length);
    }
}

pub fn print_status(s: &GetClusterStatusResponse, as_json: bool) {
    if as_json {
        let v = status_json(s);
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return;
    }
    println!("under-store {}   files {}   blocks in memory {}", s.ufs_uri, s.files, s.blocks_in_memory);
    let p = s.persistence.unwrap_or_default();
    println!(
        "persistence: {} persisted, {} not persisted ({}), {} persisting, {} LOST; checkpoints {} done, {} failed; \
         recomputations {} done, {} failed, {} running",
        p.persisted,
        p.not_persisted,
        format_size(p.not_persisted_bytes),
        p.persisting,
        p.lost,
        p.checkpoints_done,
        p.checkpoints_failed,
        p.recomputations_done,
        p.recomputations_failed,
        p.recomputations_running
    );
    if !s.masters.is_empty() {
        let term = s.masters.first().map_or(0, |m| m.term);
        println!("masters (a group of {}, term {term}):", s.masters.len());
        for m in &s.masters {
            let role = if m.leader {
                format!("leader, log at {}", m.log_index)
            } else if !m.reachable {
                // A dead master is no follower, however far its log got.
                match m.last_heard_ms_ago {
                    Some(ms) => format!("unreachable, last heard {} ago", ago(ms)),
                    None => "unreachable, not heard from since this leader started".to_string(),
                }
            } else {
                let log = if m.log_index == 0 && m.behind == 0 {
                    "log not known yet".to_string()
                } else if m.behind == 0 {
                    "up to date".to_string()
                } else {
                    format!("{} entries behind", m.behind)
                };
                format!("follower, {log}, heard {} ago", ago(m.last_heard_ms_ago.unwrap_or(0)))
            };
            println!("  {:<3} {:<22} {role}", m.id, m.address);
        }
    }
    println!(
        "{:<4} {:<22} {:<12} {:<8} {:<6} {:<24} {:<24}",
        "id", "address", "host", "rack", "alive", "MEM used/capacity", "DISK used/capacity"
    );
    let mem_line = |w: &WorkerInfo| {
        w.tiers.iter().find(|u| u.tier == Tier::Mem as i32).map(|u| {
            format!(
                "MEM: {} held for jobs, {} not persisted elsewhere, {} evictable, {} being written or copied in \
                 ({} has evicted {} blocks, {})",
                format_size(u.held),
                format_size(u.pinned),
                format_size(u.evictable),
                format_size(thaw_client::json::in_flight(u)),
                if u.replacement.is_empty() { "-" } else { &u.replacement },
                u.evictions,
                format_size(u.evicted_bytes)
            ) + &cache_counts(u)
        })
    };
    for w in &s.workers {
        let tier = |t: Tier| {
            w.tiers
                .iter()
                .find(|u| u.tier == t as i32)
                .map(|u| format!("{} / {}", format_size(u.used), format_size(u.capacity)))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{:<4} {:<22} {:<12} {:<8} {:<6} {:<24} {:<24}",
            w.id,
            w.data_address,
            w.host,
            w.rack,
            if w.alive { "yes" } else { "DEAD" },
            tier(Tier::Mem),
            tier(Tier::Disk)
        );
        if let Some(line) = mem_line(w) {
            println!("     {line}");
        }
        for d in &w.devices {
            println!("     {}", device_line(d));
        }
        if !w.metrics_address.is_empty() {
            println!("     metrics at http://{}/metrics", w.metrics_address);
        }
    }
}

/// "; hit ratio 73% (120 hits, 44 misses), 3 fills dropped, 5 skipped".
fn cache_counts(u: &TierUsage) -> String {
    let ratio = thaw_client::json::hit_ratio(u).map_or("-".to_string(), |r| format!("{:.0}%", r * 100.0));
    format!(
        "; hit ratio {ratio} ({} hits, {} misses), {} fills dropped, {} skipped by probability",
        u.cache_hits, u.cache_misses, u.cache_drops, u.cache_skipped
    )
}

/// The cache report (`thaw cache`).
pub fn print_cache(r: &GetCacheReportResponse, as_json: bool) {
    if as_json {
        let v = thaw_client::json::cache_report_json(r);
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return;
    }
    println!("workers");
    println!(
        "  {:<22} {:<6} {:>10} {:>10} {:>7} {:>9} {:>7} {:>8}",
        "address", "policy", "cached", "capacity", "hits", "hit ratio", "drops", "evicted"
    );
    for w in &r.workers {
        let Some(m) = &w.memory else {
            println!("  {:<22} (no memory tier)", w.data_address);
            continue;
        };
        let ratio = thaw_client::json::hit_ratio(m).map_or("-".to_string(), |x| format!("{:.0}%", x * 100.0));
        println!(
            "  {:<22} {:<6} {:>10} {:>10} {:>7} {:>9} {:>7} {:>8}",
            w.data_address,
            m.replacement,
            format_size(m.evictable),
            format_size(m.capacity),
            m.cache_hits,
            ratio,
            m.cache_drops,
            m.evictions
        );
    }
    println!("applications (classes: high {}, medium {}, low {})", r.high_affinity, r.medium_affinity, r.low_affinity);
    println!(
        "  {:<28} {:<14} {:<12} {:>8} {:>9} {:>11} {:>8} {:>7} {:<5}",
        "job", "name", "class", "affinity", "cpu/core", "writes/s", "cached", "p(cache)", "live"
    );
    for a in &r.apps {
        println!(
            "  {:<28} {:<14} {:<12} {:>8.3} {:>9.2} {:>11} {:>7.0}% {:>7.2} {:<5}",
            a.job_id,
            a.name,
            format!("{} ({})", a.class, a.source),
            a.affinity,
            a.cpu_util,
            format_size(a.write_rate as u64),
            a.cached_fraction * 100.0,
            a.probability,
            if a.live { "yes" } else { "no" }
        );
    }
    println!("files (highest benefit first)");
    println!(
        "  {:<40} {:>10} {:>10} {:>9} {:>8} {:>8}",
        "path", "length", "cached", "frequency", "affinity", "benefit"
    );
    for f in &r.files {
        println!(
            "  {:<40} {:>10} {:>10} {:>9.2} {:>8.3} {:>8.3}",
            f.path,
            format_size(f.length),
            format_size(f.cached_bytes),
            f.frequency,
            f.affinity,
            f.benefit
        );
    }
}

/// One emulated device: "disk: 40.0 MiB/s, penalty 0.3, 1 stream(s), interference 2, 1.0 GiB read".
pub fn device_line(d: &DeviceState) -> String {
    format!(
        "{}: {}/s, penalty {}, {} stream(s), interference {}, {} read",
        d.device,
        format_size(d.bandwidth),
        d.penalty,
        d.active_streams,
        d.interference_streams,
        format_size(d.bytes_read)
    )
}

/// A time since, for people: "40 ms", "3.2 s", "12 s", "4 min 5 s".
fn ago(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..10_000 => format!("{:.1} s", ms as f64 / 1000.0),
        10_000..120_000 => format!("{} s", ms / 1000),
        _ => format!("{} min {} s", ms / 60_000, ms / 1000 % 60),
    }
}

/// `N time(s) <how>, the last X s ago, in Y s`: a file's rebuilds, a lineage's reruns.
pub fn rebuilt(count: u32, last_ms: u64, took_ms: u64, how: &str) -> String {
    let ago = thaw_common::now_ms().saturating_sub(last_ms) as f64 / 1000.0;
    let times = if count == 1 { "time" } else { "times" };
    let took = if took_ms < 1000 { format!("{took_ms} ms") } else { format!("{:.1} s", took_ms as f64 / 1000.0) };
    format!("{count} {times} {how}, the last {ago:.1} s ago, in {took}")
}

//! The JSON shapes of files, workers and cluster status: one schema for the CLI's
//! `--json` output and the Python package's plain-data answers.

use serde_json::{Value, json};
use thaw_common::proto::*;

pub fn tier_name(t: i32) -> &'static str {
    match Tier::try_from(t) {
        Ok(Tier::Mem) => "MEM",
        Ok(Tier::Disk) => "DISK",
        _ => "?",
    }
}

pub fn locality_name(l: i32) -> String {
    Locality::try_from(l)
        .map(|l| l.as_str_name().trim_start_matches("LOCALITY_").to_lowercase().replace('_', "-"))
        .unwrap_or_default()
}

pub fn write_type_name(w: WriteType) -> String {
    thaw_common::write_type::of(w).label.to_string()
}

/// `not-persisted`, `persisting`, `persisted` or `lost`.
pub fn persistence_name(p: i32) -> String {
    let p = Persistence::try_from(p).unwrap_or(Persistence::Unspecified);
    p.as_str_name().trim_start_matches("PERSISTENCE_").to_lowercase().replace('_', "-")
}

pub fn persistence_json(t: &PersistenceTotals) -> Value {
    json!({
        "not_persisted": t.not_persisted,
        "persisting": t.persisting,
        "persisted": t.persisted,
        "lost": t.lost,
        "not_persisted_bytes": t.not_persisted_bytes,
        "checkpoints_done": t.checkpoints_done,
        "checkpoints_failed": t.checkpoints_failed,
        "recomputations_done": t.recomputations_done,
        "recomputations_failed": t.recomputations_failed,
        "recomputations_running": t.recomputations_running,
    })
}

/// Where a lost file's rebuild stands: `none`, `queued`, `running`, ...
pub fn rebuild_name(r: i32) -> String {
    let r = Rebuild::try_from(r).unwrap_or(Rebuild::Unspecified);
    r.as_str_name().trim_start_matches("REBUILD_").to_lowercase().replace('_', "-")
}

/// `narrow` or `wide`.
pub fn dependency_kind_name(k: i32) -> String {
    let k = DependencyKind::try_from(k).unwrap_or(DependencyKind::Unspecified);
    k.as_str_name().trim_start_matches("DEPENDENCY_KIND_").to_lowercase()
}

/// A lineage entry; its config as base64-free hex is left out (bytes), its
/// length given instead: `config_bytes`.
pub fn lineage_json(l: &LineageInfo) -> Value {
    json!({
        "lineage_id": l.lineage_id,
        "inputs": l.input_fids.iter().zip(&l.input_paths).map(|(f, p)| json!({"fid": f, "path": p})).collect::<Vec<_>>(),
        "outputs": l.output_paths.iter().zip(&l.output_fids).map(|(p, f)| json!({"path": p, "fid": f})).collect::<Vec<_>>(),
        "command": l.command,
        "config_bytes": l.config.len(),
        "kind": dependency_kind_name(l.kind),
        "created_ms": l.created_ms,
        "broken": l.broken,
        "reruns": l.reruns,
        "last_rerun_ms": l.last_rerun_ms,
        "last_rerun_took_ms": l.last_rerun_took_ms,
        "last_rerun_outputs": l.last_rerun_outputs,
    })
}

pub fn file_json(f: &FileInfo) -> Value {
    let blocks: Vec<Value> = f
        .blocks
        .iter()
        .map(|b| {
            json!({
                "block_id": b.block_id,
                "offset": b.offset,
                "length": b.length,
                "replicas": b.replicas.iter().map(|r| json!({
                    "worker_id": r.worker_id,
                    "address": r.data_address,
                    "host": r.host,
                    "rack": r.rack,
                    "tier": tier_name(r.tier),
                    "locality": locality_name(r.locality),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "path": f.path,
        "name": f.name,
        "file_id": f.file_id,
        "type": if f.is_dir { "directory" } else { "file" },
        "owner": f.owner,
        "group": f.group,
        "mode": format!("{:o}", f.mode),
        "length": f.length,
        "block_size": f.block_size,
        "complete": f.complete,
        "persisted": f.persisted,
        "persistence": persistence_name(f.persistence),
        "temporary": f.temporary,
        "persist_error": f.persist_error,
        "persist_waiting": f.persist_waiting,
        "lineage_id": f.lineage_id,
        "rebuild": rebuild_name(f.rebuild),
        "rebuild_detail": f.rebuild_detail,
        "rebuilds": f.rebuilds,
        "last_rebuild_ms": f.last_rebuild_ms,
        "last_rebuild_took_ms": f.last_rebuild_took_ms,
        "lost": f.lost,
        "write_type": write_type_name(f.write_type()),
        "in_memory_bytes": f.in_memory_bytes,
        "mtime_ms": f.mtime_ms,
        "writer": f.writer,
        "lease_expires_ms": f.lease_expires_ms,
        "blocks": blocks,
    })
}

fn tier_json(t: &TierUsage) -> Value {
    json!({
        "tier": tier_name(t.tier),
        "capacity": t.capacity,
        "used": t.used,
        "blocks": t.blocks,
        "dir": t.dir,
        "held": t.held,
        "pinned": t.pinned,
        "evictable": t.evictable,
        "in_flight": in_flight(t),
        "replacement": t.replacement,
        "evictions": t.evictions,
        "evicted_bytes": t.evicted_bytes,
        "cached_bytes": t.evictable,
        "hits": t.cache_hits,
        "misses": t.cache_misses,
        "hit_ratio": hit_ratio(t),
        "drops": t.cache_drops,
        "skipped": t.cache_skipped,
        "window_ms": t.window_ms,
    })
}

/// Of a tier's used bytes, those in no stored block yet: blocks clients are
/// writing, migrations and read fills being copied in. With held, pinned and
/// evictable, it makes up `used` (the worker takes all four under one lock).
pub fn in_flight(t: &TierUsage) -> u64 {
    t.used.saturating_sub(t.held + t.pinned + t.evictable)
}

/// Reads served from the tier over all reads counted (null before any).
pub fn hit_ratio(t: &TierUsage) -> Option<f64> {
    let all = t.cache_hits + t.cache_misses;
    (all > 0).then(|| t.cache_hits as f64 / all as f64)
}

/// One application as the cache manager sees it.
pub fn app_cache_json(a: &AppCacheInfo) -> Value {
    json!({
        "job_id": a.job_id,
        "name": a.name,
        "class": a.class,
        "affinity": a.affinity,
        "source": a.source,
        "cpu_util": a.cpu_util,
        "write_rate": a.write_rate,
        "cached_fraction": a.cached_fraction,
        "probability": a.probability,
        "input_bytes": a.input_bytes,
        "live": a.live,
        "tasks": a.tasks,
        "wall_seconds": a.wall_seconds,
        "cpu_threshold": a.cpu_threshold,
        "write_threshold": a.write_threshold,
    })
}

/// The whole cache: per worker its memory policy and counters, per
/// application its class and figures, per file its frequency and benefit.
pub fn cache_report_json(r: &GetCacheReportResponse) -> Value {
    let workers: Vec<Value> = r
        .workers
        .iter()
        .map(|w| {
            let mut v = w.memory.as_ref().map(tier_json).unwrap_or_else(|| json!({}));
            v["address"] = json!(w.data_address);
            v["policy"] = v.get("replacement").cloned().unwrap_or(Value::Null);
            v
        })
        .collect();
    json!({
        "workers": workers,
        "apps": r.apps.iter().map(app_cache_json).collect::<Vec<_>>(),
        "files": r.files.iter().map(|f| json!({
            "path": f.path,
            "file_id": f.file_id,
            "length": f.length,
            "cached_bytes": f.cached_bytes,
            "frequency": f.frequency,
            "affinity": f.affinity,
            "benefit": f.benefit,
        })).collect::<Vec<_>>(),
        "classes": {"high": r.high_affinity, "medium": r.medium_affinity, "low": r.low_affinity},
    })
}

fn job_json(j: &JobAccess) -> Value {
    json!({
        "job_id": j.job_id,
        "reads": j.reads,
        "bytes_read": j.bytes_read,
        "writes": j.writes,
        "bytes_written": j.bytes_written,
        "short_circuit_opens": j.short_circuit_opens,
        "bytes_from_memory": j.bytes_from_memory,
        "bytes_cold": j.bytes_cold,
    })
}

fn device_json(d: &DeviceState) -> Value {
    json!({
        "device": d.device,
        "bandwidth": d.bandwidth,
        "penalty": d.penalty,
        "active_streams": d.active_streams,
        "interference_streams": d.interference_streams,
        "bytes_read": d.bytes_read,
    })
}

pub fn worker_json(w: &WorkerInfo) -> Value {
    json!({
        "id": w.id,
        "address": w.data_address,
        "host": w.host,
        "rack": w.rack,
        "alive": w.alive,
        "last_heartbeat_ms_ago": w.last_heartbeat_ms_ago,
        "registered_ms_ago": w.registered_ms_ago,
        "tiers": w.tiers.iter().map(tier_json).collect::<Vec<_>>(),
        "jobs": w.jobs.iter().map(job_json).collect::<Vec<_>>(),
        "devices": w.devices.iter().map(device_json).collect::<Vec<_>>(),
        "migration": w.migration.as_ref().map(worker_migration_json),
        "metrics_address": (!w.metrics_address.is_empty()).then_some(&w.metrics_address),
    })
}

/// A worker's migration executor: per device the estimate and queue, the buffer.
pub fn worker_migration_json(m: &WorkerMigrationState) -> Value {
    json!({
        "buffer_used": m.buffer_used,
        "buffer_limit": m.buffer_limit,
        "referenced_blocks": m.referenced_blocks,
        "migrations_done": m.migrations_done,
        "room": m.room,
        "devices": m.devices.iter().map(|d| json!({
            "device": d.device,
            "ns_per_byte": d.ns_per_byte,
            "ns_per_migration": d.ns_per_migration,
            "mib_per_s": if d.ns_per_byte > 0.0 { 1e9 / d.ns_per_byte / (1u64 << 20) as f64 } else { 0.0 },
            "queued": d.queued,
            "active": d.active,
            "active_ms": d.active_ms,
        })).collect::<Vec<_>>(),
    })
}

pub fn eviction_name(e: i32) -> &'static str {
    match EvictionMode::try_from(e) {
        Ok(EvictionMode::Implicit) => "implicit",
        _ => "explicit",
    }
}

pub fn source_name(s: i32) -> &'static str {
    match MigrationSource::try_from(s) {
        Ok(MigrationSource::Disk) => "disk",
        Ok(MigrationSource::Ufs) => "ufs",
        _ => "?",
    }
}

/// A job's migration progress.
pub fn job_info_json(j: &JobInfo) -> Value {
    let settled = j.blocks_in_memory + j.blocks_read + j.blocks_failed + j.blocks_not_migrated;
    json!({
        "job_id": j.job_id,
        "submitted_ms": j.submitted_ms,
        "eviction": eviction_name(j.eviction),
        "lease_remaining_ms": j.lease_remaining_ms,
        "blocks": j.blocks,
        "bytes": j.bytes,
        "blocks_pending": j.blocks_pending,
        "blocks_queued": j.blocks_queued,
        "blocks_in_memory": j.blocks_in_memory,
        "blocks_read": j.blocks_read,
        "blocks_failed": j.blocks_failed,
        "blocks_not_migrated": j.blocks_not_migrated,
        "bytes_in_memory": j.bytes_in_memory,
        "bytes_read": j.bytes_read,
        "progress": if j.blocks == 0 { 1.0 } else { settled as f64 / j.blocks as f64 },
        "failure": j.failure,
        "blocks_waiting_for_memory": j.blocks_waiting_for_memory,
        "waiting": j.waiting,
        "origin": j.origin,
        "tasks": j.tasks.as_ref().map(job_tasks_json),
        "state": if j.ended { "ended" } else { "running" },
        "ended": j.ended,
        "ended_ms": j.ended_ms,
        "end_reason": j.end_reason,
        "blocks_migrated": j.blocks_migrated,
        "bytes_migrated": j.bytes_migrated,
        "read_bytes": j.read_bytes,
        "read_bytes_from_memory": j.read_bytes_from_memory,
    })
}

/// A job's tasks as its submitter reported them.
pub fn job_tasks_json(t: &JobTasks) -> Value {
    json!({
        "tasks": t.tasks,
        "placed": t.placed,
        "done": t.done,
        "memory_local": t.memory_local,
        "inputs_in_memory": t.inputs_in_memory,
        "delay_ms_median": t.delay_ms_median,
        "delay_ms_p99": t.delay_ms_p99,
        "delay_ms_max": t.delay_ms_max,
    })
}

pub fn event_json(e: &MigrationEvent) -> Value {
    json!({
        "seq": e.seq,
        "block_id": e.block_id,
        "worker_id": e.worker_id,
        "source": source_name(e.source),
        "start_ms": e.start_ms,
        "end_ms": e.end_ms,
        "bytes": e.bytes,
        "outcome": e.outcome,
        "jobs": e.jobs,
    })
}

/// What a worker says of itself: tiers, per-job counters and emulated devices.
pub fn worker_stats_json(s: &WorkerStats) -> Value {
    json!({
        "tiers": s.tiers.iter().map(tier_json).collect::<Vec<_>>(),
        "jobs": s.jobs.iter().map(job_json).collect::<Vec<_>>(),
        "devices": s.devices.iter().map(device_json).collect::<Vec<_>>(),
    })
}

/// The whole cluster: under-store, counts, and every worker with its tiers, jobs
/// and emulated devices.
pub fn status_json(s: &GetClusterStatusResponse) -> Value {
    json!({
        "ufs": s.ufs_uri,
        "default_block_size": s.default_block_size,
        "files": s.files,
        "blocks_in_memory": s.blocks_in_memory,
        "persistence": persistence_json(&s.persistence.unwrap_or_default()),
        "workers": s.workers.iter().map(worker_json).collect::<Vec<_>>(),
        "masters": s.masters.iter().map(|m| json!({
            "id": m.id,
            "address": m.address,
            "leader": m.leader,
            "log_index": m.log_index,
            "behind": m.behind,
            "term": m.term,
            "reachable": m.reachable,
            "last_heard_ms_ago": m.last_heard_ms_ago,
        })).collect::<Vec<_>>(),
    })
}

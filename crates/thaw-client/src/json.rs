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
    w.as_str_name().trim_start_matches("WRITE_TYPE_").to_lowercase().replace('_', "-")
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
        "length": f.length,
        "block_size": f.block_size,
        "complete": f.complete,
        "persisted": f.persisted,
        "lost": f.lost,
        "write_type": write_type_name(f.write_type()),
        "in_memory_bytes": f.in_memory_bytes,
        "mtime_ms": f.mtime_ms,
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
        "tiers": w.tiers.iter().map(tier_json).collect::<Vec<_>>(),
        "jobs": w.jobs.iter().map(job_json).collect::<Vec<_>>(),
        "devices": w.devices.iter().map(device_json).collect::<Vec<_>>(),
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
        "workers": s.workers.iter().map(worker_json).collect::<Vec<_>>(),
    })
}

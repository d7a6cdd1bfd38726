//! Human and JSON output of files and cluster status.

use serde_json::{Value, json};
use thaw_common::proto::*;
use thaw_common::size::format_size;

fn tier_name(t: i32) -> &'static str {
    match Tier::try_from(t) {
        Ok(Tier::Mem) => "MEM",
        Ok(Tier::Disk) => "DISK",
        _ => "?",
    }
}

fn locality_name(l: i32) -> String {
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

fn flags(f: &FileInfo) -> String {
    let mut v = Vec::new();
    if !f.complete {
        v.push("incomplete");
    }
    if f.persisted {
        v.push("persisted");
    }
    if f.lost {
        v.push("LOST");
    }
    v.join(",")
}

pub fn print_listing(entries: &[FileInfo], as_json: bool) {
    if as_json {
        let v: Vec<Value> = entries.iter().map(file_json).collect();
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return;
    }
    for f in entries {
        if f.is_dir {
            println!("{:>12}  {:>6}  {:<20}  {}/", "-", "-", "dir", f.name);
        } else {
            let mem = (f.in_memory_bytes * 100).checked_div(f.length).unwrap_or(100);
            println!("{:>12}  {:>5}%  {:<20}  {}", f.length, mem, flags(f), f.name);
        }
    }
}

pub fn print_stat(f: &FileInfo, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(&file_json(f)).expect("json"));
        return;
    }
    println!("path        {}", f.path);
    println!("type        {}", if f.is_dir { "directory" } else { "file" });
    if f.is_dir {
        return;
    }
    println!("file id     {}", f.file_id);
    println!("length      {} ({})", f.length, format_size(f.length));
    println!("block size  {}", format_size(f.block_size));
    println!("write type  {}", write_type_name(f.write_type()));
    println!("state       {}", if flags(f).is_empty() { "complete".to_string() } else { flags(f) });
    println!("in memory   {}", format_size(f.in_memory_bytes));
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

pub fn worker_json(w: &WorkerInfo) -> Value {
    json!({
        "id": w.id,
        "address": w.data_address,
        "host": w.host,
        "rack": w.rack,
        "alive": w.alive,
        "last_heartbeat_ms_ago": w.last_heartbeat_ms_ago,
        "tiers": w.tiers.iter().map(|t| json!({
            "tier": tier_name(t.tier),
            "capacity": t.capacity,
            "used": t.used,
            "blocks": t.blocks,
            "dir": t.dir,
        })).collect::<Vec<_>>(),
        "jobs": w.jobs.iter().map(|j| json!({
            "job_id": j.job_id,
            "reads": j.reads,
            "bytes_read": j.bytes_read,
            "writes": j.writes,
            "bytes_written": j.bytes_written,
            "short_circuit_opens": j.short_circuit_opens,
        })).collect::<Vec<_>>(),
    })
}

pub fn print_status(s: &GetClusterStatusResponse, as_json: bool) {
    if as_json {
        let v = json!({
            "ufs": s.ufs_uri,
            "default_block_size": s.default_block_size,
            "files": s.files,
            "blocks_in_memory": s.blocks_in_memory,
            "workers": s.workers.iter().map(worker_json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return;
    }
    println!("under-store {}   files {}   blocks in memory {}", s.ufs_uri, s.files, s.blocks_in_memory);
    println!(
        "{:<4} {:<22} {:<12} {:<8} {:<6} {:<24} {:<24}",
        "id", "address", "host", "rack", "alive", "MEM used/capacity", "DISK used/capacity"
    );
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
    }
}

//! Migration throughput per device (DYRS, section III-B: "ensuring efficient
//! utilization of the disk"). One worker whose DISK tier and under-store are
//! emulated devices (the device model, at `BANDWIDTH`); a job migrates a file
//! that is only on one of them. The figure is bytes over the time from the first
//! migration's start to the last one's end, from the master's event log: it is
//! the device model's bandwidth exactly when the executor never lets the device
//! idle between blocks (one migration at a time, the next queued before the
//! running one ends). Target >= 0.9. The time from the migrate call until every
//! block is in memory (which adds the first heartbeat's wait) is in the notes.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use thaw_client::{Client, WriteOptions};
use thaw_common::proto::{EvictionMode, MigrationSource, Tier, WriteType};
use thaw_testkit::{Cluster, ClusterOptions};

use crate::measure::{Comparison, median};
use crate::{BLOCK_SIZE, Config, payload};

/// The emulated devices' bandwidth, bytes per second (a fast hard disk).
const BANDWIDTH: u64 = 256 << 20;

#[derive(Clone, Copy)]
enum Device {
    Disk,
    Ufs,
}

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let mut options = ClusterOptions::workers(1);
    options.block_size = BLOCK_SIZE;
    let w = &mut options.workers[0];
    w.mem_capacity = (2 << 30).max(2 * cfg.size);
    w.disk_capacity = (2 << 30).max(2 * cfg.size);
    let mib = BANDWIDTH >> 20;
    w.device_model = Some(format!("disk={mib}MiB/s,ufs={mib}MiB/s"));
    let cluster = Cluster::start(crate::setup::thaw_bin()?, options).await?;
    let client = crate::setup::remote_client(&cluster)?;
    payload::write_file(&cluster.ufs.join("cold.bin"), cfg.size)?;
    write_disk_file(&client, "/disk.bin", cfg.size).await?;
    let mut out = Vec::new();
    for (device, path) in [(Device::Ufs, "/cold.bin"), (Device::Disk, "/disk.bin")] {
        out.push(measure(&cluster, &client, cfg, device, path).await?);
    }
    Ok(out)
}

/// A file whose blocks are on the worker's DISK tier only.
async fn write_disk_file(client: &Client, path: &str, size: u64) -> Result<()> {
    let opts = WriteOptions {
        write_type: WriteType::ReplicatedDisk,
        replication: 1,
        block_size: BLOCK_SIZE,
        overwrite: true,
        ..Default::default()
    };
    let mut w = client.create(path, opts).await?;
    let mut buf = vec![0u8; 4 << 20];
    let mut at = 0;
    while at < size {
        let k = (size - at).min(buf.len() as u64) as usize;
        payload::fill(&mut buf[..k], at);
        w.write(&buf[..k]).await?;
        at += k as u64;
    }
    w.close().await?;
    Ok(())
}

async fn measure(cluster: &Cluster, client: &Client, cfg: &Config, device: Device, path: &str) -> Result<Comparison> {
    let (name, source) = match device {
        Device::Ufs => ("migration-ufs", MigrationSource::Ufs),
        Device::Disk => ("migration-disk", MigrationSource::Disk),
    };
    let mut busy = Vec::new();
    let mut e2e = Vec::new();
    let mut since = client.migration_events(0, 0).await?.next;
    for i in 0..cfg.repeats {
        let job = format!("bench-{name}-{i}");
        let t0 = Instant::now();
        let info = client.migrate(&job, &[path.to_string()], EvictionMode::Explicit, None).await?;
        let blocks = info.blocks as usize;
        loop {
            let j = client.jobs(Some(&job)).await?.jobs.remove(0);
            ensure!(j.blocks_failed == 0, "{name}: migrations failed: {j:?}");
            if j.blocks_in_memory == j.blocks {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let all_in = t0.elapsed().as_secs_f64();
        // The event log (events come with the worker's heartbeats).
        let deadline = Instant::now() + Duration::from_secs(10);
        let events = loop {
            let r = client.migration_events(since, 0).await?;
            let done: Vec<_> = r.events.into_iter().filter(|e| e.outcome == "done").collect();
            if done.len() >= blocks {
                since = r.next;
                break done;
            }
            ensure!(Instant::now() < deadline, "{name}: only {} of {blocks} events", done.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        ensure!(events.iter().all(|e| e.source == source as i32), "{name}: a migration read another device");
        let first = events.iter().map(|e| e.start_ms).min().unwrap_or(0);
        let last = events.iter().map(|e| e.end_ms).max().unwrap_or(0);
        let bytes: u64 = events.iter().map(|e| e.bytes).sum();
        ensure!(bytes == cfg.size, "{name}: migrated {bytes} bytes of {}", cfg.size);
        let secs = (last.saturating_sub(first)).max(1) as f64 / 1000.0;
        busy.push(bytes as f64 / secs / (1u64 << 20) as f64);
        e2e.push(bytes as f64 / all_in / (1u64 << 20) as f64);
        client.evict(&job, &[]).await?;
        wait_mem_empty(cluster, client, path).await?;
    }
    let bw = (BANDWIDTH >> 20) as f64;
    let thaw = median(&busy);
    Ok(Comparison {
        name: name.into(),
        thaw_label: format!(
            "{} migrated into MEM by one worker, {} MiB/s emulated device, first start to last end",
            thaw_common::size::format_size(cfg.size),
            BANDWIDTH >> 20
        ),
        baseline_label: "the device model's bandwidth".into(),
        unit: "MiB/s",
        thaw,
        baseline: bw,
        ratio: thaw / bw,
        target: Some(0.9),
        thaw_runs: busy,
        baseline_runs: vec![bw],
        notes: format!(
            "from the migrate call to all blocks in memory (incl. the first heartbeat's wait): {:.0} MiB/s",
            median(&e2e)
        ),
    })
}

/// Waits until the worker's MEM tier is empty and the master knows it (the
/// worker reports evictions with its next heartbeat).
pub(crate) async fn wait_mem_empty(cluster: &Cluster, client: &Client, path: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = client.worker_stats(cluster.worker_addr(0)).await?;
        let used = s.tiers.iter().find(|t| t.tier == Tier::Mem as i32).map(|t| t.used).unwrap_or(0);
        if used == 0 && client.stat(path).await?.in_memory_bytes == 0 {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "MEM still holds {used} bytes after evict");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

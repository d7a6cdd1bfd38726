//! Issue 13, migration at device speed: `thaw migrate --wait` of a cold file,
//! the command a user runs, next to a direct cold read of the same file.
//!
//! One worker, the under-store a directory on this machine's disk, no device
//! model, the heartbeat at `thaw local`'s default (1 s). Each Thaw run starts
//! the `thaw` binary as a user would and times it from spawn to exit: the
//! migrate call, planning, the worker getting the blocks, the copies, and the
//! CLI seeing the job settled. The page cache of the file is dropped
//! (posix_fadvise DONTNEED) before every run of either side, so both read the
//! device. Between Thaw runs the job is evicted and the MEM tier emptied.
//! Target: >= 0.5 of the direct read.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use thaw_common::drop_cached_pages;
use thaw_testkit::{Cluster, ClusterOptions};

use crate::measure::{Spec, compare};
use crate::migration::wait_mem_empty;
use crate::payload::{self, Transfer};
use crate::{BLOCK_SIZE, Config};

pub async fn run(cfg: &Config) -> Result<crate::measure::Comparison> {
    let size = cfg.size;
    let mut options = ClusterOptions::workers(1);
    options.block_size = BLOCK_SIZE;
    options.heartbeat_ms = 1000;
    options.worker_timeout_ms = 10_000;
    options.workers[0].mem_capacity = (2 << 30).max(3 * size);
    let bin = crate::setup::thaw_bin()?;
    let cluster = Cluster::start(bin.clone(), options).await?;
    let file = cluster.ufs.join("load.bin");
    payload::write_file(&file, size)?;
    let client = crate::setup::remote_client(&cluster)?;
    let sum = payload::expected_sum(size);

    let thaw = async |i: usize| {
        drop_cached_pages(&file)?;
        let job = format!("load-{i}");
        let t0 = Instant::now();
        let out = Command::new(&bin)
            .args(["migrate", "--wait", "--json", "--job", &job, "/load.bin"])
            .env("THAW_MASTER", cluster.master_addr())
            .output()
            .context("running thaw migrate --wait")?;
        let secs = t0.elapsed().as_secs_f64();
        ensure!(out.status.success(), "thaw migrate failed: {}", String::from_utf8_lossy(&out.stderr));
        let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        ensure!(
            info["blocks_in_memory"] == info["blocks"] && info["bytes_in_memory"] == size,
            "not all of the file is in memory: {info}"
        );
        client.evict(&job, &[]).await?;
        wait_mem_empty(&cluster, &client, "/load.bin").await?;
        Ok(Transfer { bytes: size, secs, sum })
    };
    let baseline = async |_| {
        drop_cached_pages(&file)?;
        payload::read_file(&file)?.check(size, sum, "cold direct read")
    };
    let spec = Spec {
        name: "migrate-cli",
        thaw_label: "`thaw migrate --wait` of a cold file into MEM, spawn to exit",
        baseline_label: "direct read(2) of the same file, page cache dropped",
        target: 0.5,
    };
    let mut c = compare(spec, cfg.repeats, thaw, baseline).await?;
    c.notes = "page cache dropped before every run; 1 s heartbeat; no device model".into();
    Ok(c)
}

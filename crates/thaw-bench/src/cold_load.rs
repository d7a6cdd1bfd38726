//! Issue 28, item 3: a large cold load at a steady rate (drop-behind).
//!
//! One worker whose MEM tier (tmpfs) holds the whole load; the under-store a
//! directory on this machine's disk. `--repeats` cold files of `--size` each
//! are migrated one after the other with `thaw migrate --wait` (spawn to
//! exit, the page cache of each file dropped before its load), first by a
//! worker started with `--keep-page-cache` (the behaviour before drop-behind:
//! every copy leaves its source cached), then by a default one (drop-behind).
//! Before each side, memory as large as the load is touched once (untouched
//! memory of this VM is slow to touch the first time: ENV-NOTES.md).
//!
//! Reported per side: each file's MiB/s in load order (`*_runs`); the figure
//! compared is the slowest file's, since the slow-down was of the later
//! files. The notes give each side's growth of the page cache over the load
//! (`Cached` less `Shmem` in /proc/meminfo: without the tmpfs MEM tier), and
//! the share of the files' pages cached after it.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use thaw_common::drop_cached_pages;
use thaw_testkit::{Cluster, ClusterOptions};

use crate::measure::Comparison;
use crate::{BLOCK_SIZE, Config, payload};

/// One side's load: MiB/s per file, page cache growth, share left cached.
struct Side {
    rates: Vec<f64>,
    cache_growth: u64,
    left_cached: f64,
}

pub async fn run(cfg: &Config) -> Result<Comparison> {
    let (size, files) = (cfg.size, cfg.repeats);
    let ufs = tempfile::tempdir()?;
    let paths: Vec<_> = (0..files).map(|i| ufs.path().join(format!("part-{i}.bin"))).collect();
    for p in &paths {
        payload::write_file(p, size)?;
        drop_cached_pages(p)?;
    }
    let keep = load(cfg, ufs.path(), &paths, true).await?;
    let drop = load(cfg, ufs.path(), &paths, false).await?;
    let slowest = |s: &Side| s.rates.iter().copied().fold(f64::INFINITY, f64::min);
    let (t, b) = (slowest(&drop), slowest(&keep));
    let gib = |b: u64| b as f64 / f64::from(1 << 30);
    let notes = format!(
        "{files} files of {} migrated one after another; page cache grew {:.1} GiB with drop-behind, {:.1} GiB \
         without; {:.0}% / {:.0}% of the files left cached; last file / first: {:.2} with, {:.2} without",
        thaw_common::size::format_size(size),
        gib(drop.cache_growth),
        gib(keep.cache_growth),
        drop.left_cached * 100.0,
        keep.left_cached * 100.0,
        drop.rates.last().unwrap_or(&f64::NAN) / drop.rates[0],
        keep.rates.last().unwrap_or(&f64::NAN) / keep.rates[0],
    );
    Ok(Comparison {
        name: "cold-load".into(),
        thaw_label: "slowest file of a cold load, `thaw migrate --wait` each, drop-behind (default)".into(),
        baseline_label: "the same with `--keep-page-cache` (no drop-behind, as before issue 28)".into(),
        unit: "MiB/s",
        thaw: t,
        baseline: b,
        ratio: t / b,
        target: None,
        thaw_runs: drop.rates,
        baseline_runs: keep.rates,
        notes,
    })
}

/// Migrates every file of `paths` (in the under-store `ufs`) into a fresh
/// worker's memory, one `thaw migrate --wait` at a time.
async fn load(cfg: &Config, ufs: &std::path::Path, paths: &[std::path::PathBuf], keep: bool) -> Result<Side> {
    let total = cfg.size * paths.len() as u64;
    warm_memory(total)?;
    let mut options = ClusterOptions::workers(1);
    options.block_size = BLOCK_SIZE;
    options.heartbeat_ms = 1000;
    options.worker_timeout_ms = 10_000;
    options.ufs_uri = Some(ufs.display().to_string());
    // Room for the whole load in the migration buffer (80% of the tier by default).
    options.workers[0].mem_capacity = total + (512 << 20);
    options.workers[0].extra_args = vec!["--migration-buffer".into(), (total + (256 << 20)).to_string()];
    if keep {
        options.workers[0].extra_args.push("--keep-page-cache".into());
    }
    let bin = crate::setup::thaw_bin()?;
    let cluster = Cluster::start(bin.clone(), options).await?;
    let before = cached_bytes()?;
    let mut rates = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        drop_cached_pages(p)?;
        let name = format!("/{}", p.file_name().unwrap().to_string_lossy());
        let t0 = Instant::now();
        let out = Command::new(&bin)
            .args(["migrate", "--wait", "--json", "--job", &format!("load-{i}"), &name])
            .env("THAW_MASTER", cluster.master_addr())
            .output()
            .context("running thaw migrate --wait")?;
        let secs = t0.elapsed().as_secs_f64();
        ensure!(out.status.success(), "thaw migrate failed: {}", String::from_utf8_lossy(&out.stderr));
        let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        ensure!(info["bytes_in_memory"] == cfg.size, "not all of {name} is in memory: {info}");
        let rate = cfg.size as f64 / f64::from(1 << 20) / secs;
        println!("  {} {name}: {rate:.0} MiB/s", if keep { "keep-page-cache" } else { "drop-behind" });
        rates.push(rate);
    }
    let cache_growth = cached_bytes()?.saturating_sub(before);
    let (mut cached, mut pages) = (0, 0);
    for p in paths {
        let f = std::fs::File::open(p)?;
        let (c, n) = thaw_worker::page_cache::resident_pages(&f, 0, cfg.size)?;
        (cached, pages) = (cached + c, pages + n);
    }
    drop(cluster);
    for p in paths {
        drop_cached_pages(p)?;
    }
    Ok(Side { rates, cache_growth, left_cached: cached as f64 / pages.max(1) as f64 })
}

/// The page cache's size now, less tmpfs files (the MEM tier): `Cached`
/// less `Shmem` in /proc/meminfo.
fn cached_bytes() -> Result<u64> {
    let info = std::fs::read_to_string("/proc/meminfo")?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .with_context(|| format!("no {name} line in /proc/meminfo"))
    };
    Ok(field("Cached:")?.saturating_sub(field("Shmem:")?) << 10)
}

/// Writes and deletes `bytes` of a tmpfs file, so the load's memory has been
/// touched once.
fn warm_memory(bytes: u64) -> Result<()> {
    let dir = std::path::Path::new("/dev/shm");
    if !dir.is_dir() {
        return Ok(());
    }
    let f = tempfile::NamedTempFile::new_in(dir)?;
    let buf = vec![1u8; payload::BUF];
    let mut w = std::io::BufWriter::new(f.as_file());
    let mut at = 0;
    while at < bytes {
        std::io::Write::write_all(&mut w, &buf)?;
        at += buf.len() as u64;
    }
    drop(w);
    Ok(())
}

//! The namespace at scale (issue 33): a master holding `--files` files, what
//! it costs and how its users fare.
//!
//! One master and one worker (the release binary, as every benchmark here).
//! `--files` empty files are created through the API by 16 clients at once
//! (`write_all` of no bytes, must-cache: a create and a complete each, no
//! under-store I/O): up to a million of them in one directory (`/big`), the
//! rest 1,000 to a directory under `/tree`. Then, each the median of
//! `--repeats` runs:
//! - creates per second while it fills;
//! - the master's resident memory per file (VmRSS after the fill, less before
//!   it) and the journal's bytes per file (its directory on disk);
//! - `thaw fs ls /big` (the CLI, every line read from its pipe), entries per
//!   second, and the same listing by the Rust client's pages in process;
//! - a restart: kill -9 of the master, started again at once, until a `stat`
//!   of `/big` is served (the journal loaded), and its memory per file then.
//!
//! There is no baseline on this machine yet for these figures (the NameNode's
//! and Alluxio's come with the metadata comparison of the same issue): each
//! row's baseline is 0 and its ratio is not a comparison.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use thaw_client::{Client, WriteOptions};
use thaw_common::proto::WriteType;
use thaw_testkit::{Cluster, ClusterOptions};

use crate::Config;
use crate::measure::{Comparison, median};

const CLIENTS: u64 = 16;
/// The most files of the one big directory.
const BIG_DIR: u64 = 1_000_000;
/// Files per directory of the rest.
const PER_DIR: u64 = 1000;

/// Where file `i` of the namespace goes.
fn path_of(i: u64) -> String {
    if i < BIG_DIR {
        format!("/big/f{i:07}")
    } else {
        format!("/tree/d{:05}/f{:04}", (i - BIG_DIR) / PER_DIR, i % PER_DIR)
    }
}

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let files = cfg.files;
    ensure!(files > 0, "--files must be positive");
    let mut options = ClusterOptions::workers(1);
    options.workers[0].mem_capacity = 64 << 20;
    let mut cluster = Cluster::start(crate::setup::thaw_bin()?, options).await?;
    let client = crate::setup::client(&cluster, "h0", "r0")?;
    let rss_before = master_rss(&cluster)?;
    let started = Instant::now();
    fill(&cluster, files).await?;
    let create_rate = files as f64 / started.elapsed().as_secs_f64();
    println!("  {files} files created in {:.1} s ({create_rate:.0}/s)", started.elapsed().as_secs_f64());
    let rss = master_rss(&cluster)?;
    let per_file = rss.saturating_sub(rss_before) as f64 / files as f64;
    let journal = dir_bytes(&cluster.root().join("journal"))? as f64 / files as f64;
    let big = files.min(BIG_DIR);

    let (mut cli_rates, mut client_rates, mut restarts) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cfg.repeats {
        cli_rates.push(big as f64 / cli_ls(&cluster, big)?);
        client_rates.push(big as f64 / client_ls(&client, big).await?);
    }
    let mut rss_restarted = 0;
    for _ in 0..cfg.repeats {
        restarts.push(restart(&mut cluster).await?);
        rss_restarted = master_rss(&cluster)?;
    }
    let scale = format!("{files} files, {big} in one directory");
    let row = |name: &str, label: String, unit: &'static str, runs: Vec<f64>, notes: String| Comparison {
        name: name.into(),
        thaw_label: label,
        baseline_label: "none yet".into(),
        unit,
        thaw: median(&runs),
        baseline: 0.0,
        ratio: 0.0,
        target: None,
        thaw_runs: runs,
        baseline_runs: Vec::new(),
        notes,
    };
    Ok(vec![
        row(
            "ns creates",
            format!("empty must-cache files created by {CLIENTS} clients ({scale})"),
            "files/s",
            vec![create_rate],
            "one fill".into(),
        ),
        row(
            "ns memory",
            format!("master resident memory per file ({scale})"),
            "B/file",
            vec![per_file],
            format!(
                "VmRSS {} MiB before, {} MiB after; after a restart {:.0} B/file; journal {journal:.0} B/file",
                rss_before >> 20,
                rss >> 20,
                rss_restarted.saturating_sub(rss_before) as f64 / files as f64
            ),
        ),
        row(
            "ns ls cli",
            format!("`thaw fs ls` of a {big}-entry directory, lines read"),
            "entries/s",
            cli_rates,
            String::new(),
        ),
        row(
            "ns ls client",
            format!("the Rust client's pages of a {big}-entry directory"),
            "entries/s",
            client_rates,
            String::new(),
        ),
        row(
            "ns restart",
            format!("kill -9 of the master to its first answer ({scale})"),
            "ms",
            restarts,
            String::new(),
        ),
    ])
}

/// Creates files 0..n, [`CLIENTS`] at once (each its own connection).
async fn fill(cluster: &Cluster, n: u64) -> Result<()> {
    let setup = crate::setup::client(cluster, "h0", "r0")?;
    setup.mkdir("/big", true, true).await?;
    for d in 0..n.saturating_sub(BIG_DIR).div_ceil(PER_DIR) {
        setup.mkdir(&format!("/tree/d{d:05}"), true, true).await?;
    }
    let mut tasks = Vec::new();
    for k in 0..CLIENTS {
        let c = crate::setup::client(cluster, "h0", "r0")?;
        tasks.push(tokio::spawn(async move {
            let opts = WriteOptions { write_type: WriteType::MustCache, ..Default::default() };
            let mut i = k;
            while i < n {
                c.write_all(&path_of(i), b"", opts.clone()).await.with_context(|| path_of(i))?;
                i += CLIENTS;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Seconds of `thaw fs ls /big`, its output read line by line from a pipe.
fn cli_ls(cluster: &Cluster, expect: u64) -> Result<f64> {
    use std::io::BufRead;
    let started = Instant::now();
    let mut child = std::process::Command::new(crate::setup::thaw_bin()?)
        .args(["fs", "ls", "/big"])
        .env("THAW_MASTER", cluster.master_addr())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let lines = std::io::BufReader::new(child.stdout.take().expect("piped")).lines().count() as u64;
    ensure!(child.wait()?.success(), "thaw fs ls failed");
    ensure!(lines == expect, "thaw fs ls printed {lines} lines, not {expect}");
    Ok(started.elapsed().as_secs_f64())
}

/// Seconds of a listing of `/big` by the client's pages.
async fn client_ls(client: &Client, expect: u64) -> Result<f64> {
    let started = Instant::now();
    let mut n = 0u64;
    client
        .list_each("/big", false, |page| {
            n += page.len() as u64;
            Ok(())
        })
        .await?;
    ensure!(n == expect, "the listing held {n} entries, not {expect}");
    Ok(started.elapsed().as_secs_f64())
}

/// Milliseconds from a kill -9 of the master, started again at once, to its
/// first answer to a `stat` of `/big`.
async fn restart(cluster: &mut Cluster) -> Result<f64> {
    cluster.kill_master();
    let killed = Instant::now();
    cluster.respawn_master_n(0)?;
    let client = crate::setup::client(cluster, "h0", "r0")?;
    loop {
        match client.stat("/big").await {
            Ok(_) => return Ok(killed.elapsed().as_secs_f64() * 1e3),
            Err(_) if killed.elapsed() < Duration::from_secs(600) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The master's resident memory (VmRSS), bytes.
fn master_rss(cluster: &Cluster) -> Result<u64> {
    let pid = cluster.master_pid().context("the master is not running")?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")?;
    Ok(kib << 10)
}

fn dir_bytes(dir: &std::path::Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() { dir_bytes(&e.path())? } else { m.len() };
    }
    Ok(total)
}

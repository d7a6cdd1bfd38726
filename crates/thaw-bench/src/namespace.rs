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
//!   of `/big` is served (the journal loaded), and its memory per file then;
//! - a recursive delete of a tree of a tenth as many files (at least 1,000)
//!   while 4 other clients `stat` a file in a loop: the longest of their stats
//!   and the delete call, with the tree detached and its records removed in
//!   batches (`--delete-batch`, the default 10,000) against the same delete
//!   in one transaction (`--delete-batch` above the tree's size: how every
//!   delete went before), each on a tree of its own, once.
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
pub(crate) const BIG_DIR: u64 = 1_000_000;
/// Files per directory of the rest.
pub(crate) const PER_DIR: u64 = 1000;

/// Where file `i` of the namespace goes.
pub(crate) fn path_of(i: u64) -> String {
    if i < BIG_DIR {
        format!("/big/f{i:07}")
    } else {
        format!("/tree/d{:05}/f{:04}", (i - BIG_DIR) / PER_DIR, i % PER_DIR)
    }
}

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let files = cfg.files;
    let mut cluster = one_worker(files).await?;
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
    let doomed = (files / 10).max(1000);
    let one = delete_under_load(&mut cluster, "/del-one", doomed, 1 << 40).await?;
    let batched = delete_under_load(&mut cluster, "/del-batched", doomed, DELETE_BATCH).await?;
    println!("  delete of {doomed} files: batched {batched:?}, one transaction {one:?}");
    let scale = format!("{files} files, {big} in one directory");
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
        Comparison {
            name: "ns delete stall".into(),
            thaw_label: format!(
                "longest stat of 4 other clients during a recursive delete of {doomed} files, records removed in batches of {DELETE_BATCH}"
            ),
            baseline_label: "the same delete in one journal transaction (how every delete went before)".into(),
            unit: "ms",
            thaw: batched.longest_stat_ms,
            baseline: one.longest_stat_ms,
            ratio: one.longest_stat_ms / batched.longest_stat_ms.max(1e-3),
            target: None,
            thaw_runs: vec![batched.longest_stat_ms],
            baseline_runs: vec![one.longest_stat_ms],
            notes: format!(
                "ratio: baseline / thaw (times shorter). Delete call {:.0} ms batched (records gone after {:.0} ms, \
                 {} stats answered meanwhile) vs {:.0} ms in one transaction ({} stats); master VmRSS growth \
                 during the delete {} MiB batched vs {} MiB",
                batched.call_ms,
                batched.gone_ms,
                batched.stats,
                one.call_ms,
                one.stats,
                batched.rss_growth >> 20,
                one.rss_growth >> 20
            ),
        },
    ])
}

/// The master's default `--delete-batch`.
const DELETE_BATCH: u64 = 10_000;

/// One recursive delete under load (see [`delete_under_load`]).
#[derive(Debug, Clone, Copy)]
struct DeleteRun {
    /// The delete call, ms.
    call_ms: f64,
    /// From the call to the last record removed (the gauge at 0), ms.
    gone_ms: f64,
    /// The longest `stat` of the other clients from the call to then, ms.
    longest_stat_ms: f64,
    /// Their stats answered in that time.
    stats: usize,
    /// The master's VmRSS, most seen during the delete less before it, bytes.
    rss_growth: u64,
}

/// Fills `top` with `n` empty files (1,000 a directory), then restarts the
/// master with `--delete-batch batch` and deletes `top` while 4 clients
/// `stat` another file in a loop, until the master says no record is left.
async fn delete_under_load(cluster: &mut Cluster, top: &str, n: u64, batch: u64) -> Result<DeleteRun> {
    // (After a restart above, the worker may not have registered again yet.)
    cluster.wait_for_workers(1, Duration::from_secs(30)).await?;
    let owned = top.to_string();
    fill_with(cluster, n, move |i| format!("{owned}/d{:05}/f{:04}", i / PER_DIR, i % PER_DIR)).await?;
    cluster.options.master_args =
        ["--delete-batch", &batch.to_string(), "--metrics-port", "0"].map(String::from).to_vec();
    restart(cluster).await?;
    cluster.wait_for_workers(1, Duration::from_secs(30)).await?;
    let metrics = cluster.master_metrics_addr().context("no metrics address")?.to_string();
    let probe = crate::setup::client(cluster, "h0", "r0")?;
    if probe.stat("/probe").await.is_err() {
        probe.write_all("/probe", b"x", WriteOptions::default()).await?;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut probes = Vec::new();
    for _ in 0..4 {
        let (c, stop) = (crate::setup::client(cluster, "h0", "r0")?, stop.clone());
        probes.push(tokio::spawn(async move {
            let (mut longest, mut n) = (0f64, 0usize);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                c.stat("/probe").await?;
                longest = longest.max(t.elapsed().as_secs_f64() * 1e3);
                n += 1;
            }
            anyhow::Ok((longest, n))
        }));
    }
    let rss_before = master_rss(cluster)?;
    let mut rss_most = rss_before;
    let t = Instant::now();
    let deleting = {
        let c = crate::setup::client(cluster, "h0", "r0")?;
        let top = top.to_string();
        tokio::spawn(async move { c.delete(&top, true).await.map(|_| Instant::now()) })
    };
    while !deleting.is_finished() {
        rss_most = rss_most.max(master_rss(cluster)?);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let call_ms = (deleting.await?? - t).as_secs_f64() * 1e3;
    while being_deleted(&metrics).await? > 0 {
        rss_most = rss_most.max(master_rss(cluster)?);
        ensure!(t.elapsed() < Duration::from_secs(1200), "{top}'s records were not removed in 20 minutes");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let gone_ms = t.elapsed().as_secs_f64() * 1e3;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut longest_stat_ms, mut stats) = (0f64, 0);
    for p in probes {
        let (l, n) = p.await??;
        longest_stat_ms = longest_stat_ms.max(l);
        stats += n;
    }
    ensure!(probe.stat(top).await.is_err(), "{top} is still there");
    Ok(DeleteRun { call_ms, gone_ms, longest_stat_ms, stats, rss_growth: rss_most.saturating_sub(rss_before) })
}

/// `thaw_master_inodes_being_deleted` from the master's /metrics.
async fn being_deleted(addr: &str) -> Result<u64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut body = String::new();
    s.read_to_string(&mut body).await?;
    let line = body.lines().find(|l| l.starts_with("thaw_master_inodes_being_deleted ")).context("no gauge")?;
    Ok(line.rsplit(' ').next().unwrap_or_default().parse::<f64>()? as u64)
}

/// Creates files 0..n, [`CLIENTS`] at once (each its own connection).
async fn fill(cluster: &Cluster, n: u64) -> Result<()> {
    let setup = crate::setup::client(cluster, "h0", "r0")?;
    setup.mkdir("/big", true, true).await?;
    for d in 0..n.saturating_sub(BIG_DIR).div_ceil(PER_DIR) {
        setup.mkdir(&format!("/tree/d{d:05}"), true, true).await?;
    }
    fill_with(cluster, n, path_of).await
}

/// Creates files `path(0..n)`, [`CLIENTS`] at once (each its own connection;
/// missing directories are made by the first write into them).
async fn fill_with(cluster: &Cluster, n: u64, path: impl Fn(u64) -> String + Clone + Send + 'static) -> Result<()> {
    let mut tasks = Vec::new();
    for k in 0..CLIENTS {
        let (c, path) = (crate::setup::client(cluster, "h0", "r0")?, path.clone());
        tasks.push(tokio::spawn(async move {
            let opts = WriteOptions { write_type: WriteType::MustCache, ..Default::default() };
            let mut i = k;
            while i < n {
                c.write_all(&path(i), b"", opts.clone()).await.with_context(|| path(i))?;
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

/// One master and one worker with a small memory tier, for a namespace of `files` files.
pub(crate) async fn one_worker(files: u64) -> Result<Cluster> {
    ensure!(files > 0, "--files must be positive");
    let mut options = ClusterOptions::workers(1);
    options.workers[0].mem_capacity = 64 << 20;
    Cluster::start(crate::setup::thaw_bin()?, options).await
}

/// A row of figures with no baseline yet (its ratio is not a comparison).
pub(crate) fn row(name: &str, label: String, unit: &'static str, runs: Vec<f64>, notes: String) -> Comparison {
    Comparison {
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
    }
}

/// The master's resident memory (VmRSS), bytes.
pub(crate) fn master_rss(cluster: &Cluster) -> Result<u64> {
    master_status(cluster, "VmRSS")
}

/// A memory figure of the master's /proc status (`VmRSS`, `VmHWM`), bytes.
pub(crate) fn master_status(cluster: &Cluster, key: &str) -> Result<u64> {
    let pid = cluster.master_pid().context("the master is not running")?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {key}"))?;
    Ok(kib << 10)
}

pub(crate) fn dir_bytes(dir: &std::path::Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() { dir_bytes(&e.path())? } else { m.len() };
    }
    Ok(total)
}

//! Metadata operations beside Hadoop's NameNode (issue 33): the operations of
//! Hadoop's own `NNThroughputBenchmark` (the `hadoop-hdfs` test classes, in the
//! shaded `hadoop-client-minicluster` 3.4.1 jar), from 1 to 64 concurrent
//! clients, on Thaw's master and on a NameNode on the same machine, in the same
//! run, alternating.
//!
//! Each run does `--ops` operations of one kind, shared out among N clients
//! (each its own connection: a `Client` per tokio task on Thaw, a thread per
//! client in NNThroughputBenchmark's JVM, whose calls share Hadoop's one RPC
//! connection), 1,000 files to a directory, and counts operations over the
//! wall time from the first to the last, as NNThroughputBenchmark does:
//! - `create`: an empty file created and completed (its parent made on the
//!   way); on Thaw a must-cache file, which writes nothing to the under-store,
//!   like the NameNode's create of a file with no blocks;
//! - `mkdirs`: a directory (its parents made on the way);
//! - `open`: the file's block locations (Thaw `stat_blocks`, HDFS
//!   `getBlockLocations`), of files created before the timed span;
//! - `fileStatus`: the file's status (`stat`, `getFileInfo`);
//! - `rename`: each file to a new name in its directory;
//! - `delete`: each file.
//!
//! The NameNode: `MiniHdfs` with no DataNodes (the same NameNode code as a
//! production one; its edit log on the same disk, synced at each change
//! as Thaw's journal is), served over Hadoop RPC on loopback, and
//! NNThroughputBenchmark run against it with `-fs` (its remote mode: every
//! call a real RPC, as Thaw's are), one JVM per run. Its in-process mode, which
//! calls the NameNode's methods without RPC, measures something else.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use thaw_client::{Client, WriteOptions};
use thaw_common::proto::WriteType;
use thaw_testkit::Cluster;
use thaw_testkit::hdfs::{MiniHdfs, hdfs_home};

use crate::Config;
use crate::measure::{Comparison, median};

/// NNThroughputBenchmark's operations, by its names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Create,
    Mkdirs,
    Open,
    FileStatus,
    Rename,
    Delete,
}

impl Op {
    const ALL: [Op; 6] = [Op::Create, Op::Mkdirs, Op::Open, Op::FileStatus, Op::Rename, Op::Delete];

    fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Mkdirs => "mkdirs",
            Op::Open => "open",
            Op::FileStatus => "fileStatus",
            Op::Rename => "rename",
            Op::Delete => "delete",
        }
    }

    /// Works on files made before the timed span.
    fn needs_files(self) -> bool {
        matches!(self, Op::Open | Op::FileStatus | Op::Rename | Op::Delete)
    }
}

/// Concurrent clients of each run.
pub const CLIENTS: [usize; 4] = [1, 4, 16, 64];
/// Files (or directories) to a directory, as NNThroughputBenchmark's default.
const PER_DIR: u64 = 1000;
/// Clients that make the inputs of a run (not timed).
const FILLERS: usize = 16;

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    ensure!(cfg.ops > 0, "--ops must be positive");
    let classpath = nn_classpath()?;
    let cluster = crate::setup::one_worker(64 << 20, 64 << 20).await?;
    let nn = MiniHdfs::start(0)?.context("no NameNode to compare with: run scripts/hdfs/setup.sh (a JDK and Maven)")?;
    println!("  NameNode at {}; {} operations a run", nn.name_node, cfg.ops);
    let mut out = Vec::new();
    let ops: Vec<Op> =
        Op::ALL.into_iter().filter(|o| cfg.only.is_empty() || cfg.only.iter().any(|n| n == o.name())).collect();
    ensure!(!ops.is_empty(), "--only names none of {:?}", Op::ALL.map(Op::name));
    let clients: Vec<usize> = if cfg.clients.is_empty() { CLIENTS.to_vec() } else { cfg.clients.clone() };
    for op in ops {
        for &n in &clients {
            let (mut thaw, mut hdfs) = (Vec::new(), Vec::new());
            for r in 0..cfg.repeats {
                thaw.push(thaw_run(&cluster, op, n, cfg.ops, r).await?);
                hdfs.push(nn_run(&classpath, &nn.name_node, op, n, cfg.ops)?);
            }
            out.push(compare(op, n, cfg.ops, thaw, hdfs));
        }
    }
    Ok(out)
}

fn compare(op: Op, n: usize, ops: u64, thaw: Vec<f64>, hdfs: Vec<f64>) -> Comparison {
    let (t, h) = (median(&thaw), median(&hdfs));
    Comparison {
        name: format!("{} x{n}", op.name()),
        thaw_label: format!("Thaw's master over gRPC: {ops} {} by {n} clients", op.name()),
        baseline_label: format!("NameNode 3.4.1 over Hadoop RPC (NNThroughputBenchmark -fs, {n} threads)"),
        unit: "ops/s",
        thaw: t,
        baseline: h,
        ratio: t / h,
        target: Some(1.0),
        thaw_runs: thaw,
        baseline_runs: hdfs,
        notes: String::new(),
    }
}

/// Where run `r`'s item `i` lives: 1,000 to a directory.
fn item(base: &str, op: Op, i: u64) -> String {
    let leaf = if op == Op::Mkdirs { "m" } else { "f" };
    format!("{base}/d{:05}/{leaf}{:04}", i / PER_DIR, i % PER_DIR)
}

/// One timed run on Thaw: operations per second.
async fn thaw_run(cluster: &Cluster, op: Op, n: usize, ops: u64, r: usize) -> Result<f64> {
    let base = format!("/nnbench/{}-{n}-{r}", op.name());
    let admin = crate::setup::client(cluster, "h0", "r0")?;
    if op.needs_files() {
        let base = base.clone();
        each(cluster, FILLERS, ops, move |c, i| {
            let path = item(&base, op, i);
            async move { create(&c, &path).await }
        })
        .await
        .context("making the inputs")?;
    }
    let timed = base.clone();
    let took = each(cluster, n, ops, move |c, i| {
        let path = item(&timed, op, i);
        async move {
            if op == Op::Create {
                return create(&c, &path).await;
            }
            match op {
                Op::Create => unreachable!("answered above"),
                Op::Mkdirs => c.mkdir(&path, true, false).await.map(drop),
                Op::Open => c.stat_blocks(&path, true).await.map(drop),
                Op::FileStatus => c.stat(&path).await.map(drop),
                Op::Rename => c.rename(&path, &format!("{path}.r")).await.map(drop),
                Op::Delete => c.delete(&path, false).await,
            }
            .map_err(anyhow::Error::from)
        }
    })
    .await
    .with_context(|| format!("{} by {n} clients", op.name()))?;
    admin.delete(&base, true).await?;
    Ok(ops as f64 / took)
}

async fn create(c: &Client, path: &str) -> Result<()> {
    let opts = WriteOptions { write_type: WriteType::MustCache, recursive: true, ..Default::default() };
    c.write_all(path, &[], opts).await?;
    Ok(())
}

/// Runs `f(client, i)` for every `i < ops`, shared out among `n` clients
/// (client `k` takes every `n`-th from `k`), each connected before the clock
/// starts. Returns the seconds from the start to the last one's end.
async fn each<F, Fut>(cluster: &Cluster, n: usize, ops: u64, f: F) -> Result<f64>
where
    F: Fn(Client, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        let c = crate::setup::client(cluster, "h0", "r0")?;
        c.stat("/").await?; // connect outside the timed span
        clients.push(c);
    }
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(k, c)| {
            let f = f.clone();
            tokio::spawn(async move {
                for i in (k as u64..ops).step_by(n) {
                    f(c.clone(), i).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The JVM's class path: the MiniDFSCluster jars `scripts/hdfs/setup.sh` put
/// in place (NNThroughputBenchmark is among the minicluster's classes; it
/// needs log4j 1's API, reload4j).
fn nn_classpath() -> Result<String> {
    let lib = hdfs_home().join("lib");
    let has = |prefix: &str| {
        std::fs::read_dir(&lib)
            .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with(prefix)))
            .unwrap_or(false)
    };
    ensure!(
        has("hadoop-client-minicluster") && has("reload4j"),
        "no NNThroughputBenchmark in {}: run scripts/hdfs/setup.sh (a JDK and Maven)",
        lib.display()
    );
    Ok(format!("{}/*", lib.display()))
}

/// One run of NNThroughputBenchmark against the NameNode: its "Ops per sec".
fn nn_run(classpath: &str, name_node: &str, op: Op, n: usize, ops: u64) -> Result<f64> {
    let (count, per_dir) = if op == Op::Mkdirs { ("-dirs", "-dirsPerDir") } else { ("-files", "-filesPerDir") };
    let out = Command::new("java")
        .args(["-Xmx1g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"])
        .arg("-Dorg.slf4j.simpleLogger.log.org.apache.hadoop.hdfs.server.namenode.NNThroughputBenchmark=info")
        .args(["-cp", classpath, "org.apache.hadoop.hdfs.server.namenode.NNThroughputBenchmark"])
        .args(["-fs", name_node, "-op", op.name(), "-threads", &n.to_string()])
        .args([count, &ops.to_string(), per_dir, &PER_DIR.to_string()])
        .output()
        .context("running java (NNThroughputBenchmark)")?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let rate = text.lines().find_map(|l| l.split("Ops per sec:").nth(1)).and_then(|v| v.trim().parse::<f64>().ok());
    match rate {
        Some(r) if out.status.success() => Ok(r),
        _ => bail!(
            "NNThroughputBenchmark -op {} -threads {n} failed ({}):\n{}",
            op.name(),
            out.status,
            &text[text.len().saturating_sub(3000)..]
        ),
    }
}

//! `thaw-bench`: Thaw measured next to what it has to compete with, on one machine,
//! in the same run: short-circuit and remote MEM reads, cold under-store reads,
//! metadata lookups, the user paths (`thaw fs`) and writes by write type against
//! their baselines; migrations and their planner, cache replacement decisions,
//! checkpoint order, the cost of security, cold loads, failover of a master
//! group, reads under attack, the randomized fault campaign, and the network
//! lab's links against their spec. Every figure is
//! the median of alternating repeats. Results go to stdout and to a JSON summary
//! (default `bench-out/results.json`).
//!
//! `thaw-bench [all|short-circuit|remote|cold|metadata|planner|migration|migrate-cli|early-ask|user-paths|writes|checkpoint-order|replacement|load-under-attack|auth-cost|cold-load|failover|chaos|netlab|namespace|namespace-restart|meta-ops] [--files N] [--ops N] [--size 1GiB] [--repeats 5]`

mod auth_cost;
mod checkpoint_order;
mod cold;
mod cold_load;
mod failover;
mod heartbeat;
mod load;
mod measure;
mod meta_ops;
mod metadata;
mod migrate_cli;
mod migration;
mod namespace;
mod namespace_restart;
mod netlab;
mod payload;
mod planner;
mod remote;
mod replacement;
mod setup;
mod short_circuit;
mod user_paths;
mod writes;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, ValueEnum};
use serde::Serialize;
use thaw_common::size::{format_size, parse_size};

use crate::measure::Comparison;

/// Block size of the read benchmarks' files.
pub const BLOCK_SIZE: u64 = 64 << 20;

#[derive(Parser)]
#[command(name = "thaw-bench", about = "Thaw against its baselines: MEM, remote, cold reads and metadata lookups")]
struct Cli {
    /// Which benchmark to run.
    #[arg(value_enum, default_value_t = Which::All)]
    bench: Which,
    /// Bytes each read benchmark reads per run.
    #[arg(long, value_parser = size_arg, default_value = "1GiB")]
    size: u64,
    /// Runs of each measurement (per side); the median is reported.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Seconds of each metadata run.
    #[arg(long, default_value_t = 3.0)]
    meta_secs: f64,
    /// Where the JSON summary is written.
    #[arg(long, default_value = "bench-out/results.json")]
    out: PathBuf,
    /// `chaos`: cycles of the campaign.
    #[arg(long, default_value_t = 100)]
    cycles: usize,
    /// `chaos`: the seed of its operations and faults.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// `chaos`: workers of its cluster (3-5).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// `chaos`: clients issuing the load at once, each on a worker's host.
    #[arg(long, default_value_t = 3)]
    clients: usize,
    /// `chaos`: go on after a cycle whose checks found a problem.
    #[arg(long)]
    keep_going: bool,
    /// `chaos`: masters (3: a group, whose leader the master faults hit).
    #[arg(long, default_value_t = 1)]
    masters: usize,
    /// `namespace`: files the master holds.
    #[arg(long, default_value_t = 1_000_000)]
    files: u64,
    /// `meta-ops`: operations of each run.
    #[arg(long, default_value_t = 20_000)]
    ops: u64,
    /// `meta-ops`: only these operations (create, mkdirs, open, fileStatus,
    /// rename, delete; all when none is named).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// `meta-ops`: these client counts instead of 1, 4, 16 and 64.
    #[arg(long = "clients-of", value_delimiter = ',')]
    clients_of: Vec<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    All,
    ShortCircuit,
    Remote,
    Cold,
    Metadata,
    Planner,
    Migration,
    MigrateCli,
    EarlyAsk,
    /// `thaw fs cat/get/put` against `cat`/`cp` of tmpfs files.
    UserPaths,
    /// Write throughput by write type against a tmpfs write (Tachyon, Fig. 1).
    Writes,
    /// Checkpoints newest-first against creation order (Tachyon, section 2.7).
    CheckpointOrder,
    /// A cache replacement decision at 100,000 cached blocks, per policy
    /// (lru, lfu, ca, cava), against the 50 us target.
    Replacement,
    /// 64 remote readers alone, and beside idle, stalled and half-sent
    /// connections (issue 18): throughput and p50/p99 latency.
    LoadUnderAttack,
    /// What a secret costs (issue 18): metadata lookups and remote reads on
    /// a secured cluster against an open one (target: < 5%; not part of `all`).
    AuthCost,
    /// A cold load of `--repeats` files of `--size` one after another, with
    /// drop-behind and without (issue 28): per-file MiB/s and the page cache
    /// it leaves (not part of `all`).
    ColdLoad,
    /// Highly available masters (issue 19): the time from a kill -9 of the
    /// leader of a group of 3 to the next served request (target < 5 s)
    /// against a single master restarted at once, and namespace changes per
    /// second on each (not part of `all`).
    Failover,
    /// The randomized fault campaign (issue 18): `--cycles` cycles of mixed
    /// load from `--clients` clients at once while a fault goes on (kill -9
    /// and restart, SIGSTOP of a worker or the master, a worker's tier filled),
    /// with the checks after each (not part of `all`).
    Chaos,
    /// The network lab (issue 30; needs root): TCP throughput across shaped
    /// host links against their spec (8, 32, 128 MiB/s) and unshaped against
    /// loopback, and the round trip between nodes on one host and across
    /// racks against loopback's (not part of `all`).
    Netlab,
    /// The namespace at scale (issue 33): `--files` files (up to a million
    /// in one directory), creates per second, the master's memory and journal
    /// per file, `thaw fs ls` of the big directory and a restart (not part of
    /// `all`).
    Namespace,
    /// A master restarted on a journal of `--files` files written directly
    /// (issue 33): the restart's time, the master's memory per file after
    /// it and its peak during it (not part of `all`).
    NamespaceRestart,
    /// Metadata operations beside Hadoop's NameNode (issue 33): create,
    /// mkdirs, open, fileStatus, rename and delete from 1, 4, 16 and 64
    /// clients, `--ops` a run, against NNThroughputBenchmark on a NameNode in
    /// the same run (needs a JDK: scripts/hdfs/setup.sh; not part of `all`).
    MetaOps,
}

/// What every benchmark is given.
pub struct Config {
    pub size: u64,
    pub repeats: usize,
    pub meta_secs: f64,
    /// `namespace`: files the master holds.
    pub files: u64,
    /// `meta-ops`: operations of each run.
    pub ops: u64,
    /// `meta-ops`: which operations (none: all).
    pub only: Vec<String>,
    /// `meta-ops`: client counts (none: 1, 4, 16, 64).
    pub clients: Vec<usize>,
}

#[derive(Serialize)]
struct Summary<'a> {
    unix_ms: u64,
    cpus: usize,
    size_bytes: u64,
    repeats: usize,
    statistic: &'static str,
    results: &'a [Comparison],
}

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.message)
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    anyhow::ensure!(cli.repeats > 0 && cli.size > 0, "--repeats and --size must be positive");
    if cli.bench == Which::Chaos {
        return chaos(&cli).await;
    }
    let cfg = Config {
        size: cli.size,
        repeats: cli.repeats,
        meta_secs: cli.meta_secs,
        files: cli.files,
        ops: cli.ops,
        only: cli.only.clone(),
        clients: cli.clients_of.clone(),
    };
    println!(
        "thaw-bench: {} per read run, median of {} alternating repeats after one warm-up run of each side",
        format_size(cfg.size),
        cfg.repeats
    );
    let results = run(cli.bench, &cfg).await?;
    print_table(&results);
    write_json(&cli.out, &cfg, &results)?;
    println!("JSON summary: {}", cli.out.display());
    Ok(())
}

/// The fault campaign: prints its report; fails if it found anything.
async fn chaos(cli: &Cli) -> Result<()> {
    let (seed, cycles) = (cli.seed, cli.cycles);
    anyhow::ensure!(
        cli.workers >= 3 && (1..=cli.workers).contains(&cli.clients),
        "--workers: 3 or more; --clients: 1 to --workers"
    );
    let cfg = thaw_testkit::chaos::ChaosConfig {
        seed,
        cycles,
        workers: cli.workers,
        clients: cli.clients,
        ops_per_cycle: 40,
        verbose: true,
        keep_going: cli.keep_going,
        masters: cli.masters,
    };
    let started = std::time::Instant::now();
    let report = thaw_testkit::chaos::run(&setup::thaw_bin()?, &cfg).await?;
    println!(
        "chaos campaign, seed {seed}, {} of {cycles} cycles in {:.0} s",
        report.cycles,
        started.elapsed().as_secs_f64()
    );
    println!("{report:#?}");
    anyhow::ensure!(report.clean() && report.cycles == cycles, "the campaign found problems");
    Ok(())
}

/// Runs the chosen benchmarks, printing each line as soon as it is measured.
async fn run(which: Which, cfg: &Config) -> Result<Vec<Comparison>> {
    let wants = |w| which == Which::All || which == w;
    let mut results = Vec::new();
    let mut done = |c: Comparison| {
        println!("{}", c.line());
        results.push(c);
    };
    if wants(Which::ShortCircuit) {
        done(short_circuit::run(cfg).await?);
    }
    if wants(Which::UserPaths) {
        user_paths::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if wants(Which::Remote) {
        done(remote::run(cfg).await?);
    }
    if wants(Which::Cold) {
        done(cold::run(cfg, false).await?);
        done(cold::run(cfg, true).await?);
    }
    if wants(Which::Metadata) {
        metadata::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if wants(Which::Migration) {
        migration::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if wants(Which::MigrateCli) {
        done(migrate_cli::run(cfg).await?);
    }
    if wants(Which::EarlyAsk) {
        done(heartbeat::run(cfg).await?);
    }
    if wants(Which::Planner) {
        done(planner::run(cfg)?);
    }
    if wants(Which::Writes) {
        writes::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if wants(Which::CheckpointOrder) {
        checkpoint_order::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if wants(Which::Replacement) {
        replacement::run(cfg)?.into_iter().for_each(&mut done);
    }
    if wants(Which::LoadUnderAttack) {
        let c = load::run(cfg).await?;
        println!("  {}", c.notes);
        done(c);
    }
    if which == Which::AuthCost {
        auth_cost::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if which == Which::ColdLoad {
        let c = cold_load::run(cfg).await?;
        println!("  {}", c.notes);
        done(c);
    }
    if which == Which::Netlab {
        netlab::run(cfg)?.into_iter().for_each(&mut done);
    }
    if which == Which::Namespace {
        namespace::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if which == Which::NamespaceRestart {
        namespace_restart::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if which == Which::MetaOps {
        meta_ops::run(cfg).await?.into_iter().for_each(&mut done);
    }
    if which == Which::Failover {
        failover::run(cfg).await?.into_iter().for_each(&mut done);
    }
    Ok(results)
}

/// The results as a Markdown table (what BENCHMARKS.md shows).
fn print_table(results: &[Comparison]) {
    println!();
    println!("| benchmark | Thaw | baseline | ratio | target | notes |");
    println!("| --- | ---: | ---: | ---: | ---: | --- |");
    for c in results {
        let target = c.target.map(|t| format!(">= {t:.2}")).unwrap_or_else(|| "-".into());
        println!(
            "| {} | {:.0} {u} | {:.0} {u} | {:.2} | {target} | {} |",
            c.name,
            c.thaw,
            c.baseline,
            c.ratio,
            c.notes,
            u = c.unit
        );
    }
}

fn write_json(out: &std::path::Path, cfg: &Config, results: &[Comparison]) -> Result<()> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let summary = Summary {
        unix_ms: thaw_common::now_ms(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        size_bytes: cfg.size,
        repeats: cfg.repeats,
        statistic: "median",
        results,
    };
    std::fs::write(out, serde_json::to_string_pretty(&summary)?)?;
    Ok(())
}

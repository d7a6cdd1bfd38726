//! `thaw`: one binary for the local cluster, the servers, and the client commands.

mod auth;
mod demo;
mod fs;
mod interfere;
mod jobs;
mod lineage;
mod local_dirs;
mod mount;
mod output;
mod servers;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use thaw_common::size::parse_size;

#[derive(Parser)]
#[command(
    name = "thaw",
    version,
    about = "Thaw: a distributed memory tier that moves cold inputs into memory before jobs read them"
)]
struct Cli {
    /// Master address (host:port).
    #[arg(long, global = true, env = "THAW_MASTER")]
    master: Option<String>,
    /// Job id carried by every read and write.
    #[arg(long, global = true, env = "THAW_JOB_ID")]
    job: Option<String>,
    /// Log filter, e.g. info or thaw_worker=debug (also RUST_LOG).
    #[arg(long, global = true, env = "THAW_LOG")]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a whole cluster (master and workers) in the foreground; Ctrl-C stops it.
    Local(servers::LocalArgs),
    /// Run a master.
    Master(servers::MasterArgs),
    /// Run a worker.
    Worker(servers::WorkerArgs),
    /// File system commands.
    #[command(subcommand)]
    Fs(fs::FsCommand),
    /// Security: the cluster secret, tokens, who you are.
    #[command(subcommand)]
    Auth(auth::AuthCommand),
    /// Lineage: which program derives which files from which (tachyon.txt 2.4),
    /// so files lost before their checkpoint can be rebuilt.
    #[command(subcommand)]
    Lineage(lineage::LineageCommand),
    /// Mount the namespace as a read-only file system (FUSE) at MOUNTPOINT and
    /// serve it until Ctrl-C, SIGTERM or `thaw umount`; blocks on this host are
    /// read from their files. Reads carry --job.
    Mount(mount::MountArgs),
    /// Unmount a `thaw mount` (works with the master or the mount process gone).
    Umount(mount::UmountArgs),
    /// Workers, their tiers and liveness.
    Status(StatusArgs),
    /// The memory cache (cava.txt IV): per worker its policy, bytes cached,
    /// hit ratio, evictions and dropped fills; per application its cache
    /// affinity class and the figures it was classified by; per file its
    /// frequency in the window and caching benefit.
    Cache(CacheArgs),
    /// Move a job's inputs into memory before it reads them (returns at once;
    /// --wait shows progress). The job is --job (or THAW_JOB_ID).
    Migrate(jobs::MigrateArgs),
    /// Release a job's blocks from memory (all of them: the job ends).
    Evict(jobs::EvictArgs),
    /// Jobs with migration state: blocks pending, queued, in memory, read; who
    /// submitted each and how its tasks went, if its submitter said.
    Jobs(jobs::JobsArgs),
    /// The log of finished and dropped migrations (block, worker, source, times).
    Events(jobs::EventsArgs),
    /// Synthetic load on a worker's emulated device (evaluation; the worker needs
    /// --device-model): `thaw interfere --worker 1 --device disk on --streams 2`.
    Interfere(interfere::InterfereArgs),
    /// The main demo: a cold data set read through Thaw, then from memory, on an
    /// embedded local cluster.
    Demo(demo::DemoArgs),
}

#[derive(Args)]
struct CacheArgs {
    #[arg(long)]
    json: bool,
    /// Files listed, highest benefit first.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    files: u32,
}

#[derive(Args)]
struct StatusArgs {
    #[arg(long)]
    json: bool,
}

pub fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.message)
}

pub fn dir_arg(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

fn init_logging(filter: Option<&str>, default: &str) {
    let filter =
        filter.map(str::to_string).or_else(|| std::env::var("RUST_LOG").ok()).unwrap_or_else(|| default.to_string());
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        Err(e) => {
            // One clear line, as for every other error.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ");
            eprintln!("thaw: error: {first}");
            std::process::exit(2);
        }
    };
    let server = matches!(cli.command, Command::Local(_) | Command::Master(_) | Command::Worker(_));
    // Long-running commands that talk to servers must see a dead peer's socket
    // as EPIPE, not be killed by SIGPIPE: `thaw demo` (workers in this
    // process) and `thaw mount` (a master killed mid-call must turn into EIO
    // for the mount's readers, not abort the mount).
    let quiet_servers = matches!(cli.command, Command::Demo(_) | Command::Mount(_));
    init_logging(cli.log.as_deref(), if server && !quiet_servers { "info" } else { "warn" });
    if !server && !quiet_servers {
        // Client commands end quietly when their output pipe closes (`thaw fs cat | head`).
        // SAFETY: setting a signal disposition before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("thaw: error: cannot start runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = rt.block_on(run(cli));
    if let Err(e) = result {
        eprintln!("thaw: error: {e:#}");
        std::process::exit(1);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let client = || {
        let mut cfg = thaw_client::ClientConfig::from_env(cli.master.clone());
        if let Some(job) = &cli.job {
            cfg.job_id = job.clone();
        }
        thaw_client::Client::new(cfg)
    };
    match cli.command {
        Command::Local(args) => servers::run_local(args).await,
        Command::Master(args) => servers::run_master(args).await,
        Command::Worker(args) => servers::run_worker(args, cli.master).await,
        Command::Fs(cmd) => fs::run(client()?, cmd).await,
        Command::Auth(auth::AuthCommand::Secret { path }) => auth::secret(&path),
        Command::Auth(auth::AuthCommand::Certs { dir, hosts }) => auth::certs(&dir, &hosts),
        Command::Auth(cmd) => auth::run(client()?, cmd).await,
        Command::Lineage(cmd) => lineage::run(client()?, cmd).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Mount(args) => {
            let mut cfg = thaw_client::ClientConfig::from_env(cli.master.clone());
            if let Some(job) = &cli.job {
                cfg.job_id = job.clone();
            }
            mount::mount(cfg, args).await
        }
        Command::Umount(args) => mount::umount(args),
        Command::Migrate(args) => jobs::migrate(client()?, args).await,
        Command::Evict(args) => jobs::evict(client()?, args).await,
        Command::Jobs(args) => jobs::jobs(client()?, args).await,
        Command::Events(args) => jobs::events(client()?, args).await,
        Command::Interfere(args) => interfere::run(client()?, args).await,
        Command::Cache(args) => {
            let report = client()?.cache_report(args.files).await?;
            output::print_cache(&report, args.json);
            Ok(())
        }
        Command::Status(args) => {
            let c = client()?;
            let status = c.cluster_status().await?;
            if args.json {
                // With the cache report: applications' classes and files' benefits.
                let mut v = thaw_client::json::status_json(&status);
                v["cache"] = thaw_client::json::cache_report_json(&c.cache_report(0).await?);
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            output::print_status(&status, false);
            Ok(())
        }
    }
}

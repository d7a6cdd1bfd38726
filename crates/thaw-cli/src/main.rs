//! `thaw`: one binary for the local cluster, the servers, and the client commands.

mod auth;
mod client_args;
mod demo;
mod fs;
mod gateway;
mod interfere;
mod jobs;
mod lineage;
mod local_dirs;
mod mount;
mod netlab;
mod output;
mod server_args;
mod servers;
mod transfer;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use client_args::{ClientArgs, ClientGroup, WithClient};
use thaw_common::size::parse_size;

#[derive(Parser)]
#[command(
    name = "thaw",
    version,
    about = "Thaw: a distributed memory tier that moves cold inputs into memory before jobs read them"
)]
struct Cli {
    /// For client commands: the master's address HOST:PORT (a group: a,b,c).
    /// Default: THAW_MASTER, else 127.0.0.1:19998. Also after the command.
    #[arg(long, value_name = "HOST:PORT")]
    master: Option<String>,
    /// For client commands: the job id carried by every read and write.
    /// Default: THAW_JOB_ID. Also after the command.
    #[arg(long, value_name = "ID")]
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
    Fs(ClientGroup<fs::FsCommand>),
    /// Security: the cluster secret, tokens, who you are.
    Auth(ClientGroup<auth::AuthCommand>),
    /// Lineage: which program derives which files from which (Tachyon, section 2.4),
    /// so files lost before their checkpoint can be rebuilt.
    Lineage(ClientGroup<lineage::LineageCommand>),
    /// Mount the namespace as a read-only file system (FUSE) at MOUNTPOINT and
    /// serve it until Ctrl-C, SIGTERM or `thaw umount`; blocks on this host are
    /// read from their files. Reads carry --job.
    Mount(WithClient<mount::MountArgs>),
    /// Unmount a `thaw mount` (works with the master or the mount process gone).
    Umount(mount::UmountArgs),
    /// Serve S3 over the namespace (buckets are top-level directories) until
    /// Ctrl-C or SIGTERM: any S3 client reads Thaw memory through it.
    Gateway(WithClient<gateway::GatewayArgs>),
    /// Workers, their tiers and liveness.
    Status(WithClient<StatusArgs>),
    /// The memory cache (CAVA, section IV): per worker its policy, bytes cached,
    /// hit ratio, evictions and dropped fills; per application its cache
    /// affinity class and the figures it was classified by; per file its
    /// frequency in the window and caching benefit.
    Cache(WithClient<CacheArgs>),
    /// Move a job's inputs into memory before it reads them (returns at once;
    /// --wait shows progress). The job is --job (or THAW_JOB_ID).
    Migrate(WithClient<jobs::MigrateArgs>),
    /// Release a job's blocks from memory (all of them: the job ends).
    Evict(WithClient<jobs::EvictArgs>),
    /// Jobs with migration state: blocks pending, queued, in memory, read; who
    /// submitted each and how its tasks went, if its submitter said.
    Jobs(WithClient<jobs::JobsArgs>),
    /// The log of finished and dropped migrations (block, worker, source, times).
    Events(WithClient<jobs::EventsArgs>),
    /// Synthetic load on a worker's emulated device (evaluation; the worker needs
    /// --device-model): `thaw interfere --worker 1 --device disk on --streams 2`.
    Interfere(WithClient<interfere::InterfereArgs>),
    /// The main demo: a cold data set read through Thaw, then from memory, on an
    /// embedded local cluster.
    Demo(demo::DemoArgs),
    /// Emulated hosts with a network between them (evaluation; needs root):
    /// `thaw netlab up --network host=100MiB/s --node w0@h0/r0 --node w1@h1/r1`.
    Netlab {
        #[command(subcommand)]
        command: netlab::NetlabCommand,
    },
}

#[derive(Args)]
struct CacheArgs {
    /// Print JSON (for scripts) instead of tables.
    #[arg(long)]
    json: bool,
    /// Files listed, highest benefit first.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    files: u32,
}

#[derive(Args)]
struct StatusArgs {
    /// Print JSON (for scripts), with the cache report, instead of tables.
    #[arg(long)]
    json: bool,
}

pub fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.message)
}

pub fn dir_arg(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

/// Blocks SIGPIPE in the calling thread: its writes to closed sockets fail
/// with EPIPE instead.
fn block_sigpipe() {
    // SAFETY: a signal set built and applied to this thread's mask only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
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
    // RUST_BACKTRACE=1 (kept for panics) also makes every library error
    // capture a backtrace: OpenDAL's do, and a NotFound from an under-store
    // stat is routine. Unless asked for, errors do not capture them. Set
    // before any thread starts.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: the process has one thread yet; nothing reads the
        // environment concurrently.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
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
    if let Command::Netlab { command } = cli.command {
        netlab::main(command);
    }
    let server = matches!(cli.command, Command::Local(_) | Command::Master(_) | Command::Worker(_));
    // Long-running commands that talk to servers must see a dead peer's socket
    // as EPIPE, not be killed by SIGPIPE: `thaw demo` (workers in this
    // process) and `thaw mount` (a master killed mid-call must turn into EIO
    // for the mount's readers, not abort the mount).
    let quiet_servers = matches!(cli.command, Command::Demo(_) | Command::Mount(_) | Command::Gateway(_));
    init_logging(cli.log.as_deref(), if server && !quiet_servers { "info" } else { "warn" });
    let client = !server && !quiet_servers;
    if client {
        // Client commands end quietly when their output pipe closes (`thaw fs cat | head`).
        // SAFETY: setting a signal disposition before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if client {
        // ...but a socket its peer closed (a TLS port reached without TLS, a
        // master killed) is an error to report, not a silent death: the
        // runtime's threads, which drive the connections, block SIGPIPE and
        // see EPIPE. Standard output is written from this thread.
        builder.on_thread_start(block_sigpipe);
    }
    let rt = match builder.enable_all().build() {
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
    let outer = ClientArgs { master: cli.master.clone(), job: cli.job.clone() };
    let client = |flags: &ClientArgs| thaw_client::Client::new(flags.or(&outer).config());
    let server_flags = |name: &str, master_ok: bool| {
        let flag = if cli.job.is_some() {
            Some("--job")
        } else {
            cli.master.as_ref().filter(|_| !master_ok).map(|_| "--master")
        };
        match flag {
            Some(flag) => Err(anyhow::anyhow!(
                "{flag} is a flag of client commands: `thaw {name}` runs a server (see `thaw {name} --help`)"
            )),
            None => Ok(()),
        }
    };
    match cli.command {
        Command::Local(args) => {
            server_flags("local", false)?;
            servers::run_local(args).await
        }
        Command::Master(args) => {
            server_flags("master", false)?;
            servers::run_master(args).await
        }
        Command::Worker(args) => {
            server_flags("worker", true)?;
            servers::run_worker(args, cli.master).await
        }
        Command::Fs(g) => fs::run(client(&g.client)?, g.command).await,
        Command::Auth(ClientGroup { command: auth::AuthCommand::Secret { path }, .. }) => auth::secret(&path),
        Command::Auth(ClientGroup { command: auth::AuthCommand::Certs { dir, hosts }, .. }) => {
            auth::certs(&dir, &hosts)
        }
        Command::Auth(g) => auth::run(client(&g.client)?, g.command).await,
        Command::Lineage(g) => lineage::run(client(&g.client)?, g.command).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Netlab { .. } => unreachable!("thaw netlab runs before the runtime starts"),
        Command::Mount(a) => mount::mount(a.client.or(&outer).config(), a.args).await,
        Command::Umount(args) => mount::umount(args),
        Command::Gateway(a) => gateway::run(client(&a.client)?, a.args).await,
        Command::Migrate(a) => jobs::migrate(client(&a.client)?, a.args).await,
        Command::Evict(a) => jobs::evict(client(&a.client)?, a.args).await,
        Command::Jobs(a) => jobs::jobs(client(&a.client)?, a.args).await,
        Command::Events(a) => jobs::events(client(&a.client)?, a.args).await,
        Command::Interfere(a) => interfere::run(client(&a.client)?, a.args).await,
        Command::Cache(a) => {
            let report = client(&a.client)?.cache_report(a.args.files).await?;
            output::print_cache(&report, a.args.json);
            Ok(())
        }
        Command::Status(a) => {
            let c = client(&a.client)?;
            let status = c.cluster_status().await?;
            if a.args.json {
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

#[cfg(test)]
mod help_tests;

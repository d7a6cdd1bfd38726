//! `thaw mount` and `thaw umount`: the namespace as a read-only file system
//! (see the `thaw-fuse` crate for how it serves).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct MountArgs {
    /// An existing empty directory to mount the namespace on.
    #[arg(value_parser = crate::dir_arg)]
    mountpoint: PathBuf,
    /// How long file attributes and directory entries are cached, in seconds.
    #[arg(long, default_value_t = 1.0, value_parser = seconds)]
    attr_ttl: f64,
    /// Bound on each call to the master or a worker, in seconds: past it the
    /// read or lookup fails with EIO (a master gone never hangs a reader).
    #[arg(long, default_value_t = 5.0, value_parser = seconds)]
    timeout: f64,
    /// Threads serving kernel requests.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Never open files in kernel passthrough; read every local block with pread.
    #[arg(long)]
    no_passthrough: bool,
    /// Answer reads of local blocks with pread and a copy, not by splicing
    /// the block file into the reply.
    #[arg(long)]
    no_splice: bool,
    /// Read every file not in passthrough with direct_io: no second copy of
    /// its bytes in the kernel's page cache, one round trip to this process
    /// per read. By default a file goes through the page cache once its
    /// readers are seen making small reads (columnar readers), else direct_io.
    #[arg(long, conflicts_with = "page_cache")]
    direct_io: bool,
    /// Read every file not in passthrough through the kernel's page cache,
    /// kept across opens while the file is unchanged.
    #[arg(long)]
    page_cache: bool,
    /// Let users other than the mounting one read the mount.
    #[arg(long)]
    allow_other: bool,
}

#[derive(Args)]
pub struct UmountArgs {
    /// A directory where `thaw mount` mounted the namespace.
    #[arg(value_parser = crate::dir_arg)]
    mountpoint: PathBuf,
    /// Detach at once even if files are open (they stay readable until closed,
    /// if `thaw mount` still runs).
    #[arg(long)]
    lazy: bool,
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds from 0 to 3600")),
    }
}

/// Mounts, then serves until Ctrl-C or SIGTERM (then unmounts) or until the
/// mount is unmounted from outside (`thaw umount`).
pub async fn mount(mut cfg: thaw_client::ClientConfig, args: MountArgs) -> anyhow::Result<()> {
    let timeout = Duration::from_secs_f64(args.timeout);
    // A read does not retry past the request's own bound.
    cfg.retry_for = cfg.retry_for.min(timeout);
    let client = thaw_client::Client::new(cfg)?;
    // Fail early and clearly if the master cannot be reached.
    tokio::time::timeout(timeout, client.stat("/"))
        .await
        .map_err(|_| anyhow::anyhow!("master {} did not answer within {timeout:?}", client.config().master))?
        .with_context(|| "cannot mount: the master does not answer".to_string())?;
    let opts = thaw_fuse::MountOptions {
        attr_ttl: Duration::from_secs_f64(args.attr_ttl),
        timeout,
        threads: args.threads as usize,
        passthrough: !args.no_passthrough,
        cache: match (args.direct_io, args.page_cache) {
            (true, _) => thaw_fuse::CacheMode::Never,
            (_, true) => thaw_fuse::CacheMode::Always,
            _ => thaw_fuse::CacheMode::Auto,
        },
        allow_other: args.allow_other,
        splice: !args.no_splice,
    };
    let job = client.config().job_id.clone();
    let mountpoint = args.mountpoint.clone();
    let thaw_fuse::Mounted { session, stats } =
        thaw_fuse::mount(client, tokio::runtime::Handle::current(), &mountpoint, opts)
            .with_context(|| format!("cannot mount on {}", mountpoint.display()))?;
    // The line scripts and tests wait for.
    println!(
        "thaw mounted on {}{}",
        mountpoint.display(),
        if job.is_empty() { String::new() } else { format!(" (job {job})") }
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let signal = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break true,
            _ = term.recv() => break true,
            _ = tick.tick() => if session.guard.is_finished() { break false },
        }
    };
    let _served = scopeguard(stats);
    if !signal {
        // Unmounted from outside: the session ended on its own.
        return tokio::task::spawn_blocking(move || thaw_fuse::join_unmounted(session))
            .await?
            .context("serving the mount");
    }
    eprintln!("thaw: unmounting {}", mountpoint.display());
    if let Err(e) = thaw_fuse::unmount(&mountpoint, false) {
        // Busy: detach it; ending this process then ends the connection, so
        // programs still inside get errors, not a hang.
        eprintln!("thaw: {e}; detaching it");
        thaw_fuse::unmount(&mountpoint, true).with_context(|| format!("cannot unmount {}", mountpoint.display()))?;
        // Detached: dropping the session would try to unmount it again.
        std::mem::forget(session);
        return Ok(());
    }
    tokio::task::spawn_blocking(move || thaw_fuse::join_unmounted(session)).await?.context("serving the mount")
}

/// Says what the mount served when the command ends, however it ends.
fn scopeguard(stats: std::sync::Arc<thaw_fuse::ServeStats>) -> impl Drop {
    struct Say(std::sync::Arc<thaw_fuse::ServeStats>);
    impl Drop for Say {
        fn drop(&mut self) {
            eprintln!("thaw mount: served {}", self.0);
        }
    }
    Say(stats)
}

pub fn umount(args: UmountArgs) -> anyhow::Result<()> {
    thaw_fuse::unmount(&args.mountpoint, args.lazy)
        .with_context(|| format!("cannot unmount {}", args.mountpoint.display()))
}

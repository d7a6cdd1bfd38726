//! `thaw mount`: the namespace as a read-only POSIX file system (FUSE), so that
//! programs that only know paths (DuckDB's `read_parquet`, polars, `cp`, `grep`)
//! read Thaw memory natively. Issue 17, item 3. A layer over `thaw-client` only.
//!
//! - **Metadata**: lookup, getattr and readdir ask the master; attributes are
//!   cached here and in the kernel for `attr_ttl` (1 s by default), and a listing
//!   fills the cache, so `ls -l` costs one call per directory ([`inodes`]).
//! - **Open** is the client's open: the block map is fetched once per open.
//! - **Reads**: a block with a replica on this host is read from its block file,
//!   never copied through the worker. A file of one block opens in kernel
//!   passthrough (FUSE_PASSTHROUGH, Linux 6.9+) when the kernel offers it and
//!   this process may register backing files (CAP_SYS_ADMIN): the kernel then
//!   reads the block file itself and no read reaches this process, as fast as
//!   reading the tmpfs file directly. Passthrough maps one FUSE file onto one
//!   backing file at the same offsets, so a file of several blocks (several
//!   block files) cannot use it: each read of it is answered by splicing the
//!   block file's pages into the reply (module `splice`: one copy, as reading the
//!   tmpfs file; pread and a copy where splicing is not possible). A block on
//!   another host goes through the client's stream (with its fail-over), as
//!   `thaw fs cat` would.
//! - **Page cache**: a file not in passthrough is read one of two ways,
//!   chosen per open (`CacheMode::Auto`).
//!   - With `direct_io`: each read is a request to this process, answered by
//!     splicing the block file into the reply (one copy), with no second copy
//!     of the bytes in the kernel's page cache. One pass over a large file
//!     (`cat`, `cp`) runs at 0.74-0.89x of reading a tmpfs file.
//!   - Through the page cache: a file of a format read in small pieces
//!     ([`inodes::SMALL_PIECE_FORMATS`]: parquet, ORC, Arrow, DuckDB and
//!     SQLite files) from its first open, and any other file once its readers
//!     are seen making small reads (under [`inodes::SMALL_READ`] on average
//!     over a handle's life). Columnar readers do: DuckDB's query over `make demo`'s 512 MiB makes about
//!     21,000 preads of 256 B to 37 KiB, each a ~35 us round trip here with
//!     `direct_io`. The pages are kept across opens (FOPEN_KEEP_CACHE) while
//!     the path names the same Thaw file ([`inodes::Inodes::keep_cache`]:
//!     complete Thaw files never change; a path written anew drops them).
//!   - Measured (BENCHMARKS.md, "thaw mount"):
//!     - that query runs at 0.92-0.94x of warm local files once the pages are
//!       cached, against 0.49-0.56x with `direct_io` alone;
//!     - a first `cat` through the page cache runs at only 0.26-0.35x (two
//!       copies, and a page-cache insertion per 4 KiB page), which is why it
//!       is not used for every file.
//!   - `--page-cache` (`CacheMode::Always`) and `--direct-io`
//!     (`CacheMode::Never`) fix the choice. Shared mmap of direct_io files
//!     works (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6+).
//!   - FUSE file systems over object stores leave users this choice
//!     (s3fs's and ossfs's `kernel_cache` for data read often, direct reads
//!     for one pass); Thaw makes it from what it sees.
//!   - Files report a 4 MiB `st_blksize`, so `cat`/`cp` ask for several
//!     requests' worth per system call, served in parallel (FUSE_ASYNC_DIO,
//!     or read-ahead).
//! - **Threads**: `threads` event loops serve requests (fuser's `n_threads`),
//!   so one slow remote read does not hold back the readers of local blocks.
//! - **Failure**: every client call is bounded by `timeout`: a master or
//!   worker gone makes the request fail with EIO, never hang; the mount can
//!   always be unmounted ([`unmount`] talks to no server).
//! - **Writes** are refused with EROFS (the mount is also `ro` to the kernel).

mod fs;
pub mod inodes;
mod splice;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use fuser::BackgroundSession;
use thaw_client::Client;

/// How a file that is not in passthrough is read: through the kernel's page
/// cache (kept across opens while the file is the same Thaw file), or with
/// `direct_io` (every read a request to this process, no second copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// `direct_io` at first; the page cache for a file whose readers were
    /// seen making small reads ([`inodes::SMALL_READ`] on average).
    Auto,
    /// Always the page cache.
    Always,
    /// Always `direct_io`.
    Never,
}

/// How the mount serves.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// How long attributes and directory entries are cached (here and in the kernel).
    pub attr_ttl: Duration,
    /// Bound on each call to the master or a worker behind one request.
    pub timeout: Duration,
    /// Event-loop threads serving kernel requests.
    pub threads: usize,
    /// Open single-block local files in kernel passthrough when the kernel has it.
    pub passthrough: bool,
    /// How files not in passthrough use the kernel's page cache.
    pub cache: CacheMode,
    /// Let other users than the mounting one read the mount (`allow_other`).
    pub allow_other: bool,
    /// Answer reads of local blocks by splicing the block file into the reply
    /// (one copy instead of two; needs root for the pipe size).
    pub splice: bool,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            attr_ttl: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
            threads: 8,
            passthrough: true,
            cache: CacheMode::Auto,
            allow_other: false,
            splice: true,
        }
    }
}

/// What a mount served, counted as it serves.
#[derive(Debug, Default)]
pub struct ServeStats {
    pub opens: AtomicU64,
    /// Opens the kernel serves itself from the block file (passthrough).
    pub passthrough_opens: AtomicU64,
    /// Bytes this process read from block files on this host (pread or splice).
    pub local_bytes: AtomicU64,
    /// Of those, bytes spliced from the block file into the reply.
    pub spliced_bytes: AtomicU64,
    /// Bytes read through the client's stream from a worker.
    pub streamed_bytes: AtomicU64,
}

impl std::fmt::Display for ServeStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        write!(
            f,
            "{} opens ({} in passthrough), {} bytes read from local block files ({} spliced), {} bytes streamed from workers",
            get(&self.opens),
            get(&self.passthrough_opens),
            get(&self.local_bytes),
            get(&self.spliced_bytes),
            get(&self.streamed_bytes)
        )
    }
}

/// A mount being served.
pub struct Mounted {
    pub session: BackgroundSession,
    pub stats: Arc<ServeStats>,
}

/// Mounts the namespace read-only at `mountpoint`, served by threads of its
/// own that run client calls on `rt`. Unmounted when the returned session is
/// dropped or [`BackgroundSession::umount_and_join`]ed, or from outside.
pub fn mount(client: Client, rt: tokio::runtime::Handle, mountpoint: &Path, opts: MountOptions) -> io::Result<Mounted> {
    if !Path::new("/dev/fuse").exists() {
        return Err(io::Error::new(io::ErrorKind::NotFound, "/dev/fuse is missing: the kernel has no FUSE here"));
    }
    if !mountpoint.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("mount point {} is not a directory", mountpoint.display()),
        ));
    }
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("thaw".into()),
        fuser::MountOption::Subtype("thaw".into()),
        fuser::MountOption::RO,
        fuser::MountOption::NoSuid,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoAtime,
        fuser::MountOption::DefaultPermissions,
    ];
    if opts.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    config.n_threads = Some(opts.threads.max(1));
    let (cache, splice) = (opts.cache, opts.splice);
    let stats = Arc::new(ServeStats::default());
    let splicer = Arc::new(OnceLock::new());
    let fs = fs::ThawFs::new(client, rt, opts, stats.clone(), splicer.clone());
    let session = fuser::Session::new(fs, mountpoint, &config)?;
    if splice {
        use std::os::fd::AsFd;
        match session.as_fd().try_clone_to_owned() {
            Ok(fd) => {
                let _ = splicer.set(splice::Splicer::new(fd));
            }
            Err(e) => tracing::info!(error = %e, "no splice replies: reads are answered with pread"),
        }
    }
    let session = session.spawn()?;
    if cache != CacheMode::Never {
        raise_readahead(mountpoint, 4096);
    }
    Ok(Mounted { session, stats })
}

/// Sets the mount's read-ahead (the kernel offers FUSE at most its default,
/// 128 KiB, at init; root may raise it through the mount's bdi afterwards).
/// Best effort: a failure only logs.
fn raise_readahead(mountpoint: &Path, kib: u32) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(mountpoint) else { return };
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let knob = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    if let Err(e) = std::fs::write(&knob, kib.to_string()) {
        tracing::debug!(error = %e, knob, "could not raise the mount's read-ahead");
    }
}

/// Waits for the serving threads of a mount already unmounted (by
/// [`unmount`], from outside or by us) to end. Joining `fuser`'s session
/// directly would drop its mount guard, which unmounts again, fails with
/// EINVAL and logs "Unmount failed: Invalid argument" after a clean unmount:
/// so the guard is never dropped (the process is ending; the kernel closed
/// the connection already).
pub fn join_unmounted(session: BackgroundSession) -> io::Result<()> {
    let session = std::mem::ManuallyDrop::new(session);
    // SAFETY: `guard` is read out once and `session` is never used or
    // dropped afterwards, so the handle is owned exactly once.
    let guard = unsafe { std::ptr::read(&session.guard) };
    guard.join().map_err(|_| io::Error::other("the mount's serving thread panicked"))?
}

/// Unmounts a Thaw (or any FUSE) mount without asking any server, so it works
/// with the master dead. `lazy`: detach now even while files are open
/// (MNT_DETACH). As root with umount2(2); otherwise with `fusermount3 -u`.
pub fn unmount(mountpoint: &Path, lazy: bool) -> io::Result<()> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(mountpoint.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mount point with a NUL byte"))?;
        let flags = if lazy { libc::MNT_DETACH } else { 0 };
        // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
        if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EBUSY) => io::Error::new(
                e.kind(),
                format!(
                    "{} is busy (a file is open or a shell is in it); --lazy detaches it now",
                    mountpoint.display()
                ),
            ),
            Some(libc::EINVAL) => io::Error::new(e.kind(), format!("{} is not a mount point", mountpoint.display())),
            _ => e,
        });
    }
    let mut cmd = std::process::Command::new("fusermount3");
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    let out = cmd.arg(mountpoint).output().map_err(|e| {
        io::Error::new(e.kind(), format!("fusermount3 (from the fuse3 package) is needed to unmount as a user: {e}"))
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()))
    }
}

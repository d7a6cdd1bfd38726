//! `thaw mount`: the namespace read through the kernel by ordinary programs
//! (std::fs, cp, grep), writes refused, and a mount whose master dies fails
//! reads with EIO in bounded time and still unmounts.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

const MIB: usize = 1 << 20;

/// Why FUSE mounts cannot run here, if they cannot (then the test is skipped).
fn fuse_missing() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let fusermount = Command::new("fusermount3").arg("-V").output().is_ok_and(|o| o.status.success());
    if !root && !fusermount {
        return Some("not root and fusermount3 is not installed (Debian package fuse3)".into());
    }
    None
}

macro_rules! require_fuse {
    () => {
        if let Some(why) = fuse_missing() {
            println!("SKIPPED: FUSE mount tests need FUSE: {why}");
            return;
        }
    };
}

fn is_mounted(dir: &Path) -> bool {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(dir.to_str().unwrap()))
}

/// A `thaw mount` child process, placed on host `h0` (worker 0's host).
struct Mount {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// Its stderr: the log, and the "served" line at exit.
    log: PathBuf,
}

impl Mount {
    fn start(c: &Cluster, extra: &[&str]) -> Mount {
        Mount::start_as(c, extra, &[])
    }

    /// `thaw mount` run through `wrapper` (a program and its arguments that
    /// run a command, e.g. `setpriv` as another user; empty: none). The
    /// mount point is open to every user then.
    fn start_as(c: &Cluster, extra: &[&str], wrapper: &[&str]) -> Mount {
        let dir = tempfile::Builder::new().prefix("thaw-mnt-").tempdir().unwrap();
        let name = dir.path().file_name().unwrap().to_string_lossy().into_owned();
        let log = c.root().join(format!("{name}.log"));
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
                let mut cmd = Command::new(program);
                cmd.args(args).arg(BIN);
                cmd
            }
            None => Command::new(BIN),
        };
        let mut child = cmd
            .arg("mount")
            .arg(dir.path())
            .args(["--master", c.master_addr()])
            .args(extra)
            .env("THAW_HOST", "h0")
            .env("THAW_RACK", "r0")
            .env("THAW_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(line.starts_with("thaw mounted on"), "{line:?}\n{text}\n{}", c.logs());
        assert!(is_mounted(dir.path()));
        Mount { child: Some(child), dir, log }
    }

    /// What the mount served, from the line it logs at exit: (opens, opens
    /// in passthrough, bytes from local block files, of those spliced,
    /// bytes streamed from workers).
    fn served(&self) -> [u64; 5] {
        let log = std::fs::read_to_string(&self.log).unwrap();
        let line = log.lines().find(|l| l.starts_with("thaw mount: served")).unwrap_or_else(|| panic!("{log}"));
        let n: Vec<u64> = line.split(|ch: char| !ch.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect();
        n.try_into().unwrap_or_else(|_| panic!("{line}"))
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p.trim_start_matches('/'))
    }

    /// SIGTERM, as a service manager stops it: it unmounts and exits 0.
    fn stop(&mut self) {
        let mut child = self.child.take().unwrap();
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = wait_timeout(&mut child, Duration::from_secs(10)).expect("thaw mount exits on SIGTERM");
        assert!(status.success(), "{status:?}");
        assert!(!is_mounted(self.dir.path()));
        self.no_unmount_warning();
    }

    /// A clean unmount is followed by no warning (fuser's own second
    /// unmount used to log "Unmount failed: Invalid argument").
    fn no_unmount_warning(&self) {
        let log = std::fs::read_to_string(&self.log).unwrap();
        assert!(!log.contains("Unmount failed") && !log.contains("Invalid argument"), "{log}");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if is_mounted(self.dir.path()) {
            let _ = Command::new(BIN).args(["umount", "--lazy"]).arg(self.dir.path()).status();
        }
    }
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs `f` on a thread and fails the test if it takes longer than `limit`
/// (a hung FUSE request would otherwise hang the test run).
fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let v = rx.recv_timeout(limit).unwrap_or_else(|_| panic!("no answer within {limit:?}: the mount hangs"));
    (v, started.elapsed())
}

fn raw_err(r: std::io::Result<impl Sized>) -> i32 {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.raw_os_error().unwrap_or_else(|| panic!("no errno in {e:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_read_the_namespace_through_the_mount_and_writes_are_refused() {
    require_fuse!();
    let c = start(ClusterOptions::workers(2)).await;
    let h0 = c.client("h0", "r0");
    // 3.5 blocks, replicas on this host (h0): read from the block files.
    let multi = data(3 * MIB + MIB / 2, 1);
    h0.write_all("/m/multi.bin", &multi, opts(WriteType::CacheThrough)).await.unwrap();
    // One block: kernel passthrough where the kernel has it.
    let small = data(100_000, 2);
    h0.write_all("/m/small.bin", &small, opts(WriteType::MustCache)).await.unwrap();
    let text = b"alpha\nthe needle is here\nomega\n".repeat(1000);
    h0.write_all("/m/sub/notes.txt", &text, opts(WriteType::MustCache)).await.unwrap();
    // Only on h1: read through the client's remote stream.
    let far = data(2 * MIB + 12345, 3);
    let far_opts = WriteOptions { write_type: WriteType::MustCache, replication: 1, ..Default::default() };
    c.client("h1", "r1").write_all("/m/far.bin", &far, far_opts).await.unwrap();
    h0.write_all("/m/empty", b"", opts(WriteType::MustCache)).await.unwrap();

    let mut m = Mount::start(&c, &[]);

    // Listing and sizes.
    let mut root: Vec<String> =
        std::fs::read_dir(m.path("/")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    root.sort();
    assert_eq!(root, ["m"]);
    let mut names: Vec<(String, bool)> = std::fs::read_dir(m.path("/m"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().into_string().unwrap(), e.file_type().unwrap().is_dir())
        })
        .collect();
    names.sort();
    let want: Vec<(String, bool)> =
        [("empty", false), ("far.bin", false), ("multi.bin", false), ("small.bin", false), ("sub", true)]
            .iter()
            .map(|(n, d)| (n.to_string(), *d))
            .collect();
    assert_eq!(names, want);
    for (p, len) in
        [("/m/multi.bin", multi.len()), ("/m/small.bin", small.len()), ("/m/far.bin", far.len()), ("/m/empty", 0)]
    {
        let md = std::fs::metadata(m.path(p)).unwrap();
        assert!(md.is_file(), "{p}");
        assert_eq!(md.len(), len as u64, "{p}");
    }
    assert!(std::fs::metadata(m.path("/m/sub")).unwrap().is_dir());

    // Whole files, byte-exact.
    for (p, bytes) in [("/m/multi.bin", &multi), ("/m/small.bin", &small), ("/m/far.bin", &far)] {
        let got = std::fs::read(m.path(p)).unwrap();
        assert_eq!(sha(&got), sha(bytes), "{p}");
    }
    assert!(std::fs::read(m.path("/m/empty")).unwrap().is_empty());

    // Positional reads, crossing block boundaries (1 MiB blocks), and past the end.
    for (p, bytes) in [("/m/multi.bin", &multi), ("/m/far.bin", &far)] {
        let f = std::fs::File::open(m.path(p)).unwrap();
        for (at, len) in [(MIB - 100, 300), (2 * MIB - 1, 2), (0, 2 * MIB + 7), (MIB + 5, 1), (bytes.len() - 10, 10)] {
            let mut buf = vec![0u8; len];
            f.read_exact_at(&mut buf, at as u64).unwrap();
            assert!(buf == bytes[at..at + len], "{p} at {at} len {len}");
        }
        let mut buf = [0u8; 64];
        assert_eq!(f.read_at(&mut buf, bytes.len() as u64 + 5).unwrap(), 0);
        // seek + read, as a sequential reader after a jump.
        let mut f = f;
        f.seek(SeekFrom::Start((MIB + MIB / 2) as u64)).unwrap();
        let mut rest = Vec::new();
        f.read_to_end(&mut rest).unwrap();
        assert!(rest == bytes[MIB + MIB / 2..], "{p}");
    }

    // cp and grep, as any program would.
    let out = tempfile::tempdir().unwrap();
    let st = Command::new("cp").arg(m.path("/m/multi.bin")).arg(out.path()).status().unwrap();
    assert!(st.success());
    assert_eq!(sha(&std::fs::read(out.path().join("multi.bin")).unwrap()), sha(&multi));
    let st = Command::new("cp").arg("-r").arg(m.path("/m/sub")).arg(out.path()).status().unwrap();
    assert!(st.success());
    assert_eq!(std::fs::read(out.path().join("sub/notes.txt")).unwrap(), text);
    let g = Command::new("grep").args(["-c", "needle"]).arg(m.path("/m/sub/notes.txt")).output().unwrap();
    assert!(g.status.success(), "{g:?}");
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), "1000");
    let g = Command::new("grep").args(["-rl", "needle"]).arg(m.path("/m")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&g.stdout).trim(), m.path("/m/sub/notes.txt").display().to_string());

    // Writes are refused with EROFS; unknown paths are ENOENT.
    let erofs = libc::EROFS;
    assert_eq!(raw_err(std::fs::File::create(m.path("/m/new"))), erofs);
    assert_eq!(raw_err(std::fs::OpenOptions::new().write(true).open(m.path("/m/small.bin"))), erofs);
    assert_eq!(raw_err(std::fs::OpenOptions::new().append(true).open(m.path("/m/small.bin"))), erofs);
    assert_eq!(raw_err(std::fs::remove_file(m.path("/m/small.bin"))), erofs);
    assert_eq!(raw_err(std::fs::create_dir(m.path("/m/newdir"))), erofs);
    assert_eq!(raw_err(std::fs::rename(m.path("/m/small.bin"), m.path("/m/moved"))), erofs);
    let e = std::fs::metadata(m.path("/m/nope")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    assert_eq!(raw_err(std::fs::read(m.path("/nope/deeper"))), libc::ENOENT);
    // The files are unchanged at the master.
    assert_eq!(h0.stat("/m/small.bin").await.unwrap().length, small.len() as u64);

    // `df`: the cluster's memory (two workers' MEM tiers), read-only.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    let cpath = std::ffi::CString::new(m.path("/").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path and an out-struct of the right type.
    assert_eq!(unsafe { libc::statvfs(cpath.as_ptr(), &mut vfs) }, 0);
    let mem: u64 = c.options.workers.iter().map(|w| w.mem_capacity).sum();
    assert_eq!(vfs.f_blocks as u64 * vfs.f_frsize as u64, mem);
    assert!(vfs.f_bfree < vfs.f_blocks, "used memory not shown: {} of {}", vfs.f_bfree, vfs.f_blocks);
    assert_eq!(vfs.f_bavail, 0);
    assert!(vfs.f_files > 0);

    // A file written after the mount appears within the attribute TTL (1 s).
    h0.write_all("/m/later.txt", b"later\n", opts(WriteType::MustCache)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read(m.path("/m/later.txt")).ok().as_deref() != Some(b"later\n") {
        assert!(Instant::now() < deadline, "a new file did not appear through the mount");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A file replaced at the master is read anew once the TTL has passed (a
    // recently closed file's block map is reused only within it).
    assert_eq!(std::fs::read(m.path("/m/small.bin")).unwrap(), small);
    h0.delete("/m/small.bin", false).await.unwrap();
    let newer = data(300_000, 9);
    h0.write_all("/m/small.bin", &newer, opts(WriteType::MustCache)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read(m.path("/m/small.bin")).ok().as_ref() != Some(&newer) {
        assert!(Instant::now() < deadline, "a replaced file was not read anew");
        std::thread::sleep(Duration::from_millis(100));
    }

    m.stop();
    // Local blocks were read from their files here; h1's through the stream.
    let served @ [opens, _passthrough, local, _spliced, streamed] = m.served();
    assert!(opens >= 10, "{served:?}");
    assert!(local >= multi.len() as u64, "{served:?}");
    assert!(streamed >= far.len() as u64, "{served:?}");
}

/// With --page-cache, a multi-block file read again is served by the
/// kernel's page cache (the mount process sees its bytes once), until its
/// path names another file: then the new bytes are read, even at the same
/// size. With --direct-io every read reaches the mount process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rereads_come_from_the_page_cache_until_the_path_names_another_file() {
    require_fuse!();
    let c = start(ClusterOptions::workers(1)).await;
    let h0 = c.client("h0", "r0");
    // 4 blocks and a bit (1 MiB blocks): never passthrough.
    let first = data(4 * MIB + 1000, 5);
    h0.write_all("/c/f.bin", &first, opts(WriteType::MustCache)).await.unwrap();
    let mut cached = Mount::start(&c, &["--page-cache"]);
    let mut direct = Mount::start(&c, &["--direct-io"]);
    for _ in 0..3 {
        assert!(std::fs::read(cached.path("/c/f.bin")).unwrap() == first);
        assert!(std::fs::read(direct.path("/c/f.bin")).unwrap() == first);
    }
    // The same path, the same length, other bytes.
    h0.delete("/c/f.bin", false).await.unwrap();
    let second = data(first.len(), 6);
    h0.write_all("/c/f.bin", &second, opts(WriteType::MustCache)).await.unwrap();
    for m in [&cached, &direct] {
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read(m.path("/c/f.bin")).unwrap() != second {
            assert!(Instant::now() < deadline, "the old file's bytes are still read");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for _ in 0..3 {
        assert!(std::fs::read(cached.path("/c/f.bin")).unwrap() == second);
    }
    cached.stop();
    direct.stop();
    let len = first.len() as u64;
    // Each file's bytes reached the cached mount once (page-aligned
    // read-ahead may read the last page twice): 2 files of 7 full reads.
    let [_, _, local, ..] = cached.served();
    assert!((2 * len..3 * len).contains(&local), "{local} bytes read for 2 files of {len}");
    let [_, _, local, ..] = direct.served();
    assert!(local >= 4 * len, "direct_io: {local} bytes read for 4 reads of {len}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_whose_master_died_fails_reads_with_eio_in_bounded_time_and_unmounts() {
    require_fuse!();
    let mut c = start(ClusterOptions::workers(1)).await;
    let h0 = c.client("h0", "r0");
    let bytes = data(2 * MIB, 4);
    h0.write_all("/d/a.bin", &bytes, opts(WriteType::CacheThrough)).await.unwrap();
    h0.write_all("/d/b.bin", &bytes, opts(WriteType::CacheThrough)).await.unwrap();
    let m = Mount::start(&c, &["--timeout", "2"]);
    // Opened, not read: its bytes are not in the kernel's page cache yet.
    let open_before = std::fs::File::open(m.path("/d/a.bin")).unwrap();

    c.kill_master();
    // A path never looked up: its lookup needs the master.
    let b = m.path("/d/b.bin");
    let (r, took) = bounded(Duration::from_secs(20), move || std::fs::read(b));
    let log_path = m.log.clone();
    let log = move || std::fs::read_to_string(&log_path).unwrap_or_default();
    assert_eq!(r.as_ref().err().and_then(|e| e.raw_os_error()), Some(libc::EIO), "{r:?}\n{}", log());
    assert!(took < Duration::from_secs(10), "{took:?}");
    let nope = m.path("/d/never-seen");
    let (r, took) = bounded(Duration::from_secs(20), move || std::fs::metadata(nope));
    assert_eq!(raw_err(r), libc::EIO);
    assert!(took < Duration::from_secs(10), "{took:?}");
    // A file opened before needs no master: its blocks come from the worker's files.
    let (got, _) = bounded(Duration::from_secs(20), move || {
        let mut v = Vec::new();
        (&open_before).read_to_end(&mut v).map(|_| v)
    });
    assert!(got.unwrap() == bytes);
    // The mount process lives on (a dead master's socket is no SIGPIPE).
    let mut m = m;
    assert!(m.child.as_mut().unwrap().try_wait().unwrap().is_none(), "thaw mount died:\n{}", log());

    // Unmounting needs no master; the mount process then ends on its own.
    let dir = m.dir.path().to_path_buf();
    let (out, _) =
        bounded(Duration::from_secs(20), move || Command::new(BIN).arg("umount").arg(&dir).output().unwrap());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!is_mounted(m.dir.path()));
    let mut child = m.child.take().unwrap();
    let status = wait_timeout(&mut child, Duration::from_secs(10)).expect("thaw mount ends when unmounted");
    assert!(status.success(), "{status:?}");
    m.no_unmount_warning();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_mount_and_umount_arguments_fail_clearly() {
    // No master there: refused before anything is mounted (needs no FUSE).
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["mount", "--master", "127.0.0.1:1", "--timeout", "2"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("master") && err.contains("127.0.0.1:1"), "{err}");
    assert!(!is_mounted(dir.path()));

    let out = Command::new(BIN).args(["umount"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot unmount") && err.contains(dir.path().to_str().unwrap()), "{err}");

    let out = Command::new(BIN).args(["mount", "--timeout", "-1", "/tmp"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));

    require_fuse!();
    let c = start(ClusterOptions::workers(1)).await;
    let missing = dir.path().join("missing");
    let out = Command::new(BIN).args(["mount", "--master", c.master_addr()]).arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a directory") && err.contains("missing"), "{err}");
}

/// By default a file is read with direct_io until its readers are seen
/// making small reads (a columnar reader's pattern); then its later opens go
/// through the page cache and rereads no longer reach the mount process. A
/// file read in large requests (`cat`, `std::fs::read`) stays direct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_readers_move_a_file_to_the_page_cache_and_large_readers_do_not() {
    require_fuse!();
    let c = start(ClusterOptions::workers(1)).await;
    let h0 = c.client("h0", "r0");
    let len = 4 * MIB + 1000;
    let (small, large) = (data(len, 11), data(len, 12));
    h0.write_all("/a/small.bin", &small, opts(WriteType::MustCache)).await.unwrap();
    h0.write_all("/a/large.bin", &large, opts(WriteType::MustCache)).await.unwrap();
    let mut m = Mount::start(&c, &[]);
    // Reads of 4 KiB at scattered offsets, as a parquet reader's: the first
    // handle's reads all reach the mount; then the file moves to the page cache.
    let scattered = |path: &std::path::Path| {
        let f = std::fs::File::open(path).unwrap();
        for i in 0..1024u64 {
            let at = (i * 65_537) % (len as u64 - 4096);
            let mut buf = [0u8; 4096];
            f.read_exact_at(&mut buf, at).unwrap();
            assert!(buf[..] == small[at as usize..at as usize + 4096]);
        }
    };
    for _ in 0..4 {
        scattered(&m.path("/a/small.bin"));
    }
    // Whole-file reads in large requests: direct each time.
    for _ in 0..3 {
        assert!(std::fs::read(m.path("/a/large.bin")).unwrap() == large);
    }
    m.stop();
    let [_, _, local, ..] = m.served();
    // large.bin: 3 whole reads. small.bin: the first handle's 1024 x 4 KiB
    // direct (4 MiB), then page-cache fills of at most the file once; all
    // four handles direct would be 16 MiB, and all cached would leave
    // large.bin read once.
    let len = len as u64;
    assert!(local >= 3 * len + 1024 * 4096, "{local}");
    assert!(local <= 3 * len + 1024 * 4096 + len + (512 << 10), "small reads kept reaching the mount: {local}");
}

/// A user who is not root mounts through the setuid `fusermount3` (no
/// CAP_SYS_ADMIN: no passthrough), reads byte-exact, and unmounts with
/// `thaw umount` (which then runs `fusermount3 -u`). Run as root, the test
/// becomes `nobody` for the mount; skipped where it cannot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_who_is_not_root_mounts_reads_and_unmounts_through_fusermount3() {
    require_fuse!();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let have = |cmd: &str| Command::new(cmd).arg("--version").output().is_ok_and(|o| o.status.success());
    if !root || !have("setpriv") || !have("fusermount3") {
        println!("SKIPPED: needs root (to become nobody), setpriv and fusermount3");
        return;
    }
    let c = start(ClusterOptions::workers(1)).await;
    let bytes = data(3 * MIB + 17, 8);
    c.client("h0", "r0").write_all("/u/f.bin", &bytes, opts(WriteType::MustCache)).await.unwrap();
    const NOBODY: [&str; 4] = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"];
    let nobody_runs_thaw = Command::new(NOBODY[0]).args(&NOBODY[1..]).arg(BIN).arg("--version").output();
    if !nobody_runs_thaw.is_ok_and(|o| o.status.success()) {
        println!("SKIPPED: nobody cannot run {BIN} (a directory above it is closed to other users)");
        return;
    }
    let mut m = Mount::start_as(&c, &[], &NOBODY);
    let dir = m.dir.path().to_path_buf();
    let text = || std::fs::read_to_string(&m.log).unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let entry = mounts.lines().find(|l| l.split(' ').nth(1) == dir.to_str()).expect("mounted");
    assert!(entry.contains("user_id=65534"), "{entry}");
    // The mounting user reads it; others, root too, may not (no --allow-other).
    assert_eq!(raw_err(std::fs::read(dir.join("u/f.bin"))), libc::EACCES);
    let out = Command::new(NOBODY[0]).args(&NOBODY[1..]).arg("cat").arg(dir.join("u/f.bin")).output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), text());
    assert!(out.stdout == bytes, "the bytes read differ");
    let out = Command::new(NOBODY[0]).args(&NOBODY[1..]).arg(BIN).arg("umount").arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!is_mounted(&dir));
    let mut child = m.child.take().unwrap();
    let status = wait_timeout(&mut child, Duration::from_secs(10)).expect("thaw mount ends when unmounted");
    assert!(status.success(), "{status:?}\n{}", text());
}

//! Full file systems (issue 18, item 5): `thaw local` with its MEM tier, its
//! DISK tier and its under-store each on an 8 MiB tmpfs, though told the
//! tiers hold 64 MiB. A write that fills one fails with an error naming what
//! is full, leaves nothing behind (no file listed, the space given back), and
//! reads of what was written before go on. Needs root (to mount the tmpfs);
//! skipped, saying so, without it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

struct Mounts(Vec<PathBuf>);

impl Drop for Mounts {
    fn drop(&mut self) {
        for m in &self.0 {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

fn mount_tmpfs(dir: &Path, size: &str) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn used(dir: &Path) -> u64 {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid path and an out-struct of the right type.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    (s.f_blocks - s.f_bfree) * s.f_frsize
}

struct Local {
    child: Child,
    master: String,
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Local {
    fn thaw(&self, args: &[&str]) -> Output {
        Command::new(BIN).args(args).env("THAW_MASTER", &self.master).output().unwrap()
    }

    fn put(&self, local: &Path, path: &str, write_type: &str) -> Output {
        self.thaw(&["fs", "put", "--write-type", write_type, local.to_str().unwrap(), path])
    }
}

#[test]
fn a_full_tier_or_under_store_fails_the_write_clearly_and_reads_go_on() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED: mounting a small tmpfs needs root");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (mem, ufs, state) = (root.path().join("mem"), root.path().join("ufs"), root.path().join("state"));
    let disk = state.join("worker-1/disk");
    let mut mounts = Mounts(Vec::new());
    for dir in [&mem, &ufs, &disk] {
        if !mount_tmpfs(dir, "8m") {
            println!("SKIPPED: cannot mount a tmpfs here");
            return;
        }
        mounts.0.push(dir.clone());
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(BIN)
        .args(["local", "--port", &port.to_string(), "--block-size", "1MiB"])
        .args(["--mem-capacity", "64MiB", "--disk-capacity", "64MiB"])
        .arg("--ufs")
        .arg(&ufs)
        .arg("--mem-root")
        .arg(&mem)
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(root.path().join("local.log")).unwrap())
        .spawn()
        .unwrap();
    let local = Local { child, master: format!("127.0.0.1:{port}") };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !local.thaw(&["status"]).status.success() {
        assert!(Instant::now() < deadline, "thaw local did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let small = root.path().join("small.bin");
    let small_bytes = data(2 * MIB, 1);
    std::fs::write(&small, &small_bytes).unwrap();
    let big = root.path().join("big.bin");
    std::fs::write(&big, data(20 * MIB, 2)).unwrap();
    for (path, wt) in [("/in-mem", "must-cache"), ("/in-ufs", "through"), ("/on-disk", "replicated:1")] {
        let out = local.put(&small, path, wt);
        assert!(out.status.success(), "{path}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A read of the under-store file caches it in MEM: read all before measuring.
    for p in ["/in-mem", "/in-ufs", "/on-disk"] {
        assert!(local.thaw(&["fs", "cat", p]).stdout == small_bytes, "{p}");
    }
    let before = [used(&mem), used(&ufs), used(&disk)];

    for (path, wt, says) in [
        ("/big-mem", "must-cache", "is full"),
        ("/big-ufs", "through", "under-store is full"),
        ("/big-disk", "replicated:1", "is full"),
        ("/big-both", "cache-through", "full"),
    ] {
        let out = local.put(&big, path, wt);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{wt}: a 20 MiB write into 8 MiB succeeded");
        assert!(err.contains(says), "{wt}: {err}");
        let ls = local.thaw(&["fs", "ls", "/"]);
        assert!(!String::from_utf8_lossy(&ls.stdout).contains(&path[1..]), "{wt}: the failed file is listed");
        // What was written before still reads.
        for p in ["/in-mem", "/in-ufs", "/on-disk"] {
            let cat = local.thaw(&["fs", "cat", p]);
            assert!(cat.status.success() && cat.stdout == small_bytes, "{p} after {wt}");
        }
    }
    // The space the failed writes took is given back.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = [used(&mem), used(&ufs), used(&disk)];
        if now.iter().zip(before).all(|(n, b)| *n <= b + 64 * 1024) {
            break;
        }
        assert!(Instant::now() < deadline, "space not given back: {now:?} vs {before:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

const MIB: usize = 1 << 20;

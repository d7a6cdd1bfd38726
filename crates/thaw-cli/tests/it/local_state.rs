//! `thaw local` as separate processes: what a killed cluster leaves behind is
//! removed by the next one (never a live one's), and each run starts with an
//! empty namespace unless it keeps its state (`--state-dir`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::BIN;

/// A `thaw local` on a free port with its MEM root and temp dir under `dir`.
struct Local {
    child: Child,
    addr: String,
    mem_root: PathBuf,
}

impl Local {
    fn start(dir: &Path, extra: &[&str]) -> Local {
        let ufs = dir.join("ufs");
        let shm = dir.join("shm");
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        let mut child = Command::new(BIN)
            .args(["local", "--ufs", ufs.to_str().unwrap(), "--port", "0", "--mem-capacity", "32MiB"])
            .args(["--mem-root", shm.to_str().unwrap(), "--disk-capacity", "32MiB", "--block-size", "1MiB"])
            .args(extra)
            .env("TMPDIR", dir.join("tmp"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        // "thaw local: master at ADDR; 1 worker(s), MEM 32.0 MiB each under DIR, under-store UFS"
        assert!(line.contains("master at "), "thaw local did not start: {line:?}");
        let addr = line.split("master at ").nth(1).unwrap().split(';').next().unwrap().to_string();
        let mem_root = line.split(" each under ").nth(1).unwrap().split(',').next().unwrap().into();
        let local = Local { child, addr, mem_root };
        local.wait_for_worker();
        local
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN).args(args).env("THAW_MASTER", &self.addr).output().unwrap()
    }

    fn wait_for_worker(&self) {
        for _ in 0..200 {
            let out = self.run(&["status", "--json"]);
            if out.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                if v["workers"].as_array().unwrap().iter().any(|w| w["alive"] == true) {
                    return;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the worker of {} did not register", self.addr);
    }

    /// The directories under the temp dir named after this cluster's pid.
    fn state_dirs(&self, dir: &Path) -> Vec<PathBuf> {
        let suffix = format!("-{}", self.child.id());
        std::fs::read_dir(dir.join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_str().unwrap().ends_with(&suffix))
            .collect()
    }

    fn signal(mut self, sig: i32) {
        unsafe { libc::kill(self.child.id() as i32, sig) };
        self.child.wait().unwrap();
    }
}

/// A failed test leaves no cluster running.
impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn put_must_cache(l: &Local, file: &Path, path: &str) -> std::process::Output {
    l.run(&["fs", "put", file.to_str().unwrap(), path, "--write-type", "must-cache"])
}

#[test]
fn a_killed_cluster_s_tiers_are_removed_by_the_next_one_and_a_live_one_s_stay() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, vec![7u8; 3 << 20]).unwrap();
    let killed = Local::start(dir.path(), &[]);
    let live = Local::start(dir.path(), &[]);
    assert!(put_must_cache(&killed, &file, "/f").status.success());
    let (killed_mem, killed_state) = (killed.mem_root.clone(), killed.state_dirs(dir.path()));
    let (live_mem, live_state) = (live.mem_root.clone(), live.state_dirs(dir.path()));
    assert_eq!((killed_state.len(), live_state.len()), (1, 1));
    killed.signal(libc::SIGKILL);
    assert!(killed_mem.exists(), "kill -9 leaves its MEM tier");

    let next = Local::start(dir.path(), &[]);
    assert!(!killed_mem.exists(), "the killed cluster's MEM tier {} is still there", killed_mem.display());
    assert!(!killed_state[0].exists(), "its state {} is still there", killed_state[0].display());
    assert!(live_mem.exists() && live_state[0].exists(), "a live cluster's directories were removed");
    assert!(live.run(&["status"]).status.success(), "the live cluster still serves");
    let next_mem = next.mem_root.clone();
    next.signal(libc::SIGTERM);
    assert!(!next_mem.exists(), "a stopped cluster removes its own MEM tier");
    live.signal(libc::SIGTERM);
    assert!(!live_mem.exists() && !live_state[0].exists());
}

#[test]
fn a_new_run_starts_empty_unless_it_keeps_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    // Two runs one after the other with the same port (0) and temp dir.
    let first = Local::start(dir.path(), &[]);
    assert!(put_must_cache(&first, &file, "/m").status.success());
    first.signal(libc::SIGTERM);
    let second = Local::start(dir.path(), &[]);
    let out = put_must_cache(&second, &file, "/m");
    assert!(out.status.success(), "a finished run's file blocks the put: {}", String::from_utf8_lossy(&out.stderr));
    second.signal(libc::SIGTERM);

    // Kept: the namespace of the run before is back.
    let keep = dir.path().join("keep");
    let keep_arg = ["--state-dir", keep.to_str().unwrap()];
    let first = Local::start(dir.path(), &keep_arg);
    assert!(put_must_cache(&first, &file, "/k").status.success());
    first.signal(libc::SIGTERM);
    let second = Local::start(dir.path(), &keep_arg);
    let out = second.run(&["fs", "stat", "/k"]);
    assert!(out.status.success(), "the kept namespace lost /k: {}", String::from_utf8_lossy(&out.stderr));
    second.signal(libc::SIGTERM);
    assert!(keep.join("journal").exists(), "the kept state stays after the run");
}

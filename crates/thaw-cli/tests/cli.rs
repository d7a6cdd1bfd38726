//! The `thaw` binary against a live cluster: what a user types, what they see.

mod common;
use std::process::{Command, Output};

use common::*;

fn thaw(c: &Cluster, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("THAW_MASTER", c.master_addr())
        .env("THAW_HOST", "h0")
        .env("THAW_JOB_ID", "cli-job")
        .output()
        .expect("thaw runs")
}

fn ok(c: &Cluster, args: &[&str]) -> String {
    let out = thaw(c, args);
    assert!(out.status.success(), "thaw {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A failing command: non-zero exit and one clear line on stderr.
fn fails(c: &Cluster, args: &[&str]) -> String {
    let out = thaw(c, args);
    assert!(!out.status.success(), "thaw {args:?} should fail");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected: {err}");
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_commands_round_trip_and_report_as_json() {
    let c = start(ClusterOptions::workers(3)).await;
    let local = c.root().join("input.bin");
    let bytes = data(2_500_000, 41);
    std::fs::write(&local, &bytes).unwrap();
    let l = local.to_str().unwrap();

    ok(&c, &["fs", "mkdir", "-p", "/cli/sub"]);
    let put = ok(&c, &["fs", "put", l, "/cli/a.bin", "--write-type", "must-cache", "--block-size", "1MiB"]);
    assert!(put.contains("must-cache"), "{put}");
    ok(&c, &["fs", "put", l, "/cli/b.bin", "--write-type", "replicated:2"]);
    ok(&c, &["fs", "put", l, "/cli/c.bin"]);

    let ls: serde_json::Value = serde_json::from_str(&ok(&c, &["fs", "ls", "/cli", "--json"])).unwrap();
    let names: Vec<&str> = ls.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["a.bin", "b.bin", "c.bin", "sub"]);
    assert_eq!(ls[0]["in_memory_bytes"], 2_500_000);
    assert_eq!(ls[2]["persisted"], true);

    let stat: serde_json::Value = serde_json::from_str(&ok(&c, &["fs", "stat", "/cli/a.bin", "--json"])).unwrap();
    assert_eq!(stat["length"], 2_500_000);
    assert_eq!(stat["block_size"], 1 << 20);
    let blocks = stat["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 3);
    for b in blocks {
        assert_eq!(b["replicas"][0]["tier"], "MEM");
        assert_eq!(b["replicas"][0]["host"], "h0");
        assert_eq!(b["replicas"][0]["locality"], "host-memory");
    }
    let human = ok(&c, &["fs", "stat", "/cli/b.bin"]);
    assert!(human.contains("DISK") && human.contains("block 0"), "{human}");

    let cat = Command::new(BIN).args(["fs", "cat", "/cli/a.bin"]).env("THAW_MASTER", c.master_addr()).output().unwrap();
    assert_eq!(sha(&cat.stdout), sha(&bytes));
    let got = c.root().join("got.bin");
    ok(&c, &["fs", "get", "/cli/b.bin", got.to_str().unwrap()]);
    assert_eq!(sha(&std::fs::read(&got).unwrap()), sha(&bytes));

    ok(&c, &["fs", "mv", "/cli/c.bin", "/cli/sub/c.bin"]);
    assert!(c.ufs.join("cli/sub/c.bin").exists());
    ok(&c, &["fs", "rm", "/cli/a.bin"]);
    let ls = ok(&c, &["fs", "ls", "/cli"]);
    assert!(!ls.contains("a.bin") && ls.contains("sub/"), "{ls}");

    let status: serde_json::Value = serde_json::from_str(&ok(&c, &["status", "--json"])).unwrap();
    let workers = status["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 3);
    assert!(workers.iter().all(|w| w["alive"] == true));
    assert!(workers.iter().all(|w| w["tiers"].as_array().unwrap().len() == 2));
    // The CLI's job id reached the workers with the reads (after a heartbeat).
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let status: serde_json::Value = serde_json::from_str(&ok(&c, &["status", "--json"])).unwrap();
    let jobs: Vec<String> = status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["jobs"].as_array().unwrap().iter().map(|j| j["job_id"].as_str().unwrap().to_string()))
        .collect();
    assert!(jobs.iter().any(|j| j == "cli-job"), "{jobs:?}");
    assert!(ok(&c, &["status"]).contains("MEM used/capacity"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_one_clear_line_with_a_nonzero_exit() {
    let c = start(ClusterOptions::workers(1)).await;
    assert!(fails(&c, &["fs", "stat", "/missing"]).contains("no such file or directory: /missing"));
    assert!(fails(&c, &["fs", "cat", "/../etc/passwd"]).contains("'..'"));
    assert!(fails(&c, &["fs", "put", "/definitely/not/here", "/x"]).contains("cannot open"));
    let e = fails(&c, &["fs", "put", "Cargo.toml", "/x", "--block-size", "4XB"]);
    assert!(e.contains("invalid size"), "{e}");
    let e = fails(&c, &["fs", "put", "Cargo.toml", "/x", "--write-type", "sometimes"]);
    assert!(e.contains("unknown write type"), "{e}");
    let e = Command::new(BIN).args(["fs", "ls", "/"]).env("THAW_MASTER", "127.0.0.1:1").output().unwrap();
    assert!(!e.status.success());
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(msg.contains("127.0.0.1:1") && msg.contains("unreachable"), "{msg}");
}

#[test]
fn local_cluster_serves_and_stops_cleanly_on_ctrl_c() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let ufs = dir.path().join("ufs");
    std::fs::create_dir_all(ufs.join("d")).unwrap();
    std::fs::write(ufs.join("d/hello.txt"), b"hello from the under-store").unwrap();
    let mut child = Command::new(BIN)
        .args(["local", "--ufs", ufs.to_str().unwrap(), "--workers", "2", "--port", "0"])
        .args(["--state-dir", dir.path().join("state").to_str().unwrap(), "--mem-capacity", "64MiB"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    // "thaw local: master at ADDR; 2 worker(s), MEM 64.0 MiB each under DIR, under-store UFS"
    let addr = line.split("master at ").nth(1).unwrap().split(';').next().unwrap().to_string();
    let mem_root = line.split(" each under ").nth(1).unwrap().split(',').next().unwrap().to_string();
    let run = |args: &[&str]| Command::new(BIN).args(args).env("THAW_MASTER", &addr).output().unwrap();
    let mut alive = 0;
    for _ in 0..100 {
        let out = run(&["status", "--json"]);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            alive = v["workers"].as_array().unwrap().iter().filter(|w| w["alive"] == true).count();
            if alive == 2 {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(alive, 2);
    assert_eq!(run(&["fs", "cat", "/d/hello.txt"]).stdout, b"hello from the under-store");
    assert!(std::path::Path::new(&mem_root).exists());
    // Ctrl-C.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!std::path::Path::new(&mem_root).exists(), "tmpfs files left behind in {mem_root}");
}

#[test]
fn the_demo_reads_cold_then_from_memory_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["demo", "--size", "8MiB", "--port", "0", "--dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("8.0 MiB of 8.0 MiB were in memory; checksums match"), "{text}");
    // "MEM tier under DIR": gone after the demo.
    let mem_root = text.split("MEM tier under ").nth(1).unwrap().lines().next().unwrap().trim();
    assert!(!std::path::Path::new(mem_root).exists(), "{mem_root} left behind");
}

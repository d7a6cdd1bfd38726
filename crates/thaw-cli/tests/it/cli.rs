//! The `thaw` binary against a live cluster: what a user types, what they see.

use std::process::{Command, Output};

use crate::common::*;

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
        .args(["--metrics-port", "0", "--exit-with-stdin"])
        // Held open until the test ends: a failing test takes the cluster down with it.
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    // "thaw local: worker I metrics listening on ADDR", I from 1 as `thaw status` numbers them.
    let mut metrics = std::collections::BTreeMap::new();
    while metrics.len() < 3 {
        let mut l = String::new();
        assert!(out.read_line(&mut l).unwrap() > 0, "the cluster's output ended");
        if let Some((who, addr)) =
            l.trim().strip_prefix("thaw local: ").and_then(|l| l.split_once(" metrics listening on "))
        {
            metrics.insert(who.to_string(), addr.to_string());
        }
    }
    assert_eq!(metrics.keys().collect::<Vec<_>>(), ["master", "worker 1", "worker 2"]);
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
                // Worker I of `thaw local` is worker I of the status.
                for w in v["workers"].as_array().unwrap() {
                    assert_eq!(
                        w["metrics_address"].as_str(),
                        metrics.get(&format!("worker {}", w["id"])).map(|s| s.as_str())
                    );
                    assert_eq!(w["rack"], "rack0");
                }
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

/// `thaw` run in `dir` (where a file named `-` would land).
fn thaw_in(c: &Cluster, dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("THAW_MASTER", c.master_addr())
        .env("THAW_HOST", "h0")
        .output()
        .expect("thaw runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_get_and_mv_copy_trees_and_go_into_directories_as_cp_and_mv_do() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    let root = c.root().join("trees");
    let src = root.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::create_dir_all(src.join("empty")).unwrap();
    let (a, b) = (data(1_500_000, 1), data(1000, 2));
    std::fs::write(src.join("a.bin"), &a).unwrap();
    std::fs::write(src.join("sub/b.txt"), &b).unwrap();
    let s = src.to_str().unwrap();

    // A tree to a new path becomes that path; to an existing directory, goes into it.
    ok(&c, &["fs", "put", s, "/t"]);
    assert_eq!(client.read_all("/t/a.bin").await.unwrap(), a);
    assert_eq!(client.read_all("/t/sub/b.txt").await.unwrap(), b);
    assert!(client.stat("/t/empty").await.unwrap().is_dir);
    ok(&c, &["fs", "put", s, "/t"]);
    assert_eq!(client.read_all("/t/src/sub/b.txt").await.unwrap(), b);
    // A file into an existing directory, named or ending in '/', keeps its name.
    let one = src.join("sub/b.txt");
    ok(&c, &["fs", "put", one.to_str().unwrap(), "/t/empty"]);
    ok(&c, &["fs", "put", one.to_str().unwrap(), "/t/new/"]);
    assert_eq!(client.read_all("/t/empty/b.txt").await.unwrap(), b);
    assert_eq!(client.read_all("/t/new/b.txt").await.unwrap(), b);
    // An existing file is still replaced only with --force.
    assert!(fails(&c, &["fs", "put", one.to_str().unwrap(), "/t/a.bin"]).contains("already exists"));

    // get: a tree to a new local path, a file into an existing directory.
    let out = root.join("out");
    ok(&c, &["fs", "get", "/t", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(out.join("a.bin")).unwrap(), a);
    assert_eq!(std::fs::read(out.join("src/sub/b.txt")).unwrap(), b);
    assert!(out.join("empty").is_dir());
    let into = root.join("into");
    std::fs::create_dir_all(&into).unwrap();
    ok(&c, &["fs", "get", "/t/a.bin", into.to_str().unwrap()]);
    assert_eq!(std::fs::read(into.join("a.bin")).unwrap(), a);
    ok(&c, &["fs", "get", "/t/sub", into.to_str().unwrap()]);
    assert_eq!(std::fs::read(into.join("sub/b.txt")).unwrap(), b);
    // `-` is standard output, not a file named "-".
    let got = thaw_in(&c, &into, &["fs", "get", "/t/a.bin", "-"]);
    assert!(got.status.success(), "{}", String::from_utf8_lossy(&got.stderr));
    assert_eq!(sha(&got.stdout), sha(&a));
    assert!(!into.join("-").exists());
    let dir_out = thaw_in(&c, &into, &["fs", "get", "/t", "-"]);
    assert!(!dir_out.status.success() && String::from_utf8_lossy(&dir_out.stderr).contains("is a directory"));
    assert!(std::fs::read_dir(&into).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().contains("thaw-part")));

    // mv into an existing directory; onto an existing file it still refuses.
    ok(&c, &["fs", "mv", "/t/a.bin", "/t/sub"]);
    assert_eq!(client.read_all("/t/sub/a.bin").await.unwrap(), a);
    assert!(fails(&c, &["fs", "mv", "/t/new/b.txt", "/t/sub/b.txt"]).contains("already exists"));

    // What to type: the CLI's flags, not the API's argument names.
    let e = fails(&c, &["fs", "rm", "/t"]);
    assert!(e.contains("/t is not empty") && e.contains("thaw fs rm -r"), "{e}");
    let e = fails(&c, &["fs", "mkdir", "/x/y"]);
    assert!(e.contains("does not exist") && e.contains("thaw fs mkdir -p"), "{e}");
    assert!(!e.contains("recursive"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mem_breakdown_in_status_adds_up_to_the_memory_used() {
    let c = start(ClusterOptions::workers(1)).await;
    // A write in progress on the worker's host (short-circuit): the block it
    // is writing has its space reserved on the worker, in no stored block yet.
    let writer = c.client("h0", "r0");
    let mut w = writer
        .create("/open", WriteOptions { block_size: 1 << 20, ..WriteOptions::of(WriteType::MustCache) })
        .await
        .unwrap();
    w.write(&data(2_500_000, 3)).await.unwrap();
    let parts = |t: &serde_json::Value| {
        let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("no {k} in {t}"));
        (n("used"), n("held") + n("pinned") + n("evictable") + n("in_flight"), n("in_flight"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let v: serde_json::Value = serde_json::from_str(&ok(&c, &["status", "--json"])).unwrap();
        let mem = v["workers"][0]["tiers"].as_array().unwrap().iter().find(|t| t["tier"] == "MEM").unwrap().clone();
        let (used, sum, in_flight) = parts(&mem);
        assert_eq!(used, sum, "the parts do not add up: {mem:#}");
        if in_flight > 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the write in progress never showed: {mem:#}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let human = ok(&c, &["status"]);
    assert!(human.contains("being written or copied in"), "{human}");
    w.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_rack_is_on_the_same_default_rack_as_thaw_local_s() {
    let c = start(ClusterOptions::workers(1)).await;
    let mem = c.root().join("extra-mem");
    let mut worker = Command::new(BIN)
        .args(["worker", "--master", c.master_addr(), "--mem-dir", mem.to_str().unwrap(), "--port", "0"])
        .args(["--mem-capacity", "16MiB"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let rack = loop {
        let v: serde_json::Value = serde_json::from_str(&ok(&c, &["status", "--json"])).unwrap();
        if let Some(w) = v["workers"].as_array().unwrap().iter().find(|w| w["id"] == 2) {
            break w["rack"].as_str().unwrap().to_string();
        }
        assert!(std::time::Instant::now() < deadline, "the extra worker never registered");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let _ = worker.kill();
    let _ = worker.wait();
    assert_eq!(rack, "rack0");
}

//! `thaw netlab`: a cluster whose processes run in the lab's nodes, with
//! their traffic over its bridges and shaped links; the shaping's lower bound
//! on a remote read; the lab removed when its caller or its supervisor is
//! killed, or by the sweep; the root namespace untouched. Each test skips (with
//! the reason printed) where labs cannot run: without root or iproute2.
//! Only lower bounds on time are asserted.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use thaw_testkit::netlab::{NetLab, netns_exists};

const MIB: usize = 1 << 20;

fn skip() -> bool {
    match NetLab::unavailable() {
        Some(why) => {
            eprintln!("skipping: {why}");
            true
        }
        None => false,
    }
}

fn lab(network: &str, nodes: &[(&str, &str, &str)]) -> NetLab {
    NetLab::start(Path::new(BIN), network, nodes, &[]).expect("thaw netlab up")
}

/// A server in a node, killed (-9) on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `thaw ARGS` in `node` and waits for its "listening on ADDR" line.
fn serve(lab: &NetLab, node: &str, args: &[&str], log: &Path) -> Server {
    let log = std::fs::File::create(log).unwrap();
    let mut child = lab
        .command(node, BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("thaw starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("listening on"), "thaw {args:?} in {node}: {line:?}");
    Server { addr: line.trim().rsplit(' ').next().unwrap().to_string(), child }
}

/// A master in node `m`, block size 1 MiB.
fn master(lab: &NetLab, dir: &Path) -> Server {
    let (ufs, journal) = (dir.join("ufs"), dir.join("journal"));
    std::fs::create_dir_all(&ufs).unwrap();
    let m = lab.node("m");
    let args = [
        "master",
        "--ufs",
        ufs.to_str().unwrap(),
        "--journal-dir",
        journal.to_str().unwrap(),
        "--bind",
        &m.address,
        "--port",
        "0",
        "--block-size",
        "1MiB",
        "--heartbeat-ms",
        "200",
    ];
    serve(lab, "m", &args, &dir.join("master.log"))
}

/// A worker in `node`, bound to the node's address, placed at its host and rack.
fn worker(lab: &NetLab, node: &str, master: &str, dir: &Path) -> Server {
    let n = lab.node(node);
    let mem = dir.join(format!("{node}-mem"));
    let disk = dir.join(format!("{node}-disk"));
    let args = [
        "worker",
        "--master",
        master,
        "--host",
        &n.host,
        "--rack",
        &n.rack,
        "--bind",
        &n.address,
        "--port",
        "0",
        "--mem-dir",
        mem.to_str().unwrap(),
        "--mem-capacity",
        "64MiB",
        "--disk-dir",
        disk.to_str().unwrap(),
        "--disk-capacity",
        "64MiB",
    ];
    let w = serve(lab, node, &args, &dir.join(format!("{node}.log")));
    assert!(w.addr.starts_with(&format!("{}:", n.address)), "worker {node} serves on {}", w.addr);
    w
}

/// `thaw ARGS` run in `node` as a client of `master` placed at `host`;
/// `env`: more of its environment.
fn client(lab: &NetLab, node: &str, master: &str, host: &str, args: &[&str], env: &[(&str, &str)]) -> Vec<u8> {
    let out = lab
        .command(node, BIN)
        .args(args)
        .env("THAW_MASTER", master)
        .env("THAW_HOST", host)
        .envs(env.iter().copied())
        .output()
        .expect("thaw runs");
    assert!(out.status.success(), "thaw {args:?} in {node}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// Waits until the master lists `n` live workers; returns them.
fn wait_workers(lab: &NetLab, master: &str, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = client(lab, "d", master, "h-driver", &["status", "--json"], &[]);
        let v: serde_json::Value = serde_json::from_slice(&status).unwrap();
        let alive: Vec<serde_json::Value> =
            v["workers"].as_array().unwrap().iter().filter(|w| w["alive"] == true).cloned().collect();
        if alive.len() == n {
            return alive;
        }
        assert!(Instant::now() < deadline, "{n} workers never registered: {v:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_gone(namespaces: &[String], within: Duration) {
    let deadline = Instant::now() + within;
    while namespaces.iter().any(|n| netns_exists(n)) {
        let left: Vec<&String> = namespaces.iter().filter(|n| netns_exists(n)).collect();
        assert!(Instant::now() < deadline, "namespaces left after {within:?}: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// (a) A master, workers on two racks and a client, each in a node of its own:
/// a file written and read through the lab's network comes back equal.
#[test]
fn a_cluster_in_the_lab_writes_and_reads() {
    if skip() {
        return;
    }
    let nodes = [("m", "hm", "r0"), ("w0", "h0", "r0"), ("w1", "h1", "r1"), ("d", "hd", "r1")];
    let lab = lab("host=100MiB/s,rack=200MiB/s", &nodes);
    assert_eq!(lab.ready["spec"]["host"], 100 * MIB);
    assert_eq!(lab.ready["spec"]["node"], serde_json::Value::Null);
    let dir = tempfile::tempdir().unwrap();
    let m = master(&lab, dir.path());
    assert_eq!(m.addr.split(':').next(), Some(lab.node("m").address.as_str()));
    let _w0 = worker(&lab, "w0", &m.addr, dir.path());
    let _w1 = worker(&lab, "w1", &m.addr, dir.path());
    let workers = wait_workers(&lab, &m.addr, 2);
    let mut places: Vec<(String, String, String)> = workers
        .iter()
        .map(|w| {
            let s = |k: &str| w[k].as_str().unwrap().to_string();
            (s("address").split(':').next().unwrap().to_string(), s("host"), s("rack"))
        })
        .collect();
    places.sort();
    let want = |n: &str| {
        let n = lab.node(n);
        (n.address.clone(), n.host.clone(), n.rack.clone())
    };
    assert_eq!(places, [want("w0"), want("w1")]);

    let bytes = data(3 * MIB + 12345, 30);
    let local = dir.path().join("in.bin");
    std::fs::write(&local, &bytes).unwrap();
    let put = ["fs", "put", local.to_str().unwrap(), "/lab/f.bin", "--write-type", "must-cache"];
    client(&lab, "d", &m.addr, "hd", &put, &[]);
    let back = client(&lab, "d", &m.addr, "hd", &["fs", "cat", "/lab/f.bin"], &[]);
    assert_eq!(sha(&back), sha(&bytes));
}

/// Bytes sent so far through every shaped link end (the fabric's tbf qdiscs).
fn shaped_bytes(lab: &NetLab) -> u64 {
    let fabric = thaw_netlab::plan::fabric_netns(&lab.id);
    let out = Command::new("tc").args(["-n", &fabric, "-s", "-j", "qdisc", "show"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().iter().filter(|q| q["kind"] == "tbf").map(|q| q["bytes"].as_u64().unwrap()).sum()
}

/// (b) A read from a worker on another host crosses two shaped host links
/// and takes at least size / bandwidth; one from the worker's own host
/// crosses none (the links' qdiscs count its bytes), so it is not held to it.
#[test]
fn b_host_links_are_shaped() {
    if skip() {
        return;
    }
    const BW: usize = 8 * MIB;
    let nodes = [("m", "hm", "r0"), ("w0", "h0", "r0"), ("near", "h0", "r0"), ("d", "h1", "r0")];
    let lab = lab("host=8MiB/s", &nodes);
    let dir = tempfile::tempdir().unwrap();
    let m = master(&lab, dir.path());
    let _w0 = worker(&lab, "w0", &m.addr, dir.path());
    wait_workers(&lab, &m.addr, 1);
    let size = 6 * MIB;
    let bytes = data(size, 31);
    let local = dir.path().join("in.bin");
    std::fs::write(&local, &bytes).unwrap();
    // Written from the worker's host: its blocks stay in w0's memory.
    let put = ["fs", "put", local.to_str().unwrap(), "/f.bin", "--write-type", "must-cache"];
    client(&lab, "near", &m.addr, "h0", &put, &[]);
    // Through the worker's socket, not short-circuit: over the network both times.
    let env = [("THAW_SHORT_CIRCUIT", "0")];
    let read = |node: &str, host: &str| {
        let (t, sent) = (Instant::now(), shaped_bytes(&lab));
        let back = client(&lab, node, &m.addr, host, &["fs", "cat", "/f.bin"], &env);
        assert_eq!(sha(&back), sha(&bytes), "read from {node}");
        (t.elapsed(), shaped_bytes(&lab) - sent)
    };
    let (far, far_shaped) = read("d", "h1");
    let (near, near_shaped) = read("near", "h0");
    eprintln!(
        "6 MiB from another host over host=8MiB/s: {far:?} ({far_shaped} bytes through shaped links); \
         from the same host: {near:?} ({near_shaped} bytes)"
    );
    // A token bucket may pass its burst (128 KiB here) at once.
    let bound = Duration::from_secs_f64((size - (128 << 10)) as f64 / BW as f64);
    assert!(far >= bound, "a remote read took {far:?}, less than size / bandwidth ({bound:?})");
    // Host h0's uplink, then host h1's: every byte twice.
    assert!(far_shaped >= 2 * size as u64, "{far_shaped}");
    // Only the calls to the master (on its own host) cross a shaped link.
    assert!(near_shaped < size as u64 / 8, "a same-host read crossed a shaped link: {near_shaped} bytes");
}

/// (c) kill -9 of the process group holding the supervisor's stdin: the
/// supervisor (in a session of its own) survives it, sees EOF and removes the
/// lab.
#[test]
fn c_lab_removed_when_its_caller_is_killed() {
    if skip() {
        return;
    }
    let mut cmd = Command::new("sh");
    let script = "sleep 60 | exec \"$0\" netlab up --node a@h0/r0 --node b@h1/r1";
    cmd.args(["-c", script, BIN]).process_group(0);
    let mut lab = NetLab::spawn(cmd).expect("lab up");
    let namespaces = lab.namespaces();
    assert!(namespaces.iter().all(|n| netns_exists(n)), "{namespaces:?}");
    let mut shell = lab.take_child();
    // SAFETY: a signal to the shell's own process group.
    unsafe { libc::kill(-(shell.id() as i32), libc::SIGKILL) };
    let _ = shell.wait();
    wait_gone(&namespaces, Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !lab.stderr().contains("stdin closed") {
        assert!(Instant::now() < deadline, "the supervisor did not say it removed the lab: {}", lab.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// (c) kill -9 of the supervisor itself: its guard removes the lab, with the
/// processes left in it.
#[test]
fn c_guard_removes_the_lab_of_a_killed_supervisor() {
    if skip() {
        return;
    }
    let mut lab = lab("host=100MiB/s", &[("a", "h0", "r0"), ("b", "h1", "r0")]);
    let namespaces = lab.namespaces();
    let mut sleeper = lab.command("a", "sleep").arg("60").spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !thaw_netlab::sys::netns_pids(&lab.node("a").netns).contains(&(sleeper.id() as i32)) {
        assert!(Instant::now() < deadline, "sleep never ran in node a");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut supervisor = lab.take_child();
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    wait_gone(&namespaces, Duration::from_secs(5));
    // The process left in node a was ended (SIGTERM).
    let status = sleeper.wait().unwrap();
    assert!(!status.success(), "{status}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !lab.stderr().contains("guard:") {
        assert!(Instant::now() < deadline, "no word from the guard: {}", lab.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    // It spoke after removing the state file too.
    assert!(!Path::new(&format!("/run/thaw-netlab/{}.json", lab.id)).exists());
}

/// (c) A stale state file (its supervisor long gone) is swept by `sweep` and
/// by every `up`; a live lab is not.
#[test]
fn c_stale_labs_are_swept() {
    if skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().to_str().unwrap();
    let stale = |id: &str| {
        let ns = format!("thaw-{id}");
        let ok = Command::new("ip").args(["netns", "add", &ns]).status().unwrap();
        assert!(ok.success());
        // A pid that ran once and a start time it never had.
        let mut gone = Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let state = serde_json::json!({"id": id, "pid": gone.id(), "start_time": 1, "namespaces": [ns]});
        std::fs::write(dir.path().join(format!("{id}.json")), state.to_string()).unwrap();
        ns
    };
    let salt = std::process::id() & 0xffff;
    let first = stale(&format!("5ee1{salt:04x}"));
    let out = Command::new(BIN).args(["netlab", "sweep", "--state-dir", state_dir]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed lab 5ee1"), "{out:?}");
    assert!(!netns_exists(&first));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    let second = stale(&format!("5ee2{salt:04x}"));
    let lab = NetLab::start(Path::new(BIN), "none", &[("a", "h0", "r0")], &["--state-dir", state_dir]).unwrap();
    assert!(!netns_exists(&second), "up sweeps stale labs first");
    assert!(lab.stderr().contains("removed stale lab 5ee2"), "{}", lab.stderr());
    let out = Command::new(BIN).args(["netlab", "sweep", "--state-dir", state_dir]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("no stale lab"), "{out:?}");
    assert!(lab.namespaces().iter().all(|n| netns_exists(n)), "a live lab is not swept");
    let out = Command::new(BIN).args(["netlab", "list", "--json", "--state-dir", state_dir]).output().unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["id"], lab.id.as_str());
    assert_eq!(listed["pid"], lab.pid());
    assert_eq!(listed["nodes"]["a"]["address"], "198.18.0.1");
}

/// The root namespace's interfaces and addresses, from `ip -j addr`.
fn root_addresses() -> Vec<(String, Vec<String>)> {
    let out = Command::new("ip").args(["-j", "addr"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut all: Vec<(String, Vec<String>)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let addrs = i["addr_info"].as_array().map_or(vec![], |a| {
                a.iter().map(|x| format!("{}/{}", x["local"].as_str().unwrap_or(""), x["prefixlen"])).collect()
            });
            (i["ifname"].as_str().unwrap_or("").to_string(), addrs)
        })
        .collect();
    all.sort();
    all
}

/// (d) The root namespace gains no interface and no address, during or after.
#[test]
fn d_root_namespace_untouched() {
    if skip() {
        return;
    }
    let before = root_addresses();
    let mut lab = lab("node=1GiB/s,host=100MiB/s,rack=100MiB/s", &[("a", "h0", "r0"), ("b", "h1", "r1")]);
    assert_eq!(root_addresses(), before, "during");
    let namespaces = lab.namespaces();
    let status = lab.close().expect("the supervisor ends");
    assert!(status.success(), "{status}");
    assert!(lab.stderr().contains("removed"), "{}", lab.stderr());
    wait_gone(&namespaces, Duration::from_secs(1));
    assert_eq!(root_addresses(), before, "after");
}

/// SIGTERM (as SIGINT and SIGHUP) ends the lab as stdin's EOF does: removed,
/// said on stderr, exit code 0.
#[test]
fn sigterm_removes_the_lab() {
    if skip() {
        return;
    }
    let mut lab = lab("rack=64MiB/s", &[("a", "h0", "r0")]);
    let namespaces = lab.namespaces();
    let mut supervisor = lab.take_child();
    // Held until the supervisor has exited: `Child::wait` closes stdin first,
    // and an EOF racing the signal would end the lab for the other reason.
    let _stdin = supervisor.stdin.take();
    // SAFETY: a signal to the supervisor this test started.
    unsafe { libc::kill(supervisor.id() as i32, libc::SIGTERM) };
    let status = supervisor.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(namespaces.iter().all(|n| !netns_exists(n)), "{namespaces:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !lab.stderr().contains("SIGTERM: lab") {
        assert!(Instant::now() < deadline, "{}", lab.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Bad input and missing netem: exit code 2, a clear message, nothing left.
#[test]
fn bad_labs_are_refused() {
    if skip() {
        return;
    }
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(["netlab", "up"]).args(args).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(run(&["--node", "a@h0/r0", "--node", "a@h1/r0"]).contains("\"a\" is given twice"));
    assert!(run(&["--network", "host=1MiB", "--node", "a@h0/r0"]).contains("needs a /s suffix"));
    assert!(run(&["--node", "a.b@h0/r0"]).contains("may hold only letters"));
    let rtt = Command::new(BIN)
        .args(["netlab", "up", "--network", "rtt=1ms", "--node", "a@h0/r0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&rtt.stderr);
    if rtt.status.code() == Some(2) {
        assert!(e.contains("CONFIG_NET_SCH_NETEM"), "{e}");
    } else {
        // A kernel with netem: the lab was made and removed at stdin's EOF.
        assert!(rtt.status.success(), "{rtt:?}");
    }
    // Either way nothing of that lab is left (stderr names it).
    let id = e.split("lab ").nth(1).and_then(|s| s.split_whitespace().next()).expect("the lab's id");
    let prefix = thaw_netlab::plan::fabric_netns(id);
    assert!(!thaw_netlab::sys::list_netns().iter().any(|n| n.starts_with(&prefix)), "{id}: {e}");
}

//! A worker stops promptly on SIGTERM, whatever its masters are doing.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Addresses on loopback with nothing listening (bound, then let go).
fn dead_addresses(n: usize) -> Vec<String> {
    let listeners: Vec<_> = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    listeners.iter().map(|l| l.local_addr().unwrap().to_string()).collect()
}

/// Starts `thaw worker --master masters`, SIGTERMs it once it has tried its
/// masters for a while, and returns how long it took to exit, and how.
fn stop_worker(masters: &str) -> (Duration, std::process::ExitStatus, String) {
    let mem = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["worker", "--master", masters, "--mem-capacity", "16MiB", "--mem-dir"])
        .arg(mem.path())
        .env_remove("THAW_MASTER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("thaw worker listening"), "{line}");
    // Registering: trying every master of the group, backing off between rounds.
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let sent = Instant::now();
    let deadline = sent + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the worker still runs 15 s after SIGTERM (masters {masters})");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = sent.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (took, status, err)
}

/// Issue 28, item 7: with no master of a group of three up, a worker took
/// 21 s to stop (its registration tried the group for 20 s first).
#[test]
fn a_worker_with_no_master_of_its_group_up_stops_at_once_on_sigterm() {
    let masters = dead_addresses(3).join(",");
    let (took, status, err) = stop_worker(&masters);
    assert!(status.success(), "exit {status:?}\n{err}");
    assert!(took < Duration::from_secs(3), "stopped {took:?} after SIGTERM (masters {masters})\n{err}");
    eprintln!("a group of 3 dead masters: stopped {took:?} after SIGTERM");
    let (took, status, err) = stop_worker(&dead_addresses(1)[0]);
    assert!(status.success(), "exit {status:?}\n{err}");
    assert!(took < Duration::from_secs(3), "one dead master: stopped {took:?} after SIGTERM\n{err}");
    eprintln!("one dead master: stopped {took:?} after SIGTERM");
}

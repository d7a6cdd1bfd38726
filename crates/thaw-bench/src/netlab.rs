//! Issue 30, the network model measured: what a shaped host link delivers
//! against its spec, what an unshaped path through the lab's bridges delivers
//! against loopback, and the base round trip between two nodes on one host and
//! across racks against loopback's.
//!
//! Each repeat makes one lab per setting (`thaw netlab up --network host=RATE`,
//! nodes a and c on host h0, b on h1 in the same rack, d on h2 in another
//! rack), settings alternating. The bench's own threads enter the nodes'
//! namespaces (setns) and move bytes over TCP: a server in node a sends, a
//! client in node b receives (across two shaped host links) and times from its
//! request to the last byte; 1-byte ping-pongs (TCP_NODELAY) give the round
//! trip, median of 2,000 after 200 unmeasured. No Thaw process takes part:
//! this is the floor every Thaw transfer in a lab stands on.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use thaw_testkit::netlab::NetLab;

use crate::Config;
use crate::measure::{Comparison, median};

const MIB: u64 = 1 << 20;
/// The host links' settings measured; `None`: unshaped.
const RATES: [Option<u64>; 4] = [Some(8 * MIB), Some(32 * MIB), Some(128 * MIB), None];
/// Seconds of a shaped link's rate each transfer moves.
const SECONDS: u64 = 2;
/// Bytes of an unshaped transfer.
const UNSHAPED_BYTES: u64 = 256 * MIB;
const PINGS: usize = 2000;

pub fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    if let Some(why) = NetLab::unavailable() {
        bail!("the netlab benchmark needs a network lab: {why}");
    }
    let bin = crate::setup::thaw_bin()?;
    let mut tput: Vec<Vec<f64>> = vec![Vec::new(); RATES.len()];
    let mut loop_tput = Vec::new();
    let (mut same_host, mut cross_rack, mut loop_rtt) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..cfg.repeats {
        loop_tput.push(mib_per_s(UNSHAPED_BYTES, transfer(None, "127.0.0.1", None, UNSHAPED_BYTES)?));
        loop_rtt.push(rtt(None, "127.0.0.1", None)?);
        for (i, rate) in RATES.iter().enumerate() {
            let spec = rate.map_or("none".to_string(), |r| format!("host={}MiB/s", r / MIB));
            let nodes = [("a", "h0", "r0"), ("b", "h1", "r0"), ("c", "h0", "r0"), ("d", "h2", "r1")];
            let lab = NetLab::start(&bin, &spec, &nodes, &[])?;
            let (a, b) = (lab.node("a"), lab.node("b"));
            let bytes = rate.map_or(UNSHAPED_BYTES, |r| r * SECONDS);
            let secs = transfer(Some(&a.netns), &a.address, Some(&b.netns), bytes)?;
            tput[i].push(mib_per_s(bytes, secs));
            same_host.push(rtt(Some(&a.netns), &a.address, Some(&lab.node("c").netns))?);
            cross_rack.push(rtt(Some(&a.netns), &a.address, Some(&lab.node("d").netns))?);
            println!("  repeat {r}, {spec}: {:.2} MiB/s", tput[i].last().unwrap());
        }
    }
    let mut out = Vec::new();
    for (i, rate) in RATES.iter().enumerate() {
        let (base, base_runs, label) = match rate {
            Some(r) => {
                let spec = (*r / MIB) as f64;
                (spec, vec![spec; tput[i].len()], format!("host={}MiB/s (the spec)", r / MIB))
            }
            None => (median(&loop_tput), loop_tput.clone(), "TCP over loopback".to_string()),
        };
        let name = rate.map_or("netlab-unshaped".to_string(), |r| format!("netlab-host-{}MiB", r / MIB));
        out.push(comparison(&name, "TCP node to node across 2 host links", &label, "MiB/s", &tput[i], base, base_runs));
    }
    let lo = median(&loop_rtt);
    out.push(comparison(
        "netlab-rtt-same-host",
        "RTT, nodes on one host",
        "loopback",
        "us",
        &same_host,
        lo,
        loop_rtt.clone(),
    ));
    out.push(comparison(
        "netlab-rtt-cross-rack",
        "RTT, nodes on two racks",
        "loopback",
        "us",
        &cross_rack,
        lo,
        loop_rtt,
    ));
    Ok(out)
}

fn comparison(
    name: &str,
    label: &str,
    baseline_label: &str,
    unit: &'static str,
    runs: &[f64],
    baseline: f64,
    baseline_runs: Vec<f64>,
) -> Comparison {
    let thaw = median(runs);
    let (lo, hi) = runs.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    Comparison {
        name: name.into(),
        thaw_label: label.into(),
        baseline_label: baseline_label.into(),
        unit,
        thaw,
        baseline,
        ratio: thaw / baseline,
        target: None,
        thaw_runs: runs.to_vec(),
        baseline_runs,
        notes: format!("runs {lo:.1}-{hi:.1} {unit}"),
    }
}

fn mib_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / MIB as f64 / secs
}

/// Runs `f` on a thread inside network namespace `netns` (`None`: this one).
fn in_netns<T: Send + 'static>(netns: Option<&str>, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let path = netns.map(|n| Path::new(thaw_netlab::sys::NETNS_DIR).join(n));
    std::thread::spawn(move || {
        if let Some(path) = path {
            let ns = std::fs::File::open(&path).with_context(|| path.display().to_string())?;
            // SAFETY: setns on this thread only, with a namespace file held open.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                bail!("setns {}: {}", path.display(), std::io::Error::last_os_error());
            }
        }
        f()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("a measuring thread panicked"))?
}

/// A listener in `netns` on `addr`, serving one connection with `serve`.
fn listen(
    netns: Option<&str>,
    addr: &str,
    serve: impl FnOnce(TcpStream) -> Result<()> + Send + 'static,
) -> Result<(SocketAddr, std::thread::JoinHandle<Result<()>>)> {
    let addr = addr.to_string();
    let listener = in_netns(netns, move || Ok(TcpListener::bind((addr.as_str(), 0))?))?;
    let local = listener.local_addr()?;
    let server = std::thread::spawn(move || serve(listener.accept()?.0));
    Ok((local, server))
}

/// Seconds for a client in `client_ns` to receive `bytes` from a server in
/// `server_ns` at `addr`, from its connect to the last byte.
fn transfer(server_ns: Option<&str>, addr: &str, client_ns: Option<&str>, bytes: u64) -> Result<f64> {
    let (at, server) = listen(server_ns, addr, move |mut s| {
        let chunk = vec![0x5au8; MIB as usize];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            s.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        Ok(())
    })?;
    let secs = in_netns(client_ns, move || {
        let t = Instant::now();
        let mut s = TcpStream::connect(at)?;
        let mut buf = vec![0u8; MIB as usize];
        let mut got = 0u64;
        while got < bytes {
            let n = s.read(&mut buf)?;
            if n == 0 {
                bail!("the sender stopped after {got} of {bytes} bytes");
            }
            got += n as u64;
        }
        Ok(t.elapsed().as_secs_f64())
    })?;
    server.join().map_err(|_| anyhow::anyhow!("sender panicked"))??;
    Ok(secs)
}

/// Median microseconds of a 1-byte ping-pong between a client in `client_ns`
/// and an echo server in `server_ns` at `addr`.
fn rtt(server_ns: Option<&str>, addr: &str, client_ns: Option<&str>) -> Result<f64> {
    let (at, server) = listen(server_ns, addr, |mut s| {
        s.set_nodelay(true)?;
        let mut b = [0u8; 1];
        while s.read(&mut b)? == 1 {
            s.write_all(&b)?;
        }
        Ok(())
    })?;
    let us = in_netns(client_ns, move || {
        let mut s = TcpStream::connect(at)?;
        s.set_nodelay(true)?;
        let mut b = [1u8; 1];
        let mut times = Vec::with_capacity(PINGS);
        for i in 0..PINGS + 200 {
            let t = Instant::now();
            s.write_all(&b)?;
            s.read_exact(&mut b)?;
            if i >= 200 {
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        Ok(median(&times))
    })?;
    server.join().map_err(|_| anyhow::anyhow!("echo server panicked"))??;
    Ok(us)
}

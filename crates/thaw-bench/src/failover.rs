//! Highly available masters (issue 19): how long a kill -9 of the leader
//! keeps clients waiting (target < 5 s), against the same kill of a single
//! master restarted at once (by a supervisor, say), and what replicating the
//! journal costs namespace changes.
//!
//! - Failover: a group of 3 masters and 2 workers; the leader is killed, and
//!   a client's `stat` (sent at the kill) is timed until a master serves it;
//!   then until both workers are registered with the new leader. The killed
//!   master is started again (it rejoins as a follower) before the next
//!   repeat. The baseline kills a single master and starts it again at once:
//!   the same two times.
//! - Namespace changes: 4 clients creating directories in a closed loop,
//!   each commit durable (redb fsync) on one master, against a majority of
//!   the group (the leader's and a follower's log fsyncs, then the leader's
//!   journal).

use std::time::{Duration, Instant};

use anyhow::Result;
use thaw_client::Client;
use thaw_testkit::{Cluster, ClusterOptions};

use crate::Config;
use crate::measure::{Comparison, median};

const CLIENTS: usize = 4;

async fn cluster(masters: usize) -> Result<Cluster> {
    let mut o = ClusterOptions::workers(2);
    o.masters = masters;
    Cluster::start(crate::setup::thaw_bin()?, o).await
}

async fn leader(c: &Cluster) -> Result<usize> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(l) = c.leader().await {
            return Ok(l);
        }
        anyhow::ensure!(Instant::now() < deadline, "no leader within 30 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// (kill to first request served, kill to every worker registered), seconds.
async fn one_kill(c: &mut Cluster, group: bool) -> Result<(f64, f64)> {
    let client = crate::setup::remote_client(c)?;
    client.stat("/").await?;
    let victim = if group { leader(c).await? } else { 0 };
    c.kill_master_n(victim);
    let killed = Instant::now();
    if !group {
        c.respawn_master_n(0)?;
    }
    // A single master's clients do not retry: ask until it answers.
    loop {
        match client.stat("/").await {
            Ok(_) => break,
            Err(_) if killed.elapsed() < Duration::from_secs(60) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(e) => return Err(e.into()),
        }
    }
    let served = killed.elapsed().as_secs_f64();
    c.wait_for_workers(2, Duration::from_secs(60)).await?;
    let registered = killed.elapsed().as_secs_f64();
    if group {
        c.restart_master_n(victim).await?;
        // Let it catch up and the group settle before the next kill.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Ok((served, registered))
}

/// Directories created per second by [`CLIENTS`] clients for `secs`.
async fn creates(clients: &[Client], round: usize, secs: f64) -> Result<f64> {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .cloned()
        .enumerate()
        .map(|(k, c)| {
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    c.mkdir(&format!("/bench/r{round}/c{k}/d{n}"), true, false).await?;
                    n += 1;
                }
                anyhow::Ok(n)
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let mut group = cluster(3).await?;
    let mut single = cluster(1).await?;
    leader(&group).await?;
    let (mut served, mut registered) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..cfg.repeats {
        for (side, c) in [(0, &mut group), (1, &mut single)] {
            let (s, r) = one_kill(c, side == 0).await?;
            served[side].push(s * 1000.0);
            registered[side].push(r * 1000.0);
        }
    }
    let mut rates = [Vec::new(), Vec::new()];
    let clients: Vec<Vec<Client>> = [&group, &single]
        .iter()
        .map(|c| (0..CLIENTS).map(|_| crate::setup::remote_client(c)).collect::<Result<Vec<_>>>())
        .collect::<Result<_>>()?;
    for (side, cs) in clients.iter().enumerate() {
        creates(cs, 1000 + side, 1.0).await?; // warm-up
    }
    for i in 0..cfg.repeats {
        for k in 0..2 {
            let side = (i + k) % 2;
            rates[side].push(creates(&clients[side], i * 2 + side, cfg.meta_secs).await?);
        }
    }
    let (g, s) = (median(&served[0]), median(&served[1]));
    let (gr, sr) = (median(&registered[0]), median(&registered[1]));
    let verdict = if g < 5000.0 { "met" } else { "MISSED" };
    let failover = Comparison {
        name: "ha-failover".into(),
        thaw_label: "group of 3: leader killed (kill -9), first request served".into(),
        baseline_label: "one master killed and started again at once".into(),
        unit: "ms",
        thaw: g,
        baseline: s,
        ratio: s / g,
        target: None,
        thaw_runs: served[0].clone(),
        baseline_runs: served[1].clone(),
        notes: format!(
            "ratio: restart / failover (higher is better); target < 5000 ms: {verdict}; every worker registered \
             again after {gr:.0} ms (group) and {sr:.0} ms (restart); runs {:?} and {:?}",
            registered[0], registered[1]
        ),
    };
    let (gc, sc) = (median(&rates[0]), median(&rates[1]));
    let commits = Comparison {
        name: "ha-namespace-changes".into(),
        thaw_label: format!("mkdir by {CLIENTS} clients, group of 3 (majority-replicated journal)"),
        baseline_label: format!("mkdir by {CLIENTS} clients, one master (local journal)"),
        unit: "ops/s",
        thaw: gc,
        baseline: sc,
        ratio: gc / sc,
        target: None,
        thaw_runs: rates[0].clone(),
        baseline_runs: rates[1].clone(),
        notes: String::new(),
    };
    Ok(vec![failover, commits])
}

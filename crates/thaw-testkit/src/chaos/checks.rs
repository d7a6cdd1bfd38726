//! The checks after each cycle (see the module's doc).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use thaw_client::Client;
use thaw_common::ErrorKind;
use thaw_common::proto::WriteType;

use super::{ChaosReport, JOB_LEASE, Ledger, client_at, lock};
use crate::Cluster;

/// A path's history, for a problem's report.
fn history(h: &BTreeMap<String, Vec<String>>, path: &str) -> String {
    match h.get(path) {
        Some(events) => format!("its history: {}", events.join("; ")),
        None => "no history".into(),
    }
}

/// Every file under `/chaos` (`None` if a listing failed).
async fn list_all(client: &Client) -> Option<BTreeSet<String>> {
    let mut listed = BTreeSet::new();
    let mut dirs = vec!["/chaos".to_string()];
    while let Some(d) = dirs.pop() {
        let entries = match client.list(&d).await {
            Ok(e) => e,
            Err(e) if e.kind == ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        for e in entries {
            if e.is_dir {
                dirs.push(e.path);
            } else {
                listed.insert(e.path);
            }
        }
    }
    Some(listed)
}

/// The checks after a cycle (see the module's doc).
pub(super) async fn verify(
    c: &Cluster,
    ledgers: &mut [&mut Ledger],
    report: &Mutex<ChaosReport>,
    cycle: usize,
) -> Result<()> {
    c.wait_for_workers(c.workers(), Duration::from_secs(30)).await?;
    let client = c.remote_client();
    for ledger in ledgers.iter_mut() {
        let mut lost = Vec::new();
        for (path, want) in ledger.files.iter() {
            let expected = want.bytes();
            let durable = want.durable()
                || (want.write_type == WriteType::AsyncThrough && client.stat(path).await.is_ok_and(|i| i.persisted));
            // A durable file may need its worker's blocks reported again, or a
            // read through from the under-store: retry for a while.
            let deadline = Instant::now() + Duration::from_secs(if durable { 30 } else { 2 });
            loop {
                match client.read_all(path).await {
                    Ok(got) if got == expected => {
                        let mut r = lock(report);
                        r.bytes_verified += got.len() as u64;
                        if let Some(told) = ledger.told_lost.get(path) {
                            r.data_lost_then_read += 1;
                            if r.data_lost_then_read_examples.len() < 10 {
                                r.data_lost_then_read_examples.push(format!("{path} ({:?}): {told}", want.write_type));
                            }
                        }
                        break;
                    }
                    Ok(got) => {
                        let mut r = lock(report);
                        r.wrong_reads += 1;
                        r.problem(format!("cycle {cycle}: {path}: verification read {} wrong bytes", got.len()));
                        break;
                    }
                    Err(e) if Instant::now() >= deadline => {
                        if durable {
                            let mut r = lock(report);
                            r.durable_lost += 1;
                            r.problem(format!(
                                "cycle {cycle}: {path} ({:?}): acknowledged and durable, unreadable: {e}; {}",
                                want.write_type,
                                history(&ledger.history, path)
                            ));
                        } else {
                            // Its only copy died with a worker: no longer read.
                            lost.push(path.clone());
                        }
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }
        for path in lost {
            let acked = ledger.files.remove(&path).expect("listed");
            ledger.note(&path, cycle, "checks: unreadable, memory-only: its only copy is gone");
            ledger.uncertain.insert(path, acked);
            lock(report).non_durable_lost += 1;
        }
        ledger.told_lost.clear();
    }
    // The namespace: every acknowledged file, and nothing else but paths a
    // fault left in doubt. A refused write's file may take a writer's lease to
    // go (its writer could not reach the master to delete it).
    let deadline = Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let listed = list_all(&client).await.context("listing /chaos")?;
        let refused_left = ledgers.iter().any(|l| l.refused.iter().any(|p| listed.contains(p)));
        if !refused_left || Instant::now() >= deadline {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    {
        let mut r = lock(report);
        for ledger in ledgers.iter() {
            for path in ledger.files.keys().filter(|p| !listed.contains(*p)) {
                r.namespace_mismatches += 1;
                let h = history(&ledger.history, path);
                r.problem(format!("cycle {cycle}: {path}: acknowledged, not in the namespace; {h}"));
            }
            for path in ledger.refused.iter().filter(|p| listed.contains(*p)) {
                r.refused_left += 1;
                let h = history(&ledger.history, path);
                r.problem(format!(
                    "cycle {cycle}: {path}: its write was refused for a full tier, and the file is there; {h}"
                ));
            }
        }
    }
    let unexpected: Vec<&String> = listed
        .iter()
        .filter(|p| {
            !ledgers.iter().any(|l| l.files.contains_key(*p) || l.uncertain.contains_key(*p) || l.refused.contains(*p))
        })
        .collect();
    for path in unexpected {
        let h = ledgers.iter().find(|l| l.history.contains_key(path)).map(|l| history(&l.history, path));
        let h = h.unwrap_or_else(|| "never written".into());
        let Some(ledger) = ledgers.iter_mut().find(|l| l.deleted.contains_key(path)) else {
            let mut r = lock(report);
            r.namespace_mismatches += 1;
            r.problem(format!("cycle {cycle}: {path}: in the namespace, not acknowledged; {h}"));
            continue;
        };
        // Deleted, acknowledged, and back: say what it is now, then let the
        // leftovers' step below read it and delete it again.
        let want = ledger.deleted.remove(path).expect("found");
        let now = match client.stat(path).await {
            Ok(i) => format!("complete {}, persisted {}, {} bytes", i.complete, i.persisted, i.length),
            Err(e) => format!("stat failed: {e}"),
        };
        let bytes = match client.read_all(path).await {
            Ok(got) if got == want.bytes() => "the bytes its write was given".to_string(),
            Ok(got) => format!("{} bytes that are not those its write was given", got.len()),
            Err(e) => format!("unreadable ({})", e.kind.as_str()),
        };
        ledger.note(path, cycle, format_args!("checks: back after its acknowledged delete: {now}; holds {bytes}"));
        ledger.uncertain.insert(path.clone(), want);
        let mut r = lock(report);
        r.resurrected += 1;
        r.problem(format!(
            "cycle {cycle}: {path}: back in the namespace after an acknowledged delete ({now}; holds {bytes}); {h}"
        ));
    }
    // Checked: a refused write's path is never used again.
    for ledger in ledgers.iter_mut() {
        ledger.refused.clear();
    }
    // What a fault left in doubt and is there: its bytes must be right if it
    // can be read; then it goes, and the namespace is exact again.
    let quick = client_at(c, "elsewhere", "r9", Duration::from_secs(1));
    for ledger in ledgers.iter_mut() {
        let found: Vec<String> = ledger.uncertain.keys().filter(|p| listed.contains(*p)).cloned().collect();
        for path in found {
            let want = ledger.uncertain[&path].clone();
            lock(report).leftovers_found += 1;
            let read = match quick.read_all(&path).await {
                Ok(got) if got == want.bytes() => {
                    let mut r = lock(report);
                    r.leftovers_read += 1;
                    r.bytes_verified += got.len() as u64;
                    "read right".to_string()
                }
                Ok(got) => {
                    let mut r = lock(report);
                    r.wrong_reads += 1;
                    let h = history(&ledger.history, &path);
                    r.problem(format!(
                        "cycle {cycle}: {path}: left by an operation a fault hid, holds {} wrong bytes; {h}",
                        got.len()
                    ));
                    "read wrong".to_string()
                }
                Err(e) => format!("unreadable ({})", e.kind.as_str()),
            };
            let deleted = quick.delete(&path, false).await;
            ledger.note(&path, cycle, format_args!("checks: there, {read}, deleted: {}", deleted.is_ok()));
            if deleted.is_ok() {
                let want = ledger.uncertain.remove(&path).expect("found");
                ledger.deleted.insert(path, want);
            }
        }
    }
    // No block held for a job once every job was evicted or its lease ran out.
    let deadline = Instant::now() + JOB_LEASE + Duration::from_secs(15);
    loop {
        let status = client.cluster_status().await?;
        let held: u64 = status.workers.iter().flat_map(|w| &w.tiers).map(|t| t.held).sum();
        if held == 0 {
            break;
        }
        if Instant::now() >= deadline {
            let mut r = lock(report);
            r.held_left += held;
            r.problem(format!("{held} bytes still held for jobs after every job was evicted or expired"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

//! A master restarted on a journal of `--files` files (issue 33: memory per
//! file and restart time at 1, 3 and 10 million files).
//!
//! Creating ten million files through the API takes this machine most of an
//! hour (`thaw-bench namespace` measures the create path itself), so here the
//! journal is written directly, with the records the API writes for the same
//! namespace: the files of [`crate::namespace`] (empty, must-cache, complete;
//! a million in `/big`, the rest 1,000 to a directory under `/tree`), in
//! transactions of 100,000. Then, `--repeats` times: a kill -9 of the master,
//! started again at once, until a `stat` of a file in `/big` and one in the
//! last directory of `/tree` are served (the journal loaded); its resident
//! memory then, less an empty master's, per file; its peak (VmHWM); the
//! journal's bytes per file.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use thaw_common::proto::{InodeRecord, WriteType};
use thaw_master::journal::{Journal, JournalOp, RECORD_VERSION};

use crate::Config;
use crate::measure::Comparison;
use crate::namespace::{BIG_DIR, PER_DIR, dir_bytes, master_rss, master_status, one_worker, path_of, row};

/// Records per journal transaction while writing.
const BATCH: usize = 100_000;

pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let files = cfg.files;
    let mut cluster = one_worker(files).await?;
    let empty = master_rss(&cluster)?;
    cluster.kill_master();
    let started = Instant::now();
    write_journal(&cluster.root().join("journal"), files)?;
    println!("  a journal of {files} files written in {:.1} s", started.elapsed().as_secs_f64());
    let journal = dir_bytes(&cluster.root().join("journal"))? as f64 / files as f64;
    let last = path_of(files - 1);
    let (mut restarts, mut per_file, mut peaks) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..cfg.repeats {
        if r > 0 {
            cluster.kill_master();
        }
        let killed = Instant::now();
        cluster.respawn_master_n(0)?;
        let client = crate::setup::client(&cluster, "h0", "r0")?;
        loop {
            match client.stat("/big/f0000000").await {
                Ok(_) => break,
                Err(_) if killed.elapsed() < Duration::from_secs(1200) => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(e) => return Err(e.into()),
            }
        }
        let took = killed.elapsed().as_secs_f64() * 1e3;
        let info = client.stat(&last).await.with_context(|| format!("{last} after the restart"))?;
        ensure!(!info.is_dir && info.complete, "{last} came back as {info:?}");
        let rss = master_rss(&cluster)?;
        let peak = master_status(&cluster, "VmHWM")?;
        println!("  restart {r}: {took:.0} ms, VmRSS {} MiB, VmHWM {} MiB", rss >> 20, peak >> 20);
        restarts.push(took);
        per_file.push(rss.saturating_sub(empty) as f64 / files as f64);
        peaks.push(peak.saturating_sub(empty) as f64 / files as f64);
    }
    let scale = format!("{files} files, {} in one directory", files.min(BIG_DIR));
    Ok(vec![
        row(
            "ns restart at scale",
            format!("kill -9 of the master to its first answer ({scale}; journal written directly)"),
            "ms",
            restarts,
            format!("journal {journal:.0} B/file"),
        ),
        row(
            "ns memory after restart",
            format!("master resident memory per file after the restart ({scale})"),
            "B/file",
            per_file,
            format!("an empty master: VmRSS {} MiB", empty >> 20),
        ),
        row(
            "ns peak memory at start",
            format!("master peak resident memory (VmHWM) per file over the start ({scale})"),
            "B/file",
            peaks,
            String::new(),
        ),
    ])
}

/// Writes the namespace of `files` files into the (stopped) master's journal.
fn write_journal(dir: &std::path::Path, files: u64) -> Result<()> {
    let journal = Journal::open(dir)?;
    let now = thaw_common::now_ms();
    let dir_rec = |id: u64, parent_id: u64, name: String| InodeRecord {
        version: RECORD_VERSION,
        id,
        parent_id,
        name,
        is_dir: true,
        mtime_ms: now,
        ..Default::default()
    };
    // Ids from the root's (1) up: /big 2, /tree 3, then the tree's directories, then the files.
    let (big, tree) = (2u64, 3u64);
    let dirs = files.saturating_sub(BIG_DIR).div_ceil(PER_DIR);
    let first_file = tree + 1 + dirs;
    let mut ops = vec![JournalOp::Put(dir_rec(big, 1, "big".into())), JournalOp::Put(dir_rec(tree, 1, "tree".into()))];
    for d in 0..dirs {
        ops.push(JournalOp::Put(dir_rec(tree + 1 + d, tree, format!("d{d:05}"))));
    }
    for i in 0..files {
        let p = path_of(i);
        let name = p.rsplit('/').next().unwrap_or_default();
        let parent = if i < BIG_DIR { big } else { tree + 1 + (i - BIG_DIR) / PER_DIR };
        ops.push(JournalOp::Put(InodeRecord {
            version: RECORD_VERSION,
            id: first_file + i,
            parent_id: parent,
            name: name.to_string(),
            block_size: 64 << 20,
            complete: true,
            write_type: WriteType::MustCache as i32,
            mtime_ms: now,
            ..Default::default()
        }));
        if ops.len() >= BATCH {
            journal.commit_with(&std::mem::take(&mut ops), first_file + i + 1, &[])?;
        }
    }
    journal.commit_with(&ops, first_file + files, &[])?;
    Ok(())
}

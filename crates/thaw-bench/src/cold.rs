//! Benchmark 3, cold under-store read, from two places.
//!
//! Measures the first read of a file that is only in the under-store (a local
//! directory on the virtio disk). `cold-under-store`: a client on a host no worker
//! is on; the worker fills each block into its MEM tier (sendfile from the
//! under-store file) and streams it over loopback TCP. `cold-local`: a client on the
//! worker's host; the worker fills each block and the client reads the block file
//! itself. In both, the next block fills while the current one is read. The baseline is reading the same file
//! directly. The page cache is dropped (posix_fadvise DONTNEED) before every run of
//! either side, so both read from the device. Every Thaw run reads the file under a
//! name Thaw has never seen (the file is renamed in the under-store directory), so
//! no block is in MEM yet; the Thaw entry is deleted afterwards, which frees the
//! cached blocks. The ratio should stay at or above 0.9: a cold read through Thaw
//! should cost little more than the disk read it cannot avoid.

use std::path::Path;

use anyhow::{Context, Result, ensure};
use thaw_client::Client;
use thaw_common::drop_cached_pages;

use crate::measure::{Comparison, Spec, compare};
use crate::payload::{self, Transfer};
use crate::{BLOCK_SIZE, Config};

/// The file as it rests in the under-store between runs; Thaw never sees this name.
const REST_NAME: &str = "cold-rest.bin";

/// `local`: the client is on the worker's host (`cold-local`), else remote.
pub async fn run(cfg: &Config, local: bool) -> Result<Comparison> {
    let size = cfg.size;
    let cluster = crate::setup::one_worker(BLOCK_SIZE, (2 << 30).max(3 * size)).await?;
    let rest = cluster.ufs.join(REST_NAME);
    payload::write_file(&rest, size)?;
    let client =
        if local { crate::setup::client(&cluster, "h0", "r0")? } else { crate::setup::remote_client(&cluster)? };
    let sum = payload::expected_sum(size);

    let thaw = async |i| cold_thaw_read(&client, &cluster.ufs, i).await?.check(size, sum, "cold Thaw read");
    let baseline = async |_| {
        drop_cached_pages(&rest)?;
        payload::read_file(&rest)?.check(size, sum, "cold direct read")
    };
    let spec = Spec {
        name: if local { "cold-local" } else { "cold-under-store" },
        thaw_label: if local {
            "Thaw cold read, client on the worker's host: worker fills MEM, client reads the block files"
        } else {
            "Thaw cold read, remote client: worker fills MEM from the under-store, streams it"
        },
        baseline_label: "direct read(2) of the same file, page cache dropped",
        target: 0.9,
    };
    let mut c = compare(spec, cfg.repeats, thaw, baseline).await?;
    c.notes = "page cache dropped before every run; every Thaw byte came from the under-store".into();
    Ok(c)
}

/// Renames the resting file to a fresh name, reads it cold through Thaw, then
/// renames it back and deletes the Thaw entry (the under-store copy is already
/// gone from that name, so only the cached blocks go).
async fn cold_thaw_read(client: &Client, ufs: &Path, repeat: usize) -> Result<Transfer> {
    let name = format!("cold-{repeat}.bin");
    let (rest, fresh) = (ufs.join(REST_NAME), ufs.join(&name));
    std::fs::rename(&rest, &fresh).context("renaming the under-store file")?;
    drop_cached_pages(&fresh)?;
    let read = payload::read_thaw(client, &format!("/{name}")).await;
    std::fs::rename(&fresh, &rest).context("renaming the under-store file back")?;
    client.delete(&format!("/{name}"), false).await?;
    let (t, src) = read?;
    ensure!(src.under_store == t.bytes, "not every byte came from the under-store: {src:?}");
    Ok(t)
}

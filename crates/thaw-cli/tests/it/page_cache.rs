//! Drop-behind (issue 28, item 3): cold copies do not fill the page cache.
//! A migration or a read's fill from a local under-store, a migration from
//! the DISK tier and a checkpoint into a local under-store each leave the
//! file they read or wrote out of the kernel's page cache (mincore(2) on a
//! mapping of it), where before each left all of it cached: a second copy in
//! RAM of bytes the MEM tier holds, or of cold data.

use std::path::Path;
use std::time::Duration;

use crate::common::*;
use thaw_common::proto::EvictionMode;
use thaw_worker::page_cache::resident_pages;

const MIB: u64 = 1 << 20;

/// The share of `path`'s pages in the page cache.
fn cached(path: &Path) -> f64 {
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len();
    let (cached, pages) = resident_pages(&f, 0, len).unwrap();
    cached as f64 / pages.max(1) as f64
}

/// Puts `path`'s bytes on disk and out of the page cache: a cold file.
fn make_cold(path: &Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: an open descriptor; advice only.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(cached(path), 0.0, "{} stays cached after DONTNEED", path.display());
}

/// Of a file's pages, at most this share may stay cached: a copy drops its
/// range behind it, but the kernel's read-ahead may have read a little past
/// a block copied out of order.
const LEFT: f64 = 0.1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_fills_and_checkpoints_leave_their_files_out_of_the_page_cache() {
    let c = start(ClusterOptions { block_size: 4 * MIB, ..ClusterOptions::workers(1) }).await;
    let client = c.client("elsewhere", "r9");
    let paths = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // A migration from the under-store.
    cold_file(&c, "/migrated", 32 << 20, 1);
    let src = c.ufs.join("migrated");
    make_cold(&src);
    client.migrate("load", &paths(&["/migrated"]), EvictionMode::Explicit, None).await.unwrap();
    wait_in_memory(&client, "load").await;
    let left = cached(&src);
    eprintln!("after a migration: {:.1}% cached", left * 100.0);
    assert!(left <= LEFT, "a migration left {:.0}% of its under-store file cached", left * 100.0);

    // A read's fill from the under-store.
    let bytes = cold_file(&c, "/read", 24 << 20, 2);
    let src = c.ufs.join("read");
    make_cold(&src);
    assert_eq!(sha(&client.read_all("/read").await.unwrap()), sha(&bytes));
    let left = cached(&src);
    eprintln!("after a read's fill: {:.1}% cached", left * 100.0);
    assert!(left <= LEFT, "a read's fill left {:.0}% of its under-store file cached", left * 100.0);

    // A migration from the DISK tier.
    let on_disk = data(12 << 20, 3);
    let disk = WriteOptions { replication: 1, ..opts(WriteType::ReplicatedDisk) };
    let info = c.client("h0", "r0").write_all("/on-disk", &on_disk, disk).await.unwrap();
    let info = client.stat_blocks(&info.path, true).await.unwrap().0;
    let blocks: Vec<_> =
        info.blocks.iter().map(|b| c.root().join("w0/disk/blocks").join(b.block_id.to_string())).collect();
    assert_eq!(blocks.len(), 3);
    blocks.iter().for_each(|b| make_cold(b));
    client.migrate("from-disk", &paths(&["/on-disk"]), EvictionMode::Explicit, None).await.unwrap();
    wait_in_memory(&client, "from-disk").await;
    for b in &blocks {
        let left = cached(b);
        eprintln!("after a DISK migration: {:.1}% cached", left * 100.0);
        assert!(left <= LEFT, "a DISK migration left {:.0}% of {} cached", left * 100.0, b.display());
    }

    // A checkpoint into the under-store.
    let written = data(20 << 20, 4);
    c.client("h0", "r0").write_all("/persisted", &written, opts(WriteType::AsyncThrough)).await.unwrap();
    client.persist_wait("/persisted", Duration::from_secs(30)).await.unwrap();
    let dst = c.ufs.join("persisted");
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), written.len() as u64);
    let left = cached(&dst);
    eprintln!("after a checkpoint: {:.1}% cached", left * 100.0);
    assert!(left <= LEFT, "a checkpoint left {:.0}% of its under-store copy cached", left * 100.0);
}

/// `--keep-page-cache` turns drop-behind off: a migration leaves its file
/// cached, as every copy did before (for an under-store other programs read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_told_to_keep_the_page_cache_leaves_it_cached() {
    let mut o = ClusterOptions { block_size: 4 * MIB, ..ClusterOptions::workers(1) };
    o.workers[0].extra_args = vec!["--keep-page-cache".into()];
    let c = start(o).await;
    let client = c.client("elsewhere", "r9");
    cold_file(&c, "/kept", 16 << 20, 5);
    let src = c.ufs.join("kept");
    make_cold(&src);
    client.migrate("keep", &["/kept".to_string()], EvictionMode::Explicit, None).await.unwrap();
    wait_in_memory(&client, "keep").await;
    let left = cached(&src);
    assert!(left > 0.9, "only {:.0}% of the file stayed cached", left * 100.0);
}

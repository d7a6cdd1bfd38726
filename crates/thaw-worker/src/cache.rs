//! Filling tiers: block files being written (by a write stream or a fill), and
//! fills of whole blocks from the under-store.
//!
//! A fill copies a block's byte range of the under-store file into a tier file.
//! On a local-file under-store the copy is sendfile(2) between the two files, so
//! the bytes never pass through user space; other under-stores stream through
//! OpenDAL. One fill per block runs at a time, as an owned task: every reader that
//! wants the block waits on the same fill, and a reader that goes away does not
//! cancel it. (Improves on a tee of the client's stream into the tier, which cost a
//! user-space copy per byte on the read path.)

use std::sync::Arc;

use futures::StreamExt;
use thaw_common::proto::UfsSource;
use thaw_common::{Result, ThawError};
use tokio::sync::watch;

use crate::Worker;
use crate::device::DeviceKind;
use crate::migration::Source;
use crate::page_cache;
use crate::tier::{Reservation, TierStore};

/// A block being written into a tier: a temp file plus its reserved space.
/// Dropped without `commit`, it leaves nothing behind.
pub(crate) struct BlockFile {
    pub store: Arc<TierStore>,
    pub block: u64,
    temp: std::path::PathBuf,
    file: Option<std::fs::File>,
    pub written: u64,
    reservation: Option<Reservation>,
    /// No other copy of the block exists (a memory-only write): never evicted.
    pinned: bool,
    /// The CRC-32 of the bytes written so far, when the write asked for it.
    crc: Option<crc32fast::Hasher>,
    /// Filled for a read by this application (the cache policy's owner).
    reader: Option<String>,
    /// That read is served from the block once it is committed (not streamed
    /// past it from the under-store already): see [`TierStore::commit_owned`].
    awaited: bool,
}

impl BlockFile {
    /// A new block file holding `reserve` bytes of the tier, made room for by
    /// evicting cache if the tier is full (see [`Worker::reserve`]).
    pub fn create(w: &Worker, store: &Arc<TierStore>, block: u64, reserve: u64, pinned: bool) -> Result<Self> {
        Self::with_reservation(store, block, w.reserve(store, reserve)?, pinned)
    }

    /// A new block file in space already reserved.
    pub fn with_reservation(
        store: &Arc<TierStore>,
        block: u64,
        reservation: Reservation,
        pinned: bool,
    ) -> Result<Self> {
        let temp = store.temp_path(block);
        let file = std::fs::File::create(&temp)?;
        Ok(BlockFile {
            store: store.clone(),
            block,
            temp,
            file: Some(file),
            written: 0,
            reservation: Some(reservation),
            pinned,
            crc: None,
            reader: None,
            awaited: false,
        })
    }

    /// Marks the block as a client's write (see `TierUsage.writing`).
    pub fn for_client_write(mut self) -> Self {
        self.reservation = self.reservation.take().map(crate::tier::Reservation::for_client_write);
        self
    }

    /// Reports the block's CRC-32 with its commit (see `WriteFileRequest.checksum`).
    pub fn with_checksum(mut self, on: bool) -> Self {
        self.crc = on.then(crc32fast::Hasher::new);
        self
    }

    /// The temp file being written (handed to a client for a short-circuit write).
    pub fn temp_path(&self) -> &std::path::Path {
        &self.temp
    }

    /// Takes what a client wrote into the temp file itself: checks it holds
    /// exactly `length` bytes, no more than were reserved.
    pub fn adopt(&mut self, length: u64) -> Result<()> {
        let file = self.file.as_ref().expect("open until commit");
        let on_disk = file.metadata()?.len();
        let reserved = self.reservation.as_ref().map_or(0, Reservation::bytes);
        if on_disk != length || length > reserved {
            return Err(ThawError::invalid(format!(
                "block {} holds {on_disk} bytes, {length} announced, {reserved} reserved",
                self.block
            )));
        }
        self.written = length;
        if let Some(h) = self.crc.as_mut() {
            // The client wrote the file itself: read it back once.
            let mut f = std::fs::File::open(&self.temp)?;
            tokio::task::block_in_place(|| {
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let n = std::io::Read::read(&mut f, &mut buf)?;
                    if n == 0 {
                        return Ok::<(), std::io::Error>(());
                    }
                    h.update(&buf[..n]);
                }
            })?;
        }
        Ok(())
    }

    pub fn write(&mut self, data: &[u8]) -> Result<()> {
        use std::io::Write;
        let file = self.file.as_mut().expect("open until commit");
        tokio::task::block_in_place(|| file.write_all(data))?;
        if let Some(h) = self.crc.as_mut() {
            h.update(data);
        }
        self.written += data.len() as u64;
        Ok(())
    }

    /// Moves the block into the tier and tells the master; on a refusal the block
    /// is deleted again, and the deletion goes with the next heartbeat: a
    /// registration's full block report may have listed the block between the
    /// two steps (a copy ending while the worker re-registers with a restarted
    /// master), and the master must not keep a replica that is gone.
    /// `filled_from`: the under-store bytes a fill copied, for the master to check.
    pub async fn commit(mut self, w: &Worker, filled_from: Option<UfsSource>) -> Result<()> {
        drop(self.file.take());
        let reservation = self.reservation.take().expect("held until commit");
        let client_write = reservation.is_client_write();
        let reader = self.reader.take();
        let (block, pinned) = (self.block, self.pinned);
        self.store.commit_owned(
            block,
            &self.temp,
            self.written,
            reservation,
            pinned,
            reader.as_deref(),
            self.awaited,
        )?;
        let crc = self.crc.take().map(crc32fast::Hasher::finalize);
        let read_fill = reader.is_some();
        w.settle_removal(self.block, self.store.tier).await;
        if let Err(e) = w.commit_block(self.block, self.store.tier, self.written, filled_from, crc, read_fill).await {
            if let Some(len) = self.store.remove(self.block) {
                w.note_removed(self.block, self.store.tier, len);
            }
            self.store.commit_answered(self.written, client_write, false);
            return Err(e);
        }
        self.store.commit_answered(self.written, client_write, true);
        w.note_changed();
        Ok(())
    }

    /// Copies `len` bytes at `offset` of the local file `src` into this block with
    /// sendfile(2), on blocking threads, as `mode` says: in the kernel's idle
    /// I/O class (a migration: see [`crate::ioprio`]), in several parts at once
    /// (a fast device's measured parallelism: see
    /// [`crate::migration::parallelism`]), dropping the source's pages behind
    /// (see [`crate::page_cache`]).
    pub(crate) async fn copy_from_local(
        &mut self,
        src: std::path::PathBuf,
        offset: u64,
        len: u64,
        mode: CopyMode,
    ) -> Result<()> {
        let CopyMode { idle_io, streams, drop_behind } = mode;
        let out = self.file.take().expect("open until commit");
        let (temp, at) = (self.temp.clone(), self.written);
        let (out, copied) = tokio::task::spawn_blocking(move || -> Result<(std::fs::File, u64)> {
            let parts = split(len, streams);
            if parts.len() <= 1 {
                let _idle = idle_io.then(crate::ioprio::IdleIo::enter);
                let copied = sendfile_range(&src, &out, offset, len, drop_behind)?;
                return Ok((out, copied));
            }
            // Each part writes through its own descriptor, positioned at its
            // place in the block file.
            let copied = std::thread::scope(|s| {
                let handles: Vec<_> = parts
                    .iter()
                    .map(|&(from, n)| {
                        let (src, temp) = (&src, &temp);
                        s.spawn(move || -> Result<u64> {
                            use std::io::{Seek, SeekFrom};
                            let _idle = idle_io.then(crate::ioprio::IdleIo::enter);
                            let mut part = std::fs::OpenOptions::new().write(true).open(temp)?;
                            part.seek(SeekFrom::Start(at + from))?;
                            sendfile_range(src, &part, offset + from, n, drop_behind)
                        })
                    })
                    .collect();
                let mut total = 0;
                for h in handles {
                    total += h.join().map_err(|_| ThawError::internal("copy thread panicked"))??;
                }
                Ok::<u64, ThawError>(total)
            })?;
            if drop_behind {
                // The kernel's read-ahead of one part runs into the next one's
                // range, after that part dropped it: drop the whole range again.
                page_cache::drop_pages(&std::fs::File::open(&src)?, offset, len);
            }
            use std::io::{Seek, SeekFrom};
            let mut out = out;
            out.seek(SeekFrom::Start(at + copied))?;
            Ok((out, copied))
        })
        .await
        .map_err(|e| ThawError::internal(format!("copy task: {e}")))??;
        self.file = Some(out);
        self.written += copied;
        Ok(())
    }
}

/// `len` bytes split into at most `streams` parts of whole MiBs: (offset, length).
fn split(len: u64, streams: usize) -> Vec<(u64, u64)> {
    const ALIGN: u64 = 1 << 20;
    let k = (streams.max(1) as u64).min(len.div_ceil(ALIGN)).max(1);
    let part = len.div_ceil(k).div_ceil(ALIGN) * ALIGN;
    let mut out = Vec::new();
    let mut at = 0;
    while at < len {
        let n = part.min(len - at);
        out.push((at, n));
        at += n;
    }
    out
}

/// How a copy from a local file runs (see [`BlockFile::copy_from_local`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CopyMode {
    /// In the kernel's idle I/O class.
    pub idle_io: bool,
    /// Parts copied at once.
    pub streams: usize,
    /// Drop the source's pages from the page cache behind the copy.
    pub drop_behind: bool,
}

/// sendfile(2) of `len` bytes at `offset` of `src` to `out`'s position; returns
/// the bytes copied (fewer if `src` ends first). With `drop_behind`, the pages
/// of `src` each [`page_cache::WINDOW`] copied are dropped from the page cache
/// as it goes (a cold copy's source is not read again: see [`page_cache`]).
pub(crate) fn sendfile_range(
    src: &std::path::Path,
    out: &std::fs::File,
    offset: u64,
    len: u64,
    drop_behind: bool,
) -> Result<u64> {
    use std::os::fd::AsRawFd;
    let input = std::fs::File::open(src)?;
    let step = if drop_behind { page_cache::WINDOW } else { 1 << 30 };
    let mut at = offset as libc::off_t;
    let mut left = len;
    let mut dropped = offset;
    while left > 0 {
        // SAFETY: both descriptors are open for the duration of the call.
        let r = unsafe { libc::sendfile(out.as_raw_fd(), input.as_raw_fd(), &mut at, left.min(step) as usize) };
        let done = match r {
            r if r < 0 => Err(std::io::Error::last_os_error()),
            0 => Ok(true),
            r => {
                left -= r as u64;
                Ok(left == 0)
            }
        };
        if drop_behind && (at as u64 >= dropped + page_cache::WINDOW || !matches!(done, Ok(false))) {
            page_cache::drop_pages(&input, dropped, at as u64 - dropped);
            dropped = at as u64;
        }
        if done? {
            break;
        }
    }
    Ok(len - left)
}

impl Drop for BlockFile {
    fn drop(&mut self) {
        if self.reservation.is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Bytes per step of a copy from a local file through a device model.
const FILL_CHUNK: u64 = 4 << 20;

impl BlockFile {
    /// Copies `len` bytes at `offset` of the local file `src` into this block;
    /// through an emulated device, in chunks that each wait for their device time
    /// (one stream: the model's concurrency penalty is the device's to charge);
    /// else with `mode.streams` parts at once.
    /// Stops early (without error) if the file ends: callers check `written`.
    pub(crate) async fn copy_paced(
        &mut self,
        src: std::path::PathBuf,
        offset: u64,
        len: u64,
        device: Option<&mut crate::device::DeviceStream>,
        mode: CopyMode,
    ) -> Result<()> {
        let Some(d) = device else {
            return self.copy_from_local(src, offset, len, mode).await;
        };
        let start = self.written;
        while self.written - start < len {
            let (before, k) = (self.written, (len - (self.written - start)).min(FILL_CHUNK));
            d.consume(k).await;
            let one = CopyMode { streams: 1, ..mode };
            self.copy_from_local(src.clone(), offset + (before - start), k, one).await?;
            if self.written - before < k {
                break; // the file ended early
            }
        }
        Ok(())
    }
}

/// Copies of an order's blocks that may run at once (a semaphore of that
/// many permits): a copy holds one until its bytes are in, not through its
/// commit.
pub(crate) type CopySlots = Arc<tokio::sync::Semaphore>;

/// One of `slots`, once free (none to take: nothing to wait for).
pub(crate) async fn take_slot(slots: Option<CopySlots>) -> Option<tokio::sync::OwnedSemaphorePermit> {
    slots?.acquire_owned().await.ok()
}

/// The outcome of a fill, shared with every reader waiting on it.
pub(crate) type FillState = watch::Receiver<Option<Result<()>>>;

impl Worker {
    /// Makes sure `block` is in `tier`, filling it from the under-store if it is
    /// not; returns once the block is committed (or the fill failed). `reader`:
    /// the application whose read asks for it (the cache policy may drop the
    /// request); `None` for a migration.
    pub(crate) async fn cache_block(
        self: &Arc<Self>,
        block: u64,
        ufs: &UfsSource,
        tier: &Arc<TierStore>,
        reader: Option<&str>,
    ) -> Result<()> {
        if tier.get(block).is_some() {
            return Ok(());
        }
        let mut state = self.fill_once(block, ufs, tier, reader, true, None);
        let done = state.wait_for(|s| s.is_some()).await.map_err(|_| ThawError::internal("fill task vanished"))?;
        done.clone().expect("waited for Some")
    }

    /// A migration's fill of `block` (see [`Worker::cache_block`]), its copy
    /// taking one of `slots` (an order's copies at once) and letting it go
    /// before the commit, so that the next block's copy overlaps this one's
    /// call to the master.
    pub(crate) async fn migrate_fill(
        self: &Arc<Self>,
        block: u64,
        ufs: &UfsSource,
        tier: &Arc<TierStore>,
        slots: Option<CopySlots>,
    ) -> Result<()> {
        if tier.get(block).is_some() {
            return Ok(());
        }
        let mut state = self.fill_once(block, ufs, tier, None, true, slots);
        let done = state.wait_for(|s| s.is_some()).await.map_err(|_| ThawError::internal("fill task vanished"))?;
        done.clone().expect("waited for Some")
    }

    /// Starts filling `block` behind a ranged read by `reader` that was
    /// streamed from the under-store, unless a fill of it is already running.
    /// That read is served: the block's next read is a hit.
    pub(crate) fn start_fill(
        self: &Arc<Self>,
        block: u64,
        ufs: &UfsSource,
        tier: &Arc<TierStore>,
        reader: &str,
    ) -> FillState {
        self.fill_once(block, ufs, tier, Some(reader), false, None)
    }

    /// Starts filling `block` unless a fill of it is already running. A
    /// migration's fill (no `reader`) reads the under-store with the streams
    /// its measured parallelism gives, and measures it. `awaited`: the
    /// reader's read is served from the block once it is in (see
    /// [`TierStore::commit_owned`]).
    fn fill_once(
        self: &Arc<Self>,
        block: u64,
        ufs: &UfsSource,
        tier: &Arc<TierStore>,
        reader: Option<&str>,
        awaited: bool,
        slots: Option<CopySlots>,
    ) -> FillState {
        let mut fills = self.fills.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = fills.get(&block) {
            return state.clone();
        }
        let (tx, rx) = watch::channel(None);
        fills.insert(block, rx.clone());
        let (w, ufs, tier, reader) = (self.clone(), ufs.clone(), tier.clone(), reader.map(str::to_string));
        self.tasks.spawn(async move {
            let r = if tier.get(block).is_some() {
                Ok(())
            } else {
                w.fill(block, &ufs, &tier, reader.as_deref(), awaited, slots).await
            };
            if let Err(e) = &r {
                tracing::debug!(block, error = %e, "fill from the under-store failed");
            }
            w.fills.lock().unwrap_or_else(|e| e.into_inner()).remove(&block);
            let _ = tx.send(Some(r));
        });
        rx
    }

    async fn fill(
        &self,
        block: u64,
        ufs: &UfsSource,
        tier: &Arc<TierStore>,
        reader: Option<&str>,
        awaited: bool,
        slots: Option<CopySlots>,
    ) -> Result<()> {
        self.fill_from(block, ufs, tier, reader, awaited, slots).await.map_err(|e| gone_is_lost(e, &ufs.path))
    }

    async fn fill_from(
        &self,
        block: u64,
        ufs: &UfsSource,
        tier: &Arc<TierStore>,
        reader: Option<&str>,
        awaited: bool,
        slots: Option<CopySlots>,
    ) -> Result<()> {
        let migration = reader.is_none();
        let slot = take_slot(slots).await;
        let mut file = match reader {
            None => BlockFile::create(self, tier, block, ufs.length, false)?,
            Some(job) => {
                let need = crate::tier::Need::Cache { block, job };
                let r = self.reserve_for(tier, ufs.length, need)?;
                let mut f = BlockFile::with_reservation(tier, block, r, false)?;
                f.reader = Some(job.to_string());
                f.awaited = awaited;
                f
            }
        };
        let store = self.ufs()?;
        // An emulated under-store device, if modelled, paces the copy (not a
        // migration's with `--migration-io instant`).
        let instant = migration && self.config.migration.io == crate::MigrationIo::Instant;
        let mut device = if instant { None } else { self.device_stream(DeviceKind::Ufs) };
        match store.local_path(&ufs.path)? {
            Some(src) => {
                let modelled = device.is_some();
                let streams = if migration { self.copy_streams(Source::Ufs, ufs.length, modelled) } else { 1 };
                let started = std::time::Instant::now();
                // A cold copy: the block is in the tier now, its source's pages
                // are not wanted in the page cache beside it.
                let mode = CopyMode { idle_io: false, streams, drop_behind: !self.config.keep_page_cache };
                file.copy_paced(src, ufs.offset, ufs.length, device.as_mut(), mode).await?;
                if migration && !modelled && file.written == ufs.length {
                    self.copy_took(Source::Ufs, streams, ufs.length, started.elapsed());
                }
            }
            None => {
                let mut stream = store.read_range(&ufs.path, ufs.offset..ufs.offset + ufs.length).await?;
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk?;
                    if let Some(d) = device.as_mut() {
                        d.consume(chunk.len() as u64).await;
                    }
                    file.write(&chunk)?;
                }
            }
        }
        drop(device);
        drop(slot);
        if file.written != ufs.length {
            return Err(ThawError::data_lost(format!(
                "under-store file {} ended {} bytes short of block {block} (changed underneath?)",
                ufs.path,
                ufs.length - file.written
            )));
        }
        tracing::debug!(block, bytes = file.written, tier = tier.name(), "filled from the under-store");
        let bytes = file.written;
        file.commit(self, Some(ufs.clone())).await?;
        if !migration {
            self.stats.count_fill(bytes);
        }
        Ok(())
    }
}

/// A file Thaw knows as persisted but that is missing from the under-store has
/// lost its bytes: say so, rather than "not found" (which reads as a bad request).
pub(crate) fn gone_is_lost(e: ThawError, path: &str) -> ThawError {
    if e.kind == thaw_common::ErrorKind::NotFound {
        ThawError::data_lost(format!("the under-store copy of {path} is gone ({})", e.message))
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thaw_common::proto::Tier;

    #[test]
    fn a_range_splits_into_whole_mib_parts_that_cover_it() {
        const MIB: u64 = 1 << 20;
        assert_eq!(split(64 * MIB, 1), vec![(0, 64 * MIB)]);
        assert_eq!(
            split(64 * MIB, 4),
            vec![(0, 16 * MIB), (16 * MIB, 16 * MIB), (32 * MIB, 16 * MIB), (48 * MIB, 16 * MIB)]
        );
        // A short last block: parts of whole MiBs, the last one shorter.
        assert_eq!(split(5 * MIB + 7, 2), vec![(0, 3 * MIB), (3 * MIB, 2 * MIB + 7)]);
        // Never more parts than MiBs.
        assert_eq!(split(MIB / 2, 4), vec![(0, MIB / 2)]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_copy_with_several_streams_writes_the_same_bytes_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.bin");
        let bytes: Vec<u8> = (0..(9u64 << 20) + 12345).map(|i| (i * 31 + i / 4099) as u8).collect();
        std::fs::write(&src, &bytes).unwrap();
        let store = TierStore::open(Tier::Mem, &dir.path().join("mem"), 64 << 20, true, Default::default()).unwrap();
        let create = |block: u64, len: u64| {
            let reservation = store.reserve_evicting(len, &|_| true).0.unwrap();
            BlockFile::with_reservation(&store, block, reservation, false).unwrap()
        };
        let (offset, len) = (777u64, (8u64 << 20) + 4321);
        for streams in [1, 3, 4] {
            let mut f = create(100 + streams as u64, len);
            f.copy_from_local(src.clone(), offset, len, mode(streams)).await.unwrap();
            assert_eq!(f.written, len);
            // The file position is at the end: a further write appends.
            f.write(b"tail").unwrap();
            drop(f.file.take());
            let got = std::fs::read(&f.temp).unwrap();
            assert_eq!(got.len() as u64, len + 4, "{streams} streams");
            assert!(got[..len as usize] == bytes[offset as usize..(offset + len) as usize], "{streams} streams");
            assert_eq!(&got[len as usize..], b"tail");
        }
        // A source that ends early copies less, whatever the streams.
        let mut f = create(200, len);
        f.copy_from_local(src.clone(), bytes.len() as u64 - 1000, len, mode(4)).await.unwrap();
        assert!(f.written < len);
    }

    fn mode(streams: usize) -> CopyMode {
        CopyMode { idle_io: false, streams, drop_behind: false }
    }

    /// A drop-behind copy leaves none of the range it copied in the page
    /// cache, with one stream or several; a plain copy leaves it all there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_drop_behind_copy_leaves_its_source_out_of_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.bin");
        let len = 24u64 << 20;
        std::fs::write(&src, vec![3u8; len as usize]).unwrap();
        let input = std::fs::File::open(&src).unwrap();
        let store = TierStore::open(Tier::Mem, &dir.path().join("mem"), 128 << 20, true, Default::default()).unwrap();
        let resident = || page_cache::resident_pages(&input, 0, len).unwrap();
        for (block, drop_behind, streams) in [(1, false, 1), (2, true, 1), (3, true, 3)] {
            input.sync_all().unwrap();
            page_cache::drop_pages(&input, 0, 0);
            assert_eq!(resident().0, 0, "the source starts out of the page cache");
            let reservation = store.reserve_evicting(len, &|_| true).0.unwrap();
            let mut f = BlockFile::with_reservation(&store, block, reservation, false).unwrap();
            let m = CopyMode { idle_io: false, streams, drop_behind };
            f.copy_from_local(src.clone(), 0, len, m).await.unwrap();
            assert_eq!(f.written, len);
            let (cached, pages) = resident();
            if drop_behind {
                assert_eq!(cached, 0, "{streams} stream(s): {cached} of {pages} pages left cached");
            } else {
                assert!(cached > pages / 2, "a plain copy caches its source ({cached} of {pages} pages)");
            }
        }
    }
}

//! The worker's side of a short-circuit write (`write_local` in
//! proto/thaw/v1/data.proto): a client on this host writes each block into a
//! temp file this worker creates in its tier, with the block's space reserved
//! first, and says when the block is whole; the worker checks its length and
//! commits it like a streamed block (rename into place, tell the master). A
//! block is never visible before its commit; an exchange that ends without its
//! finish drops the open temp file and its reservation, and removes the blocks
//! it committed, as a failed streamed write does. For a cache-through write the
//! worker copies each committed block on to the under-store; in a segmented
//! write (data protocol version 2) whose file moved on to other workers, the
//! client then sends the rest of the file's bytes over the connection, for the
//! under-store copy only (`LocalWriteStep.ufs_bytes`).

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use thaw_common::frame;
use thaw_common::ids::{MAX_BLOCKS_PER_FILE, block_id};
use thaw_common::proto::*;
use thaw_common::{Result, ThawError};

use thaw_proto::DATA_PROTOCOL_SEGMENTS;
use tokio::io::AsyncReadExt;

use super::write::{end_write, write_target};
use super::{DataSock, IDLE_TIMEOUT};
use crate::Worker;
use crate::cache::BlockFile;
use crate::device::DeviceKind;
use crate::tier::TierStore;

/// Bytes per read of a committed block on its way to the under-store.
const UFS_CHUNK: u64 = 4 << 20;

pub(super) async fn write_local(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: &str,
    version: u32,
    req: WriteFileRequest,
    sent: &mut bool,
) -> Result<()> {
    let (bs, tier, mut ufs) = write_target(w, version, &req).await?;
    let Some(tier) = tier else {
        if let Some(u) = ufs {
            u.abort().await;
        }
        return Err(ThawError::invalid("a short-circuit write needs a tier to write into"));
    };
    if tier.tier == Tier::Disk && w.device(DeviceKind::Disk).is_some() {
        if let Some(u) = ufs {
            u.abort().await;
        }
        // Writing the block files directly would bypass the emulated disk.
        return Err(ThawError::precondition(format!(
            "worker {}'s DISK writes go through its device model: stream them",
            w.address
        )));
    }
    // Where the block files are written: a client that cannot write there
    // (another user, on a secured worker) streams instead.
    let accepted = DataResponse { local_path: tier.temp_dir().display().to_string(), ..Default::default() };
    frame::write_msg(sock, &accepted).await?;
    let mut committed: Vec<(u64, u64)> = Vec::new();
    let file = LocalFile {
        id: req.file_id,
        checksum: req.checksum,
        first_block: req.first_block,
        version,
        pinned: ufs.is_none() && !req.cached,
    };
    let result = receive_local(w, sock, file, bs, &tier, &mut ufs, &mut committed).await;
    end_write(w, sock, job, req.file_id, result, Some(&tier), ufs, committed, sent).await
}

/// The file a short-circuit exchange writes, and how.
struct LocalFile {
    id: u64,
    checksum: bool,
    /// The segment's first block (0 but in a segmented write).
    first_block: u64,
    /// The request's data protocol version.
    version: u32,
    /// Its blocks are the only copy (none is on its way to the under-store).
    pinned: bool,
}

/// Runs the steps of the exchange until its finish; the bytes it took.
async fn receive_local(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    LocalFile { id: file_id, checksum, first_block, version, pinned }: LocalFile,
    bs: u64,
    tier: &Arc<TierStore>,
    ufs: &mut Option<thaw_ufs::UfsWriter>,
    committed: &mut Vec<(u64, u64)>,
) -> Result<u64> {
    // Dropped on any early return: the temp file and its reservation go with it.
    let mut open: Option<BlockFile> = None;
    let mut total = 0u64;
    // Bytes sent for the under-store only: no block is opened after them.
    let mut ufs_only = 0u64;
    // An emulated under-store paces the copy to it.
    let mut under = ufs.as_ref().and_then(|_| w.device_stream(DeviceKind::Ufs)).map(|d| d.writing());
    loop {
        // A client that stops sending (stopped, not dead: a dead one's socket
        // closes) gives its reservation back after the idle timeout.
        sock.as_mut().set_read_timeout_pinned(Some(IDLE_TIMEOUT));
        let step = tokio::time::timeout(IDLE_TIMEOUT, frame::read_msg::<_, LocalWriteStep>(sock))
            .await
            .map_err(|_| {
                ThawError::timeout(format!("short-circuit write idle for {IDLE_TIMEOUT:?} after {total} bytes"))
            })??
            .ok_or_else(|| ThawError::unavailable(format!("short-circuit write ended early after {total} bytes")))?;
        match step.step {
            Some(local_write_step::Step::OpenBlock(index)) => {
                if open.is_some() {
                    return Err(ThawError::invalid("a block was opened while another is still open"));
                }
                if index != first_block + committed.len() as u64 || !total.is_multiple_of(bs) || ufs_only > 0 {
                    return Err(ThawError::invalid(format!(
                        "block {index} opened after {} committed blocks from block {first_block}, of {total} bytes \
                         ({ufs_only} for the under-store only)",
                        committed.len()
                    )));
                }
                if index >= MAX_BLOCKS_PER_FILE {
                    return Err(ThawError::invalid("file has more blocks than a file may have"));
                }
                let b = BlockFile::create(w, tier, block_id(file_id, index), bs, pinned)?
                    .for_client_write()
                    .with_checksum(checksum);
                let local_path = b.temp_path().display().to_string();
                open = Some(b);
                frame::write_msg(sock, &DataResponse { local_path, ..Default::default() }).await?;
            }
            Some(local_write_step::Step::CommitLength(n)) => {
                let mut b = open.take().ok_or_else(|| ThawError::invalid("commit with no block open"))?;
                if n == 0 {
                    return Err(ThawError::invalid("an empty block cannot be committed"));
                }
                b.adopt(n)?;
                if let Some(u) = ufs.as_mut() {
                    copy_to_ufs(b.temp_path(), n, u, under.as_mut()).await?;
                }
                committed.push((b.block, n));
                b.commit(w, None).await?;
                total += n;
                frame::write_msg(sock, &DataResponse { length: n, ..Default::default() }).await?;
            }
            Some(local_write_step::Step::UfsBytes(n)) => {
                if version < DATA_PROTOCOL_SEGMENTS {
                    return Err(ThawError::invalid(format!(
                        "ufs_bytes is data protocol version {DATA_PROTOCOL_SEGMENTS}; the request says {version}"
                    )));
                }
                let Some(u) = ufs.as_mut() else {
                    return Err(ThawError::invalid("ufs_bytes in a write with no under-store copy"));
                };
                if open.is_some() || (ufs_only == 0 && !total.is_multiple_of(bs)) {
                    return Err(ThawError::invalid("ufs_bytes inside a block"));
                }
                if n == 0 || n > frame::MAX_CHUNK_BYTES as u64 {
                    return Err(ThawError::invalid(format!(
                        "ufs_bytes of {n} bytes: from 1 to {} at a time",
                        frame::MAX_CHUNK_BYTES
                    )));
                }
                if let Some(d) = under.as_mut() {
                    d.consume(n).await;
                }
                sock.as_mut().set_read_timeout_pinned(Some(w.config.stall_timeout));
                let mut buf = vec![0u8; n as usize];
                sock.read_exact(&mut buf).await.map_err(|e| {
                    ThawError::unavailable(format!("short-circuit write ended early after {total} bytes: {e}"))
                })?;
                u.write(Bytes::from(buf)).await?;
                total += n;
                ufs_only += n;
            }
            Some(local_write_step::Step::Finish(length)) => {
                if open.is_some() {
                    return Err(ThawError::invalid("the write ended with a block still open"));
                }
                if length != total {
                    return Err(ThawError::invalid(format!("the write ended at {length} bytes, {total} committed")));
                }
                if let Some(u) = ufs.take() {
                    u.close().await?;
                }
                return Ok(total);
            }
            None => return Err(ThawError::invalid("empty short-circuit write step")),
        }
    }
}

/// Appends a block file's `n` bytes to the under-store file being written.
async fn copy_to_ufs(
    path: &std::path::Path,
    n: u64,
    u: &mut thaw_ufs::UfsWriter,
    mut device: Option<&mut crate::device::DeviceStream>,
) -> Result<()> {
    let file = std::fs::File::open(path)?;
    let mut at = 0u64;
    while at < n {
        let k = (n - at).min(UFS_CHUNK) as usize;
        if let Some(d) = device.as_deref_mut() {
            d.consume(k as u64).await;
        }
        let mut buf = vec![0u8; k];
        tokio::task::block_in_place(|| file.read_exact_at(&mut buf, at))?;
        u.write(Bytes::from(buf)).await?;
        at += k as u64;
    }
    Ok(())
}

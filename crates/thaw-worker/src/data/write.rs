//! Streamed writes (`write_file` in proto/thaw/v1/data.proto): a client sends
//! a file's bytes over its connection, and the worker cuts them into blocks
//! of its tier, copies them on to the under-store, or both, by the request.
//! Also what every write shares, the streamed one and the short-circuit one
//! (`local_write`): where it goes ([`write_target`]) and how it ends
//! ([`end_write`]: answered when whole, undone when not).

use std::sync::Arc;

use bytes::Bytes;
use thaw_common::frame;
use thaw_common::ids::{MAX_BLOCKS_PER_FILE, block_id};
use thaw_common::proto::*;
use thaw_common::{MAX_BLOCK_SIZE, MIN_BLOCK_SIZE, Result, ThawError};
use thaw_proto::DATA_PROTOCOL_SEGMENTS;
use tokio::io::AsyncReadExt;

use super::{DataSock, IDLE_TIMEOUT};
use crate::Worker;
use crate::cache::BlockFile;
use crate::device::DeviceKind;
use crate::stats::Access;
use crate::tier::TierStore;

/// Where a write goes: its block size, its tier (if any) and its under-store
/// writer (if any), checked. `version`: the request's data protocol version.
pub(super) async fn write_target(
    w: &Arc<Worker>,
    version: u32,
    req: &WriteFileRequest,
) -> Result<(u64, Option<Arc<TierStore>>, Option<thaw_ufs::UfsWriter>)> {
    let bs = req.block_size;
    if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&bs) {
        return Err(ThawError::invalid(format!("block size {bs} is out of range")));
    }
    if req.first_block != 0 {
        if version < DATA_PROTOCOL_SEGMENTS {
            return Err(ThawError::invalid(format!(
                "first_block is data protocol version {DATA_PROTOCOL_SEGMENTS}; the request says {version}"
            )));
        }
        if req.first_block >= MAX_BLOCKS_PER_FILE {
            return Err(ThawError::invalid("file has more blocks than a file may have"));
        }
        if !req.ufs_path.is_empty() {
            return Err(ThawError::invalid(
                "only the stream of a file's first segment writes its under-store copy (first_block 0)",
            ));
        }
    }
    if req.cached && version < DATA_PROTOCOL_SEGMENTS {
        return Err(ThawError::invalid(format!(
            "cached is data protocol version {DATA_PROTOCOL_SEGMENTS}; the request says {version}"
        )));
    }
    let tier = match Tier::try_from(req.tier) {
        Ok(Tier::Unspecified) => None,
        Ok(t) => Some(
            w.tier(t)
                .ok_or_else(|| ThawError::invalid(format!("worker {} has no {} tier", w.address, t.as_str_name())))?,
        ),
        Err(_) => return Err(ThawError::invalid(format!("unknown tier {}", req.tier))),
    };
    if tier.is_none() && req.ufs_path.is_empty() {
        return Err(ThawError::invalid("write names neither a tier nor an under-store path"));
    }
    let ufs = match req.ufs_path.as_str() {
        "" => None,
        p => Some(w.ufs()?.writer(p).await?),
    };
    Ok((bs, tier, ufs))
}

/// Undoes a write that failed: the under-store file is dropped, and the blocks
/// it committed leave the tier (the master hears of it).
async fn undo_write(
    w: &Arc<Worker>,
    tier: Option<&Arc<TierStore>>,
    ufs: Option<thaw_ufs::UfsWriter>,
    committed: Vec<(u64, u64)>,
) {
    if let Some(u) = ufs {
        u.abort().await;
    }
    if let Some(t) = tier {
        for (b, len) in committed {
            if t.remove(b).is_some() {
                w.note_removed(b, t.tier, len);
            }
        }
    }
}

/// A streamed write, from its request to its answer.
pub(super) async fn write_file(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: &str,
    version: u32,
    req: WriteFileRequest,
    sent: &mut bool,
) -> Result<()> {
    let (bs, tier, mut ufs) = write_target(w, version, &req).await?;
    let mut committed: Vec<(u64, u64)> = Vec::new();
    let marks = version >= DATA_PROTOCOL_SEGMENTS;
    let result = receive_file(w, sock, (&req, marks), bs, tier.as_ref(), &mut ufs, &mut committed).await;
    end_write(w, sock, job, req.file_id, result, tier.as_ref(), ufs, committed, sent).await
}

/// Ends a write: a whole one is counted for its job and answered with its
/// length; a failed one is undone ([`undo_write`]).
#[allow(clippy::too_many_arguments)]
pub(super) async fn end_write(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: &str,
    file_id: u64,
    result: Result<u64>,
    tier: Option<&Arc<TierStore>>,
    ufs: Option<thaw_ufs::UfsWriter>,
    committed: Vec<(u64, u64)>,
    sent: &mut bool,
) -> Result<()> {
    match result {
        Ok(total) => {
            w.stats.record(job, Access::Write(total));
            tracing::debug!(job, file = file_id, bytes = total, "file written");
            *sent = true;
            frame::write_msg(sock, &DataResponse { length: total, ..Default::default() }).await?;
            Ok(())
        }
        Err(e) => {
            undo_write(w, tier, ufs, committed).await;
            Err(e)
        }
    }
}

/// Receives chunks until the end marker, cutting them into blocks of `bs`
/// bytes from block `req.first_block` on. `marks`: a version-2 stream, which
/// may say [`frame::STORE_NO_MORE`] (a cache-through file's first segment
/// whose file moved on to other workers: the rest is for the under-store).
/// Returns the bytes received.
async fn receive_file(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    (req, marks): (&WriteFileRequest, bool),
    bs: u64,
    mut tier: Option<&Arc<TierStore>>,
    ufs: &mut Option<thaw_ufs::UfsWriter>,
    committed: &mut Vec<(u64, u64)>,
) -> Result<u64> {
    let (file_id, checksum, first) = (req.file_id, req.checksum, req.first_block);
    let mut current: Option<BlockFile> = None;
    let mut total = 0u64;
    // Without an under-store copy the tier's blocks are the only ones.
    let pinned = ufs.is_none() && !req.cached;
    // Emulated devices pace writes to them as they pace reads.
    let mut disk =
        tier.filter(|t| t.tier == Tier::Disk).and_then(|_| w.device_stream(DeviceKind::Disk)).map(|d| d.writing());
    let mut under = ufs.as_ref().and_then(|_| w.device_stream(DeviceKind::Ufs)).map(|d| d.writing());
    loop {
        // A writer may pause between chunks (a slow producer), as between
        // requests; within a chunk it may not stall.
        sock.as_mut().set_read_timeout_pinned(Some(IDLE_TIMEOUT));
        let n = match frame::read_chunk_header(sock).await? {
            frame::ChunkHeader::End => break,
            frame::ChunkHeader::Data(n) => n,
            frame::ChunkHeader::StoreNoMore => {
                if !marks {
                    return Err(ThawError::invalid(format!(
                        "store-no-more is data protocol version {DATA_PROTOCOL_SEGMENTS}"
                    )));
                }
                if ufs.is_none() || current.is_some() || !total.is_multiple_of(bs) {
                    return Err(ThawError::invalid(format!(
                        "store-no-more after {total} bytes: only at a block boundary of a write with an under-store copy"
                    )));
                }
                tier = None;
                disk = None;
                continue;
            }
        };
        sock.as_mut().set_read_timeout_pinned(Some(w.config.stall_timeout));
        if let Some(d) = disk.as_mut() {
            d.consume(n as u64).await;
        }
        if let Some(d) = under.as_mut() {
            d.consume(n as u64).await;
        }
        let mut buf = vec![0u8; n];
        sock.read_exact(&mut buf)
            .await
            .map_err(|e| ThawError::unavailable(format!("write stream ended early after {total} bytes: {e}")))?;
        let data = Bytes::from(buf);
        if let Some(store) = tier {
            let mut rest = &data[..];
            let mut pos = total;
            while !rest.is_empty() {
                let block = match current.as_mut() {
                    Some(b) => b,
                    None => {
                        let index = first + pos / bs;
                        if index >= MAX_BLOCKS_PER_FILE {
                            return Err(ThawError::invalid("file has more blocks than a file may have"));
                        }
                        let b = BlockFile::create(w, store, block_id(file_id, index), bs, pinned)?;
                        current.insert(b.for_client_write().with_checksum(checksum))
                    }
                };
                let k = ((bs - block.written) as usize).min(rest.len());
                block.write(&rest[..k])?;
                rest = &rest[k..];
                pos += k as u64;
                if block.written == bs {
                    let b = current.take().expect("current");
                    committed.push((b.block, b.written));
                    b.commit(w, None).await?;
                }
            }
        }
        if let Some(u) = ufs.as_mut() {
            u.write(data).await?;
        }
        total += n as u64;
    }
    if let Some(b) = current.take() {
        committed.push((b.block, b.written));
        b.commit(w, None).await?;
    }
    if let Some(u) = ufs.take() {
        u.close().await?;
    }
    Ok(total)
}

//! The short-circuit write: a client on its worker's host writes each block
//! straight into a temp file the worker hands out in its tier (space reserved
//! first), and the worker commits the file once the client says it is whole.
//! No byte crosses a socket, and a local source file is copied in the kernel
//! ([`crate::copy`]). A write that ends early (error, drop, a dead client) never
//! commits its open block, so nothing half-written is visible; the worker drops
//! the temp file and its reservation, and the blocks it committed for the file.
//! Alluxio's short-circuit write does the same (its worker's `createLocalBlock`).

use std::fs::File;

use thaw_common::frame;
use thaw_common::proto::*;
use thaw_common::tls::DataStream;
use thaw_common::{Result, ThawError};

use crate::copy::{blocking, copy_range};
use crate::data::RESPONSE_TIMEOUT;

/// A short-circuit write in progress to one worker on this host.
pub(crate) struct LocalSink {
    pub addr: String,
    sock: DataStream,
    block_size: u64,
    /// The segment's first block (0 but in a segmented write).
    first_block: u64,
    /// The open block's temp file and the bytes written into it.
    block: Option<(File, u64)>,
    /// Bytes of the segment written so far (committed, in the open block, or
    /// sent for the under-store only).
    pub written: u64,
}

impl LocalSink {
    /// Asks worker `addr` for a short-circuit write of the file; `Err` if it
    /// refuses (an older worker, a write with no tier), and the caller streams.
    /// `first_block`: where the segment starts (`WriteFileRequest.first_block`).
    pub async fn open(
        pool: &crate::data::Pool,
        addr: &str,
        req: DataRequest,
        block_size: u64,
        first_block: u64,
    ) -> Result<Self> {
        // An idle connection serves (the worker takes requests on one in
        // turn); one gone stale since is replaced before anything is sent.
        let (sock, accepted) = pool.call(addr, &req).await?;
        // A secured worker's tier is its own user's: another user streams.
        if !accepted.local_path.is_empty() && !writable(&accepted.local_path) {
            return Err(ThawError::permission_denied(format!(
                "cannot write into worker {addr}'s tier directory {}",
                accepted.local_path
            )));
        }
        Ok(LocalSink { addr: addr.to_string(), sock, block_size, first_block, block: None, written: 0 })
    }

    /// Says which file system a block file write found full: the worker's
    /// tier directory, smaller than the capacity the worker was given.
    fn full(&self, e: ThawError) -> ThawError {
        if e.kind != thaw_common::ErrorKind::ResourceExhausted {
            return e;
        }
        ThawError::exhausted(format!(
            "the tier of worker {} is full: its directory's file system has no space left, though the \
             tier's capacity is not used up (give the worker a capacity its file system can hold): {}",
            self.addr, e.message
        ))
    }

    /// One step of the exchange and its answer.
    async fn step(&mut self, step: local_write_step::Step) -> Result<DataResponse> {
        let addr = &self.addr;
        frame::write_msg(&mut self.sock, &LocalWriteStep { step: Some(step) })
            .await
            .map_err(|e| ThawError::from(e).context(format!("worker {addr}")))?;
        let answer =
            tokio::time::timeout(RESPONSE_TIMEOUT, frame::read_msg::<_, DataResponse>(&mut self.sock))
                .await
                .map_err(|_| ThawError::timeout(format!("worker {addr} gave no answer within {RESPONSE_TIMEOUT:?}")))?;
        match answer? {
            Some(resp) => frame::check_response(resp).map_err(|e| e.context(format!("worker {addr}"))),
            None => Err(ThawError::unavailable(format!("worker {addr} closed the write"))),
        }
    }

    /// The open block's file and the room left in it, opening the next block if none is.
    async fn room(&mut self) -> Result<u64> {
        if self.block.is_none() {
            let index = self.first_block + self.written / self.block_size;
            let resp = self.step(local_write_step::Step::OpenBlock(index)).await?;
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&resp.local_path)
                .map_err(|e| ThawError::from(e).context(format!("block file {}", resp.local_path)))?;
            self.block = Some((file, 0));
        }
        let (_, in_block) = self.block.as_ref().expect("opened above");
        Ok(self.block_size - in_block)
    }

    /// Counts `n` bytes written into the open block; commits it when full.
    async fn advance(&mut self, n: u64) -> Result<()> {
        let (_, in_block) = self.block.as_mut().expect("a block is open");
        *in_block += n;
        self.written += n;
        if *in_block == self.block_size {
            self.commit().await?;
        }
        Ok(())
    }

    /// Closes the open block's file and has the worker commit it.
    async fn commit(&mut self) -> Result<()> {
        if let Some((file, n)) = self.block.take() {
            drop(file);
            let resp = self.step(local_write_step::Step::CommitLength(n)).await?;
            if resp.length != n {
                return Err(ThawError::internal(format!(
                    "worker {} committed {} of {n} bytes",
                    self.addr, resp.length
                )));
            }
        }
        Ok(())
    }

    pub async fn write(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let k = (self.room().await? as usize).min(data.len());
            let (file, _) = self.block.as_mut().expect("opened by room");
            let mut out: &File = file;
            blocking(|| std::io::Write::write_all(&mut out, &data[..k])).map_err(|e| self.full(e.into()))?;
            data = &data[k..];
            self.advance(k as u64).await?;
        }
        Ok(())
    }

    /// Copies `len` bytes at `offset` of `src` into the file, in the kernel.
    /// Returns the bytes copied: fewer only if `src` ends first.
    pub async fn write_from(&mut self, src: &File, offset: u64, len: u64) -> Result<u64> {
        let mut done = 0u64;
        while done < len {
            let k = self.room().await?.min(len - done);
            let (file, _) = self.block.as_ref().expect("opened by room");
            let n = blocking(|| copy_range(src, offset + done, k, file)).map_err(|e| self.full(e.into()))?;
            done += n;
            self.advance(n).await?;
            if n < k {
                break;
            }
        }
        Ok(done)
    }

    /// Sends `data` for the under-store copy only (data protocol version 2): a
    /// cache-through file whose later blocks other workers store. Not
    /// answered: an error shows at the finish.
    pub async fn ufs_only(&mut self, data: &[u8]) -> Result<()> {
        use tokio::io::AsyncWriteExt;
        self.commit().await?;
        let addr = self.addr.clone();
        let sent = async {
            for part in data.chunks(frame::MAX_CHUNK_BYTES) {
                let step = LocalWriteStep { step: Some(local_write_step::Step::UfsBytes(part.len() as u64)) };
                frame::write_msg(&mut self.sock, &step).await?;
                self.sock.write_all(part).await?;
            }
            self.sock.flush().await
        };
        if let Err(e) = sent.await {
            // The worker may have said why it ended the exchange.
            let reason = tokio::time::timeout(
                std::time::Duration::from_secs(2),
                frame::read_msg::<_, DataResponse>(&mut self.sock),
            )
            .await;
            if let Ok(Ok(Some(resp))) = reason
                && let Err(why) = frame::check_response(resp)
            {
                return Err(why.context(format!("worker {addr}")));
            }
            return Err(ThawError::from(e).context(format!("worker {addr}")));
        }
        self.written += data.len() as u64;
        Ok(())
    }

    /// Commits the last block and ends the write; the worker's count of bytes stored.
    /// Commits the open block and ends the exchange; the connection, clean
    /// again, goes back to `pool` for the next request.
    pub async fn finish(mut self, pool: &crate::data::Pool) -> Result<u64> {
        self.commit().await?;
        let total = self.written;
        let resp = self.step(local_write_step::Step::Finish(total)).await?;
        pool.put(&self.addr, self.sock);
        Ok(resp.length)
    }
}

/// Whether this process may create files in directory `dir`.
fn writable(dir: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(dir) else { return false };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

//! Reading a file: block by block, each from the best replica by locality level;
//! a local replica is mapped (short-circuit), a remote one streamed. If a replica
//! fails, even mid-block, the read goes on from the same byte at the next replica,
//! then through the under-store via a live worker; only when nothing can serve a
//! block does it fail, with `DataLost` if no copy exists any more.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use thaw_common::proto::*;
use thaw_common::tls::DataStream;
use thaw_common::{ErrorKind, Result, ThawError};
use tokio::io::AsyncReadExt;

use crate::Client;
use crate::data::request;

/// Bytes read, by where they came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Read from a local replica's file.
    pub short_circuit: u64,
    pub remote_mem: u64,
    pub remote_disk: u64,
    /// Came from the under-store during this read (streamed through a worker, or
    /// filled into a local worker's tier and read from there).
    pub under_store: u64,
    /// Replicas given up on during this read (fail-overs).
    pub failovers: u64,
}

enum Source {
    /// A replica on this host: the block file itself, read with pread (the same
    /// system call as reading any local file, no copy through the worker).
    /// `filled`: the worker filled it from the under-store for this read.
    Local {
        index: usize,
        file: std::fs::File,
        len: u64,
        tier: Tier,
        filled: bool,
    },
    Stream {
        index: usize,
        sock: DataStream,
        pos: u64,
        end: u64,
        addr: String,
        kind: StreamKind,
    },
}

#[derive(Clone, Copy)]
enum StreamKind {
    Mem,
    Disk,
    UnderStore,
}

/// A block whose file is on this host (see [`FileReader::local_block`]).
#[derive(Debug)]
pub struct LocalBlock {
    pub file: std::fs::File,
    /// Where the block starts in the file.
    pub offset: u64,
    pub length: u64,
}

pub struct FileReader {
    client: Client,
    info: FileInfo,
    ufs_workers: Vec<WorkerInfo>,
    pos: u64,
    source: Option<Source>,
    /// Worker addresses that failed us since the last refresh from the master.
    failed: HashSet<String>,
    /// Workers on this host that refused a short-circuit open of a DISK block
    /// (their disk is an emulated device, read through the worker): their DISK
    /// replicas are streamed without asking again.
    stream_disk: HashSet<String>,
    /// Blocks whose fill a worker of this host turned down (its cache policy
    /// dropped it, or the job's caching probability left it out): read
    /// without asking again, so one read meets one decision.
    refused: HashSet<usize>,
    stats: ReadStats,
    /// The next block's stream, opened while the current one is read (read-ahead),
    /// so block boundaries cost no round trip and the worker never idles.
    ahead: Option<(usize, tokio::task::JoinHandle<Result<Source>>)>,
    /// Where the current positional read ends, unless it continues the previous
    /// read (a sequential reader): streams then ask for exactly its bytes and
    /// nothing past it is read ahead, as HDFS's pread. A map task reading one
    /// block of a file must not make the worker read (and a disk serve, and the
    /// master count as read) the next one.
    range_end: Option<u64>,
    /// Where the last read ended.
    last_end: Option<u64>,
}

const REFRESH_PAUSE: Duration = Duration::from_millis(200);

impl FileReader {
    pub(crate) async fn open(client: Client, path: &str) -> Result<Self> {
        let (mut info, mut ufs_workers) = client.stat_blocks(path, true).await?;
        if info.lost && info.lineage_id != 0 && !client.config().rebuild_wait.is_zero() {
            // Reactive recomputation (Tachyon, section 2.6): the reader waits for it.
            client.wait_rebuilt(&info.path, client.config().rebuild_wait).await?;
            (info, ufs_workers) = client.stat_blocks(path, true).await?;
        }
        if info.is_dir {
            return Err(ThawError::is_dir(format!("{} is a directory", info.path)));
        }
        if !info.complete {
            return Err(ThawError::precondition(format!(
                "{} is incomplete: it is still being written, or its writer failed",
                info.path
            )));
        }
        Ok(FileReader {
            client,
            info,
            ufs_workers,
            pos: 0,
            source: None,
            failed: HashSet::new(),
            stream_disk: HashSet::new(),
            refused: HashSet::new(),
            stats: ReadStats::default(),
            ahead: None,
            range_end: None,
            last_end: None,
        })
    }

    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    pub fn len(&self) -> u64 {
        self.info.length
    }

    pub fn is_empty(&self) -> bool {
        self.info.length == 0
    }

    pub fn position(&self) -> u64 {
        self.pos
    }

    pub fn stats(&self) -> ReadStats {
        self.stats
    }

    /// Drops the open stream or local file and any read-ahead, keeping the
    /// position: the next read opens them again (Hadoop's `unbuffer`, for a
    /// reader kept open but idle, as an engine's input-stream cache does).
    pub fn unbuffer(&mut self) {
        self.source = None;
        if let Some((_, task)) = self.ahead.take() {
            task.abort();
        }
        self.last_end = None;
    }

    /// Moves the read position (past the end is allowed: reads then return 0).
    pub fn seek(&mut self, pos: u64) {
        if pos != self.pos {
            if let Some(Source::Stream { .. }) = self.source {
                self.source = None;
            }
            if let Some((_, task)) = self.ahead.take() {
                task.abort();
            }
            self.pos = pos;
        }
    }

    /// Reads up to `buf.len()` bytes at the current position; 0 at the end.
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let n = self.read_some(buf).await?;
        self.last_end = Some(self.pos);
        Ok(n)
    }

    async fn read_some(&mut self, buf: &mut [u8]) -> Result<usize> {
        if self.pos >= self.info.length || buf.is_empty() {
            return Ok(0);
        }
        let index = (self.pos / self.info.block_size) as usize;
        loop {
            match self.source.as_mut() {
                Some(Source::Local { index: i, file, len, tier, filled }) if *i == index => {
                    let at = self.pos - self.info.blocks[index].offset;
                    let want = buf.len().min((*len - at) as usize);
                    let n = read_local(file, *tier, &mut buf[..want], at)?;
                    if n == 0 {
                        return Err(ThawError::internal(format!("local block file ended early at {at} of {len}")));
                    }
                    self.pos += n as u64;
                    if *filled {
                        self.stats.under_store += n as u64;
                    } else {
                        self.stats.short_circuit += n as u64;
                    }
                    return Ok(n);
                }
                Some(Source::Stream { index: i, sock, pos, end, addr, kind }) if *i == index && *pos == self.pos => {
                    let want = buf.len().min((*end - *pos) as usize);
                    let io = tokio::time::timeout(crate::data::RESPONSE_TIMEOUT, sock.read(&mut buf[..want])).await;
                    match io.unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())) {
                        Ok(n) if n > 0 => {
                            *pos += n as u64;
                            self.pos += n as u64;
                            match kind {
                                StreamKind::Mem => self.stats.remote_mem += n as u64,
                                StreamKind::Disk => self.stats.remote_disk += n as u64,
                                StreamKind::UnderStore => self.stats.under_store += n as u64,
                            }
                            if *pos == *end
                                && let Some(Source::Stream { sock, addr, .. }) = self.source.take()
                            {
                                // The block is done and the connection clean: reuse it.
                                self.client.pool().put(&addr, sock);
                            }
                            return Ok(n);
                        }
                        other => {
                            // The worker died or cut the stream: go on elsewhere.
                            tracing::warn!(worker = %addr, at = self.pos, error = ?other.err(), "replica failed mid-read; failing over");
                            self.failed.insert(addr.clone());
                            self.stats.failovers += 1;
                            self.source = None;
                        }
                    }
                }
                _ => self.enter_block(index).await?,
            }
        }
    }

    /// Reads at `pos` from a MEM block file on this host that the reader
    /// has open already, now, without waiting on anything (a `pread` of a
    /// tmpfs file): for a caller that cannot yield, as a JNI call reading
    /// straight into a pinned Java array. At most to the block's end. `None`
    /// when the block at `pos` is not such a file (read the usual way then).
    pub fn read_mem_now(&mut self, pos: u64, buf: &mut [u8]) -> Option<Result<usize>> {
        let index = (pos / self.info.block_size.max(1)) as usize;
        let block_offset = self.info.blocks.get(index)?.offset;
        let Some(Source::Local { index: i, file, len, tier: Tier::Mem, filled: false }) = &self.source else {
            return None;
        };
        if *i != index || pos >= self.info.length || buf.is_empty() {
            return None;
        }
        let at = pos - block_offset;
        let want = buf.len().min((*len - at) as usize);
        let n = match read_local(file, Tier::Mem, &mut buf[..want], at) {
            Ok(0) => return Some(Err(ThawError::internal(format!("local block file ended early at {at} of {len}")))),
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        self.pos = pos + n as u64;
        self.last_end = Some(self.pos);
        self.stats.short_circuit += n as u64;
        Some(Ok(n))
    }

    /// The bytes of `block` a ranged read wants from the current position (0: a
    /// sequential read takes the rest of the block).
    fn range_length(&self, block: &BlockInfo) -> u64 {
        match self.range_end {
            Some(end) => end.min(block.offset + block.length).saturating_sub(self.pos),
            None => 0,
        }
    }

    /// Opens the source of block `index` at the current position.
    async fn enter_block(&mut self, index: usize) -> Result<()> {
        let src = match self.take_ahead(index).await {
            Some(src) => src,
            None => self.open_source(index).await?,
        };
        // Entering a block at its first byte is what a sequential read looks like;
        // a random read must not start streams or fills of blocks nobody asked for,
        // nor a ranged read of blocks past its end.
        let next = self.info.blocks.get(index + 1).map(|b| b.offset);
        let wanted = next.is_some_and(|n| self.range_end.is_none_or(|end| end > n));
        let sequential = self.pos == self.info.blocks[index].offset || self.last_end == Some(self.pos);
        if wanted && sequential {
            self.read_ahead(index + 1);
        }
        self.source = Some(src);
        Ok(())
    }

    /// The local block file holding byte `offset`, when the block is (or, for a
    /// cold persisted block, has just been filled) on this host: callers map it
    /// for zero-copy reads, and count what they take from it themselves (it is
    /// not in [`ReadStats`]). `None` when the block can only be streamed. Moves
    /// the read position to `offset`.
    pub async fn local_block(&mut self, offset: u64) -> Result<Option<LocalBlock>> {
        if offset >= self.info.length {
            return Ok(None);
        }
        self.seek(offset);
        let index = (offset / self.info.block_size) as usize;
        let current = match &self.source {
            Some(Source::Local { index: i, .. }) => *i == index,
            Some(Source::Stream { index: i, pos, .. }) => *i == index && *pos == offset,
            None => false,
        };
        if !current {
            // A mapping takes this block only: nothing to read ahead.
            let block = &self.info.blocks[index];
            self.range_end = Some(block.offset + block.length);
            let entered = self.enter_block(index).await;
            self.range_end = None;
            entered?;
        }
        match &self.source {
            Some(Source::Local { file, len, .. }) => {
                Ok(Some(LocalBlock { file: file.try_clone()?, offset: self.info.blocks[index].offset, length: *len }))
            }
            _ => Ok(None),
        }
    }

    /// Copies up to `max` bytes from the read position into `dst` (at `dst`'s own
    /// position); returns the bytes copied, 0 at the end of the file. A block on
    /// this host goes from its file to `dst` in the kernel ([`crate::copy`]);
    /// a streamed one through a buffer.
    pub async fn copy_to(&mut self, dst: &std::fs::File, max: u64) -> Result<u64> {
        let end = self.info.length.min(self.pos.saturating_add(max));
        let mut buf = Vec::new();
        let mut total = 0u64;
        while self.pos < end {
            let index = (self.pos / self.info.block_size) as usize;
            let current = match &self.source {
                Some(Source::Local { index: i, .. }) => *i == index,
                Some(Source::Stream { index: i, pos, .. }) => *i == index && *pos == self.pos,
                None => false,
            };
            if !current {
                // A copy reads on to the end: a stream takes the rest of its block.
                self.enter_block(index).await?;
            }
            if let Some(Source::Local { file, len, filled, .. }) = &self.source {
                let at = self.pos - self.info.blocks[index].offset;
                let want = (*len - at).min(end - self.pos);
                let n = crate::copy::blocking(|| crate::copy::copy_range(file, at, want, dst))?;
                if n < want {
                    return Err(ThawError::internal(format!("local block file ended early at {} of {len}", at + n)));
                }
                if *filled {
                    self.stats.under_store += n;
                } else {
                    self.stats.short_circuit += n;
                }
                self.pos += n;
                total += n;
                continue;
            }
            if buf.is_empty() {
                buf = vec![0u8; (4 << 20).min((end - self.pos) as usize)];
            }
            let want = buf.len().min((end - self.pos) as usize);
            let n = self.read_some(&mut buf[..want]).await?;
            if n == 0 {
                break;
            }
            let mut out = dst;
            crate::copy::blocking(|| std::io::Write::write_all(&mut out, &buf[..n]))?;
            total += n as u64;
        }
        self.last_end = Some(self.pos);
        Ok(total)
    }

    /// Reads until `buf` is full or the file ends; returns the bytes read.
    pub async fn read_exact_or_eof(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read(&mut buf[done..]).await?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done)
    }

    /// Reads `buf.len()` bytes (fewer at the end) at `offset`. A read that does
    /// not continue the previous one is ranged: it reads exactly its bytes.
    pub async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let sequential = self.last_end == Some(offset);
        self.seek(offset);
        self.range_end = (!sequential).then_some(offset + buf.len() as u64);
        let index = (offset / self.info.block_size.max(1)) as usize;
        if sequential && index + 1 < self.info.blocks.len() {
            // A sequential reader reading on inside a block: the next one next.
            self.read_ahead(index + 1);
        }
        let r = self.read_exact_or_eof(buf).await;
        self.range_end = None;
        r
    }

    pub async fn read_to_end(&mut self, out: &mut Vec<u8>) -> Result<usize> {
        let start = out.len();
        let rest = self.info.length.saturating_sub(self.pos) as usize;
        out.resize(start + rest, 0);
        let n = self.read_exact_or_eof(&mut out[start..]).await?;
        out.truncate(start + n);
        Ok(n)
    }

    /// The read-ahead stream for block `index`, if one was opened and the read is at
    /// that block's start.
    async fn take_ahead(&mut self, index: usize) -> Option<Source> {
        let (i, task) = self.ahead.take()?;
        if i != index || self.pos != self.info.blocks[index].offset {
            task.abort();
            return None;
        }
        match task.await {
            Ok(Ok(src)) => Some(src),
            Ok(Err(e)) if refused(&e) => {
                self.refused.insert(index);
                None
            }
            _ => None, // the normal path, with fail-over, takes it from here
        }
    }

    /// Starts opening block `index` from its first byte at the replica the normal
    /// path would try first (a remote one; local replicas need no read-ahead).
    fn read_ahead(&mut self, index: usize) {
        if self.ahead.as_ref().is_some_and(|(i, _)| *i == index) {
            return;
        }
        if let Some((_, task)) = self.ahead.take() {
            task.abort();
        }
        let Some(block) = self.info.blocks.get(index).cloned() else { return };
        let remote = block.replicas.iter().find(|r| !self.failed.contains(&r.data_address));
        let (addr, ufs, kind) = match remote {
            Some(r) if self.short_circuit(r) => return,
            Some(r) => {
                let kind = if r.tier == Tier::Mem as i32 { StreamKind::Mem } else { StreamKind::Disk };
                (r.data_address.clone(), None, kind)
            }
            None if self.info.persisted => {
                let ufs = UfsSource { path: self.info.path.clone(), offset: block.offset, length: block.length };
                if let Some((addr, tier)) = self.local_filler(index) {
                    let (client, grant) = (self.client.clone(), self.info.access.clone());
                    let task = tokio::spawn(async move {
                        cache_then_open(&client, &addr, (&block, grant.as_ref()), index, ufs, tier).await
                    });
                    self.ahead = Some((index, task));
                    return;
                }
                let Some(w) = self.ufs_workers.iter().find(|w| !self.failed.contains(&w.data_address)) else { return };
                (w.data_address.clone(), Some(ufs), StreamKind::UnderStore)
            }
            None => return,
        };
        let (client, grant) = (self.client.clone(), self.info.access.clone());
        let task = tokio::spawn(async move {
            open_stream(&client, &addr, (&block, grant.as_ref()), index, (0, 0, true), ufs, kind).await
        });
        self.ahead = Some((index, task));
    }

    /// A worker on this host that can fill cold block `index` for short-circuit
    /// reads, and the tier to fill (when short-circuit and caching on read are
    /// both on). With several workers on the host, blocks spread over them by id,
    /// so one worker's memory does not take every cold block.
    fn local_filler(&self, index: usize) -> Option<(String, Tier)> {
        let cfg = self.client.config();
        let tier = cfg.cache_on_read?;
        if !cfg.short_circuit || cfg.position.host.is_empty() {
            return None;
        }
        let here: Vec<&WorkerInfo> = self
            .ufs_workers
            .iter()
            .filter(|w| w.host == cfg.position.host && !self.failed.contains(&w.data_address))
            .filter(|w| !(tier == Tier::Disk && self.stream_disk.contains(&w.data_address)))
            .collect();
        let block_id = self.info.blocks.get(index)?.block_id;
        // File id plus block index: neighbouring blocks, and single-block files,
        // land on different workers.
        let spread = (block_id >> 24).wrapping_add(block_id & 0xFF_FFFF);
        let w = here.get((spread % here.len().max(1) as u64) as usize)?;
        Some((w.data_address.clone(), tier))
    }

    /// Whether replica `r` is read from its file here (short-circuit).
    fn short_circuit(&self, r: &BlockReplica) -> bool {
        let cfg = self.client.config();
        cfg.short_circuit
            && !cfg.position.host.is_empty()
            && r.host == cfg.position.host
            && !(r.tier == Tier::Disk as i32 && self.stream_disk.contains(&r.data_address))
    }

    /// Opens the best working source for block `index` at the current position.
    async fn open_source(&mut self, index: usize) -> Result<Source> {
        let deadline = Instant::now() + self.client.config().retry_for;
        loop {
            let block = self.info.blocks[index].clone();
            let grant = self.info.access.clone();
            let b = (&block, grant.as_ref());
            let offset = self.pos - block.offset;
            let mut last_err = None;
            for r in &block.replicas {
                if self.failed.contains(&r.data_address) {
                    continue;
                }
                if self.short_circuit(r) {
                    match open_local(&self.client, &r.data_address, b, index).await {
                        Ok(src) => return Ok(src),
                        Err(e) => {
                            if e.kind == ErrorKind::FailedPrecondition && r.tier == Tier::Disk as i32 {
                                self.stream_disk.insert(r.data_address.clone());
                            }
                            tracing::debug!(worker = %r.data_address, error = %e, "short-circuit failed; streaming")
                        }
                    }
                }
                let kind = if r.tier == Tier::Mem as i32 { StreamKind::Mem } else { StreamKind::Disk };
                let length = self.range_length(&block);
                let at = (offset, length, true);
                match open_stream(&self.client, &r.data_address, b, index, at, None, kind).await {
                    Ok(src) => return Ok(src),
                    Err(e) => {
                        tracing::debug!(worker = %r.data_address, error = %e, "replica unavailable");
                        self.failed.insert(r.data_address.clone());
                        self.stats.failovers += 1;
                        last_err = Some(e);
                    }
                }
            }
            if self.info.persisted {
                let ufs = UfsSource { path: self.info.path.clone(), offset: block.offset, length: block.length };
                // A local fill the worker turned down (the cache policy
                // dropped it, or the job's caching probability left it out)
                // is not asked for again by the stream: one read, one decision.
                let mut cache = !self.refused.contains(&index);
                if let Some((addr, tier)) = self.local_filler(index) {
                    if cache {
                        match cache_then_open(&self.client, &addr, b, index, ufs.clone(), tier).await {
                            Ok(src) => return Ok(src),
                            Err(e) => {
                                tracing::debug!(worker = %addr, error = %e, "local fill failed; streaming");
                                cache = !refused(&e);
                            }
                        }
                    }
                    if !cache {
                        // Streamed by the worker that turned the fill down: the
                        // same spread over the host's workers (and their
                        // under-store streams) as fills, not all on the first.
                        let (at, kind) = ((offset, 0, false), StreamKind::UnderStore);
                        match open_stream(&self.client, &addr, b, index, at, Some(ufs.clone()), kind).await {
                            Ok(src) => return Ok(src),
                            Err(e) if e.kind == ErrorKind::DataLost => return Err(e),
                            Err(e) => tracing::debug!(worker = %addr, error = %e, "local stream failed"),
                        }
                    }
                }
                for w in self.ufs_workers.clone() {
                    if self.failed.contains(&w.data_address) {
                        continue;
                    }
                    // Whole rest of the block: a read from its start fills the cache.
                    let source = Some(ufs.clone());
                    let kind = StreamKind::UnderStore;
                    let at = (offset, 0, cache);
                    match open_stream(&self.client, &w.data_address, b, index, at, source, kind).await {
                        Ok(src) => return Ok(src),
                        Err(e) if e.kind == ErrorKind::DataLost => return Err(e),
                        Err(e) => {
                            self.failed.insert(w.data_address.clone());
                            last_err = Some(e);
                        }
                    }
                }
            }
            if block.replicas.is_empty()
                && !self.info.persisted
                && self.info.lost
                && self.info.lineage_id != 0
                && !self.client.config().rebuild_wait.is_zero()
            {
                // Lost mid-read: wait for its rebuild, then go on from the same byte.
                self.client.wait_rebuilt(&self.info.path, self.client.config().rebuild_wait).await?;
                self.refresh().await?;
                continue;
            }
            // Lost as the master says: right after its restart it does not
            // say so, and the read waits for the workers to re-register.
            if block.replicas.is_empty() && !self.info.persisted && self.info.lost {
                return Err(ThawError::data_lost(format!(
                    "block {index} of {} is lost: no live worker holds it and the file was never persisted (write type {})",
                    self.info.path,
                    crate::json::write_type_name(self.info.write_type())
                )));
            }
            if Instant::now() >= deadline {
                let why = last_err.map(|e| e.message).unwrap_or_else(|| "no worker could serve it".into());
                return Err(ThawError::unavailable(format!(
                    "block {index} of {} could not be read within {:?}: {why}",
                    self.info.path,
                    self.client.config().retry_for
                )));
            }
            tokio::time::sleep(REFRESH_PAUSE).await;
            self.refresh().await?;
        }
    }

    /// Asks the master again where the blocks are (dead workers drop out).
    async fn refresh(&mut self) -> Result<()> {
        let (info, workers) = self.client.stat_blocks(&self.info.path, true).await?;
        if info.file_id != self.info.file_id {
            return Err(ThawError::precondition(format!("{} was replaced while being read", self.info.path)));
        }
        self.info = info;
        self.ufs_workers = workers;
        self.failed.clear();
        Ok(())
    }
}

impl Drop for FileReader {
    fn drop(&mut self) {
        if let Some((_, task)) = self.ahead.take() {
            task.abort();
        }
    }
}

/// The master's grant to read a file (on a cluster with a secret).
type Grant<'a> = Option<&'a SignedAccess>;

/// Opens a block stored on a worker of this host, to read its file directly.
async fn open_local(
    client: &Client,
    addr: &str,
    (block, grant): (&BlockInfo, Grant<'_>),
    index: usize,
) -> Result<Source> {
    let job = &client.config().job_id;
    let req = request(job, grant, data_request::Request::OpenLocal(OpenLocalBlockRequest { block_id: block.block_id }));
    let (sock, resp) = client.pool().call(addr, &req).await?;
    client.pool().put(addr, sock);
    let file = std::fs::File::open(&resp.local_path)?;
    // In use while this reader holds it: the worker does not evict it.
    thaw_common::filelock::share(&file, true);
    let len = file.metadata()?.len();
    if len != block.length {
        return Err(ThawError::internal(format!("local block file has {len} bytes, expected {}", block.length)));
    }
    let tier = Tier::try_from(resp.source_tier).unwrap_or(Tier::Disk);
    Ok(Source::Local { index, file, len, tier, filled: false })
}

/// A worker turned a fill down on purpose (not a failure to retry elsewhere).
fn refused(e: &ThawError) -> bool {
    matches!(e.kind, ErrorKind::ResourceExhausted | ErrorKind::FailedPrecondition)
}

/// A cold block read by a client on a worker's host: the worker fills the block
/// into its tier from the under-store, then the client reads the block file
/// itself. Two copies per byte (kernel into the tier, tier into the reader)
/// instead of four through a socket.
async fn cache_then_open(
    client: &Client,
    addr: &str,
    (block, grant): (&BlockInfo, Grant<'_>),
    index: usize,
    ufs: UfsSource,
    tier: Tier,
) -> Result<Source> {
    let cache = CacheBlockRequest { block_id: block.block_id, ufs: Some(ufs), tier: tier as i32 };
    let req = request(&client.config().job_id, grant, data_request::Request::CacheBlock(cache));
    let (sock, _) = client.pool().call(addr, &req).await?;
    client.pool().put(addr, sock);
    match open_local(client, addr, (block, grant), index).await? {
        Source::Local { index, file, len, tier, .. } => Ok(Source::Local { index, file, len, tier, filled: true }),
        other => Ok(other),
    }
}

/// Reads a local block file at `at`. A MEM block is a tmpfs file: the read is a
/// memory copy and cannot stall. A DISK block may wait on the device, so on a
/// multi-threaded runtime the read moves off the async worker thread.
fn read_local(file: &std::fs::File, tier: Tier, buf: &mut [u8], at: u64) -> Result<usize> {
    use std::os::unix::fs::FileExt;
    let n = if tier == Tier::Disk { crate::copy::blocking(|| file.read_at(buf, at))? } else { file.read_at(buf, at)? };
    Ok(n)
}

/// Opens a stream of block `index` at worker `addr` (from a tier, or through
/// from the under-store when `ufs` is given): `at` is (offset within the
/// block, length (0: to its end), whether a read through may cache it).
async fn open_stream(
    client: &Client,
    addr: &str,
    (block, grant): (&BlockInfo, Grant<'_>),
    index: usize,
    at: (u64, u64, bool),
    ufs: Option<UfsSource>,
    kind: StreamKind,
) -> Result<Source> {
    let cfg = client.config();
    let (offset, length, cache) = at;
    let read = ReadBlockRequest {
        block_id: block.block_id,
        offset,
        length,
        ufs,
        cache_tier: cfg.cache_on_read.filter(|_| cache).map(|t| t as i32).unwrap_or(0),
    };
    let want = if length == 0 { block.length - offset } else { length.min(block.length - offset) };
    let (sock, resp) =
        client.pool().call(addr, &request(&cfg.job_id, grant, data_request::Request::ReadBlock(read))).await?;
    if resp.length != want {
        return Err(ThawError::internal(format!(
            "worker {addr} offers {} bytes of block {}, expected {want}",
            resp.length, block.block_id,
        )));
    }
    let kind = if resp.from_ufs {
        StreamKind::UnderStore
    } else if resp.source_tier == Tier::Mem as i32 {
        StreamKind::Mem
    } else if resp.source_tier == Tier::Disk as i32 {
        StreamKind::Disk
    } else {
        kind
    };
    Ok(Source::Stream {
        index,
        sock,
        pos: block.offset + offset,
        end: block.offset + offset + want,
        addr: addr.to_string(),
        kind,
    })
}

//! Writing a file: the master picks the worker(s) by write type and locality, the
//! bytes stream straight to them (or, to a worker on this host, go into its
//! block files directly: [`crate::local_write`]), and `close` completes the
//! file at the master once every worker has stored its part. A failed write
//! deletes the partial file. Until then the unfinished file is this client's
//! under a writer lease, renewed in the background ([`LeaseRenewer`]): a
//! writer killed mid-write stops renewing, and the master deletes its file.
//!
//! A memory write (must-cache, async-through, cache-through) goes in
//! segments: the master hands out a run of whole blocks on one worker at a
//! time (the writer's own worker while it has room, then others by free
//! memory), and the writer asks for the next when it has filled one, so a
//! file of unknown length spreads over as many workers as its size needs
//! (see the master's `placement` module for why it is asked for this way). A
//! next segment on the same worker just goes on in the same stream; one on
//! another worker ends this one (its blocks committed) and opens a new one
//! from that block on (data protocol version 2). A cache-through file's
//! under-store copy is one sequential write: the first segment's stream
//! writes it whole, taking the bytes of the later segments for the
//! under-store only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::try_join_all;
use thaw_common::frame;
use thaw_common::proto::*;
use thaw_common::tls::DataStream;
use thaw_common::write_type;
use thaw_common::{Result, ThawError};

use thaw_proto::DATA_PROTOCOL_SEGMENTS;

use crate::Client;
use crate::data::request;
use crate::local_write::LocalSink;

/// Bytes per chunk on the wire.
const CHUNK: usize = 4 << 20;

#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub write_type: WriteType,
    /// 0: the master's default.
    pub block_size: u64,
    /// Copies, for `WriteType::ReplicatedDisk`.
    pub replication: u32,
    /// Create missing parent directories.
    pub recursive: bool,
    /// Replace an existing file.
    pub overwrite: bool,
    /// Never checkpoint it unless asked (async-through only): intermediate data.
    pub temporary: bool,
    /// Permission bits (none: 0644).
    pub mode: Option<u32>,
    /// The file's length, when known before writing. A must-cache or
    /// async-through write of a known length gets all the memory it needs at
    /// create, or fails then, before a byte is sent; one of length 0 gets no
    /// worker and no memory at all (and may write no bytes).
    pub length: Option<u64>,
    /// With `recursive`: make missing parents only under this directory,
    /// which must exist (an S3 PUT makes a key's directories, never its bucket).
    pub recursive_under: Option<String>,
    /// When the path names a file already: write the new one here, and move
    /// it onto the path (replacing the old one in one step) when it closes.
    pub stage_at: Option<String>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            write_type: WriteType::CacheThrough,
            block_size: 0,
            replication: 1,
            recursive: true,
            overwrite: false,
            temporary: false,
            mode: None,
            length: None,
            recursive_under: None,
            stage_at: None,
        }
    }
}

impl WriteOptions {
    pub fn of(write_type: WriteType) -> Self {
        WriteOptions { write_type, ..Default::default() }
    }
}

/// A write type by its name (`must-cache`, `async-through`, `cache-through`,
/// `through`, `replicated:N`) and the copies it asks for.
pub fn parse_write_type(s: &str) -> Result<(WriteType, u32)> {
    if let Some(m) = write_type::WRITE_TYPES.iter().find(|m| !m.replicated && m.label == s) {
        return Ok((m.write_type, 1));
    }
    match s.strip_prefix("replicated:").map(str::parse::<u32>) {
        Some(Ok(n)) if n >= 1 => Ok((WriteType::ReplicatedDisk, n)),
        _ => Err(ThawError::invalid(format!(
            "unknown write type {s:?}: expected must-cache, async-through, cache-through, through or replicated:N"
        ))),
    }
}

/// Renews this client's lease on one unfinished file every third of the
/// lease, until the write ends (the task stops when this is dropped). A
/// renewal the master refuses (the lease ran out while this process was
/// paused or cut off, and the file was deleted) marks the write as lost.
struct LeaseRenewer {
    task: tokio::task::JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl LeaseRenewer {
    fn start(client: Client, file_id: u64, lease: Duration) -> Self {
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let task = tokio::spawn(async move {
            let mut lease = lease;
            let mut wait = lease / 3;
            loop {
                tokio::time::sleep(wait).await;
                let req = RenewWriterLeaseRequest { writer: client.writer_name().to_string(), file_ids: vec![file_id] };
                match client.master().renew_writer_lease(req).await {
                    Ok(r) => {
                        let r = r.into_inner();
                        if r.lost.contains(&file_id) {
                            tracing::warn!(file_id, "the master no longer holds this write's lease: the write is lost");
                            flag.store(true, Ordering::Relaxed);
                            return;
                        }
                        if r.lease_ms > 0 {
                            lease = Duration::from_millis(r.lease_ms);
                        }
                        wait = lease / 3;
                    }
                    // The master may be restarting: try again soon, within the lease.
                    Err(s) => {
                        tracing::debug!(file_id, error = %s.message(), "lease renewal failed; trying again");
                        wait = (lease / 10).clamp(Duration::from_millis(50), Duration::from_secs(1));
                    }
                }
            }
        });
        LeaseRenewer { task, lost }
    }

    fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

impl Drop for LeaseRenewer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where a segment's bytes go.
enum Sink {
    /// Into the block files of a worker on this host (short-circuit).
    Local(LocalSink),
    /// Streamed to workers (several for a replicated-disk write), in chunks.
    Streams(Vec<(String, DataStream)>),
}

/// The part of the file one worker (or, replicated, several) takes.
struct Segment {
    sink: Sink,
    /// Its worker's id (0: not a segmented write).
    worker: u64,
    /// The file's byte where it starts.
    start: u64,
    /// The file's byte where the blocks set aside for it end (exclusive);
    /// `None`: it takes the rest of the file.
    end: Option<u64>,
}

/// A segmented write's state.
struct Plan {
    /// A later segment's stream request (`first_block` set per segment).
    req: WriteFileRequest,
    /// The grant to write the file (on a secured cluster).
    access: Option<SignedAccess>,
    /// A cache-through file that moved on from its first worker: that
    /// worker's stream, writing the under-store copy only now.
    carrier: Option<Sink>,
    cache_through: bool,
}

pub struct FileWriter {
    client: Client,
    info: FileInfo,
    /// Keeps the unfinished file this writer's (none for a rebuild, whose
    /// file is complete, or a master that grants no leases).
    lease: Option<LeaseRenewer>,
    /// This write rebuilds a lost file (a recomputation): never deleted on failure.
    recovery: bool,
    /// The segment being written (the whole file, but in a segmented write).
    seg: Option<Segment>,
    /// Set for a segmented memory write.
    plan: Option<Plan>,
    /// Bytes of a streamed segment not sent yet.
    buf: Vec<u8>,
    /// Bytes handed to the workers (not counting `buf`).
    written: u64,
    /// Written at a staging path, to replace this path when it completes.
    rename_to: Option<String>,
}

impl FileWriter {
    pub(crate) async fn create(client: Client, path: &str, opts: WriteOptions) -> Result<Self> {
        let req = CreateFileRequest {
            path: path.to_string(),
            write_type: opts.write_type as i32,
            block_size: opts.block_size,
            replication: opts.replication,
            recursive: opts.recursive,
            client: Some(client.config().position.clone()),
            overwrite: opts.overwrite,
            temporary: opts.temporary,
            recover_lineage: client.config().recover_lineage,
            writer: client.writer_name().to_string(),
            mode: opts.mode,
            segments: true,
            next_segment: None,
            length: opts.length.unwrap_or(0),
            length_known: opts.length.is_some(),
            recursive_under: opts.recursive_under.clone().unwrap_or_default(),
            stage_at: opts.stage_at.clone().unwrap_or_default(),
        };
        let resp = client.master().create_file(req).await.map_err(|s| client.rpc_err(s))?.into_inner();
        let info = resp.info.ok_or_else(|| ThawError::internal("create answer without info"))?;
        let recovery = resp.recovery;
        let access = resp.access.clone();
        let lease = (resp.writer_lease_ms > 0)
            .then(|| LeaseRenewer::start(client.clone(), info.file_id, Duration::from_millis(resp.writer_lease_ms)));
        // The write type the master recorded for the file (the one asked
        // for, or, for a rebuild, the one it was first written with), and
        // the tier and under-store copy it means: the same table row the
        // master placed the workers by (its answer names no tier).
        let meaning = write_type::known(info.write_type())?;
        let tier = meaning.tier.unwrap_or(Tier::Unspecified);
        let ufs_path = if meaning.writes_under_store { info.path.clone() } else { String::new() };
        // Staged (the path named a file): moved onto the path at close.
        let rename_to =
            opts.stage_at.as_ref().filter(|s| thaw_common::path::normalize(s).ok().as_ref() == Some(&info.path));
        let rename_to = rename_to.map(|_| path.to_string());
        let mut writer = FileWriter {
            client,
            info,
            rename_to,
            lease,
            recovery,
            seg: None,
            plan: None,
            buf: Vec::with_capacity(CHUNK),
            written: 0,
        };
        let req = WriteFileRequest {
            file_id: writer.info.file_id,
            block_size: writer.info.block_size,
            tier: tier as i32,
            ufs_path: ufs_path.clone(),
            // Lineage outputs keep their blocks' CRC-32s, and rebuilds are checked against them.
            checksum: recovery || writer.info.lineage_id != 0,
            first_block: 0,
            cached: false,
        };
        // A master that places memory writes in segments says how many blocks
        // the first worker takes; an older one gives it the whole file.
        let segmented = resp.segment_blocks > 0 && resp.workers.len() == 1;
        let cache_through = meaning.in_memory() && meaning.writes_under_store;
        if segmented {
            writer.plan = Some(Plan {
                req: WriteFileRequest { ufs_path: String::new(), cached: cache_through, ..req.clone() },
                access: access.clone(),
                carrier: None,
                cache_through,
            });
        }
        // The first segment of a segmented cache-through write may go on for
        // the under-store only (data protocol version 2).
        let version =
            if segmented && cache_through { DATA_PROTOCOL_SEGMENTS } else { thaw_proto::DATA_PROTOCOL_VERSION };
        let end = segmented.then(|| resp.segment_blocks.saturating_mul(writer.info.block_size));
        let worker = if segmented { resp.workers[0].id } else { 0 };
        // One worker, on this host, storing into a tier: write its block files here.
        if let [w] = resp.workers.as_slice() {
            let sink = writer.open_sink(w, req, access.as_ref(), version).await;
            let sink = match sink {
                Ok(s) => s,
                Err(e) => return Err(writer.fail(e).await),
            };
            writer.seg = Some(Segment { sink, worker, start: 0, end });
            return Ok(writer);
        }
        let job = writer.client.config().job_id.clone();
        let mut streams = Vec::new();
        for w in resp.workers {
            let opened = async {
                let mut sock = writer.client.pool().connect(&w.data_address).await?;
                frame::write_msg(
                    &mut sock,
                    &request(&job, access.as_ref(), data_request::Request::WriteFile(req.clone())),
                )
                .await?;
                Ok::<_, ThawError>(sock)
            }
            .await;
            match opened {
                Ok(sock) => streams.push((w.data_address, sock)),
                Err(e) => return Err(writer.fail(e).await),
            }
        }
        writer.seg = Some(Segment { sink: Sink::Streams(streams), worker: 0, start: 0, end: None });
        Ok(writer)
    }

    /// Opens a write of `req` to worker `w`: into its block files from here
    /// if it is on this host and stores into a tier, else a stream.
    async fn open_sink(
        &self,
        w: &WorkerInfo,
        req: WriteFileRequest,
        access: Option<&SignedAccess>,
        version: u32,
    ) -> Result<Sink> {
        let job = self.client.config().job_id.clone();
        let tier = Tier::try_from(req.tier).unwrap_or(Tier::Unspecified);
        let first_block = req.first_block;
        if self.short_circuit(w, tier) {
            let mut open = request(&job, access, data_request::Request::WriteLocal(req.clone()));
            open.version = version;
            match LocalSink::open(self.client.pool(), &w.data_address, open, self.info.block_size, first_block).await {
                Ok(sink) => return Ok(Sink::Local(sink)),
                Err(e) => {
                    tracing::debug!(worker = %w.data_address, error = %e, "short-circuit write refused; streaming")
                }
            }
        }
        let mut sock = self.client.pool().connect(&w.data_address).await?;
        let mut open = request(&job, access, data_request::Request::WriteFile(req));
        open.version = version;
        frame::write_msg(&mut sock, &open)
            .await
            .map_err(|e| ThawError::from(e).context(format!("worker {}", w.data_address)))?;
        Ok(Sink::Streams(vec![(w.data_address.clone(), sock)]))
    }

    /// Whether the write to worker `w` goes into its block files from here.
    fn short_circuit(&self, w: &WorkerInfo, tier: Tier) -> bool {
        let cfg = self.client.config();
        cfg.short_circuit && tier != Tier::Unspecified && !cfg.position.host.is_empty() && w.host == cfg.position.host
    }

    /// Whether the bytes go into block files on this host (short-circuit).
    pub fn is_local(&self) -> bool {
        matches!(self.seg.as_ref().map(|s| &s.sink), Some(Sink::Local(_)))
    }

    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    /// Bytes accepted so far.
    pub fn written(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    /// Fails the write if the master no longer holds this writer's lease.
    async fn check_lease(&mut self) -> Result<()> {
        if self.lease.as_ref().is_some_and(LeaseRenewer::lost) {
            let e = ThawError::precondition(format!(
                "{}: the master deleted this unfinished file because its writer's lease ran out \
                 (this process was paused or cut off from the master for longer than the lease)",
                self.info.path
            ));
            return Err(self.fail(e).await);
        }
        Ok(())
    }

    fn seg(&mut self) -> &mut Segment {
        self.seg.as_mut().expect("a write in progress has a segment")
    }

    /// Bytes the current segment may still take (`u64::MAX`: no end), asking
    /// the master for the next segment if it is full.
    async fn room(&mut self) -> Result<u64> {
        let pos = self.written();
        let end = self.seg().end;
        match end {
            None => Ok(u64::MAX),
            Some(end) if end > pos => Ok(end - pos),
            Some(_) => {
                if let Err(e) = self.next_segment().await {
                    return Err(self.fail(e).await);
                }
                let end = self.seg().end.expect("segments have ends");
                Ok(end - pos)
            }
        }
    }

    pub async fn write(&mut self, mut data: &[u8]) -> Result<()> {
        self.check_lease().await?;
        // Declared empty: the master placed it nowhere.
        if !data.is_empty() && matches!(&self.seg().sink, Sink::Streams(s) if s.is_empty()) {
            let e = ThawError::invalid(format!("{}: created empty (length 0), it takes no bytes", self.info.path));
            return Err(self.fail(e).await);
        }
        while !data.is_empty() {
            let room = self.room().await?;
            let k = (room.min(data.len() as u64)) as usize;
            let (now, rest) = data.split_at(k);
            data = rest;
            let r = match &mut self.seg().sink {
                Sink::Local(sink) => Some(sink.write(now).await),
                Sink::Streams(_) => None,
            };
            match r {
                Some(r) => {
                    if let Err(e) = r.map(|_| ()) {
                        return Err(self.fail(e).await);
                    }
                    if let Err(e) = self.carry(now).await {
                        return Err(self.fail(e).await);
                    }
                    self.written += k as u64;
                }
                None => self.buffer(now).await?,
            }
        }
        Ok(())
    }

    /// Buffers a streamed segment's bytes, sending each full chunk.
    async fn buffer(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            if self.buf.is_empty() && data.len() >= CHUNK {
                let (chunk, rest) = data.split_at(CHUNK);
                self.send(chunk).await?;
                data = rest;
                continue;
            }
            let k = (CHUNK - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..k]);
            data = &data[k..];
            if self.buf.len() == CHUNK {
                self.flush().await?;
            }
        }
        Ok(())
    }

    /// Sends what is buffered.
    async fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::take(&mut self.buf);
        let r = self.send(&chunk).await;
        self.buf = chunk;
        self.buf.clear();
        r
    }

    /// Writes `len` bytes at `offset` of a local file (fewer if it ends first;
    /// returns the bytes written). A short-circuit write copies them into the
    /// block files in the kernel; a streamed one reads them through a buffer.
    pub async fn write_from_file(&mut self, src: &std::fs::File, offset: u64, len: u64) -> Result<u64> {
        self.check_lease().await?;
        use std::os::unix::fs::FileExt;
        let mut buf = Vec::new();
        let mut done = 0u64;
        while done < len {
            let room = self.room().await?;
            let carrier = self.plan.as_ref().is_some_and(|p| p.carrier.is_some());
            let k = room.min(len - done);
            let copied = match &mut self.seg().sink {
                Sink::Local(sink) if !carrier => Some(sink.write_from(src, offset + done, k).await),
                _ => None,
            };
            if let Some(copied) = copied {
                match copied {
                    Ok(n) => {
                        self.written += n;
                        done += n;
                        if n < k {
                            break;
                        }
                    }
                    Err(e) => return Err(self.fail(e).await),
                }
                continue;
            }
            // Through a buffer: a stream, or bytes the under-store copy takes too.
            if buf.is_empty() {
                buf = vec![0u8; CHUNK.min(len as usize)];
            }
            let want = ((len - done) as usize).min(buf.len());
            let n = match crate::copy::blocking(|| src.read_at(&mut buf[..want], offset + done)) {
                Ok(n) => n,
                Err(e) => return Err(self.fail(e.into()).await),
            };
            if n == 0 {
                break;
            }
            self.write(&buf[..n]).await?;
            done += n as u64;
        }
        Ok(done)
    }

    /// Hands bytes the current (short-circuit) segment took to the stream
    /// writing the under-store copy, if that is another one.
    async fn carry(&mut self, data: &[u8]) -> Result<()> {
        match self.plan.as_mut().and_then(|p| p.carrier.as_mut()) {
            Some(Sink::Local(c)) => c.ufs_only(data).await,
            Some(Sink::Streams(streams)) => {
                for part in data.chunks(CHUNK) {
                    for (addr, sock) in streams.iter_mut() {
                        frame::write_chunk(sock, part)
                            .await
                            .map_err(|e| ThawError::from(e).context(format!("worker {addr}")))?;
                    }
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    async fn send(&mut self, chunk: &[u8]) -> Result<()> {
        let Some(Segment { sink: Sink::Streams(streams), .. }) = self.seg.as_mut() else {
            unreachable!("only streamed segments buffer");
        };
        let sends = streams
            .iter_mut()
            .map(|(addr, sock)| async move { frame::write_chunk(sock, chunk).await.map_err(|e| (addr.clone(), e)) });
        if let Err((addr, e)) = try_join_all(sends).await {
            let e = self.worker_error(&addr, e).await;
            return Err(self.fail(e).await);
        }
        if let Err(e) = self.carry(chunk).await {
            return Err(self.fail(e).await);
        }
        self.written += chunk.len() as u64;
        Ok(())
    }

    /// The reason a worker gave for cutting a stream, if it sent one.
    async fn worker_error(&mut self, addr: &str, io: std::io::Error) -> ThawError {
        let mut sinks: Vec<&mut Sink> = Vec::new();
        if let Some(s) = self.seg.as_mut() {
            sinks.push(&mut s.sink);
        }
        if let Some(c) = self.plan.as_mut().and_then(|p| p.carrier.as_mut()) {
            sinks.push(c);
        }
        for sink in sinks {
            let Sink::Streams(streams) = sink else { continue };
            if let Some((_, sock)) = streams.iter_mut().find(|(a, _)| a == addr) {
                let reason =
                    tokio::time::timeout(Duration::from_secs(2), frame::read_msg::<_, DataResponse>(sock)).await;
                if let Ok(Ok(Some(resp))) = reason
                    && let Err(e) = frame::check_response(resp)
                {
                    return e.context(format!("worker {addr}"));
                }
                break;
            }
        }
        ThawError::from(io).context(format!("write to worker {addr}"))
    }

    /// The current segment is full (at a block boundary): asks the master
    /// for the next. On the same worker the segment just grows; on another,
    /// this one ends (or, for a cache-through file's first segment, goes on
    /// for the under-store only) and the next opens there.
    async fn next_segment(&mut self) -> Result<()> {
        self.flush().await?;
        let pos = self.written;
        let bs = self.info.block_size;
        let first_block = pos / bs;
        let previous = self.seg().worker;
        let req = CreateFileRequest {
            // An older master would take this for a create at the same path
            // (and refuse it); it never hands out segments, so is never asked.
            path: self.info.path.clone(),
            write_type: self.info.write_type,
            client: Some(self.client.config().position.clone()),
            recover_lineage: self.client.config().recover_lineage,
            writer: self.client.writer_name().to_string(),
            next_segment: Some(NextSegment { file_id: self.info.file_id, first_block, previous_worker: previous }),
            ..Default::default()
        };
        let resp = self.client.master().create_file(req).await.map_err(|s| self.client.rpc_err(s))?.into_inner();
        let (Some(w), true) = (resp.workers.first(), resp.segment_blocks > 0) else {
            return Err(ThawError::internal("the master placed no segment"));
        };
        let end = pos + resp.segment_blocks.saturating_mul(bs);
        if w.id == previous {
            self.seg().end = Some(end);
            return Ok(());
        }
        tracing::debug!(path = %self.info.path, first_block, worker = %w.data_address, "next segment on another worker");
        let plan = self.plan.as_mut().expect("segments are planned");
        if resp.access.is_some() {
            plan.access = resp.access.clone();
        }
        let req = WriteFileRequest { first_block, ..plan.req.clone() };
        let access = plan.access.clone();
        let old = self.seg.take().expect("a write in progress has a segment");
        let carries = self.plan.as_ref().is_some_and(|p| p.cache_through && p.carrier.is_none()) && old.start == 0;
        if carries {
            // The first segment's stream writes the under-store copy whole.
            let mut sink = old.sink;
            if let Sink::Streams(streams) = &mut sink {
                for (addr, sock) in streams.iter_mut() {
                    frame::write_store_no_more(sock)
                        .await
                        .map_err(|e| ThawError::from(e).context(format!("worker {addr}")))?;
                }
            }
            self.plan.as_mut().expect("planned").carrier = Some(sink);
        } else {
            finish_sink(self.client.pool(), old.sink, pos - old.start).await?;
        }
        let sink = self.open_sink(w, req, access.as_ref(), DATA_PROTOCOL_SEGMENTS).await?;
        self.seg = Some(Segment { sink, worker: w.id, start: pos, end: Some(end) });
        Ok(())
    }

    /// Sends what is buffered, ends the streams, and completes the file.
    pub async fn close(mut self) -> Result<FileInfo> {
        self.check_lease().await?;
        if let Err(e) = self.flush().await {
            return Err(self.fail(e).await);
        }
        let total = self.written;
        let seg = self.seg.take().expect("a write in progress has a segment");
        let carrier = self.plan.as_mut().and_then(|p| p.carrier.take());
        let ended = async {
            finish_sink(self.client.pool(), seg.sink, total - seg.start).await?;
            if let Some(c) = carrier {
                finish_sink(self.client.pool(), c, total).await?;
            }
            Ok::<_, ThawError>(())
        }
        .await;
        if let Err(e) = ended {
            return Err(self.fail(e).await);
        }
        self.complete(total).await
    }

    /// Completes the file at the master once every worker stored its part.
    async fn complete(&mut self, total: u64) -> Result<FileInfo> {
        let rename_to = self.rename_to.clone().unwrap_or_default();
        let req = CompleteFileRequest { file_id: self.info.file_id, length: total, rename_to };
        let resp = self.client.master().complete_file(req).await.map_err(|s| self.client.rpc_err(s));
        match resp {
            Ok(r) => r.into_inner().info.ok_or_else(|| ThawError::internal("complete answer without info")),
            Err(e) => Err(self.fail(e).await),
        }
    }

    /// Gives the write up: the streams are cut (workers discard what they staged)
    /// and the partial file is deleted, so nothing half-written stays visible.
    pub async fn abort(mut self) {
        self.discard().await;
    }

    /// Drops the streams and deletes the partial file; returns `e`.
    async fn fail(&mut self, e: ThawError) -> ThawError {
        self.discard().await;
        e
    }

    async fn discard(&mut self) {
        // A worker drops the open block and the committed ones when the
        // exchange ends without its finish; the master drops the blocks of
        // segments that did finish when the file is deleted.
        self.seg = None;
        self.plan = None;
        if self.recovery {
            // The file is someone else's: it stays as it was (lost).
            return;
        }
        if self.lease.as_ref().is_some_and(LeaseRenewer::lost) {
            // The master deleted it already; the path may name another file now.
            return;
        }
        // Only this write's file: the path may name another file by now.
        if let Err(d) = self.client.delete_file(&self.info.path, self.info.file_id).await {
            tracing::debug!(path = %self.info.path, error = %d, "could not delete the partial file");
        }
    }
}

/// Ends a segment's writes: each worker must have stored `length` bytes.
async fn finish_sink(pool: &crate::data::Pool, sink: Sink, length: u64) -> Result<()> {
    match sink {
        Sink::Local(sink) => {
            let addr = sink.addr.clone();
            let stored = sink.finish(pool).await?;
            if stored != length {
                return Err(ThawError::internal(format!("worker {addr} stored {stored} of {length} bytes")));
            }
            Ok(())
        }
        Sink::Streams(mut streams) => {
            let ends = streams.iter_mut().map(|(addr, sock)| async move {
                frame::write_chunk(sock, &[])
                    .await
                    .map_err(|e| ThawError::from(e).context(format!("worker {addr}")))?;
                let resp = frame::read_msg::<_, DataResponse>(sock).await?.ok_or_else(|| {
                    ThawError::unavailable(format!("worker {addr} closed the stream before confirming"))
                })?;
                let resp = frame::check_response(resp).map_err(|e| e.context(format!("worker {addr}")))?;
                if resp.length != length {
                    return Err(ThawError::internal(format!("worker {addr} stored {} of {length} bytes", resp.length)));
                }
                Ok(())
            });
            try_join_all(ends).await.map(|_| ())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_types_are_parsed_by_their_names() {
        for (s, want) in [
            ("must-cache", (WriteType::MustCache, 1)),
            ("async-through", (WriteType::AsyncThrough, 1)),
            ("cache-through", (WriteType::CacheThrough, 1)),
            ("through", (WriteType::Through, 1)),
            ("replicated:3", (WriteType::ReplicatedDisk, 3)),
        ] {
            assert_eq!(parse_write_type(s).unwrap(), want, "{s}");
        }
        for s in ["replicated-disk", "replicated:0", "unspecified", "memory"] {
            assert!(parse_write_type(s).is_err(), "{s}");
        }
    }
}

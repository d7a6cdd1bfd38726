//! Writing a file: the master picks the worker(s) by write type and locality, the
//! bytes stream straight to them (or, to a single worker on this host, go into
//! its block files directly: [`crate::local_write`]), and `close` completes the
//! file at the master once every worker has stored its part. A failed write
//! deletes the partial file. Until then the unfinished file is this client's
//! under a writer lease, renewed in the background ([`LeaseRenewer`]): a
//! writer killed mid-write stops renewing, and the master deletes its file.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::try_join_all;
use thaw_common::frame;
use thaw_common::proto::*;
use thaw_common::tls::DataStream;
use thaw_common::{Result, ThawError};

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
    match s {
        "must-cache" => Ok((WriteType::MustCache, 1)),
        "async-through" => Ok((WriteType::AsyncThrough, 1)),
        "cache-through" => Ok((WriteType::CacheThrough, 1)),
        "through" => Ok((WriteType::Through, 1)),
        _ => match s.strip_prefix("replicated:").map(str::parse::<u32>) {
            Some(Ok(n)) if n >= 1 => Ok((WriteType::ReplicatedDisk, n)),
            _ => Err(ThawError::invalid(format!(
                "unknown write type {s:?}: expected must-cache, async-through, cache-through, through or replicated:N"
            ))),
        },
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

pub struct FileWriter {
    client: Client,
    info: FileInfo,
    /// Keeps the unfinished file this writer's (none for a rebuild, whose
    /// file is complete, or a master that grants no leases).
    lease: Option<LeaseRenewer>,
    /// This write rebuilds a lost file (a recomputation): never deleted on failure.
    recovery: bool,
    streams: Vec<(String, DataStream)>,
    /// A short-circuit write (then `streams` is empty).
    local: Option<LocalSink>,
    buf: Vec<u8>,
    written: u64,
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
        };
        let resp = client.master().create_file(req).await.map_err(|s| client.rpc_err(s))?.into_inner();
        let info = resp.info.ok_or_else(|| ThawError::internal("create answer without info"))?;
        let recovery = resp.recovery;
        let access = resp.access.clone();
        let lease = (resp.writer_lease_ms > 0)
            .then(|| LeaseRenewer::start(client.clone(), info.file_id, Duration::from_millis(resp.writer_lease_ms)));
        // A rebuild is written as the file was first written.
        let write_type = if recovery { info.write_type() } else { opts.write_type };
        let (tier, ufs_path) = match write_type {
            WriteType::MustCache | WriteType::AsyncThrough => (Tier::Mem, String::new()),
            WriteType::CacheThrough => (Tier::Mem, info.path.clone()),
            WriteType::Through => (Tier::Unspecified, info.path.clone()),
            WriteType::ReplicatedDisk => (Tier::Disk, String::new()),
            WriteType::Unspecified => return Err(ThawError::invalid("write type is unspecified")),
        };
        let mut writer = FileWriter {
            client,
            info,
            lease,
            recovery,
            streams: Vec::new(),
            local: None,
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
        };
        let job = writer.client.config().job_id.clone();
        // One worker, on this host, storing into a tier: write its block files here.
        if let [w] = resp.workers.as_slice()
            && writer.short_circuit(w, tier)
        {
            let open = request(&job, access.as_ref(), data_request::Request::WriteLocal(req.clone()));
            match LocalSink::open(writer.client.pool(), &w.data_address, open, writer.info.block_size).await {
                Ok(sink) => {
                    writer.local = Some(sink);
                    return Ok(writer);
                }
                Err(e) => {
                    tracing::debug!(worker = %w.data_address, error = %e, "short-circuit write refused; streaming")
                }
            }
        }
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
                Ok(sock) => writer.streams.push((w.data_address, sock)),
                Err(e) => return Err(writer.fail(e).await),
            }
        }
        Ok(writer)
    }

    /// Whether the write to worker `w` goes into its block files from here.
    fn short_circuit(&self, w: &WorkerInfo, tier: Tier) -> bool {
        let cfg = self.client.config();
        cfg.short_circuit && tier != Tier::Unspecified && !cfg.position.host.is_empty() && w.host == cfg.position.host
    }

    /// Whether the bytes go into block files on this host (short-circuit).
    pub fn is_local(&self) -> bool {
        self.local.is_some()
    }

    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    /// Bytes accepted so far.
    pub fn written(&self) -> u64 {
        self.written
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

    pub async fn write(&mut self, mut data: &[u8]) -> Result<()> {
        self.check_lease().await?;
        if let Some(sink) = self.local.as_mut() {
            let r = sink.write(data).await;
            self.written = sink.written;
            return match r {
                Ok(()) => Ok(()),
                Err(e) => Err(self.fail(e).await),
            };
        }
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
                let chunk = std::mem::take(&mut self.buf);
                let r = self.send(&chunk).await;
                self.buf = chunk;
                self.buf.clear();
                r?;
            }
        }
        Ok(())
    }

    /// Writes `len` bytes at `offset` of a local file (fewer if it ends first;
    /// returns the bytes written). A short-circuit write copies them into the
    /// block files in the kernel; a streamed one reads them through a buffer.
    pub async fn write_from_file(&mut self, src: &std::fs::File, offset: u64, len: u64) -> Result<u64> {
        self.check_lease().await?;
        if let Some(sink) = self.local.as_mut() {
            let r = sink.write_from(src, offset, len).await;
            self.written = sink.written;
            return match r {
                Ok(n) => Ok(n),
                Err(e) => Err(self.fail(e).await),
            };
        }
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; CHUNK.min(len as usize)];
        let mut done = 0u64;
        while done < len {
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

    async fn send(&mut self, chunk: &[u8]) -> Result<()> {
        let sends = self
            .streams
            .iter_mut()
            .map(|(addr, sock)| async move { frame::write_chunk(sock, chunk).await.map_err(|e| (addr.clone(), e)) });
        if let Err((addr, e)) = try_join_all(sends).await {
            let e = self.worker_error(&addr, e).await;
            return Err(self.fail(e).await);
        }
        self.written += chunk.len() as u64;
        Ok(())
    }

    /// The reason a worker gave for cutting a stream, if it sent one.
    async fn worker_error(&mut self, addr: &str, io: std::io::Error) -> ThawError {
        if let Some((_, sock)) = self.streams.iter_mut().find(|(a, _)| a == addr) {
            let reason =
                tokio::time::timeout(std::time::Duration::from_secs(2), frame::read_msg::<_, DataResponse>(sock)).await;
            if let Ok(Ok(Some(resp))) = reason
                && let Err(e) = frame::check_response(resp)
            {
                return e.context(format!("worker {addr}"));
            }
        }
        ThawError::from(io).context(format!("write to worker {addr}"))
    }

    /// Sends what is buffered, ends the streams, and completes the file.
    pub async fn close(mut self) -> Result<FileInfo> {
        self.check_lease().await?;
        if let Some(sink) = self.local.take() {
            let (addr, total) = (sink.addr.clone(), sink.written);
            match sink.finish().await {
                Ok(stored) if stored == total => {}
                Ok(stored) => {
                    let e = ThawError::internal(format!("worker {addr} stored {stored} of {total} bytes"));
                    return Err(self.fail(e).await);
                }
                Err(e) => return Err(self.fail(e).await),
            }
            return self.complete(total).await;
        }
        if !self.buf.is_empty() {
            let chunk = std::mem::take(&mut self.buf);
            self.send(&chunk).await?;
        }
        let total = self.written;
        let mut streams = std::mem::take(&mut self.streams);
        let ends = streams.iter_mut().map(|(addr, sock)| async move {
            frame::write_chunk(sock, &[]).await.map_err(|e| ThawError::from(e).context(format!("worker {addr}")))?;
            let resp = frame::read_msg::<_, DataResponse>(sock)
                .await?
                .ok_or_else(|| ThawError::unavailable(format!("worker {addr} closed the stream before confirming")))?;
            let resp = frame::check_response(resp).map_err(|e| e.context(format!("worker {addr}")))?;
            if resp.length != total {
                return Err(ThawError::internal(format!("worker {addr} stored {} of {total} bytes", resp.length)));
            }
            Ok(())
        });
        if let Err(e) = try_join_all(ends).await {
            return Err(self.fail(e).await);
        }
        self.complete(total).await
    }

    /// Completes the file at the master once every worker stored its part.
    async fn complete(&mut self, total: u64) -> Result<FileInfo> {
        let req = CompleteFileRequest { file_id: self.info.file_id, length: total };
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
        self.streams.clear();
        // The worker drops the open block and the committed ones when the
        // exchange ends without its finish.
        self.local = None;
        if self.recovery {
            // The file is someone else's: it stays as it was (lost).
            return;
        }
        if self.lease.as_ref().is_some_and(LeaseRenewer::lost) {
            // The master deleted it already; the path may name another file now.
            return;
        }
        if let Err(d) = self.client.delete(&self.info.path, false).await {
            tracing::debug!(path = %self.info.path, error = %d, "could not delete the partial file");
        }
    }
}

//! The data service: block reads (from a tier, or through from the under-store),
//! file write streams into a tier and/or the under-store, short-circuit opens, and
//! stats, over the framed protocol of proto/thaw/v1/data.proto.
//!
//! A request that fails before its response header gets an error response; one
//! that fails after it (mid-stream) has its connection closed, which the client
//! sees as a short read and fails over. Either way the connection closes and the
//! server keeps serving others.
//!
//! This file holds the connections (accepting, idle ones, the request loop),
//! the dispatch of requests, and the reads, short-circuit opens, stats and
//! device control. The writes are its children: `write` (streamed writes,
//! and where any write goes and how it ends) and `local_write`
//! (short-circuit writes, which use `write`'s beginning and end).

mod local_write;
mod write;

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use thaw_common::frame;
use thaw_common::proto::*;
use thaw_common::tls::DataStream;
use thaw_common::{Result, ThawError};
use thaw_proto::{DATA_PROTOCOL_SEGMENTS, DATA_PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;

use crate::Worker;
use crate::cache::gone_is_lost;
use crate::device::DeviceKind;
use crate::stats::{Access, ReadSource};

/// Bytes per socket write and per disk read of the read path.
const IO_CHUNK: usize = 4 << 20;

/// Most synthetic readers one device takes (each is a task).
pub const MAX_INTERFERENCE_STREAMS: u32 = 64;

/// A connection with no request for this long is closed (clients keep idle
/// connections for less, see the client's pool).
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Default of `WorkerConfig::stall_timeout`: once a request has begun, a
/// client that sends or takes no byte for this long is cut off. A client
/// that reads one byte a second, or sends its request that way, would
/// otherwise hold a connection, a task and perhaps a block for ever.
pub const DEFAULT_STALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A client's data connection: every read and write fails with TimedOut
/// after the worker's stall timeout without progress.
pub(crate) type DataSock = std::pin::Pin<Box<TimeoutStream<DataStream>>>;

/// Connections waiting for their next request, oldest first: the ones a
/// full worker closes to take new ones.
#[derive(Default)]
struct Idle {
    next: u64,
    waiting: std::collections::BTreeMap<u64, CancellationToken>,
}

impl Idle {
    fn enter(idle: &std::sync::Mutex<Idle>) -> (u64, CancellationToken) {
        let mut i = idle.lock().unwrap_or_else(|e| e.into_inner());
        i.next += 1;
        let (seq, token) = (i.next, CancellationToken::new());
        i.waiting.insert(seq, token.clone());
        (seq, token)
    }

    fn leave(idle: &std::sync::Mutex<Idle>, seq: u64) {
        idle.lock().unwrap_or_else(|e| e.into_inner()).waiting.remove(&seq);
    }

    /// Closes the connection idle the longest; false if none is idle.
    fn evict_oldest(idle: &std::sync::Mutex<Idle>) -> bool {
        let oldest = idle.lock().unwrap_or_else(|e| e.into_inner()).waiting.pop_first();
        oldest.map(|(_, token)| token.cancel()).is_some()
    }
}

/// Accepts connections until shutdown; each connection is an owned task holding
/// one of `max_connections` permits. At the cap, the connection idle the
/// longest (between requests: a client's pool, or someone holding sockets
/// open to starve the worker) is closed to make room; only when every
/// connection is mid-request is a new one told the worker is busy and closed,
/// so a client fails over instead of waiting unserved.
pub async fn serve(worker: Arc<Worker>, listener: TcpListener, shutdown: CancellationToken) {
    let max = worker.config.max_connections.max(1);
    let permits = Arc::new(tokio::sync::Semaphore::new(max));
    let idle = Arc::new(std::sync::Mutex::new(Idle::default()));
    loop {
        let (mut sock, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let mut permit = permits.clone().try_acquire_owned().ok();
        if permit.is_none() && Idle::evict_oldest(&idle) {
            // The closed connection gives its permit back as its task ends.
            // The accept loop waits for it on purpose: it paces sockets held
            // open that evict one another. Waiting in each connection's own
            // task instead let such a flood reconnect unpaced (340,000
            // connections in 15 s) and cut readers beside it to 0.17x.
            // (docs/reliability.md, "Load under attack".)
            let wait = tokio::time::timeout(std::time::Duration::from_secs(1), permits.clone().acquire_owned());
            permit = wait.await.ok().and_then(Result::ok);
            tracing::debug!(%peer, "closed the longest-idle connection to take a new one");
        }
        let Some(permit) = permit else {
            tracing::warn!(%peer, "connection refused: {max} connections open, none idle");
            worker.tasks.spawn(async move {
                let busy = ThawError::unavailable(format!("worker busy: {max} connections open"));
                let _ = frame::write_msg(&mut sock, &frame::error_response(&busy)).await;
            });
            continue;
        };
        let w = worker.clone();
        let stop = shutdown.clone();
        let idle = idle.clone();
        worker.tasks.spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = handle_connection(w, sock, &idle) => {}
            }
            drop(permit);
            tracing::trace!(%peer, "connection closed");
        });
    }
}

async fn handle_connection(worker: Arc<Worker>, sock: TcpStream, idle: &std::sync::Mutex<Idle>) {
    let _ = sock.set_nodelay(true);
    let stall = worker.config.stall_timeout;
    let sock = match &worker.config.tls {
        // A handshake that stalls is cut off like a stalled request.
        Some(tls) => match tokio::time::timeout(stall, tls.accept(sock)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => return,
        },
        None => DataStream::Plain(sock),
    };
    let mut sock: DataSock = Box::pin(TimeoutStream::new(sock));
    // The user this connection counts against (a secured worker).
    let mut slot = None;
    sock.as_mut().set_write_timeout_pinned(Some(stall));
    loop {
        // Between requests a connection may idle (a client's pool keeps it);
        // once a request's first byte is here, the rest must follow.
        sock.as_mut().set_read_timeout_pinned(Some(IDLE_TIMEOUT));
        let mut first = [0u8; 1];
        let (seq, evicted) = Idle::enter(idle);
        let got = tokio::select! {
            r = sock.read(&mut first) => r,
            _ = evicted.cancelled() => return,
        };
        Idle::leave(idle, seq);
        if !matches!(got, Ok(1)) {
            return;
        }
        sock.as_mut().set_read_timeout_pinned(Some(stall));
        let req: DataRequest = match frame::read_msg(&mut (&first[..]).chain(&mut sock)).await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "bad request");
                let _ = frame::write_msg(&mut sock, &frame::error_response(&e)).await;
                linger(&mut sock).await;
                return;
            }
        };
        let mut sent = false;
        if let Err(e) = dispatch(&worker, &mut sock, req, (&mut sent, &mut slot)).await {
            tracing::debug!(error = %e, sent, "request failed");
            if !sent {
                let _ = frame::write_msg(&mut sock, &frame::error_response(&e)).await;
            }
            linger(&mut sock).await;
            return;
        }
    }
}

/// How long, and how many bytes, a connection closed after an error answer
/// reads and discards what the client still sends (see [`linger`]).
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);
const LINGER_BYTES: u64 = 256 << 20;

/// Closes a connection after an error answer without resetting it. The
/// client may still be sending the request's body (a write the under-store
/// refused midway); a socket closed with bytes unread makes the kernel send
/// a reset, which can reach the client before it reads the answer: it then
/// saw "Connection reset by peer" instead of the reason (the `full_disks`
/// test, once). As web servers' lingering close: half-close, then read and
/// drop what still comes until the client closes, for at most [`LINGER`]
/// and [`LINGER_BYTES`].
async fn linger(sock: &mut DataSock) {
    if sock.shutdown().await.is_err() {
        return;
    }
    let deadline = tokio::time::Instant::now() + LINGER;
    let mut buf = vec![0u8; 64 << 10];
    let mut left = LINGER_BYTES;
    while left > 0 {
        match tokio::time::timeout_at(deadline, sock.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => left = left.saturating_sub(n as u64),
            _ => return,
        }
    }
}

async fn dispatch(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    req: DataRequest,
    (sent, slot): (&mut bool, &mut Option<crate::authorize::UserSlot>),
) -> Result<()> {
    if !(DATA_PROTOCOL_VERSION..=DATA_PROTOCOL_SEGMENTS).contains(&req.version) {
        return Err(ThawError::invalid(format!(
            "data protocol version {} is not supported (this worker speaks {DATA_PROTOCOL_VERSION} to {DATA_PROTOCOL_SEGMENTS})",
            req.version
        )));
    }
    if let Some(secret) = &w.config.secret
        && let Some(user) = crate::authorize::authorize(secret, &req)?
        && slot.is_none()
    {
        // A connection counts against the user of its first request.
        *slot = Some(w.user_connections.take(&user, w.config.max_connections_per_user.max(1))?);
    }
    let job = req.job_id;
    let kind = match &req.request {
        Some(data_request::Request::ReadBlock(_)) => "read_block",
        Some(data_request::Request::WriteFile(_)) => "write_file",
        Some(data_request::Request::WriteLocal(_)) => "write_local",
        Some(data_request::Request::OpenLocal(_)) => "open_local",
        Some(data_request::Request::CacheBlock(_)) => "cache_block",
        Some(data_request::Request::Stats(_)) => "stats",
        Some(data_request::Request::DeviceControl(_)) => "device_control",
        None => "empty",
    };
    let started = std::time::Instant::now();
    let r = serve_request(w, sock, job, req.version, req.request, sent).await;
    w.request_latency.observe(kind, started.elapsed());
    r
}

async fn serve_request(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: String,
    version: u32,
    request: Option<data_request::Request>,
    sent: &mut bool,
) -> Result<()> {
    match request {
        Some(data_request::Request::ReadBlock(r)) => read_block(w, sock, &job, r, sent).await,
        Some(data_request::Request::WriteFile(r)) => write::write_file(w, sock, &job, version, r, sent).await,
        Some(data_request::Request::WriteLocal(r)) => local_write::write_local(w, sock, &job, version, r, sent).await,
        Some(data_request::Request::OpenLocal(r)) => open_local(w, sock, &job, r, sent).await,
        Some(data_request::Request::CacheBlock(r)) => cache_block(w, sock, &job, r, sent).await,
        Some(data_request::Request::Stats(_)) => send_stats(w, sock, sent).await,
        Some(data_request::Request::DeviceControl(r)) => {
            device_control(w, &job, r)?;
            send_stats(w, sock, sent).await
        }
        None => Err(ThawError::invalid("empty data request")),
    }
}

async fn send_stats(w: &Arc<Worker>, sock: &mut DataSock, sent: &mut bool) -> Result<()> {
    let stats = WorkerStats {
        tiers: w.tiers().map(|t| w.tier_usage(t)).collect(),
        jobs: w.stats.snapshot(),
        devices: w.device_states(),
    };
    *sent = true;
    frame::write_msg(sock, &DataResponse { stats: Some(stats), ..Default::default() }).await?;
    Ok(())
}

/// Starts or stops synthetic interference on one of this worker's emulated devices.
fn device_control(w: &Arc<Worker>, job: &str, req: DeviceControlRequest) -> Result<()> {
    let kind = DeviceKind::parse(&req.device)?;
    let device = w.device(kind).ok_or_else(|| {
        ThawError::precondition(format!(
            "this worker has no {kind} device model (start it with --device-model {kind}=RATE/s)"
        ))
    })?;
    if req.interference_streams > MAX_INTERFERENCE_STREAMS {
        return Err(ThawError::invalid(format!(
            "{} interference streams: at most {MAX_INTERFERENCE_STREAMS}",
            req.interference_streams
        )));
    }
    device.set_interference(req.interference_streams);
    tracing::debug!(job, device = %kind, streams = req.interference_streams, "interference set on request");
    Ok(())
}

/// The byte range `[offset, offset + n)` of a block of `len` bytes (`length` 0: to the end).
fn range(offset: u64, length: u64, len: u64) -> Result<(u64, u64)> {
    if offset > len {
        return Err(ThawError::invalid(format!("offset {offset} is past the block's end ({len})")));
    }
    let rest = len - offset;
    Ok((offset, if length == 0 { rest } else { length.min(rest) }))
}

async fn read_block(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: &str,
    req: ReadBlockRequest,
    sent: &mut bool,
) -> Result<()> {
    w.join_migration(req.block_id).await;
    if serve_stored(w, sock, job, &req, false, sent).await? {
        return Ok(());
    }
    match req.ufs.clone() {
        Some(ufs) => read_through(w, sock, job, &req, ufs, sent).await,
        None => Err(ThawError::not_found(format!("block {} is not on worker {}", req.block_id, w.address))),
    }
}

/// Serves a read from a block stored in a tier; `false` if no tier has it.
/// `filled`: the block was just filled from the under-store for this read.
async fn serve_stored(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: &str,
    req: &ReadBlockRequest,
    filled: bool,
    sent: &mut bool,
) -> Result<bool> {
    let block = req.block_id;
    for store in w.tiers() {
        let Some(len) = store.get(block) else {
            continue;
        };
        // The block may be deleted between the lookup and the open: then look on.
        let Ok(file) = std::fs::File::open(store.block_path(block)) else {
            continue;
        };
        // In use while it is sent: not evicted under the read.
        thaw_common::filelock::share(&file, false);
        let (off, n) = range(req.offset, req.length, len)?;
        let header = DataResponse { length: n, source_tier: store.tier as i32, from_ufs: filled, ..Default::default() };
        *sent = true;
        frame::write_msg(sock, &header).await?;
        if store.tier == Tier::Mem {
            // A tmpfs file: the kernel copies page cache to the socket directly.
            send_file(sock, &file, off, n).await?;
        } else {
            // A DISK read: through the disk's device model, if there is one.
            let mut device = w.device_stream(DeviceKind::Disk);
            let mut chunks = spawn_file_reader(file, off, n);
            while let Some(chunk) = chunks.recv().await {
                let chunk = chunk?;
                if let Some(d) = device.as_mut() {
                    d.consume(chunk.len() as u64).await;
                }
                sock.write_all(&chunk).await?;
            }
        }
        // Over TLS the last record waits in the stream until flushed.
        sock.flush().await?;
        let hit = store.access(block, job);
        if store.tier != Tier::Mem {
            // Read from DISK: a miss of the memory the worker caches into.
            w.tier(Tier::Mem).inspect(|m| m.note_miss());
        }
        w.stats.record(job, Access::Read(n));
        let source = match store.tier {
            _ if filled => ReadSource::UnderStore,
            Tier::Mem => ReadSource::RemoteMem,
            _ => ReadSource::Disk,
        };
        w.stats.record_source(job, n, hit && store.tier == Tier::Mem, source);
        w.note_read(job, block, n);
        tracing::debug!(job, block, bytes = n, tier = store.name(), "read");
        return Ok(true);
    }
    Ok(false)
}

/// Sends `[off, off + n)` of a file with sendfile(2): no user-space copy, no page
/// faults. Only for files whose reads cannot stall (tmpfs): the call runs on the
/// async thread.
async fn send_file(sock: &mut DataSock, file: &std::fs::File, mut off: u64, mut n: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    if !sock.get_ref().is_plain() {
        // TLS encrypts in user space: the bytes go through a buffer.
        let mut buf = vec![0u8; (n as usize).min(IO_CHUNK)];
        while n > 0 {
            let k = (n as usize).min(buf.len());
            file.read_exact_at(&mut buf[..k], off)?;
            sock.write_all(&buf[..k]).await?;
            off += k as u64;
            n -= k as u64;
        }
        return Ok(());
    }
    let stall = sock.write_timeout().unwrap_or(DEFAULT_STALL_TIMEOUT);
    let sock = sock.get_ref().tcp();
    let (out_fd, in_fd) = (sock.as_raw_fd(), file.as_raw_fd());
    while n > 0 {
        // A reader that takes nothing for the stall timeout is cut off.
        tokio::time::timeout(stall, sock.writable()).await.map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, format!("the reader took nothing for {stall:?}"))
        })??;
        let sent = sock.try_io(tokio::io::Interest::WRITABLE, || {
            let mut at = off as libc::off_t;
            // SAFETY: both descriptors are open for the duration of the call.
            let r = unsafe { libc::sendfile(out_fd, in_fd, &mut at, n.min(IO_CHUNK as u64) as usize) };
            if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(r as u64) }
        });
        match sent {
            Ok(0) => return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "block file ended early")),
            Ok(k) => {
                off += k;
                n -= k;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads `[off, off + n)` of a file on a blocking thread, a few chunks ahead of the
/// socket, so disk and network overlap.
fn spawn_file_reader(file: std::fs::File, off: u64, n: u64) -> mpsc::Receiver<std::io::Result<Bytes>> {
    let (tx, rx) = mpsc::channel(2);
    tokio::task::spawn_blocking(move || {
        let mut pos = off;
        let end = off + n;
        while pos < end {
            let k = ((end - pos) as usize).min(IO_CHUNK);
            let mut buf = vec![0u8; k];
            let r = file.read_exact_at(&mut buf, pos).map(|_| Bytes::from(buf));
            let failed = r.is_err();
            if tx.blocking_send(r).is_err() || failed {
                return;
            }
            pos += k as u64;
        }
    });
    rx
}

/// A read of a block this worker does not hold, from the under-store. A whole
/// block with a cache tier is filled into the tier first and then served like any
/// stored block; a partial read streams its range straight from the under-store
/// and leaves a fill of the whole block running behind it.
async fn read_through(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: &str,
    req: &ReadBlockRequest,
    ufs: UfsSource,
    sent: &mut bool,
) -> Result<()> {
    let block = req.block_id;
    let (off, n) = range(req.offset, req.length, ufs.length)?;
    let cache_tier = Tier::try_from(req.cache_tier).ok().and_then(|t| w.tier(t));
    if let Some(tier) = cache_tier.as_ref().filter(|t| w.admits(t, block, job)) {
        if off == 0 && n == ufs.length && n > 0 {
            match w.cache_block(block, &ufs, tier, Some(job)).await {
                Ok(()) if serve_stored(w, sock, job, req, true, sent).await? => return Ok(()),
                Ok(()) => {} // removed again at once (the file was deleted): stream it
                Err(e) if e.kind == thaw_common::ErrorKind::ResourceExhausted => {
                    tracing::debug!(job, block, error = %e, "not cached");
                }
                Err(e) => return Err(e),
            }
        } else if tier.get(block).is_none() {
            w.start_fill(block, &ufs, tier, job);
        }
    }
    w.tier(Tier::Mem).inspect(|m| m.note_miss());
    let range = ufs.offset + off..ufs.offset + off + n;
    let mut stream = w.ufs()?.read_range(&ufs.path, range).await.map_err(|e| gone_is_lost(e, &ufs.path))?;
    *sent = true;
    frame::write_msg(sock, &DataResponse { length: n, from_ufs: true, ..Default::default() }).await?;
    let mut device = w.device_stream(DeviceKind::Ufs);
    let mut got = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if let Some(d) = device.as_mut() {
            d.consume(chunk.len() as u64).await;
        }
        sock.write_all(&chunk).await?;
        got += chunk.len() as u64;
    }
    sock.flush().await?;
    if got != n {
        return Err(ThawError::data_lost(format!(
            "under-store file {} ended after {got} of {n} bytes (changed underneath?)",
            ufs.path
        )));
    }
    w.stats.record(job, Access::Read(n));
    w.stats.record_source(job, n, false, ReadSource::UnderStore);
    w.note_read(job, block, n);
    tracing::debug!(job, block, bytes = n, "read through from under-store");
    Ok(())
}

async fn cache_block(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: &str,
    req: CacheBlockRequest,
    sent: &mut bool,
) -> Result<()> {
    let ufs = req.ufs.ok_or_else(|| ThawError::invalid("cache_block without an under-store source"))?;
    let tier = Tier::try_from(req.tier)
        .ok()
        .and_then(|t| w.tier(t))
        .ok_or_else(|| ThawError::invalid(format!("worker {} has no tier {}", w.address, req.tier)))?;
    if !w.admits(&tier, req.block_id, job) {
        return Err(ThawError::precondition(format!(
            "block {} not cached: job {job:?} caches its inputs with probability {:.2} (CAVA, section II)",
            req.block_id,
            w.affinities.probability(job)
        )));
    }
    w.cache_block(req.block_id, &ufs, &tier, Some(job)).await?;
    tracing::debug!(job, block = req.block_id, "cached on request");
    *sent = true;
    let resp = DataResponse { length: ufs.length, source_tier: tier.tier as i32, ..Default::default() };
    frame::write_msg(sock, &resp).await?;
    Ok(())
}

async fn open_local(
    w: &Arc<Worker>,
    sock: &mut DataSock,
    job: &str,
    req: OpenLocalBlockRequest,
    sent: &mut bool,
) -> Result<()> {
    for store in w.tiers() {
        if let Some(len) = store.get(req.block_id) {
            if store.tier == Tier::Disk && w.device(DeviceKind::Disk).is_some() {
                // A direct read of the file would bypass the emulated disk: the
                // client streams the block through this worker instead.
                return Err(ThawError::precondition(format!(
                    "block {} is on worker {}'s DISK tier, and DISK reads go through the worker's device model: stream it",
                    req.block_id, w.address
                )));
            }
            let hit = store.access(req.block_id, job);
            w.stats.record(job, Access::ShortCircuit(len));
            w.stats.record_source(job, len, hit && store.tier == Tier::Mem, ReadSource::ShortCircuit);
            w.note_read(job, req.block_id, 0);
            tracing::debug!(job, block = req.block_id, bytes = len, tier = store.name(), "short-circuit open");
            let resp = DataResponse {
                length: len,
                source_tier: store.tier as i32,
                local_path: store.block_path(req.block_id).display().to_string(),
                ..Default::default()
            };
            *sent = true;
            frame::write_msg(sock, &resp).await?;
            return Ok(());
        }
    }
    Err(ThawError::not_found(format!("block {} is not on worker {}", req.block_id, w.address)))
}

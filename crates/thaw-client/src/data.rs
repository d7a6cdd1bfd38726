//! Client side of the worker data protocol.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use thaw_common::frame;
use thaw_common::proto::*;
use thaw_common::tls::{ClientTls, DataStream};
use thaw_common::{Result, ThawError};
use thaw_proto::DATA_PROTOCOL_VERSION;
use tokio::net::TcpStream;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest wait for a worker's response header (the worker answers a read once
/// its source is open, a write once every byte is stored).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle connections older than this are dropped, well before the worker's own
/// idle timeout closes them.
const IDLE_MAX_AGE: Duration = Duration::from_secs(30);

/// A data connection to worker `addr`, over TLS if `tls` is given.
pub async fn connect(addr: &str, tls: Option<&ClientTls>) -> Result<DataStream> {
    let opened = async {
        let sock = TcpStream::connect(addr).await?;
        let _ = sock.set_nodelay(true);
        match tls {
            Some(tls) => tls.connect(sock, addr).await,
            None => Ok(DataStream::Plain(sock)),
        }
    };
    tokio::time::timeout(CONNECT_TIMEOUT, opened)
        .await
        .map_err(|_| ThawError::unavailable(format!("worker {addr}: connect timed out")))?
        .map_err(|e| ThawError::from(e).context(format!("worker {addr}")))
}

/// A request carrying the master's grant for it (on a secured cluster).
pub fn request(job: &str, access: Option<&SignedAccess>, r: data_request::Request) -> DataRequest {
    DataRequest {
        version: DATA_PROTOCOL_VERSION,
        job_id: job.to_string(),
        access: access.cloned(),
        token: String::new(),
        request: Some(r),
    }
}

/// Sends a request and reads its response header.
pub async fn call(sock: &mut DataStream, req: &DataRequest) -> Result<DataResponse> {
    frame::write_msg(sock, req).await?;
    let answer = tokio::time::timeout(RESPONSE_TIMEOUT, frame::read_msg::<_, DataResponse>(sock))
        .await
        .map_err(|_| ThawError::timeout(format!("worker gave no answer within {RESPONSE_TIMEOUT:?}")))?;
    match answer? {
        Some(resp) => frame::check_response(resp),
        None => Err(ThawError::unavailable("worker closed the connection")),
    }
}

/// Idle data connections per worker, so a block read or a short-circuit open
/// costs no TCP handshake. A worker serves requests on a connection in turn.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<String, Vec<(std::time::Instant, DataStream)>>>,
    /// TLS to every worker, trusting this CA.
    tls: Option<std::sync::Arc<ClientTls>>,
}

/// Idle connections kept per worker: as many as a busy client (a gateway
/// serving dozens of S3 clients, a Dask worker's threads) keeps in use at
/// once, so that its steady state opens none (with 4, a gateway under 8
/// concurrent PUTs opened a connection for every third one).
const IDLE_PER_WORKER: usize = 32;

impl Pool {
    pub fn new(tls: Option<std::sync::Arc<ClientTls>>) -> Self {
        Pool { idle: Mutex::default(), tls }
    }

    /// A fresh connection to worker `addr`.
    pub async fn connect(&self, addr: &str) -> Result<DataStream> {
        connect(addr, self.tls.as_deref()).await
    }

    fn take(&self, addr: &str) -> Option<DataStream> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let v = idle.get_mut(addr)?;
        v.retain(|(since, _)| since.elapsed() < IDLE_MAX_AGE);
        v.pop().map(|(_, sock)| sock)
    }

    /// Returns a connection whose last exchange finished cleanly.
    pub fn put(&self, addr: &str, sock: DataStream) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let v = idle.entry(addr.to_string()).or_default();
        if v.len() < IDLE_PER_WORKER {
            v.push((std::time::Instant::now(), sock));
        }
    }

    /// Sends `req` and reads its response header, on an idle connection if there is
    /// one. A pooled connection that fails before answering may just be stale (the
    /// worker restarted): the request is tried once more on a fresh connection.
    pub async fn call(&self, addr: &str, req: &DataRequest) -> Result<(DataStream, DataResponse)> {
        if let Some(mut sock) = self.take(addr) {
            match call(&mut sock, req).await {
                Ok(resp) => return Ok((sock, resp)),
                Err(e) if e.kind == thaw_common::ErrorKind::Unavailable => {}
                Err(e) => return Err(e),
            }
        }
        let mut sock = self.connect(addr).await?;
        let resp = call(&mut sock, req).await?;
        Ok((sock, resp))
    }
}

/// Sets the synthetic interference on a worker's emulated device.
/// `token`: the caller's (a superuser's, on a secured cluster; else empty).
pub async fn device_control(
    pool: &Pool,
    addr: &str,
    (job, token): (&str, String),
    device: &str,
    streams: u32,
) -> Result<WorkerStats> {
    let control = DeviceControlRequest { device: device.to_string(), interference_streams: streams };
    let req = DataRequest { token, ..request(job, None, data_request::Request::DeviceControl(control)) };
    let (sock, resp) = pool.call(addr, &req).await?;
    pool.put(addr, sock);
    Ok(resp.stats.unwrap_or_default())
}

pub async fn worker_stats(pool: &Pool, addr: &str, (job, token): (&str, String)) -> Result<WorkerStats> {
    let req = DataRequest { token, ..request(job, None, data_request::Request::Stats(WorkerStatsRequest {})) };
    let (sock, resp) = pool.call(addr, &req).await?;
    pool.put(addr, sock);
    Ok(resp.stats.unwrap_or_default())
}

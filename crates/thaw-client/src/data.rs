//! Client side of the worker data protocol.

use std::time::Duration;

use thaw_common::frame;
use thaw_common::proto::*;
use thaw_common::{Result, ThawError};
use thaw_proto::DATA_PROTOCOL_VERSION;
use tokio::net::TcpStream;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

pub async fn connect(addr: &str) -> Result<TcpStream> {
    let sock = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| ThawError::unavailable(format!("worker {addr}: connect timed out")))?
        .map_err(|e| ThawError::from(e).context(format!("worker {addr}")))?;
    let _ = sock.set_nodelay(true);
    Ok(sock)
}

pub fn request(job: &str, r: data_request::Request) -> DataRequest {
    DataRequest { version: DATA_PROTOCOL_VERSION, job_id: job.to_string(), request: Some(r) }
}

/// Sends a request and reads its response header.
pub async fn call(sock: &mut TcpStream, req: &DataRequest) -> Result<DataResponse> {
    frame::write_msg(sock, req).await?;
    match frame::read_msg::<_, DataResponse>(sock).await? {
        Some(resp) => frame::check_response(resp),
        None => Err(ThawError::unavailable("worker closed the connection")),
    }
}

pub async fn worker_stats(addr: &str, job: &str) -> Result<WorkerStats> {
    let mut sock = connect(addr).await?;
    let resp = call(&mut sock, &request(job, data_request::Request::Stats(WorkerStatsRequest {}))).await?;
    Ok(resp.stats.unwrap_or_default())
}

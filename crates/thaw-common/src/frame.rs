//! Framing of the worker data protocol (see proto/thaw/v1/data.proto): messages and
//! byte chunks, each behind a 4-byte big-endian length. Lengths are checked before
//! anything is allocated, so a malformed or hostile peer costs at most one bounded
//! buffer.

use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::proto::{DataResponse, ErrorCode};
use crate::{ErrorKind, Result, ThawError};

/// Largest encoded header message.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;
/// Largest chunk of a write stream.
pub const MAX_CHUNK_BYTES: usize = 8 << 20;

pub async fn write_msg<W: AsyncWrite + Unpin, M: Message>(w: &mut W, msg: &M) -> std::io::Result<()> {
    let body = msg.encode_to_vec();
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf).await?;
    w.flush().await
}

/// Reads one message; `Ok(None)` on a clean end of stream before its length.
pub async fn read_msg<R: AsyncRead + Unpin, M: Message + Default>(r: &mut R) -> Result<Option<M>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_MESSAGE_BYTES {
        return Err(ThawError::invalid(format!("message of {len} bytes is over the {MAX_MESSAGE_BYTES}-byte limit")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    M::decode(body.as_slice()).map(Some).map_err(|e| ThawError::invalid(format!("malformed message: {e}")))
}

/// Writes one chunk of a write stream (an empty chunk ends the stream),
/// flushed (a TLS stream holds the last record until flushed).
pub async fn write_chunk<W: AsyncWrite + Unpin>(w: &mut W, data: &[u8]) -> std::io::Result<()> {
    w.write_all(&(data.len() as u32).to_be_bytes()).await?;
    w.write_all(data).await?;
    w.flush().await
}

/// Reads the length of the next chunk, checked against the limit.
pub async fn read_chunk_len<R: AsyncRead + Unpin>(r: &mut R) -> Result<usize> {
    let n = r.read_u32().await? as usize;
    if n > MAX_CHUNK_BYTES {
        return Err(ThawError::invalid(format!("chunk of {n} bytes is over the {MAX_CHUNK_BYTES}-byte limit")));
    }
    Ok(n)
}

/// In place of a chunk length, in a version-2 write stream: the bytes after
/// it (from a block boundary on) are not stored in the worker's tier; they go
/// to the file's under-store copy only (see proto/thaw/v1/data.proto).
pub const STORE_NO_MORE: u32 = u32::MAX;

/// What a write stream's next length word says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkHeader {
    /// A chunk of this many bytes follows.
    Data(usize),
    /// The stream ends (an empty chunk).
    End,
    /// [`STORE_NO_MORE`].
    StoreNoMore,
}

/// Reads the next length word of a write stream, checked against the limit.
pub async fn read_chunk_header<R: AsyncRead + Unpin>(r: &mut R) -> Result<ChunkHeader> {
    let n = r.read_u32().await?;
    if n == STORE_NO_MORE {
        return Ok(ChunkHeader::StoreNoMore);
    }
    if n as usize > MAX_CHUNK_BYTES {
        return Err(ThawError::invalid(format!("chunk of {n} bytes is over the {MAX_CHUNK_BYTES}-byte limit")));
    }
    Ok(if n == 0 { ChunkHeader::End } else { ChunkHeader::Data(n as usize) })
}

/// Writes the [`STORE_NO_MORE`] mark, flushed.
pub async fn write_store_no_more<W: AsyncWrite + Unpin>(w: &mut W) -> std::io::Result<()> {
    w.write_all(&STORE_NO_MORE.to_be_bytes()).await?;
    w.flush().await
}

/// A response carrying an error.
pub fn error_response(e: &ThawError) -> DataResponse {
    DataResponse { code: e.kind.code() as i32, message: e.message.clone(), ..Default::default() }
}

/// Turns an error response back into an error.
pub fn check_response(resp: DataResponse) -> Result<DataResponse> {
    let code = ErrorCode::try_from(resp.code).unwrap_or(ErrorCode::Internal);
    if code == ErrorCode::Ok {
        return Ok(resp);
    }
    let kind = ErrorKind::from_code(code).unwrap_or(ErrorKind::Internal);
    Err(ThawError::new(kind, resp.message))
}

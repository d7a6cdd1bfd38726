//! What more than one Thaw part needs: the master, the workers, the client,
//! the CLI and the benchmarks all build on this crate, which of Thaw's crates
//! needs only thaw-proto. By subject:
//! - The words: [`ids`] (file and block ids), [`size`] (sizes with units),
//!   [`path`] (namespace paths, checked), [`locality`] (topology: replicas
//!   ordered by locality level), [`write_type`] (what each write type means:
//!   its tier, who writes the under-store copy and when), the block size
//!   bounds, and the error type ([`error`]: [`ThawError`], [`ErrorKind`]).
//! - The wire: [`proto`] (the generated `thaw.v1` protocol, re-exported) and
//!   [`frame`] (the data protocol's framing).
//! - Security: [`auth`] (the cluster secret, users' tokens, the master's
//!   grants of data operations) and [`tls`] (TLS on both protocols).
//! - Reaching the master: [`failover`] (a channel to a group of masters that
//!   follows the leader; [`auth::master_client`] wraps it with credentials).
//! - Local helpers: [`filelock`] (whether a reader holds a block file open),
//!   `metrics` (Prometheus over HTTP for the master and the workers, behind the
//!   `metrics` feature), and [`now_ms`], [`hostname`], [`drop_cached_pages`].

pub mod auth;
pub mod error;
pub mod failover;
pub mod filelock;
pub mod frame;
pub mod ids;
pub mod locality;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod path;
pub mod size;
pub mod tls;
pub mod write_type;

pub use error::{ErrorKind, Result, ThawError};
pub use thaw_proto::v1 as proto;

/// Block size when neither the file nor the master says otherwise.
pub const DEFAULT_BLOCK_SIZE: u64 = 64 * 1024 * 1024;
/// Smallest and largest block size a file may have (checked by master and worker).
pub const MIN_BLOCK_SIZE: u64 = 512;
pub const MAX_BLOCK_SIZE: u64 = 4 << 30;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// This machine's host name: the default `host` of workers and clients.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates or truncates.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".to_string();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Drops a file's pages from the page cache (posix_fadvise DONTNEED), so the next
/// read really goes to the device: how a cold read is measured honestly.
pub fn drop_cached_pages(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path)?;
    // SAFETY: a valid open descriptor; offset 0 and length 0 mean the whole file.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

//! The bench data set and the timed read loops that every benchmark shares.
//!
//! The data set is a deterministic function of the byte offset, so any reader can
//! be checked against it without keeping a copy: each read loop folds a sample of
//! the bytes (one per 4 KiB, by file position) into a checksum, which costs the
//! same on the Thaw side and on the baseline side.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use thaw_client::{Client, WriteOptions};
use thaw_common::proto::WriteType;
use tokio::io::AsyncReadExt;

/// Application buffer of every read loop, and chunk of every writer.
pub const BUF: usize = 4 << 20;
/// One sampled byte per this many bytes goes into the checksum.
const SAMPLE_EVERY: u64 = 4096;

/// The data set's 8-byte word at word index `w` (splitmix64).
fn word(w: u64) -> u64 {
    let mut z = w.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn byte_at(offset: u64) -> u8 {
    word(offset / 8).to_le_bytes()[(offset % 8) as usize]
}

/// Fills `buf` with the data set's bytes at `offset` (a multiple of 8).
pub fn fill(buf: &mut [u8], offset: u64) {
    debug_assert_eq!(offset % 8, 0);
    for (i, piece) in buf.chunks_mut(8).enumerate() {
        let w = word(offset / 8 + i as u64).to_le_bytes();
        piece.copy_from_slice(&w[..piece.len()]);
    }
}

/// The checksum a correct read of the first `size` bytes of the data set yields.
pub fn expected_sum(size: u64) -> u64 {
    (0..size).step_by(SAMPLE_EVERY as usize).fold(0, |s, o| fold(s, byte_at(o)))
}

fn fold(sum: u64, b: u8) -> u64 {
    sum.wrapping_mul(31).wrapping_add(b as u64)
}

/// Bytes seen by a read loop and their sampled checksum.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    bytes: u64,
    sum: u64,
}

impl Tally {
    fn add(&mut self, chunk: &[u8]) {
        let first = self.bytes.next_multiple_of(SAMPLE_EVERY) - self.bytes;
        self.sum = chunk.iter().skip(first as usize).step_by(SAMPLE_EVERY as usize).fold(self.sum, |s, &b| fold(s, b));
        self.bytes += chunk.len() as u64;
    }

    fn done(self, started: Instant) -> Transfer {
        Transfer { bytes: self.bytes, secs: started.elapsed().as_secs_f64(), sum: self.sum }
    }
}

/// One timed read of a whole stream or file.
#[derive(Debug, Clone, Copy)]
pub struct Transfer {
    pub bytes: u64,
    pub secs: f64,
    pub sum: u64,
}

impl Transfer {
    pub fn mib_per_sec(&self) -> f64 {
        self.bytes as f64 / (1u64 << 20) as f64 / self.secs.max(1e-9)
    }

    /// Fails unless this read returned exactly the first `size` bytes of the data set.
    pub fn check(self, size: u64, sum: u64, what: &str) -> Result<Self> {
        ensure!(self.bytes == size, "{what}: read {} bytes, expected {size}", self.bytes);
        ensure!(self.sum == sum, "{what}: the bytes read differ from the data set");
        Ok(self)
    }
}

/// Bytes of a Thaw read, by where they came from (the client's own accounting).
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct Sources {
    pub short_circuit: u64,
    pub remote_mem: u64,
    pub remote_disk: u64,
    pub under_store: u64,
}

/// Writes the first `size` bytes of the data set to a local file and syncs it, so
/// that its pages can then be dropped from the page cache.
pub fn write_file(path: &Path, size: u64) -> Result<()> {
    let mut f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut buf = vec![0u8; BUF];
    let mut at = 0;
    while at < size {
        let k = (size - at).min(BUF as u64) as usize;
        fill(&mut buf[..k], at);
        f.write_all(&buf[..k])?;
        at += k as u64;
    }
    f.sync_all()?;
    Ok(())
}

/// Writes the first `size` bytes of the data set into Thaw at `path`.
pub async fn write_thaw(client: &Client, path: &str, size: u64, write_type: WriteType, block: u64) -> Result<()> {
    let opts = WriteOptions { write_type, block_size: block, overwrite: true, ..Default::default() };
    let mut w = client.create(path, opts).await?;
    let mut buf = vec![0u8; BUF];
    let mut at = 0;
    while at < size {
        let k = (size - at).min(BUF as u64) as usize;
        fill(&mut buf[..k], at);
        w.write(&buf[..k]).await?;
        at += k as u64;
    }
    w.close().await?;
    Ok(())
}

/// Reads a local file sequentially into a 4 MiB buffer (the baseline read).
pub fn read_file(path: &Path) -> Result<Transfer> {
    let mut buf = vec![0u8; BUF];
    let started = Instant::now();
    let mut f = std::fs::File::open(path)?;
    let mut tally = Tally::default();
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(tally.done(started));
        }
        tally.add(&buf[..n]);
    }
}

/// Opens and reads a whole Thaw file with `FileReader::read` into a 4 MiB buffer.
/// The open (one metadata call) is inside the timed span: a job pays it too.
pub async fn read_thaw(client: &Client, path: &str) -> Result<(Transfer, Sources)> {
    let mut buf = vec![0u8; BUF];
    let started = Instant::now();
    let mut r = client.open(path).await?;
    let mut tally = Tally::default();
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        tally.add(&buf[..n]);
    }
    let t = tally.done(started);
    let s = r.stats();
    let sources = Sources {
        short_circuit: s.short_circuit,
        remote_mem: s.remote_mem,
        remote_disk: s.remote_disk,
        under_store: s.under_store,
    };
    Ok((t, sources))
}

/// Reads a TCP stream to its end into a 4 MiB buffer.
pub async fn read_socket(sock: &mut tokio::net::TcpStream, started: Instant) -> Result<Transfer> {
    let mut buf = vec![0u8; BUF];
    let mut tally = Tally::default();
    loop {
        let n = sock.read(&mut buf).await?;
        if n == 0 {
            return Ok(tally.done(started));
        }
        tally.add(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_does_not_depend_on_how_reads_are_cut() {
        let size = 3 * SAMPLE_EVERY + 123;
        let mut data = vec![0u8; size as usize];
        fill(&mut data, 0);
        for cut in [1usize, 7, 4096, 5000, size as usize] {
            let mut t = Tally::default();
            data.chunks(cut).for_each(|c| t.add(c));
            assert_eq!(t.sum, expected_sum(size), "cut {cut}");
            assert_eq!(t.bytes, size);
        }
    }

    #[test]
    fn fill_at_an_offset_continues_the_data_set() {
        let mut whole = vec![0u8; 64];
        fill(&mut whole, 0);
        let mut tail = vec![0u8; 32];
        fill(&mut tail, 32);
        assert_eq!(&whole[32..], &tail[..]);
        assert_eq!(whole[13], byte_at(13));
    }
}

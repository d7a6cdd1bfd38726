//! In-kernel copies between a block file on this host and a local file or
//! standard output (`fs cat`, `fs get`, `fs put`, Python's `get`/`put`): one
//! sendfile(2) per block, so no byte passes through a user-space buffer (the
//! kernel copies page to page, or not at all into /dev/null). An output
//! sendfile cannot write to (one opened with O_APPEND, some terminals) gets a
//! buffered copy instead.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// Most bytes one sendfile call moves (the kernel caps a call near 2 GiB).
const STEP: u64 = 1 << 30;

/// Buffer of the fallback copy.
const BUF: usize = 4 << 20;

/// Copies `len` bytes at `offset` of `src` to `dst` at `dst`'s own position (which
/// moves on). Returns the bytes copied: fewer than `len` only if `src` ends first.
pub fn copy_range(src: &File, offset: u64, len: u64, dst: &File) -> std::io::Result<u64> {
    let mut done = 0u64;
    let mut at = offset as libc::off_t;
    while done < len {
        // SAFETY: both descriptors are open for the duration of the call; `at` is
        // a valid offset variable the kernel updates.
        let r = unsafe { libc::sendfile(dst.as_raw_fd(), src.as_raw_fd(), &mut at, (len - done).min(STEP) as usize) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                // This output takes no sendfile; nothing was written by the call.
                Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
                    return Ok(done + copy_buffered(src, offset + done, len - done, dst)?);
                }
                _ => return Err(e),
            }
        }
        if r == 0 {
            break;
        }
        done += r as u64;
    }
    Ok(done)
}

/// The copy through a buffer: pread from `src`, write to `dst`.
fn copy_buffered(src: &File, offset: u64, len: u64, mut dst: &File) -> std::io::Result<u64> {
    let mut buf = vec![0u8; BUF.min(len as usize)];
    let mut done = 0u64;
    while done < len {
        let want = ((len - done) as usize).min(buf.len());
        let n = src.read_at(&mut buf[..want], offset + done)?;
        if n == 0 {
            break;
        }
        dst.write_all(&buf[..n])?;
        done += n as u64;
    }
    Ok(done)
}

/// Runs a call that may block (a copy into a pipe that is full, a disk) without
/// stalling the async runtime: on a multi-threaded runtime the thread hands its
/// other tasks over first.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread { tokio::task::block_in_place(f) } else { f() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn contents(f: &File) -> Vec<u8> {
        let len = f.metadata().unwrap().len() as usize;
        let mut v = vec![0u8; len];
        f.read_exact_at(&mut v, 0).unwrap();
        v
    }

    #[test]
    fn copies_a_range_and_stops_at_the_end_of_the_source() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let src = file_with(&data);
        let dst = tempfile::tempfile().unwrap();
        assert_eq!(copy_range(&src, 1_000, 50_000, &dst).unwrap(), 50_000);
        assert_eq!(copy_range(&src, 99_000, 5_000, &dst).unwrap(), 1_000);
        let mut want = data[1_000..51_000].to_vec();
        want.extend_from_slice(&data[99_000..]);
        assert_eq!(contents(&dst), want);
    }

    #[test]
    fn an_append_only_output_gets_the_buffered_copy() {
        let data: Vec<u8> = (0..70_000u32).map(|i| (i % 13) as u8).collect();
        let src = file_with(&data);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        std::fs::write(&path, b"head").unwrap();
        let dst = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        assert_eq!(copy_range(&src, 0, data.len() as u64, &dst).unwrap(), data.len() as u64);
        let got = std::fs::read(&path).unwrap();
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..], &data[..]);
    }
}

//! Block files in use: a reader of a block file (a short-circuit client, or
//! the worker sending it) holds a shared `flock` on it while it has the file
//! open, and the worker's tier does not evict a block whose file it cannot
//! lock exclusively. The kernel drops the lock when the file is closed or its
//! process dies (kill -9 included), so no protocol has to say "done".

use std::os::fd::AsRawFd;
use std::path::Path;

/// Marks `file` as in use until it is closed. `wait`: block while the worker
/// holds its brief exclusive check (a client); else give up at once (the
/// worker's own send must not stall its runtime). A file system without locks
/// only leaves the file unmarked.
pub fn share(file: &std::fs::File, wait: bool) {
    let op = if wait { libc::LOCK_SH } else { libc::LOCK_SH | libc::LOCK_NB };
    // SAFETY: a valid descriptor for the call; the lock goes with the file.
    unsafe { libc::flock(file.as_raw_fd(), op) };
}

/// Whether some reader holds the file at `path` open and marked (see [`share`]).
/// A missing file is not in use.
pub fn in_use(path: &Path) -> bool {
    let Ok(f) = std::fs::File::open(path) else { return false };
    // SAFETY: a valid descriptor for the call; the lock goes with the file.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_open_and_shared_is_in_use_until_closed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b");
        std::fs::write(&p, b"x").unwrap();
        assert!(!in_use(&p));
        let f = std::fs::File::open(&p).unwrap();
        share(&f, true);
        assert!(in_use(&p));
        drop(f);
        assert!(!in_use(&p));
        assert!(!in_use(&dir.path().join("missing")));
    }
}

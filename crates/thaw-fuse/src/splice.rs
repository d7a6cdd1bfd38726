//! Replies to reads of local blocks without copying the bytes through this
//! process: the block file's pages are spliced into a pipe behind the reply
//! header, and the pipe into /dev/fuse, where the kernel copies them once,
//! straight into the reader's buffer (direct_io). A pread + write reply copies
//! every byte twice; this is the one copy that reading the tmpfs file costs.
//!
//! fuser has no splice reply, so the reply is written to a duplicate of the
//! session's /dev/fuse descriptor here, and fuser's reply object is then
//! forgotten (dropping it would answer the same request again with EIO).
//! Anything that fails before the reply is sent leaves the request to the
//! ordinary path. A pipe holds at most `fs.pipe-max-size` (1 MiB: 256 pages)
//! without CAP_SYS_RESOURCE; the header takes one page slot, so the mount caps
//! requests at 255 pages ([`MAX_REQUEST`]) and a reply that would span more
//! pages (an unaligned read) is left to the ordinary path.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// The reply header of the FUSE protocol (`struct fuse_out_header`).
#[repr(C)]
struct OutHeader {
    len: u32,
    error: i32,
    unique: u64,
}

const PIPE_SIZE: libc::c_int = 1 << 20;
const PAGE: usize = 4096;

/// The largest read request the kernel is asked to send when splicing: one
/// pipe of data pages plus the header's.
pub(crate) const MAX_REQUEST: u32 = (PIPE_SIZE as u32) - PAGE as u32;

pub(crate) struct Splicer {
    dev: OwnedFd,
    /// Cleared for good when a pipe cannot be made large enough.
    on: AtomicBool,
}

thread_local! {
    /// Each serving thread's pipe (read end, write end), empty between replies.
    static PIPE: RefCell<Option<(OwnedFd, OwnedFd)>> = const { RefCell::new(None) };
}

fn make_pipe() -> Option<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: pipe2 succeeded: both are open descriptors we now own.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on an open descriptor.
    if unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE) } < PIPE_SIZE {
        return None;
    }
    Some((r, w))
}

impl Splicer {
    pub(crate) fn new(dev: OwnedFd) -> Self {
        Splicer { dev, on: AtomicBool::new(true) }
    }

    /// Answers request `unique` with `len` bytes of `file` from `at`. True if
    /// the reply went out; false if nothing was sent (the caller answers).
    pub(crate) fn reply(&self, unique: u64, file: &std::fs::File, at: u64, len: usize) -> bool {
        // Page slots the data takes in the pipe, plus the header's.
        let pages = ((at as usize % PAGE) + len).div_ceil(PAGE) + 1;
        if !self.on.load(Ordering::Relaxed) || pages * PAGE > PIPE_SIZE as usize {
            return false;
        }
        PIPE.with_borrow_mut(|slot| {
            if slot.is_none() {
                *slot = make_pipe();
                if slot.is_none() {
                    tracing::info!("cannot make a {PIPE_SIZE}-byte pipe: reads are answered with pread");
                    self.on.store(false, Ordering::Relaxed);
                    return false;
                }
            }
            let Some((r, w)) = slot.as_ref() else { return false };
            let sent = self.send(r, w, unique, file, at, len);
            if !sent {
                // The pipe may hold part of a reply: start the next one afresh.
                *slot = None;
            }
            sent
        })
    }

    fn send(&self, r: &OwnedFd, w: &OwnedFd, unique: u64, file: &std::fs::File, at: u64, len: usize) -> bool {
        let total = std::mem::size_of::<OutHeader>() + len;
        let header = OutHeader { len: total as u32, error: 0, unique };
        let hsize = std::mem::size_of::<OutHeader>();
        // SAFETY: writing the header's bytes from a live value of that size.
        let n = unsafe { libc::write(w.as_raw_fd(), (&header as *const OutHeader).cast(), hsize) };
        if n != hsize as isize {
            return false;
        }
        let mut off = at as libc::loff_t;
        let mut left = len;
        while left > 0 {
            // SAFETY: splice between open descriptors; `off` outlives the call.
            let n = unsafe { libc::splice(file.as_raw_fd(), &mut off, w.as_raw_fd(), std::ptr::null_mut(), left, 0) };
            if n <= 0 {
                return false;
            }
            left -= n as usize;
        }
        // One call: the kernel takes a whole reply from the pipe or none.
        // SAFETY: splice between open descriptors, no offsets.
        let n = unsafe {
            libc::splice(r.as_raw_fd(), std::ptr::null_mut(), self.dev.as_raw_fd(), std::ptr::null_mut(), total, 0)
        };
        if n != total as isize {
            tracing::debug!(n, total, error = %std::io::Error::last_os_error(), "splice reply failed");
            return false;
        }
        true
    }
}

//! Drop-behind: cold copies leave nothing in the kernel's page cache.
//!
//! A migration or a read's fill copies a block from a local under-store (or
//! from the DISK tier) into the MEM tier, a tmpfs: once there, the pages the
//! kernel cached of the source file are a second copy of the same bytes in
//! RAM, which the tier's reads never use. Left alone they double a load's
//! memory footprint and crowd the tmpfs: loading 5 GiB this way slowed from
//! ~1,000 to ~200 MiB/s as the page cache grew (issue 28, item 3). So each
//! copy drops the source's pages behind it, window by window
//! (`posix_fadvise(POSIX_FADV_DONTNEED)`), as HDFS's DataNode does for its
//! cold reads (`dfs.datanode.drop.cache.behind.reads`, HDFS-2465); a
//! checkpoint drops what it wrote into a local under-store once it is synced.
//!
//! DISK-tier copies into MEM drop behind too: the block they copy is in
//! memory afterwards, and every read goes to the MEM replica before the DISK
//! one, so cached DISK pages would only be read again after the MEM copy is
//! evicted, by which time memory pressure has usually taken them as well.
//! Reads that the cache policy does not cache (served from the under-store
//! through the worker) keep their pages: there the page cache is the only
//! memory copy, and the kernel's LRU may serve a re-read from it.

use std::os::fd::AsRawFd;

/// A drop-behind copy drops the source's pages after every window this long,
/// so at most about one window (plus the kernel's read-ahead) is cached at
/// a time per stream.
pub(crate) const WINDOW: u64 = 8 << 20;

/// Tells the kernel `len` bytes of `file` at `offset` (0: to its end) will not
/// be read again: their clean pages leave the page cache now. Dirty pages
/// stay (sync them first); pages another process has locked stay. Advice
/// only: a refusal changes nothing but the memory used, so it is logged.
pub(crate) fn drop_pages(file: &std::fs::File, offset: u64, len: u64) {
    // SAFETY: the descriptor is open for the duration of the call.
    let r = unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset as libc::off_t, len as libc::off_t, libc::POSIX_FADV_DONTNEED)
    };
    if r != 0 {
        tracing::debug!(errno = r, offset, len, "posix_fadvise(DONTNEED) refused: pages stay cached");
    }
}

/// Drop-behind for a file being written (a checkpoint into a local
/// under-store): written pages are dirty, and dirty pages cannot be dropped,
/// so each full window is sent to the disk as the next one is written
/// (sync_file_range(2)) and dropped once it is there, as HDFS's DataNode
/// does for its writes (`dfs.datanode.drop.cache.behind.writes`). The caller
/// still syncs the whole file at its end, then calls [`WriteBehind::finish`].
#[derive(Debug, Default)]
pub(crate) struct WriteBehind {
    /// Dropping at all (else this does nothing).
    on: bool,
    /// Bytes from the start dropped already, and sent to the disk.
    dropped: u64,
    started: u64,
}

impl WriteBehind {
    pub(crate) fn new(on: bool) -> Self {
        WriteBehind { on, ..Default::default() }
    }

    /// `file` now holds `written` bytes from its start.
    pub(crate) fn wrote(&mut self, file: &std::fs::File, written: u64) {
        if !self.on || written < self.started + WINDOW {
            return;
        }
        // The window sent before this one has reached the disk (usually by
        // now): wait for it, then drop it; send the new one on its way.
        if self.started > self.dropped {
            sync_range(file, self.dropped, self.started - self.dropped, true);
            drop_pages(file, self.dropped, self.started - self.dropped);
            self.dropped = self.started;
        }
        sync_range(file, self.started, written - self.started, false);
        self.started = written;
    }

    /// After the file is synced: drops what is left of it.
    pub(crate) fn finish(self, file: &std::fs::File) {
        if self.on {
            drop_pages(file, self.dropped, 0);
        }
    }
}

/// Starts writing `len` bytes of `file` at `offset` back to its disk; if
/// `wait`, also waits for them (and for any write of them already started).
fn sync_range(file: &std::fs::File, offset: u64, len: u64, wait: bool) {
    let flags = if wait {
        libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER
    } else {
        libc::SYNC_FILE_RANGE_WRITE
    };
    // SAFETY: the descriptor is open for the duration of the call.
    let r = unsafe { libc::sync_file_range(file.as_raw_fd(), offset as libc::off64_t, len as libc::off64_t, flags) };
    if r != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "sync_file_range refused: pages stay cached until the end");
    }
}

/// Of the pages of `file` in `offset..offset + len`, how many the page cache
/// holds, and how many there are (mincore(2) on a mapping of the range).
pub fn resident_pages(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<(usize, usize)> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let start = offset / page * page;
    let span = (offset + len).saturating_sub(start);
    if span == 0 {
        return Ok((0, 0));
    }
    let pages = span.div_ceil(page) as usize;
    // SAFETY: a fresh shared read-only mapping of an open file; unmapped below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span as usize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            start as libc::off_t,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: `map` is a mapping of `span` bytes; `vec` has one byte per page.
    let r = unsafe { libc::mincore(map, span as usize, vec.as_mut_ptr()) };
    let err = (r != 0).then(std::io::Error::last_os_error);
    // SAFETY: unmaps exactly the mapping made above.
    unsafe { libc::munmap(map, span as usize) };
    if let Some(e) = err {
        return Err(e);
    }
    Ok((vec.iter().filter(|b| *b & 1 == 1).count(), pages))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_pages_leave_the_page_cache_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 4 << 20]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        f.sync_all().unwrap();
        // Read it all: every page is cached.
        std::fs::read(&path).unwrap();
        let (cached, pages) = resident_pages(&f, 0, 4 << 20).unwrap();
        assert_eq!(cached, pages, "a file just read is cached");
        drop_pages(&f, 0, 2 << 20);
        let (first, _) = resident_pages(&f, 0, 2 << 20).unwrap();
        let (second, half) = resident_pages(&f, 2 << 20, 2 << 20).unwrap();
        assert_eq!(first, 0, "dropped pages are gone");
        assert_eq!(second, half, "the rest stays");
    }

    #[test]
    fn a_written_file_is_dropped_window_by_window_and_at_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(path).unwrap();
        let mut behind = WriteBehind::new(true);
        let chunk = vec![9u8; 1 << 20];
        let total = 3 * WINDOW + (1 << 20);
        for written in (1..=total >> 20).map(|m| m << 20) {
            std::io::Write::write_all(&mut f, &chunk).unwrap();
            behind.wrote(&f, written);
        }
        let (cached, _) = resident_pages(&f, 0, 2 * WINDOW).unwrap();
        assert_eq!(cached, 0, "the windows written before the last are dropped while writing");
        f.sync_all().unwrap();
        behind.finish(&f);
        let (cached, pages) = resident_pages(&f, 0, total).unwrap();
        assert_eq!(cached, 0, "{cached} of {pages} pages left cached after the end");
    }
}

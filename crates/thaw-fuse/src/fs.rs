//! The FUSE request handlers: each turns one kernel request into client calls,
//! bounded by the mount's timeout, and answers with attributes, bytes or an errno.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, UNIX_EPOCH};

use fuser::{
    BackingId, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use thaw_client::{Client, FileReader};
use thaw_common::proto::{FileInfo, Tier};
use thaw_common::{ErrorKind, ThawError};
use tokio::runtime::Handle;

use crate::inodes::{Attr, Inodes, ROOT};
use crate::splice::Splicer;
use crate::{CacheMode, MountOptions, ServeStats};

/// Local block files an open handle keeps open (each holds the worker's
/// in-use lock on its block): the one being read and the next ones the
/// kernel's read-ahead asks for.
const LOCAL_FILES_KEPT: usize = 4;

/// `st_blksize`: programs that size their reads by it (cat, cp) ask for
/// 4 MiB at a time, which the kernel splits into 1 MiB requests served in
/// parallel (FUSE_ASYNC_DIO).
const BLKSIZE: u32 = 4 << 20;

/// A directory as listed at its `opendir`: (inode, kind, name) per entry.
type Listing = Vec<(u64, FileType, String)>;

pub(crate) struct ThawFs {
    client: Client,
    rt: Handle,
    opts: MountOptions,
    inodes: Mutex<Inodes>,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    dirs: Mutex<HashMap<u64, Arc<Listing>>>,
    next_fh: AtomicU64,
    /// One backing file per inode while any handle of it is open in
    /// passthrough mode (the kernel wants the same id for all of them).
    backing: Mutex<HashMap<u64, Weak<BackingId>>>,
    /// Whether the kernel agreed to passthrough at init.
    passthrough: bool,
    uid: u32,
    gid: u32,
    stats: Arc<ServeStats>,
    /// Zero-copy replies for local blocks, once the session's fd is known.
    splicer: Arc<OnceLock<Splicer>>,
}

/// One `open` of a file: the client's reader (its block map fetched once),
/// and the block files of this host it has read from so far.
struct OpenFile {
    length: u64,
    block_size: u64,
    /// Where each block starts, and its length.
    blocks: Vec<(u64, u64)>,
    reader: tokio::sync::Mutex<FileReader>,
    /// (block index, its file), most recent last.
    local: Mutex<Vec<(usize, Arc<std::fs::File>)>>,
    /// Blocks with no replica on this host: read through the client's stream.
    remote: Mutex<Vec<usize>>,
    /// Keeps the kernel's backing file while this handle is open (passthrough).
    _backing: Option<Arc<BackingId>>,
    /// Opened with `direct_io`: its reads are counted, to choose how later
    /// opens read (`CacheMode::Auto`).
    direct: bool,
    file_id: u64,
    reads: AtomicU64,
    read_bytes: AtomicU64,
}

impl ThawFs {
    pub(crate) fn new(
        client: Client,
        rt: Handle,
        opts: MountOptions,
        stats: Arc<ServeStats>,
        splicer: Arc<OnceLock<Splicer>>,
    ) -> Self {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        ThawFs {
            client,
            rt,
            inodes: Mutex::new(Inodes::new(opts.attr_ttl)),
            opts,
            files: Mutex::default(),
            dirs: Mutex::default(),
            next_fh: AtomicU64::new(1),
            backing: Mutex::default(),
            passthrough: false,
            uid,
            gid,
            stats,
            splicer,
        }
    }

    /// Runs a client call on the runtime, bounded by the mount's timeout: a
    /// master or worker that went away makes it fail, never hang.
    fn call<T>(&self, what: &str, fut: impl Future<Output = thaw_common::Result<T>>) -> Result<T, Errno> {
        let timeout = self.opts.timeout;
        // The timer must be made inside the runtime (this is a FUSE thread).
        match self.rt.block_on(async move { tokio::time::timeout(timeout, fut).await }) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                let errno = errno(&e);
                if errno != Errno::ENOENT {
                    tracing::warn!(error = %e, "{what} failed");
                }
                Err(errno)
            }
            Err(_) => {
                tracing::warn!("{what} did not finish within {timeout:?}: failing it with EIO");
                Err(Errno::EIO)
            }
        }
    }

    fn attr(&self, ino: u64, a: &Attr) -> FileAttr {
        let mtime = UNIX_EPOCH + Duration::from_millis(a.mtime_ms);
        FileAttr {
            ino: INodeNo(ino),
            size: a.size,
            blocks: a.size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind: if a.is_dir { FileType::Directory } else { FileType::RegularFile },
            perm: if a.is_dir { 0o555 } else { 0o444 },
            nlink: if a.is_dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            // Tools size their buffers by it (cat, cp: max(128 KiB, st_blksize)).
            blksize: BLKSIZE,
            flags: 0,
        }
    }

    /// Attributes of `path` from the cache, or from the master.
    fn stat_path(&self, path: &str) -> Result<(u64, Attr), Errno> {
        let cached = {
            let t = self.inodes.lock().unwrap();
            t.known(path).and_then(|ino| t.fresh(ino, Instant::now()).map(|a| (ino, a)))
        };
        if let Some(hit) = cached {
            return Ok(hit);
        }
        match self.call("stat", self.client.stat(path)) {
            Ok(info) => {
                let a = attr_of(&info);
                Ok((self.inodes.lock().unwrap().remember(path, a, Instant::now()), a))
            }
            Err(e) => {
                if e == Errno::ENOENT {
                    self.inodes.lock().unwrap().forget_attr(path);
                }
                Err(e)
            }
        }
    }

    fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        self.inodes.lock().unwrap().path(ino.0).map(str::to_string).ok_or(Errno::ENOENT)
    }

    fn ttl(&self) -> Duration {
        self.opts.attr_ttl
    }

    /// Reads `size` bytes at `offset` of an open file into `buf` (grown as
    /// needed, never cleared: zeroing a MiB per request would cost as much as
    /// the copy); returns how many. Blocks on this host come from their files
    /// (pread), the others through the client's stream.
    fn read_file(&self, f: &OpenFile, offset: u64, size: u32, buf: &mut Vec<u8>) -> Result<usize, Errno> {
        let end = f.length.min(offset.saturating_add(size as u64));
        let total = end.saturating_sub(offset) as usize;
        if buf.len() < total {
            buf.resize(total, 0);
        }
        let mut pos = offset;
        while pos < end {
            let index = (pos / f.block_size.max(1)) as usize;
            let Some(&(start, len)) = f.blocks.get(index) else {
                return Err(Errno::EIO);
            };
            let upto = end.min(start + len);
            let want = (upto - pos) as usize;
            let dst = &mut buf[(pos - offset) as usize..][..want];
            if let Some(file) = f.local_file(index) {
                pread_full(&file, dst, pos - start)?;
                self.stats.local_bytes.fetch_add(want as u64, Ordering::Relaxed);
                pos = upto;
                continue;
            }
            let remote = f.remote.lock().unwrap().contains(&index);
            let got = self.call("read", async {
                let mut r = f.reader.lock().await;
                if !remote {
                    match r.local_block(pos).await? {
                        Some(lb) => return Ok(Some(lb)),
                        None => f.remote.lock().unwrap().push(index),
                    }
                }
                let n = r.read_at(pos, dst).await?;
                if n < want {
                    return Err(ThawError::internal(format!("read {n} of {want} bytes at {pos}")));
                }
                Ok(None)
            })?;
            match got {
                Some(lb) => f.keep_local(index, lb.file),
                None => {
                    self.stats.streamed_bytes.fetch_add(want as u64, Ordering::Relaxed);
                    pos = upto;
                }
            }
        }
        Ok(total)
    }

    /// Answers a read that lies in one block already open on this host by
    /// splicing its file into the reply ([`Splicer`]); the bytes sent, or
    /// `None` if the ordinary path must answer.
    fn splice_local(&self, req: &Request, f: &OpenFile, offset: u64, size: u32) -> Option<u64> {
        let sp = self.splicer.get()?;
        let end = f.length.min(offset.saturating_add(size as u64));
        let index = (offset / f.block_size.max(1)) as usize;
        let &(start, len) = f.blocks.get(index)?;
        if end <= offset || end > start + len {
            return None;
        }
        let file = f.local_file(index)?;
        let n = end - offset;
        sp.reply(req.unique().0, &file, offset - start, n as usize).then_some(n)
    }

    fn refuse_write(&self, reply: ReplyEmpty) {
        reply.error(Errno::EROFS);
    }
}

impl OpenFile {
    fn local_file(&self, index: usize) -> Option<Arc<std::fs::File>> {
        let local = self.local.lock().unwrap();
        local.iter().rev().find(|(i, _)| *i == index).map(|(_, f)| f.clone())
    }

    fn keep_local(&self, index: usize, file: std::fs::File) {
        let mut local = self.local.lock().unwrap();
        local.retain(|(i, _)| *i != index);
        if local.len() >= LOCAL_FILES_KEPT {
            local.remove(0);
        }
        local.push((index, Arc::new(file)));
    }
}

fn pread_full(file: &std::fs::File, mut buf: &mut [u8], mut at: u64) -> Result<(), Errno> {
    while !buf.is_empty() {
        match file.read_at(buf, at) {
            Ok(0) => return Err(Errno::EIO),
            Ok(n) => {
                buf = &mut buf[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::warn!(error = %e, "reading a local block file failed");
                return Err(Errno::EIO);
            }
        }
    }
    Ok(())
}

fn attr_of(info: &FileInfo) -> Attr {
    Attr { is_dir: info.is_dir, size: info.length, mtime_ms: info.mtime_ms, file_id: info.file_id }
}

/// The errno a Thaw error shows through the mount. Anything that is not a
/// statement about the path (a server unreachable, bytes lost, a timeout) is
/// EIO, as a disk that cannot be read.
pub(crate) fn errno(e: &ThawError) -> Errno {
    match e.kind {
        ErrorKind::NotFound => Errno::ENOENT,
        ErrorKind::IsADirectory => Errno::EISDIR,
        ErrorKind::NotADirectory => Errno::ENOTDIR,
        ErrorKind::PermissionDenied => Errno::EACCES,
        ErrorKind::InvalidArgument => Errno::EINVAL,
        // An incomplete file (still being written): not readable yet.
        ErrorKind::FailedPrecondition => Errno::EAGAIN,
        _ => Errno::EIO,
    }
}

impl Filesystem for ThawFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_background(64);
        let _ = config.set_congestion_threshold(48);
        let caps = config.capabilities();
        if self.opts.cache != CacheMode::Always && caps.contains(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP) {
            // Shared mmap of direct_io files (polars maps parquet files).
            let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        }
        if self.opts.splice {
            // Requests that fit a pipe with their header (crate::splice).
            let _ = config.set_max_write(crate::splice::MAX_REQUEST);
        }
        if caps.contains(InitFlags::FUSE_ASYNC_DIO) {
            // A direct_io read larger than one request (1 MiB) goes out as
            // requests served in parallel by the event-loop threads.
            let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        }
        if self.opts.passthrough && caps.contains(InitFlags::FUSE_PASSTHROUGH) {
            // Backing files are tmpfs or disk files (stack depth 0), so 1 suffices.
            if config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok() && config.set_max_stack_depth(1).is_ok() {
                self.passthrough = true;
            }
        }
        if self.opts.passthrough && !self.passthrough {
            tracing::info!("the kernel offers no FUSE passthrough: local blocks are read with pread");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let path = {
            let t = self.inodes.lock().unwrap();
            name.to_str().and_then(|n| t.child_path(parent.0, n))
        };
        let Some(path) = path else {
            return reply.error(Errno::ENOENT);
        };
        match self.stat_path(&path) {
            Ok((ino, a)) => reply.entry(&self.ttl(), &self.attr(ino, &a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let r = self.path(ino).and_then(|p| self.stat_path(&p));
        match r {
            Ok((ino, a)) => reply.attr(&self.ttl(), &self.attr(ino, &a)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY || flags.0 & (libc::O_TRUNC | libc::O_APPEND) != 0 {
            return reply.error(Errno::EROFS);
        }
        let path = match self.path(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let mut reader = match self.call("open", self.client.open(&path)) {
            Ok(r) => r,
            Err(e) => return reply.error(e),
        };
        let info = reader.info().clone();
        let blocks: Vec<(u64, u64)> = info.blocks.iter().map(|b| (b.offset, b.length)).collect();
        self.inodes.lock().unwrap().remember(&path, attr_of(&info), Instant::now());
        // A file of one block on this host: the kernel reads its block file
        // itself (passthrough), no request reaches this process.
        let mut local_first = None;
        if self.passthrough && blocks.len() == 1 {
            match self.call("open", reader.local_block(0)) {
                Ok(Some(lb)) => local_first = Some(lb.file),
                Ok(None) => {}
                Err(e) => return reply.error(e),
            }
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let mut backing = None;
        if let Some(file) = &local_first {
            let mut by_ino = self.backing.lock().unwrap();
            let id = match by_ino.get(&ino.0).and_then(Weak::upgrade) {
                Some(id) => Some(id),
                None => match reply.open_backing(file) {
                    Ok(id) => {
                        let id = Arc::new(id);
                        by_ino.insert(ino.0, Arc::downgrade(&id));
                        Some(id)
                    }
                    Err(e) => {
                        tracing::info!(error = %e, path, "passthrough refused; serving reads with pread");
                        None
                    }
                },
            };
            backing = id;
        }
        let direct = match self.opts.cache {
            CacheMode::Never => true,
            CacheMode::Always => false,
            CacheMode::Auto => {
                !crate::inodes::read_in_small_pieces(&path)
                    && !self.inodes.lock().unwrap().small_reads(ino.0, info.file_id)
            }
        };
        let open = Arc::new(OpenFile {
            length: info.length,
            block_size: info.block_size,
            blocks,
            reader: tokio::sync::Mutex::new(reader),
            local: Mutex::new(local_first.into_iter().map(|f| (0, Arc::new(f))).collect()),
            remote: Mutex::default(),
            _backing: backing.clone(),
            direct: direct && backing.is_none(),
            file_id: info.file_id,
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
        });
        self.files.lock().unwrap().insert(fh, open);
        let flags = if direct {
            FopenFlags::FOPEN_DIRECT_IO
        } else if self.inodes.lock().unwrap().keep_cache(ino.0, info.file_id) {
            FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::empty()
        };
        self.stats.opens.fetch_add(1, Ordering::Relaxed);
        if backing.is_some() {
            self.stats.passthrough_opens.fetch_add(1, Ordering::Relaxed);
        }
        match backing {
            Some(id) => reply.opened_passthrough(FileHandle(fh), FopenFlags::empty(), &id),
            None => reply.opened(FileHandle(fh), flags),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(f) = self.files.lock().unwrap().get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        if f.direct {
            f.reads.fetch_add(1, Ordering::Relaxed);
            f.read_bytes.fetch_add(u64::from(size), Ordering::Relaxed);
        }
        if let Some(n) = self.splice_local(req, &f, offset, size) {
            self.stats.local_bytes.fetch_add(n, Ordering::Relaxed);
            self.stats.spliced_bytes.fetch_add(n, Ordering::Relaxed);
            // Answered on the fd: fuser's reply must not answer again.
            std::mem::forget(reply);
            return;
        }
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with_borrow_mut(|buf| match self.read_file(&f, offset, size, buf) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(e),
        });
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let closed = self.files.lock().unwrap().remove(&fh.0);
        if let Some(f) = closed.filter(|f| f.direct) {
            let (reads, bytes) = (f.reads.load(Ordering::Relaxed), f.read_bytes.load(Ordering::Relaxed));
            self.inodes.lock().unwrap().note_reads(ino.0, f.file_id, reads, bytes);
        }
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let path = match self.path(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let listing = match self.call("list", self.client.list(&path)) {
            Ok(l) => l,
            Err(e) => return reply.error(e),
        };
        let parent = if path == "/" {
            ROOT
        } else {
            let up = path.rsplit_once('/').map(|(p, _)| if p.is_empty() { "/" } else { p }).unwrap_or("/");
            self.inodes.lock().unwrap().ino(up)
        };
        let mut entries =
            vec![(ino.0, FileType::Directory, ".".to_string()), (parent, FileType::Directory, "..".into())];
        {
            // The listing's attributes serve the `stat`s that follow it (`ls -l`).
            let mut t = self.inodes.lock().unwrap();
            let now = Instant::now();
            for info in &listing {
                let Some(child) = t.child_path(ino.0, &info.name) else { continue };
                let ino = t.remember(&child, attr_of(info), now);
                let kind = if info.is_dir { FileType::Directory } else { FileType::RegularFile };
                entries.push((ino, kind, info.name.clone()));
            }
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.dirs.lock().unwrap().insert(fh, Arc::new(entries));
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let Some(entries) = self.dirs.lock().unwrap().get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.dirs.lock().unwrap().remove(&fh.0);
        reply.ok();
    }

    /// `df` of the mount shows the cluster's memory: the MEM tiers of the live
    /// workers (size and used), the namespace's files, and nothing available
    /// (the mount is read-only).
    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let status = match self.call("statfs", self.client.cluster_status()) {
            Ok(s) => s,
            Err(e) => return reply.error(e),
        };
        let mem =
            status.workers.iter().filter(|w| w.alive).flat_map(|w| &w.tiers).filter(|t| t.tier == Tier::Mem as i32);
        let (capacity, used) = mem.fold((0u64, 0u64), |(c, u), t| (c + t.capacity, u + t.used.min(t.capacity)));
        const UNIT: u64 = 4096;
        reply.statfs(capacity / UNIT, (capacity - used) / UNIT, 0, status.files, 0, 1 << 20, 255, UNIT as u32);
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    /// Permissions are checked by the kernel (`default_permissions`).
    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    /// Thaw files have no extended attributes.
    fn getxattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENODATA);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, size: u32, reply: ReplyXattr) {
        if size == 0 { reply.size(0) } else { reply.data(&[]) }
    }

    // ---- writes: refused (the mount is read-only) ----

    fn setattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        reply.error(Errno::EROFS);
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::EROFS);
    }

    fn mkdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, _mode: u32, _umask: u32, reply: ReplyEntry) {
        reply.error(Errno::EROFS);
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        self.refuse_write(reply);
    }

    fn rmdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        self.refuse_write(reply);
    }

    fn symlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, _target: &std::path::Path, reply: ReplyEntry) {
        reply.error(Errno::EROFS);
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.refuse_write(reply);
    }

    fn link(&self, _req: &Request, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        reply.error(Errno::EROFS);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        reply.error(Errno::EROFS);
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(Errno::EROFS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_errnos_a_program_understands() {
        assert_eq!(errno(&ThawError::not_found("x")), Errno::ENOENT);
        assert_eq!(errno(&ThawError::unavailable("master gone")), Errno::EIO);
        assert_eq!(errno(&ThawError::timeout("slow")), Errno::EIO);
        assert_eq!(errno(&ThawError::data_lost("gone")), Errno::EIO);
        assert_eq!(errno(&ThawError::is_dir("d")), Errno::EISDIR);
        assert_eq!(errno(&ThawError::precondition("incomplete")), Errno::EAGAIN);
    }
}

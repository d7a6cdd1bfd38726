//! Reading from Python. Reads are positional (the Python file object keeps the
//! position), so one native reader serves `read`, `readinto` and random access.
//! `read_buffer_at` maps block files that live on this host and hands out a
//! read-only buffer over them: pyarrow and numpy take such a buffer without a
//! copy. A range that crosses blocks is served from the blocks' files mapped
//! side by side into one contiguous range of addresses, so it needs no copy
//! either (pyarrow's coalesced reads often cross a block boundary).

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use thaw_client::FileReader;
use thaw_common::{Result, ThawError};

use crate::buffer::RawView;
use crate::convert::{json_to_py, thaw_err};
use crate::owned::Owned;
use crate::runtime::block_on;

/// Mapped blocks kept per reader: enough for a reader moving between a few
/// column chunks, few enough not to pin evicted blocks' memory for long.
const MAPS_KEPT: usize = 4;

struct State {
    reader: Option<FileReader>,
    /// (file offset where the mapping starts, mapping of local block files),
    /// most recent last.
    maps: VecDeque<(u64, Arc<SpanMap>)>,
}

/// A file open for reading. `state` is locked with the GIL released (a read
/// holds it for its whole length, and no other Python thread may wait on it
/// while holding the GIL), except when it is free ([`NativeReader::with_state`]).
#[pyclass(module = "thaw._native", frozen)]
pub struct NativeReader {
    state: Owned<Mutex<State>>,
    zero_copy: AtomicU64,
    info: serde_json::Value,
    length: u64,
    block_size: u64,
    path: String,
}

impl NativeReader {
    pub fn new(reader: FileReader) -> Self {
        let info = thaw_client::json::file_json(reader.info());
        let (length, block_size, path) = (reader.len(), reader.info().block_size.max(1), reader.info().path.clone());
        NativeReader {
            state: Owned::new(Mutex::new(State { reader: Some(reader), maps: VecDeque::new() })),
            zero_copy: AtomicU64::new(0),
            info,
            length,
            block_size,
            path,
        }
    }

    /// Bytes a read of `n` at `offset` returns (fewer at the end of the file).
    fn clip(&self, offset: u64, n: Option<u64>) -> usize {
        let rest = self.length.saturating_sub(offset);
        n.map_or(rest, |n| n.min(rest)) as usize
    }

    fn state(&self) -> PyResult<&Mutex<State>> {
        self.state.get("this Thaw file")
    }

    /// Runs `f` on the state: at once, the GIL held, if no read holds it;
    /// else with the GIL released while that read finishes (it may need the
    /// GIL to end). Why not always release it: a file object is often closed
    /// by another library's thread as its last reference goes (pyarrow's I/O
    /// threads, as pandas.read_parquet returns), and one that gives the GIL
    /// up while the interpreter is shutting down can never take it back: the
    /// process hung at exit (or aborted, "terminate called without an
    /// active exception") in about one run of four.
    fn with_state<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut State) -> R + Send) -> PyResult<R> {
        let state = self.state()?;
        match state.try_lock() {
            Ok(mut st) => Ok(f(&mut st)),
            Err(std::sync::TryLockError::Poisoned(e)) => Ok(f(&mut e.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => {
                Ok(py.detach(|| f(&mut state.lock().unwrap_or_else(|e| e.into_inner()))))
            }
        }
    }

    fn closed_error(&self) -> PyErr {
        PyValueError::new_err(format!("I/O operation on closed file {}", self.path))
    }

    /// Reads exactly `buf.len()` bytes at `offset` (the caller clipped it to the file).
    fn read_into(&self, state: &Mutex<State>, offset: u64, buf: &mut [u8]) -> Result<std::result::Result<(), ()>> {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(reader) = st.reader.as_mut() else { return Ok(Err(())) };
        let n = block_on(reader.read_at(offset, buf))?;
        if n != buf.len() {
            return Err(ThawError::internal(format!(
                "{} ended at {} bytes, {} expected",
                self.path,
                offset + n as u64,
                offset + buf.len() as u64
            )));
        }
        Ok(Ok(()))
    }

    /// A mapping covering [offset, offset + n) of the file, made of the local
    /// files of the blocks the range touches; None if one of them is not on this
    /// host (or the blocks cannot sit side by side: a length not page-aligned).
    fn mapping(&self, state: &Mutex<State>, offset: u64, n: u64) -> Result<Option<(u64, Arc<SpanMap>)>> {
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        let end = offset + n;
        if let Some(i) = st.maps.iter().position(|(o, m)| *o <= offset && end <= *o + m.len as u64) {
            let m = st.maps.remove(i).expect("index from position");
            st.maps.push_back(m.clone());
            return Ok(Some(m));
        }
        let Some(reader) = st.reader.as_mut() else { return Ok(None) };
        let (first, last) = (offset / self.block_size, (end - 1) / self.block_size);
        let mut blocks = Vec::new();
        for k in first..=last {
            match block_on(reader.local_block(k * self.block_size))? {
                Some(b) => blocks.push(b),
                None => return Ok(None),
            }
        }
        let Some(map) = SpanMap::new(&blocks)? else { return Ok(None) };
        let m = (blocks[0].offset, Arc::new(map));
        st.maps.push_back(m.clone());
        if st.maps.len() > MAPS_KEPT {
            st.maps.pop_front();
        }
        Ok(Some(m))
    }
}

/// Local block files mapped read-only, one after another, into one contiguous
/// range of addresses (an anonymous reservation, then each file mapped over its
/// part with MAP_FIXED). Block files are immutable once committed, and a block
/// is evicted by unlinking its file, which leaves a mapping valid.
pub struct SpanMap {
    ptr: usize,
    len: usize,
}

impl SpanMap {
    /// None if a block other than the last has a length that is not a multiple
    /// of the page size (its successor could not start right after it).
    fn new(blocks: &[thaw_client::LocalBlock]) -> std::io::Result<Option<SpanMap>> {
        use std::os::fd::AsRawFd;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        if blocks.iter().rev().skip(1).any(|b| b.length % page != 0) || blocks.iter().any(|b| b.length == 0) {
            return Ok(None);
        }
        let len: u64 = blocks.iter().map(|b| b.length).sum();
        let len = len as usize;
        // SAFETY: a fresh anonymous reservation; on success it is ours to map over.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let span = SpanMap { ptr: base as usize, len };
        let mut at = 0usize;
        for b in blocks {
            let want = (span.ptr + at) as *mut libc::c_void;
            // SAFETY: `want..want+length` lies inside the reservation owned by
            // `span` (unmapped whole on drop, also on the error path below).
            let got = unsafe {
                libc::mmap(
                    want,
                    b.length as usize,
                    libc::PROT_READ,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    b.file.as_raw_fd(),
                    0,
                )
            };
            if got == libc::MAP_FAILED || got != want {
                return Err(std::io::Error::last_os_error());
            }
            at += b.length as usize;
        }
        Ok(Some(span))
    }

    fn as_ptr(&self) -> *const u8 {
        self.ptr as *const u8
    }
}

impl Drop for SpanMap {
    fn drop(&mut self) {
        // SAFETY: the range was mapped by `new` and nothing refers to it any more
        // (buffers hold an Arc of this map).
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

#[pymethods]
impl NativeReader {
    #[getter]
    fn length(&self) -> u64 {
        self.length
    }

    #[getter]
    fn block_size(&self) -> u64 {
        self.block_size
    }

    #[getter]
    fn path(&self) -> String {
        self.path.clone()
    }

    /// The file's status when it was opened, with its blocks and replicas.
    fn info(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        json_to_py(py, &self.info)
    }

    /// `n` bytes at `offset` (all the rest if `n` is None; fewer at the end).
    #[pyo3(signature = (offset, n=None))]
    fn read_at<'py>(&self, py: Python<'py>, offset: u64, n: Option<u64>) -> PyResult<Bound<'py, PyBytes>> {
        let state = self.state()?;
        let n = self.clip(offset, n);
        // A bytes object made uninitialised and filled in place: one copy, from
        // the block into the object (`PyBytes::new_with` would zero it first).
        // SAFETY: PyBytes_FromStringAndSize(NULL, n) returns a new bytes object
        // of n bytes (or NULL with an exception set); no other code can see it
        // until it is returned, so writing its n bytes here is sound.
        let bytes = unsafe {
            let ptr = ffi::PyBytes_FromStringAndSize(std::ptr::null(), n as ffi::Py_ssize_t);
            Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked::<PyBytes>()
        };
        let addr = unsafe { ffi::PyBytes_AsString(bytes.as_ptr()) } as usize;
        let r = py.detach(|| {
            // SAFETY: see above; `bytes` is alive (held by this frame) meanwhile.
            let buf = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, n) };
            self.read_into(state, offset, buf)
        });
        match r {
            Ok(Ok(())) => Ok(bytes),
            Ok(Err(())) => Err(self.closed_error()),
            Err(e) => Err(thaw_err(e)),
        }
    }

    /// Fills a writable buffer (bytearray, numpy array of any dtype, ...) from
    /// `offset`; returns the bytes read (fewer than its size at the end of the file).
    fn readinto_at(&self, py: Python<'_>, offset: u64, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let state = self.state()?;
        let view = RawView::get(buffer, true)
            .map_err(|e| PyBufferError::new_err(format!("readinto needs a writable, contiguous buffer: {e}")))?;
        let n = self.clip(offset, Some(view.len() as u64));
        let addr = view.addr();
        let r = py.detach(|| {
            // SAFETY: `view` holds the exporter's buffer (and the exporter) until
            // it is dropped after this call; `n` is within its length.
            let slice = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, n) };
            self.read_into(state, offset, slice)
        });
        drop(view);
        match r {
            Ok(Ok(())) => Ok(n),
            Ok(Err(())) => Err(self.closed_error()),
            Err(e) => Err(thaw_err(e)),
        }
    }

    /// `n` bytes at `offset` as a read-only buffer over the mapped local block
    /// file(s), without a copy; None when a block of the range is not on this
    /// host (the caller then reads a copy with `read_at`). A cold block that a
    /// worker here can fill from the under-store is filled first.
    fn read_buffer_at(&self, py: Python<'_>, offset: u64, n: u64) -> PyResult<Option<BlockBuffer>> {
        let n = self.clip(offset, Some(n)) as u64;
        if n == 0 {
            return Ok(None);
        }
        let state = self.state()?;
        let Some((start, map)) = py.detach(|| self.mapping(state, offset, n)).map_err(thaw_err)? else {
            return Ok(None);
        };
        let at = offset - start;
        self.zero_copy.fetch_add(n, Ordering::Relaxed);
        Ok(Some(BlockBuffer { map, start: at as usize, len: n as usize }))
    }

    /// Bytes read so far by where they came from: short_circuit (copied from a
    /// local block file), zero_copy (handed out as mapped buffers), remote_mem,
    /// remote_disk, under_store; and failovers.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let state = self.state()?;
        let s = py.detach(|| {
            state.lock().unwrap_or_else(|e| e.into_inner()).reader.as_ref().map(FileReader::stats).unwrap_or_default()
        });
        let v = serde_json::json!({
            "short_circuit": s.short_circuit,
            "zero_copy": self.zero_copy.load(Ordering::Relaxed),
            "remote_mem": s.remote_mem,
            "remote_disk": s.remote_disk,
            "under_store": s.under_store,
            "failovers": s.failovers,
        });
        json_to_py(py, &v)
    }

    /// Releases connections and mappings (buffers already handed out stay valid).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.with_state(py, |st| {
            st.reader = None;
            st.maps.clear();
        })
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        self.with_state(py, |st| st.reader.is_none())
    }
}

/// A read-only byte range of a mapped block file, exported through the buffer
/// protocol (`memoryview(b)`, `pyarrow.py_buffer(b)`, `numpy.frombuffer(b)`).
/// It keeps the mapping alive for as long as any view of it exists.
#[pyclass(module = "thaw._native", frozen)]
pub struct BlockBuffer {
    map: Arc<SpanMap>,
    start: usize,
    len: usize,
}

#[pymethods]
impl BlockBuffer {
    fn __len__(&self) -> usize {
        self.len
    }

    /// # Safety
    /// Called by Python with a valid `Py_buffer` to fill.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no Py_buffer to fill"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("a Thaw block buffer is read-only"));
        }
        let me = slf.get();
        let ptr = me.map.as_ptr().wrapping_add(me.start);
        debug_assert!(me.start + me.len <= me.map.len);
        // SAFETY: `view` is valid (checked non-null, given by Python); the pointer
        // stays valid while `obj` (this object, which owns the mapping) lives.
        unsafe {
            (*view).buf = ptr as *mut std::ffi::c_void;
            (*view).len = me.len as ffi::Py_ssize_t;
            (*view).readonly = 1;
            (*view).itemsize = 1;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                c"B".as_ptr() as *mut std::ffi::c_char
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape =
                if flags & ffi::PyBUF_ND == ffi::PyBUF_ND { &mut (*view).len } else { std::ptr::null_mut() };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }

    /// # Safety
    /// Called by Python; nothing to free (the mapping goes with the object).
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

//! A contiguous byte view of any buffer-protocol object, whatever its item
//! format (numpy float arrays, pickle's PickleBuffer, memoryviews), as Python's
//! own file objects accept.

use pyo3::ffi;
use pyo3::prelude::*;

pub struct RawView {
    view: Box<ffi::Py_buffer>,
}

impl RawView {
    /// Asks for the object's bytes as one C-contiguous run (writable if asked).
    pub fn get(obj: &Bound<'_, PyAny>, writable: bool) -> PyResult<RawView> {
        // SAFETY: a zeroed Py_buffer is what PyObject_GetBuffer expects to fill.
        let mut view = Box::new(unsafe { std::mem::zeroed::<ffi::Py_buffer>() });
        let flags = if writable { ffi::PyBUF_WRITABLE } else { ffi::PyBUF_SIMPLE };
        // SAFETY: `obj` is a live object (we hold the GIL); `view` is ours to fill.
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, flags) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(RawView { view })
    }

    /// The start address (as a number, to cross `py.detach`); valid while `self` lives.
    pub fn addr(&self) -> usize {
        self.view.buf as usize
    }

    pub fn len(&self) -> usize {
        self.view.len.max(0) as usize
    }
}

impl Drop for RawView {
    fn drop(&mut self) {
        // SAFETY: the view was filled by PyObject_GetBuffer; views are dropped by
        // the method that took them, with the GIL held.
        unsafe { ffi::PyBuffer_Release(&mut *self.view) }
    }
}

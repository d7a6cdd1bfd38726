//! Values that belong to the process that made them. A fork copies a process's
//! memory but not its threads, and the child shares the parent's sockets and
//! epoll instance: a child using (or merely dropping) the parent's connections
//! would read the parent's replies or deregister its sockets. So in any other
//! process these values refuse to be used, and are leaked, never dropped.

use std::mem::ManuallyDrop;

use pyo3::PyResult;
use thaw_common::ThawError;

use crate::convert::thaw_err;

pub struct Owned<T> {
    pid: u32,
    value: ManuallyDrop<T>,
}

impl<T> Owned<T> {
    pub fn new(value: T) -> Self {
        Owned { pid: std::process::id(), value: ManuallyDrop::new(value) }
    }

    /// The value, in the process that made it.
    pub fn get(&self, what: &str) -> PyResult<&T> {
        if self.pid == std::process::id() {
            Ok(&self.value)
        } else {
            Err(thaw_err(ThawError::precondition(format!(
                "{what} was opened in process {} before a fork; open it again in this process",
                self.pid
            ))))
        }
    }

    pub fn is_ours(&self) -> bool {
        self.pid == std::process::id()
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if self.is_ours() {
            // SAFETY: dropped once, here; never used again.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
    }
}

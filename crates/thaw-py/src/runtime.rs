//! The tokio runtime under every Python call: one per process, made on first use
//! and made again in a forked child (a fork copies no threads, so the parent's
//! runtime would never run anything there).

use std::future::Future;
use std::sync::Mutex;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::convert::thaw_err;

static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

fn runtime() -> &'static Runtime {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    match *slot {
        Some((p, rt)) if p == pid => rt,
        _ => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("thaw-client")
                .enable_all()
                .build()
                .expect("cannot start the Thaw client runtime");
            // Lives as long as the process (a parent's, after a fork, is never run).
            let rt: &'static Runtime = Box::leak(Box::new(rt));
            *slot = Some((pid, rt));
            rt
        }
    }
}

/// Runs a future to completion on the process's runtime (call with the GIL released).
pub fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// Runs `f` inside the runtime's context (for constructors that spawn tasks).
pub fn enter<R>(f: impl FnOnce() -> R) -> R {
    let _guard = runtime().enter();
    f()
}

/// Runs a client call with the GIL released; its error becomes the matching
/// `thaw.errors` exception.
pub fn wait<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Future<Output = thaw_common::Result<T>> + Send,
    T: Send,
{
    py.detach(|| block_on(f)).map_err(thaw_err)
}

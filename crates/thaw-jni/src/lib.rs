//! The JVM binding of the Thaw client: the native methods of
//! `io.thaw.client.NativeClient` (java/thaw-hadoop), over `thaw-client`. One
//! data-protocol implementation serves Rust, Python and the JVM alike, with
//! short-circuit reads, master fail-over and auth; one tokio runtime per JVM
//! serves every handle (as OpenDAL's Java binding and hdfs-native do).
//!
//! Handles are boxed Rust values passed to Java as `long`s; metadata crosses
//! as the protobuf bytes of `proto/thaw/v1` messages, which Java decodes with
//! classes generated from the same files. A Thaw error becomes an
//! `io.thaw.client.ThawException` carrying its kind; a panic or a JNI
//! failure, a `RuntimeException`.

mod client;
mod errors;
mod io;

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Runtime;

/// The runtime under every call: made on first use, living as long as the JVM.
fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("thaw-jni")
            .enable_all()
            .build()
            .expect("cannot start the Thaw client runtime")
    })
}

/// Runs a client call to completion on the calling Java thread (the
/// runtime's workers run what it spawns: read-ahead, lease renewals).
fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// A boxed value handed to Java as a `long`.
fn into_handle<T>(v: T) -> i64 {
    Box::into_raw(Box::new(v)) as i64
}

/// The value behind a handle. Java passes back only handles it was given and
/// not yet freed (`io.thaw.client` guards against use after close).
fn handle<'a, T>(h: i64) -> errors::Result<&'a T> {
    if h == 0 {
        return Err(errors::Failure::Thaw(thaw_common::ThawError::precondition("handle is closed")));
    }
    // SAFETY: `h` came from `into_handle::<T>` and was not freed (see above).
    Ok(unsafe { &*(h as *const T) })
}

/// Frees a handle (0: nothing).
fn free_handle<T>(h: i64) -> Option<T> {
    if h == 0 {
        return None;
    }
    // SAFETY: `h` came from `into_handle::<T>`; Java frees each handle once.
    Some(*unsafe { Box::from_raw(h as *mut T) })
}

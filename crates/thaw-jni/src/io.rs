//! Native methods of `NativeClient` on readers and writers. Each handle is a
//! mutex around the Rust reader or writer: Java serialises its calls too, but
//! the native side must stay sound whatever a caller does.

use std::sync::Mutex;

use jni::EnvUnowned;
use jni::objects::{JByteArray, JByteBuffer, JClass, JLongArray, JString};
use jni::sys::{jboolean, jint, jlong};
use thaw_client::{Client, FileReader, FileWriter, WriteOptions, parse_write_type};

use crate::client::{proto, string};
use crate::errors::{Failure, Result, Throw, invalid};
use crate::{block_on, free_handle, handle, into_handle};

type Reader = Mutex<FileReader>;
type Writer = Mutex<Option<FileWriter>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `off`/`len` checked against a buffer of `cap` bytes.
fn range(off: jint, len: jint, cap: usize) -> Result<std::ops::Range<usize>> {
    let (o, l) = (usize::try_from(off), usize::try_from(len));
    match (o, l) {
        (Ok(o), Ok(l)) if o.checked_add(l).is_some_and(|e| e <= cap) => Ok(o..o + l),
        _ => Err(invalid(format!("offset {off} and length {len} do not fit a buffer of {cap} bytes"))),
    }
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_open<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    path: JString<'l>,
) -> jlong {
    env.with_env(|env| -> Result<jlong> {
        let (c, path) = (handle::<Client>(h)?.clone(), string(env, &path, "path")?);
        let r: Reader = Mutex::new(block_on(c.open(&path))?);
        Ok(into_handle(r))
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_readerInfo<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    r: jlong,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let info = lock(handle::<Reader>(r)?).info().clone();
        proto(env, &info)
    })
    .resolve::<Throw>()
}

/// Reads at `pos` into `buf` (as many bytes as are there, or -1 at the end).
fn pread(r: jlong, pos: jlong, buf: &mut [u8]) -> Result<jint> {
    let pos = u64::try_from(pos).map_err(|_| invalid(format!("negative position {pos}")))?;
    let mut reader = lock(handle::<Reader>(r)?);
    if pos >= reader.len() {
        return Ok(if buf.is_empty() { 0 } else { -1 });
    }
    let n = block_on(reader.read_at(pos, buf))?;
    Ok(n as jint)
}

thread_local! {
    /// Each Java thread's staging buffer for reads into `byte[]` (JNI copies
    /// into a Java array; a fresh buffer per call would cost a page fault per
    /// page).
    static STAGING: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_pread<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    r: jlong,
    pos: jlong,
    buf: JByteArray<'l>,
    off: jint,
    len: jint,
) -> jint {
    env.with_env(|env| -> Result<jint> {
        let want = range(off, len, buf.len(env)?)?;
        if let Some(n) = pread_mem_now(env, r, pos, &buf, want.clone())? {
            return Ok(n);
        }
        STAGING.with(|s| -> Result<jint> {
            let mut stage = s.borrow_mut();
            if stage.len() < want.len() {
                stage.resize(want.len(), 0);
            }
            let n = pread(r, pos, &mut stage[..want.len()])?;
            if n > 0 {
                // SAFETY: u8 and i8 have the same size and alignment.
                let bytes: &[i8] = unsafe { std::slice::from_raw_parts(stage.as_ptr().cast(), n as usize) };
                buf.set_region(env, want.start as i32, bytes)?;
            }
            Ok(n)
        })
    })
    .resolve::<Throw>()
}

/// A read from a MEM block file on this host straight into the Java array
/// (pinned for the length of one `pread` of a tmpfs file, no other JNI call
/// meanwhile): no staging copy. `None` when the bytes at `pos` are not in such
/// a file already open (the staged path reads them).
fn pread_mem_now(
    env: &jni::Env<'_>,
    r: jlong,
    pos: jlong,
    buf: &JByteArray<'_>,
    want: std::ops::Range<usize>,
) -> Result<Option<jint>> {
    let Ok(pos) = u64::try_from(pos) else { return Ok(None) };
    let mut reader = lock(handle::<Reader>(r)?);
    if want.is_empty() || pos >= reader.len() {
        return Ok(None);
    }
    // SAFETY: no JNI call happens while the elements are held (only a pread).
    let mut elems = unsafe { buf.get_elements_critical(env, jni::objects::ReleaseMode::CopyBack)? };
    let all: &mut [i8] = &mut elems;
    // SAFETY: u8 and i8 have the same size and alignment.
    let dst: &mut [u8] = unsafe { std::slice::from_raw_parts_mut(all.as_mut_ptr().add(want.start).cast(), want.len()) };
    match reader.read_mem_now(pos, dst) {
        None => Ok(None),
        Some(r) => Ok(Some(r? as jint)),
    }
}

/// A direct buffer's bytes `[off, off+len)`.
fn direct<'a>(env: &jni::Env<'_>, b: &JByteBuffer<'_>, off: jint, len: jint) -> Result<&'a mut [u8]> {
    if b.is_null() {
        return Err(invalid("buffer is null"));
    }
    let addr = env.get_direct_buffer_address(b)?;
    let cap = env.get_direct_buffer_capacity(b)?;
    let want = range(off, len, cap)?;
    if addr.is_null() {
        return Err(invalid("not a direct buffer"));
    }
    // SAFETY: the JVM keeps a direct buffer's memory alive while the Java
    // caller holds it (for the length of this call) and `want` lies inside it.
    Ok(unsafe { std::slice::from_raw_parts_mut(addr.add(want.start), want.len()) })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_preadDirect<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    r: jlong,
    pos: jlong,
    buf: JByteBuffer<'l>,
    off: jint,
    len: jint,
) -> jint {
    env.with_env(|env| -> Result<jint> { pread(r, pos, direct(env, &buf, off, len)?) }).resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_readStats<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    r: jlong,
) -> JLongArray<'l> {
    env.with_env(|env| -> Result<JLongArray<'l>> {
        let s = lock(handle::<Reader>(r)?).stats();
        let v = [s.short_circuit, s.remote_mem, s.remote_disk, s.under_store, s.failovers].map(|x| x as i64);
        let out = env.new_long_array(v.len())?;
        out.set_region(env, 0, &v)?;
        Ok(out)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_unbufferReader<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    r: jlong,
) {
    env.with_env(|_env| -> Result<()> {
        lock(handle::<Reader>(r)?).unbuffer();
        Ok(())
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_closeReader<'l>(
    _env: EnvUnowned<'l>,
    _c: JClass<'l>,
    r: jlong,
) {
    drop(free_handle::<Reader>(r));
}

// ---- writing ----

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_create<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    path: JString<'l>,
    write_type: JString<'l>,
    block_size: jlong,
    overwrite: jboolean,
    recursive: jboolean,
    mode: jint,
    length: jlong,
    temporary: jboolean,
) -> jlong {
    env.with_env(|env| -> Result<jlong> {
        let (c, path) = (handle::<Client>(h)?.clone(), string(env, &path, "path")?);
        let mut opts = WriteOptions::default();
        if !write_type.is_null() {
            let (w, replication) = parse_write_type(&write_type.try_to_string(env)?)?;
            opts.write_type = w;
            opts.replication = replication;
        }
        opts.block_size = u64::try_from(block_size).map_err(|_| invalid(format!("block size {block_size}")))?;
        opts.length = (length != 0)
            .then(|| u64::try_from(length).map_err(|_| invalid(format!("length {length}"))))
            .transpose()?;
        opts.overwrite = overwrite;
        opts.recursive = recursive;
        opts.temporary = temporary;
        opts.mode = match mode {
            m if m < 0 => None,
            m if m <= 0o7777 => Some(m as u32),
            m => return Err(invalid(format!("mode {m:o} has bits beyond 07777"))),
        };
        let w: Writer = Mutex::new(Some(block_on(c.create(&path, opts))?));
        Ok(into_handle(w))
    })
    .resolve::<Throw>()
}

fn write(w: jlong, data: &[u8]) -> Result<()> {
    let mut g = lock(handle::<Writer>(w)?);
    let writer = g.as_mut().ok_or_else(|| invalid("writer is closed"))?;
    Ok(block_on(writer.write(data))?)
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_write<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    w: jlong,
    buf: JByteArray<'l>,
    off: jint,
    len: jint,
) {
    env.with_env(|env| -> Result<()> {
        let want = range(off, len, buf.len(env)?)?;
        STAGING.with(|s| -> Result<()> {
            let mut stage = s.borrow_mut();
            if stage.len() < want.len() {
                stage.resize(want.len(), 0);
            }
            // SAFETY: u8 and i8 have the same size and alignment.
            let dst: &mut [i8] = unsafe { std::slice::from_raw_parts_mut(stage.as_mut_ptr().cast(), want.len()) };
            buf.get_region(env, want.start as i32, dst)?;
            write(w, &stage[..want.len()])
        })
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_writeDirect<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    w: jlong,
    buf: JByteBuffer<'l>,
    off: jint,
    len: jint,
) {
    env.with_env(|env| -> Result<()> { write(w, direct(env, &buf, off, len)?) }).resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_written<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    w: jlong,
) -> jlong {
    env.with_env(|_env| -> Result<jlong> {
        let g = lock(handle::<Writer>(w)?);
        Ok(g.as_ref().map(|w| w.written()).unwrap_or(0) as jlong)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_closeWriter<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    w: jlong,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let writer = free_handle::<Writer>(w).and_then(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()));
        let writer = writer.ok_or_else(|| Failure::Thaw(thaw_common::ThawError::precondition("writer is closed")))?;
        let info = block_on(writer.close())?;
        proto(env, &info)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_abortWriter<'l>(
    _env: EnvUnowned<'l>,
    _c: JClass<'l>,
    w: jlong,
) {
    let writer = free_handle::<Writer>(w).and_then(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()));
    if let Some(writer) = writer {
        block_on(writer.abort());
    }
}

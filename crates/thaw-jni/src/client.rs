//! Native methods of `NativeClient` on a client handle: connecting, the
//! namespace, jobs (migration) and lineage.

use std::time::Duration;

use jni::EnvUnowned;
use jni::objects::{JByteArray, JClass, JLongArray, JObjectArray, JString};
use jni::sys::{jboolean, jint, jlong};
use prost::Message;
use thaw_client::Client;
use thaw_common::proto::{DependencyKind, EvictionMode, GetStatusResponse};

use crate::errors::{Result, Throw, invalid};
use crate::{block_on, free_handle, handle, into_handle, runtime};

/// A Java string argument (null: an error naming `what`).
pub fn string(env: &jni::Env<'_>, s: &JString<'_>, what: &str) -> Result<String> {
    if s.is_null() {
        return Err(invalid(format!("{what} is null")));
    }
    Ok(s.try_to_string(env)?)
}

/// A Java string argument that may be null.
fn opt_string(env: &jni::Env<'_>, s: &JString<'_>) -> Result<Option<String>> {
    if s.is_null() { Ok(None) } else { Ok(Some(s.try_to_string(env)?)) }
}

/// A Java `String[]` (null: empty).
fn strings(env: &mut jni::Env<'_>, a: &JObjectArray<'_, JString<'_>>) -> Result<Vec<String>> {
    if a.is_null() {
        return Ok(Vec::new());
    }
    let n = a.len(env)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let s = a.get_element(env, i)?;
        out.push(string(env, &s, "an array element")?);
    }
    Ok(out)
}

/// A message's protobuf bytes as a Java `byte[]`.
pub fn proto<'l, M: Message>(env: &mut jni::Env<'l>, m: &M) -> Result<JByteArray<'l>> {
    Ok(env.byte_array_from_slice(&m.encode_to_vec())?)
}

fn client(h: jlong) -> Result<Client> {
    Ok(handle::<Client>(h)?.clone())
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_connect<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    options: JObjectArray<'l, JString<'l>>,
) -> jlong {
    env.with_env(|env| -> Result<jlong> {
        let mut pairs = Vec::new();
        for kv in strings(env, &options)? {
            let (k, v) =
                kv.split_once('=').ok_or_else(|| invalid(format!("client option {kv:?}: expected key=value")))?;
            pairs.push((k.to_string(), v.to_string()));
        }
        let _guard = runtime().enter();
        Ok(into_handle(thaw_client::connect_with(&pairs)?))
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_withJob<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    job: JString<'l>,
) -> jlong {
    env.with_env(|env| -> Result<jlong> {
        let job = string(env, &job, "job")?;
        Ok(into_handle(client(h)?.with_job(job)))
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_free<'l>(_env: EnvUnowned<'l>, _c: JClass<'l>, h: jlong) {
    drop(free_handle::<Client>(h));
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_stat<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    path: JString<'l>,
    blocks: jboolean,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let (c, path) = (client(h)?, string(env, &path, "path")?);
        let (info, read_through_workers) = block_on(c.stat_blocks(&path, blocks))?;
        proto(env, &GetStatusResponse { info: Some(info), read_through_workers })
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_list<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    path: JString<'l>,
    blocks: jboolean,
    start_after: JString<'l>,
    limit: jint,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let (c, path) = (client(h)?, string(env, &path, "path")?);
        let after = opt_string(env, &start_after)?.unwrap_or_default();
        let limit = u32::try_from(limit).map_err(|_| invalid(format!("limit {limit} is negative")))?;
        let page = block_on(c.list_page(&path, blocks, &after, limit))?;
        proto(env, &page)
    })
    .resolve::<Throw>()
}

/// Permission bits from Java (&lt; 0: the default).
fn mode(m: jint) -> Result<Option<u32>> {
    match m {
        m if m < 0 => Ok(None),
        m if m <= 0o7777 => Ok(Some(m as u32)),
        m => Err(invalid(format!("mode {m:o} has bits beyond 07777"))),
    }
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_mkdir<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    path: JString<'l>,
    recursive: jboolean,
    exist_ok: jboolean,
    m: jint,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let (c, path) = (client(h)?, string(env, &path, "path")?);
        let info = block_on(c.mkdir_with_mode(&path, recursive, exist_ok, mode(m)?))?;
        proto(env, &info)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_delete<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    path: JString<'l>,
    recursive: jboolean,
) {
    env.with_env(|env| -> Result<()> {
        let (c, path) = (client(h)?, string(env, &path, "path")?);
        Ok(block_on(c.delete(&path, recursive))?)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_rename<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    src: JString<'l>,
    dst: JString<'l>,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let (c, src, dst) = (client(h)?, string(env, &src, "source")?, string(env, &dst, "destination")?);
        let info = block_on(c.rename(&src, &dst))?;
        proto(env, &info)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_setAttributes<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    path: JString<'l>,
    m: jint,
    owner: JString<'l>,
    group: JString<'l>,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let (c, path) = (client(h)?, string(env, &path, "path")?);
        let (owner, group) = (opt_string(env, &owner)?, opt_string(env, &group)?);
        let info = block_on(c.set_attributes(&path, mode(m)?, owner, group))?;
        proto(env, &info)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_whoAmI<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let me = block_on(client(h)?.who_am_i())?;
        proto(env, &me)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_clusterStatus<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let st = block_on(client(h)?.cluster_status())?;
        proto(env, &st)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_persistWait<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    path: JString<'l>,
    timeout_ms: jlong,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let (c, path) = (client(h)?, string(env, &path, "path")?);
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        let info = block_on(c.persist_wait(&path, timeout))?;
        proto(env, &info)
    })
    .resolve::<Throw>()
}

// ---- jobs ----

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_migrate<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    job: JString<'l>,
    paths: JObjectArray<'l, JString<'l>>,
    eviction: JString<'l>,
    lease_ms: jlong,
    origin: JString<'l>,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let (c, job) = (client(h)?, string(env, &job, "job")?);
        let paths = strings(env, &paths)?;
        let eviction = match opt_string(env, &eviction)?.as_deref() {
            None | Some("" | "explicit") => EvictionMode::Explicit,
            Some("implicit") => EvictionMode::Implicit,
            Some(other) => return Err(invalid(format!("eviction {other:?}: explicit or implicit"))),
        };
        let lease = (lease_ms > 0).then(|| Duration::from_millis(lease_ms as u64));
        let origin = opt_string(env, &origin)?.unwrap_or_default();
        let info = block_on(c.migrate_with_origin(&job, &paths, eviction, lease, &origin))?;
        proto(env, &info)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_renewLeases<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    jobs: JObjectArray<'l, JString<'l>>,
) -> JObjectArray<'l, JString<'l>> {
    env.with_env(|env| -> Result<JObjectArray<'l, JString<'l>>> {
        let jobs = strings(env, &jobs)?;
        let unknown = block_on(client(h)?.renew_leases(&jobs))?;
        let out = JObjectArray::<JString>::new(env, unknown.len(), JString::null())?;
        for (i, j) in unknown.iter().enumerate() {
            let s = env.new_string(j)?;
            out.set_element(env, i, &s)?;
        }
        Ok(out)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_evict<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    job: JString<'l>,
    paths: JObjectArray<'l, JString<'l>>,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let (c, job) = (client(h)?, string(env, &job, "job")?);
        let paths = strings(env, &paths)?;
        match block_on(c.evict(&job, &paths))? {
            Some(info) => proto(env, &info),
            None => Ok(JByteArray::null()),
        }
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_jobs<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    job: JString<'l>,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let job = opt_string(env, &job)?.filter(|j| !j.is_empty());
        let r = block_on(client(h)?.jobs(job.as_deref()))?;
        proto(env, &r)
    })
    .resolve::<Throw>()
}

// ---- lineage ----

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_submitDependency<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    inputs: JLongArray<'l>,
    outputs: JObjectArray<'l, JString<'l>>,
    command: JObjectArray<'l, JString<'l>>,
    config: JByteArray<'l>,
    kind: JString<'l>,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let c = client(h)?;
        let fids: Vec<u64> = if inputs.is_null() {
            Vec::new()
        } else {
            let mut v = vec![0i64; inputs.len(env)?];
            inputs.get_region(env, 0, &mut v)?;
            v.into_iter().map(|x| x as u64).collect()
        };
        let (outputs, command) = (strings(env, &outputs)?, strings(env, &command)?);
        let config = if config.is_null() { Vec::new() } else { env.convert_byte_array(&config)? };
        let kind = match opt_string(env, &kind)?.as_deref() {
            None | Some("" | "wide") => DependencyKind::Wide,
            Some("narrow") => DependencyKind::Narrow,
            Some(other) => return Err(invalid(format!("kind {other:?}: narrow or wide"))),
        };
        let l = block_on(c.submit_dependency(&fids, &outputs, &command, &config, kind))?;
        proto(env, &l)
    })
    .resolve::<Throw>()
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_thaw_client_NativeClient_lineage<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    h: jlong,
    id: jlong,
    path: JString<'l>,
) -> JByteArray<'l> {
    env.with_env(|env| -> Result<JByteArray<'l>> {
        let path = opt_string(env, &path)?.unwrap_or_default();
        let l = block_on(client(h)?.lineage(id.max(0) as u64, &path))?;
        proto(env, &l)
    })
    .resolve::<Throw>()
}

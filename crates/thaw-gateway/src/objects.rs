//! Objects: HEAD, GET (ranges, conditions), PUT, DELETE, DeleteObjects and
//! CopyObject over Thaw files.
//!
//! ETags are not MD5s of the bytes (computing one would read every byte
//! written): a hash of the file's id, length and modification time, so an
//! unchanged file keeps its ETag and a rewritten one gets a new one, which
//! is what clients use them for (caching, `If-Match`).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Result};
use sha2::{Digest, Sha256};
use thaw_client::{FileReader, FileWriter, WriteOptions};
use thaw_common::proto::{FileInfo, WriteType};
use thaw_common::{ErrorKind, ThawError};

use crate::buckets::{check, timestamp};
use crate::errors::object_error;
use crate::names::object_path;
use crate::{Gateway, READ_CHUNK};

/// Most keys in one DeleteObjects request (S3's limit).
pub const MAX_DELETE_KEYS: usize = 1000;

/// The header naming a PUT's write type (also as metadata
/// `x-amz-meta-thaw-write-type`, for clients that only send metadata).
pub const WRITE_TYPE_HEADER: &str = "x-thaw-write-type";

pub fn etag(info: &FileInfo) -> ETag {
    let mut h = Sha256::new();
    h.update(info.file_id.to_le_bytes());
    h.update(info.length.to_le_bytes());
    h.update(info.mtime_ms.to_le_bytes());
    let d = h.finalize();
    ETag::Strong(d[..16].iter().map(|b| format!("{b:02x}")).collect())
}

/// The object at `key`: a complete file, or NoSuchKey / NoSuchBucket.
pub(crate) async fn stat_object(g: &Gateway, bucket: &str, key: &str) -> S3Result<FileInfo> {
    let p = object_path(bucket, key)?;
    match g.client().stat(&p.path).await {
        Ok(info) if info.is_dir == p.dir && info.complete => Ok(info),
        Ok(_) => Err(no_such_key(key)),
        Err(e) if e.kind == ErrorKind::NotFound => {
            check(g, bucket).await?;
            Err(no_such_key(key))
        }
        Err(e) => Err(object_error(e)),
    }
}

pub(crate) fn no_such_key(key: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::NoSuchKey, format!("no object {key:?}"))
}

fn ms_of(t: &Timestamp) -> u64 {
    let t: time::OffsetDateTime = t.clone().into();
    (t.unix_timestamp_nanos() / 1_000_000).max(0) as u64
}

fn matches(cond: &ETagCondition, tag: &ETag) -> bool {
    match cond {
        ETagCondition::Any => true,
        ETagCondition::ETag(t) => t.value() == tag.value(),
    }
}

/// RFC 9110's order: If-Match, If-Unmodified-Since (when no If-Match),
/// If-None-Match, If-Modified-Since (when no If-None-Match). HTTP dates
/// have whole seconds, so times compare at that precision.
fn preconditions(
    info: &FileInfo,
    if_match: Option<&ETagCondition>,
    if_unmodified_since: Option<&Timestamp>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let tag = etag(info);
    let mtime_s = info.mtime_ms / 1000;
    let failed = || S3Error::with_message(S3ErrorCode::PreconditionFailed, "a precondition does not hold");
    let not_modified = || S3Error::new(S3ErrorCode::NotModified);
    match (if_match, if_unmodified_since) {
        (Some(c), _) if !matches(c, &tag) => return Err(failed()),
        (None, Some(t)) if mtime_s > ms_of(t) / 1000 => return Err(failed()),
        _ => {}
    }
    match (if_none_match, if_modified_since) {
        (Some(c), _) if matches(c, &tag) => Err(not_modified()),
        (None, Some(t)) if mtime_s <= ms_of(t) / 1000 => Err(not_modified()),
        _ => Ok(()),
    }
}

/// [`preconditions`] with the four condition fields HEAD and GET inputs share.
macro_rules! conditions {
    ($info:expr, $input:expr) => {
        preconditions(
            $info,
            $input.if_match.as_ref(),
            $input.if_unmodified_since.as_ref(),
            $input.if_none_match.as_ref(),
            $input.if_modified_since.as_ref(),
        )
    };
}

pub async fn head(g: &Gateway, input: HeadObjectInput) -> S3Result<HeadObjectOutput> {
    let info = stat_object(g, &input.bucket, &input.key).await?;
    conditions!(&info, input)?;
    Ok(HeadObjectOutput {
        content_length: Some(info.length as i64),
        e_tag: Some(etag(&info)),
        last_modified: Some(timestamp(info.mtime_ms)),
        accept_ranges: Some("bytes".to_string()),
        ..Default::default()
    })
}

pub async fn get(g: &Gateway, input: GetObjectInput) -> S3Result<GetObjectOutput> {
    // A file's open answers its status too: one master RPC a GET, not a
    // stat and then an open.
    let (info, reader) = open_object(g, &input.bucket, &input.key).await?;
    conditions!(&info, input)?;
    let len = info.length;
    let (range, content_range) = match &input.range {
        None => (0..len, None),
        Some(r) => {
            let range = r.check(len).map_err(|_| {
                S3Error::with_message(
                    S3ErrorCode::InvalidRange,
                    format!("the range is not within the object's {len} bytes"),
                )
            })?;
            let cr = format!("bytes {}-{}/{len}", range.start, range.end - 1);
            (range, Some(cr))
        }
    };
    let body = match reader {
        Some(mut reader) if !range.is_empty() => {
            reader.seek(range.start);
            // The first chunk is read before answering: a read that cannot
            // start (data lost, an under-store gone) is an S3 error the client
            // sees and may retry, not a body cut after its headers said 200.
            let n = range.end - range.start;
            let mut first = vec![0u8; (n as usize).min(READ_CHUNK)];
            let got = reader.read_exact_or_eof(&mut first).await.map_err(object_error)?;
            if got < first.len() {
                return Err(S3Error::with_message(S3ErrorCode::InternalError, "the file ended early"));
            }
            let rest = body_stream(reader, n - got as u64);
            let stream = futures::stream::once(async move { Ok(Bytes::from(first)) }).chain(rest);
            StreamingBlob::wrap(sync_wrapper::SyncStream::new(stream))
        }
        _ => StreamingBlob::wrap(futures::stream::empty::<Result<Bytes, std::io::Error>>()),
    };
    Ok(GetObjectOutput {
        body: Some(body),
        content_length: Some((range.end - range.start) as i64),
        content_range,
        e_tag: Some(etag(&info)),
        last_modified: Some(timestamp(info.mtime_ms)),
        accept_ranges: Some("bytes".to_string()),
        ..Default::default()
    })
}

/// The object at `key` and, for a file, a reader of it: what
/// [`stat_object`] answers, in the same one RPC that opens the file.
async fn open_object(g: &Gateway, bucket: &str, key: &str) -> S3Result<(FileInfo, Option<FileReader>)> {
    let p = object_path(bucket, key)?;
    if p.dir {
        return Ok((stat_object(g, bucket, key).await?, None));
    }
    match g.client().open(&p.path).await {
        Ok(reader) => Ok((reader.info().clone(), Some(reader))),
        Err(e) if e.kind == ErrorKind::NotFound => {
            check(g, bucket).await?;
            Err(no_such_key(key))
        }
        // A directory, or a file still being written: no object there yet.
        Err(e) if matches!(e.kind, ErrorKind::IsADirectory | ErrorKind::FailedPrecondition) => Err(no_such_key(key)),
        Err(e) => Err(object_error(e)),
    }
}

/// `n` bytes from `reader`'s position, a chunk at a time. A read that fails
/// ends the body with the error (the client sees a short body and retries).
pub(crate) fn body_stream(
    reader: FileReader,
    n: u64,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::try_unfold((reader, n), |(mut reader, left)| async move {
        if left == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; (left as usize).min(READ_CHUNK)];
        let got = reader.read_exact_or_eof(&mut buf).await.map_err(|e| std::io::Error::other(e.message))?;
        if got == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file ended early"));
        }
        buf.truncate(got);
        Ok(Some((Bytes::from(buf), (reader, left - got as u64))))
    })
}

/// A PUT's write type: its header, else its `thaw-write-type` metadata, else
/// the gateway's default.
pub fn write_type(g: &Gateway, headers: &http::HeaderMap, metadata: Option<&Metadata>) -> S3Result<WriteType> {
    let named = match headers.get(WRITE_TYPE_HEADER) {
        Some(v) => Some(v.to_str().map_err(|_| invalid_write_type("not text"))?.to_string()),
        None => metadata.and_then(|m| m.get("thaw-write-type").cloned()),
    };
    match named {
        None => Ok(g.inner.config.write_type),
        Some(s) => match thaw_client::parse_write_type(&s) {
            Ok((wt, _)) => Ok(wt),
            Err(e) => Err(invalid_write_type(&e.message)),
        },
    }
}

fn invalid_write_type(why: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidArgument, format!("{WRITE_TYPE_HEADER}: {why}"))
}

pub async fn put(g: &Gateway, input: PutObjectInput, wt: WriteType) -> S3Result<PutObjectOutput> {
    let p = object_path(&input.bucket, &input.key)?;
    let length = input.content_length.map(|l| l.max(0) as u64);
    if p.dir {
        check(g, &input.bucket).await?;
        if length.unwrap_or(0) > 0 {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "a key ending in '/' is a directory: it holds no bytes",
            ));
        }
        let info = g.client().mkdir(&p.path, true, true).await.map_err(object_error)?;
        return Ok(PutObjectOutput { e_tag: Some(etag(&info)), ..Default::default() });
    }
    let body = input.body.map(|b| b.map_err(|e| ThawError::invalid(format!("the request body: {e}"))));
    let info = store(g, &p.path, wt, length, body).await?;
    Ok(PutObjectOutput { e_tag: Some(etag(&info)), ..Default::default() })
}

/// Writes `body` (of `length` bytes, if said) to `path`, in one create and
/// one complete at the master. A new key is written in place (an
/// unfinished file is no object, so listings and GETs do not see it until it
/// completes, and a failed body deletes it). Over an object, the master
/// stages the new file in this gateway's directory and moves it onto the
/// key when it completes, replacing the old one in one step, so a failed or
/// short body leaves the old object. Missing directories of the key are
/// made, never its bucket. (Two PUTs racing to make the same new key: the
/// one that came second replaces the first's when it completes, and the
/// first fails if it was still writing; S3 would let both succeed, the last
/// one winning.)
pub(crate) async fn store<S>(
    g: &Gateway,
    path: &str,
    wt: WriteType,
    length: Option<u64>,
    body: Option<S>,
) -> S3Result<FileInfo>
where
    S: futures::Stream<Item = thaw_common::Result<Bytes>> + Unpin,
{
    let bucket = path.split('/').nth(1).unwrap_or_default();
    let opts = WriteOptions {
        write_type: wt,
        length,
        recursive: true,
        overwrite: false,
        recursive_under: Some(format!("/{bucket}")),
        stage_at: Some(staged_path(g)),
        ..WriteOptions::of(wt)
    };
    let w = match g.client().create(path, opts).await {
        Ok(w) => w,
        Err(e) if e.kind == ErrorKind::NotFound => {
            check(g, bucket).await?;
            return Err(object_error(e));
        }
        Err(e) if e.kind == ErrorKind::AlreadyExists => {
            return Err(object_error(ThawError::invalid(format!("{path} is a directory (it has keys under it)"))));
        }
        Err(e) => return Err(object_error(e)),
    };
    let staged = w.info().path != path;
    let r = fill(g, w, length, body).await;
    // A failed body leaves no directory it made either.
    if r.is_err()
        && !staged
        && let Some((parent, _)) = path.rsplit_once('/')
    {
        remove_empty_dirs(g, bucket, parent).await;
    }
    let info = r?;
    if staged {
        return Ok(take_dir_group(g, path, info).await);
    }
    Ok(info)
}

/// Writes `body` into `w` and completes it; any failure (a stalled or
/// short body, a full tier) deletes the partial file.
async fn fill<S>(g: &Gateway, mut w: FileWriter, length: Option<u64>, body: Option<S>) -> S3Result<FileInfo>
where
    S: futures::Stream<Item = thaw_common::Result<Bytes>> + Unpin,
{
    let mut written = 0u64;
    if let Some(mut body) = body {
        let stall = g.inner.config.body_timeout;
        loop {
            // A client that stops sending mid-body loses its request, not
            // the gateway a connection and a staged file forever.
            let chunk = match tokio::time::timeout(stall, body.next()).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(_) => Err(ThawError::invalid(format!("the body stalled: no byte for {stall:?}"))),
            };
            let r = match chunk {
                Ok(c) => {
                    written += c.len() as u64;
                    w.write(&c).await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                w.abort().await;
                return Err(match e.kind {
                    ErrorKind::InvalidArgument => S3Error::with_message(S3ErrorCode::IncompleteBody, e.message),
                    _ => object_error(e),
                });
            }
        }
    }
    if let Some(l) = length
        && l != written
    {
        w.abort().await;
        return Err(S3Error::with_message(
            S3ErrorCode::IncompleteBody,
            format!("the body has {written} bytes of the {l} its Content-Length says"),
        ));
    }
    w.close().await.map_err(object_error)
}

/// A new staging path, unique in this gateway's life.
pub(crate) fn staged_path(g: &Gateway) -> String {
    format!("{}/put-{}-{}", g.home(), std::process::id(), g.inner.uploads.fetch_add(1, Ordering::Relaxed))
}

/// On a cluster with a secret, an object moved into place takes its
/// directory's group, as a file written there directly does (a rename keeps
/// the staged file's): where its user is in that group. Else it keeps its own.
async fn take_dir_group(g: &Gateway, path: &str, info: FileInfo) -> FileInfo {
    let c = g.client();
    let parent = path.rsplit_once('/').map(|(p, _)| p).unwrap_or("/");
    if g.inner.keys.is_some()
        && let Ok(dir) = c.stat(parent).await
        && dir.group != info.group
    {
        return c.set_attributes(path, None, None, Some(dir.group)).await.unwrap_or(info);
    }
    info
}

/// Deletes the object at `key` (none there: nothing to do, as S3), then its
/// parent directories that are left empty, up to the bucket (S3 has no
/// directories; a tree keeps them).
pub async fn delete(g: &Gateway, bucket: &str, key: &str) -> S3Result<()> {
    if let Some(parent) = delete_only(g, bucket, key).await? {
        remove_empty_dirs(g, bucket, &parent).await;
    }
    Ok(())
}

/// Deletes the object at `key`; returns its parent directory if it deleted
/// something.
async fn delete_only(g: &Gateway, bucket: &str, key: &str) -> S3Result<Option<String>> {
    let p = object_path(bucket, key)?;
    let c = g.client();
    match c.stat(&p.path).await {
        Ok(info) if info.is_dir != p.dir => return Ok(None),
        Ok(_) => match c.delete(&p.path, false).await {
            Ok(()) => {}
            // A directory key with keys under it: they stay, as in S3.
            Err(e) if matches!(e.kind, ErrorKind::NotFound | ErrorKind::DirectoryNotEmpty) => return Ok(None),
            Err(e) => return Err(object_error(e)),
        },
        Err(e) if e.kind == ErrorKind::NotFound => {
            check(g, bucket).await?;
            return Ok(None);
        }
        Err(e) => return Err(object_error(e)),
    }
    Ok(p.path.rsplit_once('/').map(|(d, _)| d.to_string()))
}

/// Removes `dir` and its parents while they are empty, up to the bucket.
/// (Each try costs the master a look at the directory: a DeleteObjects
/// tries each parent once, after all its deletes.)
async fn remove_empty_dirs(g: &Gateway, bucket: &str, dir: &str) {
    let root = format!("/{bucket}");
    let mut dir = dir.to_string();
    while dir.len() > root.len() && dir.starts_with(&root) {
        if g.client().delete(&dir, false).await.is_err() {
            break;
        }
        dir = dir.rsplit_once('/').map(|(d, _)| d.to_string()).unwrap_or_default();
    }
}

pub async fn delete_many(g: &Gateway, input: DeleteObjectsInput) -> S3Result<DeleteObjectsOutput> {
    let keys = input.delete.objects;
    if keys.len() > MAX_DELETE_KEYS {
        return Err(S3Error::with_message(
            S3ErrorCode::MalformedXML,
            format!("a DeleteObjects request names at most {MAX_DELETE_KEYS} keys (this one {})", keys.len()),
        ));
    }
    check(g, &input.bucket).await?;
    let quiet = input.delete.quiet.unwrap_or(false);
    let bucket = &input.bucket;
    let results = futures::stream::iter(keys)
        .map(|o| async move {
            let r = delete_only(g, bucket, &o.key).await;
            (o.key, r)
        })
        .buffered(16)
        .collect::<Vec<_>>()
        .await;
    // Emptied directories, deepest first, each tried once.
    let mut parents: Vec<&String> = results.iter().filter_map(|(_, r)| r.as_ref().ok()?.as_ref()).collect();
    parents.sort_by(|a, b| b.matches('/').count().cmp(&a.matches('/').count()).then(a.cmp(b)));
    parents.dedup();
    for dir in parents {
        remove_empty_dirs(g, bucket, dir).await;
    }
    let (mut deleted, mut errors) = (Vec::new(), Vec::new());
    for (key, r) in results {
        match r {
            Ok(_) if !quiet => deleted.push(DeletedObject { key: Some(key), ..Default::default() }),
            Ok(_) => {}
            Err(e) => errors.push(Error {
                code: Some(e.code().as_str().to_string()),
                key: Some(key),
                message: e.message().map(str::to_string),
                version_id: None,
            }),
        }
    }
    Ok(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() })
}

pub async fn copy(g: &Gateway, input: CopyObjectInput, wt: WriteType) -> S3Result<CopyObjectOutput> {
    let CopySource::Bucket { bucket, key, .. } = &input.copy_source else {
        return Err(S3Error::with_message(S3ErrorCode::NotImplemented, "copies from access points"));
    };
    let src = stat_object(g, bucket, key).await?;
    if src.is_dir {
        return Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "a directory key holds no bytes to copy"));
    }
    let dst = object_path(&input.bucket, &input.key)?;
    if dst.dir {
        return Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "a key ending in '/' holds no bytes"));
    }
    check(g, &input.bucket).await?;
    let reader = g.client().open(&src.path).await.map_err(object_error)?;
    let body = body_stream(reader, src.length).map_err(|e| ThawError::unavailable(format!("reading the source: {e}")));
    let info = store(g, &dst.path, wt, Some(src.length), Some(Box::pin(body))).await?;
    Ok(CopyObjectOutput {
        copy_object_result: Some(CopyObjectResult {
            e_tag: Some(etag(&info)),
            last_modified: Some(timestamp(info.mtime_ms)),
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(id: u64, len: u64, mtime_ms: u64) -> FileInfo {
        FileInfo { file_id: id, length: len, mtime_ms, ..Default::default() }
    }

    #[test]
    fn etags_stay_for_an_unchanged_file_and_change_with_it() {
        assert_eq!(etag(&file(1, 10, 5000)), etag(&file(1, 10, 5000)));
        assert_ne!(etag(&file(1, 10, 5000)), etag(&file(2, 10, 5000)));
        assert_ne!(etag(&file(1, 10, 5000)), etag(&file(1, 11, 5000)));
        assert_eq!(etag(&file(1, 10, 5000)).value().len(), 32);
    }

    #[test]
    fn conditions_follow_rfc_9110() {
        let f = file(1, 10, 100_500);
        let tag = ETagCondition::ETag(etag(&f));
        let other = ETagCondition::ETag(ETag::Strong("0".repeat(32)));
        let at = |s: u64| timestamp(s * 1000);
        let code = |r: S3Result<()>| r.err().map(|e| e.code().clone());
        assert_eq!(code(preconditions(&f, Some(&tag), None, None, None)), None);
        assert_eq!(code(preconditions(&f, Some(&other), None, None, None)), Some(S3ErrorCode::PreconditionFailed));
        assert_eq!(code(preconditions(&f, None, None, Some(&tag), None)), Some(S3ErrorCode::NotModified));
        assert_eq!(
            code(preconditions(&f, None, None, Some(&ETagCondition::Any), None)),
            Some(S3ErrorCode::NotModified)
        );
        assert_eq!(code(preconditions(&f, None, None, Some(&other), None)), None);
        // Modified at second 100: not modified since 100, modified since 99.
        assert_eq!(code(preconditions(&f, None, None, None, Some(&at(100)))), Some(S3ErrorCode::NotModified));
        assert_eq!(code(preconditions(&f, None, None, None, Some(&at(99)))), None);
        assert_eq!(code(preconditions(&f, None, Some(&at(99)), None, None)), Some(S3ErrorCode::PreconditionFailed));
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(code(preconditions(&f, None, None, Some(&other), Some(&at(200)))), None);
    }
}

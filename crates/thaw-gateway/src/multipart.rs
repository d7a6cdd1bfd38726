//! Multipart uploads: create, upload part, list parts, complete, abort.
//!
//! An upload is a staging directory `mpu/<id>` (under `/.thaw-gateway`, or
//! the user's `/.thaw-gateway/u/USER` on a cluster with a secret) holding a
//! `target` file (the write type, bucket and key) and one file per part,
//! each written as a PUT is (a part sent again replaces the first).
//! Completing it writes the parts, in order, as one PUT's body: the object
//! appears whole or not at all. That costs one more pass over the bytes, at memory speed;
//! a master that joined files by their blocks would spare it. Uploads left
//! unfinished are removed by the gateway's sweep after `upload_ttl`.

use futures::{StreamExt, TryStreamExt};
use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Result};
use thaw_common::proto::WriteType;
use thaw_common::{ErrorKind, ThawError};

use crate::Gateway;
use crate::buckets::{check, timestamp};
use crate::errors::object_error;
use crate::names::{STAGING, object_path};
use crate::objects::{body_stream, etag, store};

/// Parts per upload, and the smallest a part but the last may be (S3's).
pub const MAX_PARTS: i32 = 10_000;
pub const MIN_PART_BYTES: u64 = 5 << 20;

/// Where the uploads staged in `home` are.
pub fn uploads_dir(home: &str) -> String {
    format!("{home}/mpu")
}

/// Upload `id`'s directory: among the uploads of the request's user (on a
/// cluster with a secret, another user's upload id names nothing).
fn upload_dir(g: &Gateway, id: &str) -> S3Result<String> {
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(no_such_upload(id));
    }
    Ok(format!("{}/{id}", uploads_dir(g.home())))
}

fn no_such_upload(id: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::NoSuchUpload, format!("no upload {id:?} (completed, aborted or never made)"))
}

fn part_name(n: i32) -> String {
    format!("part-{n:05}")
}

/// The upload's write type, after checking it is for `bucket`/`key`.
async fn target(g: &Gateway, id: &str, bucket: &str, key: &str) -> S3Result<(String, WriteType)> {
    let dir = upload_dir(g, id)?;
    let text = match g.client().read_all(&format!("{dir}/target")).await {
        Ok(t) => String::from_utf8(t).map_err(|_| no_such_upload(id))?,
        Err(e) if e.kind == ErrorKind::NotFound => return Err(no_such_upload(id)),
        Err(e) => return Err(object_error(e)),
    };
    let mut lines = text.splitn(3, '\n');
    let (wt, b, k) = (lines.next(), lines.next(), lines.next());
    if b != Some(bucket) || k != Some(key) {
        return Err(no_such_upload(id));
    }
    let wt = thaw_client::parse_write_type(wt.unwrap_or_default()).map_err(|_| no_such_upload(id))?.0;
    Ok((dir, wt))
}

pub async fn create(
    g: &Gateway,
    input: CreateMultipartUploadInput,
    wt: WriteType,
) -> S3Result<CreateMultipartUploadOutput> {
    let p = object_path(&input.bucket, &input.key)?;
    if p.dir {
        return Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "a key ending in '/' holds no bytes"));
    }
    check(g, &input.bucket).await?;
    let id: String = (0..16).map(|_| format!("{:02x}", rand::random::<u8>())).collect();
    let dir = upload_dir(g, &id)?;
    let label = thaw_common::write_type::of(wt).label;
    let text = format!("{label}\n{}\n{}", input.bucket, input.key);
    let opts = thaw_client::WriteOptions::of(WriteType::CacheThrough);
    g.client().write_all(&format!("{dir}/target"), text.as_bytes(), opts).await.map_err(object_error)?;
    Ok(CreateMultipartUploadOutput {
        bucket: Some(input.bucket),
        key: Some(input.key),
        upload_id: Some(id),
        ..Default::default()
    })
}

pub async fn upload_part(g: &Gateway, input: UploadPartInput) -> S3Result<UploadPartOutput> {
    if !(1..=MAX_PARTS).contains(&input.part_number) {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            format!("part numbers run from 1 to {MAX_PARTS} (this one is {})", input.part_number),
        ));
    }
    let (dir, wt) = target(g, &input.upload_id, &input.bucket, &input.key).await?;
    let length = input.content_length.map(|l| l.max(0) as u64);
    let body = input.body.map(|b| b.map_err(|e| ThawError::invalid(format!("the request body: {e}"))));
    let info = store(g, &format!("{dir}/{}", part_name(input.part_number)), wt, length, body).await?;
    Ok(UploadPartOutput { e_tag: Some(etag(&info)), ..Default::default() })
}

pub async fn list_parts(g: &Gateway, input: ListPartsInput) -> S3Result<ListPartsOutput> {
    let (dir, _) = target(g, &input.upload_id, &input.bucket, &input.key).await?;
    let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
    let after = input.part_number_marker.unwrap_or(0);
    let mut parts: Vec<Part> = g
        .client()
        .list(&dir)
        .await
        .map_err(object_error)?
        .into_iter()
        .filter_map(|e| {
            let n: i32 = e.name.strip_prefix("part-")?.parse().ok()?;
            (n > after).then(|| Part {
                part_number: Some(n),
                size: Some(e.length as i64),
                e_tag: Some(etag(&e)),
                last_modified: Some(timestamp(e.mtime_ms)),
                ..Default::default()
            })
        })
        .collect();
    parts.sort_by_key(|p| p.part_number);
    let truncated = parts.len() > max;
    parts.truncate(max);
    Ok(ListPartsOutput {
        bucket: Some(input.bucket),
        key: Some(input.key),
        upload_id: Some(input.upload_id),
        max_parts: Some(max as i32),
        part_number_marker: input.part_number_marker,
        next_part_number_marker: parts.last().and_then(|p| p.part_number).filter(|_| truncated),
        is_truncated: Some(truncated),
        parts: Some(parts),
        ..Default::default()
    })
}

pub async fn complete(g: &Gateway, input: CompleteMultipartUploadInput) -> S3Result<CompleteMultipartUploadOutput> {
    let (dir, wt) = target(g, &input.upload_id, &input.bucket, &input.key).await?;
    let asked = input.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
    if asked.is_empty() {
        return Err(S3Error::with_message(S3ErrorCode::MalformedXML, "a completion names at least one part"));
    }
    let on_disk = g.client().list(&dir).await.map_err(object_error)?;
    let invalid_part = |n: i32, why: &str| S3Error::with_message(S3ErrorCode::InvalidPart, format!("part {n}: {why}"));
    let numbers: Vec<i32> = asked.iter().map(|p| p.part_number.unwrap_or(0)).collect();
    if numbers.windows(2).any(|w| w[0] >= w[1]) {
        return Err(S3Error::with_message(S3ErrorCode::InvalidPartOrder, "parts are listed in ascending order"));
    }
    let mut parts = Vec::with_capacity(asked.len());
    for (i, (p, &n)) in asked.iter().zip(&numbers).enumerate() {
        let Some(info) = on_disk.iter().find(|e| e.name == part_name(n)) else {
            return Err(invalid_part(n, "not uploaded"));
        };
        if p.e_tag.as_ref().is_some_and(|t| t.value() != etag(info).value()) {
            return Err(invalid_part(n, "its ETag is not the one uploaded"));
        }
        if i + 1 < asked.len() && info.length < MIN_PART_BYTES {
            return Err(S3Error::with_message(
                S3ErrorCode::EntityTooSmall,
                format!("part {n} has {} bytes: every part but the last has at least {MIN_PART_BYTES}", info.length),
            ));
        }
        parts.push(info.clone());
    }
    let dest = object_path(&input.bucket, &input.key)?;
    let total: u64 = parts.iter().map(|p| p.length).sum();
    // The parts, in order, as one body: written like a PUT's (in place for
    // a new key, else staged and renamed onto it).
    let c = g.client();
    let reader = c.clone();
    let body = futures::stream::iter(parts)
        .then(move |part| {
            let c = reader.clone();
            async move {
                let r = c.open(&part.path).await?;
                Ok::<_, ThawError>(body_stream(r, part.length).map_err(|e| ThawError::unavailable(e.to_string())))
            }
        })
        .try_flatten();
    let info = store(g, &dest.path, wt, Some(total), Some(Box::pin(body))).await?;
    let _ = c.delete(&dir, true).await;
    Ok(CompleteMultipartUploadOutput {
        bucket: Some(input.bucket.clone()),
        key: Some(input.key.clone()),
        e_tag: Some(etag(&info)),
        location: Some(format!("/{}/{}", input.bucket, input.key)),
        ..Default::default()
    })
}

pub async fn abort(g: &Gateway, input: AbortMultipartUploadInput) -> S3Result<()> {
    let (dir, _) = target(g, &input.upload_id, &input.bucket, &input.key).await?;
    g.client().delete(&dir, true).await.map_err(object_error)
}

/// Removes uploads, and staged PUTs, untouched for `ttl`: what clients or
/// gateways that died left behind (in the staging directory, and in each
/// user's on a cluster with a secret).
pub async fn sweep(g: &Gateway, ttl: std::time::Duration) -> usize {
    let users = g.client().list(&format!("{STAGING}/u")).await.unwrap_or_default();
    let mut removed = sweep_home(g, STAGING, ttl).await;
    for home in users.iter().filter(|e| e.is_dir) {
        removed += sweep_home(g, &home.path, ttl).await;
    }
    removed
}

async fn sweep_home(g: &Gateway, home: &str, ttl: std::time::Duration) -> usize {
    let now = thaw_common::now_ms();
    let old = |mtime: u64| now.saturating_sub(mtime) > ttl.as_millis() as u64;
    let mut removed = 0;
    let c = g.client();
    let staged = c.list(home).await.unwrap_or_default();
    for e in staged.iter().filter(|e| !e.is_dir && old(e.mtime_ms)) {
        removed += usize::from(c.delete(&e.path, false).await.is_ok());
    }
    for e in c.list(&uploads_dir(home)).await.unwrap_or_default() {
        // An upload's age is that of its newest part.
        let parts = c.list(&e.path).await.unwrap_or_default();
        let newest = parts.iter().map(|p| p.mtime_ms).chain([e.mtime_ms]).max().unwrap_or(0);
        if old(newest) {
            removed += usize::from(c.delete(&e.path, true).await.is_ok());
        }
    }
    removed
}

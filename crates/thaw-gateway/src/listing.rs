//! ListObjectsV2 and ListObjects: a bucket's keys in S3's order (by UTF-8
//! bytes) from a walk of its directory tree.
//!
//! The walk starts at the deepest directory the prefix names, visits each
//! directory's entries sorted as keys (a directory `d` as `d/`, so
//! `d.csv` comes before the keys under `d/`, as in S3), skips subtrees that
//! end before the start key, and with the `/` delimiter never descends: a
//! subdirectory is one common prefix. A directory with no entries is the key
//! `d/` (a PUT of `d/` made it, or its last key was deleted by another
//! client). Continuation tokens are the last key or prefix returned,
//! base64-encoded: the next page starts after it. Each directory is read from
//! the master a page at a time, from where the listing resumes
//! ([`DirCursor`]), and the walk stops at the first key past the prefix.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Result};
use thaw_common::proto::FileInfo;

use crate::Gateway;
use crate::buckets::{check, timestamp};
use crate::dir_cursor::DirCursor;
use crate::names::url_encode;
use crate::objects::etag;

/// S3's largest page.
pub const MAX_KEYS: usize = 1000;

/// A page of a listing.
#[derive(Debug, Default)]
pub struct Page {
    pub objects: Vec<(String, FileInfo)>,
    pub prefixes: Vec<String>,
    pub truncated: bool,
    /// The last key or prefix in the page (where the next starts after).
    pub last: Option<String>,
}

struct Frame {
    /// The key prefix of this directory's entries ("" or ending in `/`).
    key_dir: String,
    entries: DirCursor,
}

/// Lists `bucket`'s keys under `prefix` after `after`, at most `limit`
/// keys and prefixes together, grouping by `delimiter`.
pub async fn walk(
    g: &Gateway,
    bucket: &str,
    prefix: &str,
    delimiter: Option<&str>,
    after: Option<&str>,
    limit: usize,
) -> S3Result<Page> {
    check(g, bucket).await?;
    let mut page = Page::default();
    let base = match prefix.rfind('/') {
        Some(i) => &prefix[..=i],
        None => "",
    };
    let mut stack = Vec::new();
    let resume = after.and_then(|a| a.strip_prefix(base));
    match DirCursor::open(g, bucket, base, resume, &prefix[base.len()..]).await? {
        Some(e) => stack.push(Frame { key_dir: base.to_string(), entries: e }),
        None => return Ok(page),
    }
    let delimiter = delimiter.filter(|d| !d.is_empty());
    let past = |key: &str| after.is_none_or(|a| key > a);
    while let Some(top) = stack.last_mut() {
        let Some(e) = top.entries.next(g).await? else {
            stack.pop();
            continue;
        };
        let key = format!("{}{}{}", top.key_dir, e.name, if e.is_dir { "/" } else { "" });
        if !key.starts_with(prefix) {
            // Keys come in order, and those with the prefix are one run of
            // them: past it, none is left.
            if key.as_str() > prefix {
                break;
            }
            continue;
        }
        // A whole subtree before the start key: skipped unread.
        if e.is_dir && !past(&key) && !after.is_some_and(|a| a.starts_with(&key)) {
            continue;
        }
        if let Some(d) = delimiter
            && let Some(i) = key[prefix.len()..].find(d)
        {
            // This entry's keys (a file's, or all under a directory) share
            // one common prefix: it stands for them.
            let common = &key[..prefix.len() + i + d.len()];
            if past(common) && page.prefixes.last().is_none_or(|p| p != common) {
                if full(&page, limit) {
                    page.truncated = true;
                    break;
                }
                page.prefixes.push(common.to_string());
                page.last = Some(common.to_string());
            }
            continue;
        }
        if e.is_dir {
            // Resumed inside this directory: from where the listing stopped.
            let resume = after.and_then(|a| a.strip_prefix(key.as_str()));
            let children = DirCursor::open(g, bucket, &key, resume, "").await?;
            if children.as_ref().is_none_or(DirCursor::is_empty) {
                if past(&key) {
                    if full(&page, limit) {
                        page.truncated = true;
                        break;
                    }
                    page.last = Some(key.clone());
                    page.objects.push((key, e));
                }
                continue;
            }
            stack.push(Frame { key_dir: key, entries: children.expect("checked") });
            continue;
        }
        if !past(&key) || !e.complete {
            continue;
        }
        if full(&page, limit) {
            page.truncated = true;
            break;
        }
        page.last = Some(key.clone());
        page.objects.push((key, e));
    }
    Ok(page)
}

fn full(page: &Page, limit: usize) -> bool {
    page.objects.len() + page.prefixes.len() >= limit
}

fn max_keys(n: Option<i32>) -> S3Result<usize> {
    match n {
        None => Ok(MAX_KEYS),
        Some(n) if n < 0 => Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "max-keys is negative")),
        Some(n) => Ok((n as usize).min(MAX_KEYS)),
    }
}

fn token_of(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

fn key_of_token(t: &str) -> S3Result<String> {
    URL_SAFE_NO_PAD.decode(t).ok().and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| {
        S3Error::with_message(S3ErrorCode::InvalidArgument, "the continuation token is not one this gateway gave")
    })
}

/// Keys and prefixes as the request asked them encoded.
fn encoder(encoding: Option<&EncodingType>) -> S3Result<fn(&str) -> String> {
    match encoding.map(|e| e.as_str()) {
        None => Ok(str::to_string),
        Some(EncodingType::URL) => Ok(url_encode),
        Some(other) => {
            Err(S3Error::with_message(S3ErrorCode::InvalidArgument, format!("encoding-type {other:?}: only url")))
        }
    }
}

fn contents(page: &Page, enc: fn(&str) -> String) -> (ObjectList, CommonPrefixList) {
    let objects = page
        .objects
        .iter()
        .map(|(key, info)| Object {
            key: Some(enc(key)),
            size: Some(if info.is_dir { 0 } else { info.length as i64 }),
            e_tag: Some(etag(info)),
            last_modified: Some(timestamp(info.mtime_ms)),
            storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
            ..Default::default()
        })
        .collect();
    let prefixes = page.prefixes.iter().map(|p| CommonPrefix { prefix: Some(enc(p)) }).collect();
    (objects, prefixes)
}

pub async fn list_v2(g: &Gateway, input: ListObjectsV2Input) -> S3Result<ListObjectsV2Output> {
    let enc = encoder(input.encoding_type.as_ref())?;
    let limit = max_keys(input.max_keys)?;
    let prefix = input.prefix.clone().unwrap_or_default();
    let after = match (&input.continuation_token, &input.start_after) {
        (Some(t), _) => Some(key_of_token(t)?),
        (None, Some(s)) => Some(s.clone()),
        (None, None) => None,
    };
    let page = walk(g, &input.bucket, &prefix, input.delimiter.as_deref(), after.as_deref(), limit).await?;
    let (objects, prefixes) = contents(&page, enc);
    Ok(ListObjectsV2Output {
        name: Some(input.bucket),
        prefix: Some(enc(&prefix)),
        delimiter: input.delimiter.as_deref().map(enc),
        start_after: input.start_after.as_deref().map(enc),
        max_keys: Some(limit as i32),
        key_count: Some((objects.len() + prefixes.len()) as i32),
        continuation_token: input.continuation_token,
        is_truncated: Some(page.truncated),
        next_continuation_token: page.last.as_deref().filter(|_| page.truncated).map(token_of),
        contents: Some(objects),
        common_prefixes: Some(prefixes),
        encoding_type: input.encoding_type,
        ..Default::default()
    })
}

pub async fn list_v1(g: &Gateway, input: ListObjectsInput) -> S3Result<ListObjectsOutput> {
    let enc = encoder(input.encoding_type.as_ref())?;
    let limit = max_keys(input.max_keys)?;
    let prefix = input.prefix.clone().unwrap_or_default();
    let page = walk(g, &input.bucket, &prefix, input.delimiter.as_deref(), input.marker.as_deref(), limit).await?;
    let (objects, prefixes) = contents(&page, enc);
    Ok(ListObjectsOutput {
        name: Some(input.bucket),
        prefix: Some(enc(&prefix)),
        delimiter: input.delimiter.as_deref().map(enc),
        marker: input.marker.as_deref().map(enc),
        max_keys: Some(limit as i32),
        is_truncated: Some(page.truncated),
        // Sent with a delimiter only, as S3 (clients use the last key otherwise).
        next_marker: page.last.as_deref().filter(|_| page.truncated && input.delimiter.is_some()).map(enc),
        contents: Some(objects),
        common_prefixes: Some(prefixes),
        encoding_type: input.encoding_type,
        ..Default::default()
    })
}

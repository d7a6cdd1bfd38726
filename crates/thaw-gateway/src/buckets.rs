//! Buckets: the top-level directories of the namespace whose names are
//! valid bucket names (others, like the gateway's staging directory, are
//! not listed and cannot be addressed).

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Result};
use thaw_common::ErrorKind;

use crate::Gateway;
use crate::errors::bucket_error;
use crate::names::bucket_path;

pub fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

pub async fn list(g: &Gateway) -> S3Result<ListBucketsOutput> {
    let entries = g.client().list("/").await.map_err(bucket_error)?;
    let buckets = entries
        .into_iter()
        .filter(|e| e.is_dir && s3s::path::check_bucket_name(&e.name))
        .map(|e| Bucket { name: Some(e.name), creation_date: Some(timestamp(e.mtime_ms)), bucket_region: None })
        .collect();
    Ok(ListBucketsOutput { buckets: Some(buckets), ..Default::default() })
}

/// `NoSuchBucket` unless `bucket` is a directory.
pub async fn check(g: &Gateway, bucket: &str) -> S3Result<()> {
    match g.client().stat(&bucket_path(bucket)).await {
        Ok(info) if info.is_dir => Ok(()),
        Ok(_) => Err(S3Error::with_message(S3ErrorCode::NoSuchBucket, format!("/{bucket} is a file, not a bucket"))),
        Err(e) => Err(bucket_error(e)),
    }
}

pub async fn create(g: &Gateway, bucket: &str) -> S3Result<CreateBucketOutput> {
    match g.client().mkdir(&bucket_path(bucket), false, false).await {
        Ok(_) => Ok(CreateBucketOutput { location: Some(format!("/{bucket}")) }),
        Err(e) if e.kind == ErrorKind::AlreadyExists => Err(S3Error::with_message(
            S3ErrorCode::BucketAlreadyOwnedByYou,
            format!("bucket {bucket} exists (the directory /{bucket})"),
        )),
        Err(e) => Err(bucket_error(e)),
    }
}

pub async fn delete(g: &Gateway, bucket: &str) -> S3Result<()> {
    check(g, bucket).await?;
    g.client().delete(&bucket_path(bucket), false).await.map_err(bucket_error)
}

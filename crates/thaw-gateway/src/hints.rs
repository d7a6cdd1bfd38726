//! Job hints from S3 clients: the job a request's reads and writes count
//! against (header `x-thaw-job`, else the gateway's own `--job`), and a small
//! HTTP API beside S3's to move a prefix's objects into memory before a job
//! reads them (Ignem's and DYRS's migration, reached through the same
//! endpoint a training loader or a query engine already uses):
//!
//! - `POST /?thaw=migrate&bucket=B&prefix=P&job=J[&lease=S][&eviction=implicit]`
//!   submits every object under the prefix as job J's inputs (its lease S
//!   seconds, default 600) and answers the job's progress as JSON;
//! - `GET /?thaw=job&job=J` answers its progress;
//! - `POST /?thaw=evict&job=J` releases it.
//!
//! (On the root, which no bucket or key can be, with a `thaw` parameter no S3
//! operation has.)
//!
//! Like the S3 operations, the API takes signed and unsigned requests (the
//! gateway serves clusters without a secret only).

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use s3s::route::S3Route;
use s3s::{Body, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use thaw_common::proto::EvictionMode;

use crate::Gateway;
use crate::errors::{bucket_error, object_error};
use crate::listing::walk;

/// The header naming a request's job.
pub const JOB_HEADER: &str = "x-thaw-job";

/// Objects one migrate call submits at most (a larger prefix: submit its
/// parts, or the directory itself with `thaw migrate`).
pub const MAX_MIGRATE_OBJECTS: usize = 100_000;

impl Gateway {
    /// This gateway for one request: its client carries the request's job,
    /// if it names one.
    pub(crate) fn for_request(&self, headers: &http::HeaderMap) -> S3Result<Gateway> {
        let Some(v) = headers.get(JOB_HEADER) else {
            return Ok(self.clone());
        };
        let job = v.to_str().ok().filter(|j| valid_job(j)).ok_or_else(|| invalid("x-thaw-job: not a job id"))?;
        Ok(self.with_client(self.client().with_job(job)))
    }
}

fn valid_job(j: &str) -> bool {
    !j.is_empty() && j.len() <= 256 && j.chars().all(|c| !c.is_control())
}

fn invalid(why: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidArgument, why.to_string())
}

/// The `/?thaw=...` API.
pub struct HintRoute(pub Gateway);

fn query(uri: &http::Uri) -> HashMap<String, String> {
    url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()).into_owned().collect()
}

fn json(v: serde_json::Value) -> S3Response<Body> {
    let mut r = S3Response::new(Body::from(Bytes::from(v.to_string())));
    r.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

#[async_trait::async_trait]
impl S3Route for HintRoute {
    fn is_match(&self, _m: &http::Method, uri: &http::Uri, _h: &http::HeaderMap, _e: &mut http::Extensions) -> bool {
        uri.path() == "/" && query(uri).contains_key("thaw")
    }

    async fn check_access(&self, _req: &mut S3Request<Body>) -> S3Result<()> {
        Ok(())
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let q = query(&req.uri);
        let job = q.get("job").filter(|j| valid_job(j)).ok_or_else(|| invalid("job=ID is required"))?;
        let c = self.0.client();
        match (req.method.clone(), q.get("thaw").map(String::as_str).unwrap_or_default()) {
            (http::Method::POST, "migrate") => {
                let bucket = q.get("bucket").ok_or_else(|| invalid("bucket=NAME is required"))?;
                let prefix = q.get("prefix").map(String::as_str).unwrap_or_default();
                let lease = match q.get("lease") {
                    None => Duration::from_secs(600),
                    Some(s) => Duration::from_secs(s.parse().map_err(|_| invalid("lease=SECONDS"))?),
                };
                let eviction = match q.get("eviction").map(String::as_str) {
                    None | Some("explicit") => EvictionMode::Explicit,
                    Some("implicit") => EvictionMode::Implicit,
                    Some(_) => return Err(invalid("eviction=explicit|implicit")),
                };
                let page = walk(&self.0, bucket, prefix, None, None, MAX_MIGRATE_OBJECTS + 1).await?;
                if page.objects.len() > MAX_MIGRATE_OBJECTS {
                    return Err(invalid(&format!("more than {MAX_MIGRATE_OBJECTS} objects under the prefix")));
                }
                let paths: Vec<String> =
                    page.objects.iter().filter(|(_, f)| !f.is_dir).map(|(_, f)| f.path.clone()).collect();
                if paths.is_empty() {
                    return Err(S3Error::with_message(S3ErrorCode::NoSuchKey, format!("no objects under {prefix:?}")));
                }
                let origin = format!("s3 gateway: s3://{bucket}/{prefix} ({} objects)", paths.len());
                let info =
                    c.migrate_with_origin(job, &paths, eviction, Some(lease), &origin).await.map_err(object_error)?;
                Ok(json(thaw_client::json::job_info_json(&info)))
            }
            (http::Method::GET, "job") => match c.jobs(Some(job)).await.map_err(bucket_error)?.jobs.first() {
                Some(info) => Ok(json(thaw_client::json::job_info_json(info))),
                None => Err(S3Error::with_message(S3ErrorCode::NoSuchKey, format!("no job {job:?}"))),
            },
            (http::Method::POST, "evict") => {
                c.evict(job, &[]).await.map_err(object_error)?;
                Ok(json(serde_json::json!({ "job_id": job, "released": true })))
            }
            _ => Err(S3Error::with_message(
                S3ErrorCode::NotImplemented,
                "the thaw API: POST /?thaw=migrate, GET /?thaw=job, POST /?thaw=evict",
            )),
        }
    }
}

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
//! Like the S3 operations, the API acts as the request's key's user (on a
//! cluster with a secret, where it must be signed: migrating is reading).

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
    /// This gateway for one request: its client acts as the request's key's
    /// user (a cluster with a secret) and carries the request's job (header
    /// `x-thaw-job`, else its key's default job), if any.
    pub(crate) async fn for_request<T>(&self, req: &S3Request<T>) -> S3Result<Gateway> {
        self.acting(req.credentials.as_ref(), &req.headers).await
    }

    async fn acting(&self, creds: Option<&s3s::auth::Credentials>, headers: &http::HeaderMap) -> S3Result<Gateway> {
        let header_job = match headers.get(JOB_HEADER) {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .filter(|j| valid_job(j))
                    .ok_or_else(|| invalid("x-thaw-job: not a job id"))?
                    .to_string(),
            ),
        };
        let Some(keys) = &self.inner.keys else {
            return Ok(match header_job {
                None => self.clone(),
                Some(job) => self.with_client(self.client().with_job(job), self.home().to_string()),
            });
        };
        let creds = creds.ok_or_else(crate::keys::unsigned)?;
        let acting = keys.acting(&creds.access_key).await?;
        let job = header_job.or((!acting.job.is_empty()).then_some(acting.job));
        let client = match job {
            Some(job) => acting.client.with_job(job),
            None => acting.client,
        };
        Ok(self.with_client(client, acting.home))
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

    async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        match (&self.0.inner.keys, &req.credentials) {
            (Some(_), None) => Err(crate::keys::unsigned()),
            _ => Ok(()),
        }
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let q = query(&req.uri);
        let job = q.get("job").filter(|j| valid_job(j)).ok_or_else(|| invalid("job=ID is required"))?;
        let g = self.0.acting(req.credentials.as_ref(), &http::HeaderMap::new()).await?;
        let c = g.client();
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
                let page = walk(&g, bucket, prefix, None, None, MAX_MIGRATE_OBJECTS + 1).await?;
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

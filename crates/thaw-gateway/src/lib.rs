//! `thaw gateway`: an S3-compatible HTTP endpoint over Thaw's namespace, so
//! any S3 client (boto3, the AWS CLI, pyarrow's and polars' S3 readers,
//! s3fs) reads Thaw memory.
//!
//! The wire protocol (REST routing, XML, SigV4 parsing, S3's error format)
//! is the `s3s` crate's; this crate maps its operations onto the Thaw client:
//! buckets are top-level directories, keys paths under them ([`names`]).
//! Reads go through the same client as every other reader (short-circuit
//! reads of blocks in this host's memory, remote blocks from the worker that
//! holds them, cold blocks filled from the under-store); writes through the
//! write types, staged and renamed into place so a failed upload leaves the
//! old object. Operations not listed in [`Gateway`]'s impl answer S3's
//! `NotImplemented`.

mod buckets;
mod errors;
mod hints;
mod listing;
mod multipart;
pub mod names;
mod objects;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Request, S3Response, S3Result};
use thaw_client::Client;
use thaw_common::proto::WriteType;
use tokio::net::TcpListener;

/// Bytes a GET reads from Thaw per body chunk.
pub const READ_CHUNK: usize = 1 << 20;

/// How the gateway writes and reads.
#[derive(Clone)]
pub struct GatewayConfig {
    /// The write type of a PUT that names none (header `x-thaw-write-type`
    /// or metadata `x-amz-meta-thaw-write-type`).
    pub write_type: WriteType,
    /// The access key and secret key that signed (SigV4) requests must use;
    /// unsigned requests are served too (anonymous access: the gateway runs
    /// only against clusters that check no credentials).
    pub key: (String, String),
    /// Unfinished multipart uploads (and staged PUTs) untouched this long
    /// are removed.
    pub upload_ttl: std::time::Duration,
    /// How long a request body may send nothing before the request fails.
    pub body_timeout: std::time::Duration,
}

/// How often the gateway looks for uploads past their time.
pub const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The key pair of a gateway not told one (documented, as MinIO's default
/// is: clients must sign with something).
pub const DEFAULT_ACCESS_KEY: &str = "thaw";
pub const DEFAULT_SECRET_KEY: &str = "thawsecret";

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            write_type: WriteType::CacheThrough,
            key: (DEFAULT_ACCESS_KEY.to_string(), DEFAULT_SECRET_KEY.to_string()),
            upload_ttl: std::time::Duration::from_secs(24 * 3600),
            body_timeout: std::time::Duration::from_secs(60),
        }
    }
}

/// The S3 service over one Thaw client.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    config: GatewayConfig,
    /// Names of staged uploads, unique in this process (shared by the
    /// per-request copies of [`Gateway::for_request`]).
    uploads: Arc<AtomicU64>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("write_type", &self.inner.config.write_type).finish()
    }
}

impl Gateway {
    pub fn new(client: Client, config: GatewayConfig) -> Self {
        Gateway { inner: Arc::new(Inner { client, config, uploads: Arc::new(AtomicU64::new(0)) }) }
    }

    /// The same gateway over another client (one carrying a job).
    fn with_client(&self, client: Client) -> Gateway {
        let inner = Inner { client, config: self.inner.config.clone(), uploads: self.inner.uploads.clone() };
        Gateway { inner: Arc::new(inner) }
    }

    fn client(&self) -> &Client {
        &self.inner.client
    }

    /// Serves S3 on `listener` until `shutdown` resolves; connections in
    /// flight get up to 10 s to finish.
    pub async fn serve(self, listener: TcpListener, shutdown: impl std::future::Future<Output = ()>) {
        let sweeper = {
            let (g, ttl) = (self.clone(), self.inner.config.upload_ttl);
            let every = SWEEP_EVERY.min(ttl.max(std::time::Duration::from_secs(1)));
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    let n = multipart::sweep(&g, ttl).await;
                    if n > 0 {
                        tracing::info!(removed = n, "removed uploads left unfinished");
                    }
                }
            })
        };
        let (access, secret) = self.inner.config.key.clone();
        let route = hints::HintRoute(self.clone());
        let mut builder = S3ServiceBuilder::new(self);
        builder.set_auth(s3s::auth::SimpleAuth::from_single(access, secret));
        builder.set_access(Anonymous);
        builder.set_route(route);
        let service = builder.build();
        let http = ConnBuilder::new(TokioExecutor::new());
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let (socket, peer): (_, SocketAddr) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "gateway accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let _ = socket.set_nodelay(true);
            let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
            let conn = graceful.watch(conn);
            tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(%peer, error = %e, "gateway connection ended");
                }
            });
        }
        sweeper.abort();
        tokio::select! {
            () = graceful.shutdown() => {}
            () = tokio::time::sleep(std::time::Duration::from_secs(10)) => {}
        }
    }
}

/// Lets unsigned requests in (s3s refuses them once a key is set): the
/// gateway runs only against clusters that check no credentials, where any
/// client may act anyway. Signed requests are still checked against the key.
struct Anonymous;

#[async_trait::async_trait]
impl s3s::access::S3Access for Anonymous {
    async fn check(&self, _cx: &mut s3s::access::S3AccessContext<'_>) -> S3Result<()> {
        Ok(())
    }
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn list_buckets(&self, _req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        buckets::list(self).await.map(S3Response::new)
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        buckets::check(self, &req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        buckets::check(self, &req.input.bucket).await?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        buckets::create(self, &req.input.bucket).await.map(S3Response::new)
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        buckets::delete(self, &req.input.bucket).await?;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        listing::list_v2(&self.for_request(&req.headers)?, req.input).await.map(S3Response::new)
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        listing::list_v1(&self.for_request(&req.headers)?, req.input).await.map(S3Response::new)
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        objects::head(&self.for_request(&req.headers)?, req.input).await.map(S3Response::new)
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        objects::get(&self.for_request(&req.headers)?, req.input).await.map(S3Response::new)
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let write_type = objects::write_type(self, &req.headers, req.input.metadata.as_ref())?;
        objects::put(&self.for_request(&req.headers)?, req.input, write_type).await.map(S3Response::new)
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        objects::delete(self, &req.input.bucket, &req.input.key).await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        objects::delete_many(self, req.input).await.map(S3Response::new)
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let write_type = objects::write_type(self, &req.headers, req.input.metadata.as_ref())?;
        multipart::create(self, req.input, write_type).await.map(S3Response::new)
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        multipart::upload_part(&self.for_request(&req.headers)?, req.input).await.map(S3Response::new)
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        multipart::list_parts(self, req.input).await.map(S3Response::new)
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        multipart::complete(&self.for_request(&req.headers)?, req.input).await.map(S3Response::new)
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        multipart::abort(self, req.input).await?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let write_type = objects::write_type(self, &req.headers, req.input.metadata.as_ref())?;
        objects::copy(&self.for_request(&req.headers)?, req.input, write_type).await.map(S3Response::new)
    }
}

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
//!
//! Who a request acts as: on a cluster without a secret, the gateway's own
//! user, for signed (with the gateway's one key) and unsigned requests
//! alike, as any client there may act; on a cluster with a secret, the user
//! of the S3 key that signed it ([`keys`]), unsigned requests refused.

mod buckets;
mod dir_cursor;
mod errors;
mod expect;
mod hints;
mod keys;
mod listing;
mod multipart;
pub mod names;
mod objects;

pub use keys::admin_client;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Request, S3Response, S3Result};
use thaw_client::Client;
use thaw_common::auth::Secret;
use thaw_common::proto::WriteType;
use thaw_common::tls::ServerTls;
use tokio::net::TcpListener;

/// Bytes a GET reads from Thaw per body chunk.
pub const READ_CHUNK: usize = 1 << 20;

/// How the gateway writes and reads.
#[derive(Clone)]
pub struct GatewayConfig {
    /// The write type of a PUT that names none (header `x-thaw-write-type`
    /// or metadata `x-amz-meta-thaw-write-type`).
    pub write_type: WriteType,
    /// On a cluster without a secret: the access key and secret key that
    /// signed (SigV4) requests must use; unsigned requests are served too
    /// (anonymous access: any client of such a cluster may act).
    pub key: (String, String),
    /// The cluster secret, on a cluster that has one: requests are signed
    /// with S3 keys of the master's (`thaw auth s3-key create`) and act as
    /// their users; `key` is not used.
    pub secret: Option<Arc<Secret>>,
    /// HTTPS with this certificate (the cluster's, `thaw auth certs`).
    pub tls: Option<Arc<ServerTls>>,
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
            secret: None,
            tls: None,
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
    /// The client requests act through (the key's user's, with the
    /// request's job, in per-request copies of [`Gateway::for_request`]).
    client: Client,
    /// Where this client stages uploads.
    home: String,
    config: Arc<GatewayConfig>,
    /// Names of staged uploads, unique in this process (shared by the
    /// per-request copies).
    uploads: Arc<AtomicU64>,
    /// The S3 keys of a cluster with a secret.
    keys: Option<Arc<keys::Keys>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("write_type", &self.inner.config.write_type).finish()
    }
}

impl Gateway {
    /// A gateway over `client`'s cluster. With `config.secret`, requests act
    /// as their keys' users (`client` is used for its connections only).
    pub fn new(client: Client, config: GatewayConfig) -> thaw_common::Result<Self> {
        let keys = match &config.secret {
            Some(secret) => Some(Arc::new(keys::Keys::new(&client, secret.clone())?)),
            None => None,
        };
        let client = keys.as_ref().map(|k| k.admin.clone()).unwrap_or(client);
        let inner = Inner {
            client,
            home: names::STAGING.to_string(),
            config: Arc::new(config),
            uploads: Arc::new(AtomicU64::new(0)),
            keys,
        };
        Ok(Gateway { inner: Arc::new(inner) })
    }

    /// The same gateway over another client (a user's, one carrying a job)
    /// staging its uploads in `home`.
    fn with_client(&self, client: Client, home: String) -> Gateway {
        let inner = Inner {
            client,
            home,
            config: self.inner.config.clone(),
            uploads: self.inner.uploads.clone(),
            keys: self.inner.keys.clone(),
        };
        Gateway { inner: Arc::new(inner) }
    }

    /// Where this gateway's client stages uploads.
    fn home(&self) -> &str {
        &self.inner.home
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
        let keys = self.inner.keys.clone();
        let tls = self.inner.config.tls.clone();
        let mut builder = S3ServiceBuilder::new(self);
        match keys {
            Some(keys) => {
                builder.set_auth(keys::KeyAuth(keys));
                builder.set_access(keys::SignedOnly);
            }
            None => {
                builder.set_auth(s3s::auth::SimpleAuth::from_single(access, secret));
                builder.set_access(Anonymous);
            }
        }
        builder.set_route(route);
        let service = expect::ExpectGuard(builder.build());
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
            let (http, service, watcher, tls) = (http.clone(), service.clone(), graceful.watcher(), tls.clone());
            tokio::spawn(async move {
                let r = match tls {
                    None => watcher.watch(http.serve_connection(TokioIo::new(socket), service).into_owned()).await,
                    Some(tls) => {
                        // The handshake gets as long as a stalled body would.
                        let hs = tokio::time::timeout(std::time::Duration::from_secs(30), tls.accept(socket)).await;
                        match hs {
                            Ok(Ok(stream)) => {
                                watcher.watch(http.serve_connection(TokioIo::new(stream), service).into_owned()).await
                            }
                            Ok(Err(e)) => Err(e.into()),
                            Err(_) => Err("the TLS handshake timed out".into()),
                        }
                    }
                };
                if let Err(e) = r {
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
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        buckets::list(&self.for_request(&req).await?).await.map(S3Response::new)
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        buckets::check(&self.for_request(&req).await?, &req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        buckets::check(&self.for_request(&req).await?, &req.input.bucket).await?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    /// Never versioned (a key holds one file): the answer of a bucket where
    /// versioning was never turned on, which clients such as s3fs ask before
    /// deleting.
    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        buckets::check(&self.for_request(&req).await?, &req.input.bucket).await?;
        Ok(S3Response::new(GetBucketVersioningOutput::default()))
    }

    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        buckets::create(&self.for_request(&req).await?, &req.input.bucket).await.map(S3Response::new)
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        buckets::delete(&self.for_request(&req).await?, &req.input.bucket).await?;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        listing::list_v2(&self.for_request(&req).await?, req.input).await.map(S3Response::new)
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        listing::list_v1(&self.for_request(&req).await?, req.input).await.map(S3Response::new)
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        objects::head(&self.for_request(&req).await?, req.input).await.map(S3Response::new)
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        objects::get(&self.for_request(&req).await?, req.input).await.map(S3Response::new)
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let write_type = objects::write_type(self, &req.headers, req.input.metadata.as_ref())?;
        objects::put(&self.for_request(&req).await?, req.input, write_type).await.map(S3Response::new)
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        objects::delete(&self.for_request(&req).await?, &req.input.bucket, &req.input.key).await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        objects::delete_many(&self.for_request(&req).await?, req.input).await.map(S3Response::new)
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let write_type = objects::write_type(self, &req.headers, req.input.metadata.as_ref())?;
        multipart::create(&self.for_request(&req).await?, req.input, write_type).await.map(S3Response::new)
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        multipart::upload_part(&self.for_request(&req).await?, req.input).await.map(S3Response::new)
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        multipart::list_parts(&self.for_request(&req).await?, req.input).await.map(S3Response::new)
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        multipart::complete(&self.for_request(&req).await?, req.input).await.map(S3Response::new)
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        multipart::abort(&self.for_request(&req).await?, req.input).await?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let write_type = objects::write_type(self, &req.headers, req.input.metadata.as_ref())?;
        objects::copy(&self.for_request(&req).await?, req.input, write_type).await.map(S3Response::new)
    }
}

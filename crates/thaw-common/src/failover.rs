//! A channel to a group of masters that follows the leader.
//!
//! `THAW_MASTER=a,b,c` names a group (highly available masters): one leads
//! and serves, the others answer every call with [`NOT_LEADER_HEADER`] (and
//! the leader's address when they know it). [`MasterChannel`] sends each call
//! to the master that served the last one; on a "not the leader" answer it
//! goes where the answer points, and when a master cannot be reached it tries
//! the next, backing off, until one serves or [`FAILOVER_WAIT`] has passed
//! (an election takes a second or two). A call that may have reached a master
//! before it died is sent again only if sending it twice is harmless (reads,
//! renewals, heartbeats): a namespace change gets the error, as it would from
//! a single master, since the dead leader may have committed it. Such a
//! call's answer is read whole before it is handed on, so a leader killed in
//! the middle of one is a retry too, not an error after the headers.
//!
//! With one address the channel is a plain tonic channel: nothing is retried,
//! as before.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tonic::body::Body;
use tonic::transport::Channel;

use crate::{Result, ThawError};

/// Response metadata of a master that is not the group's leader; its value
/// is the leader's address, or empty while none is known.
pub const NOT_LEADER_HEADER: &str = "thaw-not-leader";

/// How long a call waits for a group to have a leader again.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(20);

/// Calls that may be sent again after a master died with them in flight.
const IDEMPOTENT: &[&str] = &[
    "GetStatus",
    "ListStatus",
    "WhoAmI",
    "IssueToken",
    "GetClusterStatus",
    "Heartbeat",
    "ReportBlockChanges",
    "RenewLease",
    "RenewWriterLease",
    "ListJobs",
    "MigrationEvents",
    "Migrate",
    "Persist",
    "GetLineage",
    "ListLineage",
    "Recompute",
    "GetCacheReport",
    "ReportAppUsage",
    "ReportJobTasks",
    "ClaimRecomputations",
];

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How often a master connection is pinged (HTTP/2) when nothing arrives on
/// it, and how long an unanswered ping may wait before the connection is
/// dropped: a master that accepted the connection and then stopped answering
/// (stopped, hung, cut off) fails the calls waiting on it within about
/// their sum, instead of holding them forever. A live master answers pings
/// while it works, so long calls (`persist_wait`) are not cut short.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(5);
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// A tonic channel (lazy, as every master channel is) to `addr`.
pub fn endpoint_channel(addr: &str, tls: Option<&crate::tls::ClientTls>) -> Result<Channel> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Channel::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| ThawError::invalid(format!("master address {addr:?}: {e}")))?
        .connect_timeout(Duration::from_secs(3))
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls.tonic(addr)?).map_err(|e| ThawError::invalid(format!("TLS: {e}")))?;
    }
    Ok(endpoint.connect_lazy())
}

/// The addresses of `list` (comma-separated, spaces ignored), at least one.
pub fn parse_addresses(list: &str) -> Result<Vec<String>> {
    let addrs: Vec<String> = list.split(',').map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
    if addrs.is_empty() {
        return Err(ThawError::invalid(format!("no master address in {list:?}")));
    }
    Ok(addrs)
}

#[derive(Clone)]
pub struct MasterChannel {
    inner: Arc<Inner>,
}

struct Inner {
    addrs: Vec<String>,
    channels: Vec<Channel>,
    /// The master that served last.
    current: AtomicUsize,
}

impl MasterChannel {
    /// A channel to the masters of `list` (`a,b,c`, or one address).
    pub fn new(list: &str, tls: Option<&crate::tls::ClientTls>) -> Result<Self> {
        let addrs = parse_addresses(list)?;
        let channels = addrs.iter().map(|a| endpoint_channel(a, tls)).collect::<Result<Vec<_>>>()?;
        Ok(MasterChannel { inner: Arc::new(Inner { addrs, channels, current: AtomicUsize::new(0) }) })
    }

    /// The address of the master that served the last call.
    pub fn current(&self) -> &str {
        &self.inner.addrs[self.inner.current.load(Ordering::Relaxed) % self.inner.addrs.len()]
    }
}

impl tower_service::Service<http::Request<Body>> for MasterChannel {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn std::future::Future<Output = std::result::Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        // Each call readies the channel it picks.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { inner.call(req).await })
    }
}

async fn send(ch: &Channel, req: http::Request<Body>) -> std::result::Result<http::Response<Body>, BoxError> {
    use tower_service::Service;
    let mut ch = ch.clone();
    std::future::poll_fn(|cx| ch.poll_ready(cx)).await?;
    Ok(ch.call(req).await?)
}

/// Whether `e` failed before the request left (no master can have seen it).
fn not_sent(e: &BoxError) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(io.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        let text = err.to_string();
        if text.contains("tcp connect error") || text.contains("error trying to connect") {
            return true;
        }
        cur = err.source();
    }
    false
}

impl Inner {
    async fn call(&self, req: http::Request<Body>) -> std::result::Result<http::Response<Body>, BoxError> {
        let n = self.channels.len();
        if n == 1 {
            return send(&self.channels[0], req).await;
        }
        let (parts, body) = req.into_parts();
        let bytes = http_body_util::BodyExt::collect(body).await?.to_bytes();
        let method = parts.uri.path().rsplit('/').next().unwrap_or_default().to_string();
        let resendable = IDEMPOTENT.contains(&method.as_str());
        let deadline = Instant::now() + FAILOVER_WAIT;
        let mut i = self.current.load(Ordering::Relaxed) % n;
        let mut tried = 0usize;
        let mut pause = Duration::from_millis(25);
        loop {
            let mut req = http::Request::new(Body::new(http_body_util::Full::new(bytes.clone())));
            *req.method_mut() = parts.method.clone();
            *req.uri_mut() = parts.uri.clone();
            *req.version_mut() = parts.version;
            *req.headers_mut() = parts.headers.clone();
            *req.extensions_mut() = parts.extensions.clone();
            let outcome = send(&self.channels[i], req).await;
            let next = match outcome {
                Ok(resp) => match resp.headers().get(NOT_LEADER_HEADER).cloned() {
                    None if !resendable => {
                        self.current.store(i, Ordering::Relaxed);
                        return Ok(resp);
                    }
                    None => {
                        // A leader killed while it sends the answer cuts its
                        // body short (an h2 error after the headers): read the
                        // whole answer here, so that a call safe to send twice
                        // goes to the next master instead of failing.
                        let (head, body) = resp.into_parts();
                        match http_body_util::BodyExt::collect(body).await {
                            Ok(whole) => {
                                self.current.store(i, Ordering::Relaxed);
                                return Ok(http::Response::from_parts(head, Body::new(whole)));
                            }
                            Err(e) if Instant::now() >= deadline => return Err(e.into()),
                            Err(_) => (i + 1) % n,
                        }
                    }
                    Some(_) if Instant::now() >= deadline => return Ok(resp),
                    Some(hint) => {
                        let hint = hint.to_str().unwrap_or_default();
                        match self.addrs.iter().position(|a| a == hint) {
                            Some(leader) if leader != i => leader,
                            _ => (i + 1) % n,
                        }
                    }
                },
                Err(e) => {
                    if (!resendable && !not_sent(&e)) || Instant::now() >= deadline {
                        return Err(e);
                    }
                    (i + 1) % n
                }
            };
            tried += 1;
            // Once round the group without a leader: wait for an election.
            if tried.is_multiple_of(n) {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(400));
            }
            i = next;
        }
    }
}

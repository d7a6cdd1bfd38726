//! `Expect: 100-continue` answered without a `100 Continue` first.
//!
//! A client that sends `Expect: 100-continue` waits for `100 Continue`
//! before its body; hyper sends it when the handler first reads the body. A
//! request answered without reading it (an empty PUT, an error found from the
//! headers alone) gets its final response with no `100` before it. RFC 9110
//! allows that, but botocore (boto3, the AWS CLI) then keeps that response's
//! status on the connection and misreads the next response on it: the AWS
//! CLI's `s3 sync` of a directory with an empty file hung on its next upload.
//! Such responses close their connection instead (`Connection: close`), so
//! the client opens a new one: a PUT with a body that succeeded was read
//! whole, so only empty bodies and errors pay for it.

use futures::future::BoxFuture;
use http::header::{CONNECTION, CONTENT_LENGTH, EXPECT};

/// The S3 service, closing the connections described above.
#[derive(Clone)]
pub(crate) struct ExpectGuard(pub s3s::service::S3Service);

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for ExpectGuard {
    type Response = s3s::HttpResponse;
    type Error = s3s::HttpError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        let h = req.headers();
        let expect = h.get(EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        let empty = h.get(CONTENT_LENGTH).is_none_or(|v| v.as_bytes() == b"0");
        let answer = hyper::service::Service::call(&self.0, req);
        Box::pin(async move {
            let mut resp = answer.await?;
            if expect && (empty || !resp.status().is_success()) {
                resp.headers_mut().insert(CONNECTION, http::HeaderValue::from_static("close"));
            }
            Ok(resp)
        })
    }
}

//! S3 (and S3-compatible stores: SeaweedFS, MinIO, Ceph RGW) as the under-store,
//! through OpenDAL's S3 service.
//!
//! `s3://BUCKET/PREFIX?endpoint=URL&region=NAME`: the bucket, the key prefix the
//! namespace root maps to, and where the service is. The endpoint and region may
//! instead come from the usual environment (`AWS_ENDPOINT_URL_S3`,
//! `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_DEFAULT_REGION`); the canonical URI the
//! master hands to its workers carries them, so every worker reaches the same
//! store. Credentials never travel in a URI: each process reads its own
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, or the
//! profile in `~/.aws`). EC2 instance metadata is not asked (a process off EC2
//! would wait on a link-local address); with no credentials at all, requests go
//! unsigned, as for a public bucket.

use opendal::Operator;
use thaw_common::{Result, ThawError};

/// Keys given in code (tests, tools) instead of the environment.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ***)", self.access_key_id)
    }
}

/// What an `s3://` URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Key prefix of the namespace root, without leading or trailing '/'.
    pub prefix: String,
    pub endpoint: Option<String>,
    pub region: String,
}

/// Query keys an `s3://` URI may carry.
const KEYS: [&str; 2] = ["endpoint", "region"];

fn env(names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
}

impl S3Location {
    /// Parses `s3://bucket/prefix?endpoint=..&region=..`, filling what the URI
    /// leaves out from the environment.
    pub fn parse(uri: &str) -> Result<Self> {
        let bad = |why: &str| ThawError::invalid(format!("under-store {uri:?}: {why}"));
        let u = url::Url::parse(uri).map_err(|e| bad(&e.to_string()))?;
        if u.scheme() != "s3" {
            return Err(bad("expected s3://BUCKET/PREFIX"));
        }
        if !u.username().is_empty() || u.password().is_some() {
            return Err(bad("credentials do not belong in the URI (it is logged and sent to workers): \
                 set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"));
        }
        let bucket = u.host_str().unwrap_or_default().to_string();
        // S3's rule: 3-63 characters, lower-case letters, digits, '-' and '.'.
        let valid = (3..=63).contains(&bucket.len())
            && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid {
            return Err(bad("the bucket name must be 3-63 lower-case letters, digits, '-' or '.'"));
        }
        let prefix = u.path().trim_matches('/').to_string();
        if prefix.split('/').any(|c| c == "." || c == "..") || prefix.contains("//") {
            return Err(bad("the prefix may not contain '.', '..' or empty components"));
        }
        let (mut endpoint, mut region) = (None, None);
        for (k, v) in u.query_pairs() {
            match k.as_ref() {
                "endpoint" => endpoint = Some(v.into_owned()),
                "region" => region = Some(v.into_owned()),
                "access_key_id" | "secret_access_key" | "session_token" => {
                    return Err(bad(
                        "credentials do not belong in the URI: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                    ));
                }
                other => return Err(bad(&format!("unknown option {other:?} (known: {})", KEYS.join(", ")))),
            }
        }
        let endpoint = endpoint.or_else(|| env(&["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]));
        if let Some(e) = &endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(bad(&format!("endpoint {e:?} must start with http:// or https://")));
        }
        let region =
            region.or_else(|| env(&["AWS_REGION", "AWS_DEFAULT_REGION"])).unwrap_or_else(|| "us-east-1".into());
        Ok(S3Location { bucket, prefix, endpoint, region })
    }

    /// The URI that names this location everywhere (endpoint and region included).
    pub fn uri(&self) -> String {
        let mut u = format!("s3://{}/{}", self.bucket, self.prefix);
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        if let Some(e) = &self.endpoint {
            q.append_pair("endpoint", e);
        }
        q.append_pair("region", &self.region);
        u.push('?');
        u.push_str(&q.finish());
        u
    }

    /// Where requests go, for messages.
    pub fn endpoint_name(&self) -> &str {
        self.endpoint.as_deref().unwrap_or("AWS S3")
    }

    /// An operator on this location, with `creds` if given, else the environment's.
    pub fn operator(&self, creds: Option<&Credentials>) -> Result<Operator> {
        install_http_transport();
        let mut b = opendal::services::S3::default()
            .bucket(&self.bucket)
            .root(&format!("/{}", self.prefix))
            .region(&self.region)
            .disable_ec2_metadata();
        if let Some(e) = &self.endpoint {
            b = b.endpoint(e);
        }
        if let Some(c) = creds {
            b = b.access_key_id(&c.access_key_id).secret_access_key(&c.secret_access_key);
        } else if let (Some(id), Some(secret)) = (env(&["AWS_ACCESS_KEY_ID"]), env(&["AWS_SECRET_ACCESS_KEY"])) {
            b = b.access_key_id(&id).secret_access_key(&secret);
            if let Some(t) = env(&["AWS_SESSION_TOKEN"]) {
                b = b.session_token(&t);
            }
        } else if env(&["AWS_PROFILE"]).is_none() && !aws_config_exists() {
            b = b.skip_signature();
        }
        let op = Operator::new(b).map_err(|e| ThawError::invalid(format!("under-store {}: {e}", self.uri())))?;
        Ok(crate::resilient(op))
    }
}

fn aws_config_exists() -> bool {
    std::env::var_os("HOME").is_some_and(|h| std::path::Path::new(&h).join(".aws/credentials").exists())
}

/// Installs (once) OpenDAL's HTTP transport, which its S3 service speaks
/// through: reqwest, whose TLS runs on the process's crypto provider, ring
/// (reqwest's own default, aws-lc-rs, would be a second crypto library).
pub fn install_http_transport() {
    thaw_common::tls::install_crypto_provider();
    opendal_http_transport_reqwest::install_default();
}

/// Turns the error of the first request into what an operator should fix, in
/// one line: the server's code and message, the bucket, the setting to fix
/// (OpenDAL's own text carries the whole response, headers and all).
pub fn explain(loc: &S3Location, e: opendal::Error) -> ThawError {
    let at = format!("s3://{}/{} at {}", loc.bucket, loc.prefix, loc.endpoint_name());
    let said = crate::brief(&e);
    if e.to_string().contains("NoSuchBucket") {
        return ThawError::not_found(format!(
            "under-store {at}: bucket {:?} does not exist (create it, or fix the bucket in --ufs)",
            loc.bucket
        ));
    }
    match e.kind() {
        opendal::ErrorKind::PermissionDenied => ThawError::permission_denied(format!(
            "under-store {at}: access refused to bucket {:?} ({said}): check AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY",
            loc.bucket
        )),
        // Persistent: temporary errors that outlived the retries.
        _ if e.is_temporary() || e.is_persistent() => ThawError::unavailable(format!(
            "under-store {at}: the S3 endpoint does not answer ({said}): check the endpoint in --ufs \
             or AWS_ENDPOINT_URL"
        )),
        _ => ThawError::internal(format!("under-store {at}: {said}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_and_print_back() {
        let l = S3Location::parse("s3://my-bucket/data/warm?endpoint=http://127.0.0.1:8333&region=eu-west-1").unwrap();
        assert_eq!(l.bucket, "my-bucket");
        assert_eq!(l.prefix, "data/warm");
        assert_eq!(l.endpoint.as_deref(), Some("http://127.0.0.1:8333"));
        assert_eq!(l.region, "eu-west-1");
        assert_eq!(S3Location::parse(&l.uri()).unwrap(), l);
        let root = S3Location::parse("s3://bucket?region=us-east-1&endpoint=https://s3.example").unwrap();
        assert_eq!(root.prefix, "");
        assert_eq!(S3Location::parse(&root.uri()).unwrap(), root);
    }

    #[test]
    fn bad_uris_say_what_is_wrong() {
        for (uri, says) in [
            ("s3://ab/x", "bucket name"),
            ("s3://Upper/x", "bucket name"),
            ("s3://bucket/a//b", "empty components"),
            ("s3://key:secret@bucket/x", "credentials"),
            ("s3://bucket/x?secret_access_key=s", "credentials"),
            ("s3://bucket/x?colour=blue", "unknown option"),
            ("s3://bucket/x?endpoint=127.0.0.1:9000", "http://"),
        ] {
            let e = S3Location::parse(uri).unwrap_err();
            assert!(e.message.contains(says), "{uri}: {e}");
            assert_eq!(e.kind, thaw_common::ErrorKind::InvalidArgument);
        }
    }
}

//! Authentication: the cluster secret, users' tokens, and the master's grants
//! of single data operations.
//!
//! A cluster is secured by giving its master and workers the same secret
//! (`--secret-file`). From it two HMAC-SHA256 keys are derived:
//! - the *token* key signs [`TokenClaims`] (a user, their groups, an expiry).
//!   Every master call carries one (`authorization: Bearer thaw1.<claims>.<mac>`).
//!   Whoever holds the secret mints tokens for anyone (an administrator, the
//!   workers as [`SUPERUSER`]); a user without it gets one from the master
//!   (`IssueToken`), as HDFS hands out delegation tokens.
//! - the *access* key signs [`AccessClaims`]: the master's grant to read one
//!   block or write one file, checked by workers that know nothing of paths or
//!   permissions (HDFS's block access tokens).
//! - the *S3* key derives each S3 access key's secret (`thaw gateway`):
//!   `HMAC(s3 key, access key)`, so the journal keeps only which user a key
//!   acts as, and a gateway holding the cluster secret checks signatures.
//!
//! Tokens are bearer credentials: without TLS on the wire, anyone who can
//! watch the network can replay one until it expires.

use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use prost::Message;
use ring::hmac;

use crate::proto::{AccessClaims, SignedAccess, TokenClaims};
use crate::{Result, ThawError, now_ms};

/// The superuser: workers act as it; it may do anything. Members of
/// [`SUPERGROUP`] are superusers too (HDFS's `supergroup`).
pub const SUPERUSER: &str = "thaw";
pub const SUPERGROUP: &str = "supergroup";
/// gRPC metadata carrying the caller's token: Thaw's clients send
/// `thaw-token: TOKEN`, which HTTP/2 sends once per connection and then as a
/// table index (h2 never indexes `authorization`, so every call would carry
/// and decode the whole token: 10% of a metadata lookup's cost). Other tools
/// may send `authorization: Bearer TOKEN`.
pub const TOKEN_HEADER: &str = "thaw-token";
pub const AUTH_HEADER: &str = "authorization";
/// gRPC metadata naming the caller on a cluster without a secret (recorded as
/// the owner of what it creates; believed, as HDFS's simple authentication).
pub const USER_HEADER: &str = "thaw-user";
/// A secret shorter than this is refused (it must not be guessable).
pub const MIN_SECRET_BYTES: usize = 32;
/// Lifetime of the tokens a secret holder mints for itself (renewed as they age).
pub const SELF_TOKEN_TTL_MS: u64 = 3_600_000;
/// Longest a user name or a group name may be, and most groups in a token.
pub const MAX_NAME: usize = 64;
pub const MAX_GROUPS: usize = 64;

const TOKEN_PREFIX: &str = "thaw1.";

/// The cluster secret's two keys.
pub struct Secret {
    token_key: hmac::Key,
    access_key: hmac::Key,
    s3_key: hmac::Key,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Reads a secret file: at least [`MIN_SECRET_BYTES`] bytes (surrounding
    /// white space ignored), readable by its owner only.
    pub fn load(path: &std::path::Path) -> Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let what = || format!("secret file {}", path.display());
        let meta = std::fs::metadata(path).map_err(|e| ThawError::from(e).context(what()))?;
        if meta.mode() & 0o077 != 0 {
            return Err(ThawError::permission_denied(format!(
                "{} is readable by others (mode {:o}): chmod 600 it",
                what(),
                meta.mode() & 0o777
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| ThawError::from(e).context(what()))?;
        Self::from_bytes(bytes.trim_ascii()).map_err(|e| e.context(what()))
    }

    pub fn from_bytes(secret: &[u8]) -> Result<Self> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(ThawError::invalid(format!(
                "a secret needs at least {MIN_SECRET_BYTES} bytes, this one has {} (`thaw auth secret` makes one)",
                secret.len()
            )));
        }
        let root = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let derive = |label: &[u8]| hmac::Key::new(hmac::HMAC_SHA256, hmac::sign(&root, label).as_ref());
        Ok(Secret {
            token_key: derive(b"thaw token v1"),
            access_key: derive(b"thaw access v1"),
            s3_key: derive(b"thaw s3 v1"),
        })
    }

    /// A fresh random secret, hex-encoded (64 characters).
    pub fn generate() -> Result<String> {
        use ring::rand::SecureRandom;
        let mut bytes = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| ThawError::internal("the system random generator failed"))?;
        Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The S3 secret key of `access_key`: 40 characters, as AWS's.
    pub fn s3_secret(&self, access_key: &str) -> String {
        let mac = hmac::sign(&self.s3_key, access_key.as_bytes());
        B64.encode(&mac.as_ref()[..30])
    }

    /// A fresh S3 access key id: `TK` and 18 random capitals and digits
    /// (20 characters, as AWS's).
    pub fn new_s3_access_key() -> Result<String> {
        use ring::rand::SecureRandom;
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        let mut bytes = [0u8; 18];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| ThawError::internal("the system random generator failed"))?;
        Ok(std::iter::once("TK".to_string())
            .chain(bytes.iter().map(|b| (ALPHABET[usize::from(b % 32)] as char).to_string()))
            .collect())
    }

    /// A token for `claims`.
    pub fn mint(&self, claims: &TokenClaims) -> String {
        let body = claims.encode_to_vec();
        let mac = hmac::sign(&self.token_key, &body);
        format!("{TOKEN_PREFIX}{}.{}", B64.encode(&body), B64.encode(mac.as_ref()))
    }

    /// The claims of a token this secret signed and that has not expired.
    pub fn verify(&self, token: &str) -> Result<TokenClaims> {
        let bad = || ThawError::permission_denied("malformed token (expected thaw1.<claims>.<signature>)");
        let rest = token.trim().strip_prefix(TOKEN_PREFIX).ok_or_else(bad)?;
        let (body, mac) = rest.split_once('.').ok_or_else(bad)?;
        let body = B64.decode(body).map_err(|_| bad())?;
        let mac = B64.decode(mac).map_err(|_| bad())?;
        hmac::verify(&self.token_key, &body, &mac).map_err(|_| {
            ThawError::permission_denied(
                "token signature does not match this cluster's secret (a token of another cluster, or altered)",
            )
        })?;
        let claims = TokenClaims::decode(body.as_slice()).map_err(|_| bad())?;
        check_expiry(claims.expires_ms, "token")?;
        Ok(claims)
    }

    /// The master's grant of `claims`.
    pub fn grant(&self, claims: &AccessClaims) -> SignedAccess {
        let body = claims.encode_to_vec();
        let mac = hmac::sign(&self.access_key, &body).as_ref().to_vec();
        SignedAccess { claims: body, mac }
    }

    /// The claims of a grant the master made with this secret, unexpired.
    pub fn check(&self, access: Option<&SignedAccess>) -> Result<AccessClaims> {
        let access = access.ok_or_else(|| {
            ThawError::permission_denied("this worker requires the master's grant with each read or write (none sent)")
        })?;
        hmac::verify(&self.access_key, &access.claims, &access.mac)
            .map_err(|_| ThawError::permission_denied("grant signature does not match this cluster's secret"))?;
        let claims = AccessClaims::decode(access.claims.as_slice())
            .map_err(|_| ThawError::permission_denied("malformed grant"))?;
        check_expiry(claims.expires_ms, "grant (ask the master again)")?;
        Ok(claims)
    }
}

fn check_expiry(expires_ms: u64, what: &str) -> Result<()> {
    let now = now_ms();
    if expires_ms <= now {
        return Err(ThawError::permission_denied(format!(
            "{what} expired {} s ago",
            (now - expires_ms).div_ceil(1000)
        )));
    }
    Ok(())
}

/// Whether a caller is a superuser.
pub fn is_superuser(user: &str, groups: &[String]) -> bool {
    user == SUPERUSER || groups.iter().any(|g| g == SUPERGROUP)
}

/// A user or group name a token may carry: 1-64 bytes of letters, digits and
/// `._-@$`, not starting with `-` (names end up in listings and logs).
pub fn check_name(name: &str, what: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@$".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ThawError::invalid(format!("{what} {name:?} is not a valid name (1-{MAX_NAME} letters, digits or ._-@$)")))
    }
}

/// Claims for `user` in `groups`, valid for `ttl_ms`, checked.
pub fn claims(user: &str, groups: &[String], ttl_ms: u64) -> Result<TokenClaims> {
    check_name(user, "user")?;
    if groups.len() > MAX_GROUPS {
        return Err(ThawError::invalid(format!("at most {MAX_GROUPS} groups")));
    }
    for g in groups {
        check_name(g, "group")?;
    }
    Ok(TokenClaims { user: user.to_string(), groups: groups.to_vec(), expires_ms: now_ms().saturating_add(ttl_ms) })
}

/// The OS user this process runs as.
pub fn os_user() -> String {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    passwd(uid).map(|(n, _)| n).unwrap_or_else(|| format!("uid{uid}"))
}

/// This process's user (`THAW_USER`, else the OS user) and its OS groups.
pub fn os_identity() -> (String, Vec<String>) {
    let named = std::env::var("THAW_USER").ok().filter(|v| !v.is_empty());
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let pw = passwd(uid);
    let os_user = pw.as_ref().map(|(n, _)| n.clone()).unwrap_or_else(|| format!("uid{uid}"));
    let user = named.unwrap_or(os_user.clone());
    let groups = match &pw {
        Some((name, gid)) if *name == user => group_names(name, *gid),
        _ => Vec::new(),
    };
    (user, groups)
}

/// The name and primary group of user `uid`.
fn passwd(uid: libc::uid_t) -> Option<(String, libc::gid_t)> {
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: zeroed passwd is a valid out-parameter; buf outlives the call and
    // the strings read from `pw` point into it.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut out = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out);
        if rc != 0 || out.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned();
        Some((name, pw.pw_gid))
    }
}

/// Names of the groups `user` (primary group `gid`) belongs to.
fn group_names(user: &str, gid: libc::gid_t) -> Vec<String> {
    let Ok(cuser) = std::ffi::CString::new(user) else { return Vec::new() };
    let mut n: libc::c_int = 64;
    let mut gids = vec![0 as libc::gid_t; n as usize];
    // SAFETY: gids holds n entries; getgrouplist writes at most n and sets n.
    let rc = unsafe { libc::getgrouplist(cuser.as_ptr(), gid, gids.as_mut_ptr(), &mut n) };
    if rc < 0 {
        gids.truncate(1);
        gids[0] = gid;
    } else {
        gids.truncate(n as usize);
    }
    let mut names = Vec::new();
    for g in gids {
        let mut buf = vec![0u8; 16 * 1024];
        // SAFETY: as in `passwd`.
        let name = unsafe {
            let mut gr: libc::group = std::mem::zeroed();
            let mut out = std::ptr::null_mut();
            let rc = libc::getgrgid_r(g, &mut gr, buf.as_mut_ptr().cast(), buf.len(), &mut out);
            if rc != 0 || out.is_null() {
                continue;
            }
            std::ffi::CStr::from_ptr(gr.gr_name).to_string_lossy().into_owned()
        };
        if check_name(&name, "group").is_ok() && !names.contains(&name) && names.len() < MAX_GROUPS {
            names.push(name);
        }
    }
    names
}

/// What a client proves itself with.
pub enum Credentials {
    /// A token from `THAW_TOKEN` / `THAW_TOKEN_FILE` (or `IssueToken`).
    Token(String),
    /// The cluster secret (`THAW_SECRET_FILE`): tokens minted here for `claims`'
    /// user, renewed as they age.
    Secret { secret: Arc<Secret>, user: String, groups: Vec<String>, current: Mutex<(String, u64)> },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Token(_) => f.write_str("Credentials::Token(..)"),
            Credentials::Secret { user, .. } => write!(f, "Credentials::Secret(user {user})"),
        }
    }
}

impl Credentials {
    /// Credentials from the secret, acting as `user` in `groups`.
    pub fn from_secret(secret: Arc<Secret>, user: &str, groups: Vec<String>) -> Result<Self> {
        claims(user, &groups, 0)?;
        Ok(Credentials::Secret { secret, user: user.to_string(), groups, current: Mutex::new((String::new(), 0)) })
    }

    /// From the environment: `THAW_TOKEN`, `THAW_TOKEN_FILE`, or
    /// `THAW_SECRET_FILE` (acting as `THAW_USER` or the OS user); none: `None`.
    pub fn from_env() -> Result<Option<Self>> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        if let Some(token) = var("THAW_TOKEN") {
            return Ok(Some(Credentials::Token(token.trim().to_string())));
        }
        if let Some(path) = var("THAW_TOKEN_FILE") {
            let token = std::fs::read_to_string(&path)
                .map_err(|e| ThawError::from(e).context(format!("THAW_TOKEN_FILE {path}")))?;
            return Ok(Some(Credentials::Token(token.trim().to_string())));
        }
        if let Some(path) = var("THAW_SECRET_FILE") {
            let secret = Arc::new(Secret::load(std::path::Path::new(&path))?);
            let (user, groups) = os_identity();
            return Ok(Some(Self::from_secret(secret, &user, groups)?));
        }
        Ok(None)
    }

    /// The token to send now.
    pub fn token(&self) -> String {
        match self {
            Credentials::Token(t) => t.clone(),
            Credentials::Secret { secret, user, groups, current } => {
                let mut cur = current.lock().unwrap_or_else(|e| e.into_inner());
                // Renewed with a quarter of its life left.
                if cur.1 < now_ms().saturating_add(SELF_TOKEN_TTL_MS / 4) {
                    let claims = TokenClaims {
                        user: user.clone(),
                        groups: groups.clone(),
                        expires_ms: now_ms() + SELF_TOKEN_TTL_MS,
                    };
                    *cur = (secret.mint(&claims), claims.expires_ms);
                }
                cur.0.clone()
            }
        }
    }
}

type Header = tonic::metadata::MetadataValue<tonic::metadata::Ascii>;

/// Adds the caller's token (or, without credentials, its user name) to every
/// master call.
#[derive(Clone)]
pub struct Attach {
    credentials: Option<Arc<Credentials>>,
    user: Header,
    /// The `thaw-token` value last built, for the token it carries: most
    /// calls reuse it instead of checking it again.
    header: Arc<Mutex<Option<(String, Header)>>>,
}

impl Attach {
    pub fn new(credentials: Option<Arc<Credentials>>) -> Self {
        let (user, _) = os_identity();
        let user = user.parse().unwrap_or_else(|_| "unknown".parse().expect("ascii"));
        Attach { credentials, user, header: Arc::default() }
    }
}

impl tonic::service::Interceptor for Attach {
    fn call(&mut self, mut req: tonic::Request<()>) -> std::result::Result<tonic::Request<()>, tonic::Status> {
        match &self.credentials {
            Some(c) => {
                let token = c.token();
                let mut cached = self.header.lock().unwrap_or_else(|e| e.into_inner());
                let value = match &*cached {
                    Some((t, v)) if *t == token => v.clone(),
                    _ => {
                        // Left indexable by HPACK: its table matches whole
                        // values only, and a token's 256-bit signature cannot
                        // be guessed whole (RFC 7541 7.1.3), so repeated calls
                        // send it as one index.
                        let v: Header = token.parse().map_err(|_| {
                            tonic::Status::invalid_argument("token has characters metadata cannot carry")
                        })?;
                        *cached = Some((token, v.clone()));
                        v
                    }
                };
                req.metadata_mut().insert(TOKEN_HEADER, value);
            }
            None => {
                req.metadata_mut().insert(USER_HEADER, self.user.clone());
            }
        }
        Ok(req)
    }
}

/// A master client that authenticates every call, following a group's
/// leader ([`crate::failover`]).
pub type MasterClient = crate::proto::master_service_client::MasterServiceClient<
    tonic::service::interceptor::InterceptedService<crate::failover::MasterChannel, Attach>,
>;

/// Connects (lazily) to the master at `addr` (or the group `a,b,c`) with
/// `credentials`, over TLS trusting `tls`'s CA if given.
pub fn master_client(
    addr: &str,
    credentials: Option<Arc<Credentials>>,
    tls: Option<&crate::tls::ClientTls>,
) -> Result<MasterClient> {
    Ok(master_client_on(crate::failover::MasterChannel::new(addr, tls)?, credentials))
}

/// A master client on `channel` (shared with other clients: one connection
/// for many users' calls, as a gateway acting for each of its users makes).
pub fn master_client_on(
    channel: crate::failover::MasterChannel,
    credentials: Option<Arc<Credentials>>,
) -> MasterClient {
    crate::proto::master_service_client::MasterServiceClient::with_interceptor(channel, Attach::new(credentials))
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

/// A lazy channel to one master (see [`crate::failover::endpoint_channel`]).
pub fn channel(addr: &str, tls: Option<&crate::tls::ClientTls>) -> Result<tonic::transport::Channel> {
    crate::failover::endpoint_channel(addr, tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> Secret {
        Secret::from_bytes(&[b; 32]).unwrap()
    }

    #[test]
    fn tokens_verify_under_their_secret_only_and_until_they_expire() {
        let s = secret(1);
        let c = claims("alice", &["eng".into()], 60_000).unwrap();
        let t = s.mint(&c);
        assert_eq!(s.verify(&t).unwrap(), c);
        let e = secret(2).verify(&t).unwrap_err();
        assert!(e.message.contains("does not match"), "{e}");
        let mut old = c.clone();
        old.expires_ms = now_ms() - 5_000;
        let e = s.verify(&s.mint(&old)).unwrap_err();
        assert!(e.message.contains("token expired") && e.message.ends_with("s ago"), "{e}");
        // An altered claim (another user) breaks the signature.
        let forged = {
            let mut c2 = c.clone();
            c2.user = "root".into();
            let (_, mac) = t.rsplit_once('.').unwrap();
            format!("{TOKEN_PREFIX}{}.{mac}", B64.encode(c2.encode_to_vec()))
        };
        assert!(s.verify(&forged).is_err());
        for junk in ["", "Bearer x", "thaw1.", "thaw1.a.b", "thaw1.!!.??"] {
            assert!(s.verify(junk).is_err(), "{junk}");
        }
    }

    #[test]
    fn s3_secrets_are_per_key_and_per_cluster() {
        let k = Secret::new_s3_access_key().unwrap();
        assert_eq!(k.len(), 20);
        assert!(k.starts_with("TK") && k.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
        assert_ne!(k, Secret::new_s3_access_key().unwrap());
        let s = secret(1).s3_secret(&k);
        assert_eq!(s.len(), 40);
        assert_eq!(s, secret(1).s3_secret(&k), "derived, so every gateway with the secret agrees");
        assert_ne!(s, secret(2).s3_secret(&k));
        assert_ne!(s, secret(1).s3_secret("TKOTHER"));
    }

    #[test]
    fn grants_bind_their_claims() {
        let s = secret(3);
        let a = AccessClaims {
            user: "bob".into(),
            expires_ms: now_ms() + 1000,
            write: false,
            id: 7,
            ufs_path: "/x".into(),
        };
        let g = s.grant(&a);
        assert_eq!(s.check(Some(&g)).unwrap(), a);
        let mut other = g.clone();
        other.claims = AccessClaims { id: 8, ..a.clone() }.encode_to_vec();
        assert!(s.check(Some(&other)).is_err());
        assert!(secret(4).check(Some(&g)).is_err());
        assert!(s.check(None).is_err());
        // A token is not a grant: the keys differ.
        let t = SignedAccess { claims: g.claims.clone(), mac: hmac::sign(&s.token_key, &g.claims).as_ref().to_vec() };
        assert!(s.check(Some(&t)).is_err());
    }

    #[test]
    fn short_secrets_and_odd_names_are_refused() {
        assert!(Secret::from_bytes(b"short").is_err());
        assert!(Secret::generate().unwrap().len() == 64);
        for bad in ["", "-rf", "a b", "a/b", "é", &"x".repeat(65)] {
            assert!(check_name(bad, "user").is_err(), "{bad:?}");
        }
        check_name("alice.smith@EXAMPLE-1", "user").unwrap();
    }

    #[test]
    fn a_secret_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secret");
        std::fs::write(&p, format!("{}\n", Secret::generate().unwrap())).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(Secret::load(&p).unwrap_err().message.contains("chmod 600"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        Secret::load(&p).unwrap();
    }
}

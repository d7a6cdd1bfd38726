//! Who a request acts as, on a cluster with a secret: the user of the S3
//! access key that signed it (`thaw auth s3-key create`).
//!
//! The master keeps which user, groups and default job each key stands for;
//! the key's secret is derived from the cluster secret, which this gateway
//! holds as a worker does, so it checks SigV4 signatures (headers and
//! presigned URLs, by `s3s`) without the secret ever being stored or sent.
//! Each key's user gets a client of its own on the gateway's shared
//! connections, with tokens minted for that user: the master checks its
//! owners, groups and modes exactly as for any other client. Its uploads are
//! staged in a directory only it can enter.
//!
//! Keys are looked up at most every [`KEY_TTL`]: a deleted key, or a new
//! default job, takes effect that long after at worst.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3Error, S3ErrorCode, S3Result};
use thaw_client::Client;
use thaw_common::auth::{Credentials, SUPERUSER, Secret};
use thaw_common::proto::S3KeyRecord;

use crate::errors::object_error;
use crate::names::STAGING;

/// How long a key looked up (or found missing) is believed.
pub const KEY_TTL: Duration = Duration::from_secs(5);
/// Users whose clients are kept (more: the least recently used is dropped).
const MAX_USERS: usize = 1024;

/// The staging directory of `user`'s uploads.
pub fn user_home(user: &str) -> String {
    format!("{STAGING}/u/{user}")
}

/// A user's client and staging directory.
#[derive(Clone)]
pub(crate) struct Acting {
    pub client: Client,
    pub home: String,
    pub job: String,
}

/// A user and its groups: one client each.
type UserId = (String, Vec<String>);

pub(crate) struct Keys {
    secret: Arc<Secret>,
    /// The gateway acting as the superuser: looks keys up, makes homes.
    pub admin: Client,
    cache: Mutex<HashMap<String, (Option<S3KeyRecord>, Instant)>>,
    /// Per (user, groups): its client (its home made), and its last use.
    users: Mutex<HashMap<UserId, (Client, Instant)>>,
}

/// `base`'s connections, acting as the superuser with the cluster secret (as
/// the gateway of a cluster with a secret does for its own work).
pub fn admin_client(base: &Client, secret: &Arc<Secret>) -> thaw_common::Result<Client> {
    Ok(base.as_user(Arc::new(Credentials::from_secret(secret.clone(), SUPERUSER, Vec::new())?)))
}

impl Keys {
    pub fn new(base: &Client, secret: Arc<Secret>) -> thaw_common::Result<Self> {
        let admin = admin_client(base, &secret)?;
        Ok(Keys { secret, admin, cache: Mutex::default(), users: Mutex::default() })
    }

    /// The key `access_key` (none: no such key), from the cache if fresh.
    pub async fn lookup(&self, access_key: &str) -> S3Result<Option<S3KeyRecord>> {
        if let Some((rec, at)) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(access_key)
            && at.elapsed() < KEY_TTL
        {
            return Ok(rec.clone());
        }
        if access_key.is_empty() || access_key.len() > 128 {
            return Ok(None);
        }
        let rec = self.admin.list_s3_keys("", access_key).await.map_err(object_error)?.into_iter().next();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() > 10_000 {
            cache.retain(|_, (_, at)| at.elapsed() < KEY_TTL);
        }
        cache.insert(access_key.to_string(), (rec.clone(), Instant::now()));
        Ok(rec)
    }

    /// Who a request signed with `access_key` acts as.
    pub async fn acting(&self, access_key: &str) -> S3Result<Acting> {
        let rec = self.lookup(access_key).await?.ok_or_else(|| unknown_key(access_key))?;
        let id = (rec.user.clone(), rec.groups.clone());
        let home = user_home(&rec.user);
        let known = self.users.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&id).map(|(c, used)| {
            *used = Instant::now();
            c.clone()
        });
        let client = match known {
            Some(c) => c,
            None => {
                let creds = Credentials::from_secret(self.secret.clone(), &rec.user, rec.groups.clone())
                    .map_err(object_error)?;
                let client = self.admin.as_user(Arc::new(creds));
                self.make_home(&rec.user, &rec.groups, &home).await?;
                let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
                if users.len() >= MAX_USERS
                    && let Some(oldest) = users.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| k.clone())
                {
                    users.remove(&oldest);
                }
                users.insert(id, (client.clone(), Instant::now()));
                client
            }
        };
        Ok(Acting { client, home, job: rec.job })
    }

    /// `user`'s staging directory: made by the superuser, given to the
    /// user, mode 0700 (others cannot see its uploads).
    async fn make_home(&self, user: &str, groups: &[String], home: &str) -> S3Result<()> {
        let c = &self.admin;
        // Every user passes through the directories above (and lists nothing
        // in them: each home is its user's alone).
        let users = format!("{STAGING}/u");
        c.mkdir_with_mode(&users, true, true, Some(0o711)).await.map_err(object_error)?;
        for dir in [STAGING, users.as_str()] {
            c.set_attributes(dir, Some(0o711), None, None).await.map_err(object_error)?;
        }
        c.mkdir_with_mode(home, false, true, Some(0o700)).await.map_err(object_error)?;
        // Its group: the user's first (what a staged file has until placed).
        let group = groups.first().cloned();
        c.set_attributes(home, Some(0o700), Some(user.to_string()), group).await.map_err(object_error)?;
        Ok(())
    }
}

fn unknown_key(access_key: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::InvalidAccessKeyId,
        format!("no S3 key {access_key:?} in this cluster (`thaw auth s3-key create` makes one)"),
    )
}

/// The signature check's side: a key's secret, derived.
pub(crate) struct KeyAuth(pub Arc<Keys>);

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.0.lookup(access_key).await? {
            Some(_) => Ok(SecretKey::from(self.0.secret.s3_secret(access_key))),
            None => Err(unknown_key(access_key)),
        }
    }
}

/// Refuses unsigned requests: on a cluster with a secret nobody is anonymous.
pub(crate) struct SignedOnly;

pub(crate) fn unsigned() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::AccessDenied,
        "this cluster checks credentials: sign requests with an S3 key (`thaw auth s3-key create`)",
    )
}

#[async_trait::async_trait]
impl s3s::access::S3Access for SignedOnly {
    async fn check(&self, cx: &mut s3s::access::S3AccessContext<'_>) -> S3Result<()> {
        match cx.credentials() {
            Some(_) => Ok(()),
            None => Err(unsigned()),
        }
    }
}

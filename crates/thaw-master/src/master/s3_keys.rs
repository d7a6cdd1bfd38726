//! The S3 gateway's access keys: which Thaw user (and groups) requests
//! signed with each act as, and the job they count against by default.
//!
//! Kept in the journal (replicated with a group of masters) as
//! [`S3KeyRecord`]s; the secret of a key is never stored, only derived from
//! the cluster secret ([`Secret::s3_secret`]), so [`Master::create_s3_key`]
//! shows it once and a gateway holding the cluster secret derives it again
//! to check signatures. Who may do what follows `IssueToken`: a user makes,
//! lists, changes and deletes their own keys (acting with their own
//! groups); the superuser anyone's, in any groups.

use thaw_common::auth::{self, Secret};
use thaw_common::proto::*;
use thaw_common::{Result, ThawError, now_ms};

use super::Master;
use super::jobs::MAX_JOB_ID;
use super::permissions::Caller;
use crate::journal::{JournalOp, RECORD_VERSION};

/// Keys one user may hold (a leaked-key cleanup should not face thousands).
pub const MAX_KEYS_PER_USER: usize = 100;

fn check_job(job: &str) -> Result<()> {
    if job.len() > MAX_JOB_ID || job.chars().any(char::is_control) {
        return Err(ThawError::invalid(format!("a job id is at most {MAX_JOB_ID} bytes, without control characters")));
    }
    Ok(())
}

impl Master {
    fn s3_secret_holder(&self) -> Result<&std::sync::Arc<Secret>> {
        self.secret().ok_or_else(|| {
            ThawError::precondition(
                "this master has no secret, so S3 keys mean nothing: its gateways take anonymous requests \
                 (start the master with --secret-file to have keys mapped to users)",
            )
        })
    }

    /// A new key for the caller or (the superuser asking) for `req.user` in
    /// `req.groups`; the answer carries the secret, the only time it is shown.
    pub fn create_s3_key(&self, req: CreateS3KeyRequest) -> Result<CreateS3KeyResponse> {
        let secret = self.s3_secret_holder()?.clone();
        let caller = Caller::current();
        let own = req.user.is_empty() || req.user == caller.user;
        if !own || !req.groups.is_empty() {
            caller.require_superuser("an S3 key for another user or other groups")?;
        }
        let (user, groups) =
            if req.user.is_empty() { (caller.user.clone(), caller.groups.clone()) } else { (req.user, req.groups) };
        auth::claims(&user, &groups, 0)?;
        check_job(&req.job)?;
        let rec = S3KeyRecord {
            version: RECORD_VERSION,
            access_key: Secret::new_s3_access_key()?,
            user,
            groups,
            job: req.job,
            created_ms: now_ms(),
            created_by: caller.user.clone(),
        };
        let mut st = self.write();
        if st.s3_keys.values().filter(|k| k.user == rec.user).count() >= MAX_KEYS_PER_USER {
            return Err(ThawError::exhausted(format!(
                "{} holds {MAX_KEYS_PER_USER} S3 keys already: delete one first",
                rec.user
            )));
        }
        self.commit(&st, &[JournalOp::PutS3Key(rec.clone())])?;
        st.s3_keys.insert(rec.access_key.clone(), rec.clone());
        tracing::info!(access_key = %rec.access_key, user = %rec.user, by = %caller.user, "S3 key created");
        Ok(CreateS3KeyResponse { secret_key: secret.s3_secret(&rec.access_key), key: Some(rec) })
    }

    /// Keys the caller may see: its own, or (the superuser) anyone's, of
    /// `req.user` if named, the one `req.access_key` if named.
    pub fn list_s3_keys(&self, req: ListS3KeysRequest) -> Result<ListS3KeysResponse> {
        self.s3_secret_holder()?;
        let caller = Caller::current();
        let st = self.read();
        let mine = |k: &S3KeyRecord| k.user == caller.user;
        if !req.access_key.is_empty() {
            let key = st.s3_keys.get(&req.access_key).filter(|k| mine(k) || caller.is_superuser());
            return Ok(ListS3KeysResponse { keys: key.cloned().into_iter().collect() });
        }
        if !req.user.is_empty() && req.user != caller.user {
            caller.require_superuser("another user's S3 keys")?;
        }
        let keys = st
            .s3_keys
            .values()
            .filter(|k| if req.user.is_empty() { caller.is_superuser() || mine(k) } else { k.user == req.user })
            .cloned()
            .collect();
        Ok(ListS3KeysResponse { keys })
    }

    /// The key the caller may change (its own, or the superuser's any).
    fn own_key(&self, access_key: &str) -> Result<S3KeyRecord> {
        self.s3_secret_holder()?;
        let caller = Caller::current();
        let st = self.read();
        match st.s3_keys.get(access_key) {
            Some(k) if k.user == caller.user || caller.is_superuser() => Ok(k.clone()),
            // Another user's key is not said to exist.
            _ => Err(ThawError::not_found(format!("no S3 key {access_key} of {}", caller.user))),
        }
    }

    pub fn delete_s3_key(&self, req: DeleteS3KeyRequest) -> Result<DeleteS3KeyResponse> {
        let key = self.own_key(&req.access_key)?;
        let mut st = self.write();
        self.commit(&st, &[JournalOp::DeleteS3Key(key.access_key.clone())])?;
        st.s3_keys.remove(&key.access_key);
        tracing::info!(access_key = %key.access_key, user = %key.user, by = %Caller::current().user, "S3 key deleted");
        Ok(DeleteS3KeyResponse {})
    }

    /// Sets (or, empty, clears) the job a key's requests count against.
    pub fn set_s3_key_job(&self, req: SetS3KeyJobRequest) -> Result<ListS3KeysResponse> {
        check_job(&req.job)?;
        let mut key = self.own_key(&req.access_key)?;
        key.job = req.job;
        let mut st = self.write();
        if !st.s3_keys.contains_key(&key.access_key) {
            return Err(ThawError::not_found(format!("no S3 key {} (deleted meanwhile)", key.access_key)));
        }
        self.commit(&st, &[JournalOp::PutS3Key(key.clone())])?;
        st.s3_keys.insert(key.access_key.clone(), key.clone());
        Ok(ListS3KeysResponse { keys: vec![key] })
    }
}

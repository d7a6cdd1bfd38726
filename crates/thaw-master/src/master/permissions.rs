//! Who calls, and what they may do: HDFS's permission model on the namespace.
//!
//! Each entry has an owner, a group and mode bits (rwx for owner, group,
//! others). As in HDFS:
//! - reaching an entry needs `x` on every directory above it;
//! - reading a file (its blocks) needs `r` on it; listing a directory `r|x`;
//! - creating, deleting or renaming needs `w|x` on the parent directory;
//! - a new entry belongs to its creator, with its parent's group;
//! - the owner changes the mode, and the group to one of its own groups; only a
//!   superuser ([`auth::SUPERUSER`], a member of [`auth::SUPERGROUP`], or the
//!   OS user the master runs as) changes the owner; a superuser passes every
//!   check.
//!
//! Checks apply only on a master with a secret. Without one, callers are
//! believed as to who they are (`thaw-user` metadata, HDFS's "simple"
//! authentication) and recorded as owners, but nothing is refused.
//!
//! The caller is set for the duration of each RPC ([`CALLER`], by
//! the gRPC service); work the master does on its own (rebuilds, checkpoints,
//! background tasks) runs outside any call, as [`Caller::internal`].

use std::sync::Arc;

use thaw_common::auth::{self, Secret};
use thaw_common::proto::*;
use thaw_common::{Result, ThawError, now_ms, path};

use super::{Master, State};
use crate::namespace::{Inode, NewInode, ROOT_ID};

/// How long the master's grants to read a block or write a file last (HDFS's
/// block access tokens: 10 hours).
pub const GRANT_TTL_MS: u64 = 10 * 3_600_000;
pub const DEFAULT_FILE_MODE: u32 = 0o644;
pub const DEFAULT_DIR_MODE: u32 = 0o755;

pub const READ: u32 = 4;
pub const WRITE: u32 = 2;
pub const EXEC: u32 = 1;

/// Who makes the current call.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: String,
    pub groups: Vec<String>,
    /// Whether this caller's permissions are checked (a master with a secret).
    pub checked: bool,
    /// When its token expires (0: no token).
    pub expires_ms: u64,
    /// [`auth::SUPERUSER`], a member of [`auth::SUPERGROUP`], or the user the
    /// master runs as (as HDFS's NameNode user is its superuser).
    pub superuser: bool,
}

tokio::task_local! {
    /// The caller of the RPC being served.
    pub static CALLER: Arc<Caller>;
}

impl Caller {
    /// The master itself (and calls made outside any RPC).
    pub fn internal() -> Self {
        Caller { user: auth::SUPERUSER.to_string(), groups: Vec::new(), checked: false, expires_ms: 0, superuser: true }
    }

    /// The caller of the RPC being served, or [`Caller::internal`]. (Shared,
    /// not copied: a lookup asks for it several times.)
    pub fn current() -> Arc<Self> {
        CALLER.try_with(Arc::clone).unwrap_or_else(|_| Arc::new(Caller::internal()))
    }

    pub fn is_superuser(&self) -> bool {
        self.superuser
    }

    /// Whether nothing is refused to this caller.
    fn unrestricted(&self) -> bool {
        !self.checked || self.is_superuser()
    }

    /// Refuses a caller that is not a superuser (the worker protocol, lineage
    /// commands the master runs, other users' tokens).
    pub fn require_superuser(&self, what: &str) -> Result<()> {
        if self.unrestricted() {
            return Ok(());
        }
        Err(ThawError::permission_denied(format!(
            "{what} is for the superuser ({}), not {}",
            auth::SUPERUSER,
            self.user
        )))
    }

    /// The name a new entry is owned by ("" for the master's own).
    pub fn owner_name(&self) -> String {
        if self.checked || self.user != auth::SUPERUSER { self.user.clone() } else { String::new() }
    }
}

/// An entry's owner, group and mode, defaults filled in.
pub fn owner(rec: &Inode) -> &str {
    if rec.owner().is_empty() { auth::SUPERUSER } else { rec.owner() }
}

pub fn group(rec: &Inode) -> &str {
    if rec.group().is_empty() { auth::SUPERGROUP } else { rec.group() }
}

pub fn mode(rec: &Inode) -> u32 {
    rec.mode().unwrap_or(if rec.is_dir() { DEFAULT_DIR_MODE } else { DEFAULT_FILE_MODE }) & 0o777
}

/// Fills `info`'s permission fields from `rec`.
pub fn describe(info: &mut FileInfo, rec: &Inode) {
    info.owner = owner(rec).to_string();
    info.group = group(rec).to_string();
    info.mode = mode(rec);
}

/// Whether `caller` has every bit of `want` (rwx as 4|2|1) on `rec`.
fn allows(caller: &Caller, rec: &Inode, want: u32) -> bool {
    if caller.unrestricted() {
        return true;
    }
    let m = mode(rec);
    let bits = if owner(rec) == caller.user {
        m >> 6
    } else if caller.groups.iter().any(|g| g == group(rec)) {
        m >> 3
    } else {
        m
    } & 7;
    bits & want == want
}

fn words(want: u32) -> String {
    [(READ, 'r'), (WRITE, 'w'), (EXEC, 'x')].iter().filter(|(b, _)| want & b != 0).map(|(_, c)| *c).collect()
}

impl State {
    /// Checks that the current caller reaches inode `id` (x on each directory
    /// above it) and has `want` on it.
    pub(super) fn check(&self, id: u64, want: u32) -> Result<()> {
        let caller = Caller::current();
        if caller.unrestricted() {
            return Ok(());
        }
        let ino = self.ns.get(id).ok_or_else(|| ThawError::not_found(format!("inode {id} is gone")))?;
        let mut chain = Vec::new();
        let mut at = id;
        while at != ROOT_ID {
            at = self.ns.get(at).ok_or_else(|| ThawError::internal("a parent is missing"))?.parent_id();
            chain.push(at);
        }
        for dir in chain.into_iter().rev() {
            let rec = self.ns.get(dir).expect("walked");
            if !allows(&caller, rec, EXEC) {
                return Err(denied(&caller, &self.ns.path_of(dir), rec, EXEC));
            }
        }
        if want != 0 && !allows(&caller, ino, want) {
            return Err(denied(&caller, &self.ns.path_of(id), ino, want));
        }
        Ok(())
    }

    /// Checks that the current caller may change job `job` (migrate into it,
    /// evict it): the job is its submitter's; a new job becomes the caller's.
    /// Soft state, as jobs are.
    pub(super) fn check_job_owner(&mut self, job: &str) -> Result<()> {
        let caller = Caller::current();
        if !caller.checked {
            return Ok(());
        }
        let migrations = &self.migrations;
        self.job_owners.retain(|j, _| migrations.has_job(j));
        match self.job_owners.get(job) {
            Some(owner) if *owner != caller.user && !caller.is_superuser() => {
                Err(ThawError::permission_denied(format!("job {job} is {owner}'s: {} may not change it", caller.user)))
            }
            Some(_) => Ok(()),
            None => {
                self.job_owners.insert(job.to_string(), caller.user.clone());
                Ok(())
            }
        }
    }

    /// Checks that the current caller may add or remove entries of directory
    /// `parent` (w|x on it).
    pub(super) fn check_parent(&self, parent: u64) -> Result<()> {
        self.check(parent, WRITE | EXEC)
    }
}

fn denied(caller: &Caller, path: &str, rec: &Inode, want: u32) -> ThawError {
    ThawError::permission_denied(format!(
        "{} may not {} {path} (owner {}, group {}, mode {:o})",
        caller.user,
        match want {
            EXEC => "pass through".to_string(),
            READ => "read".to_string(),
            w if w == WRITE | EXEC => "change entries of".to_string(),
            w => format!("use ({}) ", words(w)),
        },
        owner(rec),
        group(rec),
        mode(rec)
    ))
}

impl Master {
    /// A new entry under `parent`, as the current caller makes it: its
    /// owner, the parent's group, and `mode` (none: the default).
    pub(super) fn new_entry(&self, st: &State, parent: u64, mode: Option<u32>) -> NewInode {
        NewInode {
            owner: Caller::current().owner_name(),
            group: st.ns.get(parent).map(|p| p.group().to_string()).unwrap_or_default(),
            mode: mode.map(|m| m & 0o777),
            ..Default::default()
        }
    }

    pub fn secret(&self) -> Option<&Arc<Secret>> {
        self.config.secret.as_ref()
    }

    /// The master's grant to the current caller to read (or write) file `id`
    /// at `path` (none without a secret).
    pub(super) fn grant(&self, write: bool, id: u64, path: &str) -> Option<SignedAccess> {
        let secret = self.secret()?;
        let claims = AccessClaims {
            user: Caller::current().user.clone(),
            expires_ms: now_ms() + GRANT_TTL_MS,
            write,
            id,
            ufs_path: path.to_string(),
        };
        Some(secret.grant(&claims))
    }

    /// Grants the current caller the reads of `info`'s blocks, if it may read
    /// the file.
    pub(super) fn grant_reads(&self, st: &State, info: &mut FileInfo) {
        if self.secret().is_none() || info.is_dir || info.blocks.is_empty() {
            return;
        }
        if st.check(info.file_id, READ).is_err() {
            return;
        }
        // One grant for the file (a block id names its file): one signature
        // per lookup, not one per block.
        info.access = self.grant(false, info.file_id, &info.path);
    }
}

impl Master {
    /// chmod, chown and chgrp of one entry (see the module's rules).
    pub async fn set_attributes(&self, req: SetAttributesRequest) -> Result<SetAttributesResponse> {
        let p = path::normalize(&req.path)?;
        if p == "/" {
            return Err(ThawError::invalid("the root's owner and mode are fixed (the superuser's, 0755)"));
        }
        if let Some(m) = req.mode
            && m > 0o777
        {
            return Err(ThawError::invalid(format!("mode {m:o} has bits beyond rwxrwxrwx (0777)")));
        }
        if let Some(o) = &req.owner {
            auth::check_name(o, "owner")?;
        }
        if let Some(g) = &req.group {
            auth::check_name(g, "group")?;
        }
        let id = self.resolve(&p).await?;
        let caller = Caller::current();
        let mut st = self.write();
        st.check(id, 0)?;
        let rec = st.ns.get(id).ok_or_else(|| ThawError::not_found(format!("no such file or directory: {p}")))?;
        if !caller.unrestricted() {
            if owner(rec) != caller.user {
                return Err(ThawError::permission_denied(format!(
                    "{} may not change {p}: its owner is {}",
                    caller.user,
                    owner(rec)
                )));
            }
            if req.owner.as_deref().is_some_and(|o| o != owner(rec)) {
                return Err(ThawError::permission_denied(format!(
                    "only the superuser changes an owner ({} asked for {p})",
                    caller.user
                )));
            }
            if let Some(g) = &req.group
                && !caller.groups.contains(g)
            {
                return Err(ThawError::permission_denied(format!(
                    "{} is not in group {g}, so may not give {p} to it",
                    caller.user
                )));
            }
        }
        let op = st.ns.update(id, |r| {
            if let Some(m) = req.mode {
                r.mode = Some(m);
            }
            if let Some(o) = &req.owner {
                r.owner = if o == auth::SUPERUSER { String::new() } else { o.clone() };
            }
            if let Some(g) = &req.group {
                r.group = if g == auth::SUPERGROUP { String::new() } else { g.clone() };
            }
        })?;
        self.commit(&st, &[op])?;
        tracing::info!(path = %p, by = %caller.user, mode = ?req.mode, owner = ?req.owner, group = ?req.group, "attributes set");
        Ok(SetAttributesResponse { info: Some(Self::file_info(&st, id, false, &Position::default())) })
    }

    /// A token for the caller itself or, asked by a superuser, for anyone.
    pub fn issue_token(&self, req: IssueTokenRequest) -> Result<IssueTokenResponse> {
        let secret = self.secret().ok_or_else(|| {
            ThawError::precondition("this master has no secret: it asks for no tokens (start it with --secret-file)")
        })?;
        let caller = Caller::current();
        let own = req.user.is_empty() || req.user == caller.user;
        if !own || !req.groups.is_empty() {
            caller.require_superuser("a token for another user or other groups")?;
        }
        let ttl = if req.ttl_ms == 0 { self.config.token_ttl.as_millis() as u64 } else { req.ttl_ms };
        let max = self.config.token_max_ttl.as_millis() as u64;
        if ttl > max {
            return Err(ThawError::invalid(format!("a token lasts at most {} s", max / 1000)));
        }
        let (user, groups) =
            if req.user.is_empty() { (caller.user.clone(), caller.groups.clone()) } else { (req.user, req.groups) };
        let claims = auth::claims(&user, &groups, ttl)?;
        tracing::info!(user = %claims.user, ttl_ms = ttl, "token issued");
        Ok(IssueTokenResponse { token: secret.mint(&claims), expires_ms: claims.expires_ms })
    }

    pub fn who_am_i(&self) -> WhoAmIResponse {
        let caller = Caller::current();
        WhoAmIResponse {
            superuser: caller.is_superuser(),
            security: self.secret().is_some(),
            user: caller.user.clone(),
            groups: caller.groups.clone(),
            expires_ms: caller.expires_ms,
        }
    }
}

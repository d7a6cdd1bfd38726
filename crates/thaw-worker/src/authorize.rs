//! Which data requests a worker with the cluster secret serves.
//!
//! The worker knows nothing of paths, owners or modes: the master checked
//! those when it handed out a grant ([`thaw_common::auth`]), and the worker
//! checks that the grant is the master's, unexpired, and for exactly this
//! request: reading this file's blocks (and its bytes at this under-store
//! path), or writing this file (and its copy at this path). HDFS's block
//! access tokens work the same way, one per block; a Thaw block id names its
//! file, so one grant per file does (one signature per lookup, not one per
//! block: the metadata path's cost, BENCHMARKS.md).
//!
//! Short-circuit reads and writes hand out paths of block files: on a secured
//! worker its tier directories are readable by its own user only (0700), so
//! only a client running as that user can open them; the others stream,
//! through the same grant check.

use thaw_common::auth::{self, Secret};
use thaw_common::ids::file_of_block;
use thaw_common::proto::{DataRequest, data_request::Request};
use thaw_common::{Result, ThawError};

/// Refuses `req` unless it carries what its kind needs; the user it comes
/// from (none for a request of no kind, refused later as malformed).
pub fn authorize(secret: &Secret, req: &DataRequest) -> Result<Option<String>> {
    // Grants name files; a block id names its file.
    let grant = |write: bool, file: u64, ufs: Option<&str>| -> Result<Option<String>> {
        let c = secret.check(req.access.as_ref())?;
        if c.write != write || c.id != file {
            return Err(ThawError::permission_denied(format!(
                "the grant is for {} file {}, not for this request's",
                if c.write { "writing" } else { "reading" },
                c.id
            )));
        }
        if let Some(p) = ufs.filter(|p| !p.is_empty())
            && p != c.ufs_path
        {
            return Err(ThawError::permission_denied(format!("the grant does not cover the under-store path {p:?}")));
        }
        Ok(Some(c.user))
    };
    let token = || {
        if req.token.is_empty() {
            return Err(ThawError::permission_denied("this worker requires a token with this request (none sent)"));
        }
        secret.verify(&req.token)
    };
    match &req.request {
        Some(Request::ReadBlock(r)) => grant(false, file_of_block(r.block_id), r.ufs.as_ref().map(|u| u.path.as_str())),
        Some(Request::CacheBlock(r)) => {
            grant(false, file_of_block(r.block_id), r.ufs.as_ref().map(|u| u.path.as_str()))
        }
        Some(Request::OpenLocal(r)) => grant(false, file_of_block(r.block_id), None),
        Some(Request::WriteFile(r) | Request::WriteLocal(r)) => grant(true, r.file_id, Some(&r.ufs_path)),
        Some(Request::Stats(_)) => token().map(|c| Some(c.user)),
        Some(Request::DeviceControl(_)) => {
            let c = token()?;
            if auth::is_superuser(&c.user, &c.groups) {
                Ok(Some(c.user))
            } else {
                Err(ThawError::permission_denied(format!(
                    "device control is for the superuser ({}), not {}",
                    auth::SUPERUSER,
                    c.user
                )))
            }
        }
        // Refused as malformed later.
        None => Ok(None),
    }
}

/// Connections held per user on a secured worker
/// (`WorkerConfig::max_connections_per_user`): one user cannot take every
/// slot of a worker, whatever its clients do with them.
#[derive(Default)]
pub struct UserConnections {
    held: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

/// One connection counted against its user, until dropped.
pub struct UserSlot {
    users: std::sync::Arc<UserConnections>,
    user: String,
}

impl UserConnections {
    /// Counts a connection of `user`, unless it already holds `max`.
    pub fn take(self: &std::sync::Arc<Self>, user: &str, max: usize) -> Result<UserSlot> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(user.to_string()).or_default();
        if *n >= max {
            return Err(ThawError::exhausted(format!(
                "{user} holds {n} connections to this worker, its limit (--max-connections-per-user)"
            )));
        }
        *n += 1;
        Ok(UserSlot { users: self.clone(), user: user.to_string() })
    }
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        let mut held = self.users.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.user);
            }
        }
    }
}

/// Makes a tier directory its user's only.
pub fn restrict_dir(dir: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| ThawError::from(e).context(format!("restricting tier directory {}", dir.display())))
}

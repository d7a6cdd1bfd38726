//! The under-store (UFS): the durable home of cold data, mounted at the namespace
//! root (Tachyon, section 2.7). Reached through OpenDAL: a local directory (`fs://`,
//! the default), an S3 bucket (`s3://`, see [`s3`]) or HDFS (`hdfs://`, see
//! [`hdfs`]).
//!
//! Object stores have no directories and no rename. Here a directory is a key
//! prefix (an empty `dir/` marker object is made by `create_dir`, and any key
//! under the prefix makes it exist), and a rename is a copy of every object
//! followed by the deletion of the sources: never atomic, but never a moment
//! with no copy either (a crash in between leaves both).
//!
//! Every path given here is a namespace path ("/a/b"), checked by
//! `thaw_common::path` before it is turned into an OpenDAL key, so nothing outside
//! the under-store root is ever read or written.

use std::ops::Range;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use opendal::{ErrorKind as DalKind, Operator};
use thaw_common::{Result, ThawError, path};

pub mod hdfs;
pub mod s3;

/// Chunk size of under-store reads; reads are pipelined `READ_CONCURRENCY` deep.
const READ_CHUNK: usize = 4 << 20;
const READ_CONCURRENCY: usize = 2;

/// What the under-store says about a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UfsStatus {
    pub is_dir: bool,
    pub length: u64,
    pub mtime_ms: u64,
}

/// A handle on the mounted under-store. Cheap to clone.
#[derive(Clone, Debug)]
pub struct UnderStore {
    op: Operator,
    uri: String,
    backend: Backend,
}

/// What is behind the operator: each kind differs in renames, writes and errors.
#[derive(Clone, Debug)]
enum Backend {
    /// A local directory (its root): renames are atomic, files copy in-kernel.
    Local(std::path::PathBuf),
    /// An S3 bucket: no rename, directories are prefixes.
    S3(s3::S3Location),
    /// HDFS: atomic renames through its own client; writes show while open.
    Hdfs(hdfs::HdfsTarget),
}

/// Remote stores (S3, HDFS): a request that fails for a moment (a dropped
/// connection, 503 SlowDown, a NameNode failing over) is tried again; none waits
/// forever on a store that stopped answering.
fn resilient(op: Operator) -> Operator {
    use opendal::layers::{RetryLayer, TimeoutLayer};
    use std::time::Duration;
    op.layer(
        RetryLayer::new()
            .with_max_times(3)
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(2))
            .with_jitter()
            // One line per retry (OpenDAL's own notice dumps the error's context
            // and, with RUST_BACKTRACE set, a backtrace).
            .with_notify(|ev: opendal::layers::RetryEvent<'_>| {
                tracing::warn!(
                    "under-store {} failed, retry {} in {:.1} s: {}",
                    ev.op,
                    ev.attempt,
                    ev.retry_after.as_secs_f64(),
                    brief(ev.err)
                );
            }),
    )
    .layer(TimeoutLayer::new().with_timeout(Duration::from_secs(60)).with_io_timeout(Duration::from_secs(30)))
}

/// What went wrong, in one short line: an S3 server's `Code: message`, else
/// the innermost cause (a refused connection), without OpenDAL's context dump
/// (request, response headers, backtrace).
pub(crate) fn brief(e: &opendal::Error) -> String {
    let m = e.message();
    let field = |name: &str| {
        let start = m.find(&format!("{name}: \""))? + name.len() + 3;
        let len = m[start..].find("\", ").or_else(|| m[start..].find('"'))?;
        Some(m[start..start + len].to_string())
    };
    match (field("code"), field("message")) {
        (Some(code), Some(msg)) if !code.is_empty() && !msg.is_empty() => return format!("{code}: {msg}"),
        (Some(code), _) if !code.is_empty() => return code,
        _ => {}
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut last = None;
    while let Some(c) = cause {
        last = Some(c.to_string());
        cause = c.source();
    }
    let text = last.unwrap_or_else(|| if m.is_empty() { e.kind().to_string() } else { m.to_string() });
    text.lines().next().unwrap_or_default().chars().take(200).collect()
}

/// Part size of multipart uploads to object stores (S3 wants >= 5 MiB parts).
const UPLOAD_PART: usize = 8 << 20;
const UPLOAD_CONCURRENCY: usize = 2;

fn dal_err(e: opendal::Error, what: &str, path: &str) -> ThawError {
    let msg = format!("under-store {what} {path}: {e}");
    // Some services pass an OS error through as "unexpected": a path under a file
    // (ENOTDIR) or a directory read as a file (EISDIR) is no transient failure.
    let os = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::raw_os_error);
    match os {
        Some(libc::ENOTDIR) => return ThawError::not_dir(msg),
        Some(libc::EISDIR) => return ThawError::is_dir(msg),
        Some(libc::ENOSPC | libc::EDQUOT) => {
            return ThawError::exhausted(format!(
                "under-store {what} {path}: the under-store is full (no space left on its file system)"
            ));
        }
        _ => {}
    }
    match e.kind() {
        DalKind::NotFound => ThawError::not_found(msg),
        DalKind::AlreadyExists => ThawError::already_exists(msg),
        DalKind::PermissionDenied => ThawError::permission_denied(msg),
        DalKind::IsADirectory => ThawError::is_dir(msg),
        DalKind::NotADirectory => ThawError::not_dir(msg),
        DalKind::RateLimited => ThawError::unavailable(msg),
        _ if e.is_temporary() || e.is_persistent() => ThawError::unavailable(msg),
        _ => ThawError::internal(msg),
    }
}

/// Directory under the root where files are written before they appear at their
/// path (so an aborted write leaves nothing); hidden from listings, not addressable.
const STAGING_DIR: &str = ".thaw-staging";

/// Components of an addressable path.
fn checked(p: &str) -> Result<Vec<&str>> {
    let c = path::components(p)?;
    if c.first() == Some(&STAGING_DIR) {
        return Err(ThawError::invalid(format!("{p}: {STAGING_DIR} is reserved by Thaw")));
    }
    Ok(c)
}

/// The OpenDAL key of a file (no leading '/').
fn file_key(p: &str) -> Result<String> {
    let c = checked(p)?;
    if c.is_empty() {
        return Err(ThawError::is_dir("/ is a directory"));
    }
    Ok(c.join("/"))
}

/// The OpenDAL key of a directory (trailing '/'; "/" for the root).
fn dir_key(p: &str) -> Result<String> {
    let c = checked(p)?;
    Ok(if c.is_empty() { "/".to_string() } else { format!("{}/", c.join("/")) })
}

impl UnderStore {
    /// Opens an under-store from a URI: `s3://bucket/prefix?endpoint=..&region=..`,
    /// `fs:///abs/dir`, `file:///abs/dir`, or a plain directory path (relative to
    /// the current directory). A directory is created if missing; nothing is asked
    /// of an S3 store until [`UnderStore::check`].
    pub fn open(uri: &str) -> Result<Self> {
        if uri.starts_with("s3://") {
            return Self::open_s3(uri, None);
        }
        if uri.starts_with("hdfs://") {
            let (target, op) = hdfs::HdfsTarget::parse(uri)?;
            return Ok(UnderStore { op, uri: target.uri(), backend: Backend::Hdfs(target) });
        }
        if let Some((scheme, _)) = uri.split_once("://")
            && !matches!(scheme, "fs" | "file")
        {
            return Err(ThawError::invalid(format!(
                "under-store {uri:?}: unknown scheme {scheme:?} (s3://, hdfs://, fs:// or a directory)"
            )));
        }
        let dir = uri.strip_prefix("fs://").or_else(|| uri.strip_prefix("file://")).unwrap_or(uri);
        // A plain relative directory is taken from the current one.
        let relative = (!uri.contains("://") && !dir.is_empty() && !dir.starts_with('/'))
            .then(|| std::env::current_dir().map(|d| d.join(dir).to_string_lossy().into_owned()))
            .transpose()?;
        let dir = relative.as_deref().unwrap_or(dir);
        if !dir.starts_with('/') {
            return Err(ThawError::invalid(format!(
                "under-store {uri:?}: expected fs:///absolute/dir or an absolute directory"
            )));
        }
        std::fs::create_dir_all(dir).map_err(|e| ThawError::from(e).context(format!("under-store directory {dir}")))?;
        let dir = std::fs::canonicalize(dir)?;
        let dir = dir.to_string_lossy().into_owned();
        let staging = format!("{dir}/{STAGING_DIR}");
        let builder = opendal::services::Fs::default().root(&dir).atomic_write_dir(&staging);
        let op = Operator::new(builder).map_err(|e| dal_err(e, "open", &dir))?;
        Ok(UnderStore { op, uri: format!("fs://{dir}"), backend: Backend::Local(dir.into()) })
    }

    /// An S3 under-store with the keys given here instead of the environment's.
    pub fn open_s3(uri: &str, creds: Option<&s3::Credentials>) -> Result<Self> {
        let loc = s3::S3Location::parse(uri)?;
        let op = loc.operator(creds)?;
        Ok(UnderStore { op, uri: loc.uri(), backend: Backend::S3(loc) })
    }

    /// Asks the store once, so a wrong bucket, endpoint or credentials are an
    /// error at start-up that says which, not a failure of the first read.
    pub async fn check(&self) -> Result<()> {
        let probe = self.op.list_with("/").limit(1).await;
        let Err(e) = probe else {
            return Ok(());
        };
        Err(match &self.backend {
            Backend::S3(loc) => s3::explain(loc, e),
            Backend::Hdfs(target) => target.explain(e),
            Backend::Local(_) => dal_err(e, "list", "/"),
        })
    }

    /// The root directory, for an under-store that is a local file system.
    fn local_root(&self) -> Option<&std::path::Path> {
        match &self.backend {
            Backend::Local(root) => Some(root),
            _ => None,
        }
    }

    /// The canonical URI (what workers are told at registration).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The local file behind `p`, if this under-store is a local file system: lets
    /// a worker copy under-store bytes into a tier inside the kernel.
    pub fn local_path(&self, p: &str) -> Result<Option<std::path::PathBuf>> {
        let key = file_key(p)?;
        Ok(self.local_root().map(|root| root.join(key)))
    }

    /// `None` if nothing is at `p`.
    pub async fn stat(&self, p: &str) -> Result<Option<UfsStatus>> {
        let comps = checked(p)?;
        if comps.is_empty() {
            return Ok(Some(UfsStatus { is_dir: true, length: 0, mtime_ms: 0 }));
        }
        // A directory answers to its key with a trailing '/'; try the file first.
        // (An object store's directory is a prefix: only the '/' key finds it.)
        let key = comps.join("/");
        match self.op.stat(&key).await {
            Ok(m) => return Ok(Some(status(&m))),
            Err(e) if e.kind() == DalKind::NotFound => {}
            Err(e) => return Err(dal_err(e, "stat", p)),
        }
        if !matches!(self.backend, Backend::S3(_)) {
            return Ok(None);
        }
        match self.op.stat(&format!("{key}/")).await {
            Ok(m) => Ok(Some(status(&m))),
            Err(e) if e.kind() == DalKind::NotFound => Ok(None),
            Err(e) => Err(dal_err(e, "stat", p)),
        }
    }

    /// Entries directly under directory `p`: (name, status).
    pub async fn list(&self, p: &str) -> Result<Vec<(String, UfsStatus)>> {
        let key = dir_key(p)?;
        if let Some(root) = self.local_root() {
            // One blocking task reads the directory and stats its entries:
            // OpenDAL's listing of a local directory gives no lengths, and a
            // stat per entry through it is a blocking task each (100 directories
            // of 1,000 files took seconds to list).
            let (dir, at_root) = (root.join(key.trim_start_matches('/')), key == "/");
            return tokio::task::spawn_blocking(move || list_local(&dir, at_root))
                .await
                .map_err(|e| ThawError::internal(format!("listing task: {e}")))?
                .map_err(|e| ThawError::from(e).context(format!("under-store list {p}")));
        }
        let entries = match self.op.list(&key).await {
            Ok(e) => e,
            Err(e) if e.kind() == DalKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(dal_err(e, "list", p)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let name = entry.name().trim_end_matches('/').to_string();
            // OpenDAL lists the directory itself too.
            if name.is_empty() || entry.path() == key || (key == "/" && name == STAGING_DIR) {
                continue;
            }
            let mut st = status(entry.metadata());
            if !st.is_dir && st.length == 0 {
                // Listing may omit sizes; ask.
                if let Ok(m) = self.op.stat(entry.path()).await {
                    st = status(&m);
                }
            }
            out.push((name, st));
        }
        Ok(out)
    }

    /// Streams bytes `range` of file `p`, read ahead in chunks.
    pub async fn read_range(
        &self,
        p: &str,
        range: Range<u64>,
    ) -> Result<impl Stream<Item = Result<Bytes>> + Send + Unpin + 'static> {
        let key = file_key(p)?;
        let reader = self
            .op
            .reader_with(&key)
            .chunk(READ_CHUNK)
            .concurrent(READ_CONCURRENCY)
            .await
            .map_err(|e| dal_err(e, "open", p))?;
        let owned = p.to_string();
        let stream = reader.into_bytes_stream(range).await.map_err(|e| dal_err(e, "read", p))?;
        Ok(stream.map(move |r| r.map_err(|e| ThawError::from(e).context(format!("under-store read {owned}")))))
    }

    /// A writer for file `p`; nothing is visible at `p` until `close`.
    pub async fn writer(&self, p: &str) -> Result<UfsWriter> {
        let key = file_key(p)?;
        let Backend::Hdfs(target) = &self.backend else {
            let inner = self.writer_at(&key).await.map_err(|e| dal_err(e, "create", p))?;
            return Ok(UfsWriter { inner, path: p.to_string(), publish: None });
        };
        // An HDFS file shows at its path while it is written: write it in the
        // staging directory, then rename it into place (atomic) at close.
        let staged = target.staged_write_key(&self.op).await.map_err(|e| dal_err(e, "mkdir", STAGING_DIR))?;
        let inner = self.op.writer(&staged).await.map_err(|e| dal_err(e, "create", p))?;
        let publish = Some(Publish { target: target.clone(), op: self.op.clone(), staged, key });
        Ok(UfsWriter { inner, path: p.to_string(), publish })
    }

    /// Object stores upload in parts, two at a time; nothing shows until `close`.
    async fn writer_at(&self, key: &str) -> opendal::Result<opendal::Writer> {
        if matches!(self.backend, Backend::S3(_)) {
            self.op.writer_with(key).chunk(UPLOAD_PART).concurrent(UPLOAD_CONCURRENCY).await
        } else {
            self.op.writer(key).await
        }
    }

    pub async fn create_dir(&self, p: &str) -> Result<()> {
        let key = dir_key(p)?;
        if key == "/" {
            return Ok(());
        }
        self.op.create_dir(&key).await.map_err(|e| dal_err(e, "mkdir", p))
    }

    /// Deletes a file or a directory tree; missing paths are fine (idempotent).
    pub async fn delete(&self, p: &str) -> Result<()> {
        let Some(st) = self.stat(p).await? else {
            return Ok(());
        };
        if st.is_dir {
            let key = dir_key(p)?;
            if key == "/" {
                return Err(ThawError::invalid("refusing to delete the under-store root"));
            }
            self.delete_tree(&key, p).await
        } else {
            self.op.delete(&file_key(p)?).await.map_err(|e| dal_err(e, "delete", p))
        }
    }

    /// Renames a file or directory. A local directory renames atomically; on an
    /// object store every object under `src` is copied, then the sources deleted.
    ///
    /// Returns the files whose status the rename changed, by path relative to
    /// `dst` ("" for a file): an object store's copies are new objects with a
    /// new mtime, which the namespace must record, or its next listing would
    /// take the moved files for files changed by another tool.
    ///
    /// `overwrite`: a file at `dst` is replaced (the master has checked it is
    /// one). A directory's rename(2) and an object store's copy replace it
    /// anyway; HDFS is told to.
    pub async fn rename(&self, src: &str, dst: &str, overwrite: bool) -> Result<Vec<(String, UfsStatus)>> {
        let Some(st) = self.stat(src).await? else {
            return Ok(Vec::new());
        };
        if let Some(parent) = parent_of(dst) {
            self.create_dir(&parent).await?;
        }
        match &self.backend {
            Backend::Hdfs(target) => {
                target.rename(&file_key(src)?, &file_key(dst)?, overwrite).await?;
                return Ok(Vec::new());
            }
            // The fs service renames directories as well as files.
            Backend::Local(_) => {
                self.op.rename(&file_key(src)?, &file_key(dst)?).await.map_err(|e| dal_err(e, "rename", src))?;
                return Ok(Vec::new());
            }
            Backend::S3(_) => {}
        }
        if !st.is_dir {
            self.move_object(&file_key(src)?, &file_key(dst)?, src).await?;
            let now = self.stat(dst).await?;
            return Ok(now.into_iter().map(|st| (String::new(), st)).collect());
        }
        let (from, to) = (dir_key(src)?, dir_key(dst)?);
        let entries = self.op.list_with(&from).recursive(true).await.map_err(|e| dal_err(e, "list", src))?;
        for entry in entries {
            let rel = &entry.path()[from.len().min(entry.path().len())..];
            let target = format!("{to}{rel}");
            if entry.metadata().is_dir() {
                self.op.create_dir(&target).await.map_err(|e| dal_err(e, "mkdir", dst))?;
            } else {
                self.op.copy(entry.path(), &target).await.map_err(|e| dal_err(e, "copy", src))?;
            }
        }
        self.op.create_dir(&to).await.map_err(|e| dal_err(e, "mkdir", dst))?;
        // Every copy is in place before any source goes.
        self.delete_tree(&from, src).await?;
        self.files_under(&to, dst).await
    }

    /// Deletes directory key `dir` (ending in '/') with every key under it,
    /// on a store without directories. Deepest keys go first and each depth
    /// in its own request, then the keys are listed again: SeaweedFS keeps a
    /// directory whose marker is deleted while it still has entries, and a
    /// directory that only a key implied, and lists both again (`dir/` keys and
    /// prefixes), so a tree deleted in one unordered batch came back (OpenDAL's
    /// recursive delete sends one batch, in hash order). The implied
    /// directories between `dir` and each key are deleted too (a no-op on a
    /// plain key store such as moto or AWS).
    async fn delete_tree(&self, dir: &str, what: &str) -> Result<()> {
        if !matches!(self.backend, Backend::S3(_)) {
            return self.op.delete_with(dir).recursive(true).await.map_err(|e| dal_err(e, "delete", what));
        }
        for _ in 0..3 {
            let entries = self.op.list_with(dir).recursive(true).await.map_err(|e| dal_err(e, "list", what))?;
            let keys = tree_keys(dir, entries.iter().map(|e| e.path()));
            for level in keys.into_iter().rev() {
                self.op.delete_iter(level).await.map_err(|e| dal_err(e, "delete", what))?;
            }
            let left = self.op.list_with(dir).limit(1).await.map_err(|e| dal_err(e, "list", what))?;
            let marker = match self.op.stat(dir).await {
                Ok(_) => true,
                Err(e) if e.kind() == DalKind::NotFound => false,
                Err(e) => return Err(dal_err(e, "stat", what)),
            };
            if left.is_empty() && !marker {
                return Ok(());
            }
        }
        Err(ThawError::unavailable(format!(
            "under-store delete {what}: keys under {dir} remain after three passes (is another tool writing there?)"
        )))
    }

    /// Every file under directory key `dir`, by path relative to it, with what
    /// the store says of it now.
    async fn files_under(&self, dir: &str, what: &str) -> Result<Vec<(String, UfsStatus)>> {
        let entries = self.op.list_with(dir).recursive(true).await.map_err(|e| dal_err(e, "list", what))?;
        Ok(entries
            .into_iter()
            .filter(|e| !e.metadata().is_dir() && e.path().len() > dir.len())
            .map(|e| (e.path()[dir.len()..].to_string(), status(e.metadata())))
            .collect())
    }

    /// Moves one object: a rename where the service has it, else copy then delete.
    async fn move_object(&self, from: &str, to: &str, what: &str) -> Result<()> {
        match &self.backend {
            Backend::Hdfs(target) => return target.rename(from, to, true).await,
            Backend::Local(_) => return self.op.rename(from, to).await.map_err(|e| dal_err(e, "rename", what)),
            Backend::S3(_) => {}
        }
        self.op.copy(from, to).await.map_err(|e| dal_err(e, "copy", what))?;
        self.op.delete(from).await.map_err(|e| dal_err(e, "delete", what))
    }
}

/// Checkpoints (Tachyon, section 2.7) are written under the staging directory, named
/// by file id, and moved to the file's path only by the master, which knows the
/// path the file has when the copy is done: a rename or delete meanwhile never
/// leaves a copy at a stale path, nor overwrites a newer file there.
fn checkpoint_key(file_id: u64) -> String {
    format!("{STAGING_DIR}/checkpoints/{file_id}")
}

impl UnderStore {
    /// Where a worker on this host writes file `file_id`'s checkpoint itself (a
    /// local under-store only): write a temp file beside it, then rename.
    pub fn checkpoint_local_path(&self, file_id: u64) -> Option<std::path::PathBuf> {
        self.local_root().map(|root| root.join(checkpoint_key(file_id)))
    }

    /// A writer for file `file_id`'s checkpoint.
    pub async fn checkpoint_writer(&self, file_id: u64) -> Result<UfsWriter> {
        let key = checkpoint_key(file_id);
        let w = self.writer_at(&key).await.map_err(|e| dal_err(e, "create", &key))?;
        Ok(UfsWriter { inner: w, path: key, publish: None })
    }

    /// The length of file `file_id`'s checkpoint, if one is written.
    pub async fn checkpoint_length(&self, file_id: u64) -> Result<Option<u64>> {
        let key = checkpoint_key(file_id);
        match self.op.stat(&key).await {
            Ok(m) => Ok(Some(m.content_length())),
            Err(e) if e.kind() == DalKind::NotFound => Ok(None),
            Err(e) => Err(dal_err(e, "stat", &key)),
        }
    }

    /// Moves file `file_id`'s checkpoint to `dst` (creating its parents) and
    /// returns what is at `dst` then.
    pub async fn publish_checkpoint(&self, file_id: u64, dst: &str) -> Result<UfsStatus> {
        let key = checkpoint_key(file_id);
        if let Some(parent) = parent_of(dst) {
            self.create_dir(&parent).await?;
        }
        self.move_object(&key, &file_key(dst)?, &key).await?;
        self.stat(dst)
            .await?
            .ok_or_else(|| ThawError::internal(format!("{dst} is missing after its checkpoint moved there")))
    }

    /// Deletes file `file_id`'s checkpoint, if any.
    pub async fn discard_checkpoint(&self, file_id: u64) -> Result<()> {
        let key = checkpoint_key(file_id);
        match self.op.delete(&key).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == DalKind::NotFound => Ok(()),
            Err(e) => Err(dal_err(e, "delete", &key)),
        }
    }
}

/// The keys that make up the tree at directory key `dir`: `listed` (the keys
/// under it), the directories each implies between `dir` and itself, and
/// `dir`; grouped by depth, shallowest first.
fn tree_keys<'a>(dir: &str, listed: impl Iterator<Item = &'a str>) -> Vec<Vec<String>> {
    let mut keys = std::collections::BTreeSet::from([dir.to_string()]);
    for key in listed {
        keys.insert(key.to_string());
        let mut end = dir.len();
        while let Some(i) = key.get(end..).and_then(|rest| rest.find('/')) {
            end += i + 1;
            keys.insert(key[..end].to_string());
        }
    }
    let depth = |k: &str| k.trim_end_matches('/').matches('/').count();
    let mut levels: Vec<Vec<String>> = Vec::new();
    for k in keys {
        let d = depth(&k) - depth(dir);
        if levels.len() <= d {
            levels.resize(d + 1, Vec::new());
        }
        levels[d].push(k);
    }
    levels
}

fn parent_of(p: &str) -> Option<String> {
    let c = path::components(p).ok()?;
    (c.len() > 1).then(|| path::join(&c[..c.len() - 1]))
}

/// A local directory's entries and their status (following symbolic links,
/// as OpenDAL's stat does); none if it does not exist. An entry that cannot
/// be stat'ed (a dangling link, deleted meanwhile) is a file of no bytes, as
/// an OpenDAL listing without its length left it; a name that is not UTF-8
/// cannot be a Thaw path and is left out.
fn list_local(dir: &std::path::Path, at_root: bool) -> std::io::Result<Vec<(String, UfsStatus)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        if at_root && name == STAGING_DIR {
            continue;
        }
        let st = match std::fs::metadata(entry.path()) {
            Ok(m) => UfsStatus {
                is_dir: m.is_dir(),
                length: if m.is_dir() { 0 } else { m.len() },
                mtime_ms: m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_millis() as u64),
            },
            Err(_) => UfsStatus { is_dir: false, length: 0, mtime_ms: 0 },
        };
        out.push((name, st));
    }
    Ok(out)
}

fn status(m: &opendal::Metadata) -> UfsStatus {
    UfsStatus {
        is_dir: m.is_dir(),
        length: if m.is_dir() { 0 } else { m.content_length() },
        mtime_ms: m.last_modified().map(|t| t.into_inner().as_millisecond().max(0) as u64).unwrap_or(0),
    }
}

/// An under-store file being written.
pub struct UfsWriter {
    inner: opendal::Writer,
    path: String,
    /// Where a staged write goes at close (HDFS).
    publish: Option<Publish>,
}

struct Publish {
    target: hdfs::HdfsTarget,
    op: Operator,
    staged: String,
    key: String,
}

impl UfsWriter {
    pub async fn write(&mut self, data: Bytes) -> Result<()> {
        self.inner.write(data).await.map_err(|e| dal_err(e, "write", &self.path))
    }

    /// Makes the file visible at its path.
    pub async fn close(mut self) -> Result<()> {
        self.inner.close().await.map(|_| ()).map_err(|e| dal_err(e, "close", &self.path))?;
        let Some(p) = self.publish.take() else {
            return Ok(());
        };
        if let Some(parent) = p.key.rsplit_once('/').map(|(d, _)| format!("{d}/")) {
            p.op.create_dir(&parent).await.map_err(|e| dal_err(e, "mkdir", &self.path))?;
        }
        let moved = p.target.rename(&p.staged, &p.key, true).await;
        if moved.is_err() {
            let _ = p.op.delete(&p.staged).await;
        }
        moved
    }

    /// Drops what was written; the path keeps its previous state.
    pub async fn abort(mut self) {
        let _ = self.inner.abort().await;
        if let Some(p) = self.publish.take() {
            let _ = p.op.delete(&p.staged).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;

    /// A local directory's listing (read and stat'ed in one task) says what
    /// a stat of each entry says, to the millisecond: a sync that compares
    /// them must not see a file changed that was not.
    #[tokio::test]
    async fn a_local_listing_agrees_with_stat_and_hides_staging() {
        let dir = tempfile::tempdir().unwrap();
        let ufs = UnderStore::open(dir.path().to_str().unwrap()).unwrap();
        std::fs::create_dir_all(dir.path().join("d/sub")).unwrap();
        std::fs::write(dir.path().join("d/one"), b"1").unwrap();
        std::fs::write(dir.path().join("d/seven"), b"1234567").unwrap();
        std::fs::write(dir.path().join("d/empty"), b"").unwrap();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), dir.path().join("d/dangling")).unwrap();
        std::fs::create_dir_all(dir.path().join(STAGING_DIR)).unwrap();
        std::fs::write(dir.path().join("top"), b"xy").unwrap();
        let mut listed = ufs.list("/d").await.unwrap();
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["dangling", "empty", "one", "seven", "sub"]);
        for (name, st) in &listed {
            if name == "dangling" {
                assert_eq!((st.is_dir, st.length), (false, 0));
                continue;
            }
            let stat = ufs.stat(&format!("/d/{name}")).await.unwrap().unwrap();
            assert_eq!((st.is_dir, st.length), (stat.is_dir, stat.length), "{name}");
            if !st.is_dir {
                assert_eq!(st.mtime_ms, stat.mtime_ms, "{name}");
            }
        }
        let root: Vec<String> = ufs.list("/").await.unwrap().into_iter().map(|(n, _)| n).collect();
        assert!(root.contains(&"top".to_string()) && !root.contains(&STAGING_DIR.to_string()), "{root:?}");
        assert!(ufs.list("/missing").await.unwrap().is_empty());
        assert!(ufs.list("/top").await.unwrap().is_empty(), "a file lists as nothing");
        assert!(ufs.list("/../etc").await.is_err());
    }

    #[tokio::test]
    async fn local_directory_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let ufs = UnderStore::open(dir.path().to_str().unwrap()).unwrap();
        let mut w = ufs.writer("/a/b/file").await.unwrap();
        w.write(Bytes::from_static(b"hello ")).await.unwrap();
        w.write(Bytes::from_static(b"world")).await.unwrap();
        w.close().await.unwrap();
        let st = ufs.stat("/a/b/file").await.unwrap().unwrap();
        assert_eq!((st.is_dir, st.length), (false, 11));
        assert!(ufs.stat("/a").await.unwrap().unwrap().is_dir);
        assert!(ufs.stat("/missing").await.unwrap().is_none());
        let parts: Vec<Bytes> = ufs.read_range("/a/b/file", 3..8).await.unwrap().try_collect().await.unwrap();
        assert_eq!(parts.concat(), b"lo wo");
        let names: Vec<_> = ufs.list("/a").await.unwrap().into_iter().map(|(n, s)| (n, s.is_dir)).collect();
        assert_eq!(names, vec![("b".to_string(), true)]);
        ufs.rename("/a/b/file", "/c/file2", false).await.unwrap();
        assert_eq!(ufs.stat("/c/file2").await.unwrap().unwrap().length, 11);
        ufs.delete("/a").await.unwrap();
        assert!(ufs.stat("/a").await.unwrap().is_none());
        assert!(ufs.writer("/../escape").await.is_err());
        assert!(ufs.stat("/x/../../etc/passwd").await.is_err());
        assert!(ufs.delete("/").await.is_err());
        // An aborted write leaves nothing at its path; staging is invisible.
        let mut w = ufs.writer("/aborted").await.unwrap();
        w.write(Bytes::from_static(b"partial")).await.unwrap();
        w.abort().await;
        assert!(ufs.stat("/aborted").await.unwrap().is_none());
        assert!(ufs.list("/").await.unwrap().iter().all(|(n, _)| n != STAGING_DIR));
        assert!(ufs.stat("/.thaw-staging/x").await.is_err());
        let local = ufs.local_path("/c/file2").unwrap().unwrap();
        assert_eq!(std::fs::read(local).unwrap(), b"hello world");
        assert!(ufs.local_path("/../x").is_err());
    }

    #[test]
    fn a_tree_is_deleted_deepest_first_with_the_directories_its_keys_imply() {
        let listed = ["r1/", "r1/f", "r1/sub/deep/g", "r1/sub/"];
        let levels = tree_keys("r1/", listed.into_iter());
        assert_eq!(
            levels,
            vec![
                vec!["r1/".to_string()],
                vec!["r1/f".into(), "r1/sub/".into()],
                vec!["r1/sub/deep/".into()],
                vec!["r1/sub/deep/g".into()],
            ]
        );
        assert_eq!(tree_keys("a/b/", std::iter::empty()), vec![vec!["a/b/".to_string()]]);
    }

    #[tokio::test]
    async fn a_checkpoint_is_invisible_until_published_at_the_path_the_master_names() {
        let dir = tempfile::tempdir().unwrap();
        let ufs = UnderStore::open(dir.path().to_str().unwrap()).unwrap();
        assert_eq!(ufs.checkpoint_length(7).await.unwrap(), None);
        let mut w = ufs.checkpoint_writer(7).await.unwrap();
        w.write(Bytes::from_static(b"memory speed")).await.unwrap();
        w.close().await.unwrap();
        assert_eq!(ufs.checkpoint_length(7).await.unwrap(), Some(12));
        assert!(ufs.list("/").await.unwrap().is_empty(), "nothing shows before it is published");
        let st = ufs.publish_checkpoint(7, "/out/part-0").await.unwrap();
        assert_eq!(st.length, 12);
        assert_eq!(std::fs::read(ufs.local_path("/out/part-0").unwrap().unwrap()).unwrap(), b"memory speed");
        assert_eq!(ufs.checkpoint_length(7).await.unwrap(), None);
        // A local writer's path is under the hidden staging directory.
        let local = ufs.checkpoint_local_path(8).unwrap();
        assert!(local.starts_with(dir.path().canonicalize().unwrap().join(STAGING_DIR)));
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        std::fs::write(&local, b"x").unwrap();
        assert_eq!(ufs.checkpoint_length(8).await.unwrap(), Some(1));
        ufs.discard_checkpoint(8).await.unwrap();
        ufs.discard_checkpoint(8).await.unwrap();
        assert!(!local.exists());
        assert!(ufs.publish_checkpoint(9, "/nothing").await.is_err(), "no checkpoint to publish");
    }
}

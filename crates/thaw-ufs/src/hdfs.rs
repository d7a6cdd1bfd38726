//! HDFS as the under-store: `hdfs://NAMENODE:PORT/PATH`.
//!
//! Through OpenDAL's `hdfs-native` service, which speaks HDFS's own RPC and data
//! transfer protocols from Rust (the `hdfs-native` crate). Chosen over OpenDAL's
//! `hdfs` service (libhdfs over JNI: a JVM and Hadoop's jars in every worker) and
//! over WebHDFS (an HTTP gateway many clusters do not run, every byte redirected
//! through a DataNode's HTTP server): a worker reaches the NameNode and DataNodes
//! directly, with no JVM. Renames and the final move of a write go to the same
//! crate's client directly: HDFS renames a file or a whole directory atomically,
//! which OpenDAL's service does not expose for directories.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use opendal::Operator;
use thaw_common::{Result, ThawError};

/// What an `hdfs://` URI names, and a client for its renames.
#[derive(Clone)]
pub struct HdfsTarget {
    /// `hdfs://host:port`
    pub name_node: String,
    /// The namespace root's absolute HDFS path, without a trailing '/' ("" = "/").
    pub root: String,
    client: Arc<hdfs_native::Client>,
    /// The staging directory of writes exists (made once, not per write).
    staging_made: Arc<AtomicBool>,
}

impl std::fmt::Debug for HdfsTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HdfsTarget({}{})", self.name_node, self.root)
    }
}

impl HdfsTarget {
    pub fn parse(uri: &str) -> Result<(Self, Operator)> {
        let bad = |why: &str| ThawError::invalid(format!("under-store {uri:?}: {why}"));
        let u = url::Url::parse(uri).map_err(|e| bad(&e.to_string()))?;
        if u.scheme() != "hdfs" {
            return Err(bad("expected hdfs://NAMENODE:PORT/PATH"));
        }
        let host = u.host_str().filter(|h| !h.is_empty()).ok_or_else(|| bad("no NameNode host"))?;
        if u.query().is_some() || !u.username().is_empty() {
            return Err(bad("no options or user names are taken (the user is this process's)"));
        }
        let name_node = match u.port() {
            Some(p) => format!("hdfs://{host}:{p}"),
            None => format!("hdfs://{host}"),
        };
        let root = u.path().trim_end_matches('/').to_string();
        if root.split('/').any(|c| c == "." || c == "..") || root.contains("//") {
            return Err(bad("the path may not contain '.', '..' or empty components"));
        }
        let client = hdfs_native::ClientBuilder::new()
            .with_url(&name_node)
            .build()
            .map_err(|e| bad(&format!("HDFS client: {e}")))?;
        let builder = opendal::services::HdfsNative::default().name_node(&name_node).root(&format!("{root}/"));
        let op = Operator::new(builder).map_err(|e| bad(&e.to_string()))?;
        let op = crate::resilient(op);
        let staging_made = Arc::new(AtomicBool::new(false));
        Ok((HdfsTarget { name_node, root, client: Arc::new(client), staging_made }, op))
    }

    pub fn uri(&self) -> String {
        format!("{}{}/", self.name_node, self.root)
    }

    /// The absolute HDFS path of an OpenDAL key (relative, maybe ending in '/').
    fn abs(&self, key: &str) -> String {
        format!("{}/{}", self.root, key.trim_end_matches('/'))
    }

    /// A fresh key in the staging directory for a write that is renamed into
    /// place at close (an HDFS file shows at its path while written). The
    /// directory is made on the first write only.
    pub async fn staged_write_key(&self, op: &Operator) -> opendal::Result<String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = format!("{}/writes/", crate::STAGING_DIR);
        if !self.staging_made.load(Ordering::Relaxed) {
            op.create_dir(&dir).await?;
            self.staging_made.store(true, Ordering::Relaxed);
        }
        // Unique across processes (pid) and within one (a counter).
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        Ok(format!("{dir}{}-{}-{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)))
    }

    /// HDFS's own rename (atomic, files and directories alike).
    pub async fn rename(&self, from: &str, to: &str, overwrite: bool) -> Result<()> {
        let (src, dst) = (self.abs(from), self.abs(to));
        self.client.rename(&src, &dst, overwrite).await.map_err(|e| {
            let msg = format!("under-store rename {src} -> {dst} on {}: {e}", self.name_node);
            match e {
                hdfs_native::HdfsError::FileNotFound(_) => ThawError::not_found(msg),
                hdfs_native::HdfsError::AlreadyExists(_) => ThawError::already_exists(msg),
                hdfs_native::HdfsError::IOError(_) => ThawError::unavailable(msg),
                _ => ThawError::internal(msg),
            }
        })
    }

    /// Turns the error of the first request into what an operator should fix.
    pub fn explain(&self, e: opendal::Error) -> ThawError {
        let at = format!("under-store {}{}", self.name_node, self.root);
        if e.is_temporary() || e.is_persistent() || e.kind() == opendal::ErrorKind::Unexpected {
            ThawError::unavailable(format!("{at}: the HDFS NameNode does not answer: {e}"))
        } else if e.kind() == opendal::ErrorKind::PermissionDenied {
            ThawError::permission_denied(format!("{at}: access refused: {e}"))
        } else {
            ThawError::internal(format!("{at}: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn uris_parse_and_bad_ones_say_why() {
        let (t, _) = HdfsTarget::parse("hdfs://127.0.0.1:9000/warehouse/cold/").unwrap();
        assert_eq!((t.name_node.as_str(), t.root.as_str()), ("hdfs://127.0.0.1:9000", "/warehouse/cold"));
        assert_eq!(t.uri(), "hdfs://127.0.0.1:9000/warehouse/cold/");
        assert_eq!(t.abs("a/b/"), "/warehouse/cold/a/b");
        let (root, _) = HdfsTarget::parse("hdfs://nn:8020").unwrap();
        assert_eq!(root.abs("x"), "/x");
        for (uri, says) in [
            ("hdfs:///no-host", "host"),
            ("hdfs://nn:8020/a//b", "empty components"),
            ("hdfs://user@nn:8020/a", "user"),
            ("hdfs://nn:8020/a?x=1", "options"),
        ] {
            let e = HdfsTarget::parse(uri).unwrap_err();
            assert!(e.message.contains(says), "{uri}: {e}");
        }
    }
}

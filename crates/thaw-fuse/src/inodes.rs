//! Inode numbers for namespace paths, and the attributes last heard for each.
//! Pure bookkeeping (no I/O), so the mount's caching rules are unit-tested.
//!
//! The kernel names files by inode number; the master names them by path. A path
//! gets a number the first time it is looked up and keeps it for the mount's life
//! (numbers are never reused, so a stale number cannot reach another file). The
//! attributes are a cache with a short time to live: `ls -l` of a directory just
//! listed costs no further calls to the master, and a file that changes at the
//! master is seen within one TTL.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Reads under this size on average (over one handle's life, with at least
/// [`MIN_READS_SEEN`] of them) are small: a columnar reader's pattern, for
/// which the page cache pays and `direct_io`'s round trip per read does not.
/// Sequential readers ask for 128 KiB (read-ahead) to 1 MiB (FUSE's largest).
pub const SMALL_READ: u64 = 64 << 10;
/// Reads a handle must have made before its pattern counts.
pub const MIN_READS_SEEN: u64 = 8;

/// File name endings of formats read in small pieces at scattered offsets
/// (columnar files: a footer, then column chunks and page headers; embedded
/// databases: pages): these go through the page cache from their first open.
pub const SMALL_PIECE_FORMATS: [&str; 9] =
    [".parquet", ".pq", ".orc", ".arrow", ".feather", ".ipc", ".lance", ".duckdb", ".sqlite"];

/// Whether `path` names a file of a format read in small pieces.
pub fn read_in_small_pieces(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    SMALL_PIECE_FORMATS.iter().any(|ext| name.ends_with(ext))
}

/// The inode number of the mount's root (`/` in the namespace).
pub const ROOT: u64 = 1;

/// What the mount shows of a namespace entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub is_dir: bool,
    pub size: u64,
    pub mtime_ms: u64,
    /// Changes when the path names another file (deleted and written again).
    pub file_id: u64,
}

#[derive(Debug)]
struct Node {
    path: String,
    attr: Option<(Attr, Instant)>,
    /// The file (by id) whose bytes the kernel's page cache of this inode
    /// holds, since the last open that used the page cache.
    cached_file: Option<u64>,
    /// The file (by id) whose readers were seen making small reads.
    small_reads: Option<u64>,
}

#[derive(Debug)]
pub struct Inodes {
    by_ino: HashMap<u64, Node>,
    by_path: HashMap<String, u64>,
    next: u64,
    ttl: Duration,
}

impl Inodes {
    pub fn new(ttl: Duration) -> Self {
        let mut t = Inodes { by_ino: HashMap::new(), by_path: HashMap::new(), next: ROOT + 1, ttl };
        t.by_ino.insert(ROOT, Node { path: "/".into(), attr: None, cached_file: None, small_reads: None });
        t.by_path.insert("/".into(), ROOT);
        t
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The namespace path of inode `ino`, if the kernel was ever told of it.
    pub fn path(&self, ino: u64) -> Option<&str> {
        self.by_ino.get(&ino).map(|n| n.path.as_str())
    }

    /// The path of entry `name` in directory `parent`; `None` for a name that
    /// cannot be a namespace entry (empty, `.`, `..`, with a `/` or a NUL).
    pub fn child_path(&self, parent: u64, name: &str) -> Option<String> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return None;
        }
        let dir = self.path(parent)?;
        Some(if dir == "/" { format!("/{name}") } else { format!("{dir}/{name}") })
    }

    /// The inode number of `path`, if it has one.
    pub fn known(&self, path: &str) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// The inode number of `path`, given one now if it has none.
    pub fn ino(&mut self, path: &str) -> u64 {
        if let Some(&ino) = self.by_path.get(path) {
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.by_ino.insert(ino, Node { path: path.to_string(), attr: None, cached_file: None, small_reads: None });
        self.by_path.insert(path.to_string(), ino);
        ino
    }

    /// Records what the master said of `path` at `now`; returns its inode number.
    pub fn remember(&mut self, path: &str, attr: Attr, now: Instant) -> u64 {
        let ino = self.ino(path);
        if let Some(n) = self.by_ino.get_mut(&ino) {
            n.attr = Some((attr, now));
        }
        ino
    }

    /// The attributes of `ino` if heard less than one TTL before `now`.
    pub fn fresh(&self, ino: u64, now: Instant) -> Option<Attr> {
        let (attr, at) = self.by_ino.get(&ino)?.attr?;
        (now.saturating_duration_since(at) < self.ttl).then_some(attr)
    }

    /// Whether an open of `ino`, now the file `file_id`, may keep the pages
    /// the kernel cached for the inode (FOPEN_KEEP_CACHE): only if they were
    /// read from that same file. A Thaw file never changes once complete, but
    /// a path may name another file later (deleted and written again, even at
    /// the same size) under the same inode number; an open without the flag
    /// makes the kernel drop the inode's pages. Records `file_id` as the
    /// cache's source either way.
    pub fn keep_cache(&mut self, ino: u64, file_id: u64) -> bool {
        let Some(n) = self.by_ino.get_mut(&ino) else { return false };
        let keep = n.cached_file == Some(file_id);
        n.cached_file = Some(file_id);
        keep
    }

    /// Notes what one handle of `ino` (the file `file_id`) read with
    /// `direct_io`: `reads` requests of `bytes` in all. Small reads on average
    /// mark the file for the page cache ([`Inodes::small_reads`]).
    pub fn note_reads(&mut self, ino: u64, file_id: u64, reads: u64, bytes: u64) {
        if reads < MIN_READS_SEEN || bytes / reads >= SMALL_READ {
            return;
        }
        if let Some(n) = self.by_ino.get_mut(&ino) {
            n.small_reads = Some(file_id);
        }
    }

    /// Whether readers of `ino`, while it is the file `file_id`, were seen
    /// making small reads (then opens go through the page cache).
    pub fn small_reads(&self, ino: u64, file_id: u64) -> bool {
        self.by_ino.get(&ino).is_some_and(|n| n.small_reads == Some(file_id))
    }

    /// Forgets the attributes of `path` (the master says it is gone); its
    /// number stays, so a later file at the same path reuses it.
    pub fn forget_attr(&mut self, path: &str) {
        if let Some(n) = self.by_path.get(path).and_then(|ino| self.by_ino.get_mut(ino)) {
            n.attr = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(size: u64) -> Attr {
        Attr { is_dir: false, size, mtime_ms: 1, file_id: 7 }
    }

    #[test]
    fn paths_get_stable_numbers_and_the_root_is_one() {
        let mut t = Inodes::new(Duration::from_secs(1));
        assert_eq!(t.path(ROOT), Some("/"));
        let a = t.ino("/a");
        let b = t.ino("/a/b");
        assert_ne!(a, b);
        assert!(a > ROOT && b > ROOT);
        assert_eq!(t.ino("/a"), a);
        assert_eq!(t.path(b), Some("/a/b"));
        assert_eq!(t.path(9999), None);
    }

    #[test]
    fn child_paths_join_and_refuse_names_that_are_not_entries() {
        let mut t = Inodes::new(Duration::from_secs(1));
        assert_eq!(t.child_path(ROOT, "x").as_deref(), Some("/x"));
        let d = t.ino("/d");
        assert_eq!(t.child_path(d, "f.parquet").as_deref(), Some("/d/f.parquet"));
        for bad in ["", ".", "..", "a/b", "a\0"] {
            assert_eq!(t.child_path(d, bad), None, "{bad:?}");
        }
        assert_eq!(t.child_path(12345, "x"), None);
    }

    #[test]
    fn attributes_are_fresh_for_one_ttl_then_asked_again() {
        let ttl = Duration::from_millis(1000);
        let mut t = Inodes::new(ttl);
        let t0 = Instant::now();
        let ino = t.remember("/f", file(10), t0);
        assert_eq!(t.fresh(ino, t0), Some(file(10)));
        assert_eq!(t.fresh(ino, t0 + Duration::from_millis(999)), Some(file(10)));
        assert_eq!(t.fresh(ino, t0 + ttl), None);
        // A newer answer replaces the old one and keeps the number.
        assert_eq!(t.remember("/f", file(20), t0 + ttl), ino);
        assert_eq!(t.fresh(ino, t0 + ttl), Some(file(20)));
        t.forget_attr("/f");
        assert_eq!(t.fresh(ino, t0 + ttl), None);
        assert_eq!(t.ino("/f"), ino);
    }

    #[test]
    fn the_page_cache_is_kept_only_for_the_file_it_was_read_from() {
        let mut t = Inodes::new(Duration::from_secs(1));
        let ino = t.ino("/f");
        // The first open fills the cache: nothing to keep yet.
        assert!(!t.keep_cache(ino, 7));
        assert!(t.keep_cache(ino, 7));
        assert!(t.keep_cache(ino, 7));
        // The path now names another file: its pages are dropped once ...
        assert!(!t.keep_cache(ino, 8));
        // ... and the new file's are kept from then on.
        assert!(t.keep_cache(ino, 8));
        // Another inode has a cache of its own; an unknown one keeps nothing.
        let other = t.ino("/g");
        assert!(!t.keep_cache(other, 8));
        assert!(!t.keep_cache(9999, 8));
    }

    #[test]
    fn small_readers_mark_a_file_for_the_page_cache_until_it_changes() {
        let mut t = Inodes::new(Duration::from_secs(1));
        let ino = t.ino("/f.parquet");
        assert!(!t.small_reads(ino, 7));
        // Too few reads to judge, then large ones: no mark.
        t.note_reads(ino, 7, MIN_READS_SEEN - 1, 100);
        t.note_reads(ino, 7, 100, 100 << 20);
        assert!(!t.small_reads(ino, 7));
        // Small on average: marked, for this file only.
        t.note_reads(ino, 7, 100, 100 * 4096);
        assert!(t.small_reads(ino, 7));
        assert!(!t.small_reads(ino, 8));
        // The path written anew: a new file, judged afresh.
        t.note_reads(ino, 8, 50, 50 << 20);
        assert!(!t.small_reads(ino, 8));
    }

    #[test]
    fn columnar_and_database_files_are_known_by_name() {
        for p in ["/t/part-0.parquet", "/T/X.PARQUET", "/a.orc", "/b.arrow", "/c.feather", "/d.duckdb", "/e.sqlite"] {
            assert!(read_in_small_pieces(p), "{p}");
        }
        for p in ["/logs/app.log", "/big.bin", "/data.csv", "/parquet/notes.txt", "/x.parquet.tmp"] {
            assert!(!read_in_small_pieces(p), "{p}");
        }
    }

    #[test]
    fn a_zero_ttl_caches_nothing() {
        let mut t = Inodes::new(Duration::ZERO);
        let now = Instant::now();
        let ino = t.remember("/f", file(1), now);
        assert_eq!(t.fresh(ino, now), None);
    }
}

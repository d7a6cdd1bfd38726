//! One directory's entries in S3's key order, read from the master a page at a
//! time as a listing walks them, starting where the listing resumes.
//!
//! The master lists a directory by name; a key orders a directory `d` as `d/`,
//! after the names that extend `d` with a byte below `/` (`d-1`, `d.csv`). So
//! a directory read from a page is held back until a name past its key comes
//! (or the last page): the walk still sees keys in order, and what is held is
//! only a chain of names that prefix each other.
//!
//! A listing that resumes after key `k` (a continuation token, a start-after,
//! a marker) asks the master for names after `k`: the only entries at or before
//! `k` by name that can still come after it by key are directories whose name
//! is a prefix of `k` followed by a byte up to `/` (`d` for `d-1` or `d/x`),
//! and those are looked up one by one. Before this, every page of a listing
//! read its directories whole: a million-key directory was read a thousand
//! times for a thousand pages.

use std::collections::{BTreeMap, VecDeque};

use s3s::S3Result;
use thaw_common::ErrorKind;
use thaw_common::proto::FileInfo;

use crate::Gateway;
use crate::errors::bucket_error;

/// Entries asked of the master at a time.
const PAGE: u32 = 1000;
/// Names looked up for a resumed listing at most (one per byte up to `/` in
/// the resume key's first name); past that the directory is read from its
/// first name (correct, only slower), so a forged token costs little.
const MAX_LOOKUPS: usize = 16;

pub struct DirCursor {
    /// The directory's path in the namespace.
    path: String,
    /// Where the next page starts (after this name); None after the last page.
    next_page: Option<String>,
    buf: VecDeque<FileInfo>,
    /// Directories read and not yet returned, by key (`name/`).
    held: BTreeMap<String, FileInfo>,
}

impl DirCursor {
    /// The directory at key prefix `key_dir` of `bucket` ("" or ending in
    /// `/`), from the first entry whose key may come after `after` (relative
    /// to the directory) and may start with `prefix` (likewise); None if it is
    /// not a directory.
    pub async fn open(
        g: &Gateway,
        bucket: &str,
        key_dir: &str,
        after: Option<&str>,
        prefix: &str,
    ) -> S3Result<Option<Self>> {
        let path = format!("/{bucket}/{}", key_dir.trim_end_matches('/'));
        let path = path.trim_end_matches('/').to_string();
        // Names before the prefix cannot start with it: those up to the
        // prefix less its last character go unread.
        let mut start = prefix.char_indices().last().map_or("", |(i, _)| &prefix[..i]).to_string();
        let mut held = BTreeMap::new();
        if let Some(after) = after {
            let first = after.split('/').next().unwrap_or_default();
            let cut: Vec<usize> = (1..=first.len())
                .filter(|&j| first.is_char_boundary(j) && after.as_bytes().get(j).is_none_or(|b| *b <= b'/'))
                .collect();
            if cut.len() <= MAX_LOOKUPS {
                for j in cut {
                    match g.client().stat(&format!("{path}/{}", &first[..j])).await {
                        Ok(info) if info.is_dir => {
                            held.insert(format!("{}/", info.name), info);
                        }
                        Ok(_) => {}
                        // (A name no entry can have, from a forged token: none.)
                        Err(e)
                            if matches!(
                                e.kind,
                                ErrorKind::NotFound | ErrorKind::NotADirectory | ErrorKind::InvalidArgument
                            ) => {}
                        Err(e) => return Err(bucket_error(e)),
                    }
                }
                start = start.max(after.to_string());
            }
        }
        let mut cursor = DirCursor { path, next_page: Some(start), buf: VecDeque::new(), held };
        match cursor.fetch(g).await {
            Ok(()) => {}
            Err(e) if matches!(e.kind, ErrorKind::NotFound | ErrorKind::NotADirectory) => return Ok(None),
            Err(e) => return Err(bucket_error(e)),
        }
        // Listing a file answers the file itself: a key, not a directory of keys.
        if cursor.buf.iter().any(|e| !e.is_dir && e.path == cursor.path) {
            return Ok(None);
        }
        Ok(Some(cursor))
    }

    /// Whether nothing is left to return.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.held.is_empty() && self.next_page.is_none()
    }

    /// The next entry in key order.
    pub async fn next(&mut self, g: &Gateway) -> S3Result<Option<FileInfo>> {
        loop {
            if self.buf.is_empty() && self.next_page.is_some() {
                self.fetch(g).await.map_err(bucket_error)?;
            }
            let Some(e) = self.buf.front() else {
                return Ok(self.held.pop_first().map(|(_, d)| d));
            };
            // A held directory's key before this name: nothing read later
            // (every later name is past this one) comes before it.
            if self.held.first_key_value().is_some_and(|(k, _)| k.as_str() < e.name.as_str()) {
                return Ok(self.held.pop_first().map(|(_, d)| d));
            }
            let e = self.buf.pop_front().expect("checked");
            if !e.is_dir {
                return Ok(Some(e));
            }
            self.held.insert(format!("{}/", e.name), e);
        }
    }

    async fn fetch(&mut self, g: &Gateway) -> thaw_common::Result<()> {
        let Some(start) = self.next_page.take() else { return Ok(()) };
        let page = g.client().list_page(&self.path, false, &start, PAGE).await?;
        if page.truncated
            && let Some(last) = page.entries.last()
        {
            self.next_page = Some(last.name.clone());
        }
        self.buf.extend(page.entries);
        Ok(())
    }
}

//! A tier's files on disk. The layout: whole blocks at `blocks/ID`, blocks
//! being written under `tmp/` (renamed into `blocks/` when complete, so a
//! crash never leaves a partial block where a reader could see it). Here are
//! the start-up scan that finds what a previous run left, the paths, the
//! rename that places a written block, the deletion of one, and whether a
//! reader holds one open. What the files count for (bytes, eviction order)
//! is the tier's index and accounting, which call these.

use std::path::{Path, PathBuf};

use thaw_common::{Result, ThawError};

use super::TierStore;

/// Makes the layout at `dir` and returns the blocks found in it (id,
/// length). With `wipe` (the MEM tier: memory does not survive a restart)
/// every old block is deleted first. Partial blocks under `tmp/` are always
/// deleted; names that are not block ids are left alone.
pub(super) fn scan(dir: &Path, wipe: bool) -> Result<Vec<(u64, u64)>> {
    let blocks_dir = dir.join("blocks");
    let tmp_dir = dir.join("tmp");
    if wipe && blocks_dir.exists() {
        std::fs::remove_dir_all(&blocks_dir)?;
    }
    if tmp_dir.exists() {
        std::fs::remove_dir_all(&tmp_dir)?;
    }
    std::fs::create_dir_all(&blocks_dir)
        .map_err(|e| ThawError::from(e).context(format!("tier directory {}", blocks_dir.display())))?;
    std::fs::create_dir_all(&tmp_dir)?;
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&blocks_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        found.push((id, entry.metadata()?.len()));
    }
    Ok(found)
}

impl TierStore {
    /// Whether a reader holds the block's file open now: short-circuit
    /// readers (and this worker's own sends) take a shared `flock` on the
    /// file they read, which an exclusive try here finds. The kernel drops
    /// the lock when the reader closes the file or dies, kill -9 included, so
    /// nothing has to tell the worker. An evicted file a reader still held
    /// would keep its memory until closed while the tier counted it free.
    pub fn in_use(&self, block: u64) -> bool {
        thaw_common::filelock::in_use(&self.block_path(block))
    }

    /// The tier's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where blocks being written are.
    pub fn temp_dir(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    pub fn block_path(&self, block: u64) -> PathBuf {
        self.dir.join("blocks").join(block.to_string())
    }

    /// A fresh temporary path for a block being written.
    pub fn temp_path(&self, block: u64) -> PathBuf {
        self.dir.join("tmp").join(format!("{block}.{:016x}", rand::random::<u64>()))
    }

    /// Moves a fully written temp file to the block's place, replacing any
    /// copy there.
    pub(super) fn place_file(&self, block: u64, temp: &Path) -> Result<()> {
        std::fs::rename(temp, self.block_path(block))?;
        Ok(())
    }

    pub(super) fn delete_file(&self, block: u64) {
        if let Err(e) = std::fs::remove_file(self.block_path(block)) {
            tracing::warn!(block, error = %e, "could not delete block file");
        }
    }

    /// Removes the whole tier directory (a local cluster's MEM tier on shutdown).
    pub fn destroy(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

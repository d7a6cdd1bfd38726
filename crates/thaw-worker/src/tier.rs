//! A storage tier: a directory of block files with an enforced capacity. Space is
//! reserved before bytes are written, so concurrent writers can never overfill it.
//! Blocks are written under `tmp/` and renamed into `blocks/` when complete, so a
//! crash never leaves a partial block where a reader could see it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use thaw_common::proto::{BlockReport, Tier, TierUsage};
use thaw_common::size::format_size;
use thaw_common::{Result, ThawError};

#[derive(Debug, Default)]
struct TierState {
    /// Bytes of stored blocks plus outstanding reservations.
    used: u64,
    blocks: HashMap<u64, u64>,
}

#[derive(Debug)]
pub struct TierStore {
    pub tier: Tier,
    dir: PathBuf,
    capacity: u64,
    state: Mutex<TierState>,
}

/// Space held for a block being written; given back on drop unless committed.
pub struct Reservation {
    store: Arc<TierStore>,
    bytes: u64,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            let mut st = self.store.lock();
            st.used = st.used.saturating_sub(self.bytes);
        }
    }
}

impl TierStore {
    /// Opens the tier at `dir`. With `wipe` (the MEM tier: memory does not survive a
    /// restart) every old block is deleted; otherwise blocks found are kept.
    /// Partial blocks under `tmp/` are always deleted.
    pub fn open(tier: Tier, dir: &Path, capacity: u64, wipe: bool) -> Result<Arc<Self>> {
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
        let mut state = TierState::default();
        for entry in std::fs::read_dir(&blocks_dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.parse::<u64>().ok()) else {
                continue;
            };
            let len = entry.metadata()?.len();
            state.used += len;
            state.blocks.insert(id, len);
        }
        Ok(Arc::new(TierStore { tier, dir: dir.to_path_buf(), capacity, state: Mutex::new(state) }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TierState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn name(&self) -> &'static str {
        match self.tier {
            Tier::Mem => "MEM",
            Tier::Disk => "DISK",
            Tier::Unspecified => "?",
        }
    }

    /// Holds `bytes` of space, or fails with a clear "full" error.
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Result<Reservation> {
        let mut st = self.lock();
        if st.used + bytes > self.capacity {
            return Err(ThawError::exhausted(format!(
                "{} tier is full: {} used of {}, {} more needed",
                self.name(),
                format_size(st.used),
                format_size(self.capacity),
                format_size(bytes)
            )));
        }
        st.used += bytes;
        Ok(Reservation { store: self.clone(), bytes })
    }

    pub fn block_path(&self, block: u64) -> PathBuf {
        self.dir.join("blocks").join(block.to_string())
    }

    /// A fresh temporary path for a block being written.
    pub fn temp_path(&self, block: u64) -> PathBuf {
        self.dir.join("tmp").join(format!("{block}.{:016x}", rand::random::<u64>()))
    }

    /// Moves a fully written temp file into place. The reservation becomes the
    /// block's exact length. Replacing an existing copy of the block is allowed.
    pub fn commit(&self, block: u64, temp: &Path, length: u64, mut reservation: Reservation) -> Result<()> {
        std::fs::rename(temp, self.block_path(block))?;
        let mut st = self.lock();
        let held = std::mem::take(&mut reservation.bytes);
        st.used = st.used.saturating_sub(held) + length;
        if let Some(old) = st.blocks.insert(block, length) {
            st.used = st.used.saturating_sub(old);
        }
        Ok(())
    }

    /// Deletes a block; returns its length if it was here.
    pub fn remove(&self, block: u64) -> Option<u64> {
        let len = {
            let mut st = self.lock();
            let len = st.blocks.remove(&block)?;
            st.used = st.used.saturating_sub(len);
            len
        };
        if let Err(e) = std::fs::remove_file(self.block_path(block)) {
            tracing::warn!(block, error = %e, "could not delete block file");
        }
        Some(len)
    }

    pub fn get(&self, block: u64) -> Option<u64> {
        self.lock().blocks.get(&block).copied()
    }

    pub fn usage(&self) -> TierUsage {
        let st = self.lock();
        TierUsage {
            tier: self.tier as i32,
            capacity: self.capacity,
            used: st.used,
            blocks: st.blocks.len() as u64,
            dir: self.dir.display().to_string(),
        }
    }

    pub fn report(&self) -> Vec<BlockReport> {
        self.lock()
            .blocks
            .iter()
            .map(|(&block_id, &length)| BlockReport { block_id, tier: self.tier as i32, length })
            .collect()
    }

    /// Removes the whole tier directory (a local cluster's MEM tier on shutdown).
    pub fn destroy(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_enforced_and_reservations_return() {
        let dir = tempfile::tempdir().unwrap();
        let t = TierStore::open(Tier::Mem, dir.path(), 100, true).unwrap();
        let r1 = t.reserve(60).unwrap();
        let e = t.reserve(60).err().expect("full");
        assert_eq!(e.kind, thaw_common::ErrorKind::ResourceExhausted);
        assert!(e.message.contains("MEM tier is full"), "{e}");
        let tmp = t.temp_path(7);
        std::fs::write(&tmp, b"0123456789").unwrap();
        t.commit(7, &tmp, 10, r1).unwrap();
        assert_eq!(t.usage().used, 10);
        {
            let _r = t.reserve(90).unwrap();
            assert!(t.reserve(1).is_err());
        }
        assert_eq!(t.usage().used, 10);
        assert_eq!(t.remove(7), Some(10));
        assert_eq!(t.usage().used, 0);
        assert!(!t.block_path(7).exists());
    }

    #[test]
    fn disk_blocks_survive_reopen_and_mem_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let t = TierStore::open(Tier::Disk, dir.path(), 100, false).unwrap();
        let tmp = t.temp_path(3);
        std::fs::write(&tmp, b"abc").unwrap();
        let r = t.reserve(3).unwrap();
        t.commit(3, &tmp, 3, r).unwrap();
        std::fs::write(t.temp_path(4), b"partial").unwrap();
        drop(t);
        let t = TierStore::open(Tier::Disk, dir.path(), 100, false).unwrap();
        assert_eq!(t.get(3), Some(3));
        assert_eq!(std::fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
        let m = TierStore::open(Tier::Mem, dir.path(), 100, true).unwrap();
        assert_eq!(m.get(3), None);
        assert_eq!(m.usage().used, 0);
    }
}

//! A storage tier: a directory of block files with an enforced capacity. Space is
//! reserved before bytes are written, so concurrent writers can never overfill it.
//! Blocks are written under `tmp/` and renamed into `blocks/` when complete, so a
//! crash never leaves a partial block where a reader could see it.
//!
//! A full tier makes room ([`TierStore::reserve_evicting`]): blocks that are
//! neither pinned (no copy anywhere else) nor protected by the caller (a job
//! still expects them) are a cache, and the replacement policy
//! ([`crate::replacement`]) picks which of them go. The tier keeps each block's
//! access history for it.
//!
//! This file holds the store itself ([`TierStore`]: what it is made of, and
//! opening it); the rest is cut by what it does:
//! - `index`: which blocks the tier holds, in the replacement policy's
//!   eviction order, with each block's and file's read history (the window);
//!   the eviction decision over them.
//! - `accounting`: the bytes: room reserved before a write (evicting when
//!   full), blocks committed and removed, and the counters and status.
//! - `files`: the files on disk: the layout, the start-up scan, paths,
//!   rename into place, deletion, and whether a reader holds a block open.

mod accounting;
mod files;
mod index;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use thaw_common::proto::Tier;
use thaw_common::{Result, ThawError};

pub use self::accounting::{Reservation, Split};
pub use self::index::Need;
use self::index::TierState;
use crate::affinity::Affinities;
use crate::replacement::Policy;

/// What a tier's replacement needs besides its blocks.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    pub policy: Policy,
    /// CAVA's sliding window: the benefit policies count a file's reads
    /// over this much of the past.
    pub window: Duration,
    /// The applications' affinities and caching probabilities (the master's).
    pub affinities: Arc<Affinities>,
}

/// Default sliding window: long enough that a hot file is read many times
/// within it (CAVA, section IV-B), short enough that a file nobody reads any more
/// falls to benefit 0 within a working session.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(600);

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { policy: Policy::Lru, window: DEFAULT_WINDOW, affinities: Arc::default() }
    }
}

impl CacheConfig {
    pub fn with_policy(policy: Policy) -> Self {
        CacheConfig { policy, ..Self::default() }
    }
}

/// A tier: its directory, its capacity and replacement policy, and its index
/// and accounting behind one lock.
#[derive(Debug)]
pub struct TierStore {
    pub tier: Tier,
    dir: PathBuf,
    capacity: u64,
    cache: CacheConfig,
    started: Instant,
    state: Mutex<TierState>,
}

impl TierStore {
    /// Opens the tier at `dir`. With `wipe` (the MEM tier: memory does not survive a
    /// restart) every old block is deleted; otherwise blocks found are kept.
    /// Partial blocks under `tmp/` are always deleted ([`files::scan`]). Blocks
    /// found are pinned: nothing says whether another copy of them exists.
    pub fn open(tier: Tier, dir: &Path, capacity: u64, wipe: bool, cache: CacheConfig) -> Result<Arc<Self>> {
        if cache.window.is_zero() {
            return Err(ThawError::invalid("the cache window must be longer than zero"));
        }
        let found = files::scan(dir, wipe)?;
        let state = TierState::recovered(found);
        Ok(Arc::new(TierStore {
            tier,
            dir: dir.to_path_buf(),
            capacity,
            cache,
            started: Instant::now(),
            state: Mutex::new(state),
        }))
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

    pub fn policy(&self) -> Policy {
        self.cache.policy
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

#[cfg(test)]
mod tests;

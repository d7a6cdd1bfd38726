//! What each write type means, decided once: the master (placement,
//! completion, checkpoints, eviction, the dashboard) and the client (which
//! tier it asks the worker for, whether it writes the under-store copy) ask
//! this table instead of matching on `WriteType` each in its own way.

use crate::proto::{Tier, WriteType};
use crate::{Result, ThawError};

/// One write type's properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteMeaning {
    pub write_type: WriteType,
    /// Its name in listings, on the dashboard and on the command line
    /// (`replicated-disk` is given there as `replicated:N`).
    pub label: &'static str,
    /// The worker tier its blocks are written to; `None`: no worker keeps
    /// them (the bytes go to the under-store only).
    pub tier: Option<Tier>,
    /// Its writer writes the file's under-store copy itself, before close:
    /// the file is persisted when it completes, and its blocks in memory
    /// are cache a worker may evict.
    pub writes_under_store: bool,
    /// Persisted later, by a background checkpoint of the complete file
    /// (Tachyon, section 2.7); the only write type that may be temporary.
    pub checkpointed: bool,
    /// Written to as many workers as the create call asks (each a copy);
    /// the others go to one worker.
    pub replicated: bool,
}

impl WriteMeaning {
    /// Its blocks go to worker memory (a memory write, placed in segments).
    pub fn in_memory(&self) -> bool {
        self.tier == Some(Tier::Mem)
    }

    /// Its blocks in memory are the file's only copy until a checkpoint, if
    /// any (must-cache, async-through): they are never evicted.
    pub fn memory_only_copy(&self) -> bool {
        self.in_memory() && !self.writes_under_store
    }

    /// Not `Unspecified`: a write type a file can have.
    pub fn is_known(&self) -> bool {
        self.write_type != WriteType::Unspecified
    }

    /// Workers it is written to, for a create call asking `replication` copies.
    pub fn copies(&self, replication: u32) -> usize {
        if self.replicated { replication.max(1) as usize } else { 1 }
    }
}

const fn row(
    write_type: WriteType,
    label: &'static str,
    tier: Option<Tier>,
    writes_under_store: bool,
    checkpointed: bool,
    replicated: bool,
) -> WriteMeaning {
    WriteMeaning { write_type, label, tier, writes_under_store, checkpointed, replicated }
}

/// Every write type a file can have, in the order the command line lists them.
pub const WRITE_TYPES: [WriteMeaning; 5] = [
    row(WriteType::MustCache, "must-cache", Some(Tier::Mem), false, false, false),
    row(WriteType::AsyncThrough, "async-through", Some(Tier::Mem), false, true, false),
    row(WriteType::CacheThrough, "cache-through", Some(Tier::Mem), true, false, false),
    row(WriteType::Through, "through", None, true, false, false),
    row(WriteType::ReplicatedDisk, "replicated-disk", Some(Tier::Disk), false, false, true),
];

/// `Unspecified`: no properties (no file is written with it).
const UNSPECIFIED: WriteMeaning = row(WriteType::Unspecified, "unspecified", None, false, false, false);

/// What `wt` means (`Unspecified`: nothing, see [`WriteMeaning::is_known`]).
pub fn of(wt: WriteType) -> &'static WriteMeaning {
    WRITE_TYPES.iter().find(|m| m.write_type == wt).unwrap_or(&UNSPECIFIED)
}

/// What `wt` means, refusing `Unspecified`.
pub fn known(wt: WriteType) -> Result<&'static WriteMeaning> {
    Some(of(wt)).filter(|m| m.is_known()).ok_or_else(|| ThawError::invalid("write type is unspecified"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_type_has_one_row_and_its_proto_name() {
        for wt in [
            WriteType::MustCache,
            WriteType::CacheThrough,
            WriteType::Through,
            WriteType::ReplicatedDisk,
            WriteType::AsyncThrough,
        ] {
            let m = of(wt);
            assert_eq!(m.write_type, wt);
            assert_eq!(WRITE_TYPES.iter().filter(|r| r.write_type == wt).count(), 1);
            let proto = wt.as_str_name().trim_start_matches("WRITE_TYPE_").to_lowercase().replace('_', "-");
            assert_eq!(m.label, proto);
        }
        assert!(!of(WriteType::Unspecified).is_known());
        assert!(known(WriteType::Unspecified).is_err());
    }

    #[test]
    fn the_table_says_what_the_types_mean() {
        let durable_at_close: Vec<&str> =
            WRITE_TYPES.iter().filter(|m| m.writes_under_store).map(|m| m.label).collect();
        assert_eq!(durable_at_close, ["cache-through", "through"]);
        let only_copy: Vec<&str> = WRITE_TYPES.iter().filter(|m| m.memory_only_copy()).map(|m| m.label).collect();
        assert_eq!(only_copy, ["must-cache", "async-through"]);
        assert_eq!(of(WriteType::ReplicatedDisk).copies(3), 3);
        assert_eq!(of(WriteType::ReplicatedDisk).copies(0), 1);
        assert_eq!(of(WriteType::CacheThrough).copies(3), 1);
        assert!(of(WriteType::AsyncThrough).checkpointed);
        assert_eq!(of(WriteType::Through).tier, None);
    }
}

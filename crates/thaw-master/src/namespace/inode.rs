//! The master's in-memory inode, compact. Each inode used to keep its whole
//! journal record (an `InodeRecord`: five strings and a vector, about 200
//! bytes before their heap parts) and an empty child map: 831 bytes a file at a
//! million files (`thaw-bench namespace`), some 8 GiB at ten million.
//!
//! Here the fields every file has are inline (88 bytes with no padding to
//! spare); the name is a `CompactString` (no heap part up to 24 bytes, the
//! usual length of a file name); the owner and group pair is shared by every
//! inode that has it (a namespace has few distinct pairs: one `Arc` each,
//! interned by [`Owners`]); and what few files have (a lineage, the blocks'
//! first CRCs, an unfinished file's writer) or only directories have (their
//! children) sits behind one optional box. HDFS's NameNode takes the same
//! road (an `INodeFile` of a few longs and a byte array name, permissions
//! packed into a long over a table of user and group names).
//!
//! The journal keeps the full record; [`Inode::record`] makes one back.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use compact_str::CompactString;
use thaw_common::proto::{InodeRecord, WriteType};

use crate::journal::RECORD_VERSION;

/// A directory's children by name.
pub type Children = BTreeMap<CompactString, u64>;

const DIR: u8 = 1;
const COMPLETE: u8 = 1 << 1;
const PERSISTED: u8 = 1 << 2;
const TEMPORARY: u8 = 1 << 3;
const PERSIST_REQUESTED: u8 = 1 << 4;
const HAS_MODE: u8 = 1 << 5;
const DOOMED: u8 = 1 << 6;

/// An owner and group, shared by the inodes that have them.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct OwnerGroup {
    owner: Box<str>,
    group: Box<str>,
}

/// What only some inodes have.
#[derive(Debug, Clone)]
enum Extra {
    Dir(Children),
    File { lineage_id: u64, block_crc32: Box<[u32]>, writer: Box<str> },
}

#[derive(Debug, Clone)]
pub struct Inode {
    parent_id: u64,
    length: u64,
    block_size: u64,
    mtime_ms: u64,
    ufs_mtime_ms: u64,
    name: CompactString,
    owners: Arc<OwnerGroup>,
    extra: Option<Box<Extra>>,
    mode: u32,
    write_type: u8,
    flags: u8,
}

impl Inode {
    /// The inode of `rec`, its owner and group interned in `owners`.
    pub fn from_record(rec: InodeRecord, owners: &mut Owners) -> Self {
        let mut flags = 0;
        for (on, bit) in [
            (rec.is_dir, DIR),
            (rec.complete, COMPLETE),
            (rec.persisted, PERSISTED),
            (rec.temporary, TEMPORARY),
            (rec.persist_requested, PERSIST_REQUESTED),
            (rec.mode.is_some(), HAS_MODE),
        ] {
            if on {
                flags |= bit;
            }
        }
        let extra = if rec.is_dir {
            Some(Box::new(Extra::Dir(Children::new())))
        } else if rec.lineage_id != 0 || !rec.block_crc32.is_empty() || !rec.writer.is_empty() {
            Some(Box::new(Extra::File {
                lineage_id: rec.lineage_id,
                block_crc32: rec.block_crc32.into_boxed_slice(),
                writer: rec.writer.into_boxed_str(),
            }))
        } else {
            None
        };
        Inode {
            parent_id: rec.parent_id,
            length: rec.length,
            block_size: rec.block_size,
            mtime_ms: rec.mtime_ms,
            ufs_mtime_ms: rec.ufs_mtime_ms,
            name: CompactString::from(rec.name),
            owners: owners.intern(&rec.owner, &rec.group),
            extra,
            mode: rec.mode.unwrap_or(0),
            // Every WriteType value fits (0..=5); an unknown one reads back as the default.
            write_type: u8::try_from(rec.write_type).unwrap_or(0),
            flags,
        }
    }

    /// The journal record of this inode (id `id`).
    pub fn record(&self, id: u64) -> InodeRecord {
        InodeRecord {
            version: RECORD_VERSION,
            id,
            parent_id: self.parent_id,
            name: self.name.as_str().to_owned(),
            is_dir: self.is_dir(),
            length: self.length,
            block_size: self.block_size,
            complete: self.complete(),
            persisted: self.persisted(),
            write_type: i32::from(self.write_type),
            mtime_ms: self.mtime_ms,
            ufs_mtime_ms: self.ufs_mtime_ms,
            temporary: self.temporary(),
            persist_requested: self.persist_requested(),
            lineage_id: self.lineage_id(),
            block_crc32: self.block_crc32().to_vec(),
            writer: self.writer().to_string(),
            owner: self.owner().to_string(),
            group: self.group().to_string(),
            mode: self.mode(),
        }
    }

    fn flag(&self, bit: u8) -> bool {
        self.flags & bit != 0
    }

    pub fn is_dir(&self) -> bool {
        self.flag(DIR)
    }
    pub fn complete(&self) -> bool {
        self.flag(COMPLETE)
    }
    pub fn persisted(&self) -> bool {
        self.flag(PERSISTED)
    }
    pub fn temporary(&self) -> bool {
        self.flag(TEMPORARY)
    }
    pub fn persist_requested(&self) -> bool {
        self.flag(PERSIST_REQUESTED)
    }
    pub fn parent_id(&self) -> u64 {
        self.parent_id
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn length(&self) -> u64 {
        self.length
    }
    pub fn block_size(&self) -> u64 {
        self.block_size
    }
    pub fn mtime_ms(&self) -> u64 {
        self.mtime_ms
    }
    pub fn ufs_mtime_ms(&self) -> u64 {
        self.ufs_mtime_ms
    }
    pub fn write_type(&self) -> WriteType {
        WriteType::try_from(i32::from(self.write_type)).unwrap_or_default()
    }
    pub fn owner(&self) -> &str {
        &self.owners.owner
    }
    pub fn group(&self) -> &str {
        &self.owners.group
    }
    pub fn mode(&self) -> Option<u32> {
        self.flag(HAS_MODE).then_some(self.mode)
    }
    pub fn lineage_id(&self) -> u64 {
        match self.extra.as_deref() {
            Some(Extra::File { lineage_id, .. }) => *lineage_id,
            _ => 0,
        }
    }
    pub fn block_crc32(&self) -> &[u32] {
        match self.extra.as_deref() {
            Some(Extra::File { block_crc32, .. }) => block_crc32,
            _ => &[],
        }
    }
    pub fn writer(&self) -> &str {
        match self.extra.as_deref() {
            Some(Extra::File { writer, .. }) => writer,
            _ => "",
        }
    }

    /// The child named `name` (directories only).
    pub fn child(&self, name: &str) -> Option<u64> {
        self.children().and_then(|c| c.get(name).copied())
    }

    /// A directory's children; `None` for a file.
    pub fn children(&self) -> Option<&Children> {
        match self.extra.as_deref() {
            Some(Extra::Dir(c)) => Some(c),
            _ => None,
        }
    }

    pub(super) fn children_mut(&mut self) -> Option<&mut Children> {
        match self.extra.as_deref_mut() {
            Some(Extra::Dir(c)) => Some(c),
            _ => None,
        }
    }

    /// Ids of the children (none for a file).
    pub(super) fn child_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.children().into_iter().flat_map(|c| c.values().copied())
    }

    /// Takes the children out (for an inode about to be replaced or dropped).
    pub(super) fn take_children(&mut self) -> Children {
        self.children_mut().map(std::mem::take).unwrap_or_default()
    }

    pub(super) fn doomed(&self) -> bool {
        self.flag(DOOMED)
    }

    pub(super) fn set_doomed(&mut self) {
        self.flags |= DOOMED;
    }

    /// Moves the inode: a new parent and name (detach and rename).
    pub(super) fn relink(&mut self, parent_id: u64, name: &str) {
        self.parent_id = parent_id;
        self.name = CompactString::from(name);
    }
}

/// The owner and group pairs in use: each held once, shared by its inodes.
/// A pair stays until the namespace is rebuilt (there are as few as there are
/// users and groups writing).
#[derive(Default)]
pub struct Owners {
    table: hashbrown::HashTable<Arc<OwnerGroup>>,
    hasher: foldhash::fast::FixedState,
    /// The last pair asked for: most records in a row share it.
    last: Option<Arc<OwnerGroup>>,
}

impl Owners {
    pub fn intern(&mut self, owner: &str, group: &str) -> Arc<OwnerGroup> {
        if let Some(l) = &self.last
            && &*l.owner == owner
            && &*l.group == group
        {
            return l.clone();
        }
        let hash = {
            let mut h = self.hasher.build_hasher();
            owner.hash(&mut h);
            group.hash(&mut h);
            h.finish()
        };
        let hasher = &self.hasher;
        let rehash = |g: &Arc<OwnerGroup>| {
            let mut h = hasher.build_hasher();
            g.owner.hash(&mut h);
            g.group.hash(&mut h);
            h.finish()
        };
        let found = match self.table.entry(hash, |g| &*g.owner == owner && &*g.group == group, rehash) {
            hashbrown::hash_table::Entry::Occupied(o) => o.get().clone(),
            hashbrown::hash_table::Entry::Vacant(v) => {
                let g = Arc::new(OwnerGroup { owner: owner.into(), group: group.into() });
                v.insert(g.clone());
                g
            }
        };
        self.last = Some(found.clone());
        found
    }

    /// Distinct pairs held.
    pub fn len(&self) -> usize {
        self.table.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inode_is_small() {
        // The point of this module: a change that grows it should be a decision.
        assert_eq!(std::mem::size_of::<Inode>(), 88);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn record() -> impl Strategy<Value = InodeRecord> {
        (
            (any::<u64>(), any::<u64>(), "[a-z0-9._-]{1,40}", any::<bool>(), any::<u64>(), any::<u64>()),
            (any::<bool>(), any::<bool>(), 0..6i32, any::<u64>(), any::<u64>(), any::<bool>(), any::<bool>()),
            (
                prop_oneof![Just(0u64), any::<u64>()],
                proptest::collection::vec(any::<u32>(), 0..4),
                prop_oneof![Just(String::new()), "[a-z]{1,12}"],
                prop_oneof![Just(String::new()), "[a-z]{1,8}"],
                prop_oneof![Just(String::new()), "[a-z]{1,8}"],
                proptest::option::of(0..0o7777u32),
            ),
        )
            .prop_map(
                |(
                    (id, parent_id, name, is_dir, length, block_size),
                    (complete, persisted, write_type, mtime_ms, ufs_mtime_ms, temporary, persist_requested),
                    (lineage_id, block_crc32, writer, owner, group, mode),
                )| {
                    let file_only = !is_dir;
                    InodeRecord {
                        version: RECORD_VERSION,
                        id,
                        parent_id,
                        name,
                        is_dir,
                        length,
                        block_size,
                        complete,
                        persisted,
                        write_type,
                        mtime_ms,
                        ufs_mtime_ms,
                        temporary,
                        persist_requested,
                        // A directory has no lineage, CRCs or writer (the master never gives it any).
                        lineage_id: if file_only { lineage_id } else { 0 },
                        block_crc32: if file_only { block_crc32 } else { Vec::new() },
                        writer: if file_only { writer } else { String::new() },
                        owner,
                        group,
                        mode,
                    }
                },
            )
    }

    proptest! {
        /// Every record the journal can hold comes back whole from the
        /// compact inode, and equal pairs of owner and group are held once.
        #[test]
        fn a_record_comes_back_whole(recs in proptest::collection::vec(record(), 1..40)) {
            let mut owners = Owners::default();
            let mut pairs = std::collections::HashSet::new();
            for rec in recs {
                pairs.insert((rec.owner.clone(), rec.group.clone()));
                let inode = Inode::from_record(rec.clone(), &mut owners);
                prop_assert_eq!(inode.record(rec.id), rec);
            }
            prop_assert_eq!(owners.len(), pairs.len());
        }
    }
}

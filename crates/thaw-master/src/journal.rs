//! The master journal: the namespace as InodeRecords, and lineage entries
//! (tachyon.txt 2.4) as LineageRecords, in an embedded redb store.
//!
//! redb (pure Rust, ACID, crash-safe with fsync on commit) over RocksDB because it
//! builds in seconds, needs no C++ toolchain, and one table of small records is all
//! the namespace needs. Block locations are not journaled: they are soft state
//! rebuilt from worker block reports (as HDFS does).

use std::path::Path;

use prost::Message;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use thaw_common::proto::{InodeRecord, LineageRecord};
use thaw_common::{Result, ThawError};

const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
const LINEAGE: TableDefinition<u64, &[u8]> = TableDefinition::new("lineage");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const NEXT_ID: &str = "next_id";
const NEXT_LINEAGE_ID: &str = "next_lineage_id";

/// Version written into every record.
pub const RECORD_VERSION: u32 = 1;

/// One change to the journal.
#[derive(Debug, Clone)]
pub enum JournalOp {
    Put(InodeRecord),
    Delete(u64),
    PutLineage(LineageRecord),
    DeleteLineage(u64),
}

/// What the journal holds.
#[derive(Debug, Default)]
pub struct Loaded {
    pub inodes: Vec<InodeRecord>,
    /// The next unused inode id.
    pub next_id: u64,
    pub lineages: Vec<LineageRecord>,
    /// The next unused lineage id (ids are never reused either).
    pub next_lineage_id: u64,
}

pub struct Journal {
    db: Database,
}

fn jerr(e: impl std::fmt::Display) -> ThawError {
    ThawError::internal(format!("journal: {e}"))
}

impl Journal {
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let db = Database::create(dir.join("thaw-master.redb")).map_err(jerr)?;
        let txn = db.begin_write().map_err(jerr)?;
        txn.open_table(INODES).map_err(jerr)?;
        txn.open_table(LINEAGE).map_err(jerr)?;
        txn.open_table(META).map_err(jerr)?;
        txn.commit().map_err(jerr)?;
        Ok(Journal { db })
    }

    /// Every record, and the next unused ids (ids are never reused, so a stale
    /// block of a deleted file can never pass for a block of a new one).
    pub fn load(&self) -> Result<Loaded> {
        let txn = self.db.begin_read().map_err(jerr)?;
        let table = txn.open_table(INODES).map_err(jerr)?;
        let mut out = Loaded::default();
        for row in table.iter().map_err(jerr)? {
            let (id, bytes) = row.map_err(jerr)?;
            let rec = decode_inode(bytes.value()).map_err(|e| e.context(format!("inode {}", id.value())))?;
            out.inodes.push(rec);
        }
        let lineage = txn.open_table(LINEAGE).map_err(jerr)?;
        for row in lineage.iter().map_err(jerr)? {
            let (id, bytes) = row.map_err(jerr)?;
            let rec = decode_lineage(bytes.value()).map_err(|e| e.context(format!("lineage {}", id.value())))?;
            out.lineages.push(rec);
        }
        let meta = txn.open_table(META).map_err(jerr)?;
        out.next_id = meta.get(NEXT_ID).map_err(jerr)?.map(|v| v.value()).unwrap_or(0);
        out.next_lineage_id = meta.get(NEXT_LINEAGE_ID).map_err(jerr)?.map(|v| v.value()).unwrap_or(1);
        Ok(out)
    }

    /// Applies `ops` and the new next id in one durable transaction.
    pub fn commit(&self, ops: &[JournalOp], next_id: u64) -> Result<()> {
        let txn = self.db.begin_write().map_err(jerr)?;
        {
            let mut table = txn.open_table(INODES).map_err(jerr)?;
            let mut lineage = txn.open_table(LINEAGE).map_err(jerr)?;
            let mut meta = txn.open_table(META).map_err(jerr)?;
            let mut next_lineage = meta.get(NEXT_LINEAGE_ID).map_err(jerr)?.map(|v| v.value()).unwrap_or(1);
            for op in ops {
                match op {
                    JournalOp::Put(rec) => {
                        table.insert(rec.id, rec.encode_to_vec().as_slice()).map_err(jerr)?;
                    }
                    JournalOp::Delete(id) => {
                        table.remove(id).map_err(jerr)?;
                    }
                    JournalOp::PutLineage(rec) => {
                        lineage.insert(rec.id, rec.encode_to_vec().as_slice()).map_err(jerr)?;
                        next_lineage = next_lineage.max(rec.id + 1);
                    }
                    JournalOp::DeleteLineage(id) => {
                        lineage.remove(id).map_err(jerr)?;
                    }
                }
            }
            meta.insert(NEXT_ID, next_id).map_err(jerr)?;
            meta.insert(NEXT_LINEAGE_ID, next_lineage).map_err(jerr)?;
        }
        txn.commit().map_err(jerr)
    }
}

/// Decodes a record of any version this build knows (only 1 so far).
pub fn decode_inode(bytes: &[u8]) -> Result<InodeRecord> {
    let rec = InodeRecord::decode(bytes).map_err(jerr)?;
    match rec.version {
        1 => Ok(rec),
        v => Err(ThawError::internal(format!(
            "journal record version {v} is newer than this master understands ({RECORD_VERSION})"
        ))),
    }
}

pub fn decode_lineage(bytes: &[u8]) -> Result<LineageRecord> {
    let rec = LineageRecord::decode(bytes).map_err(jerr)?;
    match rec.version {
        1 => Ok(rec),
        v => Err(ThawError::internal(format!(
            "journal lineage version {v} is newer than this master understands ({RECORD_VERSION})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let j = Journal::open(dir.path()).unwrap();
            let rec = |id, name: &str| InodeRecord {
                version: RECORD_VERSION,
                id,
                parent_id: 1,
                name: name.into(),
                ..Default::default()
            };
            j.commit(&[JournalOp::Put(rec(2, "a")), JournalOp::Put(rec(3, "b"))], 4).unwrap();
            j.commit(&[JournalOp::Delete(2)], 4).unwrap();
        }
        let j = Journal::open(dir.path()).unwrap();
        let loaded = j.load().unwrap();
        assert_eq!(loaded.next_id, 4);
        assert_eq!(loaded.inodes.len(), 1);
        assert_eq!(loaded.inodes[0].name, "b");
        assert_eq!((loaded.lineages.len(), loaded.next_lineage_id), (0, 1));
    }

    #[test]
    fn lineage_survives_reopen_and_its_ids_are_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let lin = |id| LineageRecord {
            version: RECORD_VERSION,
            id,
            input_fids: vec![2],
            output_paths: vec!["/out".into()],
            command: vec!["true".into()],
            config: vec![0, 1, 2],
            ..Default::default()
        };
        {
            let j = Journal::open(dir.path()).unwrap();
            j.commit(&[JournalOp::PutLineage(lin(1)), JournalOp::PutLineage(lin(2))], 3).unwrap();
            j.commit(&[JournalOp::DeleteLineage(2)], 3).unwrap();
        }
        let loaded = Journal::open(dir.path()).unwrap().load().unwrap();
        assert_eq!(loaded.lineages, vec![lin(1)]);
        assert_eq!(loaded.next_lineage_id, 3, "the deleted lineage's id is not given out again");
    }
}

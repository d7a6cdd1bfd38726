//! The master journal: the namespace as InodeRecords, and lineage entries
//! (Tachyon, section 2.4) as LineageRecords, in an embedded redb store.
//!
//! redb (pure Rust, ACID, crash-safe with fsync on commit) over RocksDB because it
//! builds in seconds, needs no C++ toolchain, and one table of small records is all
//! the namespace needs. Block locations are not journaled: they are soft state
//! rebuilt from worker block reports (as HDFS does).

use std::path::Path;

use prost::Message;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use thaw_common::proto::{InodeRecord, LineageRecord, S3KeyRecord};
use thaw_common::{Result, ThawError};

const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
const LINEAGE: TableDefinition<u64, &[u8]> = TableDefinition::new("lineage");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// The gateway's S3 access keys, by access key (their secrets are derived,
/// never stored).
const S3_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("s3_keys");
/// A replicated journal's Raft state (highly available masters): what the
/// journal has applied and the group's membership, written in the same
/// transaction as the records they describe.
const RAFT_META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");
/// The Raft log and its own state (vote, committed, purged), in the same
/// redb file (the group of masters keeps its Raft log here).
pub(crate) const RAFT_LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
pub(crate) const RAFT_STATE: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_state");
/// Keys of [`RAFT_META`].
pub const RAFT_APPLIED: &str = "applied";
pub const RAFT_MEMBERSHIP: &str = "membership";
const NEXT_ID: &str = "next_id";
const NEXT_LINEAGE_ID: &str = "next_lineage_id";
/// The last record of the log ([`crate::wal`]) a checkpoint applied.
const WAL_SEQ: &str = "wal_seq";

/// Version written into every record.
pub const RECORD_VERSION: u32 = 1;

/// One change to the journal.
#[derive(Debug, Clone)]
pub enum JournalOp {
    Put(InodeRecord),
    Delete(u64),
    PutLineage(LineageRecord),
    DeleteLineage(u64),
    PutS3Key(S3KeyRecord),
    DeleteS3Key(String),
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
    pub s3_keys: Vec<S3KeyRecord>,
    /// Raft state of a replicated journal ([`RAFT_APPLIED`], [`RAFT_MEMBERSHIP`]).
    pub raft_meta: Vec<(String, Vec<u8>)>,
}

impl Loaded {
    pub fn raft_meta(&self, key: &str) -> Option<&[u8]> {
        self.raft_meta.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_slice())
    }
}

/// Where a master's journal commits go: this master's own redb file, or a
/// group's replicated log (committed there, then applied to every member's
/// file). A commit returns once the ops are durable.
pub trait Commit: Send + Sync {
    fn commit(&self, ops: &[JournalOp], next_id: u64) -> Result<()>;

    /// Transactions written and the commits they held, where batched
    /// (`crate::commits::GroupCommit`); none for other journals.
    fn counts(&self) -> Option<(u64, u64)> {
        None
    }
}

impl Commit for Journal {
    fn commit(&self, ops: &[JournalOp], next_id: u64) -> Result<()> {
        self.commit_with(ops, next_id, &[])
    }
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
        txn.open_table(S3_KEYS).map_err(jerr)?;
        txn.open_table(RAFT_META).map_err(jerr)?;
        txn.open_table(RAFT_LOG).map_err(jerr)?;
        txn.open_table(RAFT_STATE).map_err(jerr)?;
        txn.commit().map_err(jerr)?;
        let j = Journal { db };
        j.recover_log(dir)?;
        Ok(j)
    }

    /// Applies what a single master's log ([`crate::wal`]) holds beyond the
    /// last checkpoint (a master that stopped without one: a crash), in one
    /// transaction, and empties the log: every opener (a master starting, a
    /// tool reading the journal) sees every acknowledged change.
    fn recover_log(&self, dir: &Path) -> Result<()> {
        let records = crate::wal::read(dir)?;
        if records.is_empty() {
            return Ok(());
        }
        let applied = self.wal_seq()?;
        let (mut ops, mut next_id, mut last) = (Vec::new(), 0, 0);
        for r in records.iter().filter(|r| r.seq > applied) {
            let (batch, id) =
                decode_batch(&r.payload).map_err(|e| e.context(format!("journal log record {}", r.seq)))?;
            ops.extend(batch);
            (next_id, last) = (id, r.seq);
        }
        if last > 0 {
            tracing::info!(ops = ops.len(), last, "applying the journal log's changes since its last checkpoint");
            self.checkpoint(&ops, next_id, last)?;
        }
        let log = dir.join(crate::wal::FILE);
        let f = std::fs::OpenOptions::new().write(true).open(&log)?;
        f.set_len(0).and_then(|_| f.sync_all()).map_err(jerr)
    }

    /// The last log record a checkpoint applied (0: none).
    pub fn wal_seq(&self) -> Result<u64> {
        let txn = self.db.begin_read().map_err(jerr)?;
        let meta = txn.open_table(META).map_err(jerr)?;
        Ok(meta.get(WAL_SEQ).map_err(jerr)?.map(|v| v.value()).unwrap_or(0))
    }

    /// Applies the log's changes up to record `seq` in one durable
    /// transaction, noting `seq` in it (a checkpoint).
    pub fn checkpoint(&self, ops: &[JournalOp], next_id: u64, seq: u64) -> Result<()> {
        self.apply(ops, next_id, &[], Some(seq))
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// Every record, and the next unused ids (ids are never reused, so a stale
    /// block of a deleted file can never pass for a block of a new one).
    pub fn load(&self) -> Result<Loaded> {
        let mut inodes = Vec::new();
        let mut out = self.load_each_inode(|_| {}, |rec| inodes.push(rec))?;
        out.inodes = inodes;
        Ok(out)
    }

    /// [`Self::load`], in one read transaction, but each inode record goes to
    /// `each` as it is decoded instead of into [`Loaded::inodes`] (a start
    /// would otherwise hold every record whole beside the tree made of them:
    /// gigabytes at ten million files). `count` is told how many there are first.
    pub fn load_each_inode(&self, count: impl FnOnce(u64), mut each: impl FnMut(InodeRecord)) -> Result<Loaded> {
        let txn = self.db.begin_read().map_err(jerr)?;
        let table = txn.open_table(INODES).map_err(jerr)?;
        let mut out = Loaded::default();
        count(table.len().map_err(jerr)?);
        for row in table.iter().map_err(jerr)? {
            let (id, bytes) = row.map_err(jerr)?;
            let rec = decode_inode(bytes.value()).map_err(|e| e.context(format!("inode {}", id.value())))?;
            each(rec);
        }
        let lineage = txn.open_table(LINEAGE).map_err(jerr)?;
        for row in lineage.iter().map_err(jerr)? {
            let (id, bytes) = row.map_err(jerr)?;
            let rec = decode_lineage(bytes.value()).map_err(|e| e.context(format!("lineage {}", id.value())))?;
            out.lineages.push(rec);
        }
        let keys = txn.open_table(S3_KEYS).map_err(jerr)?;
        for row in keys.iter().map_err(jerr)? {
            let (k, bytes) = row.map_err(jerr)?;
            let rec = decode_s3_key(bytes.value()).map_err(|e| e.context(format!("s3 key {}", k.value())))?;
            out.s3_keys.push(rec);
        }
        let meta = txn.open_table(META).map_err(jerr)?;
        out.next_id = meta.get(NEXT_ID).map_err(jerr)?.map(|v| v.value()).unwrap_or(0);
        out.next_lineage_id = meta.get(NEXT_LINEAGE_ID).map_err(jerr)?.map(|v| v.value()).unwrap_or(1);
        let raft = txn.open_table(RAFT_META).map_err(jerr)?;
        for row in raft.iter().map_err(jerr)? {
            let (k, v) = row.map_err(jerr)?;
            out.raft_meta.push((k.value().to_string(), v.value().to_vec()));
        }
        Ok(out)
    }

    /// The next unused inode id, alone.
    pub fn next_id(&self) -> Result<u64> {
        let txn = self.db.begin_read().map_err(jerr)?;
        let meta = txn.open_table(META).map_err(jerr)?;
        Ok(meta.get(NEXT_ID).map_err(jerr)?.map(|v| v.value()).unwrap_or(0))
    }

    /// The Raft state alone (see [`Loaded::raft_meta`]).
    pub fn raft_meta(&self) -> Result<Loaded> {
        let txn = self.db.begin_read().map_err(jerr)?;
        let raft = txn.open_table(RAFT_META).map_err(jerr)?;
        let mut out = Loaded::default();
        for row in raft.iter().map_err(jerr)? {
            let (k, v) = row.map_err(jerr)?;
            out.raft_meta.push((k.value().to_string(), v.value().to_vec()));
        }
        Ok(out)
    }

    /// Applies `ops`, the new next id and `raft_meta` (key, value) in one
    /// durable transaction.
    pub fn commit_with(&self, ops: &[JournalOp], next_id: u64, raft_meta: &[(&str, Vec<u8>)]) -> Result<()> {
        self.apply(ops, next_id, raft_meta, None)
    }

    fn apply(
        &self,
        ops: &[JournalOp],
        next_id: u64,
        raft_meta: &[(&str, Vec<u8>)],
        wal_seq: Option<u64>,
    ) -> Result<()> {
        let txn = self.db.begin_write().map_err(jerr)?;
        {
            let mut raft = txn.open_table(RAFT_META).map_err(jerr)?;
            for (k, v) in raft_meta {
                raft.insert(*k, v.as_slice()).map_err(jerr)?;
            }
        }
        {
            let mut table = txn.open_table(INODES).map_err(jerr)?;
            let mut lineage = txn.open_table(LINEAGE).map_err(jerr)?;
            let mut keys = txn.open_table(S3_KEYS).map_err(jerr)?;
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
                    JournalOp::PutS3Key(rec) => {
                        keys.insert(rec.access_key.as_str(), rec.encode_to_vec().as_slice()).map_err(jerr)?;
                    }
                    JournalOp::DeleteS3Key(k) => {
                        keys.remove(k.as_str()).map_err(jerr)?;
                    }
                }
            }
            meta.insert(NEXT_ID, next_id).map_err(jerr)?;
            meta.insert(NEXT_LINEAGE_ID, next_lineage).map_err(jerr)?;
            if let Some(seq) = wal_seq {
                meta.insert(WAL_SEQ, seq).map_err(jerr)?;
            }
        }
        txn.commit().map_err(jerr)
    }

    /// Replaces everything with `snapshot` (a Raft snapshot installed), in
    /// one durable transaction.
    pub fn replace_all(&self, snapshot: &Loaded, raft_meta: &[(&str, Vec<u8>)]) -> Result<()> {
        let txn = self.db.begin_write().map_err(jerr)?;
        {
            let mut table = txn.open_table(INODES).map_err(jerr)?;
            table.retain(|_, _| false).map_err(jerr)?;
            for rec in &snapshot.inodes {
                table.insert(rec.id, rec.encode_to_vec().as_slice()).map_err(jerr)?;
            }
            let mut lineage = txn.open_table(LINEAGE).map_err(jerr)?;
            lineage.retain(|_, _| false).map_err(jerr)?;
            for rec in &snapshot.lineages {
                lineage.insert(rec.id, rec.encode_to_vec().as_slice()).map_err(jerr)?;
            }
            let mut keys = txn.open_table(S3_KEYS).map_err(jerr)?;
            keys.retain(|_, _| false).map_err(jerr)?;
            for rec in &snapshot.s3_keys {
                keys.insert(rec.access_key.as_str(), rec.encode_to_vec().as_slice()).map_err(jerr)?;
            }
            let mut meta = txn.open_table(META).map_err(jerr)?;
            meta.insert(NEXT_ID, snapshot.next_id).map_err(jerr)?;
            meta.insert(NEXT_LINEAGE_ID, snapshot.next_lineage_id).map_err(jerr)?;
            let mut raft = txn.open_table(RAFT_META).map_err(jerr)?;
            for (k, v) in raft_meta {
                raft.insert(*k, v.as_slice()).map_err(jerr)?;
            }
        }
        txn.commit().map_err(jerr)
    }
}

/// A commit as a replicated log entry's payload (and a single master's log
/// record's, [`crate::wal`]).
pub fn encode_batch(ops: &[JournalOp], next_id: u64) -> Vec<u8> {
    use thaw_common::proto::journal_op_record::Op;
    let ops = ops
        .iter()
        .map(|op| thaw_common::proto::JournalOpRecord {
            op: Some(match op {
                JournalOp::Put(r) => Op::Put(r.clone()),
                JournalOp::Delete(id) => Op::Delete(*id),
                JournalOp::PutLineage(r) => Op::PutLineage(r.clone()),
                JournalOp::DeleteLineage(id) => Op::DeleteLineage(*id),
                JournalOp::PutS3Key(r) => Op::PutS3Key(r.clone()),
                JournalOp::DeleteS3Key(k) => Op::DeleteS3Key(k.clone()),
            }),
        })
        .collect();
    thaw_common::proto::JournalBatch { ops, next_id }.encode_to_vec()
}

/// [`encode_batch`]'s inverse; each record's version is checked as on load.
pub fn decode_batch(bytes: &[u8]) -> Result<(Vec<JournalOp>, u64)> {
    use thaw_common::proto::journal_op_record::Op;
    let b = thaw_common::proto::JournalBatch::decode(bytes).map_err(jerr)?;
    let mut ops = Vec::with_capacity(b.ops.len());
    for op in b.ops {
        ops.push(match op.op {
            Some(Op::Put(r)) => JournalOp::Put(checked_inode(r)?),
            Some(Op::Delete(id)) => JournalOp::Delete(id),
            Some(Op::PutLineage(r)) => JournalOp::PutLineage(checked_lineage(r)?),
            Some(Op::DeleteLineage(id)) => JournalOp::DeleteLineage(id),
            Some(Op::PutS3Key(r)) => JournalOp::PutS3Key(checked_s3_key(r)?),
            Some(Op::DeleteS3Key(k)) => JournalOp::DeleteS3Key(k),
            None => return Err(ThawError::internal("journal: a replicated op without a kind")),
        });
    }
    Ok((ops, b.next_id))
}

/// The journal's records as a snapshot's bytes.
pub fn encode_snapshot(l: &Loaded) -> Vec<u8> {
    thaw_common::proto::JournalSnapshot {
        inodes: l.inodes.clone(),
        lineages: l.lineages.clone(),
        next_id: l.next_id,
        next_lineage_id: l.next_lineage_id,
        s3_keys: l.s3_keys.clone(),
    }
    .encode_to_vec()
}

pub fn decode_snapshot(bytes: &[u8]) -> Result<Loaded> {
    let s = thaw_common::proto::JournalSnapshot::decode(bytes).map_err(jerr)?;
    let mut out = Loaded { next_id: s.next_id, next_lineage_id: s.next_lineage_id, ..Default::default() };
    for r in s.inodes {
        out.inodes.push(checked_inode(r)?);
    }
    for r in s.lineages {
        out.lineages.push(checked_lineage(r)?);
    }
    for r in s.s3_keys {
        out.s3_keys.push(checked_s3_key(r)?);
    }
    Ok(out)
}

/// Decodes a record of any version this build knows (only 1 so far).
pub fn decode_inode(bytes: &[u8]) -> Result<InodeRecord> {
    checked_inode(InodeRecord::decode(bytes).map_err(jerr)?)
}

fn checked_inode(rec: InodeRecord) -> Result<InodeRecord> {
    match rec.version {
        1 => Ok(rec),
        v => Err(ThawError::internal(format!(
            "journal record version {v} is newer than this master understands ({RECORD_VERSION})"
        ))),
    }
}

pub fn decode_lineage(bytes: &[u8]) -> Result<LineageRecord> {
    checked_lineage(LineageRecord::decode(bytes).map_err(jerr)?)
}

fn checked_lineage(rec: LineageRecord) -> Result<LineageRecord> {
    match rec.version {
        1 => Ok(rec),
        v => Err(ThawError::internal(format!(
            "journal lineage version {v} is newer than this master understands ({RECORD_VERSION})"
        ))),
    }
}

pub fn decode_s3_key(bytes: &[u8]) -> Result<S3KeyRecord> {
    checked_s3_key(S3KeyRecord::decode(bytes).map_err(jerr)?)
}

fn checked_s3_key(rec: S3KeyRecord) -> Result<S3KeyRecord> {
    match rec.version {
        1 => Ok(rec),
        v => Err(ThawError::internal(format!(
            "journal s3 key version {v} is newer than this master understands ({RECORD_VERSION})"
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

    #[test]
    fn s3_keys_survive_reopen_and_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let key = |k: &str, user: &str| S3KeyRecord {
            version: RECORD_VERSION,
            access_key: k.into(),
            user: user.into(),
            groups: vec!["eng".into()],
            ..Default::default()
        };
        {
            let j = Journal::open(dir.path()).unwrap();
            j.commit(&[JournalOp::PutS3Key(key("TKA", "alice")), JournalOp::PutS3Key(key("TKB", "bob"))], 1).unwrap();
            j.commit(&[JournalOp::DeleteS3Key("TKB".into())], 1).unwrap();
        }
        let loaded = Journal::open(dir.path()).unwrap().load().unwrap();
        assert_eq!(loaded.s3_keys, vec![key("TKA", "alice")]);
        let back = decode_snapshot(&encode_snapshot(&loaded)).unwrap();
        assert_eq!(back.s3_keys, loaded.s3_keys);
        let (ops, _) = decode_batch(&encode_batch(&[JournalOp::DeleteS3Key("TKA".into())], 1)).unwrap();
        assert!(matches!(ops.as_slice(), [JournalOp::DeleteS3Key(k)] if k == "TKA"));
    }

    fn named(id: u64, name: &str) -> InodeRecord {
        InodeRecord { version: RECORD_VERSION, id, parent_id: 1, name: name.into(), ..Default::default() }
    }

    /// What a single master logged and never checkpointed (it was killed)
    /// is in the journal when it is opened again, and the log is emptied;
    /// a record a checkpoint already applied is not applied again.
    #[test]
    fn the_log_is_applied_once_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let j = Journal::open(dir.path()).unwrap();
            // Record 1 was checkpointed, with what the master had then.
            j.checkpoint(&[JournalOp::Put(named(2, "checkpointed"))], 3, 1).unwrap();
            let mut log = crate::wal::Wal::open(dir.path(), 0).unwrap();
            // The log still holds record 1 (a crash before it was emptied):
            // applied again it would rename inode 2.
            log.append(&encode_batch(&[JournalOp::Put(named(2, "stale"))], 3)).unwrap();
            log.append(&encode_batch(&[JournalOp::Put(named(3, "logged"))], 4)).unwrap();
            log.append(&encode_batch(&[JournalOp::Put(named(4, "gone")), JournalOp::Delete(4)], 5)).unwrap();
        }
        let j = Journal::open(dir.path()).unwrap();
        let loaded = j.load().unwrap();
        let mut names: Vec<(u64, String)> = loaded.inodes.iter().map(|r| (r.id, r.name.clone())).collect();
        names.sort();
        assert_eq!(names, [(2, "checkpointed".to_string()), (3, "logged".to_string())]);
        assert_eq!((loaded.next_id, j.wal_seq().unwrap()), (5, 3));
        assert_eq!(std::fs::metadata(dir.path().join(crate::wal::FILE)).unwrap().len(), 0);
    }
}

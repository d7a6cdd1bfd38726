//! Raft's storage for a group of masters, in the master's own redb journal
//! file: the log (entries, vote, committed, purged) in two tables of their
//! own, and the state machine that *is* the journal. Applying an entry writes
//! its journal ops and the new "applied" log id in one transaction, so after a
//! crash the journal and Raft agree on what it holds (no entry applied twice or
//! skipped). A snapshot is the whole journal (`JournalSnapshot`).

// openraft's trait methods return its (large) StorageError; the helpers here
// return the same.
#![allow(clippy::result_large_err)]

use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    AnyError, Entry, EntryPayload, LogId, LogState, OptionalSend, RaftLogReader, RaftSnapshotBuilder, Snapshot,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use redb::{ReadableDatabase, ReadableTable};

use super::TypeConfig;
use crate::journal::{self, Journal, JournalOp, RAFT_APPLIED, RAFT_LOG, RAFT_MEMBERSHIP, RAFT_STATE};

type NodeId = u64;
type Node = openraft::BasicNode;
type SResult<T> = Result<T, StorageError<NodeId>>;
/// A snapshot's metadata and bytes.
type Kept = (SnapshotMeta<NodeId, Node>, Vec<u8>);
/// The last applied log id and the membership it carries.
type Applied = (Option<LogId<NodeId>>, StoredMembership<NodeId, Node>);

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "purged";

fn read_err(e: impl ToString) -> StorageError<NodeId> {
    StorageIOError::read(AnyError::error(e)).into()
}

fn write_err(e: impl ToString) -> StorageError<NodeId> {
    StorageIOError::write(AnyError::error(e)).into()
}

fn to_json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("raft state serializes")
}

fn from_json<T: serde::de::DeserializeOwned>(b: &[u8]) -> SResult<T> {
    serde_json::from_slice(b).map_err(read_err)
}

/// The Raft log, in the journal's redb file.
#[derive(Clone)]
pub struct LogStore {
    journal: Arc<Journal>,
}

impl LogStore {
    pub fn new(journal: Arc<Journal>) -> Self {
        LogStore { journal }
    }

    fn state<T: serde::de::DeserializeOwned>(&self, key: &str) -> SResult<Option<T>> {
        let txn = self.journal.db().begin_read().map_err(read_err)?;
        let t = txn.open_table(RAFT_STATE).map_err(read_err)?;
        match t.get(key).map_err(read_err)? {
            Some(v) => Ok(Some(from_json(v.value())?)),
            None => Ok(None),
        }
    }

    /// Writes `key` durably.
    fn set_state<T: serde::Serialize>(&self, key: &str, v: &T) -> SResult<()> {
        let txn = self.journal.db().begin_write().map_err(write_err)?;
        {
            let mut t = txn.open_table(RAFT_STATE).map_err(write_err)?;
            t.insert(key, to_json(v).as_slice()).map_err(write_err)?;
        }
        txn.commit().map_err(write_err)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> SResult<Vec<Entry<TypeConfig>>> {
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => Some(i + 1),
            Bound::Excluded(i) => Some(*i),
            Bound::Unbounded => None,
        };
        let txn = self.journal.db().begin_read().map_err(read_err)?;
        let t = txn.open_table(RAFT_LOG).map_err(read_err)?;
        let rows = match end {
            Some(end) => t.range(start..end),
            None => t.range(start..),
        }
        .map_err(read_err)?;
        let mut out = Vec::new();
        for row in rows {
            let (_, v) = row.map_err(read_err)?;
            out.push(from_json(v.value())?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> SResult<LogState<TypeConfig>> {
        let purged: Option<LogId<NodeId>> = self.state(PURGED)?;
        let last = {
            let txn = self.journal.db().begin_read().map_err(read_err)?;
            let t = txn.open_table(RAFT_LOG).map_err(read_err)?;
            match t.last().map_err(read_err)? {
                Some((_, v)) => Some(from_json::<Entry<TypeConfig>>(v.value())?.log_id),
                None => None,
            }
        };
        Ok(LogState { last_purged_log_id: purged, last_log_id: last.or(purged) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> SResult<()> {
        self.set_state(VOTE, vote)
    }

    async fn read_vote(&mut self) -> SResult<Option<Vote<NodeId>>> {
        self.state(VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> SResult<()> {
        self.set_state(COMMITTED, &committed)
    }

    async fn read_committed(&mut self) -> SResult<Option<LogId<NodeId>>> {
        Ok(self.state::<Option<LogId<NodeId>>>(COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> SResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // One durable transaction (redb fsyncs on commit) per append.
        let txn = self.journal.db().begin_write().map_err(write_err)?;
        {
            let mut t = txn.open_table(RAFT_LOG).map_err(write_err)?;
            for e in entries {
                t.insert(e.log_id.index, to_json(&e).as_slice()).map_err(write_err)?;
            }
        }
        let r = txn.commit().map_err(|e| std::io::Error::other(e.to_string()));
        let failed = r.as_ref().err().map(|e| e.to_string());
        callback.log_io_completed(r);
        match failed {
            Some(e) => Err(write_err(e)),
            None => Ok(()),
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> SResult<()> {
        let txn = self.journal.db().begin_write().map_err(write_err)?;
        {
            let mut t = txn.open_table(RAFT_LOG).map_err(write_err)?;
            t.retain_in(log_id.index.., |_, _| false).map_err(write_err)?;
        }
        txn.commit().map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> SResult<()> {
        let txn = self.journal.db().begin_write().map_err(write_err)?;
        {
            let mut s = txn.open_table(RAFT_STATE).map_err(write_err)?;
            s.insert(PURGED, to_json(&Some(log_id)).as_slice()).map_err(write_err)?;
            let mut t = txn.open_table(RAFT_LOG).map_err(write_err)?;
            t.retain_in(..=log_id.index, |_, _| false).map_err(write_err)?;
        }
        txn.commit().map_err(write_err)
    }
}

/// The state machine: the journal itself.
#[derive(Clone)]
pub struct StateMachine {
    journal: Arc<Journal>,
    /// The last snapshot built or installed (kept in memory: after a restart
    /// Raft builds a new one when a follower needs it).
    current: Arc<Mutex<Option<Kept>>>,
}

impl StateMachine {
    pub fn new(journal: Arc<Journal>) -> Self {
        StateMachine { journal, current: Default::default() }
    }

    fn applied(&self) -> SResult<Applied> {
        raft_meta(&self.journal.raft_meta().map_err(read_err)?)
    }
}

fn raft_meta(l: &journal::Loaded) -> SResult<Applied> {
    let applied = match l.raft_meta(RAFT_APPLIED) {
        Some(b) => from_json(b)?,
        None => None,
    };
    let membership = match l.raft_meta(RAFT_MEMBERSHIP) {
        Some(b) => from_json(b)?,
        None => StoredMembership::default(),
    };
    Ok((applied, membership))
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> SResult<Snapshot<TypeConfig>> {
        // One read transaction: the records and the log id they reflect agree.
        let loaded = self.journal.load().map_err(read_err)?;
        let (last_log_id, last_membership) = raft_meta(&loaded)?;
        let bytes = journal::encode_snapshot(&loaded);
        let snapshot_id = match last_log_id {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, thaw_common::now_ms()),
            None => format!("empty-{}", thaw_common::now_ms()),
        };
        let meta = SnapshotMeta { last_log_id, last_membership, snapshot_id };
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some((meta.clone(), bytes.clone()));
        tracing::info!(bytes = bytes.len(), inodes = loaded.inodes.len(), "journal snapshot built");
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> SResult<Applied> {
        self.applied()
    }

    async fn apply<I>(&mut self, entries: I) -> SResult<Vec<()>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut ops: Vec<JournalOp> = Vec::new();
        let mut next_id = None;
        let mut last = None;
        let mut membership = None;
        let mut n = 0;
        for e in entries {
            n += 1;
            last = Some(e.log_id);
            match e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(batch) => {
                    let (o, id) = journal::decode_batch(&batch.0).map_err(|e| write_err(e.message))?;
                    ops.extend(o);
                    next_id = Some(id);
                }
                EntryPayload::Membership(m) => membership = Some(StoredMembership::new(Some(e.log_id), m)),
            }
        }
        let Some(last) = last else { return Ok(Vec::new()) };
        let mut meta = vec![(RAFT_APPLIED, to_json(&Some(last)))];
        if let Some(m) = membership {
            meta.push((RAFT_MEMBERSHIP, to_json(&m)));
        }
        // A batch without inode ops keeps the stored next id.
        let next_id = match next_id {
            Some(id) => id,
            None => self.journal.next_id().map_err(read_err)?,
        };
        // Durable, with the log id it reflects. (Applying without an fsync,
        // counting on the log's next durable append in the same file, lost a
        // recursive delete when every master was killed at once in 2 of 5
        // runs of `crates/thaw-cli/tests/it/ha.rs`: openraft 0.9 expects the applied state it is
        // told of to be there after a crash.)
        self.journal.commit_with(&ops, next_id, &meta).map_err(|e| write_err(e.message))?;
        Ok(vec![(); n])
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> SResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Node>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> SResult<()> {
        let bytes = snapshot.into_inner();
        let loaded = journal::decode_snapshot(&bytes).map_err(|e| write_err(e.message))?;
        let raft = [(RAFT_APPLIED, to_json(&meta.last_log_id)), (RAFT_MEMBERSHIP, to_json(&meta.last_membership))];
        self.journal.replace_all(&loaded, &raft).map_err(|e| write_err(e.message))?;
        tracing::info!(bytes = bytes.len(), inodes = loaded.inodes.len(), "journal snapshot installed");
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> SResult<Option<Snapshot<TypeConfig>>> {
        let cur = self.current.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(cur.map(|(meta, bytes)| Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) }))
    }
}

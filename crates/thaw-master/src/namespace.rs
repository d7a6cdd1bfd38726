//! The namespace tree: pure state and decisions, no I/O. Every mutation returns
//! the journal ops that make it durable; the caller commits them before answering.

use std::collections::{BTreeMap, BTreeSet};

use thaw_common::ids::{block_count, block_length};
use thaw_common::proto::{InodeRecord, WriteType};
use thaw_common::{Result, ThawError, now_ms, path};

use crate::journal::{JournalOp, RECORD_VERSION};

mod reaper;
pub use reaper::REAPER_ID;

pub const ROOT_ID: u64 = 1;

#[derive(Debug, Clone)]
pub struct Inode {
    pub rec: InodeRecord,
    /// Children by name (directories only).
    pub children: BTreeMap<String, u64>,
    /// In a deleted tree whose records the reaper has yet to remove
    /// ([`reaper`]): invisible to every method but the reaper's.
    doomed: bool,
}

impl Inode {
    fn new(rec: InodeRecord) -> Self {
        Inode { rec, children: BTreeMap::new(), doomed: false }
    }

    pub fn is_dir(&self) -> bool {
        self.rec.is_dir
    }
}

/// What a new inode is.
#[derive(Debug, Clone, Default)]
pub struct NewInode {
    pub is_dir: bool,
    pub length: u64,
    pub block_size: u64,
    pub complete: bool,
    pub persisted: bool,
    pub write_type: WriteType,
    pub ufs_mtime_ms: u64,
    pub temporary: bool,
    pub lineage_id: u64,
    /// An unfinished file's writer (see `crate::leases`).
    pub writer: String,
    /// Permissions (checked by the master); "" and `None`: the defaults.
    pub owner: String,
    pub group: String,
    pub mode: Option<u32>,
}

/// What a directory's subtree holds, as the namespace knows it (the
/// dashboard's directory rows). Paths of the under-store never listed
/// through Thaw are not counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DirTotals {
    pub files: u64,
    pub bytes: u64,
    pub blocks: u64,
    /// Bytes of blocks with a replica in some worker's memory.
    pub in_memory_bytes: u64,
    /// False if the walk stopped at its budget of files (the figures are
    /// then lower bounds).
    pub whole: bool,
}

/// Inodes by id. The ids are the master's own, never a client's choice, so
/// the map hashes them with foldhash rather than SipHash (which defends
/// against chosen keys, and was a twentieth of a million-file start).
type InodeMap = foldhash::HashMap<u64, Inode>;

pub struct Namespace {
    inodes: InodeMap,
    next_id: u64,
    /// Inodes of subtrees deleted and not yet removed from the journal
    /// ([`reaper`]): marked in `inodes`, unlinked from the tree.
    doomed: usize,
    /// Their tops, by id (the oldest delete first).
    doomed_tops: BTreeSet<u64>,
}

impl Namespace {
    /// Rebuilds the tree from journal records, keeping only what forms a
    /// tree under the root, and says what it dropped and why. A crash cannot
    /// leave such records (every change is one transaction); a bug, a disk
    /// error or a hand edit can, and the master refuses to start on them
    /// unless told to salvage (`--salvage-journal`):
    /// - a record with the root's id, or an id given twice;
    /// - a name that is not a namespace entry ("", ".", "..", with a '/', a NUL
    ///   or a backslash, or too long);
    /// - a parent that is missing or is a file, or a name its directory already has;
    /// - a record not reachable from the root (a cycle, or under a dropped one).
    ///
    /// Records of a subtree deleted in steps hang under [`REAPER_ID`]: they
    /// are kept apart, for the reaper to finish.
    pub fn from_records(records: Vec<InodeRecord>, next_id: u64) -> (Self, Vec<String>) {
        let mut problems = Vec::new();
        let mut inodes = InodeMap::default();
        let root = InodeRecord {
            version: RECORD_VERSION,
            id: ROOT_ID,
            is_dir: true,
            complete: true,
            persisted: true,
            ..Default::default()
        };
        inodes.insert(ROOT_ID, Inode::new(root));
        inodes.insert(REAPER_ID, reaper::reaper_inode());
        let mut max_id = ROOT_ID;
        for rec in records {
            if rec.id == REAPER_ID {
                problems.push(format!("record {:?} claims the reaper's id {REAPER_ID}", rec.name));
                continue;
            }
            max_id = max_id.max(rec.id);
            let name_ok = !rec.name.is_empty()
                && rec.name != "."
                && rec.name != ".."
                && !rec.name.contains(['/', '\0', '\\'])
                && rec.name.len() <= path::MAX_NAME_BYTES;
            if rec.id == ROOT_ID {
                problems.push(format!("record {:?} claims the root's id", rec.name));
            } else if !name_ok {
                problems.push(format!("inode {} has the name {:?}, which no entry may have", rec.id, rec.name));
            } else {
                match inodes.entry(rec.id) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        problems.push(format!("inode {} is recorded twice", rec.id));
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(Inode::new(rec));
                    }
                }
            }
        }
        let mut links: Vec<(u64, u64, String)> = inodes
            .values()
            .filter(|i| i.rec.id != ROOT_ID && i.rec.id != REAPER_ID)
            .map(|i| (i.rec.parent_id, i.rec.id, i.rec.name.clone()))
            .collect();
        // In id order, so which of two same-named entries stays is the same every start.
        links.sort_unstable_by_key(|(_, id, _)| *id);
        for (parent, id, name) in links {
            let taken = match inodes.get_mut(&parent) {
                Some(p) if p.is_dir() => match p.children.entry(name.clone()) {
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(id);
                        continue;
                    }
                    std::collections::btree_map::Entry::Occupied(o) => Some(*o.get()),
                },
                _ => None,
            };
            problems.push(match taken {
                Some(other) => format!("inode {id} is named {name:?} in directory {parent}, as inode {other} is"),
                None => format!("inode {id} ({name:?}) has no directory {parent} to be in"),
            });
            inodes.remove(&id);
        }
        // Drop what is not reachable from the root (cycles, and what hung
        // under a dropped record).
        let mut reachable = foldhash::HashSet::default();
        let mut stack = vec![ROOT_ID, REAPER_ID];
        while let Some(id) = stack.pop() {
            if let Some(i) = inodes.get(&id)
                && reachable.insert(id)
            {
                stack.extend(i.children.values().copied());
            }
        }
        // A consistent journal (the usual case) has nothing to drop: the
        // passes below cost a tenth of a million-file start.
        if reachable.len() < inodes.len() {
            let mut unreachable: Vec<u64> = inodes.keys().copied().filter(|id| !reachable.contains(id)).collect();
            unreachable.sort_unstable();
            for id in &unreachable {
                problems.push(format!("inode {id} is not reachable from the root"));
            }
            inodes.retain(|id, _| reachable.contains(id));
        }
        if !problems.is_empty() {
            // A dropped record may still be named as a child: forget such names.
            let kept: foldhash::HashSet<u64> = inodes.keys().copied().collect();
            for i in inodes.values_mut() {
                i.children.retain(|_, c| kept.contains(c));
            }
        }
        let mut ns = Namespace { inodes, next_id: next_id.max(max_id + 1), doomed: 0, doomed_tops: BTreeSet::new() };
        ns.adopt_doomed();
        (ns, problems)
    }

    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    pub fn len(&self) -> usize {
        self.inodes.len() - self.doomed
    }

    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    pub fn get(&self, id: u64) -> Option<&Inode> {
        self.inodes.get(&id).filter(|i| !i.doomed)
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Inode> {
        self.inodes.get_mut(&id).filter(|i| !i.doomed)
    }

    pub fn lookup(&self, comps: &[&str]) -> Option<u64> {
        let mut id = ROOT_ID;
        for c in comps {
            id = *self.inodes.get(&id)?.children.get(*c)?;
        }
        Some(id)
    }

    pub fn path_of(&self, mut id: u64) -> String {
        let mut parts = Vec::new();
        while id != ROOT_ID {
            let Some(i) = self.inodes.get(&id) else { break };
            parts.push(i.rec.name.as_str());
            id = i.rec.parent_id;
        }
        parts.reverse();
        path::join(&parts)
    }

    pub fn children(&self, id: u64) -> Vec<(String, u64)> {
        self.get(id).map(|i| i.children.iter().map(|(n, c)| (n.clone(), *c)).collect()).unwrap_or_default()
    }

    /// A page of a directory's children in name order: those after
    /// `start_after` ("": from the first), at most `limit` (0: all), and
    /// whether more follow.
    pub fn children_page(&self, id: u64, start_after: &str, limit: usize) -> (Vec<(String, u64)>, bool) {
        use std::ops::Bound;
        let Some(i) = self.get(id) else {
            return (Vec::new(), false);
        };
        let from = if start_after.is_empty() { Bound::Unbounded } else { Bound::Excluded(start_after.to_string()) };
        let mut it = i.children.range((from, Bound::Unbounded)).map(|(n, c)| (n.clone(), *c));
        if limit == 0 {
            return (it.collect(), false);
        }
        let page: Vec<_> = it.by_ref().take(limit).collect();
        let more = it.next().is_some();
        (page, more)
    }

    /// Adds `name` under directory `parent`.
    pub fn add(&mut self, parent: u64, name: &str, new: NewInode) -> Result<(u64, JournalOp)> {
        let p = self.get(parent).ok_or_else(|| ThawError::not_found("parent directory vanished"))?;
        if !p.is_dir() {
            return Err(ThawError::not_dir(format!("{} is not a directory", self.path_of(parent))));
        }
        if p.children.contains_key(name) {
            return Err(ThawError::already_exists(format!(
                "{} already exists",
                path::join(&[self.path_of(parent).trim_start_matches('/'), name])
            )));
        }
        let id = self.next_id;
        self.next_id += 1;
        let rec = InodeRecord {
            version: RECORD_VERSION,
            id,
            parent_id: parent,
            name: name.to_string(),
            is_dir: new.is_dir,
            length: new.length,
            block_size: new.block_size,
            complete: new.complete,
            persisted: new.persisted,
            write_type: new.write_type as i32,
            mtime_ms: now_ms(),
            ufs_mtime_ms: new.ufs_mtime_ms,
            temporary: new.temporary,
            persist_requested: false,
            lineage_id: new.lineage_id,
            block_crc32: Vec::new(),
            writer: new.writer,
            owner: new.owner,
            group: new.group,
            mode: new.mode,
        };
        self.inodes.get_mut(&parent).expect("checked").children.insert(name.to_string(), id);
        self.inodes.insert(id, Inode::new(rec.clone()));
        Ok((id, JournalOp::Put(rec)))
    }

    /// Changes an inode's record.
    pub fn update(&mut self, id: u64, f: impl FnOnce(&mut InodeRecord)) -> Result<JournalOp> {
        let i = self.get_mut(id).ok_or_else(|| ThawError::not_found(format!("inode {id} is gone")))?;
        f(&mut i.rec);
        i.rec.mtime_ms = now_ms();
        Ok(JournalOp::Put(i.rec.clone()))
    }

    /// Removes `id` and everything under it. Returns the ids of removed files.
    pub fn remove(&mut self, id: u64) -> (Vec<u64>, Vec<JournalOp>) {
        let mut files = Vec::new();
        let mut ops = Vec::new();
        if id == ROOT_ID || self.get(id).is_none() {
            return (files, ops);
        }
        if let Some(i) = self.inodes.get(&id) {
            let (parent, name) = (i.rec.parent_id, i.rec.name.clone());
            if let Some(p) = self.inodes.get_mut(&parent) {
                p.children.remove(&name);
            }
        }
        let mut stack = vec![id];
        while let Some(cur) = stack.pop() {
            if let Some(i) = self.inodes.remove(&cur) {
                if !i.is_dir() {
                    files.push(cur);
                }
                stack.extend(i.children.values().copied());
                ops.push(JournalOp::Delete(cur));
            }
        }
        (files, ops)
    }

    /// Moves `id` to `name` under `new_parent`. The caller checked the target is free.
    pub fn rename(&mut self, id: u64, new_parent: u64, name: &str) -> Result<JournalOp> {
        if self.get(id).is_none() {
            return Err(ThawError::not_found(format!("inode {id} is gone")));
        }
        if !self.get(new_parent).is_some_and(|p| p.is_dir()) {
            return Err(ThawError::not_dir("rename target's parent is not a directory"));
        }
        // A directory may not move into its own subtree. (A live inode's
        // parents are live, up to the root.)
        let mut cur = new_parent;
        loop {
            if cur == id {
                return Err(ThawError::invalid(format!("cannot move {} into itself", self.path_of(id))));
            }
            if cur == ROOT_ID {
                break;
            }
            cur = self.inodes[&cur].rec.parent_id;
        }
        if self.inodes[&new_parent].children.contains_key(name) {
            return Err(ThawError::already_exists(format!("{} already exists", self.path_of(new_parent))));
        }
        let (old_parent, old_name) = {
            let i = &self.inodes[&id];
            (i.rec.parent_id, i.rec.name.clone())
        };
        self.inodes.get_mut(&old_parent).expect("parent").children.remove(&old_name);
        self.inodes.get_mut(&new_parent).expect("checked").children.insert(name.to_string(), id);
        self.update(id, |r| {
            r.parent_id = new_parent;
            r.name = name.to_string();
        })
    }

    /// Every file id in the subtree of `id` (itself if a file).
    pub fn files_under(&self, id: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut stack = vec![id];
        while let Some(cur) = stack.pop() {
            if let Some(i) = self.get(cur) {
                if i.is_dir() {
                    stack.extend(i.children.values().copied());
                } else {
                    out.push(cur);
                }
            }
        }
        out
    }

    /// Totals of the subtree of `id`, over at most `budget` of its files;
    /// `in_memory(file_id, block_index)` says whether a block has a replica
    /// in memory. A file still being written has no blocks yet.
    pub fn totals(&self, id: u64, budget: usize, in_memory: impl Fn(u64, u64) -> bool) -> DirTotals {
        let files = self.files_under(id);
        let mut t = DirTotals { whole: files.len() <= budget, ..Default::default() };
        for r in files.iter().take(budget).filter_map(|f| self.get(*f)).map(|i| &i.rec) {
            t.files += 1;
            t.bytes += r.length;
            let n = if r.complete { block_count(r.length, r.block_size) } else { 0 };
            t.blocks += n;
            t.in_memory_bytes +=
                (0..n).filter(|&b| in_memory(r.id, b)).map(|b| block_length(r.length, r.block_size, b)).sum::<u64>();
        }
        t
    }

    pub fn file_count(&self) -> usize {
        self.inodes.values().filter(|i| !i.is_dir() && !i.doomed).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    pub(super) fn dir() -> NewInode {
        NewInode { is_dir: true, ..Default::default() }
    }

    pub(super) fn file(len: u64) -> NewInode {
        NewInode { length: len, block_size: 4, complete: true, ..Default::default() }
    }

    /// Replays ops onto records, as the journal would.
    pub(super) fn replay(records: &mut HashMap<u64, InodeRecord>, ops: &[JournalOp]) {
        for op in ops {
            match op {
                JournalOp::Put(r) => {
                    records.insert(r.id, r.clone());
                }
                JournalOp::Delete(id) => {
                    records.remove(id);
                }
                JournalOp::PutLineage(_)
                | JournalOp::DeleteLineage(_)
                | JournalOp::PutS3Key(_)
                | JournalOp::DeleteS3Key(_) => unreachable!("the namespace journals inodes"),
            }
        }
    }

    #[test]
    fn totals_sum_a_subtree_within_a_budget_of_files() {
        let mut ns = Namespace::from_records(vec![], 0).0;
        let (a, _) = ns.add(ROOT_ID, "a", dir()).unwrap();
        let (b, _) = ns.add(a, "b", dir()).unwrap();
        // Block size 4: 10 bytes are 3 blocks (4, 4, 2), 4 bytes one.
        let (f, _) = ns.add(a, "f", file(10)).unwrap();
        ns.add(b, "g", file(4)).unwrap();
        ns.add(b, "writing", NewInode { length: 0, block_size: 4, complete: false, ..Default::default() }).unwrap();
        // In memory: f's last block (2 bytes) only.
        let mem = |file: u64, index: u64| file == f && index == 2;
        let t = ns.totals(a, 100, mem);
        assert_eq!(t, DirTotals { files: 3, bytes: 14, blocks: 4, in_memory_bytes: 2, whole: true });
        assert_eq!(
            ns.totals(b, 100, mem),
            DirTotals { files: 2, bytes: 4, blocks: 1, in_memory_bytes: 0, whole: true }
        );
        // A budget of one file: a lower bound, said to be one.
        let t = ns.totals(a, 1, mem);
        assert_eq!((t.files, t.whole), (1, false));
        // An empty directory.
        let (e, _) = ns.add(ROOT_ID, "e", dir()).unwrap();
        assert_eq!(ns.totals(e, 0, mem), DirTotals { whole: true, ..Default::default() });
    }

    #[test]
    fn tree_ops_and_journal_replay_agree() {
        let mut ns = Namespace::from_records(vec![], 0).0;
        let mut journal = HashMap::new();
        let (a, op) = ns.add(ROOT_ID, "a", dir()).unwrap();
        replay(&mut journal, &[op]);
        let (b, op) = ns.add(a, "b", dir()).unwrap();
        replay(&mut journal, &[op]);
        let (f, op) = ns.add(b, "f", file(10)).unwrap();
        replay(&mut journal, &[op]);
        assert!(ns.add(b, "f", file(1)).is_err());
        assert!(ns.add(f, "x", file(1)).unwrap_err().kind == thaw_common::ErrorKind::NotADirectory);
        assert_eq!(ns.lookup(&["a", "b", "f"]), Some(f));
        assert_eq!(ns.path_of(f), "/a/b/f");
        // Moving a directory into itself is refused.
        assert!(ns.rename(a, b, "loop").is_err());
        let op = ns.rename(b, ROOT_ID, "c").unwrap();
        replay(&mut journal, &[op]);
        assert_eq!(ns.path_of(f), "/c/f");
        assert_eq!(ns.lookup(&["a", "b"]), None);
        let (files, ops) = ns.remove(a);
        assert!(files.is_empty());
        replay(&mut journal, &ops);
        let next = ns.next_id();
        let (back, problems) = Namespace::from_records(journal.values().cloned().collect(), next);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(back.lookup(&["c", "f"]), Some(f));
        assert_eq!(back.lookup(&["a"]), None);
        assert_eq!(back.len(), ns.len());
        // Ids are never reused after a reload.
        assert!(back.next_id() > f);
    }

    #[test]
    fn orphans_are_dropped_on_load() {
        let rec = |id, parent| InodeRecord {
            version: 1,
            id,
            parent_id: parent,
            name: format!("n{id}"),
            ..Default::default()
        };
        let (ns, problems) = Namespace::from_records(vec![rec(5, 99), rec(6, 5)], 0);
        assert_eq!(ns.len(), 1);
        assert!(ns.next_id() > 6);
        assert_eq!(
            problems,
            ["inode 5 (\"n5\") has no directory 99 to be in", "inode 6 (\"n6\") has no directory 5 to be in"]
        );
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;
    use std::collections::HashMap;

    #[derive(Debug, Clone)]
    enum Op {
        Mkdir(usize, u8),
        Create(usize, u8),
        Rename(usize, usize, u8),
        Remove(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..64usize, 0..6u8).prop_map(|(p, n)| Op::Mkdir(p, n)),
            (0..64usize, 0..6u8).prop_map(|(p, n)| Op::Create(p, n)),
            (0..64usize, 0..64usize, 0..6u8).prop_map(|(a, b, n)| Op::Rename(a, b, n)),
            (0..64usize).prop_map(Op::Remove),
        ]
    }

    /// Every path in the tree, sorted.
    fn paths(ns: &Namespace) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        let mut stack = vec![ROOT_ID];
        while let Some(id) = stack.pop() {
            for (_, c) in ns.children(id) {
                out.push((ns.path_of(c), ns.get(c).unwrap().is_dir()));
                stack.push(c);
            }
        }
        out.sort();
        out
    }

    proptest! {
        /// Whatever sequence of operations runs (including refused ones), the
        /// journal ops they return rebuild exactly the live tree, and no id is
        /// ever handed out twice.
        #[test]
        fn journal_replay_rebuilds_the_tree(ops in proptest::collection::vec(op(), 1..60)) {
            let mut ns = Namespace::from_records(vec![], 0).0;
            let mut journal: HashMap<u64, InodeRecord> = HashMap::new();
            let mut issued = std::collections::HashSet::new();
            let pick = |ns: &Namespace, i: usize| {
                let mut ids: Vec<u64> = ns.inodes.keys().copied().collect();
                ids.sort();
                ids[i % ids.len()]
            };
            for op in ops {
                let result: Result<Vec<JournalOp>> = match op {
                    Op::Mkdir(p, n) => {
                        let parent = pick(&ns, p);
                        ns.add(parent, &format!("d{n}"), NewInode { is_dir: true, ..Default::default() }).map(|(id, op)| {
                            assert!(issued.insert(id), "id {id} issued twice");
                            vec![op]
                        })
                    }
                    Op::Create(p, n) => {
                        let parent = pick(&ns, p);
                        ns.add(parent, &format!("f{n}"), NewInode::default()).map(|(id, op)| {
                            assert!(issued.insert(id), "id {id} issued twice");
                            vec![op]
                        })
                    }
                    Op::Rename(a, b, n) => {
                        let (id, to) = (pick(&ns, a), pick(&ns, b));
                        if id == ROOT_ID { continue; }
                        ns.rename(id, to, &format!("r{n}")).map(|op| vec![op])
                    }
                    Op::Remove(a) => Ok(ns.remove(pick(&ns, a)).1),
                };
                if let Ok(ops) = result {
                    for op in ops {
                        match op {
                            JournalOp::Put(r) => { journal.insert(r.id, r); }
                            JournalOp::Delete(id) => { journal.remove(&id); }
                            JournalOp::PutLineage(_) | JournalOp::DeleteLineage(_) | JournalOp::PutS3Key(_) | JournalOp::DeleteS3Key(_) => unreachable!(),
                        }
                    }
                }
            }
            let (back, problems) = Namespace::from_records(journal.into_values().collect(), ns.next_id());
            prop_assert!(problems.is_empty(), "{:?}", problems);
            prop_assert_eq!(paths(&back), paths(&ns));
            prop_assert!(back.next_id() >= ns.next_id());
        }
    }
}

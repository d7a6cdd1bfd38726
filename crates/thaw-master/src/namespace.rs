//! The namespace tree: pure state and decisions, no I/O. Every mutation returns
//! the journal ops that make it durable; the caller commits them before answering.

use std::collections::BTreeSet;

use thaw_common::ids::{block_count, block_length};
use thaw_common::proto::{InodeRecord, WriteType};
use thaw_common::{Result, ThawError, now_ms, path};

use crate::journal::{JournalOp, RECORD_VERSION};

mod inode;
#[cfg(test)]
mod model_tests;
mod reaper;
use inode::Owners;
pub use inode::{Children, Inode};
pub use reaper::REAPER_ID;

pub const ROOT_ID: u64 = 1;

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
    owners: Owners,
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
    pub fn from_records(records: impl IntoIterator<Item = InodeRecord>, next_id: u64) -> (Self, Vec<String>) {
        let mut b = Builder::default();
        records.into_iter().for_each(|r| b.push(r));
        let built = b.finish(next_id);
        (built.ns, built.problems)
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
        self.inodes.get(&id).filter(|i| !i.doomed())
    }

    /// The journal record of `id`, made from its inode.
    pub fn record(&self, id: u64) -> Option<InodeRecord> {
        self.get(id).map(|i| i.record(id))
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Inode> {
        self.inodes.get_mut(&id).filter(|i| !i.doomed())
    }

    fn children_of_mut(&mut self, id: u64) -> Option<&mut Children> {
        self.inodes.get_mut(&id).and_then(|i| i.children_mut())
    }

    pub fn lookup(&self, comps: &[&str]) -> Option<u64> {
        let mut id = ROOT_ID;
        for c in comps {
            id = self.inodes.get(&id)?.child(c)?;
        }
        Some(id)
    }

    pub fn path_of(&self, mut id: u64) -> String {
        let mut parts = Vec::new();
        while id != ROOT_ID {
            let Some(i) = self.inodes.get(&id) else { break };
            parts.push(i.name());
            id = i.parent_id();
        }
        parts.reverse();
        path::join(&parts)
    }

    pub fn children(&self, id: u64) -> Vec<(String, u64)> {
        self.get(id)
            .and_then(|i| i.children())
            .map(|c| c.iter().map(|(n, c)| (n.as_str().to_owned(), *c)).collect())
            .unwrap_or_default()
    }

    /// A page of a directory's children in name order: those after
    /// `start_after` ("": from the first), at most `limit` (0: all), and
    /// whether more follow.
    pub fn children_page(&self, id: u64, start_after: &str, limit: usize) -> (Vec<(String, u64)>, bool) {
        use std::ops::Bound;
        let Some(c) = self.get(id).and_then(|i| i.children()) else {
            return (Vec::new(), false);
        };
        let from = if start_after.is_empty() { Bound::Unbounded } else { Bound::Excluded(start_after) };
        let mut it = c.range::<str, _>((from, Bound::Unbounded)).map(|(n, c)| (n.as_str().to_owned(), *c));
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
        let Some(siblings) = p.children() else {
            return Err(ThawError::not_dir(format!("{} is not a directory", self.path_of(parent))));
        };
        if siblings.contains_key(name) {
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
        self.children_of_mut(parent).expect("checked").insert(name.into(), id);
        self.inodes.insert(id, Inode::from_record(rec.clone(), &mut self.owners));
        Ok((id, JournalOp::Put(rec)))
    }

    /// Changes an inode's record.
    pub fn update(&mut self, id: u64, f: impl FnOnce(&mut InodeRecord)) -> Result<JournalOp> {
        let mut rec = self.record(id).ok_or_else(|| ThawError::not_found(format!("inode {id} is gone")))?;
        f(&mut rec);
        rec.id = id;
        rec.mtime_ms = now_ms();
        let mut fresh = Inode::from_record(rec.clone(), &mut self.owners);
        let old = self.get_mut(id).expect("checked");
        // Whether a directory stays one is the caller's promise; its children stay with it.
        let children = old.take_children();
        if let Some(c) = fresh.children_mut() {
            *c = children;
        }
        *old = fresh;
        Ok(JournalOp::Put(rec))
    }

    /// Removes `id` and everything under it. Returns the ids of removed files.
    pub fn remove(&mut self, id: u64) -> (Vec<u64>, Vec<JournalOp>) {
        let mut files = Vec::new();
        let mut ops = Vec::new();
        if id == ROOT_ID || self.get(id).is_none() {
            return (files, ops);
        }
        if let Some(i) = self.inodes.get(&id) {
            let (parent, name) = (i.parent_id(), compact_str::CompactString::from(i.name()));
            if let Some(c) = self.children_of_mut(parent) {
                c.remove(&name);
            }
        }
        let mut stack = vec![id];
        while let Some(cur) = stack.pop() {
            if let Some(i) = self.inodes.remove(&cur) {
                if !i.is_dir() {
                    files.push(cur);
                }
                stack.extend(i.child_ids());
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
            cur = self.inodes[&cur].parent_id();
        }
        if self.inodes[&new_parent].child(name).is_some() {
            return Err(ThawError::already_exists(format!("{} already exists", self.path_of(new_parent))));
        }
        let (old_parent, old_name) = {
            let i = &self.inodes[&id];
            (i.parent_id(), compact_str::CompactString::from(i.name()))
        };
        self.children_of_mut(old_parent).expect("parent").remove(&old_name);
        self.children_of_mut(new_parent).expect("checked").insert(name.into(), id);
        self.inodes.get_mut(&id).expect("checked").relink(new_parent, name);
        self.update(id, |_| {})
    }

    /// Every file id in the subtree of `id` (itself if a file).
    pub fn files_under(&self, id: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut stack = vec![id];
        while let Some(cur) = stack.pop() {
            if let Some(i) = self.get(cur) {
                if i.is_dir() {
                    stack.extend(i.child_ids());
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
        for (f, r) in files.iter().take(budget).filter_map(|f| Some((*f, self.get(*f)?))) {
            t.files += 1;
            t.bytes += r.length();
            let n = if r.complete() { block_count(r.length(), r.block_size()) } else { 0 };
            t.blocks += n;
            t.in_memory_bytes +=
                (0..n).filter(|&b| in_memory(f, b)).map(|b| block_length(r.length(), r.block_size(), b)).sum::<u64>();
        }
        t
    }

    /// Every live file, in no order (the map's: cheaper than a walk of the tree).
    pub fn files(&self) -> impl Iterator<Item = (u64, &Inode)> {
        self.inodes.iter().filter(|(_, i)| !i.is_dir() && !i.doomed()).map(|(id, i)| (*id, i))
    }

    pub fn file_count(&self) -> usize {
        self.inodes.values().filter(|i| !i.is_dir() && !i.doomed()).count()
    }
}

/// A namespace made from journal records pushed one at a time, as they are
/// read ([`Namespace::from_records`] says what it checks): a start never holds
/// every record and the tree made of them at once.
pub struct Builder {
    inodes: InodeMap,
    owners: Owners,
    problems: Vec<String>,
    dropped: Vec<u64>,
    max_id: u64,
}

/// What [`Builder::finish`] made.
pub struct Built {
    pub ns: Namespace,
    /// What did not fit, in words.
    pub problems: Vec<String>,
    /// The journal ids of the records dropped (a salvage deletes them).
    pub dropped: Vec<u64>,
}

impl Default for Builder {
    fn default() -> Self {
        let mut owners = Owners::default();
        let mut inodes = InodeMap::default();
        let root = InodeRecord {
            version: RECORD_VERSION,
            id: ROOT_ID,
            is_dir: true,
            complete: true,
            persisted: true,
            ..Default::default()
        };
        inodes.insert(ROOT_ID, Inode::from_record(root, &mut owners));
        inodes.insert(REAPER_ID, reaper::reaper_inode(&mut owners));
        Builder { inodes, owners, problems: Vec::new(), dropped: Vec::new(), max_id: ROOT_ID }
    }
}

impl Builder {
    /// Room for `n` more records.
    pub fn reserve(&mut self, n: usize) {
        self.inodes.reserve(n);
    }

    pub fn push(&mut self, rec: InodeRecord) {
        if rec.id == REAPER_ID {
            self.problems.push(format!("record {:?} claims the reaper's id {REAPER_ID}", rec.name));
            self.dropped.push(rec.id);
            return;
        }
        self.max_id = self.max_id.max(rec.id);
        let name_ok = !rec.name.is_empty()
            && rec.name != "."
            && rec.name != ".."
            && !rec.name.contains(['/', '\0', '\\'])
            && rec.name.len() <= path::MAX_NAME_BYTES;
        if rec.id == ROOT_ID {
            self.problems.push(format!("record {:?} claims the root's id", rec.name));
            self.dropped.push(rec.id);
        } else if !name_ok {
            self.problems.push(format!("inode {} has the name {:?}, which no entry may have", rec.id, rec.name));
            self.dropped.push(rec.id);
        } else {
            match self.inodes.entry(rec.id) {
                std::collections::hash_map::Entry::Occupied(_) => {
                    // (Journal ids are keys: only a hand-made list repeats one.)
                    self.problems.push(format!("inode {} is recorded twice", rec.id));
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(Inode::from_record(rec, &mut self.owners));
                }
            }
        }
    }

    /// Links the records into a tree under the root, dropping what does not
    /// fit; `next_id` is the journal's next unused id.
    pub fn finish(self, next_id: u64) -> Built {
        let Builder { mut inodes, owners, mut problems, mut dropped, max_id } = self;
        // Each directory's children at once: the links sorted by parent, name
        // and id, every child map built from its sorted run (a bulk build,
        // where a million inserts one by one were most of a start). Of two
        // same-named entries the lower id stays, the same every start.
        let mut links: Vec<(u64, compact_str::CompactString, u64)> = inodes
            .iter()
            .filter(|(id, _)| **id != ROOT_ID && **id != REAPER_ID)
            .map(|(id, i)| (i.parent_id(), compact_str::CompactString::from(i.name()), *id))
            .collect();
        links.sort_unstable();
        let mut unlinked: Vec<(u64, String)> = Vec::new();
        for run in links.chunk_by(|a, b| a.0 == b.0) {
            let parent = run[0].0;
            let Some(children) = inodes.get_mut(&parent).and_then(|p| p.children_mut()) else {
                for (_, name, id) in run {
                    unlinked.push((*id, format!("inode {id} ({name:?}) has no directory {parent} to be in")));
                }
                continue;
            };
            let mut kept: Vec<(compact_str::CompactString, u64)> = Vec::with_capacity(run.len());
            for (_, name, id) in run {
                match kept.last() {
                    Some((n, other)) if n == name => unlinked.push((
                        *id,
                        format!("inode {id} is named {name:?} in directory {parent}, as inode {other} is"),
                    )),
                    _ => kept.push((name.clone(), *id)),
                }
            }
            *children = kept.into_iter().collect();
        }
        drop(links);
        unlinked.sort_unstable_by_key(|(id, _)| *id);
        for (id, why) in unlinked {
            problems.push(why);
            inodes.remove(&id);
            dropped.push(id);
        }
        // Drop what is not reachable from the root (cycles, and what hung
        // under a dropped record).
        // Every inode is a child of one directory at most, so a walk from the
        // root meets each inode it reaches once and cannot loop (an inode on a
        // cycle has its parent on the cycle, never a path from the root): a
        // count says whether anything is left out, and only then is a set of
        // the reached ones made.
        let walk = |mut seen: Option<&mut foldhash::HashSet<u64>>| {
            let (mut n, mut stack) = (0usize, vec![ROOT_ID, REAPER_ID]);
            while let Some(id) = stack.pop() {
                if let Some(i) = inodes.get(&id) {
                    n += 1;
                    if let Some(s) = seen.as_deref_mut() {
                        s.insert(id);
                    }
                    stack.extend(i.child_ids());
                }
            }
            n
        };
        // A consistent journal (the usual case) has nothing to drop: the
        // passes below cost a tenth of a million-file start.
        if walk(None) < inodes.len() {
            let mut reachable = foldhash::HashSet::default();
            walk(Some(&mut reachable));
            let mut unreachable: Vec<u64> = inodes.keys().copied().filter(|id| !reachable.contains(id)).collect();
            unreachable.sort_unstable();
            dropped.extend(&unreachable);
            for id in &unreachable {
                problems.push(format!("inode {id} is not reachable from the root"));
            }
            inodes.retain(|id, _| reachable.contains(id));
        }
        if !problems.is_empty() {
            // A dropped record may still be named as a child: forget such names.
            let kept: foldhash::HashSet<u64> = inodes.keys().copied().collect();
            for c in inodes.values_mut().filter_map(|i| i.children_mut()) {
                c.retain(|_, c| kept.contains(c));
            }
        }
        let mut ns =
            Namespace { inodes, next_id: next_id.max(max_id + 1), doomed: 0, doomed_tops: BTreeSet::new(), owners };
        ns.adopt_doomed();
        Built { ns, problems, dropped }
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
        let (back, problems) = Namespace::from_records(journal.values().cloned(), next);
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
            let (back, problems) = Namespace::from_records(journal.into_values(), ns.next_id());
            prop_assert!(problems.is_empty(), "{:?}", problems);
            prop_assert_eq!(paths(&back), paths(&ns));
            prop_assert!(back.next_id() >= ns.next_id());
        }
    }
}

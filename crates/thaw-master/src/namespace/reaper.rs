//! Deleting a large tree in steps. A recursive delete used to remove every
//! record of the subtree in one journal transaction under the master's write
//! lock: a million files meant a transaction of a million deletes, that many ops
//! held in memory (a JournalOp each, with the file's path for lineage), and a
//! master that answered nobody until it was written.
//!
//! Now a large delete *detaches* the subtree: its top moves, in one small journal
//! record, under the reaper (a parent id no inode has, [`REAPER_ID`], named by
//! its own id), and its inodes are marked in place (no copy: the delete needs no
//! memory but a list of its files' ids), so every lookup, listing and worker
//! report sees them gone at once, and the name is free for a new entry.
//! The reaper then removes their records in batches, leaves first, one journal
//! transaction each, releasing the lock between batches (HDFS's NameNode does
//! the same: the delete edit names only the top, and the blocks are freed
//! incrementally afterwards). A master killed midway finds the rest under the
//! reaper's id at its next start and goes on; since leaves go first, what is left
//! is always a tree, and nothing outside it is touched.

use std::collections::btree_map;

use super::*;

/// The parent id the journal gives a detached subtree's top until its last
/// record is removed. No inode has it: ids count up from the root's.
pub const REAPER_ID: u64 = u64::MAX;

impl Namespace {
    /// Whether `id`'s subtree holds more than `max` inodes (counts at most
    /// `max + 1` of them).
    pub fn larger_than(&self, id: u64, max: usize) -> bool {
        let mut seen = 0usize;
        let mut stack = vec![id];
        while let Some(cur) = stack.pop() {
            if let Some(i) = self.inodes.get(&cur) {
                seen += 1;
                if seen > max {
                    return true;
                }
                stack.extend(i.child_ids());
            }
        }
        false
    }

    /// Takes `id`'s subtree out of the namespace, to be removed by [`Self::reap`].
    /// Returns its files and the one op that journals the move.
    pub fn detach(&mut self, id: u64) -> Result<(Vec<u64>, JournalOp)> {
        if id == ROOT_ID {
            return Err(ThawError::invalid("refusing to delete /"));
        }
        let i = self.get(id).ok_or_else(|| ThawError::not_found(format!("inode {id} is gone")))?;
        let (parent, name) = (i.parent_id(), compact_str::CompactString::from(i.name()));
        if let Some(c) = self.children_of_mut(parent) {
            c.remove(&name);
        }
        let files = self.mark_doomed(id);
        let top = self.inodes.get_mut(&id).expect("marked above");
        top.relink(REAPER_ID, &id.to_string());
        self.doomed_tops.insert(id);
        Ok((files, JournalOp::Put(top.record(id))))
    }

    /// Marks `id`'s subtree doomed; returns its files.
    fn mark_doomed(&mut self, id: u64) -> Vec<u64> {
        let mut files = Vec::new();
        let mut stack = vec![id];
        while let Some(cur) = stack.pop() {
            if let Some(i) = self.inodes.get_mut(&cur)
                && !i.doomed()
            {
                i.set_doomed();
                self.doomed += 1;
                if !i.is_dir() {
                    files.push(cur);
                }
                stack.extend(i.child_ids());
            }
        }
        files
    }

    /// Removes up to `max` inodes of detached subtrees, every one after all of
    /// its children (so the journal always holds whole trees), oldest delete
    /// first. Returns their journal ops; none once nothing is left.
    pub fn reap(&mut self, max: usize) -> Vec<JournalOp> {
        let mut out = Vec::new();
        for &top in &self.doomed_tops {
            if out.len() >= max.max(1) {
                break;
            }
            leaves_first(&self.inodes, top, max.max(1), &mut out);
        }
        out.into_iter()
            .filter_map(|id| {
                if !self.inodes.get(&id).is_some_and(|i| i.doomed()) {
                    return None;
                }
                let gone = self.inodes.remove(&id)?;
                self.doomed -= 1;
                if gone.parent_id() == REAPER_ID {
                    self.doomed_tops.remove(&id);
                } else if let Some(c) = self.children_of_mut(gone.parent_id()) {
                    c.remove(gone.name());
                }
                Some(JournalOp::Delete(id))
            })
            .collect()
    }

    /// Inodes detached and not yet removed.
    pub fn doomed_len(&self) -> usize {
        self.doomed
    }

    /// At a start, marks what the journal still holds under the reaper
    /// doomed, for the reaper to finish.
    pub(super) fn adopt_doomed(&mut self) {
        let Some(mut reaper) = self.inodes.remove(&REAPER_ID) else { return };
        for top in reaper.take_children().into_values() {
            self.doomed_tops.insert(top);
            self.mark_doomed(top);
        }
    }
}

/// The reaper's inode while records are loaded: a directory holding detached
/// tops, never journaled.
pub(super) fn reaper_inode(owners: &mut Owners) -> Inode {
    Inode::from_record(
        InodeRecord { version: RECORD_VERSION, id: REAPER_ID, is_dir: true, ..Default::default() },
        owners,
    )
}

/// Appends to `out` the inodes of `top`'s subtree in post-order (children
/// before their directory) until `out` holds `max`: a directory is appended
/// only once every child of it is. Walks only what it appends and the path to
/// it, so a directory of a million children costs a batch, not a million.
fn leaves_first(doomed: &InodeMap, top: u64, max: usize, out: &mut Vec<u64>) {
    // (Every inode under a doomed top is doomed: it was unlinked whole.)
    static NONE: Children = Children::new();
    fn kids(i: &Inode) -> btree_map::Values<'_, compact_str::CompactString, u64> {
        i.children().unwrap_or(&NONE).values()
    }
    let Some(t) = doomed.get(&top) else { return };
    let mut stack = vec![(top, kids(t))];
    while let Some((id, children)) = stack.last_mut() {
        if out.len() >= max {
            return;
        }
        match children.next() {
            Some(c) => match doomed.get(c) {
                Some(ci) if ci.children().is_some_and(|k| !k.is_empty()) => stack.push((*c, kids(ci))),
                Some(_) => out.push(*c),
                None => {}
            },
            None => {
                out.push(*id);
                stack.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    use crate::namespace::tests::{dir, file as sized, replay as apply};

    fn file() -> NewInode {
        sized(1)
    }

    /// A tree: `dirs` directories under /t, each with `per` files, and a
    /// file beside /t that must survive.
    fn tree(dirs: usize, per: usize) -> (Namespace, HashMap<u64, InodeRecord>, u64, u64) {
        let mut ns = Namespace::from_records(vec![], 0).0;
        let mut journal = HashMap::new();
        let (t, op) = ns.add(ROOT_ID, "t", dir()).unwrap();
        apply(&mut journal, &[op]);
        for d in 0..dirs {
            let (dd, op) = ns.add(t, &format!("d{d}"), dir()).unwrap();
            apply(&mut journal, &[op]);
            for f in 0..per {
                let (_, op) = ns.add(dd, &format!("f{f}"), file()).unwrap();
                apply(&mut journal, &[op]);
            }
        }
        let (keep, op) = ns.add(ROOT_ID, "keep", file()).unwrap();
        apply(&mut journal, &[op]);
        (ns, journal, t, keep)
    }

    #[test]
    fn a_detached_tree_is_gone_at_once_and_reaped_in_batches_leaves_first() {
        let (mut ns, mut journal, t, keep) = tree(3, 50);
        assert!(ns.larger_than(t, 100) && !ns.larger_than(t, 154));
        let (files, op) = ns.detach(t).unwrap();
        apply(&mut journal, &[op]);
        assert_eq!(files.len(), 150);
        assert_eq!(ns.lookup(&["t"]), None);
        assert!(ns.get(t).is_none() && ns.get(files[0]).is_none());
        assert_eq!(ns.doomed_len(), 154);
        // The name is free at once.
        ns.add(ROOT_ID, "t", dir()).unwrap();
        let mut batches = 0;
        loop {
            let ops = ns.reap(40);
            if ops.is_empty() {
                break;
            }
            assert!(ops.len() <= 40);
            batches += 1;
            apply(&mut journal, &ops);
            // After every batch the journal loads without a problem: what is
            // left is a tree under the reaper.
            let (back, problems) = Namespace::from_records(journal.values().cloned(), ns.next_id());
            assert!(problems.is_empty(), "{problems:?}");
            assert_eq!(back.doomed_len(), ns.doomed_len());
            assert_eq!(back.lookup(&["keep"]), Some(keep));
        }
        assert_eq!(batches, 4);
        assert_eq!(ns.doomed_len(), 0);
        assert_eq!(journal.len(), 1, "only /keep stays journaled");
    }

    #[test]
    fn a_restart_midway_finishes_the_reaping() {
        let (mut ns, mut journal, t, keep) = tree(2, 30);
        let (_, op) = ns.detach(t).unwrap();
        apply(&mut journal, &[op]);
        apply(&mut journal, &ns.reap(25));
        let (mut back, problems) = Namespace::from_records(journal.values().cloned(), ns.next_id());
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(back.doomed_len(), 63 - 25);
        assert_eq!(back.lookup(&["t"]), None);
        while !back.reap(10).is_empty() {}
        assert_eq!(back.doomed_len(), 0);
        assert_eq!(back.lookup(&["keep"]), Some(keep));
    }

    #[test]
    fn a_record_claiming_the_reaper_s_id_is_a_problem() {
        let rec = InodeRecord { id: REAPER_ID, parent_id: ROOT_ID, name: "x".into(), ..Default::default() };
        let (ns, problems) = Namespace::from_records(vec![rec], 0);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(ns.lookup(&["x"]), None);
    }

    proptest! {
        /// Any tree, any batch size: each batch is journaled whole, children
        /// before parents, and the tree is gone after at most its size in batches.
        #[test]
        fn reaping_removes_exactly_the_tree(shape in proptest::collection::vec(0usize..4, 1..40), batch in 1usize..9) {
            let mut ns = Namespace::from_records(vec![], 0).0;
            let mut journal = HashMap::new();
            let (top, op) = ns.add(ROOT_ID, "top", dir()).unwrap();
            apply(&mut journal, &[op]);
            let mut dirs = vec![top];
            for (n, kind) in shape.iter().enumerate() {
                let parent = dirs[n % dirs.len()];
                let (id, op) = ns.add(parent, &format!("e{n}"), if *kind == 0 { file() } else { dir() }).unwrap();
                apply(&mut journal, &[op]);
                if *kind != 0 {
                    dirs.push(id);
                }
            }
            let size = shape.len() + 1;
            let (_, op) = ns.detach(top).unwrap();
            apply(&mut journal, &[op]);
            let mut rounds = 0;
            loop {
                let ops = ns.reap(batch);
                if ops.is_empty() { break; }
                prop_assert!(ops.len() <= batch);
                apply(&mut journal, &ops);
                let (_, problems) = Namespace::from_records(journal.values().cloned(), ns.next_id());
                prop_assert!(problems.is_empty(), "{:?}", problems);
                rounds += 1;
                prop_assert!(rounds <= size);
            }
            prop_assert!(journal.is_empty());
        }
    }
}

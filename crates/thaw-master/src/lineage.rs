//! Lineage (Tachyon, section 2.3-2.5): for a program P that reads files A1..An and
//! writes B1..Bm, the master records (ordered input FIDs, ordered output paths,
//! P's command line, P's configuration as opaque bytes, narrow or wide) in its
//! journal before the outputs are written; each file then created at an output
//! path is tied to the entry, so any of them can be rebuilt by running P again
//! on its inputs.
//!
//! Inputs are named by file id, immutable and never reused (2.4: "in order to
//! make sure that the application's first time execution reads the same file
//! as the potential future recomputation"): a file renamed is still the same
//! input, a file replaced is not. An entry whose input is deleted or replaced
//! can no longer rebuild its outputs: it is marked broken, with the reason. An
//! entry is dropped once every output it wrote is deleted.
//!
//! Pure state; the master validates requests against the namespace and commits
//! the journal ops returned here in the same transaction as the namespace's.

use std::collections::{BTreeMap, HashMap};

use thaw_common::proto::{DependencyKind, LineageRecord};

use crate::journal::{JournalOp, RECORD_VERSION};

/// A lineage's configuration blob, at most (the program's settings, not data:
/// Tachyon, section 4 requires lineage "much smaller than the data itself").
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
/// The command line's bytes, at most.
pub const MAX_COMMAND_BYTES: usize = 64 << 10;
/// Inputs, and outputs, of one lineage, at most.
pub const MAX_FILES: usize = 100_000;

#[derive(Debug, Default)]
pub struct Lineages {
    by_id: BTreeMap<u64, LineageRecord>,
    /// Output paths not written yet: path -> (lineage, index).
    pending: HashMap<String, (u64, usize)>,
    /// Input file id -> lineages reading it.
    by_input: HashMap<u64, Vec<u64>>,
    next_id: u64,
}

impl Lineages {
    pub fn from_records(records: Vec<LineageRecord>, next_id: u64) -> Self {
        let mut l = Lineages { next_id: next_id.max(1), ..Default::default() };
        for r in records {
            l.next_id = l.next_id.max(r.id + 1);
            l.index(r);
        }
        l
    }

    fn index(&mut self, r: LineageRecord) {
        for (i, (p, f)) in r.output_paths.iter().zip(&r.output_fids).enumerate() {
            if *f == 0 {
                self.pending.insert(p.clone(), (r.id, i));
            }
        }
        for f in &r.input_fids {
            self.by_input.entry(*f).or_default().push(r.id);
        }
        self.by_id.insert(r.id, r);
    }

    pub fn get(&self, id: u64) -> Option<&LineageRecord> {
        self.by_id.get(&id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &LineageRecord> {
        self.by_id.values()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The lineage (and output index) that will own a file created at `path`.
    pub fn pending_output(&self, path: &str) -> Option<(u64, usize)> {
        self.pending.get(path).copied()
    }

    /// Records a checked entry; its id and journal op.
    pub fn submit(
        &mut self,
        input_fids: Vec<u64>,
        output_paths: Vec<String>,
        command: Vec<String>,
        config: Vec<u8>,
        kind: DependencyKind,
        now_ms: u64,
    ) -> (u64, JournalOp) {
        let id = self.next_id;
        self.next_id += 1;
        let rec = LineageRecord {
            version: RECORD_VERSION,
            id,
            input_fids,
            output_fids: vec![0; output_paths.len()],
            output_paths,
            command,
            config,
            kind: kind as i32,
            created_ms: now_ms,
            broken: String::new(),
        };
        self.index(rec.clone());
        (id, JournalOp::PutLineage(rec))
    }

    /// File `fid` was created at output `index` of lineage `id`.
    pub fn tie(&mut self, id: u64, index: usize, fid: u64) -> Option<JournalOp> {
        let rec = self.by_id.get_mut(&id)?;
        let path = rec.output_paths.get(index)?.clone();
        rec.output_fids[index] = fid;
        self.pending.remove(&path);
        Some(JournalOp::PutLineage(rec.clone()))
    }

    /// Whether removing file `fid`, written under `lineage` (0: none), changes
    /// any entry: only such files need to be passed to [`Self::files_removed`].
    pub fn concerns(&self, fid: u64, lineage: u64) -> bool {
        lineage != 0 || self.by_input.contains_key(&fid)
    }

    /// Files are being removed from the namespace: `(fid, lineage it was written
    /// under, complete, path)`. Entries reading one of them break; an output
    /// removed before it was complete (a failed write) is pending again, so a
    /// rerun ties its new file; entries left with no output are dropped.
    /// `exists` says whether a file id is still in the namespace (after the
    /// removal).
    pub fn files_removed(
        &mut self,
        files: &[(u64, u64, bool, String)],
        exists: &dyn Fn(u64) -> bool,
    ) -> Vec<JournalOp> {
        let mut changed: BTreeMap<u64, ()> = BTreeMap::new();
        for (fid, lineage, complete, path) in files {
            for id in self.by_input.get(fid).cloned().unwrap_or_default() {
                if let Some(r) = self.by_id.get_mut(&id)
                    && r.broken.is_empty()
                {
                    r.broken = format!("input {path} (FID {fid}) was deleted or replaced");
                    changed.insert(id, ());
                }
            }
            if *lineage != 0
                && !complete
                && let Some(r) = self.by_id.get_mut(lineage)
                && let Some(i) = r.output_fids.iter().position(|f| f == fid)
            {
                r.output_fids[i] = 0;
                self.pending.insert(r.output_paths[i].clone(), (*lineage, i));
                changed.insert(*lineage, ());
            }
            if *lineage != 0 {
                changed.insert(*lineage, ());
            }
        }
        let mut ops = Vec::new();
        for id in changed.into_keys() {
            let Some(r) = self.by_id.get(&id) else { continue };
            let written_all_gone = r.output_fids.iter().all(|f| *f != 0 && !exists(*f));
            if written_all_gone {
                let r = self.by_id.remove(&id).expect("present");
                for f in &r.input_fids {
                    if let Some(v) = self.by_input.get_mut(f) {
                        v.retain(|x| *x != id);
                    }
                }
                ops.push(JournalOp::DeleteLineage(id));
            } else {
                ops.push(JournalOp::PutLineage(r.clone()));
            }
        }
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(l: &mut Lineages, inputs: &[u64], outputs: &[&str]) -> u64 {
        let outs = outputs.iter().map(|s| s.to_string()).collect();
        l.submit(inputs.to_vec(), outs, vec!["true".into()], vec![], DependencyKind::Wide, 0).0
    }

    #[test]
    fn outputs_tie_once_and_a_failed_write_leaves_its_output_pending_again() {
        let mut l = Lineages::from_records(vec![], 1);
        let id = one(&mut l, &[2, 3], &["/o/a", "/o/b"]);
        assert_eq!(l.pending_output("/o/b"), Some((id, 1)));
        assert!(l.tie(id, 1, 10).is_some());
        assert_eq!(l.pending_output("/o/b"), None);
        // The write of /o/b failed: its incomplete file is removed.
        let ops = l.files_removed(&[(10, id, false, "/o/b".into())], &|_| false);
        assert_eq!(ops.len(), 1);
        assert_eq!(l.pending_output("/o/b"), Some((id, 1)));
        assert_eq!(l.get(id).unwrap().output_fids, vec![0, 0]);
    }

    #[test]
    fn a_deleted_input_breaks_its_readers_and_deleted_outputs_drop_the_entry() {
        let mut l = Lineages::from_records(vec![], 1);
        let a = one(&mut l, &[2], &["/x"]);
        let b = one(&mut l, &[2, 5], &["/y"]);
        l.tie(a, 0, 20);
        l.tie(b, 0, 21);
        let ops = l.files_removed(&[(2, 0, true, "/in".into())], &|_| true);
        assert_eq!(ops.len(), 2);
        for id in [a, b] {
            assert_eq!(l.get(id).unwrap().broken, "input /in (FID 2) was deleted or replaced");
        }
        // Both outputs of `a` gone: the entry goes; `b` stays (its output lives).
        let ops = l.files_removed(&[(20, a, true, "/x".into())], &|f| f == 21);
        assert!(matches!(ops.as_slice(), [JournalOp::DeleteLineage(id)] if *id == a));
        assert!(l.get(a).is_none() && l.get(b).is_some());
        // Ids are never given out again, across a reload too.
        let reloaded = Lineages::from_records(l.iter().cloned().collect(), 1);
        assert_eq!(reloaded.next_id, b + 1);
    }
}

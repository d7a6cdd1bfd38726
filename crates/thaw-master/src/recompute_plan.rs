//! Recomputation's decision (Tachyon, section 2.6): which lineages to rerun,
//! and in what order, to rebuild lost files. The service that finds losses,
//! runs the reruns and takes the bytes back is `master/recompute.rs`.
//!
//! The workflow manager's DAG has a node per file and an edge from a file to
//! each file its lineage read: every input, whether the lineage's
//! dependency is wide or narrow (a rerun reads all its inputs). From the
//! files to rebuild (every lost permanent file, proactively, and lost
//! temporary ones someone asked for) a breadth-first search follows those
//! edges and stops at files that are available; every lost file it visits must
//! be recomputed. A rerun regenerates all of one lineage's outputs, so the unit
//! scheduled is the lineage: those none of whose inputs are lost run first, in
//! parallel; the others as their inputs come back. The order is decided here in
//! advance, not by programs calling back for missing inputs, which "would have
//! poor performance and also lead to many compute slots being occupied".
//!
//! A lost file that cannot be rebuilt (no lineage, a broken one, or an input
//! itself lost for good) is reported with its reason, and so is every file
//! that needs it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A file as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    Available,
    /// Lost, written under lineage `lineage` (0: none).
    Lost {
        lineage: u64,
    },
    /// Not in the namespace (deleted, replaced).
    Gone,
}

/// A lineage as the planner sees it.
#[derive(Debug, Clone, Default)]
pub struct LineageView {
    pub inputs: Vec<u64>,
    /// Why it can no longer run (empty: it can).
    pub broken: String,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Lineages to rerun now: none of their inputs is lost.
    pub ready: Vec<u64>,
    /// Lineages to rerun once their lost inputs are rebuilt.
    pub waiting: Vec<u64>,
    /// Lost files that cannot be rebuilt, and why.
    pub unrecoverable: BTreeMap<u64, String>,
}

/// Plans the rebuild of `targets` (files; those not lost are ignored).
pub fn plan(
    targets: &[u64],
    file: &dyn Fn(u64) -> FileState,
    lineage: &dyn Fn(u64) -> Option<LineageView>,
    name: &dyn Fn(u64) -> String,
) -> Plan {
    let mut out = Plan::default();
    // Lineage -> its inputs; lost file -> its lineage.
    let mut needed: BTreeMap<u64, LineageView> = BTreeMap::new();
    let mut lost_by: BTreeMap<u64, u64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<u64> = targets.iter().copied().collect();
    while let Some(f) = queue.pop_front() {
        if !seen.insert(f) {
            continue;
        }
        let FileState::Lost { lineage: l } = file(f) else { continue };
        if l == 0 {
            let why = format!("{} was written without lineage and lost before its checkpoint", name(f));
            out.unrecoverable.insert(f, why);
            continue;
        }
        let Some(view) = needed.get(&l).cloned().or_else(|| lineage(l)) else {
            out.unrecoverable.insert(f, format!("its lineage {l} is gone"));
            continue;
        };
        if !view.broken.is_empty() {
            out.unrecoverable.insert(f, format!("its lineage {l} is broken: {}", view.broken));
            continue;
        }
        lost_by.insert(f, l);
        for i in &view.inputs {
            match file(*i) {
                FileState::Available => {}
                FileState::Lost { .. } => queue.push_back(*i),
                FileState::Gone => {
                    out.unrecoverable.insert(f, format!("input FID {i} of its lineage {l} is gone"));
                }
            }
        }
        needed.insert(l, view);
    }
    // A lineage with an input that cannot come back cannot run: its lost
    // outputs cannot come back either (to a fixed point, along chains).
    let mut blocked: BTreeSet<u64> = BTreeSet::new();
    loop {
        let mut changed = false;
        for (&l, view) in &needed {
            if blocked.contains(&l) {
                continue;
            }
            let stuck = view.inputs.iter().find(|i| out.unrecoverable.contains_key(i) || file(**i) == FileState::Gone);
            if let Some(i) = stuck {
                blocked.insert(l);
                let why = format!("input {} of its lineage {l} cannot be rebuilt", name(*i));
                for (&f, &by) in &lost_by {
                    if by == l {
                        out.unrecoverable.entry(f).or_insert_with(|| why.clone());
                    }
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for (l, view) in &needed {
        if blocked.contains(l) {
            continue;
        }
        if view.inputs.iter().all(|i| file(*i) == FileState::Available) {
            out.ready.push(*l);
        } else {
            out.waiting.push(*l);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Files by id with their state, lineages by id with their inputs.
    struct World {
        files: HashMap<u64, FileState>,
        lineages: HashMap<u64, LineageView>,
    }

    impl World {
        fn plan(&self, targets: &[u64]) -> Plan {
            plan(
                targets,
                &|f| self.files.get(&f).cloned().unwrap_or(FileState::Gone),
                &|l| self.lineages.get(&l).cloned(),
                &|f| format!("/f{f}"),
            )
        }
    }

    fn lost(l: u64) -> FileState {
        FileState::Lost { lineage: l }
    }

    fn view(inputs: &[u64]) -> LineageView {
        LineageView { inputs: inputs.to_vec(), broken: String::new() }
    }

    #[test]
    fn a_chain_reruns_from_the_newest_available_file_forward() {
        // Tachyon, section 2.7's chain: f1 (persisted) -> f2 -> f3 -> f4, L_k writes f_k.
        let w = World {
            files: HashMap::from([(1, FileState::Available), (2, lost(2)), (3, lost(3)), (4, lost(4))]),
            lineages: HashMap::from([(2, view(&[1])), (3, view(&[2])), (4, view(&[3]))]),
        };
        let p = w.plan(&[4]);
        assert_eq!((p.ready, p.waiting), (vec![2], vec![3, 4]));
        assert!(p.unrecoverable.is_empty());
        // The search stops at available files: f3 available, only L4 runs.
        let mut w = w;
        w.files.insert(3, FileState::Available);
        assert_eq!(w.plan(&[4]).ready, vec![4]);
        assert_eq!(w.plan(&[4]).waiting, Vec::<u64>::new());
    }

    #[test]
    fn independent_losses_run_in_parallel_and_a_diamond_runs_each_lineage_once() {
        // L10 writes 10 from 1; L11 writes 11 from 2; L12 writes 12 from 10 and 11 (wide).
        let w = World {
            files: HashMap::from([
                (1, FileState::Available),
                (2, FileState::Available),
                (10, lost(10)),
                (11, lost(11)),
                (12, lost(12)),
            ]),
            lineages: HashMap::from([(10, view(&[1])), (11, view(&[2])), (12, view(&[10, 11]))]),
        };
        let p = w.plan(&[12, 10, 11]);
        assert_eq!((p.ready, p.waiting), (vec![10, 11], vec![12]));
    }

    #[test]
    fn what_cannot_be_rebuilt_says_why_and_so_does_what_needs_it() {
        let mut broken = view(&[1]);
        broken.broken = "input /in (FID 1) was deleted or replaced".into();
        let w = World {
            files: HashMap::from([(5, lost(0)), (6, lost(6)), (7, lost(7)), (8, lost(8)), (9, FileState::Available)]),
            // 6 reads the lineage-less 5; 7 reads 6; 8's lineage is broken.
            lineages: HashMap::from([(6, view(&[5, 9])), (7, view(&[6])), (8, broken)]),
        };
        let p = w.plan(&[7, 8, 9]);
        assert!(p.ready.is_empty() && p.waiting.is_empty(), "{p:?}");
        assert!(p.unrecoverable[&5].contains("without lineage"));
        assert!(p.unrecoverable[&6].contains("input /f5"));
        assert!(p.unrecoverable[&7].contains("input /f6"));
        assert!(p.unrecoverable[&8].contains("broken: input /in (FID 1) was deleted"));
        // A lineage whose input is gone from the namespace.
        let w = World { files: HashMap::from([(3, lost(3))]), lineages: HashMap::from([(3, view(&[42]))]) };
        assert!(w.plan(&[3]).unrecoverable[&3].contains("FID 42"));
    }
}

//! Recomputation's decision (Tachyon, sections 2.4 and 2.6): which lineages to
//! rerun, on which of their partitions, and in what order, to rebuild lost
//! files. The service that finds losses, runs the reruns and takes the bytes
//! back is `master/recompute.rs`.
//!
//! The workflow manager's DAG has a node per file and edges from a file to the
//! files it was derived from: "for wide dependencies a node has an edge to all
//! files it was derived from, whereas for a narrow dependency it has a single
//! edge to the file that it was derived from" (2.6). A narrow lineage (2.4's
//! one-to-one dependency: map, filter) derives output i from input i alone; a
//! wide one (shuffle, join) derives every output from every input. From the
//! files to rebuild (every lost permanent file, proactively, and lost
//! temporary ones someone asked for) a breadth-first search follows those
//! edges and stops at files that are available; every lost file it visits must
//! be recomputed.
//!
//! The unit scheduled is a rerun of one lineage on some of its partitions:
//! - narrow: only the lost outputs the search reached, each needing only its
//!   own input; the rerun is told which outputs to produce (2.4: the program
//!   is given "the lineage information as well as lost files list"). A lost
//!   input of a narrow step thus brings back only its own partition upstream,
//!   where that step is narrow too.
//! - wide: the whole program, which rewrites every output; each of its lost
//!   outputs is taken back, whether the search reached it or not.
//!
//! Reruns none of whose needed inputs is lost run first, in parallel; the
//! others as their inputs come back (a narrow lineage's partitions that are
//! ready do not wait for its partitions that are not). The order is decided
//! here in advance, not by programs calling back for missing inputs, which
//! "would have poor performance and also lead to many compute slots being
//! occupied".
//!
//! A lost file that cannot be rebuilt (no lineage, a broken one, or an input
//! it needs itself lost for good) is reported with its reason, and so is every
//! file that needs it; for a narrow lineage, only the partitions that need it.

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
    /// Its outputs' file ids, in order (0: not written yet).
    pub outputs: Vec<u64>,
    /// Output i derives from input i alone (else: from every input).
    pub narrow: bool,
    /// Why it can no longer run (empty: it can).
    pub broken: String,
}

impl LineageView {
    /// The inputs lost output `f` was derived from.
    fn needs(&self, f: u64) -> &[u64] {
        match self.outputs.iter().position(|o| *o == f) {
            Some(i) if self.narrow && i < self.inputs.len() => &self.inputs[i..=i],
            _ => &self.inputs,
        }
    }
}

/// One rerun of a lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerun {
    pub lineage: u64,
    /// The outputs (0-based indices) the program is to produce: a narrow
    /// lineage's partitions to rebuild; every output of a wide one.
    pub produce: Vec<usize>,
    /// Its lost files the rerun rebuilds (ids, in output order).
    pub rebuilds: Vec<u64>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Reruns to start now: none of the inputs they need is lost.
    pub ready: Vec<Rerun>,
    /// Reruns to start once the lost inputs they need are rebuilt.
    pub waiting: Vec<Rerun>,
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
    let mut views: BTreeMap<u64, LineageView> = BTreeMap::new();
    // Lost file to rebuild -> (its lineage, the inputs it needs).
    let mut lost_by: BTreeMap<u64, (u64, Vec<u64>)> = BTreeMap::new();
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
        let Some(view) = views.get(&l).cloned().or_else(|| lineage(l)) else {
            out.unrecoverable.insert(f, format!("its lineage {l} is gone"));
            continue;
        };
        if !view.broken.is_empty() {
            out.unrecoverable.insert(f, format!("its lineage {l} is broken: {}", view.broken));
            continue;
        }
        if !view.narrow {
            // A wide rerun rewrites every output: its other lost ones come back too.
            queue.extend(view.outputs.iter().filter(|o| **o != 0 && **o != f));
        }
        let needs = view.needs(f).to_vec();
        for i in &needs {
            match file(*i) {
                FileState::Available => {}
                FileState::Lost { .. } => queue.push_back(*i),
                FileState::Gone => {
                    out.unrecoverable.insert(f, format!("input FID {i} of its lineage {l} is gone"));
                }
            }
        }
        lost_by.insert(f, (l, needs));
        views.insert(l, view);
    }
    // A file needing an input that cannot come back cannot come back either
    // (to a fixed point, along chains).
    loop {
        let mut changed = false;
        for (&f, (l, needs)) in &lost_by {
            if out.unrecoverable.contains_key(&f) {
                continue;
            }
            if let Some(i) = needs.iter().find(|i| out.unrecoverable.contains_key(i) || file(**i) == FileState::Gone) {
                let why = format!("input {} of its lineage {l} cannot be rebuilt", name(*i));
                out.unrecoverable.insert(f, why);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // Group what can come back into reruns: per lineage, the partitions whose
    // inputs are all here now, and those that wait.
    let mut groups: BTreeMap<u64, [Vec<u64>; 2]> = BTreeMap::new();
    for (&f, (l, needs)) in &lost_by {
        if out.unrecoverable.contains_key(&f) {
            continue;
        }
        let ready = needs.iter().all(|i| file(*i) == FileState::Available);
        groups.entry(*l).or_default()[usize::from(!ready)].push(f);
    }
    for (l, [ready, waiting]) in groups {
        let view = &views[&l];
        let index = |f: &u64| view.outputs.iter().position(|o| o == f).unwrap_or(usize::MAX);
        let rerun = |mut rebuilds: Vec<u64>| {
            rebuilds.sort_by_key(index);
            // (A file not among the outputs, which tying prevents: the whole program.)
            let produce = if view.narrow && rebuilds.iter().all(|f| index(f) != usize::MAX) {
                rebuilds.iter().map(index).collect()
            } else {
                (0..view.outputs.len()).collect()
            };
            Rerun { lineage: l, produce, rebuilds }
        };
        if !view.narrow {
            // One program: it runs when every input is here.
            let all: Vec<u64> = ready.iter().chain(&waiting).copied().collect();
            if waiting.is_empty() {
                out.ready.push(rerun(all))
            } else {
                out.waiting.push(rerun(all))
            }
            continue;
        }
        if !ready.is_empty() {
            out.ready.push(rerun(ready));
        }
        if !waiting.is_empty() {
            out.waiting.push(rerun(waiting));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Files by id with their state, lineages by id.
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

    /// A wide lineage with one output, `l` itself (L_k writes f_k).
    fn view(l: u64, inputs: &[u64]) -> LineageView {
        LineageView { inputs: inputs.to_vec(), outputs: vec![l], narrow: false, broken: String::new() }
    }

    fn lineage(narrow: bool, inputs: &[u64], outputs: &[u64]) -> LineageView {
        LineageView { inputs: inputs.to_vec(), outputs: outputs.to_vec(), narrow, broken: String::new() }
    }

    fn rerun(lineage: u64, produce: &[usize], rebuilds: &[u64]) -> Rerun {
        Rerun { lineage, produce: produce.to_vec(), rebuilds: rebuilds.to_vec() }
    }

    #[test]
    fn a_chain_reruns_from_the_newest_available_file_forward() {
        // Tachyon, section 2.7's chain: f1 (persisted) -> f2 -> f3 -> f4, L_k writes f_k.
        let w = World {
            files: HashMap::from([(1, FileState::Available), (2, lost(2)), (3, lost(3)), (4, lost(4))]),
            lineages: HashMap::from([(2, view(2, &[1])), (3, view(3, &[2])), (4, view(4, &[3]))]),
        };
        let p = w.plan(&[4]);
        assert_eq!(p.ready, vec![rerun(2, &[0], &[2])]);
        assert_eq!(p.waiting, vec![rerun(3, &[0], &[3]), rerun(4, &[0], &[4])]);
        assert!(p.unrecoverable.is_empty());
        // The search stops at available files: f3 available, only L4 runs.
        let mut w = w;
        w.files.insert(3, FileState::Available);
        assert_eq!(w.plan(&[4]).ready, vec![rerun(4, &[0], &[4])]);
        assert_eq!(w.plan(&[4]).waiting, vec![]);
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
            lineages: HashMap::from([(10, view(10, &[1])), (11, view(11, &[2])), (12, view(12, &[10, 11]))]),
        };
        let p = w.plan(&[12, 10, 11]);
        let lineages = |v: &[Rerun]| v.iter().map(|r| r.lineage).collect::<Vec<_>>();
        assert_eq!((lineages(&p.ready), lineages(&p.waiting)), (vec![10, 11], vec![12]));
    }

    /// Four partitions: inputs 1-4 (checkpointed), outputs 11-14; the worker
    /// holding partitions 1 and 3 (files 12 and 14) died.
    fn four_partitions(narrow: bool) -> World {
        let mut files: HashMap<u64, FileState> = (1..=4).map(|f| (f, FileState::Available)).collect();
        files.extend([(11, FileState::Available), (12, lost(7)), (13, FileState::Available), (14, lost(7))]);
        World { files, lineages: HashMap::from([(7, lineage(narrow, &[1, 2, 3, 4], &[11, 12, 13, 14]))]) }
    }

    #[test]
    fn a_narrow_lineage_rebuilds_only_its_lost_partitions() {
        let w = four_partitions(true);
        let p = w.plan(&[12, 14]);
        assert_eq!((p.ready, p.waiting), (vec![rerun(7, &[1, 3], &[12, 14])], vec![]));
        // Reactive: only what was asked for (and what it needs).
        assert_eq!(w.plan(&[14]).ready, vec![rerun(7, &[3], &[14])]);
    }

    #[test]
    fn a_wide_lineage_reruns_whole_and_takes_back_every_lost_output() {
        let w = four_partitions(false);
        let p = w.plan(&[12, 14]);
        assert_eq!((p.ready, p.waiting), (vec![rerun(7, &[0, 1, 2, 3], &[12, 14])], vec![]));
        // Asked for one: the rerun rewrites the other too, so it comes back as well.
        assert_eq!(w.plan(&[14]).ready, vec![rerun(7, &[0, 1, 2, 3], &[12, 14])]);
    }

    #[test]
    fn a_mixed_chain_recurses_narrow_where_narrow_and_whole_where_wide() {
        // N1 (narrow) 1,2,3 -> 11,12,13; W (wide) 11,12,13 -> 21,22,23;
        // N2 (narrow) 21,22,23 -> 31,32,33. Partition 0 of each step was lost.
        let mut files: HashMap<u64, FileState> =
            [1, 2, 3, 12, 13, 22, 23, 32, 33].into_iter().map(|f| (f, FileState::Available)).collect();
        files.extend([(11, lost(1)), (21, lost(2)), (31, lost(3))]);
        let lineages = HashMap::from([
            (1, lineage(true, &[1, 2, 3], &[11, 12, 13])),
            (2, lineage(false, &[11, 12, 13], &[21, 22, 23])),
            (3, lineage(true, &[21, 22, 23], &[31, 32, 33])),
        ]);
        let w = World { files, lineages };
        // From the last file alone, as from every lost one.
        for targets in [&[31][..], &[11, 21, 31]] {
            let p = w.plan(targets);
            // The narrow step after the wide one needs only partition 0 of it,
            // but the wide one needs every input: partition 0 of N1 (only).
            assert_eq!(p.ready, vec![rerun(1, &[0], &[11])], "{targets:?}");
            assert_eq!(p.waiting, vec![rerun(2, &[0, 1, 2], &[21]), rerun(3, &[0], &[31])]);
        }
        // N2's partition 1 lost as well, its input there: it need not wait.
        let mut w = w;
        w.files.insert(32, lost(3));
        let p = w.plan(&[31, 32]);
        assert_eq!(p.ready, vec![rerun(1, &[0], &[11]), rerun(3, &[1], &[32])]);
        assert_eq!(p.waiting, vec![rerun(2, &[0, 1, 2], &[21]), rerun(3, &[0], &[31])]);
    }

    #[test]
    fn narrow_after_narrow_recurses_into_the_lost_partition_alone() {
        // N1 1,2 -> 11,12; N2 11,12 -> 21,22. Lost: 11 (N1's partition 0), 21 and 22.
        let files = HashMap::from([
            (1, FileState::Available),
            (2, FileState::Available),
            (11, lost(1)),
            (12, FileState::Available),
            (21, lost(2)),
            (22, lost(2)),
        ]);
        let lineages =
            HashMap::from([(1, lineage(true, &[1, 2], &[11, 12])), (2, lineage(true, &[11, 12], &[21, 22]))]);
        let w = World { files, lineages };
        let p = w.plan(&[22]);
        assert_eq!((p.ready, p.waiting), (vec![rerun(2, &[1], &[22])], vec![]), "11 is not needed for 22");
        let p = w.plan(&[21, 22]);
        assert_eq!(p.ready, vec![rerun(1, &[0], &[11]), rerun(2, &[1], &[22])]);
        assert_eq!(p.waiting, vec![rerun(2, &[0], &[21])]);
    }

    #[test]
    fn what_cannot_be_rebuilt_says_why_and_so_does_what_needs_it() {
        let mut broken = view(8, &[1]);
        broken.broken = "input /in (FID 1) was deleted or replaced".into();
        let w = World {
            files: HashMap::from([(5, lost(0)), (6, lost(6)), (7, lost(7)), (8, lost(8)), (9, FileState::Available)]),
            // 6 reads the lineage-less 5; 7 reads 6; 8's lineage is broken.
            lineages: HashMap::from([(6, view(6, &[5, 9])), (7, view(7, &[6])), (8, broken)]),
        };
        let p = w.plan(&[7, 8, 9]);
        assert!(p.ready.is_empty() && p.waiting.is_empty(), "{p:?}");
        assert!(p.unrecoverable[&5].contains("without lineage"));
        assert!(p.unrecoverable[&6].contains("input /f5"));
        assert!(p.unrecoverable[&7].contains("input /f6"));
        assert!(p.unrecoverable[&8].contains("broken: input /in (FID 1) was deleted"));
        // A lineage whose input is gone from the namespace.
        let w = World { files: HashMap::from([(3, lost(3))]), lineages: HashMap::from([(3, view(3, &[42]))]) };
        assert!(w.plan(&[3]).unrecoverable[&3].contains("FID 42"));
    }

    #[test]
    fn a_narrow_partition_that_cannot_come_back_does_not_hold_back_the_others() {
        // 5 was lost without lineage; N 5,2 -> 11,12 lost both.
        let files = HashMap::from([(5, lost(0)), (2, FileState::Available), (11, lost(4)), (12, lost(4))]);
        let w = World { files, lineages: HashMap::from([(4, lineage(true, &[5, 2], &[11, 12]))]) };
        let p = w.plan(&[11, 12]);
        assert_eq!((&p.ready, &p.waiting), (&vec![rerun(4, &[1], &[12])], &vec![]));
        assert!(p.unrecoverable[&11].contains("input /f5 of its lineage 4"), "{p:?}");
        // Wide, the same loss holds back every output.
        let mut w = w;
        w.lineages.get_mut(&4).unwrap().narrow = false;
        let p = w.plan(&[11, 12]);
        assert!(p.ready.is_empty() && p.waiting.is_empty(), "{p:?}");
        assert!(p.unrecoverable.contains_key(&12), "{p:?}");
    }
}

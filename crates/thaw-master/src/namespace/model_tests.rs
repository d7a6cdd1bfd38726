//! The namespace against a simple model: a map of journal records by id,
//! changed by hand the way each operation should change it. Whatever sequence
//! of operations runs, every live inode reads back as the model's record
//! (the compact inode loses nothing), every directory lists exactly the
//! model's children in name order, and an operation succeeds exactly when the
//! model says it may.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Change {
    Length(u64),
    Complete,
    Persisted(bool),
    Owner(u8),
    Group(u8),
    Mode(Option<u32>),
    Writer(u8),
    Lineage(u64),
    Crcs(Vec<u32>),
    PersistRequested,
}

#[derive(Debug, Clone)]
enum Op {
    Mkdir(usize, u8),
    Create(usize, u8, u8),
    Update(usize, Change),
    Rename(usize, usize, u8),
    Remove(usize),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        any::<u64>().prop_map(Change::Length),
        Just(Change::Complete),
        any::<bool>().prop_map(Change::Persisted),
        (0..3u8).prop_map(Change::Owner),
        (0..3u8).prop_map(Change::Group),
        proptest::option::of(0..0o777u32).prop_map(Change::Mode),
        (0..3u8).prop_map(Change::Writer),
        any::<u64>().prop_map(Change::Lineage),
        proptest::collection::vec(any::<u32>(), 0..3).prop_map(Change::Crcs),
        Just(Change::PersistRequested),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..64usize, 0..5u8).prop_map(|(p, n)| Op::Mkdir(p, n)),
        (0..64usize, 0..5u8, 0..3u8).prop_map(|(p, n, o)| Op::Create(p, n, o)),
        (0..64usize, change()).prop_map(|(i, c)| Op::Update(i, c)),
        (0..64usize, 0..64usize, 0..5u8).prop_map(|(a, b, n)| Op::Rename(a, b, n)),
        (0..64usize).prop_map(Op::Remove),
    ]
}

/// Names of users and groups: "" is the default.
fn who(n: u8) -> String {
    ["", "ana", "bo"][n as usize % 3].to_string()
}

fn apply(r: &mut InodeRecord, c: &Change) {
    match c {
        Change::Length(l) => r.length = *l,
        Change::Complete => r.complete = true,
        Change::Persisted(p) => r.persisted = *p,
        Change::Owner(o) => r.owner = who(*o),
        Change::Group(g) => r.group = who(*g),
        Change::Mode(m) => r.mode = *m,
        Change::Writer(w) if !r.is_dir => r.writer = who(*w),
        Change::Lineage(l) if !r.is_dir => r.lineage_id = *l,
        Change::Crcs(c) if !r.is_dir => r.block_crc32 = c.clone(),
        Change::PersistRequested => r.persist_requested = true,
        // What the master never gives a directory.
        Change::Writer(_) | Change::Lineage(_) | Change::Crcs(_) => {}
    }
}

type Model = BTreeMap<u64, InodeRecord>;

fn child_named(model: &Model, dir: u64, name: &str) -> bool {
    model.values().any(|r| r.parent_id == dir && r.name == name)
}

fn is_dir(model: &Model, id: u64) -> bool {
    id == ROOT_ID || model.get(&id).is_some_and(|r| r.is_dir)
}

/// Whether `id` is `at` or above it.
fn above(model: &Model, id: u64, mut at: u64) -> bool {
    loop {
        if at == id {
            return true;
        }
        match model.get(&at) {
            Some(r) => at = r.parent_id,
            None => return false,
        }
    }
}

fn check(ns: &Namespace, model: &Model) -> std::result::Result<(), TestCaseError> {
    prop_assert_eq!(ns.len(), model.len() + 1);
    for (id, want) in model {
        let mut got = ns.record(*id).expect("a live inode");
        got.mtime_ms = want.mtime_ms;
        prop_assert_eq!(&got, want);
    }
    for dir in model.iter().filter(|(_, r)| r.is_dir).map(|(id, _)| *id).chain([ROOT_ID]) {
        let mut want: Vec<(String, u64)> =
            model.iter().filter(|(_, r)| r.parent_id == dir).map(|(id, r)| (r.name.clone(), *id)).collect();
        want.sort();
        prop_assert_eq!(ns.children(dir), want);
    }
    Ok(())
}

proptest! {
    #[test]
    fn the_namespace_agrees_with_a_model(ops in proptest::collection::vec(op(), 1..80)) {
        let mut ns = Namespace::from_records(vec![], 0).0;
        let mut model = Model::new();
        let pick = |model: &Model, i: usize| {
            let ids: Vec<u64> = [ROOT_ID].into_iter().chain(model.keys().copied()).collect();
            ids[i % ids.len()]
        };
        for op in ops {
            match op {
                Op::Mkdir(p, n) | Op::Create(p, n, _) => {
                    let parent = pick(&model, p);
                    let dir = matches!(op, Op::Mkdir(..));
                    let name = format!("{}{n}", if dir { "d" } else { "f" });
                    let new = match op {
                        Op::Create(_, _, o) => NewInode { length: 7, block_size: 4, owner: who(o), ..Default::default() },
                        _ => NewInode { is_dir: true, ..Default::default() },
                    };
                    let may = is_dir(&model, parent) && !child_named(&model, parent, &name);
                    let got = ns.add(parent, &name, new);
                    prop_assert_eq!(got.is_ok(), may, "add {} under {}", name, parent);
                    if let Ok((_, JournalOp::Put(rec))) = got {
                        model.insert(rec.id, rec);
                    }
                }
                Op::Update(i, c) => {
                    let id = pick(&model, i);
                    if id == ROOT_ID { continue; }
                    ns.update(id, |r| apply(r, &c)).expect("a live inode");
                    apply(model.get_mut(&id).expect("live"), &c);
                }
                Op::Rename(a, b, n) => {
                    let (id, to) = (pick(&model, a), pick(&model, b));
                    if id == ROOT_ID { continue; }
                    let name = format!("r{n}");
                    let may = is_dir(&model, to) && !above(&model, id, to) && !child_named(&model, to, &name);
                    let got = ns.rename(id, to, &name);
                    prop_assert_eq!(got.is_ok(), may, "rename {} to {}/{}", id, to, name);
                    if got.is_ok() {
                        let r = model.get_mut(&id).expect("live");
                        r.parent_id = to;
                        r.name = name;
                    }
                }
                Op::Remove(a) => {
                    let id = pick(&model, a);
                    let (files, _) = ns.remove(id);
                    if id == ROOT_ID {
                        prop_assert!(files.is_empty());
                        continue;
                    }
                    let gone: Vec<u64> = model.keys().copied().filter(|&m| above(&model, id, m)).collect();
                    let mut want_files: Vec<u64> = gone.iter().copied().filter(|g| !model[g].is_dir).collect();
                    let mut files = files;
                    files.sort();
                    want_files.sort();
                    prop_assert_eq!(files, want_files);
                    for g in gone {
                        model.remove(&g);
                    }
                }
            }
            check(&ns, &model)?;
        }
        // And a restart from the model's records builds the same namespace.
        let (back, problems) = Namespace::from_records(model.values().cloned(), ns.next_id());
        prop_assert!(problems.is_empty(), "{:?}", problems);
        check(&back, &model)?;
    }
}

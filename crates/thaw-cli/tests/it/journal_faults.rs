//! A damaged journal at start-up (issue 18, item 3): truncated, a record that
//! does not decode, records that do not form a tree. The master refuses to
//! start, saying what is wrong, and loads nothing; `--salvage-journal` starts
//! on what fits, logs what it dropped and leaves a journal that starts cleanly.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::*;
use thaw_common::proto::InodeRecord;
use thaw_master::journal::{Commit, Journal, JournalOp};

/// Runs `thaw master` on the journal in `dir` until it exits (its output)
/// or has loaded its namespace and serves (`None`; it is stopped then).
fn master(dir: &Path, extra: &[&str]) -> Option<Output> {
    let ufs = dir.join("ufs");
    std::fs::create_dir_all(&ufs).unwrap();
    let log = dir.join("master.log");
    let mut child = Command::new(BIN)
        .args(["master", "--port", "0", "--ufs"])
        .arg(&ufs)
        .arg("--journal-dir")
        .arg(dir.join("journal"))
        .args(extra)
        .env("THAW_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let stderr = std::fs::read(&log).unwrap();
            return Some(Output { status, stdout: Vec::new(), stderr });
        }
        if std::fs::read_to_string(&log).unwrap().contains("namespace loaded") {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            child.wait().unwrap();
            return None;
        }
        assert!(std::time::Instant::now() < deadline, "the master neither served nor exited");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn rec(id: u64, parent: u64, name: &str, is_dir: bool) -> InodeRecord {
    InodeRecord { version: 1, id, parent_id: parent, name: name.into(), is_dir, complete: true, ..Default::default() }
}

#[test]
fn a_truncated_journal_stops_the_master_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(&dir.path().join("journal")).unwrap();
        j.commit(&[JournalOp::Put(rec(2, 1, "d", true)), JournalOp::Put(rec(3, 2, "f", false))], 4).unwrap();
    }
    let file = dir.path().join("journal/thaw-master.redb");
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len / 3).unwrap();
    let out = master(dir.path(), &[]).expect("a master on a truncated journal exits");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("journal") && err.contains("corrupted"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The journal's log (`thaw-master.wal`, changes since the last checkpoint):
/// a torn last record is a crash mid-write, dropped; a damaged record with
/// records after it is not, and the master refuses to start, naming it.
#[test]
fn a_damaged_journal_log_stops_the_master_and_a_torn_tail_does_not() {
    use thaw_master::journal::encode_batch;
    use thaw_master::wal::{FILE, Wal};
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    {
        let _j = Journal::open(&journal).unwrap();
        let mut log = Wal::open(&journal, 0).unwrap();
        log.append(&encode_batch(&[JournalOp::Put(rec(2, 1, "d", true))], 3)).unwrap();
        log.append(&encode_batch(&[JournalOp::Put(rec(3, 2, "f", false))], 4)).unwrap();
        log.append(&encode_batch(&[JournalOp::Put(rec(4, 2, "g", false))], 5)).unwrap();
    }
    let path = journal.join(FILE);
    let whole = std::fs::read(&path).unwrap();
    // A torn last record: the master starts with the two whole ones.
    std::fs::write(&path, &whole[..whole.len() - 5]).unwrap();
    assert!(master(dir.path(), &[]).is_none());
    let mut names: Vec<String> =
        Journal::open(&journal).unwrap().load().unwrap().inodes.into_iter().map(|r| r.name).collect();
    names.sort();
    assert_eq!(names, ["d", "f"]);

    // Damage before other records: refused, and the log is kept as it was.
    std::fs::write(&path, &whole).unwrap();
    let mut damaged = whole.clone();
    damaged[30] ^= 0x01; // inside the first record's payload
    std::fs::write(&path, &damaged).unwrap();
    let out = master(dir.path(), &[]).expect("a master on a damaged log exits");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("record at byte 0") && err.contains("damaged"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), damaged, "the log was changed");
}

#[test]
fn a_record_that_does_not_decode_stops_the_master_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    drop(Journal::open(&dir.path().join("journal")).unwrap());
    {
        let db = redb::Database::create(dir.path().join("journal/thaw-master.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let table: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("inodes");
            let mut t = txn.open_table(table).unwrap();
            t.insert(7, [0xffu8, 0xff, 0xff, 0x01, 0x02].as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let out = master(dir.path(), &[]).expect("a master on a bad record exits");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("inode 7"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn records_that_do_not_form_a_tree_stop_the_master_until_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    {
        let j = Journal::open(&dir.path().join("journal")).unwrap();
        let ops = [
            rec(2, 1, "data", true),
            rec(3, 2, "kept.bin", false),
            rec(4, 99, "orphan.bin", false),  // its directory is not there
            rec(5, 3, "under-a-file", false), // its parent is a file
            rec(6, 2, "kept.bin", false),     // a name its directory already has
            rec(7, 8, "a", true),             // 7 and 8: a cycle
            rec(8, 7, "b", true),
            rec(9, 1, "..", false), // a name no entry may have
        ]
        .map(JournalOp::Put);
        j.commit(&ops, 10).unwrap();
    }
    let out = master(dir.path(), &[]).expect("a master on an inconsistent journal exits");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("is inconsistent (6 problems") && err.contains("--salvage-journal"), "{err}");

    // Salvaged: it serves, and says what it dropped.
    assert!(master(dir.path(), &["--salvage-journal"]).is_none());
    let loaded = Journal::open(&dir.path().join("journal")).unwrap().load().unwrap();
    let mut ids: Vec<u64> = loaded.inodes.iter().map(|r| r.id).collect();
    ids.sort();
    assert_eq!(ids, [2, 3], "only the tree is left in the journal");
    // And the next start needs no flag.
    assert!(master(dir.path(), &[]).is_none());
}

//! A single master's write-ahead log: each group commit is appended to one
//! file as a record and made durable with one `fdatasync`, and the redb
//! store ([`crate::journal`]) takes the logged changes in checkpoints.
//!
//! Why: a redb transaction is a copy-on-write B-tree commit; even one small
//! change writes the pages from its leaf up, the table directory and the
//! header, scattered in the file, then syncs them (about 8 pages and 1-1.5 ms
//! here), so every namespace change waited on that. HDFS's NameNode appends
//! its edits to a log and syncs that (`FSEditLog.logSync`), and folds the
//! log into its image only now and then (the checkpoint); Alluxio's journal
//! does the same. An append and its sync cost about 0.1 ms on this disk. So
//! here too: the log is where a change becomes durable, redb is the image,
//! brought up to date every [`CHECKPOINT_OPS`] changes (and at a clean stop)
//! in one transaction, after which the log starts again empty.
//!
//! A record is `[length: u32 LE][CRC-32: u32 LE][number: u64 LE][payload]`,
//! the CRC over the number and the payload, the payload the commit's
//! `JournalBatch` (the message a group of masters replicates). The
//! journal's META table keeps the last number a checkpoint applied, in the
//! same transaction, so a record is applied once whatever point a crash
//! hits: a record the log still holds at start-up is applied if its number
//! is higher ([`crate::journal::Journal::open`]). A record cut short by a
//! crash was never acknowledged (its sync had not returned): it is dropped,
//! and the file cut back to the last whole record. A damaged record with
//! more data after it is not a torn tail: the master refuses to start,
//! naming it.
//!
//! This module knows records as bytes; [`crate::journal`] encodes them and
//! [`crate::commits`] appends and checkpoints.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use thaw_common::{Result, ThawError};

/// The log's file in the journal directory.
pub const FILE: &str = "thaw-master.wal";
/// Bytes of the log after which it is checkpointed into redb (or after
/// `crate::commits::CHECKPOINT_OPS` changes, whichever comes first).
pub const CHECKPOINT_BYTES: u64 = 64 << 20;
/// A record's length, CRC and number.
const HEAD: usize = 16;
/// The largest record a reader accepts (a larger length is damage).
const MAX_RECORD: u32 = 1 << 30;

fn werr(path: &Path, e: impl std::fmt::Display) -> ThawError {
    ThawError::internal(format!("journal log {}: {e}", path.display()))
}

/// One logged group commit.
#[derive(Debug)]
pub struct Record {
    pub seq: u64,
    pub payload: Vec<u8>,
}

/// The open log, appended to by the journal's writer thread.
pub struct Wal {
    file: File,
    path: PathBuf,
    /// Bytes of whole records in the file.
    end: u64,
    /// The last record's number.
    seq: u64,
}

impl Wal {
    /// Opens the log of `dir` (empty: [`crate::journal::Journal::open`] has
    /// applied and cleared what it held) to append after record `seq`.
    pub fn open(dir: &Path, seq: u64) -> Result<Wal> {
        let path = dir.join(FILE);
        let file = OpenOptions::new().create(true).read(true).write(true).truncate(false).open(&path)?;
        let end = file.metadata()?.len();
        if end != 0 {
            return Err(werr(&path, "holds records no checkpoint applied (open the journal first)"));
        }
        sync_dir(dir)?;
        Ok(Wal { file, path, end, seq })
    }

    /// Appends one group commit's payload and makes it durable; its number.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64> {
        let rec = frame(payload, self.seq + 1)
            .ok_or_else(|| werr(&self.path, format!("a commit of {} bytes is too large", payload.len())))?;
        let written = self.file.write_all(&rec).and_then(|_| self.file.sync_data());
        if let Err(e) = written {
            // Whatever part of it reached the file is cut off again, so the
            // next record follows the last whole one.
            let _ = self.file.set_len(self.end);
            let _ = std::io::Seek::seek(&mut self.file, std::io::SeekFrom::Start(self.end));
            return Err(werr(&self.path, e));
        }
        self.end += rec.len() as u64;
        self.seq += 1;
        Ok(self.seq)
    }

    /// The last record's number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Bytes of records in the log.
    pub fn len(&self) -> u64 {
        self.end
    }

    pub fn is_empty(&self) -> bool {
        self.end == 0
    }

    /// After a checkpoint applied every record: the log starts again empty
    /// (numbers go on).
    pub fn checkpointed(&mut self) -> Result<()> {
        self.file.set_len(0).and_then(|_| self.file.sync_all()).map_err(|e| werr(&self.path, e))?;
        std::io::Seek::seek(&mut self.file, std::io::SeekFrom::Start(0)).map_err(|e| werr(&self.path, e))?;
        self.end = 0;
        Ok(())
    }
}

/// Record `seq` of `payload`, as the log holds it (none: too large).
pub fn frame(payload: &[u8], seq: u64) -> Option<Vec<u8>> {
    let len = u32::try_from(payload.len()).ok().filter(|&l| l <= MAX_RECORD)?;
    let mut rec = Vec::with_capacity(HEAD + payload.len());
    rec.extend_from_slice(&len.to_le_bytes());
    rec.extend_from_slice(&[0; 4]);
    rec.extend_from_slice(&seq.to_le_bytes());
    rec.extend_from_slice(payload);
    let crc = crc32fast::hash(&rec[8..]);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
    Some(rec)
}

/// The whole records of the log in `dir` (none if it has no log), cutting a
/// torn last record off the file.
pub fn read(dir: &Path) -> Result<Vec<Record>> {
    let path = dir.join(FILE);
    let mut bytes = Vec::new();
    match File::open(&path) {
        Ok(mut f) => f.read_to_end(&mut bytes).map_err(|e| werr(&path, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(werr(&path, e)),
    };
    let (records, end) = parse(&bytes).map_err(|e| werr(&path, e))?;
    if end < bytes.len() {
        tracing::warn!(
            log = %path.display(),
            bytes = bytes.len() - end,
            "the journal log ends in a record cut short (a crash during its write, never acknowledged): dropped"
        );
        let f = OpenOptions::new().write(true).open(&path).map_err(|e| werr(&path, e))?;
        f.set_len(end as u64).and_then(|_| f.sync_all()).map_err(|e| werr(&path, e))?;
    }
    Ok(records)
}

/// The records in `bytes` and where the last whole one ends. A record cut
/// short, or failing its check with only zeros after it, is a torn tail;
/// one failing its check with data after it is damage (an error).
fn parse(bytes: &[u8]) -> std::result::Result<(Vec<Record>, usize), String> {
    let mut records: Vec<Record> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(head) = bytes.get(at..at + HEAD) else { break };
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
        let seq = u64::from_le_bytes(head[8..].try_into().expect("8 bytes"));
        if len > MAX_RECORD {
            return Err(format!("record at byte {at} claims {len} bytes: the log is damaged"));
        }
        let end = at + HEAD + len as usize;
        let Some(body) = bytes.get(at + 8..end) else { break }; // cut short: the tail
        if crc32fast::hash(body) != crc {
            // Torn: the write a crash cut (a prefix of the record, maybe
            // zeros the file grew by): nothing but zeros after it.
            if bytes[end..].iter().all(|&b| b == 0) {
                break;
            }
            return Err(format!(
                "record at byte {at} fails its CRC-32 with {} bytes after it: the log is damaged",
                bytes.len() - end
            ));
        }
        if let Some(last) = records.last().map(|r| r.seq)
            && seq != last + 1
        {
            return Err(format!("record at byte {at} is number {seq} after {last}: the log is damaged"));
        }
        records.push(Record { seq, payload: body[8..].to_vec() });
        at = end;
    }
    Ok((records, at))
}

/// Makes the log file's entry in its directory durable (a new file).
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| werr(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(records: &[(&[u8], u64)]) -> Vec<u8> {
        records.iter().flat_map(|(p, seq)| frame(p, *seq).unwrap()).collect()
    }

    #[test]
    fn whole_records_come_back_in_order() {
        let bytes = log_of(&[(b"one", 1), (b"", 2), (b"three", 3)]);
        let (records, end) = parse(&bytes).unwrap();
        assert_eq!(end, bytes.len());
        let got: Vec<(u64, &[u8])> = records.iter().map(|r| (r.seq, r.payload.as_slice())).collect();
        assert_eq!(got, [(1, b"one".as_slice()), (2, b"".as_slice()), (3, b"three".as_slice())]);
    }

    /// A crash during a write leaves a prefix of the record (and maybe
    /// zeros): every earlier record stands, the torn one is dropped.
    #[test]
    fn a_torn_last_record_is_dropped_at_every_cut() {
        let whole = log_of(&[(b"kept", 1)]);
        let last = frame(b"the record a crash cut", 2).unwrap();
        for cut in 0..last.len() {
            for zeros in [0, 4096] {
                let mut bytes = whole.clone();
                bytes.extend_from_slice(&last[..cut]);
                bytes.extend(std::iter::repeat_n(0u8, zeros));
                let (records, end) = parse(&bytes).unwrap_or_else(|e| panic!("cut {cut}, zeros {zeros}: {e}"));
                assert_eq!((records.len(), end), (1, whole.len()), "cut {cut}, zeros {zeros}");
            }
        }
    }

    /// Damage with records after it is not a torn tail: refused, saying where.
    #[test]
    fn a_damaged_record_before_others_is_refused() {
        let mut bytes = log_of(&[(b"one", 1), (b"two", 2), (b"three", 3)]);
        let second = frame(b"one", 1).unwrap().len();
        bytes[second + HEAD] ^= 0x40; // a bit of record 2's payload
        let e = parse(&bytes).unwrap_err();
        assert!(e.contains(&format!("record at byte {second}")) && e.contains("damaged"), "{e}");
        // A gap in the numbers is damage too.
        let e = parse(&log_of(&[(b"one", 1), (b"three", 3)])).unwrap_err();
        assert!(e.contains("number 3 after 1"), "{e}");
    }

    /// Appended records are read back; a torn tail on disk is cut off the
    /// file, so the next append follows the last whole record.
    #[test]
    fn the_file_is_cut_back_to_its_last_whole_record() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = Wal::open(dir.path(), 7).unwrap();
            assert_eq!(log.append(b"eight").unwrap(), 8);
            assert_eq!(log.append(b"nine").unwrap(), 9);
        }
        let path = dir.path().join(FILE);
        let whole = std::fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&frame(b"ten, torn", 10).unwrap()[..11]).unwrap();
        drop(f);
        let records = read(dir.path()).unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [8, 9]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), whole);
    }
}

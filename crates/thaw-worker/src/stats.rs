//! Per-job access counters: every read and write names its job, and the worker
//! keeps what each job did (sent to the master with each heartbeat); and the
//! worker's reads by where their bytes came from (for its metrics).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use thaw_common::proto::JobAccess;

#[derive(Default)]
pub struct JobStats {
    jobs: Mutex<HashMap<String, JobAccess>>,
    /// Reads and their bytes by [`ReadSource`], all jobs together.
    by_source: [(AtomicU64, AtomicU64); ReadSource::ALL.len()],
    /// Blocks, and their bytes, filled from the under-store for readers.
    fills: (AtomicU64, AtomicU64),
}

/// Where the bytes of a read this worker served came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSource {
    /// A block file opened for a client on this host to read itself: the
    /// worker sees the open (the block's length), not the client's reads.
    ShortCircuit,
    /// Sent from the MEM tier.
    RemoteMem,
    /// Sent from the DISK tier.
    Disk,
    /// Read from the under-store (streamed through, or filled into a tier for
    /// this read and sent from there).
    UnderStore,
}

impl ReadSource {
    pub const ALL: [ReadSource; 4] =
        [ReadSource::ShortCircuit, ReadSource::RemoteMem, ReadSource::Disk, ReadSource::UnderStore];

    pub fn name(self) -> &'static str {
        match self {
            ReadSource::ShortCircuit => "short_circuit",
            ReadSource::RemoteMem => "remote_mem",
            ReadSource::Disk => "disk",
            ReadSource::UnderStore => "under_store",
        }
    }
}

pub enum Access {
    Read(u64),
    Write(u64),
    ShortCircuit(u64),
}

impl JobStats {
    pub fn record(&self, job: &str, access: Access) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let e =
            jobs.entry(job.to_string()).or_insert_with(|| JobAccess { job_id: job.to_string(), ..Default::default() });
        match access {
            Access::Read(n) => {
                e.reads += 1;
                e.bytes_read += n;
            }
            Access::Write(n) => {
                e.writes += 1;
                e.bytes_written += n;
            }
            Access::ShortCircuit(n) => {
                e.reads += 1;
                e.bytes_read += n;
                e.short_circuit_opens += 1;
            }
        }
    }

    /// Where `bytes` the job read came from: for the job, memory without a fill
    /// (a cache hit) or elsewhere (under-store, DISK, a fill made for the read);
    /// for the worker's metrics, the [`ReadSource`] it served them from.
    pub fn record_source(&self, job: &str, bytes: u64, from_memory: bool, source: ReadSource) {
        self.count_read(source, bytes);
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let e =
            jobs.entry(job.to_string()).or_insert_with(|| JobAccess { job_id: job.to_string(), ..Default::default() });
        if from_memory {
            e.bytes_from_memory += bytes;
        } else {
            e.bytes_cold += bytes;
        }
    }

    fn count_read(&self, source: ReadSource, bytes: u64) {
        let (reads, b) = &self.by_source[source as usize];
        reads.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts a block of `bytes` filled from the under-store into a tier for a
    /// reader (not a migration: those count as migrations).
    pub fn count_fill(&self, bytes: u64) {
        self.fills.0.fetch_add(1, Ordering::Relaxed);
        self.fills.1.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Blocks and bytes filled for readers since the worker started.
    pub fn fills(&self) -> (u64, u64) {
        (self.fills.0.load(Ordering::Relaxed), self.fills.1.load(Ordering::Relaxed))
    }

    /// Reads and bytes served from `source` since the worker started.
    pub fn reads_from(&self, source: ReadSource) -> (u64, u64) {
        let (reads, b) = &self.by_source[source as usize];
        (reads.load(Ordering::Relaxed), b.load(Ordering::Relaxed))
    }

    pub fn snapshot(&self) -> Vec<JobAccess> {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<JobAccess> = jobs.values().cloned().collect();
        v.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        v
    }
}

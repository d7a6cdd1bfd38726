//! Per-job access counters: every read and write names its job, and the worker
//! keeps what each job did (sent to the master with each heartbeat).

use std::collections::HashMap;
use std::sync::Mutex;

use thaw_common::proto::JobAccess;

#[derive(Default)]
pub struct JobStats {
    jobs: Mutex<HashMap<String, JobAccess>>,
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

    /// Where `bytes` the job read came from: memory without a fill (a cache
    /// hit), or elsewhere (under-store, DISK, a fill made for the read).
    pub fn record_source(&self, job: &str, bytes: u64, from_memory: bool) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let e =
            jobs.entry(job.to_string()).or_insert_with(|| JobAccess { job_id: job.to_string(), ..Default::default() });
        if from_memory {
            e.bytes_from_memory += bytes;
        } else {
            e.bytes_cold += bytes;
        }
    }

    pub fn snapshot(&self) -> Vec<JobAccess> {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<JobAccess> = jobs.values().cloned().collect();
        v.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        v
    }
}

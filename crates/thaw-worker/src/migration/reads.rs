//! Reads by jobs: what they make of queued migrations and of implicit
//! references (released once the job has read the whole block, or has left it
//! alone for the implicit delay).

use std::time::Instant;

use super::refs::{drop_ref, unqueue};
use super::{Effects, Migrator};

impl Migrator {
    /// A job read `bytes` of `block` (0 for a short-circuit open, which hands the
    /// whole file over). Drops a queued migration only this job wanted, releases
    /// an implicit reference once the job has read the whole block.
    pub fn on_read(&self, job: &str, block: u64, bytes: u64) -> Effects {
        let mut fx = Effects::default();
        if job.is_empty() {
            return fx;
        }
        let mut st = self.lock();
        st.recent_reads[0].insert((job.to_string(), block));
        if st.migrating_jobs.contains(job) {
            st.reads.insert((job.to_string(), block));
        }
        // A whole read (or an open of the whole file) makes a queued migration
        // pointless for the job; a partial one (a Parquet footer) does not.
        let whole = bytes == 0 || st.queued.get(&block).is_some_and(|&(s, k)| bytes >= st.queues[&s][&k].length);
        if whole {
            unqueue(&mut st, block, job, "read-first");
        }
        for a in st.active.values_mut() {
            // An implicit job that reads the block while it migrates needs no
            // reference to it afterwards; an explicit one keeps it until evict.
            // Not so a short-circuit open (bytes 0): it can land between the
            // copy's commit and its end, and hands the client a path it has yet
            // to open; dropping the block at the end would delete the file under
            // it. Its reference goes after the idle delay instead.
            if a.task.block == block && a.task.jobs.iter().any(|j| j.job_id == job && j.implicit) {
                if bytes > 0 {
                    a.task.read_by.insert(job.to_string());
                } else {
                    a.task.opened_by.insert(job.to_string());
                }
            }
        }
        let now = Instant::now();
        let mut release_now = false;
        if let Some(h) = st.held.get_mut(&block)
            && let Some(r) = h.refs.get_mut(job)
            && r.implicit
        {
            r.bytes_read += bytes;
            r.last_read = Some(now);
            release_now = r.bytes_read >= h.length;
        }
        if release_now {
            drop_ref(&mut st, block, job, &mut fx);
        }
        fx
    }

    /// Releases implicit references whose job has left the block alone for the
    /// configured delay.
    pub fn sweep(&self, now: Instant) -> Effects {
        let mut fx = Effects::default();
        let mut st = self.lock();
        let delay = self.config.implicit_delay;
        let idle: Vec<(u64, String)> = st
            .held
            .iter()
            .flat_map(|(b, h)| {
                h.refs
                    .iter()
                    .filter(|(_, r)| {
                        r.implicit && r.last_read.is_some_and(|t| now.saturating_duration_since(t) >= delay)
                    })
                    .map(|(j, _)| (*b, j.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (b, j) in idle {
            drop_ref(&mut st, b, &j, &mut fx);
        }
        fx
    }
}

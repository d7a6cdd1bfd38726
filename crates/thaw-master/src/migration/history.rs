//! Ended jobs, kept listed for a while: a job that was evicted or whose lease ran
//! out leaves `thaw jobs` at once in the papers' design (its state is only what
//! it still holds), so a Dask `compute()` that returned, or a `migrate --wait`
//! stopped by Ctrl-C, left no trace of what it moved and read. The master keeps
//! the last [`ENDED_JOBS`] ended jobs for [`ENDED_KEEP`] each, as they stood
//! when they ended. Bounded soft state like the rest of the jobs: a restarted
//! master starts with none.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use thaw_common::now_ms;
use thaw_common::proto::{EvictionMode, JobInfo};

use super::Migrations;

/// At most this many ended jobs are kept.
pub const ENDED_JOBS: usize = 100;
/// An ended job is listed for this long after it ended.
pub const ENDED_KEEP: Duration = Duration::from_secs(600);

/// The ended jobs, oldest first.
#[derive(Debug, Default)]
pub struct EndedJobs {
    jobs: VecDeque<(Instant, JobInfo)>,
}

impl EndedJobs {
    /// Keeps `info` (already marked ended), replacing an earlier job of that id.
    pub fn push(&mut self, info: JobInfo, now: Instant) {
        self.forget(&info.job_id);
        self.jobs.push_back((now, info));
        self.prune(now);
    }

    /// Drops the ended job `id` (a new job of that id started).
    pub fn forget(&mut self, id: &str) {
        self.jobs.retain(|(_, j)| j.job_id != id);
    }

    /// Drops what is older than [`ENDED_KEEP`] and beyond [`ENDED_JOBS`].
    pub fn prune(&mut self, now: Instant) {
        while self.jobs.front().is_some_and(|(at, _)| now.saturating_duration_since(*at) > ENDED_KEEP) {
            self.jobs.pop_front();
        }
        while self.jobs.len() > ENDED_JOBS {
            self.jobs.pop_front();
        }
    }

    pub fn get(&self, id: &str, now: Instant) -> Option<&JobInfo> {
        self.live(now).find(|j| j.job_id == id)
    }

    pub fn get_mut(&mut self, id: &str, now: Instant) -> Option<&mut JobInfo> {
        self.jobs
            .iter_mut()
            .filter(|(at, _)| now.saturating_duration_since(*at) <= ENDED_KEEP)
            .map(|(_, j)| j)
            .find(|j| j.job_id == id)
    }

    /// The ended jobs still kept at `now`, oldest first.
    pub fn live(&self, now: Instant) -> impl Iterator<Item = &JobInfo> {
        self.jobs.iter().filter(move |(at, _)| now.saturating_duration_since(*at) <= ENDED_KEEP).map(|(_, j)| j)
    }
}

impl Migrations {
    /// A live job as it stands, ended (`why`) now: what it had, moved and read,
    /// nothing held.
    pub(super) fn ended_info(&self, job_id: &str, why: &str) -> Option<JobInfo> {
        let job = self.jobs.get(job_id)?;
        let mut info = JobInfo {
            job_id: job_id.to_string(),
            submitted_ms: job.submitted_ms,
            eviction: if job.implicit { EvictionMode::Implicit } else { EvictionMode::Explicit } as i32,
            blocks: job.asked.0,
            bytes: job.asked.1,
            failure: job.failure.clone().unwrap_or_default(),
            origin: job.origin.clone(),
            tasks: job.tasks,
            ended: true,
            ended_ms: now_ms(),
            end_reason: why.to_string(),
            blocks_migrated: job.migrated.0,
            bytes_migrated: job.migrated.1,
            ..Default::default()
        };
        for jb in job.blocks.values() {
            if jb.read {
                info.blocks_read += 1;
                info.bytes_read += jb.length;
            } else if jb.failed {
                info.blocks_failed += 1;
            }
        }
        Some(info)
    }

    /// A job that ended lately, as it stood then.
    pub fn ended_job(&self, job_id: &str, now: Instant) -> Option<JobInfo> {
        self.ended.get(job_id, now).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(id: &str) -> JobInfo {
        JobInfo { job_id: id.into(), ended: true, ..Default::default() }
    }

    #[test]
    fn an_ended_job_is_kept_for_a_while_then_forgotten() {
        let t0 = Instant::now();
        let mut h = EndedJobs::default();
        h.push(ended("a"), t0);
        assert!(h.get("a", t0 + ENDED_KEEP).is_some());
        assert!(h.get("a", t0 + ENDED_KEEP + Duration::from_secs(1)).is_none());
        h.prune(t0 + ENDED_KEEP + Duration::from_secs(1));
        assert_eq!(h.live(t0).count(), 0);
    }

    #[test]
    fn only_the_last_ones_are_kept_and_an_id_once() {
        let t0 = Instant::now();
        let mut h = EndedJobs::default();
        for i in 0..ENDED_JOBS + 5 {
            h.push(ended(&format!("j{i}")), t0);
        }
        assert_eq!(h.live(t0).count(), ENDED_JOBS);
        assert!(h.get("j0", t0).is_none(), "the oldest went");
        h.push(ended("j10"), t0);
        assert_eq!(h.live(t0).filter(|j| j.job_id == "j10").count(), 1);
        h.forget("j10");
        assert!(h.get("j10", t0).is_none());
    }
}

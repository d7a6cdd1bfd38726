//! The reference lists (Ignem, section III-A4): which jobs expect each block held in
//! memory here, queued or running; adding a job, releasing one (explicitly, on
//! a read, or when the master forgets it), and who holds how much. Pure
//! functions over the migrator's state; the executor is in the parent module.

use std::collections::HashMap;
use std::time::Instant;

use thaw_common::proto::JobRef;
use thaw_common::size::format_size;

use super::{Effects, Held, Ref, State, event};

/// Adds `job` to a block's queued migration, running migration, or reference list.
pub(super) fn add_reference(st: &mut State, block: u64, job: &JobRef) {
    if let Some(&(s, k)) = st.queued.get(&block) {
        let task = st.queues.get_mut(&s).and_then(|q| q.get_mut(&k)).expect("indexed");
        if !task.jobs.iter().any(|j| j.job_id == job.job_id) {
            task.jobs.push(job.clone());
        }
        return;
    }
    for a in st.active.values_mut() {
        if a.task.block == block {
            if !a.task.jobs.iter().any(|j| j.job_id == job.job_id) {
                a.task.jobs.push(job.clone());
            }
            a.task.read_by.remove(&job.job_id);
            return;
        }
    }
    if let Some(h) = st.held.get_mut(&block) {
        h.refs.entry(job.job_id.clone()).or_insert(Ref { implicit: job.implicit, bytes_read: 0, last_read: None });
    }
}

/// Removes `job` from the given blocks (all it is on if `None`): queued
/// migrations nobody wants any more are dropped, released blocks evicted.
pub(super) fn release(st: &mut State, job: &str, blocks: Option<&[u64]>, fx: &mut Effects) {
    let held: Vec<u64> = match blocks {
        Some(b) => b.to_vec(),
        None => st.held.iter().filter(|(_, h)| h.refs.contains_key(job)).map(|(b, _)| *b).collect(),
    };
    for b in held {
        drop_ref(st, b, job, fx);
    }
    let queued: Vec<u64> = st.queued.keys().copied().filter(|b| blocks.is_none_or(|bs| bs.contains(b))).collect();
    for b in queued {
        unqueue(st, b, job, "evicted");
    }
    for a in st.active.values_mut() {
        if blocks.is_none_or(|bs| bs.contains(&a.task.block)) {
            a.task.jobs.retain(|j| j.job_id != job);
        }
    }
}

/// Takes `job` off `block`'s queued migration, if any; one no job wants any
/// more leaves the queue with `outcome`.
pub(super) fn unqueue(st: &mut State, block: u64, job: &str, outcome: &str) {
    let Some(&(source, k)) = st.queued.get(&block) else {
        return;
    };
    let q = st.queues.get_mut(&source).expect("indexed");
    let task = q.get_mut(&k).expect("indexed");
    task.jobs.retain(|j| j.job_id != job);
    if task.jobs.is_empty() {
        let task = q.remove(&k).expect("indexed");
        st.queued.remove(&block);
        st.ended(event(block, source.proto() as i32, task.length, outcome));
    }
}

pub(super) fn drop_ref(st: &mut State, block: u64, job: &str, fx: &mut Effects) {
    let Some(h) = st.held.get_mut(&block) else {
        return;
    };
    h.refs.remove(job);
    if h.refs.is_empty() {
        let h = st.held.remove(&block).expect("present");
        if h.migrated {
            st.used = st.used.saturating_sub(h.length);
            fx.evict.push(block);
        }
    }
}

/// Holds a block that is in memory already (not migrated) for `job`.
pub(super) fn hold_cached(st: &mut State, block: u64, length: u64, job: &JobRef) {
    let h = st.held.entry(block).or_insert_with(|| Held {
        length,
        refs: HashMap::new(),
        migrated: false,
        since: Instant::now(),
    });
    h.refs.entry(job.job_id.clone()).or_insert(Ref { implicit: job.implicit, bytes_read: 0, last_read: None });
}

pub(super) fn holders(st: &State) -> Vec<(String, u64)> {
    let mut by_job: HashMap<&str, u64> = HashMap::new();
    for h in st.held.values() {
        for j in h.refs.keys() {
            *by_job.entry(j).or_default() += h.length;
        }
    }
    for a in st.active.values() {
        for j in &a.task.jobs {
            *by_job.entry(&j.job_id).or_default() += a.task.length;
        }
    }
    let mut v: Vec<(String, u64)> = by_job.into_iter().map(|(j, b)| (j.to_string(), b)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// "jobs a (1.0 GiB), b (64.0 MiB)", at most five named.
pub(super) fn holders_text(st: &State) -> String {
    let h = holders(st);
    if h.is_empty() {
        return "no job (migrations in flight)".to_string();
    }
    let mut parts: Vec<String> = h.iter().take(5).map(|(j, b)| format!("{j} ({})", format_size(*b))).collect();
    if h.len() > 5 {
        parts.push(format!("{} more", h.len() - 5));
    }
    format!("job{} {}", if h.len() == 1 { "" } else { "s" }, parts.join(", "))
}

impl super::Migrator {
    /// Calls `evict` for each block `fx` releases that nothing here wants any
    /// more, under the state's lock: a command that wanted a block again
    /// after `fx` was decided (a new master's, for a block whose copy began
    /// before the purge and ended just after it) keeps it in memory.
    pub fn evict_unwanted(&self, fx: Effects, mut evict: impl FnMut(u64)) {
        let st = self.lock();
        for b in fx.evict {
            let wanted =
                st.held.contains_key(&b) || st.queued.contains_key(&b) || st.active.values().any(|a| a.task.block == b);
            if !wanted {
                evict(b);
            }
        }
    }
}

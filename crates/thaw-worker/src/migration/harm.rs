//! The do-not-harm rule (Ignem, section III-A3) and its switch: whether a
//! migration that finds the buffer full may evict a migrated block that a job
//! still expects, and if so which.
//!
//! With the rule (`--do-not-harm on`, the default) it may not: the migration
//! waits for room, since the block held is a sure hit and the newcomer only a
//! possible one. Off (`--do-not-harm off`, for the ablation), the migration
//! takes room from the migrated blocks least recently used (arrived or read),
//! the order a cache without the rule would keep: under a queue served in
//! priority order, those are the blocks the jobs will read first. Blocks held
//! but not migrated (in memory before any job asked) are never victims: they
//! are not in the buffer. Each victim leaves an event `evicted unread` naming
//! the jobs that expected it.
//!
//! [`victims`] is the decision, pure; the executor carries it out (see
//! `Migrator::next_at`).

use std::time::Instant;

use thaw_common::proto::MigrationSource;

use super::{Effects, Held, State};

/// A held migrated block as the decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    pub block: u64,
    pub length: u64,
    /// When it arrived, or a job last read it, whichever is later.
    pub last_use: Instant,
}

/// The blocks to evict so that `need` more bytes fit, least recently used
/// first (block id breaking ties); `None` if all of them together free too
/// little (then nothing is evicted).
pub fn victims(held: &[Holding], need: u64) -> Option<Vec<u64>> {
    if need == 0 {
        return Some(Vec::new());
    }
    let mut order: Vec<&Holding> = held.iter().collect();
    order.sort_by_key(|h| (h.last_use, h.block));
    let mut freed = 0u64;
    let mut out = Vec::new();
    for h in order {
        freed += h.length;
        out.push(h.block);
        if freed >= need {
            return Some(out);
        }
    }
    None
}

fn holding(block: u64, h: &Held) -> Holding {
    let read = h.refs.values().filter_map(|r| r.last_read).max();
    Holding { block, length: h.length, last_use: read.map_or(h.since, |r| r.max(h.since)) }
}

/// Without the rule: makes room for `need` bytes in the buffer by evicting
/// migrated blocks jobs still expect ([`victims`]); they go into `fx` for the
/// tier and leave an event each. Whether the room was made.
pub(super) fn make_room(st: &mut State, need: u64, fx: &mut Effects) -> bool {
    let held: Vec<Holding> = st.held.iter().filter(|(_, h)| h.migrated).map(|(b, h)| holding(*b, h)).collect();
    let Some(blocks) = victims(&held, need) else {
        return false;
    };
    for b in blocks {
        let h = st.held.remove(&b).expect("listed");
        st.used = st.used.saturating_sub(h.length);
        let mut jobs: Vec<String> = h.refs.into_keys().collect();
        jobs.sort();
        tracing::debug!(block = b, ?jobs, "do-not-harm off: an unread migrated block evicted to make room");
        // The block's source is not kept once it is held: unspecified.
        let mut e = super::event(b, MigrationSource::Unspecified as i32, h.length, "evicted unread");
        e.jobs = jobs;
        st.events.push(e);
        st.evicted_unread += 1;
        fx.evict.push(b);
    }
    true
}

impl super::Migrator {
    /// Runs `f` with the test "may no migration evict this block here", for
    /// the tier use the master sees (its room for migrations): the blocks jobs
    /// expect, with the rule; without it only those not migrated (migrated
    /// ones count as evictable, which they are to a migration).
    pub fn protecting_from_migrations<R>(&self, f: impl FnOnce(&dyn Fn(u64) -> bool) -> R) -> R {
        let st = self.lock();
        let rule = self.config.do_not_harm;
        f(&|b| st.held.get(&b).is_some_and(|h| rule || !h.migrated))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::migration::{MigrationConfig, Migrator, Source};
    use thaw_common::proto::{HeartbeatResponse, JobRef, MigrationCommand};

    #[test]
    fn victims_are_the_least_recently_used_and_only_as_many_as_needed() {
        let t = Instant::now();
        let at = |s| t + Duration::from_secs(s);
        let held = [
            Holding { block: 1, length: 10, last_use: at(5) },
            Holding { block: 2, length: 10, last_use: at(1) },
            Holding { block: 3, length: 10, last_use: at(9) },
        ];
        assert_eq!(victims(&held, 5), Some(vec![2]));
        assert_eq!(victims(&held, 11), Some(vec![2, 1]));
        assert_eq!(victims(&held, 30), Some(vec![2, 1, 3]));
        assert_eq!(victims(&held, 31), None, "too little: nothing");
        assert_eq!(victims(&held, 0), Some(vec![]));
    }

    fn cmd(block: u64, seq: u64, job: &str) -> MigrationCommand {
        MigrationCommand {
            block_id: block,
            length: 100,
            source: thaw_common::proto::MigrationSource::Disk as i32,
            jobs: vec![JobRef { job_id: job.into(), implicit: true, job_bytes: 1, submitted_ms: seq }],
            seq,
            ..Default::default()
        }
    }

    /// Two blocks of job `a` (to be read first) fill a buffer of two, and `a`
    /// reads part of block 1; a block of job `b` arrives. Returns the migrator,
    /// the migration started, and what starting it evicted.
    fn full_buffer_then_another(do_not_harm: bool) -> (Migrator, Option<u64>, Effects) {
        let config = MigrationConfig { buffer_limit: Some(200), do_not_harm, ..Default::default() };
        let m = Migrator::new(config, 200);
        let live = |r: HeartbeatResponse| HeartbeatResponse { migrating_jobs: vec!["a".into(), "b".into()], ..r };
        for b in 1..=2 {
            m.apply(&live(HeartbeatResponse { migrations: vec![cmd(b, b, "a")], ..Default::default() }), |_| None);
            assert!(m.next(Source::Disk).is_some());
            m.finish(Source::Disk, Ok(true));
        }
        // Block 1 was read partly since it arrived: block 2 is the least
        // recently used, though it arrived later.
        std::thread::sleep(Duration::from_millis(2));
        m.on_read("a", 1, 10);
        m.report();
        m.apply(&live(HeartbeatResponse { migrations: vec![cmd(3, 3, "b")], ..Default::default() }), |_| None);
        let started = m.next(Source::Disk).map(|t| t.block);
        let fx = m.take_evictions();
        (m, started, fx)
    }

    #[test]
    fn with_the_rule_a_full_buffer_of_unread_blocks_makes_the_migration_wait() {
        let (m, started, fx) = full_buffer_then_another(true);
        assert_eq!(started, None, "waits for room");
        assert!(fx.evict.is_empty());
        assert_eq!(m.held().len(), 2);
        assert!(m.report().0.events.is_empty());
    }

    #[test]
    fn without_the_rule_the_migration_evicts_the_least_recently_used_unread_block() {
        let (m, started, fx) = full_buffer_then_another(false);
        assert_eq!(started, Some(3));
        assert_eq!(fx.evict, vec![2], "block 2: not touched since it arrived; block 1 was read since");
        let held = m.held();
        assert!(held.contains_key(&1) && !held.contains_key(&2));
        let events = m.report().0.events;
        let e = events.iter().find(|e| e.outcome == "evicted unread").expect("an event");
        assert_eq!((e.block_id, e.jobs.clone()), (2, vec!["a".to_string()]));
        assert_eq!(m.evicted_unread(), 1);
    }
}

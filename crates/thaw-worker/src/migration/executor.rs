//! The executor: which migrations a device runs next, how their ends are
//! booked, and the loop that runs them (Ignem, section III-A3; DYRS, section III-B).
//!
//! Improvement on the papers, for datasets of small files: a device runs one
//! *order* at a time, where the papers run one block. An order is one block,
//! or, when the head of the queue is small ([`SMALL_BLOCK`]), the run of small
//! blocks at the head of the queue, in queue order, up to [`BATCH_BLOCKS`]
//! blocks and [`BATCH_BYTES`] (at most one default block's worth of device
//! time), copied [`BATCH_STREAMS`] at a time on a real device (one at a time
//! through a device model, whose seeks are the model's to charge). Run one by
//! one, a 64 KiB file's migration was all fixed cost (open, read, commit, a
//! round trip to the master each), and 100,000 of them kept a disk that a
//! parallel `cat` reads at 400 MiB/s below a tenth of that. The queue order
//! (smaller jobs first), the do-not-harm rule and the buffer are unchanged; the
//! device's estimate is fed each block's share of its order's time, which is
//! what one more block in the queue costs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thaw_common::now_ms;
use thaw_common::size::format_size;

use super::estimate::Estimate;
use super::refs::{hold_cached, holders_text};
use super::{Active, Effects, Held, Migrator, NO_ROOM_TRIES, Ref, Source, Task, event, harm};

/// A block at most this long, and at most a quarter of the file system's
/// block size (a small file, or the short tail of a large one), may share an
/// order with others. Blocks of one large file are copied one after another
/// as before: read-ahead past one block's range, run beside the next block's
/// copy, would leave that range in the page cache after its drop-behind.
pub const SMALL_BLOCK: u64 = 4 << 20;

/// The most blocks in one order.
pub const BATCH_BLOCKS: usize = 256;

/// The most bytes in one order.
pub const BATCH_BYTES: u64 = 64 << 20;

/// Copies of one order running at once on a real device (a hard disk sorts
/// them in its queue). A parallel `cat` of small files ran fastest here at 8;
/// with commits out of the copy slots 16 did better (100,000 files of 64 KiB:
/// 25.9 s of orders against 29.4 s at 8).
pub const BATCH_STREAMS: usize = 16;

/// Blocks of one order in flight per copy stream: a block whose bytes are in
/// lets its stream go while its commit is out (see
/// [`crate::group_commit`]), so the copies do not wait for the master.
pub const COMMIT_DEPTH: usize = 4;

impl Migrator {
    /// The next migration for `source`, if one is queued, none runs on the
    /// device, and the head of the queue fits in the buffer. The caller runs it
    /// and calls [`Migrator::finish`].
    pub fn next(&self, source: Source) -> Option<Task> {
        self.next_at(source, Instant::now())
    }

    /// [`Migrator::next`] at `now`.
    pub fn next_at(&self, source: Source, now: Instant) -> Option<Task> {
        self.next_order_at(source, now, 1).pop()
    }

    /// The next order for `source` (see the module's doc): empty if none is
    /// queued, one runs on the device, or the head of the queue does not fit in
    /// the buffer. The head waits for room (never evicting a referenced block:
    /// do-not-harm), but only while room frees up at least every `room_wait`;
    /// past that the heads that do not fit fail, with who holds the buffer.
    /// Blocks after the head join only if they fit now.
    pub fn next_order_at(&self, source: Source, now: Instant, max_blocks: usize) -> Vec<Task> {
        let mut st = self.lock();
        if st.active.values().any(|a| a.task.source == source) {
            return Vec::new();
        }
        loop {
            let Some((&k, head)) = st.queues.get(&source).and_then(|q| q.iter().next()) else {
                return Vec::new();
            };
            let length = head.length;
            let why = if length > self.limit {
                // It could never fit: fail it, so the master tries another worker.
                format!(
                    "failed: block of {} is larger than the migration buffer ({})",
                    format_size(length),
                    format_size(self.limit)
                )
            } else if st.used + length > self.limit {
                if !self.config.do_not_harm {
                    let need = st.used + length - self.limit;
                    let mut fx = Effects { evict: std::mem::take(&mut st.harmed) };
                    let made = harm::make_room(&mut st, need, &mut fx);
                    st.harmed = fx.evict;
                    if made {
                        continue;
                    }
                }
                let used = st.used;
                let since = st.room_wait.entry(source).or_insert((now, used));
                if used < since.1 {
                    *since = (now, used); // room freed up since: wait on
                }
                let waited = now.saturating_duration_since(since.0);
                if waited < self.config.room_wait {
                    return Vec::new();
                }
                format!(
                    "failed: no room in the migration buffer for {} in {:.1}s: {} of {} is held by {}; it frees up when they read or evict their blocks",
                    format_size(length),
                    waited.as_secs_f64(),
                    format_size(used),
                    format_size(self.limit),
                    holders_text(&st)
                )
            } else {
                break;
            };
            let task = st.queues.get_mut(&source).expect("present").remove(&k).expect("present");
            st.queued.remove(&task.block);
            tracing::info!(block = task.block, why, "migration fails");
            let waited = st.room_wait.get(&source).map_or(Duration::ZERO, |w| now.saturating_duration_since(w.0));
            let mut e = event(task.block, source.proto() as i32, task.length, &why);
            e.start_ms = e.end_ms.saturating_sub(waited.as_millis() as u64);
            st.ended(e);
        }
        st.room_wait.remove(&source);
        let mut order: Vec<Task> = Vec::new();
        let mut bytes = 0;
        while let Some((&k, head)) = st.queues.get(&source).and_then(|q| q.iter().next()) {
            let small = |len: u64| len <= SMALL_BLOCK && (st.block_size == 0 || len * 4 <= st.block_size);
            let joins = order.is_empty()
                || (order.len() < max_blocks
                    && small(order[0].length)
                    && small(head.length)
                    && bytes + head.length <= BATCH_BYTES
                    && st.used + head.length <= self.limit);
            if !joins {
                break;
            }
            let mut task = st.queues.get_mut(&source).expect("present").remove(&k).expect("present");
            task.first_try.get_or_insert(now);
            st.queued.remove(&task.block);
            st.used += task.length;
            bytes += task.length;
            st.active.insert(task.block, Active { task: task.clone(), started: now });
            order.push(task);
        }
        order
    }

    /// Records the end of `source`'s running migration (the only one: see
    /// [`Migrator::finish_block`]).
    pub fn finish(&self, source: Source, outcome: Result<bool, (bool, String)>) -> Effects {
        let block = self.lock().active.values().find(|a| a.task.source == source).map(|a| a.task.block);
        match block {
            Some(b) => self.finish_block(b, outcome, None),
            None => Effects::default(),
        }
    }

    /// Records the end of the running migration of `block`. `Ok(true)`: the
    /// block is now in memory by this migration; `Ok(false)`: it was there
    /// already; `Err(retry)`: it failed, and `retry` says whether it goes back
    /// in the queue (no room in the tier yet) or is reported failed. `share`:
    /// its part of its order's time, for the device's estimate (else its own).
    pub fn finish_block(&self, block: u64, outcome: Result<bool, (bool, String)>, share: Option<Duration>) -> Effects {
        let mut fx = Effects::default();
        let mut st = self.lock();
        let Some(Active { task, started }) = st.active.remove(&block) else {
            return fx;
        };
        let source = task.source;
        st.used = st.used.saturating_sub(task.length);
        let took = started.elapsed();
        let start_ms = now_ms().saturating_sub(took.as_millis() as u64);
        // A copy begun for the master before a purge that no command since
        // adopted: the master now in charge never asked for it, so it hears
        // nothing of its end (a "done" would end a migration of that block it
        // has bound here since, for a copy dropped below).
        let stale = task.generation != st.generation;
        // From its first try: the retries for room are part of its time.
        let tried = task.first_try.map_or(took, |t| t.elapsed());
        match outcome {
            Err((true, _)) if task.generation == st.generation && task.no_room + 1 < NO_ROOM_TRIES => {
                let mut task = task;
                task.no_room += 1;
                st.queued.insert(task.block, (source, task.key));
                st.queues.entry(source).or_default().insert(task.key, task);
            }
            Err((no_room, why)) => {
                let why = if no_room {
                    format!("no room in MEM for {} in {:.1}s: {why}", format_size(task.length), tried.as_secs_f64())
                } else {
                    why
                };
                let mut e = event(task.block, source.proto() as i32, task.length, &format!("failed: {why}"));
                e.start_ms = now_ms().saturating_sub(tried.as_millis() as u64);
                if !stale {
                    st.ended(e);
                }
            }
            Ok(false) => {
                // In memory already (a read cached it meanwhile): held for the
                // jobs, as cache.
                let mut e = event(task.block, source.proto() as i32, task.length, "done");
                e.start_ms = start_ms;
                if !stale {
                    st.ended(e);
                    for j in task.jobs.iter().filter(|j| !task.read_by.contains(&j.job_id)) {
                        hold_cached(&mut st, task.block, task.length, j);
                    }
                }
            }
            Ok(migrated) => {
                if migrated {
                    let largest = st.block_size;
                    let est = st.estimates.entry(source).or_insert(Estimate { largest, ..Default::default() });
                    est.add(task.length, share.unwrap_or(took).as_nanos() as f64);
                }
                let mut e = event(task.block, source.proto() as i32, task.length, "done");
                e.start_ms = start_ms;
                if !stale {
                    st.ended(e);
                }
                if migrated {
                    let refs: HashMap<String, Ref> = task
                        .jobs
                        .iter()
                        .filter(|j| !stale && !task.read_by.contains(&j.job_id))
                        .map(|j| {
                            let last_read = task.opened_by.contains(&j.job_id).then(Instant::now);
                            (j.job_id.clone(), Ref { implicit: j.implicit, bytes_read: 0, last_read })
                        })
                        .collect();
                    if refs.is_empty() {
                        fx.evict.push(task.block);
                    } else {
                        st.used += task.length;
                        let held = Held { length: task.length, refs, migrated: true, since: Instant::now() };
                        st.held.insert(task.block, held);
                    }
                }
            }
        }
        drop(st);
        self.wake.notify_waiters();
        fx
    }
}

/// Runs one device's migrations until shutdown: whenever the device is free and
/// the head of its queue fits, the next order runs.
pub(crate) async fn run_device(
    worker: Arc<crate::Worker>,
    source: Source,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let m = &worker.migrator;
    loop {
        let woken = m.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let order = m.next_order_at(source, Instant::now(), BATCH_BLOCKS);
        if !order.is_empty() {
            worker.carry_out(m.take_evictions());
            // The last queued block started: ask for more now, not when it ends.
            m.ran_dry(source);
            let streams = if worker.modelled(source) { 1 } else { BATCH_STREAMS };
            let started = Instant::now();
            let n = order.len();
            let outcomes = run_order(&worker, order, streams).await;
            let took = started.elapsed();
            tracing::debug!(?source, blocks = n, streams, took_ms = took.as_millis() as u64, "order copied");
            let share = (n > 1).then(|| took / n as u32);
            let mut retry_later = false;
            for (block, outcome) in outcomes {
                if let Err((true, why)) = &outcome {
                    tracing::debug!(block, why, "no room in MEM yet: migration waits");
                    retry_later = true;
                }
                let fx = m.finish_block(block, outcome, share);
                worker.carry_out(fx);
            }
            if retry_later {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
            continue;
        }
        m.ran_dry(source);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = &mut woken => {}
            // A safety net: room can also free up without a wake (a deleted file).
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

type Ended = (u64, Result<bool, (bool, String)>);

/// Copies an order's blocks, `streams` at a time, started in queue order (a
/// slow one does not hold back the start of those after it).
async fn run_order(worker: &Arc<crate::Worker>, order: Vec<Task>, streams: usize) -> Vec<Ended> {
    use futures::StreamExt;
    if order.len() == 1 {
        let task = &order[0];
        return vec![(task.block, worker.migrate_block(task, None).await)];
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(streams));
    futures::stream::iter(order)
        .map(|task| {
            let slots = slots.clone();
            async move { (task.block, worker.migrate_block(&task, Some(slots)).await) }
        })
        .buffer_unordered(streams * COMMIT_DEPTH)
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use thaw_common::proto::{HeartbeatResponse, JobRef, MigrationCommand, MigrationSource};

    use super::*;
    use crate::migration::MigrationConfig;

    const MIB: u64 = 1 << 20;

    fn cmd(block: u64, seq: u64, length: u64) -> MigrationCommand {
        let job = JobRef { job_id: "j".into(), implicit: false, job_bytes: 1, submitted_ms: 1 };
        MigrationCommand {
            block_id: block,
            length,
            source: MigrationSource::Disk as i32,
            jobs: vec![job],
            seq,
            smallest_job_first: true,
            ..Default::default()
        }
    }

    /// A migrator holding `blocks` (id, length) queued on DISK, in that order.
    fn queued(limit: u64, blocks: &[(u64, u64)]) -> Migrator {
        let m = Migrator::new(MigrationConfig { buffer_limit: Some(limit), ..Default::default() }, limit);
        let migrations = blocks.iter().enumerate().map(|(i, &(b, len))| cmd(b, i as u64, len)).collect();
        let resp = HeartbeatResponse { migrations, migrating_jobs: vec!["j".into()], ..Default::default() };
        m.apply(&resp, |_| None);
        m
    }

    fn ids(order: &[Task]) -> Vec<u64> {
        order.iter().map(|t| t.block).collect()
    }

    #[test]
    fn small_blocks_at_the_head_go_as_one_order_in_queue_order_and_a_large_one_alone() {
        let now = Instant::now();
        let m = queued(1 << 30, &[(1, 64 << 10), (2, 64 << 10), (3, 128 * MIB), (4, 64 << 10)]);
        // The run of small blocks at the head, stopped by the large one.
        let order = m.next_order_at(Source::Disk, now, BATCH_BLOCKS);
        assert_eq!(ids(&order), vec![1, 2]);
        assert_eq!(m.buffer_used(), 128 << 10, "the whole order counts in the buffer");
        // One order per device at a time.
        assert!(m.next_order_at(Source::Disk, now, BATCH_BLOCKS).is_empty());
        assert_eq!(m.active(Source::Disk), Some(1));
        assert!(m.copying(Source::Disk, 2));
        m.finish_block(1, Ok(true), Some(Duration::from_millis(1)));
        assert!(m.next_order_at(Source::Disk, now, BATCH_BLOCKS).is_empty(), "block 2 still copies");
        m.finish_block(2, Ok(true), Some(Duration::from_millis(1)));
        // A large head goes alone, and the small one behind it waits for it.
        assert_eq!(ids(&m.next_order_at(Source::Disk, now, BATCH_BLOCKS)), vec![3]);
        assert!(m.next_order_at(Source::Disk, now, BATCH_BLOCKS).is_empty());
        m.finish(Source::Disk, Ok(true));
        assert_eq!(ids(&m.next_order_at(Source::Disk, now, BATCH_BLOCKS)), vec![4]);
    }

    #[test]
    fn an_order_stops_at_its_block_and_byte_caps_and_at_the_buffer() {
        let now = Instant::now();
        // Blocks: BATCH_BLOCKS + 10 of 64 KiB.
        let many: Vec<(u64, u64)> = (1..=BATCH_BLOCKS as u64 + 10).map(|b| (b, 64 << 10)).collect();
        let m = queued(1 << 30, &many);
        assert_eq!(m.next_order_at(Source::Disk, now, BATCH_BLOCKS).len(), BATCH_BLOCKS);
        // Bytes: 4 MiB blocks fill BATCH_BYTES with 16.
        let big: Vec<(u64, u64)> = (1..=40).map(|b| (b, SMALL_BLOCK)).collect();
        let m = queued(1 << 30, &big);
        assert_eq!(m.next_order_at(Source::Disk, now, BATCH_BLOCKS).len(), (BATCH_BYTES / SMALL_BLOCK) as usize);
        // The buffer: only what fits now joins the head (no waiting for room).
        let m = queued(6 * MIB, &big);
        assert_eq!(ids(&m.next_order_at(Source::Disk, now, BATCH_BLOCKS)), vec![1]);
        let small: Vec<(u64, u64)> = (1..=10).map(|b| (b, MIB)).collect();
        let m = queued(5 * MIB / 2, &small);
        assert_eq!(ids(&m.next_order_at(Source::Disk, now, BATCH_BLOCKS)), vec![1, 2]);
        // Blocks over a quarter of the block size are a large file's: one at a time.
        let m = queued(1 << 30, &small);
        m.set_block_size(2 * MIB);
        assert_eq!(ids(&m.next_order_at(Source::Disk, now, BATCH_BLOCKS)), vec![1]);
        let m = queued(1 << 30, &small);
        m.set_block_size(128 * MIB);
        assert_eq!(m.next_order_at(Source::Disk, now, BATCH_BLOCKS).len(), 10);
        // `next` keeps the papers' one block at a time.
        let m = queued(1 << 30, &small);
        assert_eq!(m.next(Source::Disk).map(|t| t.block), Some(1));
        assert!(m.next(Source::Disk).is_none());
    }

    #[test]
    fn each_block_of_an_order_feeds_the_estimate_its_share_of_the_time() {
        let now = Instant::now();
        let m = queued(1 << 30, &[(1, 64 << 10), (2, 64 << 10), (3, 64 << 10), (4, 64 << 10)]);
        m.set_block_size(128 * MIB);
        let order = m.next_order_at(Source::Disk, now, BATCH_BLOCKS);
        assert_eq!(order.len(), 4);
        for t in &order {
            m.finish_block(t.block, Ok(true), Some(Duration::from_millis(2)));
        }
        let st = m.lock();
        let per_migration = st.estimates[&Source::Disk].per_migration.expect("measured");
        assert!((per_migration - 2e6).abs() < 1.0, "{per_migration}");
    }
}

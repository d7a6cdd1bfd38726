//! The worker's Prometheus metrics, read from its live state at each scrape:
//! tiers (the same numbers as `thaw status`), reads by source, migrations and
//! their estimates (DYRS, section IV-A), and data request durations.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use thaw_common::metrics::{Collector, DescriptorEncoder, Labels, Registry, Scrape, Unit, label};

use crate::Worker;
use crate::migration::{Outcome, Source};
use crate::stats::ReadSource;

struct WorkerCollector(Arc<Worker>);

impl fmt::Debug for WorkerCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WorkerCollector({})", self.0.address)
    }
}

fn tier(name: &str) -> Labels {
    label("tier", name.to_ascii_lowercase())
}

impl Collector for WorkerCollector {
    fn encode(&self, e: DescriptorEncoder) -> fmt::Result {
        let w = &self.0;
        let mut s = Scrape(e);
        let tiers: Vec<_> = w.tiers().map(|t| (t.name(), w.tier_usage(t))).collect();
        let each = |f: fn(&thaw_common::proto::TierUsage) -> u64| -> Vec<(Labels, u64)> {
            tiers.iter().map(|(n, u)| (tier(n), f(u))).collect()
        };
        s.gauge(
            "thaw_worker_tier_capacity",
            "Configured capacity of the tier.",
            Some(Unit::Bytes),
            each(|u| u.capacity),
        )?;
        s.gauge(
            "thaw_worker_tier_used",
            "Bytes of blocks stored in the tier, and being written to it.",
            Some(Unit::Bytes),
            each(|u| u.used),
        )?;
        s.gauge(
            "thaw_worker_tier_stored",
            "What the tier's blocks are: held (a job still expects them), pinned (no other copy), evictable (cache).",
            Some(Unit::Bytes),
            tiers.iter().flat_map(|(n, u)| {
                [("held", u.held), ("pinned", u.pinned), ("evictable", u.evictable)].map(|(kind, v)| {
                    let mut l = tier(n);
                    l.push(("kind", kind.into()));
                    (l, v)
                })
            }),
        )?;
        s.gauge("thaw_worker_tier_blocks", "Blocks stored in the tier.", None, each(|u| u.blocks))?;
        s.counter(
            "thaw_worker_tier_evictions",
            "Blocks the tier's replacement policy evicted to make room.",
            None,
            each(|u| u.evictions),
        )?;
        s.counter(
            "thaw_worker_tier_evicted",
            "Bytes the tier's replacement policy evicted to make room.",
            Some(Unit::Bytes),
            each(|u| u.evicted_bytes),
        )?;
        // Only the tier reads cache into (MEM) counts hits and misses.
        let cache: Vec<_> = tiers.iter().filter(|(n, _)| *n == "MEM").collect();
        s.counter(
            "thaw_worker_cache_lookups",
            "Reads of blocks by the tier that caches (MEM): hit (served from it) or miss (served from DISK or the under-store).",
            None,
            cache.iter().flat_map(|(n, u)| {
                [("hit", u.cache_hits), ("miss", u.cache_misses)].map(|(r, v)| {
                    let mut l = tier(n);
                    l.push(("result", r.into()));
                    (l, v)
                })
            }),
        )?;
        s.counter(
            "thaw_worker_cache_fills_declined",
            "Fills of a missed block the cache policy did not make: dropped (not worth its victims) or skipped (the application's caching probability left it out).",
            None,
            cache.iter().flat_map(|(n, u)| {
                [("dropped", u.cache_drops), ("skipped", u.cache_skipped)].map(|(r, v)| {
                    let mut l = tier(n);
                    l.push(("reason", r.into()));
                    (l, v)
                })
            }),
        )?;
        let reads: Vec<_> =
            ReadSource::ALL.iter().map(|&r| (label("source", r.name()), w.stats.reads_from(r))).collect();
        const SOURCES: &str = "short_circuit: block files opened for a client on this host, which reads them itself (counted at the open, with the block's length; the client's reads are not seen here); remote_mem: sent from the MEM tier; disk: sent from the DISK tier; under_store: read from the under-store (streamed through, or filled into a tier for the read).";
        s.counter(
            "thaw_worker_reads",
            &format!("Block reads this worker served, by where the bytes came from. {SOURCES}"),
            None,
            reads.iter().map(|(l, (n, _))| (l.clone(), *n)),
        )?;
        s.counter(
            "thaw_worker_read",
            &format!("Bytes of the block reads this worker served, by where they came from. {SOURCES}"),
            Some(Unit::Bytes),
            reads.iter().map(|(l, (_, b))| (l.clone(), *b)),
        )?;
        let (fills, fill_bytes) = w.stats.fills();
        const FILLS: &str = "filled from the under-store into a tier for readers: a read through this worker, a local reader's request before its short-circuit open, a partial read's fill behind it (migrations count in thaw_worker_migrations_ended_total).";
        s.counter("thaw_worker_read_fills", &format!("Blocks {FILLS}"), None, [(Labels::new(), fills)])?;
        s.counter(
            "thaw_worker_read_fill",
            &format!("Bytes of blocks {FILLS}"),
            Some(Unit::Bytes),
            [(Labels::new(), fill_bytes)],
        )?;
        let jobs = w.stats.snapshot();
        s.counter(
            "thaw_worker_writes",
            "Files written through this worker.",
            None,
            [(Labels::new(), jobs.iter().map(|j| j.writes).sum::<u64>())],
        )?;
        s.counter(
            "thaw_worker_written",
            "Bytes of files written through this worker.",
            Some(Unit::Bytes),
            [(Labels::new(), jobs.iter().map(|j| j.bytes_written).sum::<u64>())],
        )?;
        let m = &w.migrator;
        s.gauge(
            "thaw_worker_migration_buffer_used",
            "Memory held by migrated blocks jobs still expect and by running migrations (Ignem, section III-B2).",
            Some(Unit::Bytes),
            [(Labels::new(), m.buffer_used())],
        )?;
        s.gauge(
            "thaw_worker_migration_buffer_limit",
            "Most memory migrations may hold.",
            Some(Unit::Bytes),
            [(Labels::new(), m.buffer_limit())],
        )?;
        let devices = m.devices();
        s.gauge(
            "thaw_worker_migrations",
            "Migrations bound to this worker, by device they read (disk: the DISK tier, ufs: the under-store): queued, or running (one at a time per device).",
            None,
            devices.iter().flat_map(|(d, e)| {
                [("queued", e.queued), ("running", e.active)].map(|(state, v)| {
                    (vec![("device", d.name().to_string()), ("state", state.to_string())], v)
                })
            }),
        )?;
        // Every device and outcome from the start (at 0), so rates work at once.
        let mut ended: BTreeMap<(Option<Source>, Outcome), u64> =
            Source::ALL.iter().flat_map(|&d| Outcome::ALL.map(|o| ((Some(d), o), 0))).collect();
        for (d, o, n) in m.ended() {
            *ended.entry((d, o)).or_default() += n;
        }
        s.counter(
            "thaw_worker_migrations_ended",
            "Migrations ended on this worker, by device and outcome: done (the block is in memory), failed, dropped (no job wanted it any more).",
            None,
            ended.into_iter().map(|((d, o), n)| {
                let device = d.map_or("unknown", |d| d.name());
                (vec![("device", device.to_string()), ("outcome", o.name().to_string())], n)
            }),
        )?;
        let block = m.block_size();
        s.gauge(
            "thaw_worker_migration_estimate",
            "Expected duration of migrating one block of the default block size from the device: max(fixed cost, size x time per byte), EWMAs of measured migrations (DYRS, section IV-A), raised while one runs past it. Absent until the device has migrated a block.",
            Some(Unit::Seconds),
            devices.iter().filter(|(_, e)| e.ns_per_byte > 0.0 || e.ns_per_migration > 0.0).map(|(d, e)| {
                let ns = e.ns_per_migration.max(block as f64 * e.ns_per_byte);
                (label("device", d.name()), ns / 1e9)
            }),
        )?;
        Ok(())
    }
}

/// The worker's registry: its live state and its data request durations.
pub fn registry(worker: &Arc<Worker>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(WorkerCollector(worker.clone())));
    worker.request_latency.register(
        &mut r,
        "thaw_worker_data_request_duration",
        "Duration of data service requests by kind, from the request read to the last byte sent or received (a read_block includes sending the block).",
    );
    r
}

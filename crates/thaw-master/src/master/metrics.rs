//! What the master's metrics read from its state at each scrape.

use super::*;
use std::collections::BTreeMap;

/// The master's state in numbers, one read lock's worth.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    pub workers_live: usize,
    pub workers_dead: usize,
    pub files: usize,
    /// Blocks with a replica: all, in MEM, on DISK.
    pub blocks: [usize; 3],
    /// Live jobs by eviction mode: explicit, implicit.
    pub jobs: [usize; 2],
    /// Migrations pending at the master, bound to a worker.
    pub migrations: [usize; 2],
    /// Per tier (MEM, DISK): capacity and use summed over live workers.
    pub tiers: [(u64, u64); 2],
    /// Live jobs by submitter (see [`submitter`]), at most [`MAX_SUBMITTERS`]
    /// of them, the rest summed as `other`.
    pub submitters: Vec<SubmitterJobs>,
}

/// Live jobs of one submitter, and their bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubmitterJobs {
    pub submitter: String,
    pub jobs: usize,
    /// Bytes the jobs asked for.
    pub bytes: u64,
    /// Bytes migrated into memory for them.
    pub migrated_bytes: u64,
}

/// Most submitters the metrics name; more would let clients grow the label set
/// without bound (an origin is free text).
pub const MAX_SUBMITTERS: usize = 16;

/// Longest submitter label, in characters.
const MAX_SUBMITTER_CHARS: usize = 64;

/// Who submitted a job, from its origin: its first two words without trailing
/// punctuation (`spark <app id>` of a Spark query or RDD job, `dask <client>`
/// of a Dask graph, `cli <user>`...), `none` for an empty origin.
pub fn submitter(origin: &str) -> String {
    let words: Vec<&str> =
        origin.split_whitespace().take(2).map(|w| w.trim_end_matches([',', ';', ':', '.'])).collect();
    let s = words.join(" ");
    if s.is_empty() {
        return "none".to_string();
    }
    s.chars().take(MAX_SUBMITTER_CHARS).collect()
}

/// Groups `(origin, bytes, migrated bytes)` of live jobs by submitter: the
/// [`MAX_SUBMITTERS`] - 1 with most jobs by name (ties by name), the rest as
/// `other`, so the label set stays bounded whatever clients send.
pub fn by_submitter<'a>(jobs: impl Iterator<Item = (&'a str, u64, u64)>) -> Vec<SubmitterJobs> {
    let mut all: BTreeMap<String, SubmitterJobs> = BTreeMap::new();
    for (origin, bytes, migrated) in jobs {
        let name = submitter(origin);
        let e = all.entry(name.clone()).or_insert_with(|| SubmitterJobs { submitter: name, ..Default::default() });
        e.jobs += 1;
        e.bytes += bytes;
        e.migrated_bytes += migrated;
    }
    let mut v: Vec<SubmitterJobs> = all.into_values().collect();
    if v.len() <= MAX_SUBMITTERS {
        return v;
    }
    v.sort_by(|a, b| b.jobs.cmp(&a.jobs).then_with(|| a.submitter.cmp(&b.submitter)));
    let mut other = SubmitterJobs { submitter: "other".to_string(), ..Default::default() };
    for s in v.drain(MAX_SUBMITTERS - 1..) {
        other.jobs += s.jobs;
        other.bytes += s.bytes;
        other.migrated_bytes += s.migrated_bytes;
    }
    v.push(other);
    v
}

impl Master {
    pub fn gauges(&self) -> Gauges {
        let st = self.read();
        let mut g = Gauges { files: st.ns.file_count(), blocks: st.cluster.block_counts(), ..Default::default() };
        (g.jobs, g.migrations) = st.migrations.counts();
        g.submitters = by_submitter(st.migrations.job_origins());
        for w in st.cluster.workers() {
            if !w.alive {
                g.workers_dead += 1;
                continue;
            }
            g.workers_live += 1;
            for (i, t) in [Tier::Mem, Tier::Disk].into_iter().enumerate() {
                if let Some(u) = w.tier(t) {
                    g.tiers[i].0 += u.capacity;
                    g.tiers[i].1 += u.used;
                }
            }
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submitters_are_the_first_two_words_of_origins() {
        assert_eq!(submitter("spark app-20261128-0001 query 3 SELECT sum(x) FROM t"), "spark app-20261128-0001");
        assert_eq!(submitter("dask Client-1f2e, graph abc, 4 reading tasks"), "dask Client-1f2e");
        assert_eq!(submitter("  nightly  "), "nightly");
        assert_eq!(submitter(""), "none");
        assert_eq!(submitter(&"x".repeat(300)).len(), MAX_SUBMITTER_CHARS);
    }

    #[test]
    fn submitters_past_the_bound_are_summed_as_other() {
        // 20 one-job submitters and one with three jobs: the busy one keeps its
        // name, 14 others keep theirs (by name), 6 are summed.
        let mut origins: Vec<String> = (0..20).map(|i| format!("spark app-{i:02} query 1")).collect();
        origins.extend((0..3).map(|q| format!("spark app-busy query {q}")));
        let groups = by_submitter(origins.iter().map(|o| (o.as_str(), 10, 4)));
        assert_eq!(groups.len(), MAX_SUBMITTERS);
        assert_eq!(
            groups[0],
            SubmitterJobs { submitter: "spark app-busy".into(), jobs: 3, bytes: 30, migrated_bytes: 12 }
        );
        assert_eq!(groups[1].submitter, "spark app-00");
        let other = groups.last().unwrap();
        assert_eq!((other.submitter.as_str(), other.jobs, other.bytes), ("other", 6, 60));
        assert_eq!(groups.iter().map(|g| g.jobs).sum::<usize>(), 23);
        // Under the bound, every submitter is named.
        let few = by_submitter([("cli alice", 1, 0), ("", 2, 2), ("cli alice", 3, 1)].into_iter());
        assert_eq!(few.len(), 2);
        assert_eq!((few[0].submitter.as_str(), few[0].jobs, few[0].bytes), ("cli alice", 2, 4));
        assert_eq!((few[1].submitter.as_str(), few[1].jobs), ("none", 1));
    }
}

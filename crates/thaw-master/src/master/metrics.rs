//! What the master's metrics read from its state at each scrape.

use super::*;

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
}

impl Master {
    pub fn gauges(&self) -> Gauges {
        let st = self.read();
        let mut g = Gauges { files: st.ns.file_count(), blocks: st.cluster.block_counts(), ..Default::default() };
        (g.jobs, g.migrations) = st.migrations.counts();
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

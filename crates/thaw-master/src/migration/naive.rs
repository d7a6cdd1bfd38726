//! DYRS, Fig. 10's naive load balancing, the comparison point for DYRS's
//! straggler avoidance (DYRS, section V-F3): "a migration scheme [that]
//! simply assign[s] migrations to any node with free slots in its local
//! queue". Migrations wait at the master as under DYRS (late binding, the same
//! order) but no time is estimated: each pending block is targeted at the
//! holder of one of its replicas with the fewest outstanding migrations (bound
//! to it or targeted at it in this pass; ties: the lowest worker id), and a
//! heartbeat binds a worker's targets only into the free slots of its queue
//! ([`NAIVE_SLOTS`] per device: the running block and one queued). A slow node
//! drains its slots more slowly and so gets fewer blocks, but nothing keeps
//! the last few from landing on it while faster nodes could finish them first:
//! the stragglers of DYRS, Fig. 10a.
//!
//! Counting outstanding migrations is this module's reading of "free slots":
//! the paper names the scheme in one sentence, and fewest-outstanding is how
//! a balancer without estimates chooses among several holders with free slots.

use std::collections::HashMap;

use super::*;

/// Migrations a device's queue holds under the naive policy: the running one
/// and one queued behind it (DYRS's minimum, so the two differ only in what
/// DYRS adds: estimates, and a queue that lasts a heartbeat at them).
pub const NAIVE_SLOTS: u32 = 2;

impl Migrations {
    /// The naive policy's cost model: one unit per migration, whatever its
    /// size or device, so a planning pass's "earliest finish" is the fewest
    /// migrations outstanding.
    pub(super) fn naive_costs(&self, cluster: &Cluster) -> HashMap<(u64, Device), Cost> {
        let unit = Cost { per_byte: 0.0, per_migration: 1.0 };
        cluster
            .workers()
            .filter(|w| w.alive)
            .flat_map(|w| [Device::Disk, Device::Ufs].map(|d| ((w.id, d), unit)))
            .collect()
    }
}

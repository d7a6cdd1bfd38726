//! Replica ordering by locality level (CAVA, section III-A): worker-memory, host-memory,
//! rack-memory, worker-disk, host-disk, rack, any; the under-store comes last.
//! Pure functions, so the ordering can be tested without a cluster.

use crate::proto::{Locality, Position, Tier};

/// Where a replica sits: the topology of its worker and the tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaPlace<'a> {
    pub worker_address: &'a str,
    pub host: &'a str,
    pub rack: &'a str,
    pub tier: Tier,
}

/// The locality level of a replica as seen from `client`.
pub fn level(client: &Position, place: &ReplicaPlace<'_>) -> Locality {
    let same_worker = !client.worker_address.is_empty() && client.worker_address == place.worker_address;
    let same_host = !client.host.is_empty() && client.host == place.host;
    let same_rack = !client.rack.is_empty() && client.rack == place.rack;
    match (place.tier, same_worker, same_host, same_rack) {
        (Tier::Mem, true, _, _) => Locality::WorkerMemory,
        (Tier::Mem, _, true, _) => Locality::HostMemory,
        (Tier::Mem, _, _, true) => Locality::RackMemory,
        (_, true, _, _) => Locality::WorkerDisk,
        (_, _, true, _) => Locality::HostDisk,
        (_, _, _, true) => Locality::Rack,
        _ => Locality::Any,
    }
}

/// The order a reader tries replicas in: every memory replica before any disk
/// replica, each by level. DYRS, section III: once a block is migrated, "reads will be
/// directed to the in-memory replica whether it is local or remote to the task"
/// (the network is faster than a disk); CAVA's levels order task placement, and
/// within one tier they order reads too.
pub fn rank(client: &Position, place: &ReplicaPlace<'_>) -> (i32, i32) {
    let tier_rank = if place.tier == Tier::Mem { 0 } else { 1 };
    (tier_rank, level(client, place) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(w: &str, h: &str, r: &str) -> Position {
        Position { worker_address: w.into(), host: h.into(), rack: r.into() }
    }

    #[test]
    fn levels_follow_cava_order() {
        let client = pos("w1:1", "h1", "r1");
        let place = |w, h, r, tier| ReplicaPlace { worker_address: w, host: h, rack: r, tier };
        let cases = [
            (place("w1:1", "h1", "r1", Tier::Mem), Locality::WorkerMemory),
            (place("w2:1", "h1", "r1", Tier::Mem), Locality::HostMemory),
            (place("w3:1", "h2", "r1", Tier::Mem), Locality::RackMemory),
            (place("w1:1", "h1", "r1", Tier::Disk), Locality::WorkerDisk),
            (place("w2:1", "h1", "r1", Tier::Disk), Locality::HostDisk),
            (place("w3:1", "h2", "r1", Tier::Disk), Locality::Rack),
            (place("w4:1", "h3", "r2", Tier::Mem), Locality::Any),
        ];
        for (p, want) in &cases {
            assert_eq!(level(&client, p), *want, "{p:?}");
        }
        // Reads: memory anywhere (off-rack memory is Any) before a local disk.
        let mut shuffled: Vec<_> = cases.iter().rev().map(|(p, _)| p.clone()).collect();
        shuffled.sort_by_key(|p| rank(&client, p));
        let got: Vec<_> = shuffled.iter().map(|p| level(&client, p)).collect();
        let want = [
            Locality::WorkerMemory,
            Locality::HostMemory,
            Locality::RackMemory,
            Locality::Any,
            Locality::WorkerDisk,
            Locality::HostDisk,
            Locality::Rack,
        ];
        assert_eq!(got, want);
        // Off-rack memory still beats off-rack disk.
        let far_mem = place("w9:1", "h9", "r9", Tier::Mem);
        let far_disk = place("w8:1", "h8", "r9", Tier::Disk);
        assert!(rank(&client, &far_mem) < rank(&client, &far_disk));
        // An empty position matches nothing.
        assert_eq!(level(&Position::default(), &place("", "", "", Tier::Mem)), Locality::Any);
    }
}

//! A lab's layout and the `ip`/`tc` commands that build it. Pure: names,
//! addresses and commands, no I/O.
//!
//! The layout (mininet's, with Linux bridges as switches): one network namespace
//! per node, holding `lo` and `eth0` with the node's address; one fabric namespace
//! holding a bridge per host (`bh<j>`), per rack (`br<k>`) and a core (`bcore`),
//! every bridge with STP off and forward delay 0 so a port forwards as soon as it
//! is up. veth pairs join them: node `eth0` <-> `vn<i>` on its host's bridge;
//! `uh<j>` on host bridge j <-> `dh<j>` on its rack's bridge; `ur<k>` on rack
//! bridge k <-> `dr<k>` on the core. Every shaped link carries a tbf qdisc on both
//! of its ends, so each direction is paced by the end it leaves from. Interface
//! names are short (the kernel allows 15 bytes) and every `ip link set` names its
//! device after `dev`, so no name is taken for an abbreviated keyword.
//!
//! Addresses: node i gets 198.18.0.0 + i + 1 in 198.18.0.0/15 (RFC 2544's
//! benchmark range), on its `eth0` only; all nodes share one layer-2 segment, so
//! no route is needed. Nothing is added to the root namespace: `ip netns add`
//! only makes a mount point, and every link is created inside the fabric.
//!
//! Round-trip time (`rtt=`, only with netem): each node's `eth0` delays what it
//! sends by rtt/2, so any two nodes see the rtt asked for; a `node=` shaping then
//! sits under the netem qdisc as its child.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use crate::spec::{NetworkSpec, NodeSpec};
use crate::{Error, Result};

/// The address range (RFC 2544, benchmarking) and its prefix length.
pub const NET_BASE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 0);
pub const NET_PREFIX: u8 = 15;
/// Nodes in one lab: every one costs two interfaces and a namespace.
pub const MAX_NODES: usize = 1024;
/// Every lab's namespaces start with this.
pub const NETNS_PREFIX: &str = "thaw-";

/// The node's address: the (i+1)-th of 198.18.0.0/15.
pub fn node_address(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(NET_BASE) + i as u32 + 1)
}

/// The fabric namespace of lab `id`.
pub fn fabric_netns(id: &str) -> String {
    format!("{NETNS_PREFIX}{id}")
}

/// Node `name`'s namespace in lab `id`.
pub fn node_netns(id: &str, name: &str) -> String {
    format!("{NETNS_PREFIX}{id}-{name}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Ip,
    Tc,
}

/// One command: `ip|tc [-n NETNS] ARGS...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub tool: Tool,
    pub netns: Option<String>,
    pub args: Vec<String>,
}

impl Step {
    fn new(tool: Tool, netns: Option<&str>, args: &str) -> Step {
        Step { tool, netns: netns.map(str::to_string), args: args.split_whitespace().map(str::to_string).collect() }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.tool {
            Tool::Ip => "ip",
            Tool::Tc => "tc",
        })?;
        if let Some(ns) = &self.netns {
            write!(f, " -n {ns}")?;
        }
        write!(f, " {}", self.args.join(" "))
    }
}

/// A node where the plan put it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedNode {
    pub name: String,
    pub host: String,
    pub rack: String,
    pub netns: String,
    pub address: Ipv4Addr,
}

/// A lab's layout: namespaces, nodes with addresses, hosts and racks by index.
#[derive(Debug, Clone)]
pub struct Topology {
    pub id: String,
    pub spec: NetworkSpec,
    pub fabric: String,
    pub nodes: Vec<PlacedNode>,
    /// Hosts in first-seen order, each with its rack's index.
    pub hosts: Vec<(String, usize)>,
    pub racks: Vec<String>,
    /// Each node's host index.
    node_hosts: Vec<usize>,
}

impl Topology {
    /// Lays out `nodes` (checked by [`crate::spec::check_nodes`]) for lab `id`.
    pub fn new(id: &str, spec: NetworkSpec, nodes: &[NodeSpec]) -> Result<Topology> {
        crate::spec::check_nodes(nodes)?;
        if nodes.len() > MAX_NODES {
            return Err(Error::Invalid(format!("{} nodes: a lab holds at most {MAX_NODES}", nodes.len())));
        }
        let mut racks: Vec<String> = Vec::new();
        let mut hosts: Vec<(String, usize)> = Vec::new();
        let mut host_index: BTreeMap<&str, usize> = BTreeMap::new();
        let mut node_hosts = Vec::new();
        for n in nodes {
            let k = racks.iter().position(|r| *r == n.rack).unwrap_or_else(|| {
                racks.push(n.rack.clone());
                racks.len() - 1
            });
            let j = *host_index.entry(&n.host).or_insert_with(|| {
                hosts.push((n.host.clone(), k));
                hosts.len() - 1
            });
            node_hosts.push(j);
        }
        let placed = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| PlacedNode {
                name: n.name.clone(),
                host: n.host.clone(),
                rack: n.rack.clone(),
                netns: node_netns(id, &n.name),
                address: node_address(i),
            })
            .collect();
        Ok(Topology { id: id.into(), spec, fabric: fabric_netns(id), nodes: placed, hosts, racks, node_hosts })
    }

    /// Every namespace of the lab, the fabric first.
    pub fn namespaces(&self) -> Vec<String> {
        std::iter::once(self.fabric.clone()).chain(self.nodes.iter().map(|n| n.netns.clone())).collect()
    }

    /// The commands that build the lab, in order. Consecutive steps with the
    /// same tool and namespace may run as one batch.
    pub fn steps(&self) -> Vec<Step> {
        let f = Some(self.fabric.as_str());
        let ip = |ns: Option<&str>, args: String| Step::new(Tool::Ip, ns, &args);
        let mut steps: Vec<Step> = self.namespaces().iter().map(|ns| ip(None, format!("netns add {ns}"))).collect();
        // The fabric: bridges, then the uplinks between them, then the node links.
        let mut bridges = vec!["bcore".to_string()];
        bridges.extend((0..self.racks.len()).map(|k| format!("br{k}")));
        bridges.extend((0..self.hosts.len()).map(|j| format!("bh{j}")));
        for b in &bridges {
            steps.push(ip(f, format!("link add name {b} type bridge stp_state 0 forward_delay 0")));
            steps.push(ip(f, format!("link set dev {b} up")));
        }
        let pair = |steps: &mut Vec<Step>, a: String, a_master: String, b: String, b_master: String| {
            steps.push(ip(f, format!("link add name {a} type veth peer name {b}")));
            for (dev, master) in [(a, a_master), (b, b_master)] {
                steps.push(ip(f, format!("link set dev {dev} master {master}")));
                steps.push(ip(f, format!("link set dev {dev} up")));
            }
        };
        for k in 0..self.racks.len() {
            pair(&mut steps, format!("ur{k}"), format!("br{k}"), format!("dr{k}"), "bcore".into());
        }
        for (j, (_, k)) in self.hosts.iter().enumerate() {
            pair(&mut steps, format!("uh{j}"), format!("bh{j}"), format!("dh{j}"), format!("br{k}"));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let j = self.node_hosts[i];
            steps.push(ip(f, format!("link add name vn{i} type veth peer name eth0 netns {}", n.netns)));
            steps.push(ip(f, format!("link set dev vn{i} master bh{j}")));
            steps.push(ip(f, format!("link set dev vn{i} up")));
        }
        for n in &self.nodes {
            let ns = Some(n.netns.as_str());
            steps.push(ip(ns, format!("addr add {}/{NET_PREFIX} dev eth0", n.address)));
            steps.push(ip(ns, "link set dev eth0 up".into()));
            steps.push(ip(ns, "link set dev lo up".into()));
        }
        // Shaping: both ends of every shaped link.
        let tc = |ns: Option<&str>, args: String| Step::new(Tool::Tc, ns, &args);
        let shape = |steps: &mut Vec<Step>, ns: Option<&str>, dev: String, rate: Option<u64>| {
            if let Some(rate) = rate {
                steps.push(tc(ns, format!("qdisc add dev {dev} root {}", tbf(rate))));
            }
        };
        for k in 0..self.racks.len() {
            shape(&mut steps, f, format!("ur{k}"), self.spec.rack);
            shape(&mut steps, f, format!("dr{k}"), self.spec.rack);
        }
        for j in 0..self.hosts.len() {
            shape(&mut steps, f, format!("uh{j}"), self.spec.host);
            shape(&mut steps, f, format!("dh{j}"), self.spec.host);
        }
        for i in 0..self.nodes.len() {
            shape(&mut steps, f, format!("vn{i}"), self.spec.node);
        }
        for n in &self.nodes {
            let ns = Some(n.netns.as_str());
            match self.spec.rtt {
                Some(rtt) => {
                    steps.push(tc(ns, format!("qdisc add dev eth0 root handle 1: {}", netem(rtt / 2))));
                    if let Some(rate) = self.spec.node {
                        steps.push(tc(ns, format!("qdisc add dev eth0 parent 1:1 handle 10: {}", tbf(rate))));
                    }
                }
                None => shape(&mut steps, ns, "eth0".into(), self.spec.node),
            }
        }
        steps
    }
}

/// A token bucket at `rate` bytes/s. Its bucket holds 10 ms of the rate but
/// at least 128 KiB, so a 64 KiB GSO packet from a veth passes whole; its queue
/// holds 50 ms of the rate, enough for TCP to keep the link busy.
pub fn tbf(rate: u64) -> String {
    let burst = (rate / 100).max(128 << 10);
    format!("tbf rate {rate}bps burst {burst} latency 50ms")
}

/// A one-way delay; the queue is long enough for a fast link's packets in flight.
pub fn netem(delay: Duration) -> String {
    format!("netem delay {}us limit 100000", delay.as_micros().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(spec: &str, nodes: &[&str]) -> Topology {
        let nodes: Vec<NodeSpec> = nodes.iter().map(|s| NodeSpec::parse(s).unwrap()).collect();
        Topology::new("ab12cd34", NetworkSpec::parse(spec).unwrap(), &nodes).unwrap()
    }

    fn lines(t: &Topology) -> Vec<String> {
        t.steps().iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn addresses_and_names() {
        assert_eq!(node_address(0), Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(node_address(254), Ipv4Addr::new(198, 18, 0, 255));
        assert_eq!(node_address(255), Ipv4Addr::new(198, 18, 1, 0));
        // The last node of the largest lab stays inside the /15.
        let last = u32::from(node_address(MAX_NODES - 1));
        assert_eq!(last >> (32 - NET_PREFIX), u32::from(NET_BASE) >> (32 - NET_PREFIX));
        let t = topo("", &["m@h0/r0", "w0@h0/r0", "w1@h1/r1"]);
        assert_eq!(t.fabric, "thaw-ab12cd34");
        assert_eq!(t.namespaces(), ["thaw-ab12cd34", "thaw-ab12cd34-m", "thaw-ab12cd34-w0", "thaw-ab12cd34-w1"]);
        assert_eq!(t.nodes[2].address, Ipv4Addr::new(198, 18, 0, 3));
        assert_eq!(t.hosts, [("h0".to_string(), 0), ("h1".to_string(), 1)]);
    }

    #[test]
    fn unshaped_lab_commands() {
        let t = topo("none", &["a@h0/r0", "b@h1/r0"]);
        let l = lines(&t);
        let f = "ip -n thaw-ab12cd34";
        for want in [
            "ip netns add thaw-ab12cd34".to_string(),
            "ip netns add thaw-ab12cd34-a".into(),
            format!("{f} link add name bcore type bridge stp_state 0 forward_delay 0"),
            format!("{f} link add name bh1 type bridge stp_state 0 forward_delay 0"),
            format!("{f} link add name ur0 type veth peer name dr0"),
            format!("{f} link set dev dr0 master bcore"),
            format!("{f} link set dev dh1 master br0"),
            format!("{f} link add name vn1 type veth peer name eth0 netns thaw-ab12cd34-b"),
            format!("{f} link set dev vn1 master bh1"),
            "ip -n thaw-ab12cd34-b addr add 198.18.0.2/15 dev eth0".into(),
            "ip -n thaw-ab12cd34-b link set dev lo up".into(),
        ] {
            assert!(l.contains(&want), "missing {want:?} in {l:#?}");
        }
        assert!(!l.iter().any(|s| s.starts_with("tc")), "nothing shaped: {l:#?}");
        // Namespaces first; every device set up is named after `dev`; nothing
        // runs in the root namespace but `netns add`.
        assert!(l[..3].iter().all(|s| s.starts_with("ip netns add")));
        for s in t.steps() {
            if s.args.starts_with(&["link".into(), "set".into()]) {
                assert_eq!(s.args[2], "dev", "{s}");
            }
            assert!(s.netns.is_some() || s.args[..2] == ["netns", "add"], "{s}");
        }
        // A node's address is configured after its eth0 exists.
        let veth = l.iter().position(|s| s.ends_with("netns thaw-ab12cd34-b")).unwrap();
        let addr = l.iter().position(|s| s.contains("198.18.0.2/15")).unwrap();
        assert!(veth < addr);
    }

    #[test]
    fn shaping_on_both_ends() {
        let t = topo("node=1GiB/s,host=8MiB/s,rack=16MiB/s", &["a@h0/r0", "b@h1/r1"]);
        let l = lines(&t);
        let tc: Vec<&String> = l.iter().filter(|s| s.starts_with("tc")).collect();
        let host = tbf(8 << 20);
        assert_eq!(host, "tbf rate 8388608bps burst 131072 latency 50ms");
        for want in [
            format!("tc -n thaw-ab12cd34 qdisc add dev uh0 root {host}"),
            format!("tc -n thaw-ab12cd34 qdisc add dev dh0 root {host}"),
            format!("tc -n thaw-ab12cd34 qdisc add dev uh1 root {host}"),
            format!("tc -n thaw-ab12cd34 qdisc add dev dh1 root {host}"),
            format!("tc -n thaw-ab12cd34 qdisc add dev ur1 root {}", tbf(16 << 20)),
            format!("tc -n thaw-ab12cd34 qdisc add dev dr1 root {}", tbf(16 << 20)),
            format!("tc -n thaw-ab12cd34 qdisc add dev vn0 root {}", tbf(1 << 30)),
            format!("tc -n thaw-ab12cd34-a qdisc add dev eth0 root {}", tbf(1 << 30)),
        ] {
            assert!(tc.contains(&&want), "missing {want:?} in {tc:#?}");
        }
        // 2 racks + 2 hosts + 2 nodes, two ends each.
        assert_eq!(tc.len(), 12);
        assert!(tbf(1 << 30).contains("burst 10737418"), "{}", tbf(1 << 30));
        // Shaping comes after every link exists.
        let last_link = l.iter().rposition(|s| s.contains("link ")).unwrap();
        let first_tc = l.iter().position(|s| s.starts_with("tc")).unwrap();
        assert!(last_link < first_tc);
    }

    #[test]
    fn rtt_is_netem_on_every_node() {
        let t = topo("rtt=0.4ms,node=100MiB/s", &["a@h0/r0", "b@h0/r0"]);
        let l = lines(&t);
        for ns in ["thaw-ab12cd34-a", "thaw-ab12cd34-b"] {
            let root = format!("tc -n {ns} qdisc add dev eth0 root handle 1: netem delay 200us limit 100000");
            let child = format!("tc -n {ns} qdisc add dev eth0 parent 1:1 handle 10: {}", tbf(100 << 20));
            let (r, c) = (l.iter().position(|s| *s == root), l.iter().position(|s| *s == child));
            assert!(r.is_some() && r < c, "{l:#?}");
        }
        let t = topo("rtt=1ms", &["a@h0/r0"]);
        assert!(lines(&t).iter().any(|s| s.ends_with("root handle 1: netem delay 500us limit 100000")));
        assert_eq!(lines(&t).iter().filter(|s| s.starts_with("tc")).count(), 1);
    }

    #[test]
    fn bad_node_sets_are_refused() {
        let nodes = [NodeSpec::parse("a@h0/r0").unwrap(), NodeSpec::parse("a@h0/r0").unwrap()];
        assert!(Topology::new("x", NetworkSpec::default(), &nodes).is_err());
    }
}

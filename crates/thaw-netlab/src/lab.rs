//! One lab on this machine: made from a spec and nodes (checks first, then the
//! state file, then the namespaces), described by its ready line, and removed.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::plan::{Topology, fabric_netns};
use crate::spec::{NetworkSpec, NodeSpec};
use crate::state::{self, LabState};
use crate::sys::{self, Tools};
use crate::{Error, Result};

pub struct Lab {
    pub topology: Topology,
    pub tools: Tools,
    pub state_dir: PathBuf,
    state: LabState,
    /// The scratch namespace that tells whether netem exists.
    probe: String,
}

impl Lab {
    /// Checks what a lab needs (privileges, `ip` and `tc`), picks a fresh id and
    /// writes the lab's state file; makes no namespace yet.
    pub fn prepare(spec: NetworkSpec, nodes: &[NodeSpec], state_dir: PathBuf) -> Result<Lab> {
        crate::spec::check_nodes(nodes)?;
        sys::check_privileges()?;
        let tools = Tools::find()?;
        let id = fresh_id(&state_dir)?;
        let topology = Topology::new(&id, spec, nodes)?;
        let probe = format!("{}.probe", topology.fabric);
        let pid = std::process::id() as i32;
        let start_time = state::process_start_time(pid)
            .ok_or_else(|| Error::System("cannot read this process's start time from /proc".into()))?;
        let mut namespaces = topology.namespaces();
        namespaces.push(probe.clone());
        let state = LabState { id, pid, start_time, namespaces, ready: None };
        state::write(&state_dir, &state)?;
        Ok(Lab { topology, tools, state_dir, state, probe })
    }

    pub fn id(&self) -> &str {
        &self.state.id
    }

    /// Makes the namespaces, bridges, links and qdiscs. On an error some may
    /// exist: [`Lab::remove`] them.
    pub fn build(&self) -> Result<()> {
        if self.topology.spec.rtt.is_some() && !self.tools.probe_netem(&self.probe)? {
            return Err(Error::Unsupported(
                "rtt= needs the kernel's netem qdisc (CONFIG_NET_SCH_NETEM), which this kernel lacks: \
                 leave rtt= out (bandwidth shaping works without it)"
                    .into(),
            ));
        }
        for ns in self.topology.namespaces() {
            if sys::netns_exists(&ns) {
                return Err(Error::System(format!("network namespace {ns} exists already")));
            }
        }
        self.tools.run(&self.topology.steps())
    }

    /// The line printed when the lab is ready (the contract with the harness).
    pub fn ready_json(&self) -> Value {
        let spec = &self.topology.spec;
        let nodes: serde_json::Map<String, Value> = self
            .topology
            .nodes
            .iter()
            .map(|n| {
                let v = json!({"netns": n.netns, "address": n.address.to_string(), "host": n.host, "rack": n.rack});
                (n.name.clone(), v)
            })
            .collect();
        json!({
            "id": self.state.id,
            "spec": {
                "node": spec.node,
                "host": spec.host,
                "rack": spec.rack,
                "rtt_ms": spec.rtt.map(|d| d.as_secs_f64() * 1e3),
            },
            "nodes": nodes,
        })
    }

    /// Records the ready line in the state file (for `thaw netlab list`).
    pub fn mark_ready(&mut self) -> Result<()> {
        self.state.ready = Some(self.ready_json());
        state::write(&self.state_dir, &self.state)
    }

    /// Ends the lab's processes, deletes its namespaces, then its state file.
    /// Returns how many namespaces were deleted.
    pub fn remove(&self) -> usize {
        state::remove_lab(&self.tools, &self.state_dir, &self.state)
    }
}

/// 8 hex digits from the kernel's random source, used by no lab here.
fn fresh_id(state_dir: &std::path::Path) -> Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open("/dev/urandom").map_err(|e| Error::System(format!("/dev/urandom: {e}")))?;
    for _ in 0..16 {
        let mut b = [0u8; 4];
        f.read_exact(&mut b).map_err(|e| Error::System(format!("/dev/urandom: {e}")))?;
        let id = format!("{:08x}", u32::from_le_bytes(b));
        let taken = state::state_path(state_dir, &id).exists()
            || sys::list_netns().iter().any(|n| n.starts_with(&fabric_netns(&id)));
        if !taken {
            return Ok(id);
        }
    }
    Err(Error::System("cannot find an unused lab id".into()))
}

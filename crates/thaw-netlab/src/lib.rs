//! Emulated hosts with a network between them (issue 30, item 1): every node a
//! network namespace with its own address, joined through a bridge per host,
//! per rack and a core, its links shaped with `tc`, made and removed with
//! iproute2's `ip` and `tc` as mininet does. By subject:
//! - [`spec`]: the network spec (`host=100MiB/s,rack=200MiB/s,rtt=0.2ms`) and
//!   the nodes (`NAME@HOST/RACK`), parsed and checked;
//! - [`plan`]: the layout, the address plan (198.18.0.0/15, inside the node
//!   namespaces only) and the commands that build a lab; pure;
//! - [`sys`]: `ip`/`tc` found and run, privileges, the processes in a
//!   namespace, namespaces removed;
//! - [`state`]: labs' state files, their supervisors' liveness, the sweep;
//! - [`lab`]: one lab made, described (its ready line) and removed;
//! - [`supervise`]: `thaw netlab up`'s supervisor (stdin, signals) and the
//!   guard that removes a lab whose supervisor died.
//!
//! Linux only, and only as root (CAP_NET_ADMIN and CAP_SYS_ADMIN). Latency
//! (`rtt=`) needs the netem qdisc, which some kernels lack: then a clear error.

pub mod lab;
pub mod plan;
pub mod spec;
pub mod state;
pub mod supervise;
pub mod sys;

/// Why a lab cannot be made or removed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: the spec, a node, a duplicate name.
    #[error("{0}")]
    Invalid(String),
    /// This machine cannot: no privileges, no iproute2, no netem.
    #[error("{0}")]
    Unsupported(String),
    /// A command or a system call failed.
    #[error("{0}")]
    System(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The live labs on this machine, from their state files.
pub fn live_labs(state_dir: &std::path::Path) -> Vec<state::LabState> {
    state::read_all(state_dir).into_iter().filter(|s| s.alive()).collect()
}

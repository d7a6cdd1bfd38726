//! `thaw netlab`: emulated hosts with a network between them (thaw-netlab):
//! `up` makes a lab and holds it until stdin closes or a signal, `sweep`
//! removes labs whose supervisor is gone, `list` shows the live ones; `guard`
//! (hidden) is the process that removes a lab whose supervisor was killed.

use std::path::PathBuf;
use std::process::Command;

use clap::{Args, Subcommand};
use thaw_netlab::state::STATE_DIR;

#[derive(Subcommand)]
pub enum NetlabCommand {
    /// Make a lab: a network namespace per node (addresses in 198.18.0.0/15),
    /// joined by a bridge per host, per rack and a core, its links shaped.
    /// Prints one line of JSON (the lab's id, spec and nodes with their
    /// namespace and address) when ready, then holds the lab until stdin
    /// closes or SIGTERM/SIGINT/SIGHUP, and removes it: every process in its
    /// namespaces ends, every namespace, link and qdisc goes. Needs root.
    Up(UpArgs),
    /// Remove the labs whose supervisor is gone (also done by every `up`).
    Sweep(StateArgs),
    /// The live labs: id, supervisor pid, nodes.
    List(ListArgs),
    /// Wait for EOF on stdin, then remove lab ID if it is still there (run by
    /// `up`, not by hand).
    #[command(hide = true)]
    Guard(GuardArgs),
}

#[derive(Args)]
pub struct UpArgs {
    /// The links' shaping: node=BW (node to its host), host=BW (host to its
    /// rack), rack=BW (rack to the core), rtt=DURATION (needs netem), e.g.
    /// host=100MiB/s,rack=200MiB/s; empty or `none`: nothing shaped.
    #[arg(long, value_name = "SPEC", default_value = "none")]
    network: String,
    /// A node: NAME@HOST/RACK (repeat the flag; nodes on one host share its bridge).
    #[arg(long = "node", value_name = "NAME@HOST/RACK", required = true)]
    nodes: Vec<String>,
    #[command(flatten)]
    state: StateArgs,
}

#[derive(Args)]
pub struct StateArgs {
    /// Where labs keep their state files.
    #[arg(long, value_name = "DIR", default_value = STATE_DIR)]
    state_dir: PathBuf,
}

#[derive(Args)]
pub struct ListArgs {
    /// One JSON object per lab (its ready line with the supervisor's pid).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    state: StateArgs,
}

#[derive(Args)]
pub struct GuardArgs {
    /// The lab to watch.
    #[arg(long)]
    id: String,
    #[command(flatten)]
    state: StateArgs,
}

/// Runs a netlab command (without the async runtime: it waits on stdin and
/// signals itself). Exits 2 on an error, as the contract with the harness says.
pub fn main(command: NetlabCommand) -> ! {
    let result = match command {
        NetlabCommand::Up(a) => up(a),
        NetlabCommand::Sweep(a) => sweep(a),
        NetlabCommand::List(a) => list(a),
        NetlabCommand::Guard(a) => thaw_netlab::supervise::guard(&a.id, &a.state.state_dir),
    };
    if let Err(e) = result {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "thaw: error: {e}");
        std::process::exit(2);
    }
    std::process::exit(0)
}

fn up(a: UpArgs) -> thaw_netlab::Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| thaw_netlab::Error::System(format!("cannot find the thaw binary for the guard: {e}")))?;
    let dir = a.state.state_dir.clone();
    thaw_netlab::supervise::up(&a.network, &a.nodes, &a.state.state_dir, |id| {
        let mut cmd = Command::new(exe);
        cmd.args(["netlab", "guard", "--id", id, "--state-dir"]).arg(dir);
        cmd
    })
}

fn sweep(a: StateArgs) -> thaw_netlab::Result<()> {
    thaw_netlab::sys::check_privileges()?;
    let tools = thaw_netlab::sys::Tools::find()?;
    let swept = thaw_netlab::state::sweep(&tools, &a.state_dir);
    for (lab, n) in &swept {
        println!("removed lab {} (supervisor pid {} gone): {n} namespaces deleted", lab.id, lab.pid);
    }
    if swept.is_empty() {
        println!("no stale lab");
    }
    Ok(())
}

fn list(a: ListArgs) -> thaw_netlab::Result<()> {
    for lab in thaw_netlab::live_labs(&a.state.state_dir) {
        let nodes = lab.ready.as_ref().and_then(|r| r["nodes"].as_object());
        if a.json {
            let mut v = lab.ready.clone().unwrap_or_else(|| serde_json::json!({"id": lab.id}));
            v["pid"] = lab.pid.into();
            v["ready"] = lab.ready.is_some().into();
            println!("{v}");
            continue;
        }
        let what = match nodes {
            Some(n) => {
                let names: Vec<&str> = n.keys().map(String::as_str).collect();
                format!("{} nodes: {}", names.len(), names.join(" "))
            }
            None => "being made".into(),
        };
        println!("{}  pid {}  {what}", lab.id, lab.pid);
    }
    Ok(())
}

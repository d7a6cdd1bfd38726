//! A network lab for tests: `thaw netlab up` run as a child, its ready line
//! parsed into nodes (namespace, address, host, rack), commands built to run
//! inside a node, and the lab removed on drop (stdin closed, then the
//! supervisor waited for: it ends every process left in the lab).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// One node of a lab.
#[derive(Debug, Clone)]
pub struct LabNode {
    pub netns: String,
    pub address: String,
    pub host: String,
    pub rack: String,
}

pub struct NetLab {
    child: Option<Child>,
    pub id: String,
    /// The ready line, as printed.
    pub ready: serde_json::Value,
    pub nodes: BTreeMap<String, LabNode>,
    stderr: Arc<Mutex<String>>,
    ip: PathBuf,
}

impl NetLab {
    /// Why a lab cannot run here (not root, no iproute2), or `None`.
    pub fn unavailable() -> Option<String> {
        let check = thaw_netlab::sys::check_privileges().and_then(|()| thaw_netlab::sys::Tools::find());
        check.err().map(|e| e.to_string())
    }

    /// Starts `thaw netlab up --network NETWORK --node N@H/R ...` (`nodes`:
    /// `(name, host, rack)`) with `extra` flags, and waits for its ready line.
    pub fn start(bin: &Path, network: &str, nodes: &[(&str, &str, &str)], extra: &[&str]) -> Result<NetLab> {
        let mut cmd = Command::new(bin);
        cmd.args(["netlab", "up", "--network", network]).args(extra);
        for (name, host, rack) in nodes {
            cmd.arg("--node").arg(format!("{name}@{host}/{rack}"));
        }
        Self::spawn(cmd)
    }

    /// Starts a prepared command that runs `thaw netlab up` (or a shell that
    /// does); its stdin, stdout and stderr are piped here.
    pub fn spawn(mut cmd: Command) -> Result<NetLab> {
        let tools = thaw_netlab::sys::Tools::find()?;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("thaw netlab up")?;
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().context("stderr")?;
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
        if line.trim().is_empty() {
            let status = child.wait()?;
            std::thread::sleep(Duration::from_millis(50));
            bail!("thaw netlab up ended ({status}) without a ready line: {}", stderr.lock().unwrap());
        }
        let ready: serde_json::Value = serde_json::from_str(&line).with_context(|| format!("ready line {line:?}"))?;
        let field = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
        let nodes = ready["nodes"]
            .as_object()
            .context("nodes")?
            .iter()
            .map(|(name, v)| {
                let node = LabNode {
                    netns: field(v, "netns"),
                    address: field(v, "address"),
                    host: field(v, "host"),
                    rack: field(v, "rack"),
                };
                (name.clone(), node)
            })
            .collect();
        Ok(NetLab { id: field(&ready, "id"), ready, nodes, child: Some(child), stderr, ip: tools.ip })
    }

    pub fn node(&self, name: &str) -> &LabNode {
        self.nodes.get(name).unwrap_or_else(|| panic!("no node {name} in lab {}", self.id))
    }

    /// Every namespace of the lab (the fabric's and the nodes').
    pub fn namespaces(&self) -> Vec<String> {
        let mut all = vec![thaw_netlab::plan::fabric_netns(&self.id)];
        all.extend(self.nodes.values().map(|n| n.netns.clone()));
        all
    }

    /// A command that runs `program` inside node `name`'s namespace.
    pub fn command(&self, name: &str, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(&self.ip);
        cmd.args(["netns", "exec", &self.node(name).netns]).arg(program);
        cmd
    }

    /// The supervisor's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// What the supervisor wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The supervisor itself (to kill it in a test); the lab no longer
    /// waits for it on drop.
    pub fn take_child(&mut self) -> Child {
        self.child.take().expect("the supervisor")
    }

    /// Closes the supervisor's stdin and waits (at most 20 s) for it to remove
    /// the lab; its exit status.
    pub fn close(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        drop(child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill(); // the guard then removes the lab
                return child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        self.close();
    }
}

/// Whether network namespace `name` exists.
pub fn netns_exists(name: &str) -> bool {
    thaw_netlab::sys::netns_exists(name)
}

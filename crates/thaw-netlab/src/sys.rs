//! The system side: finding `ip` and `tc`, checking privileges, running a
//! plan's commands (consecutive ones on one namespace as one `-batch`), the
//! processes inside a namespace, and removing namespaces.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::plan::{Step, Tool};
use crate::{Error, Result};

/// Where `ip netns` keeps its namespaces' mount points.
pub const NETNS_DIR: &str = "/var/run/netns";

/// The iproute2 programs, by full path.
#[derive(Debug, Clone)]
pub struct Tools {
    pub ip: PathBuf,
    pub tc: PathBuf,
}

impl Tools {
    /// Finds `ip` and `tc` on PATH or in the sbin directories (a user's PATH
    /// often lacks them).
    pub fn find() -> Result<Tools> {
        let find = |name: &str| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
                .map(|d| d.join(name))
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    Error::Unsupported(format!(
                        "thaw netlab needs iproute2's `{name}` command, found neither on PATH nor in /usr/sbin or /sbin \
                         (install iproute2)"
                    ))
                })
        };
        Ok(Tools { ip: find("ip")?, tc: find("tc")? })
    }

    fn program(&self, tool: Tool) -> &Path {
        match tool {
            Tool::Ip => &self.ip,
            Tool::Tc => &self.tc,
        }
    }

    /// Runs `steps` in order, each run of steps with the same tool and
    /// namespace as one `-batch`; stops at the first failure, naming its command.
    pub fn run(&self, steps: &[Step]) -> Result<()> {
        let mut start = 0;
        while start < steps.len() {
            let first = &steps[start];
            let end = steps[start..]
                .iter()
                .position(|s| s.tool != first.tool || s.netns != first.netns)
                .map_or(steps.len(), |n| start + n);
            self.batch(&steps[start..end])?;
            start = end;
        }
        Ok(())
    }

    fn batch(&self, steps: &[Step]) -> Result<()> {
        let mut cmd = Command::new(self.program(steps[0].tool));
        if let Some(ns) = &steps[0].netns {
            cmd.args(["-n", ns]);
        }
        let mut child = cmd
            .args(["-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::System(format!("cannot run {}: {e}", steps[0])))?;
        let script: String = steps.iter().map(|s| s.args.join(" ") + "\n").collect();
        let mut stdin = child.stdin.take().expect("piped");
        let written = stdin.write_all(script.as_bytes());
        drop(stdin);
        let out = child.wait_with_output().map_err(|e| Error::System(format!("{}: {e}", steps[0])))?;
        if out.status.success() && written.is_ok() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        // `Command failed -:N` names the batch line that failed.
        let failed = stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix("Command failed -:"))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .and_then(|n| steps.get(n.saturating_sub(1)));
        let what = match failed {
            Some(step) => format!("`{step}`"),
            None if steps.len() == 1 => format!("`{}`", steps[0]),
            None => format!("one of {} commands from `{}` on", steps.len(), steps[0]),
        };
        let why: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("Command failed")).collect();
        Err(Error::System(format!("{what} failed: {}", why.join("; ").trim())))
    }

    /// Runs one command; its stderr on failure.
    pub fn run_one(&self, step: &Step) -> Result<()> {
        self.batch(std::slice::from_ref(step))
    }

    /// Whether the kernel has netem: a qdisc tried on a veth in a scratch
    /// namespace `scratch`, which is deleted again.
    pub fn probe_netem(&self, scratch: &str) -> Result<bool> {
        let ip = |args: &str| Step {
            tool: Tool::Ip,
            netns: None,
            args: args.split_whitespace().map(str::to_string).collect(),
        };
        self.run_one(&ip(&format!("netns add {scratch}")))?;
        let mut link = ip("link add name pa type veth peer name pb");
        link.netns = Some(scratch.into());
        let made = self.run_one(&link);
        let netem = made.map(|()| {
            let mut q = ip("qdisc add dev pa root netem delay 1ms");
            q.tool = Tool::Tc;
            q.netns = Some(scratch.into());
            self.run_one(&q).is_ok()
        });
        remove_namespaces(self, &[scratch.to_string()]);
        netem
    }
}

/// Checks for CAP_NET_ADMIN and CAP_SYS_ADMIN (root has both).
pub fn check_privileges() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    const NET_ADMIN: u64 = 1 << 12;
    const SYS_ADMIN: u64 = 1 << 21;
    if caps & NET_ADMIN == 0 || caps & SYS_ADMIN == 0 {
        return Err(Error::Unsupported(
            "thaw netlab needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces, links and \
             qdiscs; run it as root (CI does), or leave the network out: runs then stay on loopback"
                .into(),
        ));
    }
    Ok(())
}

/// The namespaces `ip netns` knows, by name.
pub fn list_netns() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else { return Vec::new() };
    let mut names: Vec<String> = dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    names.sort();
    names
}

pub fn netns_exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

/// A namespace's identity: the device and inode of its nsfs file.
fn netns_id(name: &str) -> Option<(u64, u64)> {
    std::fs::metadata(Path::new(NETNS_DIR).join(name)).ok().map(|m| (m.dev(), m.ino()))
}

/// The processes in any of the namespaces `ids` (zombies have none).
fn pids_in(ids: &[(u64, u64)]) -> Vec<i32> {
    let Ok(proc) = std::fs::read_dir("/proc") else { return Vec::new() };
    let me = std::process::id() as i32;
    proc.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| std::fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| ids.contains(&(m.dev(), m.ino()))))
        .collect()
}

/// The processes whose network namespace is `name`'s.
pub fn netns_pids(name: &str) -> Vec<i32> {
    netns_id(name).map_or(Vec::new(), |id| pids_in(&[id]))
}

/// Signals the processes in `ids` until none is left: SIGTERM first, SIGKILL
/// from `grace` on; gives up after `grace` + 2 s.
fn end_processes(ids: &[(u64, u64)], grace: Duration) {
    let start = Instant::now();
    let mut termed = false;
    while start.elapsed() < grace + Duration::from_secs(2) {
        let left = pids_in(ids);
        if left.is_empty() {
            return;
        }
        let late = start.elapsed() >= grace;
        if !termed || late {
            let signal = if late { libc::SIGKILL } else { libc::SIGTERM };
            for pid in left {
                // SAFETY: a signal to a process found in the lab's namespace.
                unsafe { libc::kill(pid, signal) };
            }
            termed = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ends every process in `names` (SIGTERM, then SIGKILL for what is left after
/// a second) and deletes the namespaces, which takes every link, bridge and
/// qdisc in them along; a process that entered a namespace meanwhile is
/// killed after its name is gone (nothing can enter by name then).
/// Idempotent: names already gone are skipped. Returns how many namespaces
/// it deleted.
pub fn remove_namespaces(tools: &Tools, names: &[String]) -> usize {
    let present: Vec<(&String, (u64, u64))> = names.iter().filter_map(|n| Some((n, netns_id(n)?))).collect();
    let ids: Vec<(u64, u64)> = present.iter().map(|(_, id)| *id).collect();
    end_processes(&ids, Duration::from_secs(1));
    let mut deleted = 0;
    for (name, _) in &present {
        let step = Step { tool: Tool::Ip, netns: None, args: vec!["netns".into(), "del".into(), name.to_string()] };
        if tools.run_one(&step).is_ok() || !netns_exists(name) {
            deleted += 1;
        }
    }
    end_processes(&ids, Duration::ZERO);
    deleted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_errors_name_the_failing_command() {
        // `ip` looks a device up before it needs privileges.
        let Ok(tools) = Tools::find() else { return };
        let step = |args: &str| Step {
            tool: Tool::Ip,
            netns: None,
            args: args.split_whitespace().map(str::to_string).collect(),
        };
        let steps = [step("link show dev lo"), step("link set dev thaw-no-such up"), step("link show dev lo")];
        let e = tools.run(&steps).unwrap_err().to_string();
        assert!(e.contains("`ip link set dev thaw-no-such up` failed: Cannot find device"), "{e}");
    }
}

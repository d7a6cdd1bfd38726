//! Labs on this machine: each supervisor's state file in /run/thaw-netlab
//! (`<id>.json`: its pid and that process's start time, the lab's namespaces and
//! its ready line), whether its supervisor still lives, and the sweep that
//! removes the labs whose supervisor is gone.
//!
//! A pid alone could be reused by a later process; the start time from
//! `/proc/<pid>/stat` (field 22, clock ticks since boot) tells them apart. The
//! file is written before the first namespace is made and removed after the
//! last is deleted, so a lab never has namespaces without a state file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys::{Tools, remove_namespaces};
use crate::{Error, Result};

pub const STATE_DIR: &str = "/run/thaw-netlab";

/// What a lab's supervisor leaves for the sweep and `list`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LabState {
    pub id: String,
    /// The supervisor: its pid and start time.
    pub pid: i32,
    pub start_time: u64,
    /// Every namespace the lab may have made (the netem probe's too).
    pub namespaces: Vec<String>,
    /// The ready line, once the lab is ready.
    #[serde(default)]
    pub ready: Option<serde_json::Value>,
}

impl LabState {
    /// Whether its supervisor is still the process that wrote it.
    pub fn alive(&self) -> bool {
        process_start_time(self.pid) == Some(self.start_time)
    }
}

pub fn state_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.json"))
}

/// Writes `state` (atomically: a temporary file renamed over it).
pub fn write(dir: &Path, state: &LabState) -> Result<()> {
    let io = |what: &str, e: std::io::Error| Error::System(format!("cannot {what} in {}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(|e| io("create the state directory", e))?;
    let path = state_path(dir, &state.id);
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string(state).expect("state serializes");
    std::fs::write(&tmp, text).map_err(|e| io("write a lab's state", e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io("write a lab's state", e))
}

pub fn read(dir: &Path, id: &str) -> Option<LabState> {
    let text = std::fs::read_to_string(state_path(dir, id)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Every readable state file, by id.
pub fn read_all(dir: &Path) -> Vec<LabState> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut labs: Vec<LabState> = entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            read(dir, name.strip_suffix(".json")?)
        })
        .collect();
    labs.sort_by(|a, b| a.id.cmp(&b.id));
    labs
}

/// Removes lab `state`: its processes, its namespaces, then its state file.
/// Returns how many namespaces were deleted.
pub fn remove_lab(tools: &Tools, dir: &Path, state: &LabState) -> usize {
    let n = remove_namespaces(tools, &state.namespaces);
    let _ = std::fs::remove_file(state_path(dir, &state.id));
    n
}

/// Removes every lab whose supervisor is gone; returns them with the number
/// of namespaces deleted.
pub fn sweep(tools: &Tools, dir: &Path) -> Vec<(LabState, usize)> {
    read_all(dir)
        .into_iter()
        .filter(|s| !s.alive())
        .map(|s| {
            let n = remove_lab(tools, dir, &s);
            (s, n)
        })
        .collect()
}

/// `/proc/<pid>/stat`'s start time, or `None` if no such process runs (a
/// zombie, dead but not yet reaped, does not).
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Field 22 of a `/proc/<pid>/stat` line, unless field 3 (the state) says
/// zombie or dead; the command (field 2) may hold spaces and parentheses, so
/// fields are counted after its last `)`.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(rest.next()?, "Z" | "X" | "x") {
        return None;
    }
    // Field 22 is the 19th after the state.
    rest.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(line), Some(987654));
        assert_eq!(parse_start_time("1 (x) S"), None);
        assert_eq!(parse_start_time(&line.replace(") S", ") Z")), None);
        let me = process_start_time(std::process::id() as i32).expect("this process has a start time");
        assert!(me > 0);
        assert_eq!(process_start_time(i32::MAX), None);
    }

    #[test]
    fn liveness_needs_the_same_start_time() {
        let pid = std::process::id() as i32;
        let start_time = process_start_time(pid).unwrap();
        let live = LabState { id: "x".into(), pid, start_time, namespaces: vec![], ready: None };
        assert!(live.alive());
        // The same pid, started at another time: a reused pid, not the supervisor.
        assert!(!LabState { start_time: start_time + 1, ..live.clone() }.alive());
        assert!(!LabState { pid: i32::MAX, ..live }.alive());
    }

    #[test]
    fn state_files_round_trip() {
        let dir = tempdir();
        let s = LabState {
            id: "ab12cd34".into(),
            pid: 1,
            start_time: 2,
            namespaces: vec!["thaw-ab12cd34".into()],
            ready: Some(serde_json::json!({"id": "ab12cd34"})),
        };
        write(&dir, &s).unwrap();
        assert_eq!(read(&dir, "ab12cd34"), Some(s.clone()));
        std::fs::write(dir.join("junk.json"), "{").unwrap();
        assert_eq!(read_all(&dir), vec![s]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("thaw-netlab-state-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

//! The directories a `thaw local` makes for itself (its MEM tiers under
//! `--mem-root`, and its journal and DISK tiers under the temp directory unless
//! `--state-dir` names where to keep them), and the removal of those that a
//! dead cluster left behind.
//!
//! Each is named `thaw-local-PORT-PID` and holds a lock file on which its
//! cluster keeps an exclusive `flock` for its whole life. The kernel drops the
//! lock when the process dies, kill -9 included, and a lock cannot be inherited
//! by a later process that happens to get the same pid: so a new cluster that
//! can take the lock knows the owner is gone and removes the directory, and
//! never one whose owner lives. Directories of older versions (no lock file)
//! are removed only when no process has the pid in their name.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Name prefix of every directory a `thaw local` makes for itself.
pub const PREFIX: &str = "thaw-local-";
/// The file in each such directory that its cluster holds locked.
const LOCK: &str = ".thaw-local.lock";

/// A directory this process made and holds as its own; dropped, it is removed.
#[derive(Debug)]
pub struct Owned {
    pub dir: PathBuf,
    _lock: File,
}

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Takes an exclusive lock on `f` without waiting: whether it was free.
fn try_lock(f: &File) -> bool {
    // SAFETY: a valid descriptor for the call; the lock goes with the file.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Makes `parent/thaw-local-PORT-PID` (empty: whatever an earlier process with
/// this pid left there goes) and holds it. The lock file is locked before it
/// takes its name, so no one ever sees it unlocked while this process lives.
pub fn claim(parent: &Path, port: u16) -> anyhow::Result<Owned> {
    use anyhow::Context;
    let pid = std::process::id();
    let dir = parent.join(format!("{PREFIX}{port}-{pid}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing a dead cluster's {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("making {}", dir.display()))?;
    let temp = dir.join(format!("{LOCK}.new"));
    let mut lock = File::create(&temp).with_context(|| format!("making {}", temp.display()))?;
    anyhow::ensure!(try_lock(&lock), "cannot lock {}: the file system has no flock", temp.display());
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    // For people: who holds it. The lock, not this text, is what counts.
    writeln!(lock, "thaw local pid {pid}, started at {started} (unix time)")?;
    std::fs::rename(&temp, dir.join(LOCK))?;
    Ok(Owned { dir, _lock: lock })
}

/// Whether a process with this pid exists now.
fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks; EPERM means it exists (another user's).
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether the `thaw-local-*` directory `dir` (named `name`) belongs to a
/// cluster that is gone: then `Some`, with its lock file held until the
/// caller has removed it.
fn abandoned(dir: &Path, name: &str) -> Option<Option<File>> {
    match File::options().read(true).write(true).open(dir.join(LOCK)) {
        // Held by a live cluster, or free: its owner died.
        Ok(f) => try_lock(&f).then_some(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Made by an older version (or just made, not yet marked): only
            // `thaw-local-PORT-PID` with no such process is surely dead.
            let mut parts = name[PREFIX.len()..].split('-');
            match (parts.next().map(str::parse::<u16>), parts.next().map(str::parse::<u32>), parts.next()) {
                (Some(Ok(_)), Some(Ok(pid)), None) => (pid != std::process::id() && !pid_alive(pid)).then_some(None),
                _ => None,
            }
        }
        // Someone else's, unreadable: not ours to judge.
        Err(_) => None,
    }
}

/// Removes the `thaw-local-*` directories under `parent` that dead clusters
/// left (see the module doc); returns those removed. Best effort: what cannot
/// be read or removed stays.
pub fn sweep(parent: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else { return Vec::new() };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(PREFIX) || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = e.path();
        if let Some(_lock) = abandoned(&dir, name)
            && std::fs::remove_dir_all(&dir).is_ok()
        {
            removed.push(dir);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_directory_stays_a_released_one_goes_and_an_old_one_goes_only_if_its_pid_is_dead() {
        let parent = tempfile::tempdir().unwrap();
        let held = claim(parent.path(), 7).unwrap();
        assert!(held.dir.join(LOCK).exists());
        // Another process's, released: its lock file is there and free.
        let released = parent.path().join(format!("{PREFIX}8-1"));
        std::fs::create_dir_all(&released).unwrap();
        std::fs::write(released.join(LOCK), "x").unwrap();
        // Older versions' (no lock file): a dead pid, a live one, a name without a pid.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let old_dead = parent.path().join(format!("{PREFIX}9-{dead}"));
        let old_live = parent.path().join(format!("{PREFIX}9-{}", std::process::id()));
        let old_port_only = parent.path().join(format!("{PREFIX}9"));
        let other = parent.path().join("thaw-cluster-x");
        for d in [&old_dead, &old_live, &old_port_only, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut removed = sweep(parent.path());
        removed.sort();
        let mut expected = vec![released.clone(), old_dead.clone()];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(held.dir.exists() && old_live.exists() && old_port_only.exists() && other.exists());
        // Dropped by its owner: removed.
        let dir = held.dir.clone();
        drop(held);
        assert!(!dir.exists());
    }
}

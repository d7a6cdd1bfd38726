//! A real HDFS for tests: Hadoop's MiniDFSCluster (a NameNode and DataNodes in
//! one JVM) through `scripts/hdfs/MiniHdfs.java`, made ready by
//! `scripts/hdfs/setup.sh` (run by `make test`). It exits when dropped (its stdin
//! closes) and can restart its NameNode.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use anyhow::{Context, Result, bail};

pub struct MiniHdfs {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its stdout's lines, read by a thread: every wait for one is bounded.
    lines: Receiver<String>,
    _dir: tempfile::TempDir,
    /// `hdfs://127.0.0.1:PORT`
    pub name_node: String,
}

/// Where `scripts/hdfs/setup.sh` put the jars and the launcher.
pub fn hdfs_home() -> PathBuf {
    if let Some(h) = std::env::var_os("THAW_HDFS_HOME") {
        return h.into();
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| "/root".into());
    home.join(".cache/thaw/hdfs-3.4.1")
}

impl MiniHdfs {
    /// `None` (having printed why) when no JVM or jars are here: the caller skips.
    pub fn start(datanodes: usize) -> Result<Option<MiniHdfs>> {
        let home = hdfs_home();
        if !home.join("classes/MiniHdfs.class").exists() {
            eprintln!(
                "SKIPPED: no MiniDFSCluster in {} (scripts/hdfs/setup.sh makes it; it needs a JDK and Maven)",
                home.display()
            );
            return Ok(None);
        }
        let dir = tempfile::Builder::new().prefix("thaw-hdfs-").tempdir()?;
        let classpath = format!("{}/lib/*:{}/classes", home.display(), home.display());
        let log = std::fs::File::create(dir.path().join("hdfs.log"))?;
        let mut child = Command::new("java")
            .args(["-Xmx768m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", &classpath, "MiniHdfs"])
            .arg(dir.path().join("data"))
            .args(["0", &datanodes.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .context("starting java (MiniHdfs)")?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let line = next_line(&lines, STARTUP).unwrap_or_else(|e| e);
        let Some(name_node) = line.trim().strip_prefix("hdfs listening on ").map(str::to_string) else {
            let _ = child.kill();
            let log = std::fs::read_to_string(dir.path().join("hdfs.log")).unwrap_or_default();
            bail!("MiniHdfs did not start: {line:?}\n{}", &log[log.len().saturating_sub(3000)..]);
        };
        Ok(Some(MiniHdfs { child, stdin, lines, _dir: dir, name_node }))
    }

    /// `hdfs://127.0.0.1:PORT/path`
    pub fn uri(&self, path: &str) -> String {
        format!("{}/{}", self.name_node, path.trim_start_matches('/'))
    }

    fn command(&mut self, cmd: &str, answer: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().context("MiniHdfs stopped")?;
        writeln!(stdin, "{cmd}")?;
        stdin.flush()?;
        let line = next_line(&self.lines, STARTUP).unwrap_or_else(|e| e);
        if line.trim() != answer {
            bail!("MiniHdfs {cmd}: {line:?}");
        }
        Ok(())
    }

    /// Stops the NameNode and starts it again on the same port and storage.
    pub fn restart_name_node(&mut self) -> Result<()> {
        self.command("restart-namenode", "namenode restarted")
    }
}

/// A JVM starting a NameNode and DataNodes, or restarting a NameNode, on 2 busy
/// cores: generous, but never a hang.
const STARTUP: Duration = Duration::from_secs(120);

/// The next line, or (as the error) what happened instead.
fn next_line(lines: &Receiver<String>, within: Duration) -> std::result::Result<String, String> {
    lines.recv_timeout(within).map_err(|e| match e {
        RecvTimeoutError::Timeout => format!("(no answer in {within:?})"),
        RecvTimeoutError::Disconnected => "(it exited)".to_string(),
    })
}

impl Drop for MiniHdfs {
    fn drop(&mut self) {
        self.stdin.take(); // EOF: it shuts the cluster down
        for _ in 0..100 {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

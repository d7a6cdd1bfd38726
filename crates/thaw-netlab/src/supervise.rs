//! `thaw netlab up`'s supervisor and its guard: the lab lives as long as the
//! supervisor's stdin is open and no SIGTERM, SIGINT or SIGHUP came; then the
//! supervisor removes it. Three layers make sure a lab never outlives its user:
//! - the supervisor runs in a session of its own (setsid), so a kill of its
//!   caller's process group does not reach it; it sees its caller's death as
//!   EOF on stdin and removes the lab;
//! - a guard process (the same binary, `thaw netlab guard`, in a session of its
//!   own) holds a pipe from the supervisor; if the supervisor dies without
//!   removing the lab (kill -9), the pipe's EOF makes the guard remove it;
//! - the state file lets `thaw netlab sweep` (and every `up`) remove a lab whose
//!   supervisor and guard are both gone.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::lab::Lab;
use crate::spec::{NetworkSpec, NodeSpec};
use crate::state;
use crate::sys::Tools;
use crate::{Error, Result};

/// Writes a line on stderr; a closed stderr (the caller gone) is no reason to stop.
fn say(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "thaw netlab: {line}");
}

/// Runs `thaw netlab up`: parses, checks, sweeps stale labs, builds the lab,
/// prints the ready line, waits, removes the lab. `guard` makes the command
/// that runs `thaw netlab guard` for a lab id. An error before the ready line
/// leaves nothing behind.
pub fn up(spec: &str, nodes: &[String], state_dir: &Path, guard: impl FnOnce(&str) -> Command) -> Result<()> {
    let spec = NetworkSpec::parse(spec)?;
    let nodes: Vec<NodeSpec> = nodes.iter().map(|n| NodeSpec::parse(n)).collect::<Result<_>>()?;
    crate::spec::check_nodes(&nodes)?;
    crate::sys::check_privileges()?;
    let tools = Tools::find()?;
    // Out of the caller's process group and session (fails only for a group
    // leader, which a group kill of its caller's group does not reach either).
    // SAFETY: plain system calls with no memory passed.
    unsafe {
        libc::setsid();
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let signals = Signals::install()?;
    for (lab, n) in state::sweep(&tools, state_dir) {
        say(format_args!("removed stale lab {} (supervisor pid {} gone; {n} namespaces)", lab.id, lab.pid));
    }
    let mut lab = Lab::prepare(spec, &nodes, state_dir.to_path_buf())?;
    let mut guard = match spawn_guard(guard(lab.id())) {
        Ok(g) => g,
        Err(e) => {
            lab.remove();
            return Err(e);
        }
    };
    let ready = lab.build().and_then(|()| lab.mark_ready()).and_then(|()| {
        let line = serde_json::to_string(&lab.ready_json()).expect("json");
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| Error::System(format!("cannot print the ready line: {e}")))
    });
    let outcome = match ready {
        Ok(()) => Ok(signals.wait_for_end()),
        Err(e) => Err(e),
    };
    let n = lab.remove();
    match &outcome {
        Ok(why) => say(format_args!("{why}: lab {} removed ({n} namespaces deleted)", lab.id())),
        Err(_) => say(format_args!("lab {} not made; removed what was ({n} namespaces)", lab.id())),
    }
    // The lab is gone: the guard's EOF finds no state file and it exits.
    drop(guard.stdin.take());
    let _ = guard.wait();
    outcome.map(|_| ())
}

fn spawn_guard(mut cmd: Command) -> Result<std::process::Child> {
    cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::inherit());
    // SAFETY: setsid is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| Error::System(format!("cannot start the lab's guard process: {e}")))
}

/// Runs `thaw netlab guard`: waits for EOF on stdin (the supervisor's pipe),
/// then removes lab `id` if its state file is still there.
pub fn guard(id: &str, state_dir: &Path) -> Result<()> {
    // SAFETY: signal dispositions set before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    let mut buf = [0u8; 256];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    if let Some(lab) = state::read(state_dir, id) {
        let tools = Tools::find()?;
        let n = state::remove_lab(&tools, state_dir, &lab);
        say(format_args!("guard: the supervisor of lab {id} ended without removing it; removed it ({n} namespaces)"));
    }
    Ok(())
}

/// Why a lab ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Eof,
    Signal(i32),
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Eof => f.write_str("stdin closed"),
            End::Signal(libc::SIGTERM) => f.write_str("SIGTERM"),
            End::Signal(libc::SIGINT) => f.write_str("SIGINT"),
            End::Signal(libc::SIGHUP) => f.write_str("SIGHUP"),
            End::Signal(n) => write!(f, "signal {n}"),
        }
    }
}

/// The write end of the self-pipe the signal handler writes to.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    let byte = signal as u8;
    // SAFETY: write(2) is async-signal-safe; one byte from a live local.
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
}

/// SIGTERM, SIGINT and SIGHUP turned into bytes on a pipe (the self-pipe
/// trick), so one poll(2) waits for them and for stdin's EOF.
struct Signals {
    read_fd: i32,
}

impl Signals {
    fn install() -> Result<Signals> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 fills the two-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(Error::System(format!("pipe: {}", std::io::Error::last_os_error())));
        }
        SIGNAL_PIPE.store(fds[1], Ordering::Relaxed);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            // SAFETY: a zeroed sigaction with a handler that only calls write(2).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        Ok(Signals { read_fd: fds[0] })
    }

    /// Blocks until stdin reaches EOF (or is closed or broken) or a signal came
    /// (also one that came before this call).
    fn wait_for_end(&self) -> End {
        let mut buf = [0u8; 4096];
        loop {
            let mut fds = [
                libc::pollfd { fd: self.read_fd, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 },
            ];
            // SAFETY: poll over a local array of two pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return End::Eof;
            }
            if fds[0].revents & libc::POLLIN != 0 {
                let mut byte = 0u8;
                // SAFETY: reading one byte into a local.
                if unsafe { libc::read(self.read_fd, (&mut byte as *mut u8).cast(), 1) } == 1 {
                    return End::Signal(byte as i32);
                }
            }
            if fds[1].revents & libc::POLLNVAL != 0 {
                return End::Eof;
            }
            if fds[1].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                // SAFETY: reading into a local buffer of its size.
                let got = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
                let again = got < 0
                    && matches!(
                        std::io::Error::last_os_error().kind(),
                        std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                    );
                if got == 0 || (got < 0 && !again) {
                    return End::Eof;
                }
            }
        }
    }
}

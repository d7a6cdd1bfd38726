//! `thaw local`, `thaw master`, `thaw worker`: servers in the foreground that stop
//! cleanly on Ctrl-C or SIGTERM. One file per role: `master` (`thaw master`,
//! and the master configuration `thaw local` shares), `worker` (`thaw
//! worker`), `local` (`thaw local`: a master and its workers in this
//! process). This file holds what they share: listening, the lines printed for
//! whoever started them, and stopping on a signal. Their arguments are in
//! `server_args`.

mod local;
mod master;
mod worker;

use std::net::SocketAddr;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use self::local::{LocalCluster, run_local};
pub use self::master::run_master;
pub use self::worker::run_worker;
pub use crate::server_args::*;

async fn listen(bind: &str, port: u16) -> anyhow::Result<TcpListener> {
    let addr: SocketAddr =
        format!("{bind}:{port}").parse().with_context(|| format!("bad listen address {bind}:{port}"))?;
    TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))
}

/// The metrics listener for `--metrics-port`, if given.
async fn listen_metrics(bind: &str, port: Option<u16>) -> anyhow::Result<Option<TcpListener>> {
    listen_optional(bind, port, "--metrics-port").await
}

/// A listener on `port` if given; an error names the `flag`.
async fn listen_optional(bind: &str, port: Option<u16>, flag: &str) -> anyhow::Result<Option<TcpListener>> {
    let Some(port) = port else {
        return Ok(None);
    };
    let l = listen(bind, port).await.with_context(|| format!("{flag} {port}"))?;
    Ok(Some(l))
}

/// Prints a line for whoever started the server; a closed stdout is no reason to
/// stop serving.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Cancels the token on Ctrl-C or SIGTERM.
pub fn stop_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
        }
        t.cancel();
    });
    token
}

//! `thaw auth ...`: the cluster secret and users' tokens.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use thaw_client::Client;
use thaw_common::auth::Secret;

#[derive(Subcommand)]
pub enum AuthCommand {
    /// Make a cluster secret: 32 random bytes, hex, in a new file of mode
    /// 600. Give the same file to the master and every worker
    /// (--secret-file), and to administrators (THAW_SECRET_FILE).
    Secret {
        /// The file to create (refused if it exists).
        path: PathBuf,
    },
    /// Make a cluster CA and a server certificate for TLS (PEM files in DIR:
    /// ca.pem, ca-key.pem, server.pem, server-key.pem). Give servers
    /// --tls-cert server.pem --tls-key server-key.pem, and everyone --tls-ca
    /// ca.pem (clients: THAW_TLS_CA).
    Certs {
        /// The directory to write the PEM files into (made if missing).
        dir: PathBuf,
        /// Host names and IP addresses the certificate is for (those clients
        /// dial: every master and worker address), comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        hosts: Vec<String>,
    },
    /// Get a token from the master and print it: your own (for a job, a
    /// notebook, a Dask cluster: THAW_TOKEN=...), or, as the superuser,
    /// another user's.
    Token {
        /// The token's user (default: yours). Superuser only.
        #[arg(long)]
        user: Option<String>,
        /// The user's groups, comma-separated (with --user).
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
        /// Lifetime in hours (default: the master's, 24).
        #[arg(long)]
        hours: Option<f64>,
    },
    /// Whom the master takes you for: user, groups, superuser or not, and
    /// whether it checks at all.
    Whoami {
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
}

pub fn secret(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(f, "{}", Secret::generate()?)?;
    f.sync_all()?;
    println!("{}: a new cluster secret (mode 600)", path.display());
    Ok(())
}

pub fn certs(dir: &std::path::Path, hosts: &[String]) -> anyhow::Result<()> {
    let f = thaw_common::tls::make_certs(dir, hosts)?;
    println!("CA:          {} (key {})", f.ca.display(), f.ca_key.display());
    println!("certificate: {} (key {}) for {}", f.cert.display(), f.key.display(), hosts.join(", "));
    Ok(())
}

pub async fn run(client: Client, cmd: AuthCommand) -> anyhow::Result<()> {
    match cmd {
        AuthCommand::Secret { path } => secret(&path)?,
        AuthCommand::Certs { dir, hosts } => certs(&dir, &hosts)?,
        AuthCommand::Token { user, groups, hours } => {
            let ttl_ms = match hours {
                Some(h) if !(h.is_finite() && h > 0.0) => anyhow::bail!("--hours must be a positive number"),
                Some(h) => (h * 3_600_000.0) as u64,
                None => 0,
            };
            let t = client.issue_token(user.as_deref().unwrap_or(""), &groups, ttl_ms).await?;
            println!("{}", t.token);
        }
        AuthCommand::Whoami { json } => {
            let me = client.who_am_i().await?;
            if json {
                let v = serde_json::json!({
                    "user": me.user, "groups": me.groups, "superuser": me.superuser,
                    "security": me.security, "expires_ms": me.expires_ms,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else if !me.security {
                println!(
                    "{} (this cluster has no secret: nothing is checked)",
                    if me.user.is_empty() { "?" } else { &me.user }
                );
            } else {
                let left = me.expires_ms.saturating_sub(thaw_common::now_ms()) / 1000;
                println!(
                    "{}{} groups [{}], token valid {}h{:02}m more",
                    me.user,
                    if me.superuser { " (superuser)" } else { "" },
                    me.groups.join(","),
                    left / 3600,
                    left % 3600 / 60
                );
            }
        }
    }
    Ok(())
}

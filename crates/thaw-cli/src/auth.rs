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
    /// S3 access keys for `thaw gateway`: requests signed with one act as
    /// its user (owners, groups and modes checked as for any client).
    #[command(name = "s3-key", subcommand)]
    S3Key(S3KeyCommand),
    /// Whom the master takes you for: user, groups, superuser or not, and
    /// whether it checks at all.
    Whoami {
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum S3KeyCommand {
    /// Make a key and print it with its secret (shown this once; a gateway
    /// holding the cluster secret derives it to check signatures).
    Create {
        /// The key's user (default: yours). Superuser only.
        #[arg(long)]
        user: Option<String>,
        /// The user's groups, comma-separated (with --user; default: yours).
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
        /// The job the key's requests count against when they name none
        /// (for clients that cannot send the x-thaw-job header).
        #[arg(long, default_value = "")]
        job: String,
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Your keys (the superuser's: everyone's, or --user's), without secrets.
    List {
        /// Only this user's keys (the superuser's view of others).
        #[arg(long)]
        user: Option<String>,
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Delete a key: gateways refuse it within seconds.
    Delete {
        /// The key's access key id (TK...).
        access_key: String,
    },
    /// Set the job a key's requests count against (empty: none).
    SetJob {
        /// The key's access key id (TK...).
        access_key: String,
        /// The job id ("" clears it).
        job: String,
    },
}

fn key_json(k: &thaw_common::proto::S3KeyRecord) -> serde_json::Value {
    serde_json::json!({
        "access_key": k.access_key, "user": k.user, "groups": k.groups, "job": k.job,
        "created_ms": k.created_ms, "created_by": k.created_by,
    })
}

async fn s3_key(client: Client, cmd: S3KeyCommand) -> anyhow::Result<()> {
    match cmd {
        S3KeyCommand::Create { user, groups, job, json } => {
            let r = client.create_s3_key(user.as_deref().unwrap_or(""), &groups, &job).await?;
            let k = r.key.context("the master answered without the key")?;
            if json {
                let mut v = key_json(&k);
                v["secret_key"] = r.secret_key.into();
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("access key: {}", k.access_key);
                println!("secret key: {}", r.secret_key);
                println!("user:       {} groups [{}]", k.user, k.groups.join(","));
                if !k.job.is_empty() {
                    println!("job:        {}", k.job);
                }
                println!("(the secret is not shown again)");
            }
        }
        S3KeyCommand::List { user, json } => {
            let keys = client.list_s3_keys(user.as_deref().unwrap_or(""), "").await?;
            if json {
                let v: Vec<_> = keys.iter().map(key_json).collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{:<22} {:<16} {:<20} JOB", "ACCESS KEY", "USER", "GROUPS");
                for k in &keys {
                    println!("{:<22} {:<16} {:<20} {}", k.access_key, k.user, k.groups.join(","), k.job);
                }
            }
        }
        S3KeyCommand::Delete { access_key } => {
            client.delete_s3_key(&access_key).await?;
            println!("deleted {access_key}");
        }
        S3KeyCommand::SetJob { access_key, job } => {
            let k = client.set_s3_key_job(&access_key, &job).await?;
            println!("{}: job {}", k.access_key, if k.job.is_empty() { "(none)" } else { &k.job });
        }
    }
    Ok(())
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
        AuthCommand::S3Key(c) => s3_key(client, c).await?,
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

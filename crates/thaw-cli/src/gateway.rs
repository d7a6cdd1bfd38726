//! `thaw gateway`: the S3-compatible endpoint (the `thaw-gateway` crate)
//! over the cluster the client flags name.

use anyhow::Context;
use clap::Args;
use thaw_common::proto::WriteType;

#[derive(Args)]
pub struct GatewayArgs {
    /// Port to serve S3 on (0: any free port; the chosen address is printed).
    #[arg(long, default_value_t = 19997)]
    port: u16,
    /// Address to listen on (0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Write type of a PUT that names none (header x-thaw-write-type, or
    /// metadata x-amz-meta-thaw-write-type): must-cache, cache-through,
    /// through, async-through, replicated-disk.
    #[arg(long, default_value = "cache-through", value_parser = write_type)]
    write_type: WriteType,
    /// On a cluster without a secret: the access key signed requests use
    /// (unsigned ones are served too). On one with a secret, requests are
    /// signed with S3 keys from `thaw auth s3-key create` instead.
    #[arg(long, env = "THAW_S3_ACCESS_KEY", default_value = thaw_gateway::DEFAULT_ACCESS_KEY)]
    access_key: String,
    /// Its secret key (from the environment, so it stays out of `ps`).
    #[arg(long, env = "THAW_S3_SECRET_KEY", default_value = thaw_gateway::DEFAULT_SECRET_KEY, hide_env_values = true)]
    secret_key: String,
    /// Seconds after which an unfinished multipart upload (or a staged PUT
    /// whose gateway died) is removed.
    #[arg(long, default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..))]
    upload_ttl: u64,
    /// Seconds a request body may send nothing before the request fails
    /// (IncompleteBody) and its staged bytes are removed.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    body_timeout: u64,
    /// The cluster secret, on a cluster that has one (THAW_SECRET_FILE):
    /// the gateway derives each S3 key's secret from it and acts as each
    /// key's user.
    #[command(flatten)]
    secret: crate::server_args::SecretArgs,
    /// HTTPS: the certificate (PEM) and its key (the cluster's, `thaw auth
    /// certs`, naming this host); --tls-ca (THAW_TLS_CA) to reach a TLS
    /// master.
    #[command(flatten)]
    tls: crate::server_args::TlsArgs,
}

fn write_type(s: &str) -> Result<WriteType, String> {
    thaw_client::parse_write_type(s).map(|(wt, _)| wt).map_err(|e| e.message)
}

pub async fn run(client: thaw_client::Client, args: GatewayArgs) -> anyhow::Result<()> {
    let secret = args.secret.load()?;
    let need_secret = || {
        anyhow::anyhow!(
            "the cluster checks credentials: give the gateway its secret (--secret-file or THAW_SECRET_FILE), \
             from which it checks S3 keys' signatures and acts as each key's user"
        )
    };
    // Asked as the superuser when the secret is at hand (the gateway acts so).
    let asking = match &secret {
        Some(s) => thaw_gateway::admin_client(&client, s)?,
        None => client.clone(),
    };
    let me = match asking.who_am_i().await {
        Ok(me) => me,
        Err(e) if e.kind == thaw_common::ErrorKind::PermissionDenied && secret.is_none() => return Err(need_secret()),
        Err(e) => return Err(anyhow::Error::from(e).context("the master does not answer")),
    };
    if me.security && secret.is_none() {
        return Err(need_secret());
    }
    if !me.security && secret.is_some() {
        anyhow::bail!("--secret-file: the cluster has no secret (its master was started without one)");
    }
    let tls = args.tls.server()?;
    let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
        .await
        .with_context(|| format!("--port {}: cannot listen on {}:{}", args.port, args.bind, args.port))?;
    // The line scripts and tests wait for.
    println!("thaw gateway listening on {}", listener.local_addr()?);
    if tls.is_some() {
        println!("thaw gateway: HTTPS (clients trust the cluster's CA)");
    }
    let gateway = thaw_gateway::Gateway::new(
        client,
        thaw_gateway::GatewayConfig {
            write_type: args.write_type,
            key: (args.access_key, args.secret_key),
            upload_ttl: std::time::Duration::from_secs(args.upload_ttl),
            body_timeout: std::time::Duration::from_secs(args.body_timeout),
            secret,
            tls,
        },
    )?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let stop = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    gateway.serve(listener, stop).await;
    Ok(())
}

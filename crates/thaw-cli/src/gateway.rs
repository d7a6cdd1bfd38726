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
    /// The access key signed requests use (unsigned ones are served too).
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
}

fn write_type(s: &str) -> Result<WriteType, String> {
    thaw_client::parse_write_type(s).map(|(wt, _)| wt).map_err(|e| e.message)
}

pub async fn run(client: thaw_client::Client, args: GatewayArgs) -> anyhow::Result<()> {
    let me = client.who_am_i().await.context("the master does not answer")?;
    if me.security {
        // Anonymous S3 requests would act as this process's Thaw user.
        anyhow::bail!(
            "the cluster checks credentials, and this gateway serves anonymous S3 requests only \
             (S3 access keys mapped to Thaw users are not built yet): run it against a cluster without a secret"
        );
    }
    let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
        .await
        .with_context(|| format!("--port {}: cannot listen on {}:{}", args.port, args.bind, args.port))?;
    // The line scripts and tests wait for.
    println!("thaw gateway listening on {}", listener.local_addr()?);
    let gateway = thaw_gateway::Gateway::new(
        client,
        thaw_gateway::GatewayConfig {
            write_type: args.write_type,
            key: (args.access_key, args.secret_key),
            upload_ttl: std::time::Duration::from_secs(args.upload_ttl),
            body_timeout: std::time::Duration::from_secs(args.body_timeout),
        },
    );
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

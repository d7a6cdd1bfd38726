//! `thaw interfere`: synthetic load on a worker's emulated device, as the dd jobs
//! of DYRS, section V-C (evaluation only; the worker needs `--device-model`).

use anyhow::{Context, bail};
use clap::Args;
use thaw_client::Client;
use thaw_client::json::worker_stats_json;

use crate::output::device_line;

#[derive(Args)]
pub struct InterfereArgs {
    /// The worker, by id as `thaw status` shows it.
    #[arg(long)]
    worker: u64,
    /// disk (its DISK tier) or ufs (the under-store as it reads it).
    #[arg(long, default_value = "disk", value_parser = ["disk", "ufs"])]
    device: String,
    /// on: start synthetic readers on the device; off: stop them.
    #[arg(value_parser = ["on", "off"])]
    state: String,
    /// How many synthetic readers (with on).
    #[arg(long, default_value_t = 1)]
    streams: u32,
    /// Print the worker's stats as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(client: Client, args: InterfereArgs) -> anyhow::Result<()> {
    let streams = if args.state == "on" { args.streams } else { 0 };
    if args.state == "on" && streams == 0 {
        bail!("--streams must be at least 1 with on (off stops the interference)");
    }
    let status = client.cluster_status().await?;
    let Some(w) = status.workers.iter().find(|w| w.id == args.worker) else {
        let ids: Vec<String> = status.workers.iter().map(|w| w.id.to_string()).collect();
        let known = if ids.is_empty() { "none".to_string() } else { ids.join(", ") };
        bail!("no worker with id {} (workers: {known}; see thaw status)", args.worker);
    };
    if !w.alive {
        bail!("worker {} ({}) is dead", w.id, w.data_address);
    }
    let stats = client
        .device_control(&w.data_address, &args.device, streams)
        .await
        .with_context(|| format!("worker {} ({})", w.id, w.data_address))?;
    if args.json {
        let mut v = worker_stats_json(&stats);
        v["id"] = w.id.into();
        v["address"] = w.data_address.clone().into();
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return Ok(());
    }
    for d in stats.devices.iter().filter(|d| d.device == args.device) {
        println!("worker {} ({}) {}", w.id, w.data_address, device_line(d));
    }
    Ok(())
}

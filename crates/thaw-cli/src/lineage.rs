//! `thaw lineage ...`: recording and reading lineage entries (Tachyon, section 2.5's
//! submitDependency) from a shell.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use thaw_client::Client;
use thaw_client::json::{dependency_kind_name, lineage_json};
use thaw_common::proto::{DependencyKind, LineageInfo};

#[derive(Subcommand)]
pub enum LineageCommand {
    /// Record that COMMAND derives the outputs from the inputs, before the
    /// outputs are written: `thaw lineage submit --input /logs/day1 --output
    /// /clean/day1 -- my-cleaner --day 1`. Files then written at the output
    /// paths can be rebuilt by running COMMAND again.
    Submit {
        /// An input: its file id (FID), or a path, taken as the FID of the file
        /// there now. Ordered; repeat for more.
        #[arg(long = "input")]
        inputs: Vec<String>,
        /// An output path (must not exist yet). Ordered; repeat for more.
        #[arg(long = "output", required = true)]
        outputs: Vec<String>,
        /// narrow: output i is derived from input i alone (as many inputs as
        /// outputs), and a rerun produces only the lost outputs; wide: every
        /// output needs every input, and a rerun produces them all. The rerun
        /// is told which in THAW_REBUILD_OUTPUTS (docs/writes-and-lineage.md).
        #[arg(long, default_value = "wide", value_parser = ["narrow", "wide"])]
        kind: String,
        /// A file whose bytes are the program's configuration (passed back to
        /// it on recomputation; at most 1 MiB).
        #[arg(long)]
        config_file: Option<PathBuf>,
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
        /// The program to rerun and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Show a lineage, by id or by a file it wrote.
    Show {
        /// A lineage id, or the path of a file written under one.
        what: String,
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// List every lineage entry.
    Ls {
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
}

/// A FID, or a path resolved to the FID of the file there now.
async fn fid(client: &Client, s: &str) -> anyhow::Result<u64> {
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    let info = client.stat(s).await.with_context(|| format!("input {s}"))?;
    anyhow::ensure!(!info.is_dir, "input {s} is a directory: name its files");
    Ok(info.file_id)
}

pub async fn run(client: Client, cmd: LineageCommand) -> anyhow::Result<()> {
    match cmd {
        LineageCommand::Submit { inputs, outputs, kind, config_file, json, command } => {
            let mut fids = Vec::with_capacity(inputs.len());
            for i in &inputs {
                fids.push(fid(&client, i).await?);
            }
            let config = match &config_file {
                Some(p) => std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?,
                None => Vec::new(),
            };
            let kind = if kind == "narrow" { DependencyKind::Narrow } else { DependencyKind::Wide };
            let l = client.submit_dependency(&fids, &outputs, &command, &config, kind).await?;
            print(&l, json);
        }
        LineageCommand::Show { what, json } => {
            let l = match what.parse::<u64>() {
                Ok(id) => client.lineage(id, "").await?,
                Err(_) => client.lineage(0, &what).await?,
            };
            print(&l, json);
        }
        LineageCommand::Ls { json } => {
            let all = client.lineages().await?;
            if json {
                let v: Vec<_> = all.iter().map(lineage_json).collect();
                println!("{}", serde_json::to_string_pretty(&v).expect("json"));
            } else {
                for l in &all {
                    let state = if l.broken.is_empty() { "ok".to_string() } else { format!("BROKEN: {}", l.broken) };
                    println!(
                        "{:>6}  {:<6}  {} -> {}  [{}]  {}",
                        l.lineage_id,
                        dependency_kind_name(l.kind),
                        l.input_fids.len(),
                        l.output_paths.join(","),
                        l.command.join(" "),
                        state
                    );
                }
            }
        }
    }
    Ok(())
}

fn print(l: &LineageInfo, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(&lineage_json(l)).expect("json"));
        return;
    }
    println!("lineage     {}", l.lineage_id);
    println!("kind        {}", dependency_kind_name(l.kind));
    for (f, p) in l.input_fids.iter().zip(&l.input_paths) {
        println!("input       FID {f}  {}", if p.is_empty() { "(gone)" } else { p });
    }
    for (p, f) in l.output_paths.iter().zip(&l.output_fids) {
        let fid = if *f == 0 { "not written yet".to_string() } else { format!("FID {f}") };
        println!("output      {p}  {fid}");
    }
    println!("command     {}", l.command.join(" "));
    println!("config      {} bytes", l.config.len());
    if !l.broken.is_empty() {
        println!("BROKEN      {}", l.broken);
    }
    if l.reruns > 0 {
        let how = "to rebuild lost outputs";
        println!("reran       {}", crate::output::rebuilt(l.reruns, l.last_rerun_ms, l.last_rerun_took_ms, how));
        let produced: Vec<String> = l.last_rerun_outputs.iter().map(|i| i.to_string()).collect();
        println!("last rerun  produced outputs {} of {}", produced.join(", "), l.output_paths.len());
    }
}

//! `thaw fs ...`: file system commands against a running cluster.

use std::os::fd::AsFd;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use thaw_client::{Client, WriteOptions};
use thaw_common::proto::WriteType;

use crate::output;
use crate::size_arg;

#[derive(Subcommand)]
pub enum FsCommand {
    /// List a directory (or show one file).
    Ls {
        #[arg(default_value = "/")]
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Show a file's status and each block's replicas.
    Stat {
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Print a file to standard output.
    Cat { path: String },
    /// Copy a local file into Thaw (`-`: standard input, until it ends).
    Put {
        local: PathBuf,
        path: String,
        /// must-cache, async-through (memory now, under-store in the
        /// background), cache-through, through, or replicated:N
        #[arg(long, default_value = "cache-through", value_parser = parse_write_type)]
        write_type: (WriteType, u32),
        #[arg(long, value_parser = size_arg)]
        block_size: Option<u64>,
        /// Replace an existing file.
        #[arg(long, short = 'f')]
        force: bool,
        /// Intermediate data: never checkpointed unless persisted by hand
        /// (async-through only).
        #[arg(long)]
        temporary: bool,
        /// Permission bits, in octal (default 644).
        #[arg(long, value_parser = parse_mode)]
        mode: Option<u32>,
    },
    /// Rebuild a lost file from its lineage (tachyon.txt 2.6): reruns the
    /// programs that wrote it, and those of its lost inputs first.
    Recompute {
        path: String,
        /// Return at once instead of waiting for the rebuild.
        #[arg(long)]
        no_wait: bool,
        /// Try again even if its lineage failed for good before.
        #[arg(long)]
        retry: bool,
        /// Give up waiting after this many seconds.
        #[arg(long, default_value_t = 600.0)]
        timeout: f64,
        #[arg(long)]
        json: bool,
    },
    /// Write a file to the under-store now (first in the checkpoint order).
    Persist {
        path: String,
        /// Return at once instead of waiting until it is persisted.
        #[arg(long)]
        no_wait: bool,
        /// Give up waiting after this many seconds.
        #[arg(long, default_value_t = 300.0)]
        timeout: f64,
        #[arg(long)]
        json: bool,
    },
    /// Copy a Thaw file to a local file.
    Get { path: String, local: PathBuf },
    /// Delete a file or directory.
    Rm {
        path: String,
        #[arg(short = 'r', long)]
        recursive: bool,
    },
    /// Make a directory.
    Mkdir {
        path: String,
        /// Create parents; succeed if it exists.
        #[arg(short = 'p', long)]
        parents: bool,
    },
    /// Rename a file or directory.
    Mv { src: String, dst: String },
    /// Change an entry's permission bits (octal, e.g. 600): its owner or the
    /// superuser.
    Chmod {
        #[arg(value_parser = parse_mode)]
        mode: u32,
        path: String,
    },
    /// Change an entry's owner (`OWNER` or `OWNER:GROUP`): the superuser only.
    Chown { owner: String, path: String },
    /// Change an entry's group: its owner, to one of its own groups.
    Chgrp { group: String, path: String },
}

fn parse_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(m) if m <= 0o777 && !s.is_empty() => Ok(m),
        _ => Err(format!("{s:?} is not a mode: three octal digits, e.g. 640")),
    }
}

fn parse_write_type(s: &str) -> Result<(WriteType, u32), String> {
    thaw_client::parse_write_type(s).map_err(|e| e.message)
}

pub async fn run(client: Client, cmd: FsCommand) -> anyhow::Result<()> {
    match cmd {
        FsCommand::Ls { path, json } => output::print_listing(&client.list(&path).await?, json),
        FsCommand::Stat { path, json } => output::print_stat(&client.stat_blocks(&path, true).await?.0, json),
        FsCommand::Cat { path } => {
            let mut r = client.open(&path).await?;
            // Standard output as a file: blocks on this host go to it in the kernel.
            // (A closed pipe ends the command by SIGPIPE, as it ends `cat`.)
            let out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
            r.copy_to(&out, u64::MAX).await?;
        }
        FsCommand::Put { local, path, write_type: (write_type, replication), block_size, force, temporary, mode } => {
            let stdin = local.as_os_str() == "-";
            let file = if stdin {
                None
            } else {
                let file = std::fs::File::open(&local).with_context(|| format!("cannot open {}", local.display()))?;
                // A file still growing is taken up to its length at the start.
                let len = file.metadata().with_context(|| format!("cannot open {}", local.display()))?.len();
                Some((file, len))
            };
            let opts = WriteOptions {
                write_type,
                block_size: block_size.unwrap_or(0),
                replication,
                recursive: true,
                overwrite: force,
                temporary,
                mode,
                length: file.as_ref().map_or(0, |(_, len)| *len),
            };
            let mut w = client.create(&path, opts).await?;
            match &file {
                Some((file, len)) => {
                    w.write_from_file(file, 0, *len).await.with_context(|| format!("copying {}", local.display()))?;
                }
                None => {
                    if let Err(e) = copy_stdin(&mut w).await {
                        w.abort().await;
                        return Err(e.context("copying standard input"));
                    }
                }
            }
            let info = w.close().await?;
            println!(
                "{} -> {} ({} bytes, {})",
                local.display(),
                info.path,
                info.length,
                output::write_type_name(info.write_type())
            );
        }
        FsCommand::Get { path, local } => {
            let mut r = client.open(&path).await?;
            let tmp = local.with_extension("thaw-part");
            let out = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
            let copied = async {
                r.copy_to(&out, u64::MAX).await?;
                out.sync_all()?;
                std::fs::rename(&tmp, &local)?;
                Ok::<_, anyhow::Error>(())
            }
            .await;
            if copied.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            copied?;
        }
        FsCommand::Recompute { path, no_wait, retry, timeout, json } => {
            if !timeout.is_finite() || timeout < 0.0 {
                anyhow::bail!("--timeout must be a number of seconds >= 0");
            }
            let mut info = client.recompute(&path, retry).await?;
            if !no_wait && info.lost {
                info = client.wait_rebuilt(&path, std::time::Duration::from_secs_f64(timeout)).await?;
            }
            output::print_rebuild(&info, json);
        }
        FsCommand::Persist { path, no_wait, timeout, json } => {
            if !timeout.is_finite() || timeout < 0.0 {
                anyhow::bail!("--timeout must be a number of seconds >= 0");
            }
            let info = if no_wait {
                client.persist(&path).await?
            } else {
                client.persist_wait(&path, std::time::Duration::from_secs_f64(timeout)).await?
            };
            output::print_persisted(&info, json);
        }
        FsCommand::Rm { path, recursive } => client.delete(&path, recursive).await?,
        FsCommand::Mkdir { path, parents } => {
            client.mkdir(&path, parents, parents).await?;
        }
        FsCommand::Mv { src, dst } => {
            client.rename(&src, &dst).await?;
        }
        FsCommand::Chmod { mode, path } => {
            client.set_attributes(&path, Some(mode), None, None).await?;
        }
        FsCommand::Chown { owner, path } => {
            let (owner, group) = match owner.split_once(':') {
                Some((o, g)) => (o.to_string(), Some(g.to_string())),
                None => (owner, None),
            };
            client.set_attributes(&path, None, Some(owner), group).await?;
        }
        FsCommand::Chgrp { group, path } => {
            client.set_attributes(&path, None, None, Some(group)).await?;
        }
    }
    Ok(())
}

/// Copies standard input into `w` until it ends, a chunk at a time, read on a
/// blocking thread (a pipe may stay silent for long; the writer's lease is
/// renewed meanwhile).
async fn copy_stdin(w: &mut thaw_client::FileWriter) -> anyhow::Result<()> {
    use std::io::Read;
    const CHUNK: usize = 4 << 20;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(2);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            let mut buf = vec![0u8; CHUNK];
            let r = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    buf.truncate(n);
                    Ok(buf)
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => Err(e),
            };
            let failed = r.is_err();
            if tx.blocking_send(r).is_err() || failed {
                break;
            }
        }
    });
    while let Some(chunk) = rx.recv().await {
        w.write(&chunk?).await?;
    }
    Ok(())
}

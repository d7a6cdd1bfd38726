//! `thaw fs ...`: file system commands against a running cluster.

use std::os::fd::AsFd;
use std::path::PathBuf;

use clap::Subcommand;
use thaw_client::{Client, WriteOptions};
use thaw_common::proto::WriteType;
use thaw_common::{ErrorKind, ThawError};

use crate::size_arg;
use crate::{output, transfer};

#[derive(Subcommand)]
pub enum FsCommand {
    /// List a directory (or show one file).
    Ls {
        /// The directory or file.
        #[arg(default_value = "/")]
        path: String,
        /// Print JSON (for scripts): one object per entry.
        #[arg(long)]
        json: bool,
    },
    /// Show a file's status and each block's replicas.
    Stat {
        /// The file or directory.
        path: String,
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Print a file to standard output.
    Cat {
        /// The file.
        path: String,
    },
    /// Copy a local file, or a directory tree, into Thaw, as `cp -r` does: to
    /// PATH, or into PATH if it is a directory (or ends with `/`).
    Put {
        /// The local file or directory; `-`: standard input, until it ends.
        local: PathBuf,
        /// Where in Thaw: a new path, or a directory to copy into.
        path: String,
        /// must-cache, async-through (memory now, under-store in the
        /// background), cache-through, through, or replicated:N
        #[arg(long, default_value = "cache-through", value_parser = parse_write_type)]
        write_type: (WriteType, u32),
        /// Block size of the new files, e.g. 16MiB (default: the master's).
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
    /// Rebuild a lost file from its lineage (Tachyon, section 2.6): reruns the
    /// programs that wrote it, and those of its lost inputs first.
    Recompute {
        /// The lost file.
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
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Write a file to the under-store now (first in the checkpoint order).
    Persist {
        /// The file.
        path: String,
        /// Return at once instead of waiting until it is persisted.
        #[arg(long)]
        no_wait: bool,
        /// Give up waiting after this many seconds.
        #[arg(long, default_value_t = 300.0)]
        timeout: f64,
        /// Print JSON (for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Copy a Thaw file, or a directory tree, to local files, as `cp -r`
    /// does: to LOCAL, or into LOCAL if it is a directory. Each file lands
    /// whole or not at all.
    Get {
        /// The file or directory in Thaw.
        path: String,
        /// Where: a new local path, a directory to copy into, or `-` for
        /// standard output (a file only).
        local: PathBuf,
    },
    /// Delete a file or directory.
    Rm {
        /// The file or directory.
        path: String,
        /// Delete a directory with everything in it.
        #[arg(short = 'r', long)]
        recursive: bool,
    },
    /// Make a directory.
    Mkdir {
        /// The new directory.
        path: String,
        /// Create parents; succeed if it exists.
        #[arg(short = 'p', long)]
        parents: bool,
    },
    /// Rename a file or directory, as `mv` does: to DST, or into DST if it
    /// is a directory.
    Mv {
        /// The file or directory to move.
        src: String,
        /// Its new path, or a directory to move it into.
        dst: String,
    },
    /// Change an entry's permission bits (octal, e.g. 600): its owner or the
    /// superuser.
    Chmod {
        /// The new bits, in octal (e.g. 640).
        #[arg(value_parser = parse_mode)]
        mode: u32,
        /// The file or directory.
        path: String,
    },
    /// Change an entry's owner (`OWNER` or `OWNER:GROUP`): the superuser only.
    Chown {
        /// The new owner, or OWNER:GROUP.
        owner: String,
        /// The file or directory.
        path: String,
    },
    /// Change an entry's group: its owner, to one of its own groups.
    Chgrp {
        /// The new group.
        group: String,
        /// The file or directory.
        path: String,
    },
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
        FsCommand::Ls { path, json } => {
            let mut out = output::Listing::new(json);
            client.list_each(&path, false, |page| Ok(out.page(&page)?)).await?;
            out.finish();
        }
        FsCommand::Stat { path, json } => output::print_stat(&client.stat_blocks(&path, true).await?.0, json),
        FsCommand::Cat { path } => {
            let mut r = client.open(&path).await?;
            // Standard output as a file: blocks on this host go to it in the kernel.
            // (A closed pipe ends the command by SIGPIPE, as it ends `cat`.)
            let out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
            r.copy_to(&out, u64::MAX).await?;
        }
        FsCommand::Put { local, path, write_type: (write_type, replication), block_size, force, temporary, mode } => {
            let opts = WriteOptions {
                write_type,
                block_size: block_size.unwrap_or(0),
                replication,
                recursive: true,
                overwrite: force,
                temporary,
                mode,
                ..Default::default()
            };
            transfer::put(&client, &local, &path, opts).await?;
        }
        FsCommand::Get { path, local } => transfer::get(&client, &path, &local).await?,
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
        FsCommand::Rm { path, recursive } => client.delete(&path, recursive).await.map_err(|e| {
            hint(e, ErrorKind::DirectoryNotEmpty, "`thaw fs rm -r` deletes a directory with everything in it")
        })?,
        FsCommand::Mkdir { path, parents } => {
            client
                .mkdir(&path, parents, parents)
                .await
                .map_err(|e| hint(e, ErrorKind::NotFound, "`thaw fs mkdir -p` creates the parents too"))?;
        }
        FsCommand::Mv { src, dst } => {
            transfer::rename(&client, &src, &dst).await?;
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

/// `e` with a hint on what to type, if it is of `kind`.
fn hint(e: ThawError, kind: ErrorKind, what: &str) -> anyhow::Error {
    if e.kind == kind { anyhow::anyhow!("{e} ({what})") } else { e.into() }
}

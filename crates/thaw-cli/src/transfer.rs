//! `thaw fs put`, `fs get` and `fs mv` with the targets of `cp -r` and `mv`: a
//! directory tree is copied whole, and a target that is an existing directory
//! (or a Thaw path ending in `/`) receives the source under its own name. An
//! existing file at a target is replaced only with `--force` (put), never by
//! `mv`, as before.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use thaw_client::{Client, WriteOptions};
use thaw_common::ErrorKind;
use thaw_common::proto::FileInfo;

use crate::output;

/// Where a copy of `src` (its last component `name`) goes, given the target
/// and whether the target is an existing directory: into it, as `cp` and `mv`
/// do, else the target itself.
pub fn target(dst: &str, dst_is_dir: bool, name: &str) -> String {
    if dst_is_dir || dst.ends_with('/') { format!("{}/{name}", dst.trim_end_matches('/')) } else { dst.to_string() }
}

/// The entry at `path`, or `None` if there is none.
async fn lookup(client: &Client, path: &str) -> anyhow::Result<Option<FileInfo>> {
    match client.stat(path).await {
        Ok(info) => Ok(Some(info)),
        Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The last component of a Thaw path (`/` has none).
fn base_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

/// `thaw fs mv SRC DST`: into DST if it is a directory.
pub async fn rename(client: &Client, src: &str, dst: &str) -> anyhow::Result<()> {
    let into = lookup(client, dst).await?.is_some_and(|i| i.is_dir);
    let name = base_name(src);
    if (into || dst.ends_with('/')) && name.is_empty() {
        bail!("cannot move / into {dst}");
    }
    client.rename(src, &target(dst, into, name)).await?;
    Ok(())
}

/// `thaw fs put LOCAL PATH`.
pub async fn put(client: &Client, local: &Path, path: &str, opts: WriteOptions) -> anyhow::Result<()> {
    let into = lookup(client, path).await?.is_some_and(|i| i.is_dir);
    if local.as_os_str() == "-" {
        if into || path.ends_with('/') {
            bail!("{path} is a directory: name the file to write standard input to (e.g. {path}/NAME)");
        }
        return put_stdin(client, path, opts).await;
    }
    let meta = std::fs::metadata(local).with_context(|| format!("cannot open {}", local.display()))?;
    let name = local_name(local)?;
    let dst = target(path, into, &name);
    if !meta.is_dir() {
        return put_file(client, local, &dst, opts).await;
    }
    // The tree, sorted, each directory made (empty ones too) before its files.
    let mut stack = vec![(local.to_path_buf(), dst)];
    while let Some((dir, at)) = stack.pop() {
        client.mkdir(&at, true, true).await?;
        let mut entries = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot read directory {}", dir.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("cannot read directory {}", dir.display()))?;
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in entries {
            let p = e.path();
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                bail!("{}: the name is not UTF-8, which Thaw paths must be", p.display());
            };
            let child = format!("{}/{name}", at.trim_end_matches('/'));
            // Links are followed, as `cp -rL` does.
            if std::fs::metadata(&p).with_context(|| format!("cannot open {}", p.display()))?.is_dir() {
                subdirs.push((p, child));
            } else {
                put_file(client, &p, &child, opts.clone()).await?;
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// The name a local source has at its target (`.` and `..` resolved).
fn local_name(local: &Path) -> anyhow::Result<String> {
    let full = std::fs::canonicalize(local).with_context(|| format!("cannot open {}", local.display()))?;
    match full.file_name() {
        Some(n) => {
            n.to_str().map(str::to_string).with_context(|| format!("{}: the name is not UTF-8", local.display()))
        }
        None => bail!("cannot copy / : name a directory below it"),
    }
}

async fn put_file(client: &Client, local: &Path, path: &str, opts: WriteOptions) -> anyhow::Result<()> {
    let file = std::fs::File::open(local).with_context(|| format!("cannot open {}", local.display()))?;
    // A file still growing is taken up to its length at the start.
    let len = file.metadata().with_context(|| format!("cannot open {}", local.display()))?.len();
    let mut w = client.create(path, WriteOptions { length: Some(len), ..opts }).await?;
    w.write_from_file(&file, 0, len).await.with_context(|| format!("copying {}", local.display()))?;
    said(local, &w.close().await?);
    Ok(())
}

async fn put_stdin(client: &Client, path: &str, opts: WriteOptions) -> anyhow::Result<()> {
    let mut w = client.create(path, opts).await?;
    if let Err(e) = copy_stdin(&mut w).await {
        w.abort().await;
        return Err(e.context("copying standard input"));
    }
    said(Path::new("-"), &w.close().await?);
    Ok(())
}

fn said(local: &Path, info: &FileInfo) {
    println!(
        "{} -> {} ({} bytes, {})",
        local.display(),
        info.path,
        info.length,
        output::write_type_name(info.write_type())
    );
}

/// `thaw fs get PATH LOCAL`.
pub async fn get(client: &Client, path: &str, local: &Path) -> anyhow::Result<()> {
    let info = client.stat(path).await?;
    if local.as_os_str() == "-" {
        if info.is_dir {
            bail!("{} is a directory: standard output takes one file", info.path);
        }
        // Standard output as a file: blocks on this host go to it in the kernel.
        let out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
        client.open(&info.path).await?.copy_to(&out, u64::MAX).await?;
        return Ok(());
    }
    let dst = if local.is_dir() {
        let name = base_name(&info.path);
        if name.is_empty() { local.to_path_buf() } else { local.join(name) }
    } else {
        local.to_path_buf()
    };
    if !info.is_dir {
        return get_file(client, &info.path, &dst).await;
    }
    let mut stack = vec![(info.path, dst)];
    while let Some((dir, at)) = stack.pop() {
        std::fs::create_dir_all(&at).with_context(|| format!("cannot create directory {}", at.display()))?;
        let mut subdirs = Vec::new();
        for e in client.list(&dir).await? {
            let child = at.join(&e.name);
            if e.is_dir {
                subdirs.push((e.path, child));
            } else {
                get_file(client, &e.path, &child).await?;
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// One file, written beside its target and renamed into place when whole.
async fn get_file(client: &Client, path: &str, local: &Path) -> anyhow::Result<()> {
    let mut r = client.open(path).await?;
    let tmp = part_path(local);
    let out = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let copied = async {
        r.copy_to(&out, u64::MAX).await?;
        out.sync_all()?;
        std::fs::rename(&tmp, local).with_context(|| format!("cannot create {}", local.display()))?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    copied
}

/// `.NAME.thaw-part` beside `local`: hidden, and never another file's name.
fn part_path(local: &Path) -> PathBuf {
    let name = local.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    local.with_file_name(format!(".{name}.thaw-part"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_target_receives_the_source_under_its_name() {
        assert_eq!(target("/d", true, "f"), "/d/f");
        assert_eq!(target("/d/", false, "f"), "/d/f");
        assert_eq!(target("/", true, "f"), "/f");
        assert_eq!(target("/new", false, "f"), "/new");
        assert_eq!(base_name("/a/b/"), "b");
        assert_eq!(base_name("/"), "");
    }
}

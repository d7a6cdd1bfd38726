//! Benchmarks 7-9, the user's paths: `thaw fs cat`, `thaw fs get` and `thaw fs put`
//! run as the `thaw` binary (process start, metadata calls and all), for a file
//! in the memory of a worker on this host, next to `cat` and `cp` of the same
//! bytes between tmpfs files (issue 13, part 4). Thaw has to reach 0.8 of them.
//!
//! - cat: `thaw fs cat F > /dev/null` vs `cat T > /dev/null`, T a tmpfs file;
//! - get: `thaw fs get F O` vs `cp T O`, O a new file in /dev/shm;
//! - put: `thaw fs put -f T F --write-type must-cache` (into the worker's MEM
//!   tier) vs `cp T O`.
//!
//! Every output is checked against the data set, outside the timed span.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use thaw_common::proto::WriteType;

use crate::measure::{Comparison, Spec, compare};
use crate::payload::{self, Transfer};
use crate::{BLOCK_SIZE, Config};

const PATH: &str = "/bench/user-paths.bin";
const PUT_PATH: &str = "/bench/user-put.bin";

/// The three comparisons, on one cluster.
pub async fn run(cfg: &Config) -> Result<Vec<Comparison>> {
    let size = cfg.size;
    let cluster = crate::setup::one_worker(BLOCK_SIZE, (2 << 30).max(4 * size)).await?;
    let client = crate::setup::client(&cluster, "h0", "r0")?;
    payload::write_thaw(&client, PATH, size, WriteType::MustCache, BLOCK_SIZE).await?;
    let dir = tempfile::Builder::new().prefix("thaw-bench-").tempdir_in("/dev/shm")?;
    let src = dir.path().join("src.bin");
    payload::write_file(&src, size)?;
    let sum = payload::expected_sum(size);
    let bin = crate::setup::thaw_bin()?;
    let thaw = |args: &[&str]| {
        let mut c = Command::new(&bin);
        c.args(args)
            .env("THAW_MASTER", cluster.master_addr())
            .env("THAW_HOST", "h0")
            .env("THAW_JOB_ID", "thaw-bench")
            .env_remove("THAW_SHORT_CIRCUIT")
            .env_remove("THAW_READ_CACHE");
        c
    };
    let out = dir.path().join("out.bin");
    let file_arg = |p: &Path| p.to_str().expect("utf-8 temp path").to_string();
    let (src_s, out_s) = (file_arg(&src), file_arg(&out));
    let mut results = Vec::new();

    // cat: checked once into a file, then timed into /dev/null.
    run_to(&mut thaw(&["fs", "cat", PATH]), Some(&out))?;
    payload::read_file(&out)?.check(size, sum, "thaw fs cat")?;
    std::fs::remove_file(&out)?;
    let spec = Spec {
        name: "cli-cat",
        thaw_label: "thaw fs cat > /dev/null (file in worker memory, this host)",
        baseline_label: "cat of a tmpfs file > /dev/null",
        target: 0.8,
    };
    let t = async |_| timed(size, || run_to(&mut thaw(&["fs", "cat", PATH]), None));
    let b = async |_| timed(size, || run_to(Command::new("cat").arg(&src), None));
    results.push(compare(spec, cfg.repeats, t, b).await?);

    // get: every run writes a new file; the check reads it back untimed.
    let spec = Spec {
        name: "cli-get",
        thaw_label: "thaw fs get to a new tmpfs file (file in worker memory)",
        baseline_label: "cp of a tmpfs file to a new tmpfs file",
        target: 0.8,
    };
    let t = async |_| {
        let r = timed(size, || run_to(&mut thaw(&["fs", "get", PATH, &out_s]), None))?;
        checked_and_removed(&out, size, sum, "thaw fs get")?;
        Ok(r)
    };
    let b = async |_| {
        let r = timed(size, || run_to(Command::new("cp").args([&src_s, &out_s]), None))?;
        checked_and_removed(&out, size, sum, "cp")?;
        Ok(r)
    };
    results.push(compare(spec, cfg.repeats, t, b).await?);

    // put: into the worker's memory, replacing the previous run's file.
    let spec = Spec {
        name: "cli-put",
        thaw_label: "thaw fs put --write-type must-cache of a tmpfs file (into worker memory)",
        baseline_label: "cp of a tmpfs file to a new tmpfs file",
        target: 0.8,
    };
    let put = ["fs", "put", "-f", &src_s, PUT_PATH, "--write-type", "must-cache"];
    let t = async |i| {
        let r = timed(size, || run_to(&mut thaw(&put), None))?;
        if i == cfg.repeats {
            // The warm-up run's file: checked once.
            let (got, _) = payload::read_thaw(&client, PUT_PATH).await?;
            got.check(size, sum, "thaw fs put")?;
        }
        client.delete(PUT_PATH, false).await?;
        Ok(r)
    };
    let b = async |_| {
        let r = timed(size, || run_to(Command::new("cp").args([&src_s, &out_s]), None))?;
        checked_and_removed(&out, size, sum, "cp")?;
        Ok(r)
    };
    let mut c = compare(spec, cfg.repeats, t, b).await?;
    c.notes = "one worker on this host; the client writes its block files (short-circuit)".into();
    results.push(c);
    Ok(results)
}

/// Runs `cmd` to completion, its standard output to `out` (or /dev/null).
fn run_to(cmd: &mut Command, out: Option<&Path>) -> Result<()> {
    let stdout = match out {
        Some(p) => std::fs::File::create(p)?,
        None => std::fs::OpenOptions::new().write(true).open("/dev/null")?,
    };
    let done = cmd.stdout(Stdio::from(stdout)).stderr(Stdio::piped()).output().context("running a command")?;
    ensure!(done.status.success(), "{:?} failed: {}", cmd, String::from_utf8_lossy(&done.stderr));
    Ok(())
}

/// Times `f` as a transfer of `size` bytes (checked elsewhere: the sum is not taken).
fn timed(size: u64, f: impl FnOnce() -> Result<()>) -> Result<Transfer> {
    let started = Instant::now();
    f()?;
    Ok(Transfer { bytes: size, secs: started.elapsed().as_secs_f64(), sum: 0 })
}

/// Checks a run's output file against the data set (untimed); removes the file.
fn checked_and_removed(out: &Path, size: u64, sum: u64, what: &str) -> Result<()> {
    payload::read_file(out)?.check(size, sum, what)?;
    std::fs::remove_file(out)?;
    Ok(())
}

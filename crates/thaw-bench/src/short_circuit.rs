//! Benchmark 1, short-circuit MEM read.
//!
//! Measures a client on the worker's own host reading a file held in the worker's
//! MEM tier: the worker only names each block file (on tmpfs) and the client reads
//! it itself, with no byte passing through the worker. The baseline is the best a
//! local reader can do with the same bytes: `read(2)` of a tmpfs file into the same
//! 4 MiB buffer. The ratio is the cost of Thaw's metadata call and per-block open
//! on top of a plain memory copy; it should stay at or above 0.9.

use anyhow::{Result, ensure};
use thaw_common::proto::WriteType;

use crate::measure::{Comparison, Spec, compare};
use crate::payload::{self, Transfer};
use crate::{BLOCK_SIZE, Config};

const PATH: &str = "/bench/short-circuit.bin";

pub async fn run(cfg: &Config) -> Result<Comparison> {
    let size = cfg.size;
    let cluster = crate::setup::one_worker(BLOCK_SIZE, (2 << 30).max(2 * size)).await?;
    let client = crate::setup::client(&cluster, "h0", "r0")?;
    payload::write_thaw(&client, PATH, size, WriteType::MustCache, BLOCK_SIZE).await?;
    let shm = tempfile::Builder::new().prefix("thaw-bench-").tempfile_in("/dev/shm")?;
    payload::write_file(shm.path(), size)?;
    let sum = payload::expected_sum(size);

    let thaw = async |_| -> Result<Transfer> {
        let (t, src) = payload::read_thaw(&client, PATH).await?;
        ensure!(src.short_circuit == size, "not every byte was short-circuited: {src:?}");
        t.check(size, sum, "short-circuit read")
    };
    let baseline = async |_| payload::read_file(shm.path())?.check(size, sum, "tmpfs read");
    let spec = Spec {
        name: "short-circuit",
        thaw_label: "Thaw MEM read, short-circuit (client reads the block file itself)",
        baseline_label: "read(2) of a tmpfs file in /dev/shm",
        target: 0.9,
    };
    let mut c = compare(spec, cfg.repeats, thaw, baseline).await?;
    c.notes = "all bytes short-circuited (client read stats)".into();
    Ok(c)
}

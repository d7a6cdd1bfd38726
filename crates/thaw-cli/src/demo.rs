//! `thaw demo`: the main job on an embedded local cluster. A data set is generated
//! straight into the under-store (cold: its pages are dropped from the page cache),
//! read once through Thaw (from the under-store, cached into MEM on the way), and
//! read again (now from worker memory). Both throughputs are printed side by side
//! with a direct read of the same file, pages dropped first.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use thaw_client::{Client, ClientConfig};
use thaw_common::size::format_size;
use tokio_util::sync::CancellationToken;

use crate::servers::{LocalArgs, LocalCluster, Timing};
use crate::size_arg;

#[derive(Args)]
pub struct DemoArgs {
    /// Size of the generated data set.
    #[arg(long, value_parser = size_arg, default_value = "1GiB")]
    size: u64,
    /// Working directory (under-store and state); default: a fresh temp dir.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Master port of the embedded cluster.
    #[arg(long, default_value_t = 19997)]
    port: u16,
}

fn generate(path: &std::path::Path, size: u64) -> anyhow::Result<()> {
    let mut f = std::io::BufWriter::with_capacity(8 << 20, std::fs::File::create(path)?);
    let mut block = vec![0u8; 1 << 20];
    let mut x: u64 = 0x2545F4914F6CDD1D;
    let mut left = size;
    while left > 0 {
        for b in block.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
        }
        let k = left.min(block.len() as u64) as usize;
        f.write_all(&block[..k])?;
        left -= k as u64;
    }
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(())
}

/// Reads a whole file through Thaw; returns (bytes, seconds, checksum).
async fn read_through_thaw(client: &Client, path: &str) -> anyhow::Result<(u64, f64, u64)> {
    let t = Instant::now();
    let mut r = client.open(path).await?;
    let mut buf = vec![0u8; 4 << 20];
    let (mut n, mut sum) = (0u64, 0u64);
    loop {
        let k = r.read(&mut buf).await?;
        if k == 0 {
            break;
        }
        sum = sample(sum, n, &buf[..k]);
        n += k as u64;
    }
    Ok((n, t.elapsed().as_secs_f64(), sum))
}

fn read_direct(path: &std::path::Path) -> anyhow::Result<(u64, f64, u64)> {
    use std::io::Read;
    let t = Instant::now();
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 4 << 20];
    let (mut n, mut sum) = (0u64, 0u64);
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        sum = sample(sum, n, &buf[..k]);
        n += k as u64;
    }
    Ok((n, t.elapsed().as_secs_f64(), sum))
}

/// A checksum of every 4096th byte by file position, so it does not depend on how
/// the reads were cut.
fn sample(sum: u64, offset: u64, chunk: &[u8]) -> u64 {
    let first = offset.next_multiple_of(4096) - offset;
    chunk.iter().skip(first as usize).step_by(4096).fold(sum, |s, &b| s.wrapping_mul(31).wrapping_add(b as u64))
}

fn rate(bytes: u64, secs: f64) -> String {
    format!("{:>8.0} MiB/s", bytes as f64 / (1 << 20) as f64 / secs.max(1e-9))
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let tmp;
    let dir = match args.dir {
        Some(d) => d,
        None => {
            tmp = tempfile::Builder::new().prefix("thaw-demo-").tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let ufs = dir.join("ufs");
    std::fs::create_dir_all(ufs.join("datasets"))?;
    let file = ufs.join("datasets/events.bin");
    println!("generating {} of data in the under-store at {}", format_size(args.size), file.display());
    generate(&file, args.size)?;

    let local = LocalArgs {
        ufs: ufs.display().to_string(),
        workers: 1,
        masters: 1,
        port: args.port,
        bind: "127.0.0.1".into(),
        mem_capacity: args.size + (256 << 20),
        disk_capacity: 1 << 30,
        mem_root: PathBuf::from("/dev/shm"),
        state_dir: Some(dir.join("state")),
        block_size: 64 << 20,
        exit_with_stdin: false,
        remove_on_exit: None,
        metrics_port: None,
        web_port: None,
        s3_port: None,
        device_model: None,
        worker_device_model: Vec::new(),
        timing: Timing { heartbeat_ms: 500, worker_timeout_ms: 5000, writer_lease_ms: 60_000 },
        planner: Default::default(),
        buffer: Default::default(),
        checkpoint: Default::default(),
        recompute: Default::default(),
        affinity: Default::default(),
        secret: Default::default(),
        tls: Default::default(),
    };
    let cluster = LocalCluster::start(&local, CancellationToken::new()).await?;
    println!(
        "embedded cluster: master {}, 1 worker, MEM tier under {}",
        cluster.master_addr,
        cluster.mem_root.display()
    );
    // The cluster stops (and its tmpfs files go) whether or not the measurement worked.
    let measured = measure(cluster.master_addr.clone(), &file, args.size).await;
    let stopped = cluster.stop().await;
    measured.and(stopped)
}

/// The three reads, checked against each other, and their report.
async fn measure(master: String, file: &std::path::Path, size: u64) -> anyhow::Result<()> {
    let client = Client::new(ClientConfig { job_id: "demo".into(), ..ClientConfig::from_env(Some(master)) })?;
    // Wait for the worker to register.
    for _ in 0..100 {
        if client.cluster_status().await.is_ok_and(|s| s.workers.iter().any(|w| w.alive)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    thaw_common::drop_cached_pages(file).context("dropping the file's cached pages")?;
    let direct = read_direct(file)?;
    thaw_common::drop_cached_pages(file)?;
    let cold = read_through_thaw(&client, "/datasets/events.bin").await?;
    let st = client.stat("/datasets/events.bin").await?;
    let warm = read_through_thaw(&client, "/datasets/events.bin").await?;
    anyhow::ensure!(cold.2 == direct.2 && warm.2 == direct.2, "checksums differ: the demo read wrong bytes");

    println!();
    println!("read of /datasets/events.bin ({}):", format_size(size));
    println!("  direct from disk, pages dropped   {}  {:>6.2} s", rate(direct.0, direct.1), direct.1);
    println!("  through Thaw, cold (under-store)  {}  {:>6.2} s", rate(cold.0, cold.1), cold.1);
    println!("  through Thaw, from worker MEM     {}  {:>6.2} s", rate(warm.0, warm.1), warm.1);
    println!(
        "after the cold read {} of {} were in memory; checksums match",
        format_size(st.in_memory_bytes),
        format_size(st.length)
    );
    println!("MEM vs cold: {:.1}x faster", cold.1 / warm.1.max(1e-9));
    Ok(())
}

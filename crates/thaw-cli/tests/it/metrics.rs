//! Prometheus metrics of real processes: a master and a worker started with
//! `--metrics-port`, scraped over HTTP and parsed with a Prometheus text parser
//! after cold, warm, short-circuit reads and a migration; a taken port fails
//! the start.

use std::time::{Duration, Instant};

use crate::common::*;
use prometheus_parse::{Scrape, Value};
use thaw_common::proto::EvictionMode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MEM: u64 = 64 << 20;

/// GET /metrics: the content type and the body.
async fn get(addr: &str, accept: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("metrics port answers");
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!head.to_ascii_lowercase().contains("chunked"), "{head}");
    let content_type = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-type")))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    (content_type, body.to_string())
}

/// A scrape in the classic text format, parsed.
struct Metrics(Scrape);

async fn scrape(addr: &str) -> Metrics {
    let (content_type, body) = get(addr, "text/plain").await;
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    for line in body.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        assert!(line.starts_with("thaw_"), "not a thaw_ metric: {line}");
    }
    Metrics(Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text parses"))
}

/// Scrapes until `settled` holds (a worker counts a read after its last byte
/// is sent, which may be just after the client has it), or 5 s.
async fn scrape_until(addr: &str, settled: impl Fn(&Metrics) -> bool) -> Metrics {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m = scrape(addr).await;
        if settled(&m) || Instant::now() > deadline {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Metrics {
    /// The value of the sample `name{labels}` (counter, gauge or untyped).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let s = self.0.samples.iter().find(|s| {
            s.metric == name && s.labels.len() == labels.len() && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v))
        })?;
        match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(v),
            _ => None,
        }
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    }

    /// A histogram's buckets `(le, count)` for `labels`, checked to be cumulative
    /// and to end at +Inf with the _count.
    fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<(f64, f64)> {
        let s = self
            .0
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
            .unwrap_or_else(|| panic!("no histogram {name}{labels:?}"));
        let Value::Histogram(b) = &s.value else { panic!("{name} is not a histogram") };
        let b: Vec<(f64, f64)> = b.iter().map(|h| (h.less_than, h.count)).collect();
        assert!(b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{b:?}");
        let last = b.last().expect("buckets");
        assert!(last.0.is_infinite());
        assert_eq!(last.1, self.value(&format!("{name}_count"), labels));
        b
    }

    fn has_help(&self, name: &str) -> bool {
        self.0.docs.contains_key(name)
    }
}

async fn read(client: &Client, path: &str, want: &[u8]) {
    let got = client.read_all(path).await.unwrap();
    assert_eq!(sha(&got), sha(want), "{path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_and_worker_metrics_follow_reads_and_migrations() {
    let mut o = ClusterOptions::workers(1);
    o.master_args = vec!["--metrics-port".into(), "0".into()];
    o.workers[0].mem_capacity = MEM;
    o.workers[0].extra_args = vec!["--metrics-port".into(), "0".into()];
    let c = start(o).await;
    let (master, worker) = (c.master_metrics_addr().unwrap(), c.worker_metrics_addr(0).unwrap());
    let w = scrape(worker).await;
    assert_eq!(w.value("thaw_worker_tier_capacity_bytes", &[("tier", "mem")]), MEM as f64);
    assert_eq!(w.value("thaw_worker_tier_used_bytes", &[("tier", "mem")]), 0.0);
    for source in ["short_circuit", "remote_mem", "disk", "under_store"] {
        assert_eq!(w.value("thaw_worker_reads_total", &[("source", source)]), 0.0, "{source}");
    }
    assert!(w.has_help("thaw_worker_reads_total") && w.has_help("thaw_worker_migrations"));

    // A cold read from a remote client: through the worker from the under-store,
    // and cached in MEM.
    let cold = cold_file(&c, "/cold.bin", (3 << 20) + 5, 1);
    let len = cold.len() as f64;
    let remote = c.remote_client();
    read(&remote, "/cold.bin", &cold).await;
    let under_store = |w: &Metrics| w.value("thaw_worker_reads_total", &[("source", "under_store")]);
    let w = scrape_until(worker, |w| under_store(w) >= 4.0).await;
    assert_eq!(under_store(&w), 4.0);
    assert_eq!(w.value("thaw_worker_read_bytes_total", &[("source", "under_store")]), len);
    assert_eq!(w.value("thaw_worker_read_fills_total", &[]), 4.0);
    assert_eq!(w.value("thaw_worker_reads_total", &[("source", "remote_mem")]), 0.0);
    assert!(w.value("thaw_worker_tier_used_bytes", &[("tier", "mem")]) >= len);
    assert_eq!(w.value("thaw_worker_tier_blocks", &[("tier", "mem")]), 4.0);

    // Warm: the same read again comes from memory; a client on the worker's
    // host opens the block files instead (short-circuit).
    read(&remote, "/cold.bin", &cold).await;
    read(&c.client("h0", "r0"), "/cold.bin", &cold).await;
    let w = scrape_until(worker, |w| {
        w.value("thaw_worker_reads_total", &[("source", "remote_mem")]) >= 4.0
            && w.value("thaw_worker_data_request_duration_seconds_count", &[("request", "read_block")]) >= 8.0
    })
    .await;
    assert_eq!(w.value("thaw_worker_reads_total", &[("source", "remote_mem")]), 4.0);
    assert_eq!(w.value("thaw_worker_read_bytes_total", &[("source", "remote_mem")]), len);
    assert_eq!(w.value("thaw_worker_reads_total", &[("source", "short_circuit")]), 4.0);
    assert_eq!(w.value("thaw_worker_read_bytes_total", &[("source", "short_circuit")]), len);
    assert_eq!(w.value("thaw_worker_reads_total", &[("source", "under_store")]), 4.0, "no second cold read");
    assert!(w.value("thaw_worker_cache_lookups_total", &[("tier", "mem"), ("result", "hit")]) >= 4.0);
    assert!(
        w.histogram("thaw_worker_data_request_duration_seconds", &[("request", "read_block")]).last().unwrap().1 >= 8.0
    );
    assert_eq!(w.value("thaw_worker_data_request_duration_seconds_count", &[("request", "open_local")]), 4.0);

    // A migration from the under-store, waited for.
    let warm = cold_file(&c, "/in/warm.bin", 2 << 20, 2);
    let client = c.remote_client().with_job("mjob");
    client
        .migrate_with_origin("mjob", &["/in".to_string()], EvictionMode::Explicit, None, "spark app-7 query 2 SELECT 1")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let w = loop {
        let w = scrape(worker).await;
        if w.value("thaw_worker_migrations_ended_total", &[("device", "ufs"), ("outcome", "done")]) >= 2.0 {
            break w;
        }
        assert!(Instant::now() < deadline, "migration did not finish: {}", c.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(w.value("thaw_worker_migrations_ended_total", &[("device", "ufs"), ("outcome", "failed")]), 0.0);
    assert_eq!(w.value("thaw_worker_migrations", &[("device", "ufs"), ("state", "queued")]), 0.0);
    let estimate = w.value("thaw_worker_migration_estimate_seconds", &[("device", "ufs")]);
    assert!(estimate > 0.0 && estimate < 10.0, "{estimate}");
    assert!(w.get("thaw_worker_migration_estimate_seconds", &[("device", "disk")]).is_none(), "DISK never migrated");
    assert_eq!(w.value("thaw_worker_migration_buffer_used_bytes", &[]), warm.len() as f64, "held for mjob");
    assert_eq!(w.value("thaw_worker_tier_blocks", &[("tier", "mem")]), 6.0);
    read(&client, "/in/warm.bin", &warm).await;

    // The master counts a migration when the worker's heartbeat reports it.
    let spark = [("submitter", "spark app-7")];
    let m = loop {
        let m = scrape(master).await;
        if m.value("thaw_master_submitter_migrated_bytes", &spark) == warm.len() as f64 {
            break m;
        }
        assert!(Instant::now() < deadline, "the master did not count the migration: {}", c.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // thaw status --json names each worker's metrics address.
    let out = std::process::Command::new(BIN)
        .args(["status", "--json"])
        .env("THAW_MASTER", c.master_addr())
        .output()
        .expect("thaw status runs");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status is JSON");
    assert_eq!(status["workers"][0]["metrics_address"], worker, "{status}");
    assert_eq!(m.value("thaw_master_workers", &[("state", "live")]), 1.0);
    assert_eq!(m.value("thaw_master_workers", &[("state", "dead")]), 0.0);
    assert_eq!(m.value("thaw_master_jobs", &[("eviction", "explicit")]), 1.0);
    assert_eq!(m.value("thaw_master_jobs", &[("eviction", "implicit")]), 0.0);
    assert_eq!(m.value("thaw_master_submitter_jobs", &spark), 1.0);
    assert_eq!(m.value("thaw_master_submitter_asked_bytes", &spark), warm.len() as f64);
    assert_eq!(m.value("thaw_master_migrations", &[("state", "pending")]), 0.0);
    assert_eq!(m.value("thaw_master_files", &[]), 2.0);
    // The files were journaled; a transaction holds one commit or more.
    let (txns, commits) =
        (m.value("thaw_master_journal_transactions_total", &[]), m.value("thaw_master_journal_commits_total", &[]));
    assert!(txns >= 1.0 && commits >= txns, "{txns} transactions, {commits} commits");
    assert_eq!(m.value("thaw_master_blocks", &[]), 6.0);
    assert_eq!(m.value("thaw_master_tier_blocks", &[("tier", "mem")]), 6.0);
    assert_eq!(m.value("thaw_master_tier_blocks", &[("tier", "disk")]), 0.0);
    assert_eq!(m.value("thaw_master_tier_capacity_bytes", &[("tier", "mem")]), MEM as f64);
    assert_eq!(m.histogram("thaw_master_rpc_duration_seconds", &[("method", "Migrate")]).last().unwrap().1, 1.0);
    assert_eq!(m.value("thaw_master_rpc_duration_seconds_count", &[("method", "RegisterWorker")]), 1.0);
    assert!(m.value("thaw_master_rpc_duration_seconds_count", &[("method", "Heartbeat")]) > 0.0);
    assert!(m.value("thaw_master_rpc_duration_seconds_sum", &[("method", "Migrate")]) > 0.0);

    // OpenMetrics to a scraper that asks for it (as Prometheus does).
    let (content_type, body) = get(master, "application/openmetrics-text;version=1.0.0,text/plain;q=0.5").await;
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    assert!(body.ends_with("# EOF\n") && body.contains("# TYPE thaw_master_workers gauge"), "{body}");
}

/// `thaw ARGS` with a port taken: it must fail at start-up, naming the flag.
fn refused(args: &[&str]) -> String {
    let out = std::process::Command::new(BIN).args(args).stdin(std::process::Stdio::null()).output().unwrap();
    assert!(!out.status.success(), "{args:?} started on a taken metrics port");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_taken_metrics_port_fails_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let want = format!("--metrics-port {port}: cannot listen on 127.0.0.1:{port}");
    let master = ["master", "--ufs", &d, "--journal-dir", &d, "--port", "0", "--metrics-port", &port];
    let err = refused(&master);
    assert!(err.contains(&want) && err.contains("in use"), "{err}");
    let worker = ["worker", "--master", "127.0.0.1:1", "--mem-dir", &d, "--port", "0", "--metrics-port", &port];
    let err = refused(&worker);
    assert!(err.contains(&want), "{err}");
    let local = ["local", "--ufs", &d, "--state-dir", &d, "--port", "0", "--metrics-port", &port];
    let err = refused(&local);
    assert!(err.contains(&want), "{err}");
}

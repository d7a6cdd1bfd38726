//! The master's web dashboard (`thaw master --web-port`) on a real cluster:
//! each page fetched over HTTP shows the live state (workers, a job's block
//! counts after a migrate, a file's replicas, migration events); names are
//! escaped; bad input gets 400, unknown paths 404, a taken port fails the
//! start. Then the same pages in headless Chromium: the rendered DOM shows the
//! state and no name turned into an element. `screenshots` (ignored) writes
//! docs/figures/dashboard-*.png.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::*;
use thaw_common::proto::{EvictionMode, JobInfo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A file whose path holds a script tag (its last '/' makes a directory
/// `<script>alert(1)<` and a file `script>`), and one whose name is an image
/// tag: both must show as text.
const SCRIPT_PATH: &str = "/evil/<script>alert(1)</script>";
const IMG_NAME: &str = "<img src=x onerror=alert(1)>";
/// A directory with an ampersand and both kinds of quotes.
const QUOTED_DIR: &str = "/data/a&b \"q\" 'x'";

struct Response {
    status: u16,
    location: String,
    body: String,
}

/// GET `target` (path and query, already encoded) from `addr`.
async fn get(addr: &str, target: &str) -> Response {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("dashboard port answers");
    let req = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status");
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    if status == 200 {
        assert!(header("content-type").starts_with("text/html"), "{target}: {head}");
    }
    Response { status, location: header("location"), body: body.to_string() }
}

/// A 200 page's body.
async fn page(addr: &str, target: &str) -> String {
    let r = get(addr, target).await;
    assert_eq!(r.status, 200, "{target}: {}", r.body);
    r.body
}

/// `p` as a query value (what the pages' own links carry).
fn enc(p: &str) -> String {
    let mut out = String::new();
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `html` with its character references decoded: the text a browser shows.
fn text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.find(';').filter(|e| *e < 10);
        let decoded = end.and_then(|e| match &rest[1..e] {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            n => n.strip_prefix('#').and_then(|d| d.parse().ok()).and_then(char::from_u32),
        });
        match (end, decoded) {
            (Some(e), Some(c)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out + rest
}

async fn job(client: &Client, id: &str) -> JobInfo {
    client.jobs(Some(id)).await.unwrap().jobs.remove(0)
}

async fn wait_job(client: &Client, id: &str, done: impl Fn(&JobInfo) -> bool) -> JobInfo {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let j = job(client, id).await;
        if done(&j) {
            return j;
        }
        assert!(Instant::now() < deadline, "job {id} did not get there: {j:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A cluster with state on every page: three workers; a job whose 6 blocks
/// were migrated into memory (`nightly-report`); an implicitly evicted job that
/// read its one block (`adhoc`); a file written to two workers' DISK tiers;
/// oddly named files. Returns it and its dashboard address.
async fn cluster_with_state(device_model: Option<&str>) -> (Cluster, String) {
    let mut o = ClusterOptions::workers(3);
    o.master_args = vec!["--web-port".into(), "0".into()];
    for w in &mut o.workers {
        w.device_model = device_model.map(String::from);
    }
    let c = start(o).await;
    let web = c.master_web_addr().expect("the master printed its dashboard address").to_string();
    cold_file(&c, "/data/events/part-0", 3_500_000, 1);
    cold_file(&c, "/data/events/part-1", 2_000_000, 2);
    cold_file(&c, &format!("{QUOTED_DIR}/f"), 10_000, 3);
    cold_file(&c, &format!("/evil/{IMG_NAME}"), 100, 4);
    cold_file(&c, SCRIPT_PATH, 100, 5);
    let client = c.remote_client();
    client.write_all("/written/replicated", &data(1_500_000, 6), opts(WriteType::ReplicatedDisk)).await.unwrap();
    let paths = |p: &str| vec![p.to_string()];
    client
        .migrate_with_origin("nightly-report", &paths("/data/events"), EvictionMode::Explicit, None, "cron on h0")
        .await
        .unwrap();
    wait_job(&client, "nightly-report", |j| j.blocks_in_memory == 6).await;
    // A reader that does not cache what it reads, so the job's read shows.
    let mut cfg = thaw_client::ClientConfig::from_env(Some(c.master_addr().to_string()));
    cfg.position = thaw_common::proto::Position { host: "elsewhere".into(), rack: "r9".into(), ..Default::default() };
    cfg.cache_on_read = None;
    cfg.job_id = "adhoc".into();
    let reader = Client::new(cfg).unwrap();
    reader.migrate("adhoc", &paths(QUOTED_DIR), EvictionMode::Implicit, None).await.unwrap();
    wait_job(&reader, "adhoc", |j| j.blocks_in_memory == 1).await;
    reader.read_all(&format!("{QUOTED_DIR}/f")).await.unwrap();
    wait_job(&reader, "adhoc", |j| j.blocks_read == 1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.migration_events(0, 0).await.unwrap().events.len() < 7 {
        assert!(Instant::now() < deadline, "migration events missing");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (c, web)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_show_the_cluster_state() {
    let (mut c, web) = cluster_with_state(None).await;
    let client = c.remote_client();

    let home = page(&web, "/").await;
    assert!(home.contains("3 live, 0 dead"), "{home}");
    for i in 0..3 {
        assert!(home.contains(c.worker_addr(i)), "worker {i} missing: {home}");
        assert!(home.contains(&format!("h{i} / r{}", i % 2)), "{home}");
    }
    assert_eq!(home.matches(r#"class="ok">alive<"#).count(), 3, "{home}");
    // Migration estimates per device, from the workers' heartbeats.
    assert!(home.contains("ufs: "), "no device estimate: {home}");
    assert!(home.contains("migrations done"), "{home}");

    let jobs = page(&web, "/jobs").await;
    let row = |id: &str| {
        let at = jobs.find(&format!(">{id}<")).unwrap_or_else(|| panic!("job {id} missing: {jobs}"));
        jobs[at..].split("</tr>").next().unwrap().to_string()
    };
    let nightly = row("nightly-report");
    assert!(nightly.contains("cron on h0"), "{nightly}");
    assert!(nightly.contains(r#"data-count="in memory">6<"#), "{nightly}");
    assert!(nightly.contains(r#"data-count="pending">0<"#), "{nightly}");
    assert!(nightly.contains("100.0% in memory or read"), "{nightly}");
    let adhoc = row("adhoc");
    assert!(adhoc.contains(r#"data-count="read">1<"#), "{adhoc}");
    assert!(adhoc.contains("implicit eviction"), "{adhoc}");

    let data = page(&web, "/files?path=/data").await;
    assert!(data.contains(r#"href="/files?path=/data/events""#), "{data}");
    // A directory's row sums its subtree: 3,500,000 + 2,000,000 bytes in 6
    // blocks, all migrated into memory by nightly-report.
    let at = data.find(r#"href="/files?path=/data/events""#).unwrap();
    let events_row = data[at..].split("</tr>").next().unwrap();
    for cell in [
        r#"data-count="files">2 files<"#,
        r#"data-count="size">5.2 MiB<"#,
        r#"data-count="blocks">6<"#,
        r#"data-count="in memory">5.2 MiB<"#,
    ] {
        assert!(events_row.contains(cell), "{cell} missing: {events_row}");
    }
    let root = page(&web, "/files?path=/").await;
    let at = root.find(r#"href="/files?path=/written""#).unwrap();
    let written_row = root[at..].split("</tr>").next().unwrap();
    // On DISK only: nothing in memory.
    assert!(written_row.contains(r#"data-count="in memory">0 B<"#), "{written_row}");
    assert!(written_row.contains(r#"data-count="files">1 file<"#), "{written_row}");
    assert!(data.contains(&format!(r#"href="/files?path={}""#, enc(QUOTED_DIR))), "{data}");
    let events_dir = page(&web, "/files?path=/data/events").await;
    assert!(events_dir.contains(r#"href="/file?path=/data/events/part-0""#), "{events_dir}");
    assert!(events_dir.contains("3.3 MiB") && events_dir.contains("persisted"), "{events_dir}");

    // A file page: every block with each replica's worker and tier.
    for (path, tier) in [("/data/events/part-0", Tier::Mem), ("/written/replicated", Tier::Disk)] {
        let p = page(&web, &format!("/file?path={path}")).await;
        let (info, _) = client.stat_blocks(path, true).await.unwrap();
        assert!(!info.blocks.is_empty());
        for b in &info.blocks {
            assert!(p.contains(&format!(">{}<", b.block_id)), "block {} missing: {p}", b.block_id);
            let on: Vec<_> = b.replicas.iter().filter(|r| r.tier == tier as i32).collect();
            assert!(!on.is_empty(), "{path}: {b:?}");
            for r in on {
                let name = if tier == Tier::Mem { "MEM" } else { "DISK" };
                assert!(p.contains(&format!("{} {name}</span>", r.data_address)), "{path}: {r:?} missing: {p}");
            }
        }
    }

    // Migration events, newest first, with their files and workers; the page
    // reloads itself.
    let ev = page(&web, "/events").await;
    assert!(ev.contains(r#"<meta http-equiv="refresh" content="2">"#), "{ev}");
    assert!(ev.contains(r#"href="/file?path=/data/events/part-1""#), "{ev}");
    assert!(ev.contains(">done<") && ev.contains("under-store"), "{ev}");
    assert!((0..3).any(|i| ev.contains(c.worker_addr(i))), "{ev}");
    let newest = client.migration_events(0, 0).await.unwrap().events.last().unwrap().seq;
    let first_seq: u64 = ev.split("<td>").nth(1).and_then(|s| s.split('<').next()?.parse().ok()).expect("a row");
    assert_eq!(first_seq, newest, "the newest event first");

    // A worker killed: the overview says so once the master notices.
    c.kill_worker(2);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let home = page(&web, "/").await;
        if home.contains("2 live, 1 dead") {
            assert!(home.contains(r#"class="bad">DEAD<"#), "{home}");
            break;
        }
        assert!(Instant::now() < deadline, "worker 2 still shown alive: {home}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_escaped_and_bad_input_is_refused() {
    let (c, web) = cluster_with_state(None).await;
    let odd_job = "<b>job</b> & \"friends\"";
    c.remote_client().migrate(odd_job, &["/evil".to_string()], EvictionMode::Explicit, None).await.unwrap();
    let jobs = page(&web, "/jobs").await;
    assert!(text(&jobs).contains(&format!(">{odd_job}<")), "{jobs}");
    assert!(!jobs.contains("<b>") && !jobs.contains("\"friends\""), "{jobs}");

    // Names show as text, escaped, in listings, titles, paths and links.
    let evil = page(&web, "/files?path=/evil").await;
    assert!(text(&evil).contains(&format!(">{IMG_NAME}<")), "{evil}");
    assert!(text(&evil).contains("><script>alert(1)</</a>"), "{evil}");
    let script_file = page(&web, &format!("/file?path={}", enc(SCRIPT_PATH))).await;
    assert!(text(&script_file).contains(&format!("File: {SCRIPT_PATH}")), "{script_file}");
    let quoted = page(&web, &format!("/files?path={}", enc(QUOTED_DIR))).await;
    assert!(text(&quoted).contains(&format!("Files: {QUOTED_DIR}")), "{quoted}");
    for body in [&evil, &script_file, &quoted] {
        assert!(!body.contains("<script") && !body.contains("<img"), "{body}");
        assert!(!body.contains("a&b") && !body.contains("\"q\""), "{body}");
    }

    // Unknown paths: 404 pages that say so (and escape what they echo).
    for (target, says) in [
        ("/files?path=/nope", "no such file or directory: /nope"),
        ("/file?path=/data/nope", "no such file or directory: /data/nope"),
        ("/files?path=/%3Cscript%3Ex", "no such file or directory: /<script>x"),
        ("/nowhere", "no page at /nowhere"),
    ] {
        let r = get(&web, target).await;
        assert_eq!(r.status, 404, "{target}: {}", r.body);
        assert!(text(&r.body).contains(says), "{target}: {}", r.body);
        assert!(!r.body.contains("<script"), "{target}: {}", r.body);
    }
    // Traversal and malformed queries: 400 with the reason.
    for (target, says) in [
        ("/file?path=/data/../etc/passwd", "step outside"),
        ("/files?path=%2E%2E", "not absolute"),
        ("/files?path=data", "not absolute"),
        ("/files?path=/%FF%FE", "not UTF-8"),
        ("/files?path=/a&path=/b", "path is given twice"),
        ("/files?dir=/", "unknown query parameter"),
        ("/file", "which file?"),
        ("/file?path=/a%00b", "NUL"),
    ] {
        let r = get(&web, target).await;
        assert_eq!(r.status, 400, "{target}: {}", r.body);
        assert!(text(&r.body).contains(says), "{target}: {}", r.body);
    }
    // A file asked for as a directory, or the other way round: sent to its page.
    let r = get(&web, "/files?path=/data/events/part-0").await;
    assert_eq!((r.status, r.location.as_str()), (303, "/file?path=/data/events/part-0"));
    let r = get(&web, "/file?path=/data").await;
    assert_eq!((r.status, r.location.as_str()), (303, "/files?path=/data"));
    // The server is still there after all that.
    page(&web, "/").await;
}

#[test]
fn a_taken_web_port_fails_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let local = ["local", "--ufs", &d, "--state-dir", &d, "--port", "0", "--web-port", &port];
    let master = ["master", "--ufs", &d, "--journal-dir", &d, "--port", "0", "--web-port", &port];
    for args in [&local[..], &master[..]] {
        let out = std::process::Command::new(BIN).args(args).stdin(std::process::Stdio::null()).output().unwrap();
        assert!(!out.status.success(), "{args:?} started on a taken port");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("--web-port {port}: cannot listen on 127.0.0.1:{port}")), "{err}");
    }
}

/// Headless Chromium, or `None` (with a printed SKIPPED) when it is missing:
/// `scripts/ensure-chromium.sh` installs it where it can.
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"].into_iter().find_map(|name| {
        std::env::var_os("PATH")?.to_str()?.split(':').map(|d| PathBuf::from(d).join(name)).find(|p| p.is_file())
    });
    if found.is_none() {
        println!("SKIPPED: no chromium on PATH (scripts/ensure-chromium.sh installs it as root)");
    }
    found
}

/// Runs headless Chromium on `url` with `args`; its standard output.
async fn run_chromium(bin: &PathBuf, args: &[&str], url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(bin)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(args)
            .arg(url)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chromium finished in time")
    .expect("chromium runs");
    assert!(out.status.success(), "chromium {args:?} {url}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_renders_the_pages() {
    let Some(bin) = chromium() else { return };
    let (c, web) = cluster_with_state(None).await;
    let url = |t: &str| format!("http://{web}{t}");
    let dom = run_chromium(&bin, &["--dump-dom"], &url("/")).await;
    for i in 0..3 {
        assert!(dom.contains(c.worker_addr(i)), "{dom}");
    }
    let dom = run_chromium(&bin, &["--dump-dom"], &url("/jobs")).await;
    assert!(dom.contains(">nightly-report<") && dom.contains(r#"data-count="in memory">6<"#), "{dom}");
    let dom = run_chromium(&bin, &["--dump-dom"], &url("/file?path=/data/events/part-0")).await;
    assert_eq!(dom.matches("MEM</span>").count(), 4, "4 blocks in memory: {dom}");
    let dom = run_chromium(&bin, &["--dump-dom"], &url("/events")).await;
    assert!(dom.contains("/data/events/part-0") && dom.contains(">done<"), "{dom}");
    // Names rendered as text: no script or image element came from them.
    for target in ["/files?path=/evil".to_string(), format!("/file?path={}", enc(SCRIPT_PATH))] {
        let dom = run_chromium(&bin, &["--dump-dom"], &url(&target)).await;
        assert!(dom.contains("&lt;script&gt;alert(1)&lt;/"), "{target}: {dom}");
        assert!(!dom.contains("<script") && !dom.contains("<img"), "{target}: {dom}");
    }
}

/// Writes docs/figures/dashboard-*.png from a cluster with a migration still
/// running: `cargo test -p thaw-cli --test it -- --ignored screenshots`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes the dashboard screenshots of docs/operations.md"]
async fn screenshots() {
    let bin = chromium().expect("chromium for the screenshots");
    let (c, web) = cluster_with_state(Some("ufs=2MiB/s,disk=8MiB/s")).await;
    // A larger job still on its way into memory while the pictures are taken.
    for i in 0..12 {
        cold_file(&c, &format!("/data/logs/day-{i:02}"), 2_000_000, 10 + i);
    }
    let client = c.remote_client();
    client.migrate("backfill-2026-11", &["/data/logs".to_string()], EvictionMode::Explicit, None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/figures");
    for (name, target) in [
        ("jobs", "/jobs"),
        ("overview", "/"),
        ("events", "/events"),
        ("files", "/files?path=/data"),
        ("file", "/file?path=/data/events/part-0"),
    ] {
        let file = out.join(format!("dashboard-{name}.png"));
        let shot = format!("--screenshot={}", file.display());
        run_chromium(&bin, &[&shot, "--window-size=1280,900"], &format!("http://{web}{target}")).await;
        assert!(file.is_file(), "{}", file.display());
    }
}

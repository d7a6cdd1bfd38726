//! `thaw migrate`, `thaw evict`, `thaw jobs`, `thaw events`: a job submitter's
//! side of migration (Ignem, section III-B3) from a shell, and what the planner did.

use std::time::{Duration, Instant};

use clap::Args;
use serde_json::Value;
use thaw_client::Client;
use thaw_client::json::{event_json, eviction_name, job_info_json, source_name};
use thaw_common::proto::{EvictionMode, JobInfo, JobTasks};
use thaw_common::size::format_size;

#[derive(Args)]
pub struct MigrateArgs {
    /// Files or directories the job will read (directories expand recursively).
    #[arg(required = true)]
    paths: Vec<String>,
    /// explicit: blocks stay in memory until `thaw evict` (or the lease runs out);
    /// implicit: a block leaves memory once the job has read it.
    #[arg(long, default_value = "explicit", value_parser = ["explicit", "implicit"])]
    eviction: String,
    /// How long the job lives without a renewal, e.g. 30s, 10m, 1h.
    #[arg(long, default_value = "10m", value_parser = duration_arg)]
    lease: Duration,
    /// Wait until every block is in memory (or already read, or given up),
    /// showing progress and renewing the lease meanwhile.
    #[arg(long)]
    wait: bool,
    /// Stop waiting after this long (the migration goes on).
    #[arg(long, value_parser = duration_arg)]
    timeout: Option<Duration>,
    /// With --wait: on Ctrl-C (or SIGTERM) leave the job holding its blocks
    /// until its lease runs out (end it with `thaw --job ID evict`), instead
    /// of ending it and releasing them.
    #[arg(long, requires = "wait")]
    keep_on_interrupt: bool,
    /// Who submits the job, shown with it by `thaw jobs` (free text, at most
    /// 200 bytes; default: the origin it has, if any).
    #[arg(long, default_value = "")]
    origin: String,
    /// Print JSON (for scripts).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct EvictArgs {
    /// Release only these files or directories (default: all; the job ends).
    paths: Vec<String>,
    /// Print JSON (for scripts).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct JobsArgs {
    /// Print JSON (for scripts).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct EventsArgs {
    /// First sequence number to show.
    #[arg(long, default_value_t = 0)]
    since: u64,
    /// At most this many (0: all kept).
    #[arg(long, default_value_t = 0)]
    limit: u32,
    /// Keep printing new events until interrupted.
    #[arg(long)]
    follow: bool,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// How often `migrate --wait` asks for progress: a job status is a small read
/// of the master's state, and a poll every 200 ms left a 1 GiB load that took
/// 1.2 s of copying waiting up to a sixth more for its last answer.
const POLL: Duration = Duration::from_millis(50);

/// The poll interval for a job of `blocks`: [`POLL`], longer for big jobs. The
/// master counts a job's progress by looking at each of its blocks (16 ms for
/// 100,000), under its lock: polled every 50 ms, a job of 100,000 small files
/// took a third of the master's time from its own migration. 5 µs a block
/// (0.5 s at 100,000) keeps status under 5% of it, at most 1 s.
fn poll_every(blocks: u64) -> Duration {
    Duration::from_micros(blocks.saturating_mul(5)).clamp(POLL, Duration::from_secs(1))
}

/// How long blocks wait for memory before `migrate --wait` says why: two
/// default heartbeats, by which the workers have reported what fills them.
const WAIT_SAID_AFTER: Duration = Duration::from_secs(2);

/// Durations like 500ms, 30s, 10m, 1h (a bare number is seconds).
pub fn duration_arg(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad duration {s:?} (e.g. 30s, 10m, 1h)"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("bad duration unit {u:?} in {s:?} (ms, s, m or h)")),
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 366.0 * 86400.0 {
        return Err(format!("duration {s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn need_job(client: &Client) -> anyhow::Result<String> {
    let job = client.config().job_id.clone();
    if job.is_empty() {
        anyhow::bail!("name the job: --job ID (or THAW_JOB_ID)");
    }
    Ok(job)
}

fn settled(j: &JobInfo) -> u64 {
    j.blocks_in_memory + j.blocks_read + j.blocks_failed + j.blocks_not_migrated
}

fn summary(j: &JobInfo) -> String {
    let mut why =
        if j.blocks_failed > 0 && !j.failure.is_empty() { format!(" ({})", j.failure) } else { String::new() };
    if !j.waiting.is_empty() {
        why.push_str(&format!("; {}", j.waiting));
    }
    format!(
        "job {}: {} blocks ({}), {} pending, {} queued, {} in memory, {} read, {} failed{why}",
        j.job_id,
        j.blocks,
        format_size(j.bytes),
        j.blocks_pending,
        j.blocks_queued,
        j.blocks_in_memory,
        j.blocks_read,
        j.blocks_failed
    )
}

/// A job's task record in a line, e.g. `tasks 12 placed 12 done 10,
/// memory-local 11/12, in memory at start 12/12, delay median 0 ms p99 120 ms
/// max 300 ms`.
pub fn tasks_summary(t: &JobTasks) -> String {
    format!(
        "tasks {} placed {} done {}, memory-local {}/{}, in memory at start {}/{}, delay median {} ms p99 {} ms max {} ms",
        t.tasks,
        t.placed,
        t.done,
        t.memory_local,
        t.placed,
        t.inputs_in_memory,
        t.placed,
        t.delay_ms_median,
        t.delay_ms_p99,
        t.delay_ms_max
    )
}

pub async fn migrate(client: Client, args: MigrateArgs) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let job = need_job(&client)?;
    let eviction = if args.eviction == "implicit" { EvictionMode::Implicit } else { EvictionMode::Explicit };
    // Taken before the job exists, so that no interrupt leaves it behind unsaid.
    let mut stops =
        if args.wait { Some((signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?)) } else { None };
    let mut info = client.migrate_with_origin(&job, &args.paths, eviction, Some(args.lease), &args.origin).await?;
    if let Some((int, term)) = &mut stops {
        tokio::select! {
            waited = wait(&client, &job, &args, eviction, info) => info = waited?,
            _ = int.recv() => interrupted(&client, &job, &args).await,
            _ = term.recv() => interrupted(&client, &job, &args).await,
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&job_info_json(&info))?);
    } else {
        println!("{}", summary(&info));
    }
    Ok(())
}

/// `migrate --wait` was interrupted: the job ends and its blocks go (nobody
/// renews its lease any more, and its blocks would otherwise stay held for
/// the whole lease), or with --keep-on-interrupt it stays, and the user is
/// told how to end it. Exits 130, as a shell does for Ctrl-C.
async fn interrupted(client: &Client, job: &str, args: &MigrateArgs) -> ! {
    let lease = humantime(args.lease);
    if args.keep_on_interrupt {
        eprintln!(
            "thaw: interrupted: job {job} keeps its blocks in memory until its lease runs out (within {lease}); \
             end it now with `thaw --job {job} evict`"
        );
    } else {
        match client.evict(job, &[]).await {
            Ok(_) => eprintln!(
                "thaw: interrupted: job {job} ended, its blocks released \
                 (--keep-on-interrupt keeps them for the job's lease)"
            ),
            Err(e) if e.kind == thaw_common::ErrorKind::NotFound => {
                eprintln!("thaw: interrupted: job {job} had already ended")
            }
            Err(e) => eprintln!(
                "thaw: interrupted, but job {job} could not be ended ({e}): it holds its blocks until its \
                 lease runs out (within {lease}); end it with `thaw --job {job} evict`"
            ),
        }
    }
    std::process::exit(130)
}

/// A duration as the user would write it: 10m, 30s, 1.5h.
fn humantime(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{s}s")
    }
}

/// Polls the job until no block is pending or queued. A master that forgot the
/// job (it restarted) is asked again: migration state is soft.
async fn wait(
    client: &Client,
    job: &str,
    args: &MigrateArgs,
    eviction: EvictionMode,
    mut info: JobInfo,
) -> anyhow::Result<JobInfo> {
    use std::io::IsTerminal;
    let bar = indicatif::ProgressBar::new(info.blocks.max(1));
    if std::io::stderr().is_terminal() && !args.json {
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} blocks, {elapsed}")
                .expect("template")
                .progress_chars("=> "),
        );
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_message(format!("migrating {job}"));
    let started = Instant::now();
    let mut renewed = Instant::now();
    // Renew well within the lease, and at least every second.
    let renew_every = (args.lease / 3).min(Duration::from_secs(1));
    let mut backoff = Duration::from_millis(200);
    let mut said = String::new();
    let mut waiting_since: Option<Instant> = None;
    loop {
        bar.set_length(info.blocks.max(1));
        bar.set_position(settled(&info));
        // Why blocks wait (no worker has memory for them), once the wait has
        // lasted (a worker's report of what fills its memory may lag a
        // heartbeat behind a write), and again if the reason changes.
        let reason = info.waiting.split_once(": ").map_or("", |(_, why)| why);
        let since = *waiting_since.get_or_insert_with(Instant::now);
        if reason.is_empty() {
            waiting_since = None;
        } else if reason != said && since.elapsed() >= WAIT_SAID_AFTER {
            bar.suspend(|| eprintln!("thaw: {} (they go when memory frees up; --timeout stops waiting)", info.waiting));
            said = reason.to_string();
        }
        if info.blocks_pending + info.blocks_queued == 0 {
            break;
        }
        if args.timeout.is_some_and(|t| started.elapsed() >= t) {
            bar.abandon();
            eprintln!("thaw: stopped waiting after {:?}; the migration goes on", args.timeout.unwrap_or_default());
            return Ok(info);
        }
        tokio::time::sleep(poll_every(info.blocks).min(renew_every)).await;
        match poll(client, job, args, eviction, &mut renewed, renew_every).await {
            Ok(Some(i)) => {
                info = i;
                backoff = Duration::from_millis(200);
            }
            Ok(None) => {}
            // The master is down (restarting?): keep trying until the timeout.
            Err(e) if e.kind == thaw_common::ErrorKind::Unavailable => {
                bar.set_message(format!("migrating {job} (master unreachable, retrying)"));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e.into()),
        }
    }
    bar.finish_and_clear();
    Ok(info)
}

/// One round of `wait`: renews the lease when due, migrates again if the master
/// forgot the job (it restarted: migration state is soft), and fetches progress.
async fn poll(
    client: &Client,
    job: &str,
    args: &MigrateArgs,
    eviction: EvictionMode,
    renewed: &mut Instant,
    renew_every: Duration,
) -> thaw_common::Result<Option<JobInfo>> {
    if renewed.elapsed() >= renew_every {
        let unknown = client.renew_leases(&[job.to_string()]).await?;
        *renewed = Instant::now();
        if !unknown.is_empty() {
            eprintln!("thaw: the master no longer knows job {job} (it restarted?): migrating again");
            return client
                .migrate_with_origin(job, &args.paths, eviction, Some(args.lease), &args.origin)
                .await
                .map(Some);
        }
    }
    match client.jobs(Some(job)).await {
        Ok(r) => Ok(r.jobs.into_iter().next()),
        Err(e) if e.kind == thaw_common::ErrorKind::NotFound => {
            client.migrate_with_origin(job, &args.paths, eviction, Some(args.lease), &args.origin).await.map(Some)
        }
        Err(e) => Err(e),
    }
}

pub async fn evict(client: Client, args: EvictArgs) -> anyhow::Result<()> {
    let job = need_job(&client)?;
    let left = client.evict(&job, &args.paths).await?;
    match (left, args.json) {
        (Some(info), true) => println!("{}", serde_json::to_string_pretty(&job_info_json(&info))?),
        (Some(info), false) => println!("{}", summary(&info)),
        (None, true) => println!("{}", serde_json::json!({ "job_id": job, "ended": true })),
        (None, false) => println!("job {job}: evicted, ended"),
    }
    Ok(())
}

pub async fn jobs(client: Client, args: JobsArgs) -> anyhow::Result<()> {
    let r = client.jobs(None).await?;
    if args.json {
        let v = serde_json::json!({
            "policy": r.policy,
            "priority": r.priority,
            "jobs": r.jobs.iter().map(job_info_json).collect::<Vec<Value>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("policy {}, priority {}", r.policy, r.priority);
    let (ended, live): (Vec<&JobInfo>, Vec<&JobInfo>) = r.jobs.iter().partition(|j| j.ended);
    if live.is_empty() {
        println!("no jobs running");
    } else {
        print_live(&live);
    }
    if !ended.is_empty() {
        print_ended(&ended);
    }
    Ok(())
}

fn print_live(jobs: &[&JobInfo]) {
    println!(
        "{:<24} {:<8} {:>7} {:>10} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>8}",
        "JOB", "EVICT", "BLOCKS", "SIZE", "PEND", "QUEUED", "MEM", "READ", "FAILED", "DONE", "LEASE"
    );
    for j in jobs {
        let done = (settled(j) * 100).checked_div(j.blocks).unwrap_or(100);
        println!(
            "{:<24} {:<8} {:>7} {:>10} {:>7} {:>6} {:>6} {:>6} {:>6} {:>5}% {:>7}s",
            j.job_id,
            eviction_name(j.eviction),
            j.blocks,
            format_size(j.bytes),
            j.blocks_pending,
            j.blocks_queued,
            j.blocks_in_memory,
            j.blocks_read,
            j.blocks_failed,
            done,
            j.lease_remaining_ms / 1000
        );
        print_notes(j);
    }
}

/// What the submitter said of the job and its tasks, under its row.
fn print_notes(j: &JobInfo) {
    if !j.origin.is_empty() {
        println!("  origin: {}", j.origin);
    }
    if let Some(t) = &j.tasks {
        println!("  {}", tasks_summary(t));
    }
    if !j.waiting.is_empty() {
        println!("  {}", j.waiting);
    }
}

/// Jobs that ended lately: when, why, what was migrated for them and what
/// their reads took (all of it, and from memory).
fn print_ended(jobs: &[&JobInfo]) {
    let keep = thaw_master_keep();
    println!("ended lately (kept {keep}):");
    println!(
        "{:<24} {:>9} {:<14} {:>7} {:>10} {:>10} {:>10} {:>10}",
        "JOB", "ENDED", "HOW", "BLOCKS", "SIZE", "MIGRATED", "READ", "FROM MEM"
    );
    let now = thaw_common::now_ms();
    for j in jobs {
        println!(
            "{:<24} {:>7.0}s {:<14} {:>7} {:>10} {:>10} {:>10} {:>10}",
            j.job_id,
            now.saturating_sub(j.ended_ms) as f64 / 1000.0,
            j.end_reason,
            j.blocks,
            format_size(j.bytes),
            format_size(j.bytes_migrated),
            format_size(j.read_bytes),
            format_size(j.read_bytes_from_memory)
        );
        print_notes(j);
    }
}

/// How long the master lists an ended job, in words.
fn thaw_master_keep() -> String {
    let m = thaw_master::migration::ENDED_KEEP.as_secs() / 60;
    format!("{m} min, the last {}", thaw_master::migration::ENDED_JOBS)
}

pub async fn events(client: Client, args: EventsArgs) -> anyhow::Result<()> {
    let mut since = args.since;
    loop {
        let r = client.migration_events(since, args.limit).await?;
        for e in &r.events {
            if args.json {
                println!("{}", event_json(e));
            } else {
                let jobs = if e.jobs.is_empty() { "-".to_string() } else { e.jobs.join(",") };
                println!(
                    "#{:<6} block {:<20} worker {:<3} {:<4} {:>10} {:>7} ms  job {:<16} {}",
                    e.seq,
                    e.block_id,
                    e.worker_id,
                    source_name(e.source),
                    format_size(e.bytes),
                    e.end_ms.saturating_sub(e.start_ms),
                    jobs,
                    e.outcome
                );
            }
        }
        since = r.next;
        if !args.follow {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

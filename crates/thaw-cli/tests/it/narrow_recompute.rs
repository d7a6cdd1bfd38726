//! Narrow and wide dependencies in recomputation (Tachyon, sections 2.4 and
//! 2.6) on a cluster of real processes: lineages declared with `thaw lineage
//! submit --kind`, their partitions written from three hosts, the worker of
//! some partitions killed (kill -9) before any checkpoint. A narrow step
//! reruns on its lost partitions alone, a wide one whole, and a chain mixing
//! them recurses accordingly; every file reads back byte for byte, and each
//! step's program records which outputs its reruns produced.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;

const WAIT: Duration = Duration::from_secs(90);
/// Partitions per step; partition j is first written beside worker j % 3, so
/// killing worker 0 loses partitions 0 and 3 of every step.
const PARTS: usize = 4;

/// 3 workers whose checkpoints never finish (1 KiB/s).
fn cluster() -> ClusterOptions {
    let mut o = ClusterOptions::workers(3);
    for w in &mut o.workers {
        w.extra_args.extend(["--checkpoint-bandwidth".to_string(), "1KiB".to_string()]);
    }
    o
}

/// A step as a shell program from partitions `{src}/part-i` to `{dst}/part-j`.
/// It produces the outputs `THAW_REBUILD_OUTPUTS` names (the master sets it
/// on a rerun; the first run sets it by hand, one partition per host), and on
/// a rerun appends "`name` j" to `record` for each output j it produced.
/// Narrow: output j is `transform` of input j; wide: output j is the lines of
/// every input whose key is j modulo the partitions (a shuffle), transformed.
fn step(name: &str, src: &str, dst: &str, wide: bool, transform: &str, record: &Path) -> Vec<String> {
    let read = if wide {
        format!(
            "for i in $(seq 0 {}); do '{BIN}' fs cat {src}/part-$i; done | awk -v j=$j '$1 % {PARTS} == j'",
            PARTS - 1
        )
    } else {
        format!("'{BIN}' fs cat {src}/part-$j")
    };
    let record = record.display();
    let script = format!(
        "set -e; for j in $(echo \"$THAW_REBUILD_OUTPUTS\" | tr , ' '); do t=$(mktemp); \
         {read} | {transform} > \"$t\"; \
         '{BIN}' fs put -f --write-type async-through \"$t\" {dst}/part-$j >/dev/null; rm -f \"$t\"; \
         if [ -n \"$THAW_RECOVER_LINEAGE\" ]; then echo \"{name} $j\" >> '{record}'; fi; done"
    );
    vec!["sh".into(), "-c".into(), script]
}

fn parts(dir: &str) -> Vec<String> {
    (0..PARTS).map(|j| format!("{dir}/part-{j}")).collect()
}

/// Declares the step's lineage with the CLI, then runs it as its first run
/// would: partition j from host h{j % 3}. Returns the lineage id.
fn declare_and_run(c: &Cluster, src: &str, dst: &str, kind: &str, command: &[String]) -> u64 {
    let mut args = vec!["--master".to_string(), c.master_addr().to_string(), "lineage".into(), "submit".into()];
    args.extend(["--kind".into(), kind.into(), "--json".into()]);
    for p in parts(src) {
        args.extend(["--input".into(), p]);
    }
    for p in parts(dst) {
        args.extend(["--output".into(), p]);
    }
    args.push("--".into());
    args.extend(command.iter().cloned());
    let out = std::process::Command::new(BIN).args(&args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"].as_str(), Some(kind), "{v}");
    for j in 0..PARTS {
        let status = std::process::Command::new(&command[0])
            .args(&command[1..])
            .env("THAW_MASTER", c.master_addr())
            .env("THAW_HOST", format!("h{}", j % 3))
            .env("THAW_REBUILD_OUTPUTS", j.to_string())
            .status()
            .unwrap();
        assert!(status.success(), "{status}");
    }
    v["lineage_id"].as_u64().unwrap()
}

/// The checkpointed inputs `/in/part-i`: lines keyed 0.. in order.
async fn inputs(client: &Client) {
    for i in 0..PARTS {
        let lines: Vec<u8> = (i * 3000..(i + 1) * 3000)
            .flat_map(|k| format!("{k} event {} {}\n", k % 7, "x".repeat(40)).into_bytes())
            .collect();
        client.write_all(&format!("/in/part-{i}"), &lines, opts(WriteType::CacheThrough)).await.unwrap();
    }
}

/// Every partition of the steps' outputs, read now.
async fn read_all(client: &Client, dirs: &[&str]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for d in dirs {
        for p in parts(d) {
            out.push(client.read_all(&p).await.unwrap());
        }
    }
    out
}

/// Kills worker 0 (holding partitions 0 and 3 of every step, none
/// checkpointed) and waits for the master's proactive rebuild of them all.
async fn kill_and_wait_rebuilt(c: &mut Cluster, client: &Client, dirs: &[&str]) {
    for d in dirs {
        for p in parts(d) {
            assert!(!client.stat(&p).await.unwrap().persisted, "{p} was checkpointed: nothing would be lost");
        }
    }
    c.kill_worker(0);
    c.wait_worker_dead(0, WAIT).await.unwrap();
    let deadline = Instant::now() + WAIT;
    for d in dirs {
        for p in parts(d) {
            loop {
                let f = client.stat(&p).await.unwrap();
                if !f.lost {
                    break;
                }
                assert!(Instant::now() < deadline, "{p} never rebuilt: {f:?}\n{}", c.logs());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Waits until lineage `l` counts `reruns` reruns (counted as each rerun's
/// process exits); the outputs the last one was told to produce.
async fn reran(client: &Client, l: u64, reruns: u32) -> Vec<u32> {
    let deadline = Instant::now() + WAIT;
    loop {
        let info = client.lineage(l, "").await.unwrap();
        if info.reruns >= reruns {
            assert_eq!(info.reruns, reruns, "{info:?}");
            return info.last_rerun_outputs;
        }
        assert!(Instant::now() < deadline, "{info:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The record's lines, in the order the reruns wrote them.
fn record(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrow_lineage_rebuilds_only_the_partitions_the_killed_worker_held() {
    let mut c = start(cluster()).await;
    let client = c.remote_client();
    inputs(&client).await;
    let rec = c.root().join("record");
    let l = declare_and_run(&c, "/in", "/up", "narrow", &step("up", "/in", "/up", false, "tr a-z A-Z", &rec));
    let before = read_all(&client, &["/up"]).await;
    assert!(String::from_utf8_lossy(&before[1]).starts_with("3000 EVENT 4 XXX"));
    kill_and_wait_rebuilt(&mut c, &client, &["/up"]).await;
    assert_eq!(read_all(&client, &["/up"]).await, before);
    assert_eq!(reran(&client, l, 1).await, vec![0, 3]);
    assert_eq!(record(&rec), ["up 0", "up 3"], "only the lost partitions were recomputed");
    let show =
        std::process::Command::new(BIN).args(["--master", c.master_addr(), "lineage", "show", "/up/part-0"]).output();
    let show = String::from_utf8_lossy(&show.unwrap().stdout).to_string();
    assert!(show.contains("last rerun  produced outputs 0, 3 of 4"), "{show}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_lineage_reruns_whole() {
    let mut c = start(cluster()).await;
    let client = c.remote_client();
    inputs(&client).await;
    let rec = c.root().join("record");
    let l = declare_and_run(&c, "/in", "/shuffled", "wide", &step("shuffle", "/in", "/shuffled", true, "cat", &rec));
    let before = read_all(&client, &["/shuffled"]).await;
    // Output 1: the lines keyed 1 modulo 4, from every input.
    let one = String::from_utf8_lossy(&before[1]).to_string();
    assert!(one.starts_with("1 event 1 x") && one.contains("\n3001 event ") && one.contains("\n9001 event "));
    kill_and_wait_rebuilt(&mut c, &client, &["/shuffled"]).await;
    assert_eq!(read_all(&client, &["/shuffled"]).await, before);
    assert_eq!(reran(&client, l, 1).await, vec![0, 1, 2, 3]);
    assert_eq!(record(&rec), ["shuffle 0", "shuffle 1", "shuffle 2", "shuffle 3"], "rerun whole");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_mixing_narrow_and_wide_recurses_partition_by_partition_where_narrow() {
    let mut c = start(cluster()).await;
    let client = c.remote_client();
    inputs(&client).await;
    let rec = c.root().join("record");
    // narrow, then wide (a lost input of the shuffle brings back only its own
    // partition upstream), then narrow after the wide one.
    let l1 = declare_and_run(&c, "/in", "/a", "narrow", &step("a", "/in", "/a", false, "tr a-z A-Z", &rec));
    let l2 = declare_and_run(&c, "/a", "/b", "wide", &step("b", "/a", "/b", true, "cat", &rec));
    let l3 = declare_and_run(&c, "/b", "/c", "narrow", &step("c", "/b", "/c", false, "rev", &rec));
    let dirs = ["/a", "/b", "/c"];
    let before = read_all(&client, &dirs).await;
    kill_and_wait_rebuilt(&mut c, &client, &dirs).await;
    assert_eq!(read_all(&client, &dirs).await, before);
    // Each step redoes the partitions it must, once, in the chain's order:
    // the narrow step upstream its two, the shuffle all four, the narrow step
    // after it its two, partition j as soon as the shuffle has rewritten
    // /b/part-j (so in one rerun or two).
    let deadline = Instant::now() + WAIT;
    while record(&rec).len() < 8 {
        assert!(Instant::now() < deadline, "{:?}", record(&rec));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = record(&rec);
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, ["a 0", "a 3", "b 0", "b 1", "b 2", "b 3", "c 0", "c 3"], "{got:?}");
    let at = |line: &str| got.iter().position(|x| x == line).unwrap();
    assert!(at("a 0").max(at("a 3")) < at("b 0"), "{got:?}");
    assert!(at("b 0") < at("c 0") && at("b 3") < at("c 3"), "{got:?}");
    assert_eq!(reran(&client, l1, 1).await, vec![0, 3]);
    assert_eq!(reran(&client, l2, 1).await, vec![0, 1, 2, 3]);
    loop {
        let info = client.lineage(l3, "").await.unwrap();
        match (info.reruns, info.last_rerun_outputs.as_slice()) {
            (1, [0, 3]) | (2, [3]) => break,
            (0, _) | (1, [0]) => assert!(Instant::now() < deadline, "{info:?}"),
            _ => panic!("{info:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

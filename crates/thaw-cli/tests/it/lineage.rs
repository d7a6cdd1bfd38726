//! Lineage entries (Tachyon, section 2.3-2.5) on a cluster of real processes: what
//! is recorded, what it ties, what survives a kill -9 of the master, and what
//! is refused with nothing recorded.

use crate::common::*;
use thaw_common::proto::DependencyKind;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

const CMD: &[&str] = &["true", "--day", "1"];

/// A submission that must fail: (inputs, outputs, command, config, kind),
/// the error kind, and a piece of its message.
type Bad<'a> = ((Vec<u64>, Vec<String>, Vec<String>, &'a [u8], DependencyKind), ErrorKind, &'a str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_written_under_a_lineage_are_tied_to_it_and_it_survives_a_master_crash() {
    let mut c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    let a = client.write_all("/in/a", &data(1000, 1), opts(WriteType::CacheThrough)).await.unwrap();
    let b = client.write_all("/in/b", &data(1000, 2), opts(WriteType::AsyncThrough)).await.unwrap();
    let outs = s(&["/out/x", "/out/y"]);
    let l = client
        .submit_dependency(&[a.file_id, b.file_id], &outs, &s(CMD), b"\x00config\xff", DependencyKind::Wide)
        .await
        .unwrap();
    assert_eq!((l.input_paths.clone(), l.output_fids.clone()), (s(&["/in/a", "/in/b"]), vec![0, 0]));
    let x = client.write_all("/out/x", &data(10, 3), opts(WriteType::AsyncThrough)).await.unwrap();
    assert_eq!(x.lineage_id, l.lineage_id);
    // A renamed input is still the same input.
    client.rename("/in/a", "/in/a2").await.unwrap();
    c.kill_master();
    c.restart_master().await.unwrap();
    let got = client.lineage(0, "/out/x").await.unwrap();
    assert_eq!(got.lineage_id, l.lineage_id);
    assert_eq!(got.output_fids, vec![x.file_id, 0]);
    assert_eq!(got.input_paths, s(&["/in/a2", "/in/b"]));
    assert_eq!((got.command.clone(), got.config.clone()), (s(CMD), b"\x00config\xff".to_vec()));
    assert_eq!(got.kind, DependencyKind::Wide as i32);
    // The other output, written after the restart, is tied too.
    let y = client.write_all("/out/y", b"y", opts(WriteType::MustCache)).await.unwrap();
    assert_eq!(y.lineage_id, l.lineage_id);
    assert_eq!(client.lineage(l.lineage_id, "").await.unwrap().output_fids, vec![x.file_id, y.file_id]);
    // A write of an output that fails leaves the output to a rerun.
    let l2 =
        client.submit_dependency(&[x.file_id], &s(&["/out/z"]), &s(CMD), b"", DependencyKind::Narrow).await.unwrap();
    let w = client.create("/out/z", opts(WriteType::AsyncThrough)).await.unwrap();
    w.abort().await;
    assert!(client.stat("/out/z").await.is_err());
    let z = client.write_all("/out/z", b"z", opts(WriteType::AsyncThrough)).await.unwrap();
    assert_eq!(z.lineage_id, l2.lineage_id);
    // Ids are never reused: a new entry after a restart gets a new one.
    let l3 = client.submit_dependency(&[], &s(&["/gen/0"]), &s(CMD), b"", DependencyKind::Wide).await.unwrap();
    assert!(l3.lineage_id > l2.lineage_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_or_replaced_input_breaks_the_lineage_and_deleted_outputs_drop_it() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    let a = client.write_all("/in/a", b"a", opts(WriteType::MustCache)).await.unwrap();
    let b = client.write_all("/in/b", b"b", opts(WriteType::MustCache)).await.unwrap();
    let la = client.submit_dependency(&[a.file_id], &s(&["/o/a"]), &s(CMD), b"", DependencyKind::Narrow).await.unwrap();
    let lb = client.submit_dependency(&[b.file_id], &s(&["/o/b"]), &s(CMD), b"", DependencyKind::Narrow).await.unwrap();
    client.write_all("/o/a", b"1", opts(WriteType::MustCache)).await.unwrap();
    client.write_all("/o/b", b"2", opts(WriteType::MustCache)).await.unwrap();
    client.delete("/in/a", false).await.unwrap();
    let overwrite = WriteOptions { overwrite: true, ..opts(WriteType::MustCache) };
    client.write_all("/in/b", b"new b", overwrite).await.unwrap();
    let got = client.lineage(la.lineage_id, "").await.unwrap();
    assert_eq!(got.broken, format!("input /in/a (FID {}) was deleted or replaced", a.file_id));
    assert_eq!(got.input_paths, vec![String::new()]);
    let got = client.lineage(lb.lineage_id, "").await.unwrap();
    assert!(got.broken.contains(&format!("FID {}", b.file_id)), "{}", got.broken);
    // Its only output deleted, an entry goes.
    client.delete("/o", true).await.unwrap();
    let e = client.lineage(la.lineage_id, "").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(client.lineages().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lineage_requests_are_refused_with_a_reason_and_record_nothing() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    let a = client.write_all("/in/a", b"a", opts(WriteType::MustCache)).await.unwrap();
    client.write_all("/exists", b"e", opts(WriteType::MustCache)).await.unwrap();
    std::fs::write(c.ufs.join("cold"), b"in the under-store only").unwrap();
    let mut open = client.create("/open", opts(WriteType::MustCache)).await.unwrap();
    open.write(b"x").await.unwrap();
    client.submit_dependency(&[a.file_id], &s(&["/pending"]), &s(CMD), b"", DependencyKind::Wide).await.unwrap();
    let big = vec![0u8; (1 << 20) + 1];
    let (w, n) = (DependencyKind::Wide, DependencyKind::Narrow);
    let (inv, exists) = (ErrorKind::InvalidArgument, ErrorKind::AlreadyExists);
    let fa = vec![a.file_id];
    let cases: Vec<Bad> = vec![
        ((vec![999_999], s(&["/o"]), s(CMD), b"", w), ErrorKind::NotFound, "input FID 999999 does not exist"),
        ((fa.clone(), s(&["/exists"]), s(CMD), b"", w), exists, "/exists already exists"),
        ((fa.clone(), s(&["/cold"]), s(CMD), b"", w), exists, "/cold already exists"),
        ((fa.clone(), s(&["/pending"]), s(CMD), b"", w), exists, "already an output of lineage"),
        ((fa.clone(), s(&["/in/a"]), s(CMD), b"", w), inv, "a cycle"),
        ((fa.clone(), s(&["/o", "/o"]), s(CMD), b"", w), inv, "named twice"),
        ((fa.clone(), s(&["/o"]), s(&["/no/such/program"]), b"", w), inv, "not runnable"),
        ((fa.clone(), s(&["/o"]), s(&["no-such-program-anywhere"]), b"", w), inv, "not runnable"),
        ((fa.clone(), s(&["/o"]), vec![], b"", w), inv, "needs a command"),
        ((fa.clone(), s(&["/o"]), s(CMD), &big, w), inv, "the limit is 1048576"),
        ((fa.clone(), s(&["/o1", "/o2"]), s(CMD), b"", n), inv, "narrow"),
        ((fa.clone(), s(&["/o"]), s(CMD), b"", DependencyKind::Unspecified), inv, "narrow or wide"),
        ((fa.clone(), vec![], s(CMD), b"", w), inv, "at least one output"),
        ((fa.clone(), s(&["/../etc/x"]), s(CMD), b"", w), inv, ".."),
        ((vec![open.info().file_id], s(&["/o"]), s(CMD), b"", w), ErrorKind::FailedPrecondition, "still being written"),
        ((vec![1], s(&["/o"]), s(CMD), b"", w), inv, "directory"),
    ];
    for ((inputs, outputs, command, config, kind), want, text) in cases {
        let e = client.submit_dependency(&inputs, &outputs, &command, config, kind).await.unwrap_err();
        assert_eq!(e.kind, want, "{outputs:?} {command:?}: {e}");
        assert!(e.message.contains(text), "{outputs:?}: {e}");
    }
    assert_eq!(client.lineages().await.unwrap().len(), 1, "only the good entry was recorded");
    // Nothing at /o was tied to anything.
    assert_eq!(client.write_all("/o", b"o", opts(WriteType::MustCache)).await.unwrap().lineage_id, 0);
    open.close().await.unwrap();
    let e = client.lineage(0, "/o").await.unwrap_err();
    assert!(e.message.contains("no lineage wrote /o"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_records_and_shows_lineage() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    let a = client.write_all("/logs/day1", b"log", opts(WriteType::MustCache)).await.unwrap();
    let conf = c.root().join("conf.bin");
    std::fs::write(&conf, b"pattern=ERROR").unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BIN).args(args).env("THAW_MASTER", c.master_addr()).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let conf_s = conf.display().to_string();
    let (ok, out, err) = run(&[
        "lineage",
        "submit",
        "--input",
        "/logs/day1",
        "--output",
        "/errors/day1",
        "--kind",
        "narrow",
        "--config-file",
        &conf_s,
        "--json",
        "--",
        "grep",
        "-c",
        "ERROR",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["inputs"][0]["fid"], a.file_id);
    assert_eq!(v["outputs"][0]["path"], "/errors/day1");
    assert_eq!(v["command"], serde_json::json!(["grep", "-c", "ERROR"]));
    assert_eq!((v["config_bytes"].as_u64(), v["kind"].as_str()), (Some(13), Some("narrow")));
    client.write_all("/errors/day1", b"0", opts(WriteType::AsyncThrough)).await.unwrap();
    let (ok, out, _) = run(&["lineage", "show", "/errors/day1"]);
    assert!(ok && out.contains("grep -c ERROR") && out.contains("/logs/day1"), "{out}");
    let (ok, out, _) = run(&["fs", "stat", "/errors/day1", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["lineage_id"], 1);
    let (ok, _, err) = run(&["lineage", "submit", "--input", "/nope", "--output", "/x", "--", "true"]);
    assert!(!ok && err.contains("/nope"), "{err}");
    let (ok, out, _) = run(&["lineage", "ls"]);
    assert!(ok && out.lines().count() == 1, "{out}");
}

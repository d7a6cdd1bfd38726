//! The `thaw-bench` command's arguments: an unknown benchmark or a bad size is
//! refused with an error that says what is expected, before anything runs.
//! (Having a test here also makes `cargo test --workspace --no-run` build the
//! binary, which `make test`'s quick run of `make bench-paper` uses for
//! Tachyon's write and checkpoint-order benchmarks.)

use std::process::Command;

fn thaw_bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_thaw-bench")).args(args).output().expect("run thaw-bench")
}

#[test]
fn an_unknown_benchmark_is_refused_naming_the_known_ones() {
    let out = thaw_bench(&["no-such-bench"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-bench"), "{err}");
    assert!(err.contains("writes") && err.contains("checkpoint-order"), "{err}");
}

#[test]
fn a_bad_size_is_refused() {
    let out = thaw_bench(&["writes", "--size", "lots"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--size") && err.contains("lots"), "{err}");
}

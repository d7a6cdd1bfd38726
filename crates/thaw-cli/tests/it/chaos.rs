//! A short version of the randomized fault campaign (`thaw_testkit::chaos`;
//! `thaw-bench chaos --cycles 100` runs the long one, docs/reliability.md): a few
//! cycles of mixed load from 3 clients at once while a fault goes on (kill -9
//! or SIGSTOP of a worker or the master, a worker's tier filled), each
//! followed by the checks. It must find nothing.

use crate::common::*;
use thaw_testkit::chaos::{ChaosConfig, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_cycles_of_faults_lose_and_corrupt_nothing_acknowledged() {
    let seed = std::env::var("THAW_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(39);
    let cfg = ChaosConfig {
        seed,
        cycles: 3,
        workers: 3,
        clients: 3,
        ops_per_cycle: 30,
        verbose: true,
        keep_going: false,
        masters: 1,
    };
    let report = run(std::path::Path::new(BIN), &cfg).await.unwrap();
    println!("{report:#?}");
    assert_eq!(report.cycles, cfg.cycles, "{report:#?}");
    assert!(report.clean(), "seed {seed}: {report:#?}");
    assert!(report.writes_acknowledged > 0 && report.bytes_verified > 0, "{report:#?}");
}

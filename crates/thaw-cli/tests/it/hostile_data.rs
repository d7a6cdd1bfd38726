//! A worker fed thousands of malformed and hostile data-protocol streams (the
//! fuzz crate's recipes: valid requests of every kind, bit-flipped, cut,
//! rewritten, run together; and raw random bytes), each on its own
//! connection, from a seeded generator. Each must end in an answer or a
//! closed connection within a bound, never a hang; afterwards the worker still
//! runs, serves a real read byte-exact, and wrote nothing outside its
//! directories (seeds ask for `/../../etc/passwd` and `/a/../../x`).

use std::time::{Duration, Instant};

use crate::common::*;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const MIB: usize = 1 << 20;
const INPUTS: usize = 5000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_fed_thousands_of_hostile_streams_stays_up_and_serves() {
    let mut c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h9", "r9");
    let bytes = data(3 * MIB + 5, 1);
    client.write_all("/ok.bin", &bytes, WriteOptions::of(WriteType::MustCache)).await.unwrap();
    let addr = c.worker_addr(0).to_string();
    let mut rng = rand::rngs::StdRng::seed_from_u64(18);
    let mut answered = 0;
    let t0 = Instant::now();
    for i in 0..INPUTS {
        let len = rng.random_range(1..256);
        let input: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let stream = thaw_fuzz::stream_from(&input);
        let mut sock = TcpStream::connect(&addr).await.unwrap();
        let _ = sock.write_all(&stream).await;
        let _ = sock.shutdown().await;
        let n = read_to_close(&mut sock, Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("input {i} ({input:?}) hung the worker\n{}", c.logs()));
        answered += usize::from(n > 0);
    }
    println!("{INPUTS} hostile streams in {:.1} s, {answered} answered", t0.elapsed().as_secs_f64());
    assert!(answered > INPUTS / 4, "the worker answered only {answered} of {INPUTS}");
    assert!(c.alive_workers().await.unwrap() == 1);
    assert!(client.read_all("/ok.bin").await.unwrap() == bytes);
    // A seed writes to the under-store path "/a/../../x": refused, so no `x`
    // appeared under the under-store or beside it.
    for dir in [c.ufs.clone(), c.ufs.parent().unwrap().to_path_buf(), c.root().to_path_buf()] {
        assert!(!dir.join("x").exists(), "{}", dir.display());
    }
    c.kill_worker(0);
}

//! Round trips, under-store reads, short-circuit and locality on a 3-worker
//! multi-process cluster.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_size_and_write_type_round_trips_byte_exact() {
    let c = start(ClusterOptions::workers(3)).await;
    let bs = c.options.block_size as usize;
    let writer = c.client("h0", "r0");
    let local = c.client("h0", "r0");
    let remote = c.remote_client();
    let sizes = [0, 1, bs - 1, bs, bs + 1, 3 * bs + 17];
    let types = [WriteType::MustCache, WriteType::CacheThrough, WriteType::Through, WriteType::ReplicatedDisk];
    for (ti, wt) in types.iter().enumerate() {
        for (si, &size) in sizes.iter().enumerate() {
            let path = format!("/rt/{}/f{size}", wt.as_str_name());
            let bytes = data(size, (ti * 10 + si) as u64);
            let info = writer.write_all(&path, &bytes, opts(*wt)).await.unwrap();
            assert_eq!(info.length, size as u64);
            assert!(info.complete);
            assert_eq!(info.persisted, matches!(wt, WriteType::CacheThrough | WriteType::Through), "{path}");
            for reader in [&local, &remote] {
                let got = reader.read_all(&path).await.unwrap_or_else(|e| panic!("{path}: {e}\n{}", c.logs()));
                assert_eq!(sha(&got), sha(&bytes), "{path}");
            }
            // The bytes are where the write type says.
            let (st, _) = remote.stat_blocks(&path, true).await.unwrap();
            assert_eq!(st.blocks.len(), size.div_ceil(bs), "{path}");
            for b in &st.blocks {
                let tiers: Vec<i32> = b.replicas.iter().map(|r| r.tier).collect();
                match wt {
                    WriteType::MustCache | WriteType::CacheThrough => {
                        assert!(tiers.contains(&(Tier::Mem as i32)), "{path}")
                    }
                    WriteType::ReplicatedDisk => {
                        assert_eq!(tiers, vec![Tier::Disk as i32; 2], "{path}")
                    }
                    _ => {}
                }
            }
        }
    }
    // The under-store holds exactly the persisted files.
    assert!(
        c.ufs.join("rt/WRITE_TYPE_THROUGH/f17").exists() || !c.ufs.join("rt/WRITE_TYPE_MUST_CACHE").join("f1").exists()
    );
    let persisted = std::fs::read(c.ufs.join(format!("rt/WRITE_TYPE_CACHE_THROUGH/f{}", 3 * bs + 17))).unwrap();
    assert_eq!(sha(&persisted), sha(&data(3 * bs + 17, 15)));
    assert!(!c.ufs.join(format!("rt/WRITE_TYPE_MUST_CACHE/f{bs}")).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_memory_replicas_are_read_by_short_circuit_and_remote_ones_streamed() {
    let c = start(ClusterOptions::workers(3)).await;
    let bytes = data(3 << 20, 7);
    let h1 = c.client("h1", "r1").with_job("job-sc");
    h1.write_all("/sc/file", &bytes, opts(WriteType::MustCache)).await.unwrap();
    // Written from h1: its MEM replica is on h1's worker.
    let (st, _) = h1.stat_blocks("/sc/file", true).await.unwrap();
    assert!(st.blocks.iter().all(|b| b.replicas[0].host == "h1" && b.replicas[0].locality == 2));

    let mut r = h1.open("/sc/file").await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&bytes));
    assert_eq!(r.stats().short_circuit, bytes.len() as u64, "{:?}", r.stats());

    let far = c.client("h2", "r0").with_job("job-remote");
    let mut r = far.open("/sc/file").await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&bytes));
    assert_eq!(r.stats().remote_mem, bytes.len() as u64, "{:?}", r.stats());

    // Positional reads across block boundaries.
    let mut buf = vec![0u8; 100];
    let off = (1 << 20) - 50;
    assert_eq!(r.read_at(off, &mut buf).await.unwrap(), 100);
    assert_eq!(&buf[..], &bytes[off as usize..off as usize + 100]);
    assert_eq!(r.read_at(bytes.len() as u64 - 10, &mut buf).await.unwrap(), 10);
    assert_eq!(r.read_at(bytes.len() as u64 + 10, &mut buf).await.unwrap(), 0);

    // The worker saw each job's reads.
    let stats = h1.worker_stats(c.worker_addr(1)).await.unwrap();
    let job = |id: &str| stats.jobs.iter().find(|j| j.job_id == id).cloned().unwrap_or_default();
    assert_eq!(job("job-sc").short_circuit_opens, 3);
    assert!(job("job-remote").reads >= 3 && job("job-remote").bytes_read >= bytes.len() as u64);
    assert_eq!(job("job-sc").bytes_written, bytes.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_positional_read_of_one_block_reads_only_that_block() {
    // A map task reads one block of a file: the worker must serve exactly that
    // block (no read-ahead of the next, no rest of the block past the range), or
    // an emulated disk serves bytes nobody asked for and the job's accounting is off.
    let c = start(ClusterOptions::workers(2)).await;
    let bytes = data(4 << 20, 11);
    let writer = c.client("h1", "r1");
    writer.write_all("/ranged/file", &bytes, opts(WriteType::MustCache)).await.unwrap();
    let far = c.client("h9", "r9").with_job("job-ranged");
    let mut r = far.open("/ranged/file").await.unwrap();
    let mut block = vec![0u8; 1 << 20];
    assert_eq!(r.read_at(1 << 20, &mut block).await.unwrap(), 1 << 20);
    assert_eq!(&block[..], &bytes[1 << 20..2 << 20]);
    let mut small = vec![0u8; 1000];
    assert_eq!(r.read_at((3 << 20) + 5, &mut small).await.unwrap(), 1000);
    assert_eq!(&small[..], &bytes[(3 << 20) + 5..(3 << 20) + 1005]);
    // Then a sequential reader: continuing reads stream on and read ahead.
    let mut rest = vec![0u8; 2 << 20];
    assert_eq!(r.read_at((3 << 20) + 1005, &mut rest).await.unwrap(), (1 << 20) - 1005);
    drop(r);
    let mut served = 0;
    for i in 0..2 {
        let stats = far.worker_stats(c.worker_addr(i)).await.unwrap();
        served += stats.jobs.iter().filter(|j| j.job_id == "job-ranged").map(|j| j.bytes_read).sum::<u64>();
    }
    assert_eq!(served, (1 << 20) + (1 << 20) - 5, "the worker served bytes nobody asked for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_placed_in_the_under_store_are_visible_and_cached_on_read() {
    let c = start(ClusterOptions::workers(3)).await;
    let big = data((2 << 20) + 123, 3);
    std::fs::create_dir_all(c.ufs.join("in/deep")).unwrap();
    std::fs::write(c.ufs.join("in/deep/big.bin"), &big).unwrap();
    std::fs::write(c.ufs.join("in/small.txt"), b"hello").unwrap();
    let client = c.remote_client();
    let names: Vec<String> = client.list("/in").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, vec!["deep", "small.txt"]);
    assert_eq!(client.read_all("/in/small.txt").await.unwrap(), b"hello");
    // First read comes through from the under-store and leaves the blocks in memory.
    let mut r = client.open("/in/deep/big.bin").await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&big));
    assert_eq!(r.stats().under_store, big.len() as u64);
    let st = client.stat("/in/deep/big.bin").await.unwrap();
    assert_eq!(st.in_memory_bytes, big.len() as u64);
    let mut r = client.open("/in/deep/big.bin").await.unwrap();
    let mut again = Vec::new();
    r.read_to_end(&mut again).await.unwrap();
    assert_eq!(sha(&again), sha(&big));
    assert_eq!(r.stats().remote_mem, big.len() as u64, "{:?}", r.stats());
    // A file changed in the under-store is seen anew after a listing.
    std::fs::write(c.ufs.join("in/small.txt"), b"changed!").unwrap();
    client.list("/in").await.unwrap();
    assert_eq!(client.read_all("/in/small.txt").await.unwrap(), b"changed!");
    // A file deleted in the under-store disappears.
    std::fs::remove_file(c.ufs.join("in/small.txt")).unwrap();
    let names: Vec<String> = client.list("/in").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, vec!["deep"]);
    // Rename and delete reach the under-store.
    client.rename("/in/deep", "/in/moved").await.unwrap();
    assert!(c.ufs.join("in/moved/big.bin").exists());
    assert_eq!(sha(&client.read_all("/in/moved/big.bin").await.unwrap()), sha(&big));
    client.delete("/in", true).await.unwrap();
    assert!(!c.ufs.join("in").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_cold_read_fills_the_local_worker_and_reads_its_file() {
    let c = start(ClusterOptions::workers(3)).await;
    let big = data((3 << 20) + 5, 9);
    std::fs::write(c.ufs.join("cold.bin"), &big).unwrap();
    let local = c.client("h1", "r1");
    let mut r = local.open("/cold.bin").await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    assert_eq!(sha(&got), sha(&big));
    // Every byte came from the under-store, through h1's worker, by its block files.
    assert_eq!(r.stats().under_store, big.len() as u64, "{:?}", r.stats());
    assert_eq!(r.stats().remote_mem, 0);
    let (st, _) = local.stat_blocks("/cold.bin", true).await.unwrap();
    assert!(st.blocks.iter().all(|b| b.replicas.len() == 1 && b.replicas[0].data_address == c.worker_addr(1)));
    assert_eq!(st.in_memory_bytes, big.len() as u64);
    // The second read is a plain short-circuit read.
    let mut r = local.open("/cold.bin").await.unwrap();
    let mut again = Vec::new();
    r.read_to_end(&mut again).await.unwrap();
    assert_eq!(sha(&again), sha(&big));
    assert_eq!(r.stats().short_circuit, big.len() as u64, "{:?}", r.stats());
    // A partial read of a cold block streams its range and leaves the block filling.
    std::fs::write(c.ufs.join("cold2.bin"), &big).unwrap();
    let remote = c.remote_client();
    let mut r = remote.open("/cold2.bin").await.unwrap();
    let mut buf = vec![0u8; 1000];
    assert_eq!(r.read_at((1 << 20) + 10, &mut buf).await.unwrap(), 1000);
    assert_eq!(&buf[..], &big[(1 << 20) + 10..(1 << 20) + 1010]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while remote.stat("/cold2.bin").await.unwrap().in_memory_bytes < 1 << 20 {
        assert!(std::time::Instant::now() < deadline, "block 1 was not filled in the background");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persisted_file_gone_from_the_under_store_reads_as_lost() {
    let c = start(ClusterOptions::workers(2)).await;
    std::fs::write(c.ufs.join("gone.bin"), data(5000, 1)).unwrap();
    let client = c.remote_client();
    let mut r = client.open("/gone.bin").await.unwrap();
    std::fs::remove_file(c.ufs.join("gone.bin")).unwrap();
    let mut buf = vec![0u8; 100];
    let e = r.read(&mut buf).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::DataLost, "{e}");
    assert!(e.message.contains("/gone.bin") && e.message.contains("gone"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_can_choose_the_worker_that_takes_its_memory_writes() {
    let c = start(ClusterOptions::workers(3)).await;
    let mut cfg = thaw_client::ClientConfig::from_env(Some(c.master_addr().to_string()));
    cfg.position = thaw_common::proto::Position {
        host: "h0".into(),
        rack: "r0".into(),
        worker_address: c.worker_addr(2).to_string(),
    };
    let chooser = Client::new(cfg).unwrap();
    chooser.write_all("/chosen", &data(2_500_000, 61), opts(WriteType::MustCache)).await.unwrap();
    let (st, _) = chooser.stat_blocks("/chosen", true).await.unwrap();
    for b in &st.blocks {
        assert_eq!(b.replicas.len(), 1);
        assert_eq!(b.replicas[0].data_address, c.worker_addr(2));
        assert_eq!(b.replicas[0].locality, thaw_common::proto::Locality::WorkerMemory as i32);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_ahead_follows_sequential_reads_only() {
    let c = start(ClusterOptions::workers(1)).await;
    let big = data(3 << 20, 71);
    std::fs::write(c.ufs.join("ra.bin"), &big).unwrap();
    let client = c.remote_client();
    let block_in_memory = |i: usize| {
        let client = client.clone();
        async move {
            let (st, _) = client.stat_blocks("/ra.bin", true).await.unwrap();
            !st.blocks[i].replicas.is_empty()
        }
    };
    // A random read inside block 0 fetches nothing of block 1.
    let mut r = client.open("/ra.bin").await.unwrap();
    let mut buf = vec![0u8; 100];
    r.read_at(10, &mut buf).await.unwrap();
    assert_eq!(&buf[..], &big[10..110]);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!block_in_memory(1).await, "a random read filled the next block");
    // A positional read of 1000 bytes at block 1's start asks for nothing more.
    let mut first = vec![0u8; 1000];
    r.read_at(1 << 20, &mut first).await.unwrap();
    assert_eq!(&first[..], &big[1 << 20..(1 << 20) + 1000]);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!block_in_memory(2).await, "a ranged read filled the next block");
    // Reading on from there is sequential: block 2 is read ahead and fills.
    r.read_at((1 << 20) + 1000, &mut first).await.unwrap();
    assert_eq!(&first[..], &big[(1 << 20) + 1000..(1 << 20) + 2000]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !block_in_memory(2).await {
        assert!(std::time::Instant::now() < deadline, "a sequential read did not read ahead");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_directory_lists_in_pages_in_name_order() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.remote_client();
    for i in 0..25 {
        client.write_all(&format!("/many/f{i:02}"), b"x", opts(WriteType::MustCache)).await.unwrap();
    }
    let whole: Vec<String> = client.list("/many").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(whole.len(), 25);
    let (mut after, mut paged, mut pages) = (String::new(), Vec::new(), Vec::new());
    loop {
        let page = client.list_page("/many", false, &after, 10).await.unwrap();
        pages.push((page.entries.len(), page.truncated));
        paged.extend(page.entries.iter().map(|f| f.name.clone()));
        if !page.truncated {
            break;
        }
        after = paged.last().unwrap().clone();
    }
    assert_eq!(pages, vec![(10, true), (10, true), (5, false)]);
    assert_eq!(paged, whole);
    let mut sorted = whole.clone();
    sorted.sort();
    assert_eq!(whole, sorted, "names come in order");
    // A page exactly at the end says nothing follows; a name past the last, nothing.
    let last = client.list_page("/many", false, "f14", 10).await.unwrap();
    assert_eq!((last.entries.len(), last.truncated), (10, false));
    assert!(client.list_page("/many", false, "zzz", 10).await.unwrap().entries.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_with_overwrite_replaces_a_file_in_one_step_never_a_directory() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    let persisted = opts(WriteType::CacheThrough);
    let memory = opts(WriteType::MustCache);
    // A persisted file over a persisted one: the under-store copy is replaced too.
    client.write_all("/d/old", b"old bytes", persisted.clone()).await.unwrap();
    client.write_all("/d/new", b"new", persisted.clone()).await.unwrap();
    let err = client.rename("/d/new", "/d/old").await.unwrap_err();
    assert_eq!(err.kind, thaw_common::ErrorKind::AlreadyExists, "{err}");
    client.rename_with("/d/new", "/d/old", true).await.unwrap();
    assert_eq!(client.read_all("/d/old").await.unwrap(), b"new");
    assert_eq!(std::fs::read(c.ufs.join("d/old")).unwrap(), b"new");
    assert!(!c.ufs.join("d/new").exists());
    // A file only in memory over a persisted one: the old copy goes from the
    // under-store, so no listing brings it back.
    client.write_all("/d/mem", b"in memory", memory).await.unwrap();
    client.rename_with("/d/mem", "/d/old", true).await.unwrap();
    assert!(!c.ufs.join("d/old").exists());
    let names: Vec<String> = client.list("/d").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, vec!["old"]);
    assert_eq!(client.read_all("/d/old").await.unwrap(), b"in memory");
    // Never a directory; and onto itself, refused as before.
    client.mkdir("/d/sub", true, true).await.unwrap();
    client.write_all("/d/f", b"f", persisted).await.unwrap();
    let err = client.rename_with("/d/f", "/d/sub", true).await.unwrap_err();
    assert!(err.message.contains("is a directory"), "{err}");
    assert!(client.rename_with("/d/f", "/d/f", true).await.is_err());
    assert_eq!(client.read_all("/d/f").await.unwrap(), b"f");
}

/// A create with `stage_at` over an existing file writes the new one there
/// and moves it onto the path when it completes (S3's PUT over an object):
/// readers see the old bytes until then; `recursive_under` makes a key's
/// directories but never the directory above them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_write_replaces_a_file_when_it_completes() {
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.client("h0", "r0");
    let staged = |at: &str| thaw_client::WriteOptions {
        stage_at: Some(at.to_string()),
        recursive_under: Some("/b".to_string()),
        ..opts(WriteType::CacheThrough)
    };
    client.mkdir("/b", false, false).await.unwrap();
    client.mkdir("/stage", false, false).await.unwrap();
    // A new path: written in place, its directories made under /b.
    let mut w = client.create("/b/x/y/k", staged("/stage/1")).await.unwrap();
    assert_eq!(w.info().path, "/b/x/y/k");
    w.write(b"first").await.unwrap();
    assert_eq!(w.close().await.unwrap().path, "/b/x/y/k");
    // Over it: staged, the old bytes readable until the close.
    let mut w = client.create("/b/x/y/k", staged("/stage/2")).await.unwrap();
    assert_eq!(w.info().path, "/stage/2");
    w.write(b"second!").await.unwrap();
    assert_eq!(client.read_all("/b/x/y/k").await.unwrap(), b"first");
    let info = w.close().await.unwrap();
    assert_eq!((info.path.as_str(), info.length), ("/b/x/y/k", 7));
    assert_eq!(client.read_all("/b/x/y/k").await.unwrap(), b"second!");
    assert_eq!(std::fs::read(c.ufs.join("b/x/y/k")).unwrap(), b"second!");
    assert!(client.list("/stage").await.unwrap().is_empty());
    assert!(!c.ufs.join("stage/2").exists());
    // A staged write that fails leaves the old file and nothing staged.
    let mut w = client.create("/b/x/y/k", staged("/stage/3")).await.unwrap();
    w.write(b"partial").await.unwrap();
    w.abort().await;
    assert_eq!(client.read_all("/b/x/y/k").await.unwrap(), b"second!");
    assert!(client.list("/stage").await.unwrap().is_empty());
    // Under a directory that does not exist: NotFound, and nothing made.
    let err = match client
        .create("/nob/k", thaw_client::WriteOptions { recursive_under: Some("/nob".into()), ..staged("/stage/4") })
        .await
    {
        Err(e) => e,
        Ok(_) => panic!("a write under a missing directory was accepted"),
    };
    assert_eq!(err.kind, thaw_common::ErrorKind::NotFound, "{err}");
    assert!(client.stat("/nob").await.is_err());
    // Over a directory: refused, as a rename over one is.
    let err = match client.create("/b/x", staged("/stage/5")).await {
        Err(e) => e,
        Ok(_) => panic!("a staged write over a directory was accepted"),
    };
    assert_eq!(err.kind, thaw_common::ErrorKind::AlreadyExists, "{err}");
}

/// Past one page (the master answers 1,000 entries at most, whatever is
/// asked): whole listings by the client and `thaw fs ls` (text and JSON) go
/// page by page and miss nothing; a made-up cursor only starts the page
/// elsewhere; a directory deleted between pages ends the listing with a
/// not-found error instead of a short answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_past_one_page_lists_whole_and_one_deleted_midway_fails_clearly() {
    const N: usize = 2300;
    let c = start(ClusterOptions::workers(1)).await;
    let client = c.remote_client();
    let tasks: Vec<_> = (0..8)
        .map(|k| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in (k..N).step_by(8) {
                    client.write_all(&format!("/wide/f{i:04}"), b"", opts(WriteType::MustCache)).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let expected: Vec<String> = (0..N).map(|i| format!("f{i:04}")).collect();
    for limit in [0, 5000] {
        let page = client.list_page("/wide", false, "", limit).await.unwrap();
        assert_eq!((page.entries.len(), page.truncated), (1000, true), "limit {limit}");
    }
    let names: Vec<String> = client.list("/wide").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, expected);

    let ls = std::process::Command::new(BIN).args(["fs", "ls", "/wide"]).env("THAW_MASTER", c.master_addr()).output();
    let ls = ls.unwrap();
    assert!(ls.status.success(), "{}", String::from_utf8_lossy(&ls.stderr));
    let printed: Vec<String> =
        String::from_utf8(ls.stdout).unwrap().lines().map(|l| l.rsplit(' ').next().unwrap().to_string()).collect();
    assert_eq!(printed, expected);
    let json = std::process::Command::new(BIN)
        .args(["fs", "ls", "--json", "/wide"])
        .env("THAW_MASTER", c.master_addr())
        .output()
        .unwrap();
    let entries: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(entries.len(), N);
    assert_eq!(entries[N - 1]["name"], "f2299");

    // Cursors are names: one that names nothing starts after where it would sort.
    let page = client.list_page("/wide", false, "f0499x", 3).await.unwrap();
    let got: Vec<&str> = page.entries.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(got, ["f0500", "f0501", "f0502"]);
    for forged in ["../../etc", "\u{10FFFF}", "f9999/../..", "\0"] {
        let page = client.list_page("/wide", false, forged, 3).await.unwrap();
        assert!(page.entries.iter().all(|f| f.name.as_str() > forged), "{forged:?}");
    }

    let first = client.list_page("/wide", false, "", 1000).await.unwrap();
    client.delete("/wide", true).await.unwrap();
    let err = client.list_page("/wide", false, &first.entries[999].name, 1000).await.unwrap_err();
    assert_eq!(err.kind, thaw_common::ErrorKind::NotFound, "{err:?}");
}

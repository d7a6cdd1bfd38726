//! A Rust S3 client against `thaw gateway`: OpenDAL's S3 service (its own
//! SigV4 signing, multipart uploads, ranged reads, paged listings) writing and
//! reading a real cluster through the gateway process, byte for byte, and the
//! same bytes read natively.

use crate::common::*;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use opendal::{ErrorKind as DalKind, Operator};

/// A `thaw gateway` process on a free port, killed when dropped.
struct Gateway {
    child: Child,
    url: String,
}

impl Gateway {
    fn start(master: &str) -> Gateway {
        let mut child = Command::new(BIN)
            .args(["gateway", "--master", master, "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("thaw gateway starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the gateway says where it listens").unwrap();
        let addr = first.strip_prefix("thaw gateway listening on ").unwrap_or_else(|| panic!("{first}"));
        let url = format!("http://{addr}");
        // Whatever else it prints is read, so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Gateway { child, url }
    }

    /// OpenDAL's S3 service on bucket `bucket` of this gateway, signing with
    /// the gateway's default key pair and nothing of this machine's AWS set-up.
    fn bucket(&self, bucket: &str) -> Operator {
        thaw_ufs::s3::install_http_transport(); // reqwest, on ring
        let b = opendal::services::S3::default()
            .bucket(bucket)
            .endpoint(&self.url)
            .region("us-east-1")
            .access_key_id(thaw_gateway::DEFAULT_ACCESS_KEY)
            .secret_access_key(thaw_gateway::DEFAULT_SECRET_KEY)
            .disable_config_load()
            .disable_ec2_metadata();
        Operator::new(b).unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opendal_s3_writes_reads_lists_copies_and_deletes_through_the_gateway() {
    let c = start(ClusterOptions::workers(1)).await;
    let bs = c.options.block_size as usize;
    let thaw = c.client("h0", "r0");
    thaw.mkdir("/rust", true, false).await.unwrap(); // buckets are top-level directories
    let gw = Gateway::start(c.master_addr());
    let op = gw.bucket("rust");

    // Small objects, with names S3 clients must escape: spaces, unicode, '%'.
    let names = ["a.txt", "dir/with space.bin", "dir/caf\u{e9} 100%.bin", "dir/deeper/empty"];
    let bodies: Vec<Vec<u8>> = vec![b"hello".to_vec(), data(70_000, 1), data(bs + 17, 2), Vec::new()];
    for (name, body) in names.iter().zip(&bodies) {
        op.write(name, body.clone()).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for (name, body) in names.iter().zip(&bodies) {
        assert_eq!(op.read(name).await.unwrap().to_vec(), *body, "{name}");
        // The same bytes natively, under the bucket's directory.
        let mut got = Vec::new();
        thaw.open(&format!("/rust/{name}")).await.unwrap().read_to_end(&mut got).await.unwrap();
        assert_eq!(got, *body, "{name} read natively");
    }

    // A multipart upload (5 MiB parts, two at a time) over several blocks,
    // then ranges across block boundaries.
    let big = data(12 * bs + 12_345, 3);
    let mut w = op.writer_with("big.bin").chunk(5 << 20).concurrent(2).await.unwrap();
    for piece in big.chunks(3 << 20) {
        w.write(piece.to_vec()).await.unwrap();
    }
    w.close().await.unwrap();
    assert_eq!(thaw.stat("/rust/big.bin").await.unwrap().length, big.len() as u64);
    assert_eq!(sha(&op.read("big.bin").await.unwrap().to_vec()), sha(&big));
    for (from, to) in [(bs - 10, bs + 10), (0, 1), (3 * bs, 5 * bs), (big.len() - 100, big.len())] {
        let got = op.read_with("big.bin").range(from as u64..to as u64).await.unwrap().to_vec();
        assert_eq!(got, &big[from..to], "range {from}..{to}");
    }

    // Metadata: sizes, and an ETag that stays while the object does.
    let meta = op.stat("big.bin").await.unwrap();
    assert_eq!(meta.content_length(), big.len() as u64);
    let etag = meta.etag().expect("an ETag").to_string();
    assert_eq!(op.stat("big.bin").await.unwrap().etag(), Some(etag.as_str()));

    // Listings: one level (a delimiter), and everything under a prefix.
    let mut top: Vec<String> = op.list("").await.unwrap().into_iter().map(|e| e.path().to_string()).collect();
    top.sort();
    assert_eq!(top, ["a.txt", "big.bin", "dir/"], "{top:?}");
    let mut all: Vec<String> = op
        .list_with("dir/")
        .recursive(true)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.metadata().is_file())
        .map(|e| e.path().to_string())
        .collect();
    all.sort();
    let mut want: Vec<String> = names[1..].iter().map(|n| n.to_string()).collect();
    want.sort();
    assert_eq!(all, want);

    // Copy, then overwrite: the copy keeps the old bytes; the ETag changes.
    op.copy("big.bin", "copy of big.bin").await.unwrap();
    op.write("big.bin", b"smaller now".to_vec()).await.unwrap();
    assert_eq!(op.read("big.bin").await.unwrap().to_vec(), b"smaller now");
    assert_ne!(op.stat("big.bin").await.unwrap().etag(), Some(etag.as_str()));
    assert_eq!(sha(&op.read("copy of big.bin").await.unwrap().to_vec()), sha(&big));

    // Missing keys and buckets are S3's errors, which OpenDAL maps to NotFound.
    assert_eq!(op.read("nothing").await.unwrap_err().kind(), DalKind::NotFound);
    assert_eq!(op.stat("nothing").await.unwrap_err().kind(), DalKind::NotFound);
    let nobucket = gw.bucket("no-such-bucket").write("k", b"x".to_vec()).await.unwrap_err();
    assert!(nobucket.to_string().contains("NoSuchBucket"), "{nobucket}");

    // Deletes, one by one and by prefix; the namespace agrees.
    op.delete("a.txt").await.unwrap();
    op.delete_with("dir/").recursive(true).await.unwrap();
    assert_eq!(thaw.stat("/rust/a.txt").await.unwrap_err().kind, ErrorKind::NotFound);
    let left: Vec<String> = thaw.list("/rust").await.unwrap().into_iter().map(|f| f.path).collect();
    assert_eq!(left, ["/rust/big.bin", "/rust/copy of big.bin"], "{}", c.logs());
}

//! Fuzz targets: every decoder and parser that takes bytes or text from outside
//! (a peer, the journal on disk, a command line), each a function of `&[u8]`
//! that panics only on a bug. A target checks more than "no crash" where the
//! input allows: a decoded message re-encodes to itself, a normalised path is a
//! fixed point, a loaded namespace is a tree whose every path leads back to
//! its inode.
//!
//! They run (docs/reliability.md, "Damaged input"):
//! - under `cargo test -p thaw-fuzz` (part of `make test`): bolero feeds each
//!   target random inputs for a second, after the regression inputs kept in
//!   `tests/__fuzz__/` (one per bug found);
//! - longer with `scripts/fuzz.sh SECONDS [TARGET]` (the same, in release);
//! - under libFuzzer, coverage-guided, with `cargo bolero test` (see the
//!   script; its build does not link here yet).
//!
//! Random bytes rarely spell a valid frame or spec, so the targets that take
//! structure read their input as a recipe ([`stream_from`], [`text_from`]):
//! valid seeds changed by the bytes, or tokens of the grammar.

use std::collections::HashSet;

use prost::Message;
use thaw_common::frame;
use thaw_common::proto::{
    CacheBlockRequest, DataRequest, DataResponse, DeviceControlRequest, InodeRecord, OpenLocalBlockRequest,
    ReadBlockRequest, Tier, UfsSource, WorkerStatsRequest, WriteFileRequest, data_request,
};

/// The data-protocol version these seeds speak.
pub const VERSION: u32 = 1;

fn request(r: data_request::Request) -> DataRequest {
    DataRequest { version: VERSION, job_id: "fuzz".into(), request: Some(r), ..Default::default() }
}

/// Valid requests of every kind, with values near the edges (the first
/// block, huge offsets, paths that try to leave the under-store).
pub fn seed_requests() -> Vec<DataRequest> {
    use data_request::Request as R;
    let ufs = |path: &str, offset, length| Some(UfsSource { path: path.into(), offset, length });
    vec![
        request(R::ReadBlock(ReadBlockRequest { block_id: 1 << 20, offset: 0, length: 0, ..Default::default() })),
        request(R::ReadBlock(ReadBlockRequest {
            block_id: 1 << 20,
            offset: u64::MAX,
            length: u64::MAX,
            ufs: ufs("/data/file.bin", 0, 1 << 20),
            cache_tier: Tier::Mem as i32,
        })),
        request(R::ReadBlock(ReadBlockRequest {
            block_id: 7,
            ufs: ufs("/../../etc/passwd", 0, 4096),
            ..Default::default()
        })),
        request(R::WriteFile(WriteFileRequest {
            file_id: 5,
            block_size: 1 << 20,
            tier: Tier::Mem as i32,
            ufs_path: String::new(),
            checksum: true,
            first_block: 0,
            cached: false,
        })),
        request(R::WriteFile(WriteFileRequest {
            file_id: 5,
            block_size: 1 << 20,
            tier: Tier::Mem as i32,
            ufs_path: String::new(),
            checksum: false,
            first_block: u64::MAX,
            cached: true,
        })),
        request(R::WriteFile(WriteFileRequest {
            file_id: 6,
            block_size: 0,
            tier: Tier::Unspecified as i32,
            ufs_path: "/a/../../x".into(),
            checksum: false,
            first_block: 3,
            cached: false,
        })),
        request(R::OpenLocal(OpenLocalBlockRequest { block_id: 1 << 20 })),
        request(R::Stats(WorkerStatsRequest {})),
        request(R::CacheBlock(CacheBlockRequest {
            block_id: 2 << 20,
            ufs: ufs("/data/file.bin", u64::MAX - 10, 100),
            tier: Tier::Disk as i32,
        })),
        request(R::DeviceControl(DeviceControlRequest { device: "disk".into(), interference_streams: u32::MAX })),
    ]
}

/// One frame: the 4-byte big-endian length, then the bytes.
pub fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A byte stream a client might send, made from `data`: with its first byte
/// odd, `data` itself after that byte; else a valid request frame (picked by
/// the next byte; a write's chunks and end after it) changed by the bytes
/// that follow, three at a time: (what, where, value) = flip a bit, set a
/// byte, cut the stream there, or append another seed. So random input
/// reaches past the framing into every request's fields.
pub fn stream_from(data: &[u8]) -> Vec<u8> {
    let Some((&mode, rest)) = data.split_first() else { return Vec::new() };
    if mode % 2 == 1 {
        return rest.to_vec();
    }
    let seeds = seed_requests();
    let pick = |b: u8| &seeds[usize::from(b) % seeds.len()];
    let Some((&first, edits)) = rest.split_first() else { return Vec::new() };
    let with_chunks = |req: &DataRequest| {
        let mut out = framed(&req.encode_to_vec());
        if matches!(req.request, Some(data_request::Request::WriteFile(_))) {
            out.extend(framed(&[7u8; 100]));
            out.extend(framed(&[]));
        }
        out
    };
    let mut out = with_chunks(pick(first));
    for e in edits.chunks_exact(3) {
        let at = usize::from(e[1]) * out.len().max(1) / 256;
        match e[0] % 4 {
            0 if at < out.len() => out[at] ^= 1 << (e[2] % 8),
            1 if at < out.len() => out[at] = e[2],
            2 => out.truncate(at),
            3 => out.extend(with_chunks(pick(e[2]))),
            _ => {}
        }
    }
    out
}

/// The worker's side of a data-protocol connection over `data`: request
/// frames, and for writes the chunk frames after them, until the bytes end or
/// a frame is refused. A request that decodes must re-encode to itself (no
/// field read that is not written back), and nothing may allocate past the
/// frame limits (a length is checked before its buffer exists).
pub fn data_stream(data: &[u8]) {
    let stream = stream_from(data);
    futures::executor::block_on(async {
        let mut r = stream.as_slice();
        loop {
            let req = match frame::read_msg::<_, DataRequest>(&mut r).await {
                Ok(Some(req)) => req,
                Ok(None) | Err(_) => return,
            };
            let again = DataRequest::decode(req.encode_to_vec().as_slice()).expect("a re-encoded request decodes");
            assert_eq!(again, req, "a request does not survive re-encoding");
            let streams =
                matches!(req.request, Some(data_request::Request::WriteFile(_) | data_request::Request::WriteLocal(_)));
            if !streams {
                continue;
            }
            loop {
                match frame::read_chunk_header(&mut r).await {
                    Ok(frame::ChunkHeader::End) => break,
                    Ok(frame::ChunkHeader::StoreNoMore) => {}
                    Ok(frame::ChunkHeader::Data(n)) if n <= r.len() => r = &r[n..],
                    Ok(_) | Err(_) => return,
                }
            }
        }
    })
}

/// A client reading a worker's answer: a response frame, turned into a result.
pub fn data_response(data: &[u8]) {
    futures::executor::block_on(async {
        let mut r = data;
        if let Ok(Some(resp)) = frame::read_msg::<_, DataResponse>(&mut r).await {
            let _ = frame::check_response(resp);
        }
    })
}

/// A journal record as the master reads it at start-up.
pub fn journal_record(data: &[u8]) {
    if let Ok(rec) = thaw_master::journal::decode_inode(data) {
        assert_eq!(thaw_master::journal::decode_inode(&rec.encode_to_vec()).ok(), Some(rec));
    }
    let _ = thaw_master::journal::decode_lineage(data);
}

/// Names from a small alphabet that includes every kind of bad one, so that
/// random bytes meet them often.
const NAMES: [&str; 10] = ["a", "b", "c", "", ".", "..", "a/b", "x\0y", "dir", "file"];

/// A journal's worth of inode records built from the bytes (5 bytes a record:
/// id, parent, name, kind, version), loaded as the master loads them. Whatever
/// they say (cycles, orphans, files as parents, duplicate names and ids, the
/// root's id, bad names), the load must not panic, and what it keeps must be
/// a tree: every kept inode reachable from the root by its own path, and the
/// records dropped exactly the ones reported.
pub fn namespace_load(data: &[u8]) {
    use thaw_master::namespace::{Namespace, ROOT_ID};
    let records: Vec<InodeRecord> = data
        .chunks_exact(5)
        .map(|c| InodeRecord {
            version: if c[4] == 0xff { 2 } else { 1 },
            id: u64::from(c[0] % 24),
            parent_id: u64::from(c[1] % 24),
            name: NAMES[usize::from(c[2]) % NAMES.len()].to_string(),
            is_dir: c[3] % 2 == 0,
            complete: true,
            ..Default::default()
        })
        .collect();
    let given: HashSet<u64> = records.iter().map(|r| r.id).collect();
    let (ns, problems) = Namespace::from_records(records.clone(), 0);
    let kept: Vec<u64> = given.iter().copied().filter(|id| *id != ROOT_ID && ns.get(*id).is_some()).collect();
    for &id in &kept {
        let path = ns.path_of(id);
        let comps = thaw_common::path::components(&path).expect("a kept inode has a valid path");
        assert_eq!(ns.lookup(&comps), Some(id), "{path} does not lead back to inode {id}");
    }
    // Everything given was kept, or something was reported.
    let all_kept = kept.len() == given.iter().filter(|id| **id != ROOT_ID).count()
        && records.len() == given.len()
        && !given.contains(&ROOT_ID);
    assert!(all_kept || !problems.is_empty(), "records were dropped without a word: {records:?}");
    assert!(ns.next_id() > given.iter().copied().max().unwrap_or(0));
}

/// Text made from `data`: with its first byte odd, the rest as UTF-8 (lossy);
/// else each byte picks one of `tokens`, so that random bytes spell inputs
/// near the grammar (separators, dots, units, numbers, NULs, long names).
pub fn text_from(data: &[u8], tokens: &[&str]) -> String {
    let Some((&mode, rest)) = data.split_first() else { return String::new() };
    if mode % 2 == 1 {
        return String::from_utf8_lossy(rest).into_owned();
    }
    rest.iter().map(|b| tokens[usize::from(*b) % tokens.len()]).collect()
}

const PATH_TOKENS: [&str; 14] = ["/", "/", "a", "b", ".", "..", "\0", "\\", "é", " ", "x", "//", "~", "%2e"];
const SIZE_TOKENS: [&str; 22] = [
    "0",
    "1",
    "7",
    "9",
    ".",
    "5",
    "KiB",
    "MiB",
    "GiB",
    "TiB",
    "PiB",
    "EiB",
    "k",
    "K",
    "M",
    "G",
    "B",
    "b",
    " ",
    "-",
    "e",
    "99999999999",
];
const DEVICE_TOKENS: [&str; 16] =
    ["disk=", "ufs=", "penalty=", ",", "/s", "40MiB", "0", "1", "1e308", "NaN", "inf", "-1", "0.3", " ", "=", "18EiB"];

/// A namespace path from a request.
pub fn path(data: &[u8]) {
    let text = text_from(data, &PATH_TOKENS);
    let s = text.as_str();
    if let Ok(comps) = thaw_common::path::components(s) {
        for c in &comps {
            assert!(!c.is_empty() && *c != "." && *c != ".." && !c.contains(['/', '\0', '\\']), "{s:?}: {c:?}");
        }
        let norm = thaw_common::path::normalize(s).expect("components passed");
        assert_eq!(thaw_common::path::normalize(&norm).ok().as_deref(), Some(norm.as_str()), "not a fixed point");
        assert!(norm.len() <= s.len().max(1));
    }
}

/// A size from a command line or a config (`4GiB`).
pub fn size(data: &[u8]) {
    let text = text_from(data, &SIZE_TOKENS);
    let s = text.as_str();
    if let Ok(n) = thaw_common::size::parse_size(s) {
        let shown = thaw_common::size::format_size(n);
        assert!(!shown.is_empty());
    }
}

/// A worker's emulated device model (`disk=40MiB/s,ufs=20MiB/s,penalty=0.3`),
/// and the time it charges for the largest reads.
pub fn device_model(data: &[u8]) {
    let text = text_from(data, &DEVICE_TOKENS);
    let s = text.as_str();
    if let Ok(m) = thaw_worker::device::DeviceModels::parse(s) {
        for d in [m.disk, m.ufs].into_iter().flatten() {
            let _ = d.cost(u64::MAX, u32::MAX);
        }
    }
}

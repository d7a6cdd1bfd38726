//! Writing checkpoints (Tachyon, section 2.7). The master orders a worker that holds
//! a file whole to write it to the under-store, one file at a time; the worker
//! copies the file's blocks into the under-store's checkpoint area and tells
//! the master, which moves the copy to the file's path and marks it persisted.
//! The worker then unpins the blocks: they are cache like any other now.
//!
//! A file written in segments may have its blocks on several workers, none
//! holding it whole: the master then orders a worker that holds some of it,
//! naming for each block it lacks a worker to read it from (and a grant to);
//! the worker reads those over the data protocol, a chunk per request, and
//! the master has the other holders unpin their blocks once it is persisted.
//!
//! A checkpoint must not slow the jobs (Tachyon: it "does not block the real
//! work's progress"), so the copy is paced to `--checkpoint-bandwidth`, runs in
//! the kernel's idle I/O class (as migrations do, [`crate::ioprio`]), and, where
//! the under-store is an emulated device, takes only the device time foreground
//! reads leave (a background stream). On a local under-store the copy is
//! sendfile(2) from the block files; otherwise it streams through OpenDAL. The
//! copy is fsync'd before the master is told, so "persisted" means on disk, and
//! a local copy's pages leave the page cache as they reach the disk (a
//! checkpoint is cold data: see [`crate::page_cache`]).
//!
//! A checkpoint asked for by hand (`thaw fs persist`, an urgent order) is a
//! user waiting, not background work: it runs in a second lane beside the
//! background copy, unpaced and in the normal I/O class. An urgent order for a
//! file whose background copy is running lifts that copy's pacing instead.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use thaw_common::ids::{block_count, block_id, block_length};
use thaw_common::proto::*;
use thaw_common::size::format_size;
use thaw_common::{Result, ThawError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::Worker;
use crate::device::DeviceKind;

/// Bytes per paced step.
const CHUNK: u64 = 4 << 20;
/// A done call the master could not take is tried this many times.
const DONE_ATTEMPTS: u32 = 10;
/// Longest wait for one chunk of a block read from another worker.
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Where one block of a checkpoint comes from.
enum Part {
    /// A block file of this worker, and the block's length.
    Local(PathBuf, u64),
    /// A block held by another worker (a file spread over several).
    Remote { addr: String, block: u64, length: u64 },
}

impl Part {
    fn len(&self) -> u64 {
        match self {
            Part::Local(_, n) | Part::Remote { length: n, .. } => *n,
        }
    }
}

/// Paces a byte stream to a rate (0: unpaced).
#[derive(Debug)]
pub struct Pace {
    bytes_per_sec: u64,
    next: Mutex<Option<tokio::time::Instant>>,
}

impl Pace {
    pub fn new(bytes_per_sec: u64) -> Self {
        Pace { bytes_per_sec, next: Mutex::new(None) }
    }

    /// Waits for the time `bytes` take at the rate, after what went before.
    pub async fn take(&self, bytes: u64) {
        if self.bytes_per_sec == 0 {
            return;
        }
        let end = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let now = tokio::time::Instant::now();
            let start = next.filter(|t| *t > now).unwrap_or(now);
            let end = start + Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec as f64);
            *next = Some(end);
            end
        };
        tokio::time::sleep_until(end).await;
    }
}

/// One ordered checkpoint: whether it is urgent (asked for by hand), and a
/// wake-up for a paced copy that becomes so.
#[derive(Debug, Default)]
struct Copy {
    urgent: AtomicBool,
    hurry: tokio::sync::Notify,
}

impl Copy {
    fn urgent(&self) -> bool {
        self.urgent.load(Ordering::Relaxed)
    }
}

type Orders = mpsc::UnboundedReceiver<(CheckpointCommand, Arc<Copy>)>;

/// The worker's checkpoint writer: orders in, one copy at a time per lane
/// (background, urgent).
pub struct Checkpointer {
    background: mpsc::UnboundedSender<(CheckpointCommand, Arc<Copy>)>,
    urgent: mpsc::UnboundedSender<(CheckpointCommand, Arc<Copy>)>,
    rx: Mutex<Option<(Orders, Orders)>>,
    /// Files ordered and not yet answered for (reported with full heartbeats).
    writing: Mutex<HashMap<u64, Arc<Copy>>>,
    pace: Pace,
}

impl Checkpointer {
    pub fn new(bytes_per_sec: u64) -> Self {
        let (background, background_rx) = mpsc::unbounded_channel();
        let (urgent, urgent_rx) = mpsc::unbounded_channel();
        Checkpointer {
            background,
            urgent,
            rx: Mutex::new(Some((background_rx, urgent_rx))),
            writing: Mutex::new(HashMap::new()),
            pace: Pace::new(bytes_per_sec),
        }
    }

    fn writing(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Copy>>> {
        self.writing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the master's orders. A repeated order is ignored, unless it is
    /// urgent and the copy was not: that copy is hurried.
    pub fn order(&self, cmds: Vec<CheckpointCommand>) {
        for c in cmds {
            let mut writing = self.writing();
            if let Some(copy) = writing.get(&c.file_id) {
                if c.urgent && !copy.urgent.swap(true, Ordering::Relaxed) {
                    copy.hurry.notify_one();
                }
                continue;
            }
            let copy = Arc::new(Copy { urgent: AtomicBool::new(c.urgent), hurry: Default::default() });
            writing.insert(c.file_id, copy.clone());
            let lane = if c.urgent { &self.urgent } else { &self.background };
            let _ = lane.send((c, copy));
        }
    }

    /// What this worker is writing, for the master.
    pub fn in_progress(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.writing().keys().copied().collect();
        v.sort_unstable();
        v
    }
}

/// Writes ordered checkpoints until shutdown, each lane on its own.
pub(crate) async fn run(w: Arc<Worker>, shutdown: CancellationToken) {
    let Some((background, urgent)) = w.checkpoints.rx.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    tokio::join!(lane(&w, background, &shutdown), lane(&w, urgent, &shutdown));
}

/// Writes one lane's checkpoints in order, one at a time.
async fn lane(w: &Worker, mut rx: Orders, shutdown: &CancellationToken) {
    loop {
        let (cmd, copy) = tokio::select! {
            _ = shutdown.cancelled() => return,
            c = rx.recv() => match c { Some(c) => c, None => return },
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = w.checkpoint(&cmd, &copy) => {}
        }
        w.checkpoints.writing().remove(&cmd.file_id);
    }
}

impl Worker {
    /// Writes one checkpoint and reports it to the master.
    async fn checkpoint(&self, cmd: &CheckpointCommand, copy: &Copy) {
        let started = std::time::Instant::now();
        let result = self.write_checkpoint(cmd, copy).await;
        let (length, error) = match &result {
            Ok(n) => (*n, String::new()),
            Err(e) => (0, e.to_string()),
        };
        match &result {
            Ok(n) => tracing::debug!(
                file_id = cmd.file_id,
                path = %cmd.path,
                bytes = n,
                took_ms = started.elapsed().as_millis() as u64,
                urgent = copy.urgent(),
                "checkpoint written"
            ),
            Err(e) => tracing::warn!(file_id = cmd.file_id, path = %cmd.path, error = %e, "checkpoint failed"),
        }
        for attempt in 1..=DONE_ATTEMPTS {
            let Some(reg) = self.registration() else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let req = CheckpointDoneRequest {
                worker_id: reg.worker_id,
                master_epoch: reg.epoch,
                file_id: cmd.file_id,
                length,
                error: error.clone(),
            };
            match self.master.clone().checkpoint_done(req).await {
                Ok(resp) => {
                    let resp = resp.into_inner();
                    if resp.persisted {
                        for t in self.tiers() {
                            resp.blocks.iter().for_each(|b| t.unpin(*b));
                        }
                    }
                    return;
                }
                Err(e) => {
                    let e = ThawError::from(e);
                    if e.kind == thaw_common::ErrorKind::Unavailable && e.message.contains("register again") {
                        // A new master orders it again from its journal.
                        return;
                    }
                    tracing::debug!(file_id = cmd.file_id, attempt, error = %e, "checkpoint report failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200 * attempt as u64)).await;
                }
            }
        }
    }

    /// The file's blocks, in order: this worker's block files, and the
    /// others' places.
    fn checkpoint_parts(&self, cmd: &CheckpointCommand) -> Result<Vec<Part>> {
        (0..block_count(cmd.length, cmd.block_size))
            .map(|i| {
                let b = block_id(cmd.file_id, i);
                let want = block_length(cmd.length, cmd.block_size, i);
                if let Some(t) = self.tiers().find(|t| t.get(b) == Some(want)) {
                    return Ok(Part::Local(t.block_path(b), want));
                }
                match cmd.block_sources.get(i as usize).filter(|a| !a.is_empty()) {
                    Some(addr) => Ok(Part::Remote { addr: addr.clone(), block: b, length: want }),
                    None => Err(ThawError::not_found(format!("block {i} of {} is not on this worker", cmd.path))),
                }
            })
            .collect()
    }

    /// Bytes `at..at + len` of `block` from the worker at `addr` (a block of a
    /// spread file this worker checkpoints), on a connection of its own: a
    /// paced checkpoint may wait long between chunks.
    async fn fetch(&self, addr: &str, block: u64, at: u64, len: u64, access: Option<&SignedAccess>) -> Result<Bytes> {
        use tokio::io::AsyncReadExt;
        let fetched = async {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            let _ = tcp.set_nodelay(true);
            let mut sock = match self.config.master_tls.as_deref() {
                Some(tls) => tls.connect(tcp, addr).await?,
                None => thaw_common::tls::DataStream::Plain(tcp),
            };
            let req = DataRequest {
                version: thaw_proto::DATA_PROTOCOL_VERSION,
                job_id: String::new(),
                access: access.cloned(),
                token: String::new(),
                request: Some(data_request::Request::ReadBlock(ReadBlockRequest {
                    block_id: block,
                    offset: at,
                    length: len,
                    ..Default::default()
                })),
            };
            thaw_common::frame::write_msg(&mut sock, &req).await?;
            let resp = thaw_common::frame::read_msg::<_, DataResponse>(&mut sock)
                .await?
                .ok_or_else(|| ThawError::unavailable("closed the connection"))?;
            let resp = thaw_common::frame::check_response(resp)?;
            if resp.length != len {
                return Err(ThawError::data_lost(format!("answered {} of {len} bytes", resp.length)));
            }
            let mut buf = vec![0u8; len as usize];
            sock.read_exact(&mut buf).await?;
            Ok::<_, ThawError>(Bytes::from(buf))
        };
        let r = match tokio::time::timeout(FETCH_TIMEOUT, fetched).await {
            Ok(r) => r,
            Err(_) => Err(ThawError::timeout(format!("no answer within {FETCH_TIMEOUT:?}"))),
        };
        r.map_err(|e| e.context(format!("block {block} from worker {addr}")))
    }

    /// Copies the file into the under-store's checkpoint area; returns its length.
    async fn write_checkpoint(&self, cmd: &CheckpointCommand, copy: &Copy) -> Result<u64> {
        let ufs = self.ufs()?.clone();
        let parts = self.checkpoint_parts(cmd)?;
        // An emulated under-store: an urgent copy competes as a foreground stream.
        let mut device = self
            .device(DeviceKind::Ufs)
            .map(|d| if copy.urgent() { d.open_stream() } else { d.open_background_stream() }.writing());
        let access = cmd.access.as_ref();
        let written = match ufs.checkpoint_local_path(cmd.file_id) {
            Some(dst) => self.checkpoint_local(parts, access, dst, copy, device.as_mut()).await?,
            None => self.checkpoint_streamed(&ufs, cmd.file_id, parts, access, copy, device.as_mut()).await?,
        };
        if written != cmd.length {
            return Err(ThawError::data_lost(format!(
                "{}: wrote {} of {}",
                cmd.path,
                format_size(written),
                format_size(cmd.length)
            )));
        }
        Ok(written)
    }

    /// Waits until `k` more bytes may go: the bandwidth cap (not for an urgent
    /// copy; a copy hurried while it waits goes at once), then the emulated
    /// under-store's device time.
    async fn paced(&self, copy: &Copy, device: Option<&mut crate::device::DeviceStream>, k: u64) {
        if !copy.urgent() {
            tokio::select! {
                _ = self.checkpoints.pace.take(k) => {}
                _ = copy.hurry.notified() => {}
            }
        }
        if let Some(d) = device {
            d.consume(k).await;
        }
    }

    /// A local under-store: sendfile(2) from each block file into a temp file
    /// beside the checkpoint's place, fsync, rename.
    async fn checkpoint_local(
        &self,
        parts: Vec<Part>,
        access: Option<&SignedAccess>,
        dst: PathBuf,
        copy: &Copy,
        mut device: Option<&mut crate::device::DeviceStream>,
    ) -> Result<u64> {
        let temp = dst.with_extension(format!("{:016x}", rand::random::<u64>()));
        let out = tokio::task::spawn_blocking({
            let temp = temp.clone();
            move || -> Result<std::fs::File> {
                if let Some(dir) = temp.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                Ok(std::fs::File::create(&temp)?)
            }
        })
        .await
        .map_err(|e| ThawError::internal(format!("checkpoint task: {e}")))??;
        let copied = async {
            let mut out = Some(out);
            let mut total = 0;
            // Drop-behind of the copy's pages (see `page_cache`).
            let mut behind = Some(crate::page_cache::WriteBehind::new(!self.config.keep_page_cache));
            for part in parts {
                let len = part.len();
                let mut at = 0;
                while at < len {
                    let k = (len - at).min(CHUNK);
                    self.paced(copy, device.as_deref_mut(), k).await;
                    let file = out.take().expect("returned each step");
                    let mut wb = behind.take().expect("returned each step");
                    // Background work stays in the idle I/O class; a user's does not.
                    let idle = !copy.urgent();
                    let (file, n, wb) = match &part {
                        Part::Local(src, _) => {
                            let src2 = src.clone();
                            let r = tokio::task::spawn_blocking(move || -> Result<(std::fs::File, u64, _)> {
                                let _idle = idle.then(crate::ioprio::IdleIo::enter);
                                // The source is a tier's block, read again by jobs: kept.
                                let n = crate::cache::sendfile_range(&src2, &file, at, k, false)?;
                                wb.wrote(&file, total + n);
                                Ok((file, n, wb))
                            })
                            .await
                            .map_err(|e| ThawError::internal(format!("checkpoint task: {e}")))??;
                            let (file, n, wb) = r;
                            if n < k {
                                return Err(ThawError::data_lost(format!(
                                    "{} ended after {} bytes",
                                    src.display(),
                                    at + n
                                )));
                            }
                            (file, n, wb)
                        }
                        Part::Remote { addr, block, .. } => {
                            let bytes = self.fetch(addr, *block, at, k, access).await?;
                            tokio::task::spawn_blocking(move || -> Result<(std::fs::File, u64, _)> {
                                let _idle = idle.then(crate::ioprio::IdleIo::enter);
                                std::io::Write::write_all(&mut &file, &bytes)?;
                                wb.wrote(&file, total + k);
                                Ok((file, k, wb))
                            })
                            .await
                            .map_err(|e| ThawError::internal(format!("checkpoint task: {e}")))??
                        }
                    };
                    out = Some(file);
                    behind = Some(wb);
                    at += n;
                    total += n;
                }
            }
            let file = out.take().expect("returned each step");
            let wb = behind.take().expect("returned each step");
            let (temp, dst) = (temp.clone(), dst.clone());
            let idle = !copy.urgent();
            tokio::task::spawn_blocking(move || -> Result<()> {
                let _idle = idle.then(crate::ioprio::IdleIo::enter);
                file.sync_all()?;
                // On disk: the under-store's copy need not stay in memory too.
                wb.finish(&file);
                std::fs::rename(&temp, &dst)?;
                Ok(())
            })
            .await
            .map_err(|e| ThawError::internal(format!("checkpoint task: {e}")))??;
            Ok::<u64, ThawError>(total)
        }
        .await;
        if copied.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        copied
    }

    /// Any other under-store: the block files' bytes through its writer.
    async fn checkpoint_streamed(
        &self,
        ufs: &thaw_ufs::UnderStore,
        file_id: u64,
        parts: Vec<Part>,
        access: Option<&SignedAccess>,
        copy: &Copy,
        mut device: Option<&mut crate::device::DeviceStream>,
    ) -> Result<u64> {
        use tokio::io::AsyncReadExt;
        let mut writer = ufs.checkpoint_writer(file_id).await?;
        let copied = async {
            let mut total = 0;
            for part in parts {
                let len = part.len();
                let mut f = match &part {
                    Part::Local(src, _) => Some(tokio::fs::File::open(src).await?),
                    Part::Remote { .. } => None,
                };
                let mut at = 0;
                while at < len {
                    let k = (len - at).min(CHUNK);
                    self.paced(copy, device.as_deref_mut(), k).await;
                    let bytes = match (&part, f.as_mut()) {
                        (Part::Remote { addr, block, .. }, _) => self.fetch(addr, *block, at, k, access).await?,
                        (_, Some(f)) => {
                            let mut buf = vec![0u8; k as usize];
                            f.read_exact(&mut buf).await?;
                            Bytes::from(buf)
                        }
                        (Part::Local(..), None) => unreachable!("opened above"),
                    };
                    writer.write(bytes).await?;
                    at += k;
                    total += k;
                }
            }
            Ok::<u64, ThawError>(total)
        }
        .await;
        match copied {
            Ok(n) => {
                writer.close().await?;
                Ok(n)
            }
            Err(e) => {
                writer.abort().await;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TierConfig, WorkerConfig};

    /// A worker (never started) with a MEM tier and an under-store, holding a
    /// 3-block file (2.5 blocks of bytes) in its tier.
    fn worker_with_file(dir: &std::path::Path, file_id: u64, block_size: u64) -> (Worker, Vec<u8>) {
        paced_worker_with_file(dir, file_id, block_size, 0)
    }

    /// The same with checkpoints paced to `bandwidth` bytes/s.
    fn paced_worker_with_file(
        dir: &std::path::Path,
        file_id: u64,
        block_size: u64,
        bandwidth: u64,
    ) -> (Worker, Vec<u8>) {
        let config = WorkerConfig {
            master: "127.0.0.1:1".into(),
            host: "h".into(),
            rack: "r".into(),
            mem: Some(TierConfig { dir: dir.join("mem"), capacity: 64 << 20 }),
            disk: None,
            replacement: crate::replacement::Policy::Lru,
            cache_window: crate::tier::DEFAULT_WINDOW,
            advertise: None,
            remove_mem_on_exit: false,
            max_connections: 8,
            max_connections_per_user: 8,
            stall_timeout: crate::data::DEFAULT_STALL_TIMEOUT,
            migration: Default::default(),
            device_models: Default::default(),
            checkpoint_bandwidth: bandwidth,
            keep_page_cache: false,
            secret: None,
            tls: None,
            master_tls: None,
            registered: None,
        };
        let w = Worker::new(config, "127.0.0.1:2".into()).unwrap();
        let ufs = thaw_ufs::UnderStore::open(dir.join("ufs").to_str().unwrap()).unwrap();
        w.ufs.set(ufs).unwrap();
        let bytes: Vec<u8> = (0..block_size * 5 / 2).map(|i| (i * 7 % 251) as u8).collect();
        let mem = w.tier(Tier::Mem).unwrap();
        for (i, chunk) in bytes.chunks(block_size as usize).enumerate() {
            let b = block_id(file_id, i as u64);
            let (r, _) = mem.reserve_evicting(chunk.len() as u64, &|_| true);
            let tmp = mem.temp_path(b);
            std::fs::write(&tmp, chunk).unwrap();
            mem.commit(b, &tmp, chunk.len() as u64, r.unwrap(), true).unwrap();
        }
        (w, bytes)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_checkpoint_copies_the_file_whole_by_sendfile_or_through_the_under_store_s_writer() {
        let dir = tempfile::tempdir().unwrap();
        let bs = 1 << 20;
        let (w, bytes) = worker_with_file(dir.path(), 5, bs);
        let cmd = CheckpointCommand {
            file_id: 5,
            length: bytes.len() as u64,
            block_size: bs,
            path: "/f".into(),
            ..Default::default()
        };
        // A local under-store: sendfile into the checkpoint area.
        assert_eq!(w.write_checkpoint(&cmd, &Copy::default()).await.unwrap(), bytes.len() as u64);
        let ufs = w.ufs().unwrap().clone();
        let local = ufs.checkpoint_local_path(5).unwrap();
        assert_eq!(std::fs::read(&local).unwrap(), bytes);
        ufs.discard_checkpoint(5).await.unwrap();
        // Any other under-store: streamed through its writer (OpenDAL).
        let parts = w.checkpoint_parts(&cmd).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(
            w.checkpoint_streamed(&ufs, 5, parts, None, &Copy::default(), None).await.unwrap(),
            bytes.len() as u64
        );
        assert_eq!(std::fs::read(&local).unwrap(), bytes);
        // A block missing here: a clear error, nothing written.
        let mem = w.tier(Tier::Mem).unwrap();
        mem.remove(block_id(5, 2));
        let e = w.write_checkpoint(&cmd, &Copy::default()).await.unwrap_err();
        assert!(e.message.contains("block 2 of /f is not on this worker"), "{e}");
    }

    /// At 1 KiB/s the first 1 MiB step of a background copy would wait 17
    /// minutes; an urgent order for the same file lifts the pace at once, and
    /// an urgent file goes to its own lane.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_urgent_order_hurries_a_paced_copy_and_takes_its_own_lane() {
        let dir = tempfile::tempdir().unwrap();
        let bs = 1 << 20;
        let (w, bytes) = paced_worker_with_file(dir.path(), 5, bs, 1024);
        let w = Arc::new(w);
        let cmd = CheckpointCommand {
            file_id: 5,
            length: bytes.len() as u64,
            block_size: bs,
            path: "/f".into(),
            ..Default::default()
        };
        let (mut background, mut urgent) = w.checkpoints.rx.lock().unwrap().take().unwrap();
        w.checkpoints.order(vec![cmd.clone()]);
        let (cmd, copy) = background.try_recv().unwrap();
        let copying = tokio::spawn({
            let w = w.clone();
            async move { w.write_checkpoint(&cmd, &copy).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!copying.is_finished(), "paced to 1 KiB/s");
        w.checkpoints.order(vec![CheckpointCommand { urgent: true, ..cmd_for(5, bytes.len() as u64, bs) }]);
        let written = tokio::time::timeout(Duration::from_secs(20), copying).await.expect("hurried").unwrap();
        assert_eq!(written.unwrap(), bytes.len() as u64);
        assert!(urgent.try_recv().is_err(), "the running copy was hurried, not ordered again");
        w.checkpoints.order(vec![CheckpointCommand { urgent: true, ..cmd_for(6, 10, bs) }]);
        assert_eq!(urgent.try_recv().unwrap().0.file_id, 6);
        assert!(background.try_recv().is_err());
    }

    fn cmd_for(file_id: u64, length: u64, block_size: u64) -> CheckpointCommand {
        CheckpointCommand { file_id, length, block_size, path: "/f".into(), ..Default::default() }
    }

    #[tokio::test(start_paused = true)]
    async fn the_pace_holds_a_stream_to_its_rate() {
        let pace = Pace::new(10 << 20);
        let t0 = tokio::time::Instant::now();
        for _ in 0..5 {
            pace.take(4 << 20).await;
        }
        // Five 4 MiB steps at 10 MiB/s.
        let took = t0.elapsed().as_secs_f64();
        assert!((took - 2.0).abs() < 0.01, "took {took} s");
        let unpaced = Pace::new(0);
        let t1 = tokio::time::Instant::now();
        unpaced.take(1 << 30).await;
        assert_eq!(t1.elapsed(), Duration::ZERO);
    }
}

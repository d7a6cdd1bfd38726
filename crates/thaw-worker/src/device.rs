//! The emulated device model (evaluation only; off by default).
//!
//! The papers Thaw replays (DYRS, section V, Ignem, section IV) ran on hard disks that are
//! slow and lose throughput when several streams read them at once (the head
//! seeks between them). This machine's disks are fast and page-cached, so the
//! worker can put a model in front of each read of a device instead: the DISK
//! tier (`DeviceKind::Disk`) and the under-store as this worker reads it
//! (`DeviceKind::Ufs`).
//!
//! A device has a bandwidth (bytes/s with one stream) and a concurrency penalty
//! `p`: with `n` streams open, its *total* throughput is
//! `bandwidth / (1 + p * (n - 1))`, shared fairly between the streams. It is kept
//! as a virtual device clock (the instant the device is next free): each slice a
//! stream reads reserves the next `bytes * (1 + p * (n - 1)) / bandwidth` of
//! device time after the clock and sleeps until that slot ends, so slices of
//! concurrent streams interleave and the total rate obeys the formula.
//!
//! Interference (DYRS, section V-C, the dd jobs): synthetic streams that read the
//! device continuously, counting in `n` like real ones, so real reads slow down
//! as on a shared disk.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use thaw_common::proto::DeviceState;
use thaw_common::size::parse_size;
use thaw_common::{Result, ThawError};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Device time is handed out in slices of at most this many bytes, so streams
/// interleave finely whatever chunks their callers read. Streams get equal
/// turns, so the share is fair by bytes when callers read at least a slice at a
/// time (every worker read path reads 4 MiB chunks).
const SLICE: u64 = 1 << 20;
/// Background slices are smaller, so a foreground read that arrives waits at
/// most one of them (a request already at the disk).
const BACKGROUND_SLICE: u64 = 256 << 10;

/// A stream that comes back for its next slice at most this late still
/// continues from the device clock: timers fire up to a millisecond late, and a
/// single stream must not lose that on every slice.
const SLACK: Duration = Duration::from_millis(2);

/// A device reads ahead of a lone stream: while its reader is busy with the
/// bytes it got (copying them, sending them), the device goes on with the next
/// ones, up to this many bytes. So a single reader that spends a little time per
/// chunk still sees the device's bandwidth (as a disk with read-ahead gives a
/// sequential reader), instead of device time plus its own.
const READ_AHEAD: u64 = 4 << 20;

/// The penalty when a spec names none (a hard disk with a few streams).
pub const DEFAULT_PENALTY: f64 = 0.3;
/// The largest penalty a spec may give (each extra stream costing 100 times a
/// stream's own time is already a stalled device).
pub const MAX_PENALTY: f64 = 100.0;

/// Which device of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The DISK tier.
    Disk,
    /// The under-store, as read by this worker.
    Ufs,
}

impl DeviceKind {
    pub const ALL: [DeviceKind; 2] = [DeviceKind::Disk, DeviceKind::Ufs];

    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Disk => "disk",
            DeviceKind::Ufs => "ufs",
        }
    }

    /// "disk" or "ufs".
    pub fn parse(name: &str) -> Result<DeviceKind> {
        match name.trim() {
            "disk" => Ok(DeviceKind::Disk),
            "ufs" => Ok(DeviceKind::Ufs),
            other => Err(ThawError::invalid(format!("unknown device {other:?}: expected \"disk\" or \"ufs\""))),
        }
    }
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A device's bandwidth (bytes/s with one stream) and concurrency penalty.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceModel {
    pub bandwidth: u64,
    pub penalty: f64,
}

impl DeviceModel {
    /// The device time `bytes` take while `streams` streams are open.
    pub fn cost(&self, bytes: u64, streams: u32) -> Duration {
        let factor = 1.0 + self.penalty.max(0.0) * f64::from(streams.max(1) - 1);
        let secs = bytes as f64 * factor / self.bandwidth.max(1) as f64;
        // Only a model made in code, not by `DeviceModels::parse`, can overflow.
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::from_secs(86_400))
    }
}

/// A worker's device models, by kind; `None`: that device is not modelled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceModels {
    pub disk: Option<DeviceModel>,
    pub ufs: Option<DeviceModel>,
}

impl DeviceModels {
    /// Parses a spec such as `disk=40MiB/s,ufs=20MiB/s,penalty=0.3`: either device
    /// may be left out, sizes take units, the `/s` is required, and the penalty
    /// (default 0.3) applies to both devices.
    pub fn parse(spec: &str) -> Result<DeviceModels> {
        let bad = |why: String| ThawError::invalid(format!("device model {spec:?}: {why}"));
        let (mut disk, mut ufs, mut penalty) = (None, None, None);
        for part in spec.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(bad("empty part (expected e.g. disk=40MiB/s,ufs=20MiB/s,penalty=0.3)".into()));
            }
            let Some((key, value)) = part.split_once('=') else {
                return Err(bad(format!("{part:?} is not key=value (keys: disk, ufs, penalty)")));
            };
            let (key, value) = (key.trim(), value.trim());
            let slot = match key {
                "disk" => &mut disk,
                "ufs" => &mut ufs,
                "penalty" => {
                    let p: f64 = value.parse().map_err(|_| bad(format!("penalty {value:?} is not a number")))?;
                    if !(0.0..=MAX_PENALTY).contains(&p) {
                        return Err(bad(format!("penalty {value:?} must be a number from 0 to {MAX_PENALTY}")));
                    }
                    if penalty.replace(p).is_some() {
                        return Err(bad("penalty is given twice".into()));
                    }
                    continue;
                }
                other => return Err(bad(format!("unknown key {other:?} (keys: disk, ufs, penalty)"))),
            };
            let Some(size) = value.strip_suffix("/s") else {
                return Err(bad(format!("{key} bandwidth {value:?} needs a /s suffix, e.g. {key}=40MiB/s")));
            };
            let bandwidth = parse_size(size).map_err(|e| bad(format!("{key} bandwidth: {}", e.message)))?;
            if bandwidth == 0 {
                return Err(bad(format!("{key} bandwidth must be more than 0")));
            }
            if slot.replace(bandwidth).is_some() {
                return Err(bad(format!("{key} is given twice")));
            }
        }
        if disk.is_none() && ufs.is_none() {
            return Err(bad("names no device (give disk=RATE/s and/or ufs=RATE/s)".into()));
        }
        let penalty = penalty.unwrap_or(DEFAULT_PENALTY);
        let model = |bandwidth| DeviceModel { bandwidth, penalty };
        Ok(DeviceModels { disk: disk.map(model), ufs: ufs.map(model) })
    }

    pub fn get(&self, kind: DeviceKind) -> Option<DeviceModel> {
        match kind {
            DeviceKind::Disk => self.disk,
            DeviceKind::Ufs => self.ufs,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.disk.is_none() && self.ufs.is_none()
    }
}

impl std::str::FromStr for DeviceModels {
    type Err = ThawError;

    fn from_str(s: &str) -> Result<Self> {
        DeviceModels::parse(s)
    }
}

#[derive(Debug, Default)]
struct State {
    /// End of the last slot handed out: when the device is next free.
    clock: Option<Instant>,
    /// Real streams open.
    active: u32,
    /// Background (idle-class) streams open: migrations.
    background: u32,
    /// End of the last background slot.
    background_until: Option<Instant>,
    /// Synthetic streams running.
    interference: u32,
    bytes_read: u64,
}

/// One emulated device of a worker, shared by every read of it.
#[derive(Debug)]
pub struct Device {
    kind: DeviceKind,
    model: DeviceModel,
    state: Mutex<State>,
    /// Woken when the last foreground stream closes: background reads wait on
    /// it instead of polling.
    idle: tokio::sync::Notify,
    /// The synthetic readers' tasks.
    jammers: Mutex<Vec<JoinHandle<()>>>,
}

impl Device {
    pub fn new(kind: DeviceKind, model: DeviceModel) -> Arc<Device> {
        Arc::new(Device {
            kind,
            model,
            state: Mutex::default(),
            idle: tokio::sync::Notify::new(),
            jammers: Mutex::default(),
        })
    }

    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    pub fn model(&self) -> DeviceModel {
        self.model
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A read of the device: one concurrent stream until dropped.
    pub fn open_stream(self: &Arc<Self>) -> DeviceStream {
        self.lock().active += 1;
        DeviceStream { device: self.clone(), last_end: None, background: false, write: false }
    }

    /// A background read (a migration), as in the idle I/O class of Linux's
    /// schedulers: it gets device time only while no foreground read of this
    /// worker is open, so migration uses residual bandwidth and never slows
    /// the reads of running jobs (the do-not-harm rule, applied to the disk).
    /// Synthetic interference is not waited for (another tenant's `dd`s share
    /// the disk with migrations, as in DYRS, section V-C).
    pub fn open_background_stream(self: &Arc<Self>) -> DeviceStream {
        self.lock().background += 1;
        DeviceStream { device: self.clone(), last_end: None, background: true, write: false }
    }

    /// Hands out the next slot of device time for `bytes` and returns its end;
    /// `None` for a background slot while foreground reads are open.
    /// `last_end`: the end of the caller's previous slot; if the device did
    /// nothing else since, it read ahead for the caller (see [`READ_AHEAD`]).
    fn reserve(&self, bytes: u64, real: bool, last_end: Option<Instant>, background: bool) -> Option<Instant> {
        let now = Instant::now();
        let mut st = self.lock();
        if background && st.active > 0 {
            return None;
        }
        let streams = if background {
            st.background + st.interference
        } else {
            // A background slot in flight still holds the head.
            let bg = u32::from(st.background_until.is_some_and(|t| t > now));
            st.active + st.interference + bg
        };
        let ahead = self.model.cost(READ_AHEAD, 1);
        let start = match st.clock {
            Some(c) if c + SLACK >= now => c,
            Some(c) if last_end == Some(c) && c + ahead >= now => c,
            _ => now,
        };
        let end = start + self.model.cost(bytes, streams);
        st.clock = Some(end);
        if background {
            st.background_until = Some(end);
        }
        if real {
            st.bytes_read += bytes;
        }
        Some(end)
    }

    /// Runs `streams` synthetic readers that keep the device busy (0: none). They
    /// count as concurrent streams at once; a stopped one may still hold the
    /// device for the slice it was reading. Call within a tokio runtime.
    pub fn set_interference(self: &Arc<Self>, streams: u32) {
        let mut jammers = self.jammers.lock().unwrap_or_else(|e| e.into_inner());
        while jammers.len() > streams as usize {
            jammers.pop().expect("non-empty").abort();
        }
        while jammers.len() < streams as usize {
            jammers.push(tokio::spawn(jam(Arc::downgrade(self))));
        }
        let before = std::mem::replace(&mut self.lock().interference, streams);
        if before != streams {
            tracing::info!(device = %self.kind, streams, "device interference set");
        }
    }

    pub fn state(&self) -> DeviceState {
        let st = self.lock();
        DeviceState {
            device: self.kind.name().to_string(),
            bandwidth: self.model.bandwidth,
            penalty: self.model.penalty,
            active_streams: st.active + st.background,
            interference_streams: st.interference,
            bytes_read: st.bytes_read,
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        for j in self.jammers.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            j.abort();
        }
    }
}

/// A synthetic reader (a `dd` of the device): takes slice after slice of device
/// time until aborted or the device is gone.
async fn jam(device: Weak<Device>) {
    loop {
        let Some(d) = device.upgrade() else { return };
        let end = d.reserve(SLICE, false, None, false).expect("foreground slots are always handed out");
        drop(d);
        tokio::time::sleep_until(end).await;
    }
}

/// One stream reading a device; counts in the device's concurrency until dropped.
#[derive(Debug)]
pub struct DeviceStream {
    device: Arc<Device>,
    /// The end of this stream's last slot.
    last_end: Option<Instant>,
    background: bool,
    /// Carries writes: they take device time as reads do (a disk's head and
    /// an object store's bandwidth are shared), but are not bytes read.
    write: bool,
}

impl DeviceStream {
    /// This stream carries writes (DISK-tier blocks, under-store files,
    /// checkpoints) rather than reads.
    pub fn writing(mut self) -> Self {
        self.write = true;
        self
    }

    /// Waits for the device time that reading `bytes` costs now.
    pub async fn consume(&mut self, bytes: u64) {
        let slice = if self.background { BACKGROUND_SLICE } else { SLICE };
        let mut left = bytes;
        while left > 0 {
            let k = left.min(slice);
            // Registered before the look at the device, so a foreground stream
            // closing in between still wakes this one.
            let idle = self.device.idle.notified();
            let Some(end) = self.device.reserve(k, !self.write, self.last_end, self.background) else {
                idle.await;
                continue;
            };
            self.last_end = Some(end);
            tokio::time::sleep_until(end).await;
            left -= k;
        }
    }
}

impl Drop for DeviceStream {
    fn drop(&mut self) {
        let mut st = self.device.lock();
        if self.background {
            st.background = st.background.saturating_sub(1);
        } else {
            st.active = st.active.saturating_sub(1);
            if st.active == 0 {
                self.device.idle.notify_waiters();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn device(bandwidth: u64, penalty: f64) -> Arc<Device> {
        Device::new(DeviceKind::Disk, DeviceModel { bandwidth, penalty })
    }

    fn close(got: Duration, want: Duration) -> bool {
        got.abs_diff(want) <= Duration::from_millis(3)
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_reader_busy_between_chunks_still_gets_the_bandwidth_but_no_burst_after_idling() {
        // 100 MiB/s: a MiB costs 10 ms of device time. The reader spends 3 ms on
        // each MiB it gets: the device reads ahead meanwhile.
        let d = device(100 * MIB, 0.3);
        let mut s = d.open_stream();
        let t0 = Instant::now();
        for _ in 0..20 {
            s.consume(MIB).await;
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        assert!(close(t0.elapsed(), Duration::from_millis(203)), "{:?}", t0.elapsed());
        // After a long pause there is no credit: 10 MiB take their 100 ms.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t1 = Instant::now();
        s.consume(10 * MIB).await;
        assert!(close(t1.elapsed(), Duration::from_millis(100)), "{:?}", t1.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn one_stream_reads_at_the_bandwidth() {
        let d = device(10 * MIB, 0.5);
        let mut s = d.open_stream();
        assert_eq!(d.state().active_streams, 1);
        let t0 = Instant::now();
        s.consume(25 * MIB + 12345).await;
        let want = Duration::from_secs_f64((25 * MIB + 12345) as f64 / (10 * MIB) as f64);
        assert!(close(t0.elapsed(), want), "{:?} vs {want:?}", t0.elapsed());
        drop(s);
        let st = d.state();
        assert_eq!((st.active_streams, st.bytes_read), (0, 25 * MIB + 12345));
        // After a pause the device is idle: the next read starts now, not earlier.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let t1 = Instant::now();
        d.open_stream().consume(10 * MIB).await;
        assert!(close(t1.elapsed(), Duration::from_secs(1)), "{:?}", t1.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_background_read_yields_to_foreground_reads_and_uses_the_rest() {
        // 10 MiB/s, penalty 0.5. A migration (background) and a job's read
        // (foreground) of 10 MiB each, started together: the job's read takes
        // what it takes alone (plus at most one background slice already at the
        // disk), the migration runs in the time left over.
        let d = device(10 * MIB, 0.5);
        let t0 = Instant::now();
        let mut bg = d.open_background_stream();
        let migration = tokio::spawn(async move {
            bg.consume(10 * MIB).await;
            t0.elapsed()
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        let mut fg = d.open_stream();
        assert_eq!(d.state().active_streams, 2);
        fg.consume(10 * MIB).await;
        let job = t0.elapsed();
        drop(fg);
        // One background slice was at the disk: its time, and the penalty of the
        // head being shared for the job's first slice.
        let slice = Duration::from_secs_f64(BACKGROUND_SLICE as f64 / (10 * MIB) as f64);
        assert!(job <= Duration::from_secs(1) + 2 * slice + Duration::from_millis(40), "job read slowed: {job:?}");
        let migration = migration.await.unwrap();
        let done_by = Duration::from_secs(2) + 2 * slice + Duration::from_millis(40);
        assert!(migration >= Duration::from_secs(2) && migration <= done_by, "migration took {migration:?}");
        assert_eq!(d.state().bytes_read, 20 * MIB);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_streams_pay_the_penalty_and_share_fairly() {
        let (bw, p, x) = (10 * MIB, 0.5, 10 * MIB);
        let d = device(bw, p);
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..2 {
            let mut s = d.open_stream();
            tasks.push(tokio::spawn(async move {
                s.consume(x).await;
                t0.elapsed()
            }));
        }
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.unwrap());
        }
        done.sort();
        // Total: 2X bytes at bandwidth / (1 + p).
        let total = Duration::from_secs_f64((2 * x) as f64 * (1.0 + p) / bw as f64);
        assert!(close(done[1], total), "{done:?} vs {total:?}");
        // Fair: the first finishes at most one slice before the other.
        let slice = d.model().cost(SLICE, 2);
        assert!(done[0] + slice + Duration::from_millis(3) >= done[1], "{done:?}");
        assert!(done[0] > total / 2 + total / 4, "{done:?}: one stream ran ahead");
        assert_eq!(d.state().bytes_read, 2 * x);
    }

    #[tokio::test(start_paused = true)]
    async fn interference_slows_a_reader_and_stopping_it_restores_the_rate() {
        let (bw, p) = (10 * MIB, 0.3);
        let d = device(bw, p);
        let alone = Duration::from_secs(1); // 10 MiB at 10 MiB/s
        d.set_interference(1);
        assert_eq!(d.state().interference_streams, 1);
        let t0 = Instant::now();
        d.open_stream().consume(10 * MIB).await;
        let slowed = t0.elapsed();
        // Two streams: the reader gets half of bandwidth / (1 + p), less one
        // synthetic slice it need not wait behind at the end.
        let want = Duration::from_secs_f64(2.0 * (1.0 + p)) - d.model().cost(SLICE, 2);
        assert!(close(slowed, want), "{slowed:?} vs {want:?}");
        assert!(slowed > alone * 2, "interference must more than halve the rate with a penalty: {slowed:?}");
        // The synthetic reader keeps counting while nobody else reads.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let t1 = Instant::now();
        d.open_stream().consume(MIB).await;
        assert!(t1.elapsed() >= d.model().cost(MIB, 2), "{:?}", t1.elapsed());

        d.set_interference(0);
        assert_eq!(d.state().interference_streams, 0);
        let t2 = Instant::now();
        d.open_stream().consume(10 * MIB).await;
        // At most the slice the stopped reader had begun, then the full rate.
        let restored = t2.elapsed();
        assert!(restored >= alone && restored <= alone + d.model().cost(SLICE, 2) + Duration::from_millis(3));
        // Only real reads count as bytes read.
        assert_eq!(d.state().bytes_read, 21 * MIB);
    }

    #[tokio::test(start_paused = true)]
    async fn interference_tasks_end_with_the_device() {
        let d = device(MIB, 0.0);
        d.set_interference(3);
        let weak = Arc::downgrade(&d);
        tokio::time::sleep(Duration::from_secs(2)).await;
        drop(d);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(weak.upgrade().is_none(), "a synthetic reader kept the device alive");
    }

    #[test]
    fn specs_parse_with_clear_errors() {
        let m = DeviceModels::parse("disk=40MiB/s,ufs=20MiB/s,penalty=0.5").unwrap();
        assert_eq!(m.disk, Some(DeviceModel { bandwidth: 40 * MIB, penalty: 0.5 }));
        assert_eq!(m.ufs, Some(DeviceModel { bandwidth: 20 * MIB, penalty: 0.5 }));
        let m: DeviceModels = " ufs = 8MiB/s ".parse().unwrap();
        assert_eq!((m.disk, m.ufs), (None, Some(DeviceModel { bandwidth: 8 * MIB, penalty: DEFAULT_PENALTY })));
        assert_eq!(
            DeviceModels::parse("disk=1000000/s,penalty=0").unwrap().get(DeviceKind::Disk).unwrap().penalty,
            0.0
        );
        assert!(DeviceModels::default().is_empty());
        for (spec, says) in [
            ("", "empty part"),
            ("disk=40MiB/s,", "empty part"),
            ("disk", "not key=value"),
            ("tape=1MiB/s", "unknown key \"tape\""),
            ("disk=40MiB", "needs a /s suffix"),
            ("disk=0/s", "disk bandwidth must be more than 0"),
            ("ufs=fast/s", "ufs bandwidth: invalid size"),
            ("disk=1MiB/s,penalty=-0.1", "must be a number from 0 to 100"),
            ("disk=1MiB/s,penalty=lots", "penalty \"lots\" is not a number"),
            ("disk=1MiB/s,penalty=NaN", "must be a number from 0 to 100"),
            ("disk=1MiB/s,penalty=1e300", "must be a number from 0 to 100"),
            ("penalty=0.3", "names no device"),
            ("disk=1MiB/s,disk=2MiB/s", "disk is given twice"),
        ] {
            let e = DeviceModels::parse(spec).expect_err(spec);
            assert_eq!(e.kind, thaw_common::ErrorKind::InvalidArgument, "{spec}");
            assert!(e.message.contains(says) && e.message.contains("device model"), "{spec:?}: {e}");
        }
        assert_eq!(DeviceKind::parse("ufs").unwrap(), DeviceKind::Ufs);
        assert!(DeviceKind::parse("tape").unwrap_err().message.contains("\"disk\" or \"ufs\""));
    }
}

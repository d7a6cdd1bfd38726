//! Which workers to probe for death before their heartbeat timeout, and what
//! a probe's answer means. Pure: the master's liveness loop
//! (`master/workers.rs`, `Master::probe_silent_workers`) feeds it the
//! workers' silence and connects to their data ports.
//!
//! The heartbeat timeout (`--worker-timeout-ms`) must be several heartbeat
//! intervals long, or a worker that is merely slow (a long GC-like stall, a
//! starved CPU, a SIGSTOP) would be declared dead and its memory-only files
//! reported lost. A worker whose process is gone (kill -9, a crash) is
//! different, and can be told apart long before: nothing listens on its data
//! port any more, so a connection there is refused at once by its host's
//! kernel. A slow, busy or stopped worker's listening socket is still there
//! (the kernel completes the handshake from its backlog whatever the process
//! does), and a host that is down or cut off answers nothing, so neither is
//! ever "refused". Hence:
//!
//! - a live worker silent for longer than [`suspect_after`] (one and a half
//!   heartbeat intervals: an idle worker's held ask comes back at most an
//!   interval after its last full heartbeat) is a suspect, probed once per
//!   such silence (again only after another [`suspect_after`]);
//! - a probe whose connection is refused, with no heartbeat from the worker
//!   since it started, declares the worker dead now ([`verdict`]); any other
//!   answer (accepted, no answer within the probe's wait, another error)
//!   leaves it to the heartbeat timeout.
//!
//! Tachyon (section 2.6) leaves failure detection to the cluster's heartbeats;
//! this probe is Thaw's addition: Tachyon's Fig. 2 point is that a failure
//! costs little with lineage, and the whole heartbeat timeout was the largest
//! fixed part of that cost in Thaw's log pipeline (BENCHMARKS.md). An earlier
//! attempt probed only when a worker's held ask dropped; a worker busy with a
//! checkpoint or a migration holds no ask, so its death went unseen until
//! the timeout. Silence does not depend on what the worker was doing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a live worker may be silent before it is probed.
pub fn suspect_after(heartbeat_interval: Duration) -> Duration {
    heartbeat_interval + heartbeat_interval / 2
}

/// What a connection to a worker's data port came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Refused: nothing listens there (the process is gone).
    Refused,
    /// Accepted: a process holds the port (perhaps slow, busy, stopped).
    Accepted,
    /// No answer within the wait (a host down, a partition, a full backlog),
    /// or another error: nothing is known.
    Unknown,
}

impl Probe {
    /// The outcome of a connection attempt.
    pub fn of(outcome: Option<std::io::Result<()>>) -> Probe {
        match outcome {
            Some(Ok(())) => Probe::Accepted,
            Some(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Probe::Refused,
            _ => Probe::Unknown,
        }
    }
}

/// Whether a probe's outcome declares its worker dead: refused, and the
/// worker sent no heartbeat since the probe started.
pub fn verdict(probe: Probe, heard_since_probe: bool) -> bool {
    probe == Probe::Refused && !heard_since_probe
}

/// The suspects probed, by worker: when their last probe started.
#[derive(Debug, Default)]
pub struct Suspicion {
    probed: HashMap<u64, Instant>,
}

impl Suspicion {
    /// Of the live workers given as (id, last heartbeat), those to probe now:
    /// silent for longer than `after`, and not probed within the last `after`.
    /// Notes them as probed at `now`; forgets workers not given.
    pub fn due(&mut self, live: &[(u64, Instant)], now: Instant, after: Duration) -> Vec<u64> {
        self.probed.retain(|id, _| live.iter().any(|(w, _)| w == id));
        let mut out = Vec::new();
        for &(id, heard) in live {
            if now.saturating_duration_since(heard) <= after {
                continue;
            }
            if self.probed.get(&id).is_some_and(|at| now.saturating_duration_since(*at) <= after) {
                continue;
            }
            self.probed.insert(id, now);
            out.push(id);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HB: Duration = Duration::from_millis(200);

    #[test]
    fn a_worker_is_suspected_after_one_and_a_half_intervals_of_silence() {
        assert_eq!(suspect_after(HB), Duration::from_millis(300));
        let mut s = Suspicion::default();
        let t0 = Instant::now();
        let live = [(1, t0), (2, t0 + Duration::from_millis(250))];
        assert!(s.due(&live, t0 + Duration::from_millis(299), suspect_after(HB)).is_empty());
        assert_eq!(s.due(&live, t0 + Duration::from_millis(301), suspect_after(HB)), vec![1]);
    }

    #[test]
    fn a_suspect_is_probed_once_per_silence_then_again_after_another_one() {
        let mut s = Suspicion::default();
        let t0 = Instant::now();
        let live = [(1, t0)];
        let after = suspect_after(HB);
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(s.due(&live, at(400), after), vec![1]);
        assert!(s.due(&live, at(500), after).is_empty(), "probed 100 ms ago");
        assert!(s.due(&live, at(700), after).is_empty(), "probed 300 ms ago");
        assert_eq!(s.due(&live, at(701), after), vec![1]);
        // Heard from again: not a suspect, whatever its last probe.
        assert!(s.due(&[(1, at(900))], at(1000), after).is_empty());
    }

    #[test]
    fn workers_gone_from_the_live_set_are_forgotten() {
        let mut s = Suspicion::default();
        let t0 = Instant::now();
        let after = suspect_after(HB);
        assert_eq!(s.due(&[(1, t0), (2, t0)], t0 + after * 2, after), vec![1, 2]);
        s.due(&[(2, t0)], t0 + after * 2, after);
        assert_eq!(s.probed.len(), 1);
    }

    /// Only a refused connection, with nothing heard since, is a death:
    /// accepted (a stopped or busy worker), no answer (a host down) and a
    /// heartbeat since all leave the worker to its timeout.
    #[test]
    fn only_a_refused_port_with_no_heartbeat_since_declares_a_worker_dead() {
        assert!(verdict(Probe::Refused, false));
        assert!(!verdict(Probe::Refused, true));
        assert!(!verdict(Probe::Accepted, false));
        assert!(!verdict(Probe::Unknown, false));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(Probe::of(Some(Err(refused))), Probe::Refused);
        assert_eq!(Probe::of(Some(Ok(()))), Probe::Accepted);
        assert_eq!(Probe::of(None), Probe::Unknown);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(Probe::of(Some(Err(reset))), Probe::Unknown);
    }
}

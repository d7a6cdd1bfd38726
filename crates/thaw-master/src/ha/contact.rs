//! When this master last heard from each other master of its group, so that
//! status can tell a dead master from a follower that lags. openraft 0.9's
//! metrics say how far each follower's log is, not whether it answers: a
//! killed master stays "6 entries behind" forever. Here every Raft message
//! answered by a peer (the leader's heartbeats, every 100 ms) and every one
//! received from it (a leader's, a candidate's) counts as hearing from it, and
//! a message it did not answer marks it unreachable until it answers again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A master not heard from for this long is unreachable even if no message to
/// it has failed yet: twenty of the leader's heartbeat intervals (a busy
/// machine delays some), twice a follower's election lease.
pub const STALE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, Default)]
struct Contact {
    heard: Option<Instant>,
    failed: Option<Instant>,
}

/// What status shows of one other master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    pub reachable: bool,
    /// Since it was last heard from; `None`: never (since this master started).
    pub last_heard: Option<Duration>,
}

/// Per other master: when it last answered or wrote, when a message to it last failed.
#[derive(Debug, Default)]
pub struct Contacts {
    by_id: Mutex<HashMap<u64, Contact>>,
}

impl Contacts {
    fn with(&self, id: u64, f: impl FnOnce(&mut Contact)) {
        f(self.by_id.lock().unwrap_or_else(|e| e.into_inner()).entry(id).or_default());
    }

    /// Master `id` answered a message, or sent one.
    pub fn heard(&self, id: u64, at: Instant) {
        self.with(id, |c| c.heard = Some(c.heard.map_or(at, |h| h.max(at))));
    }

    /// A message to master `id` got no answer (down, refused, timed out).
    pub fn failed(&self, id: u64, at: Instant) {
        self.with(id, |c| c.failed = Some(c.failed.map_or(at, |f| f.max(at))));
    }

    /// Master `id` as of `now`: reachable if heard from within [`STALE`] and
    /// not failed since.
    pub fn liveness(&self, id: u64, now: Instant) -> Liveness {
        let c = self.by_id.lock().unwrap_or_else(|e| e.into_inner()).get(&id).copied().unwrap_or_default();
        let last_heard = c.heard.map(|h| now.saturating_duration_since(h));
        let reachable = match (c.heard, last_heard) {
            (Some(h), Some(ago)) => ago < STALE && c.failed.is_none_or(|f| f < h),
            _ => false,
        };
        Liveness { reachable, last_heard }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_master_is_reachable_while_it_answers_and_unreachable_once_a_message_fails_or_it_goes_quiet() {
        let c = Contacts::default();
        let t0 = Instant::now();
        assert_eq!(c.liveness(2, t0), Liveness { reachable: false, last_heard: None });
        c.heard(2, t0);
        let ms = Duration::from_millis;
        assert_eq!(c.liveness(2, t0 + ms(100)), Liveness { reachable: true, last_heard: Some(ms(100)) });
        // Killed: the next heartbeat fails.
        c.failed(2, t0 + ms(200));
        assert_eq!(c.liveness(2, t0 + ms(12_200)), Liveness { reachable: false, last_heard: Some(ms(12_200)) });
        // Back: it answers again.
        c.heard(2, t0 + ms(12_300));
        assert!(c.liveness(2, t0 + ms(12_400)).reachable);
        // Quiet (no message sent to it, none from it) past the limit.
        assert!(!c.liveness(2, t0 + ms(12_300) + STALE).reachable);
        // An older report does not move the times back.
        c.heard(2, t0);
        assert_eq!(c.liveness(2, t0 + ms(12_400)).last_heard, Some(ms(100)));
    }
}

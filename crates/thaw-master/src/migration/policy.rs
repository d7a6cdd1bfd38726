//! The master's migration policies and migration orders, by name (the
//! `--migration-policy` and `--priority` flags).

use thaw_common::{Result, ThawError};

/// How pending migrations are bound to workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    None,
    Ignem,
    Dyrs,
    /// DYRS, Fig. 10's naive load balancing (see `naive.rs`).
    Naive,
}

impl Policy {
    pub fn parse(s: &str) -> Result<Policy> {
        match s {
            "none" => Ok(Policy::None),
            "ignem" => Ok(Policy::Ignem),
            "dyrs" => Ok(Policy::Dyrs),
            "naive" => Ok(Policy::Naive),
            _ => Err(ThawError::invalid(format!("unknown migration policy {s:?} (none, ignem, dyrs or naive)"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Ignem => "ignem",
            Policy::Dyrs => "dyrs",
            Policy::Naive => "naive",
        }
    }
    /// The default order: smallest job first for Ignem (its section III-A1)
    /// and for DYRS, FIFO for the naive comparison (DYRS, Fig. 10, ran in
    /// DYRS's FIFO order). DYRS itself ordered FIFO and left "alternative
    /// policies, and cooperation with the job scheduler" to future work (its
    /// section IV-A); Thaw improves on it here: with FIFO a small job's block
    /// waits behind large jobs' at the master and is dropped as "read first",
    /// and on the SWIM replays with a slow node DYRS with smallest-job-first
    /// was ahead of Ignem beyond the spread of repeats on both traces, where
    /// FIFO DYRS was not (BENCHMARKS.md, "SWIM over two traces, two byte
    /// scales and two cluster sizes"). `--priority fifo` is the paper's DYRS.
    pub fn default_priority(self) -> Priority {
        match self {
            Policy::Naive => Priority::Fifo,
            _ => Priority::SmallestJobFirst,
        }
    }
    /// Migrations wait at the master, are targeted by [`super::Migrations::plan`]
    /// and bound at heartbeats (DYRS and its naive comparison); else bound at once
    /// (Ignem) or never (none).
    pub fn binds_late(self) -> bool {
        matches!(self, Policy::Dyrs | Policy::Naive)
    }
}

/// The order of migrations, at the master (pending) and at the workers (queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Fifo,
    /// Smaller total job input first, then earlier submission (Ignem, section III-A1).
    SmallestJobFirst,
}

impl Priority {
    pub fn parse(s: &str) -> Result<Priority> {
        match s {
            "fifo" => Ok(Priority::Fifo),
            "smallest-job-first" | "sjf" => Ok(Priority::SmallestJobFirst),
            _ => Err(ThawError::invalid(format!("unknown priority {s:?} (fifo or smallest-job-first)"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Priority::Fifo => "fifo",
            Priority::SmallestJobFirst => "smallest-job-first",
        }
    }
}

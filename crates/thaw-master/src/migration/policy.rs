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
    /// The order each paper used: DYRS FIFO (and its naive comparison with
    /// it), Ignem smallest job first.
    pub fn default_priority(self) -> Priority {
        match self {
            Policy::Dyrs | Policy::Naive => Priority::Fifo,
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

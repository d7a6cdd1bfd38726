//! The thaw binary's integration tests, one module per area, in one test
//! binary (37 binaries, each linking the client, the test kit and tokio, took
//! three minutes of the test build on two cores).

mod auth;
mod bad_input;
mod block_reports;
mod chaos;
mod checkpoints;
mod cli;
mod cluster_io;
mod common;
mod dashboard;
mod dead_workers;
mod deletes;
mod device_model;
mod failures;
mod full_disks;
mod full_tier;
mod full_worker;
mod ha;
mod hdfs;
mod hostile_data;
mod job_history;
mod journal_faults;
mod leases;
mod lineage;
mod local_state;
mod metrics;
mod migration;
mod mount;
mod narrow_recompute;
mod netlab;
mod page_cache;
mod recompute;
mod s3;
mod s3_dirs;
mod s3_gateway;
mod shutdown;
mod slow_clients;
mod spread_writes;
mod tls;
mod user_paths;

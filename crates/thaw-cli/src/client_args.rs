//! The flags of commands that talk to a running cluster as a client
//! (`--master`, `--job`). They are given to those commands only, so the help
//! of the servers (`thaw master`, `thaw worker`, `thaw local`) does not offer
//! flags they would ignore.

use clap::{Args, Subcommand};

/// Where a client command finds the cluster, and which job it works for.
#[derive(Args, Clone, Default)]
pub struct ClientArgs {
    /// Master address HOST:PORT (a group of masters: a,b,c).
    /// Default: THAW_MASTER, else 127.0.0.1:19998.
    #[arg(long, global = true, value_name = "HOST:PORT")]
    pub master: Option<String>,
    /// Job id carried by every read and write. Default: THAW_JOB_ID.
    #[arg(long, global = true, value_name = "ID")]
    pub job: Option<String>,
}

impl ClientArgs {
    /// These flags where given, else those given before the command (`thaw
    /// --master X fs ls`), else the environment.
    pub fn or(&self, outer: &ClientArgs) -> ClientArgs {
        ClientArgs {
            master: self.master.clone().or_else(|| outer.master.clone()),
            job: self.job.clone().or_else(|| outer.job.clone()),
        }
    }

    pub fn config(&self) -> thaw_client::ClientConfig {
        let mut cfg = thaw_client::ClientConfig::from_env(self.master.clone());
        if let Some(job) = &self.job {
            cfg.job_id = job.clone();
        }
        cfg
    }
}

/// A client command with arguments `T`, and the client flags.
#[derive(Args)]
pub struct WithClient<T: Args> {
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub args: T,
}

/// A group of client commands `T` (`thaw fs ...`), and the client flags.
#[derive(Args)]
pub struct ClientGroup<T: Subcommand> {
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(subcommand)]
    pub command: T,
}

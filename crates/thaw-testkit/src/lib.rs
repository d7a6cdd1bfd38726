//! A mini cluster of real processes on loopback for tests and benchmarks: one
//! `thaw master` and N `thaw worker`s, each with its own directories, and helpers
//! to kill -9 and restart any of them (TiKV's test_raftstore is the model).
//! Beside it: [`chaos`] (the randomized fault campaign run on such a cluster),
//! real under-stores for tests, [`s3`] (S3 servers) and [`hdfs`] (a
//! MiniDFSCluster), and [`netlab`] (emulated hosts with a network between
//! them, `thaw netlab up`, for processes started in its nodes).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use thaw_client::{Client, ClientConfig};
use thaw_common::proto::Position;

pub mod chaos;
pub mod hdfs;
pub mod netlab;
pub mod s3;

#[derive(Debug, Clone)]
pub struct WorkerSpec {
    pub host: String,
    pub rack: String,
    pub mem_capacity: u64,
    pub disk_capacity: u64,
    pub max_connections: usize,
    /// More `thaw worker` flags (migration buffer, device model, ...).
    pub extra_args: Vec<String>,
    /// `thaw worker --device-model` (an emulated device), if any.
    pub device_model: Option<String>,
}

impl WorkerSpec {
    pub fn new(host: &str, rack: &str) -> Self {
        WorkerSpec {
            host: host.into(),
            rack: rack.into(),
            mem_capacity: 256 << 20,
            disk_capacity: 1 << 30,
            max_connections: 1024,
            extra_args: Vec::new(),
            device_model: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub workers: Vec<WorkerSpec>,
    pub block_size: u64,
    pub heartbeat_ms: u64,
    pub worker_timeout_ms: u64,
    /// More `thaw master` flags (migration policy, priority, lease, ...).
    pub master_args: Vec<String>,
    /// The master's `--ufs` (e.g. an `s3://` URI); default a local directory.
    pub ufs_uri: Option<String>,
    /// Environment of every process (e.g. the S3 credentials).
    pub env: Vec<(String, String)>,
    /// Security on: a fresh secret given to the master and the workers
    /// (`--secret-file`); [`Cluster::client`] acts as the superuser.
    pub secure: bool,
    /// TLS on every port: a fresh CA and certificate for 127.0.0.1
    /// (`thaw auth certs`); [`Cluster::client`] trusts the CA.
    pub tls: bool,
    /// Masters: 1, or a group of highly available masters (`--id`,
    /// `--peers`); [`Cluster::master_addr`] then names them all.
    pub masters: usize,
}

impl ClusterOptions {
    /// `n` workers on hosts h0..h{n-1}, alternating between racks r0 and r1.
    pub fn workers(n: usize) -> Self {
        ClusterOptions {
            workers: (0..n).map(|i| WorkerSpec::new(&format!("h{i}"), &format!("r{}", i % 2))).collect(),
            block_size: 1 << 20,
            heartbeat_ms: 200,
            worker_timeout_ms: 1500,
            master_args: Vec::new(),
            ufs_uri: None,
            env: Vec::new(),
            secure: false,
            tls: false,
            masters: 1,
        }
    }
}

struct Proc {
    child: Option<Child>,
    /// Address the process printed (`... listening on ADDR`).
    addr: String,
    /// Its metrics address (`... metrics listening on ADDR`), if started with
    /// `--metrics-port`.
    metrics_addr: Option<String>,
    /// Its dashboard address (`... web listening on ADDR`), if started with
    /// `--web-port`.
    web_addr: Option<String>,
}

impl Proc {
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill(); // SIGKILL: a real crash, no clean-up runs
            let _ = c.wait();
        }
    }
}

pub struct Cluster {
    bin: PathBuf,
    root: tempfile::TempDir,
    /// MEM tiers live on tmpfs when there is one.
    mem_root: tempfile::TempDir,
    pub ufs: PathBuf,
    pub options: ClusterOptions,
    /// The cluster secret (`ClusterOptions::secure`).
    pub secret: Option<std::sync::Arc<thaw_common::auth::Secret>>,
    /// The CA and certificate (`ClusterOptions::tls`).
    pub certs: Option<thaw_common::tls::CertFiles>,
    /// One master, or the group's, in id order (None: killed).
    masters: Vec<Proc>,
    /// What clients and workers are given: the master's address, or the
    /// group's `a,b,c`.
    master_list: String,
    workers: Vec<Proc>,
}

/// Starts a process and waits for its "listening on ADDR" line.
fn spawn(bin: &Path, args: &[String], env: &[(String, String)], log: &Path) -> Result<Proc> {
    let log_file = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    let mut child = Command::new(bin)
        .args(args)
        .env("THAW_LOG", "info,thaw_worker=debug")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .with_context(|| format!("spawning {}", bin.display()))?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut stdout = BufReader::new(stdout);
    let mut listening = |what: &str| -> Result<String> {
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        match line.trim().rsplit(' ').next().filter(|_| line.contains(what)) {
            Some(addr) => Ok(addr.to_string()),
            None => bail!("{} {:?} did not start: {line:?}; see {}", bin.display(), args, log.display()),
        }
    };
    // The lines come in this order: the RPC port, metrics, the dashboard.
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let addrs = listening("listening on").and_then(|addr| {
        let metrics = if has("--metrics-port") { Some(listening("metrics listening on")?) } else { None };
        let web = if has("--web-port") { Some(listening("web listening on")?) } else { None };
        Ok((addr, metrics, web))
    });
    match addrs {
        Ok((addr, metrics_addr, web_addr)) => Ok(Proc { child: Some(child), addr, metrics_addr, web_addr }),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

impl Cluster {
    /// Starts a master and the workers, and waits until every worker is alive.
    pub async fn start(bin: impl Into<PathBuf>, options: ClusterOptions) -> Result<Cluster> {
        let bin = bin.into();
        let root = tempfile::Builder::new().prefix("thaw-test-").tempdir()?;
        let shm = Path::new("/dev/shm");
        let mem_root = if shm.is_dir() {
            tempfile::Builder::new().prefix("thaw-test-").tempdir_in(shm)?
        } else {
            tempfile::Builder::new().prefix("thaw-test-mem-").tempdir()?
        };
        let ufs = root.path().join("ufs");
        std::fs::create_dir_all(&ufs)?;
        let secret = if options.secure {
            use std::os::unix::fs::OpenOptionsExt;
            let path = root.path().join("secret");
            let text = thaw_common::auth::Secret::generate()?;
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
            std::io::Write::write_all(&mut f, text.as_bytes())?;
            Some(std::sync::Arc::new(thaw_common::auth::Secret::load(&path)?))
        } else {
            None
        };
        let certs = if options.tls {
            Some(thaw_common::tls::make_certs(&root.path().join("tls"), &["127.0.0.1".to_string()])?)
        } else {
            None
        };
        let mut cluster = Cluster {
            certs,
            secret,
            bin,
            ufs,
            mem_root,
            masters: Vec::new(),
            master_list: String::new(),
            workers: Vec::new(),
            options,
            root,
        };
        let n = cluster.options.masters.max(1);
        if n == 1 {
            let m = cluster.spawn_master(0, 0)?;
            cluster.master_list = m.addr.clone();
            cluster.masters.push(m);
        } else {
            // Each master must know every address before any starts.
            let ports = free_ports(n)?;
            cluster.master_list = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
            for (i, p) in ports.iter().enumerate() {
                let m = cluster.spawn_master(i, *p)?;
                cluster.masters.push(m);
            }
        }
        for i in 0..cluster.options.workers.len() {
            let w = cluster.spawn_worker(i, 0)?;
            cluster.workers.push(w);
        }
        cluster.wait_for_workers(cluster.workers.len(), Duration::from_secs(20)).await?;
        Ok(cluster)
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The master's address, or the group's (`a,b,c`): what clients use.
    pub fn master_addr(&self) -> &str {
        &self.master_list
    }

    /// Each master's own address, in id order.
    pub fn master_addrs(&self) -> Vec<String> {
        self.masters.iter().map(|m| m.addr.clone()).collect()
    }

    /// Which master of the group serves now (asked of each), if any.
    pub async fn leader(&self) -> Option<usize> {
        for (i, m) in self.masters.iter().enumerate() {
            if m.child.is_none() {
                continue;
            }
            if self.client_of(&m.addr, thaw_common::auth::SUPERUSER, &[], "", "").cluster_status().await.is_ok() {
                return Some(i);
            }
        }
        None
    }

    pub fn worker_addr(&self, i: usize) -> &str {
        &self.workers[i].addr
    }

    /// The master's metrics address (given `--metrics-port` in `master_args`).
    pub fn master_metrics_addr(&self) -> Option<&str> {
        self.masters[0].metrics_addr.as_deref()
    }

    /// The master's dashboard address (given `--web-port` in `master_args`).
    pub fn master_web_addr(&self) -> Option<&str> {
        self.masters[0].web_addr.as_deref()
    }

    /// Worker `i`'s metrics address (given `--metrics-port` in its `extra_args`).
    pub fn worker_metrics_addr(&self, i: usize) -> Option<&str> {
        self.workers[i].metrics_addr.as_deref()
    }

    pub fn mem_dir(&self, i: usize) -> PathBuf {
        self.mem_root.path().join(format!("w{i}"))
    }

    /// Starts master `i` (of a group: with its `--id` and `--peers`).
    fn spawn_master(&self, i: usize, port: u16) -> Result<Proc> {
        let o = &self.options;
        let group = o.masters > 1;
        let ufs = o.ufs_uri.clone().unwrap_or_else(|| self.ufs.display().to_string());
        let journal = if group { format!("journal-{i}") } else { "journal".to_string() };
        let mut args: Vec<String> = [
            "master",
            "--ufs",
            &ufs,
            "--journal-dir",
            &self.root.path().join(journal).display().to_string(),
            "--port",
            &port.to_string(),
            "--block-size",
            &o.block_size.to_string(),
            "--heartbeat-ms",
            &o.heartbeat_ms.to_string(),
            "--worker-timeout-ms",
            &o.worker_timeout_ms.to_string(),
        ]
        .map(String::from)
        .to_vec();
        args.extend(o.master_args.iter().cloned());
        args.extend(self.secret_args());
        args.extend(self.tls_args());
        let log = if group {
            args.extend(["--id".to_string(), (i + 1).to_string(), "--peers".to_string(), self.master_list.clone()]);
            format!("master-{i}.log")
        } else {
            "master.log".to_string()
        };
        spawn(&self.bin, &args, &o.env, &self.root.path().join(log))
    }

    fn spawn_worker(&self, i: usize, port: u16) -> Result<Proc> {
        let spec = &self.options.workers[i];
        let mut args: Vec<String> = [
            "worker",
            "--master",
            &self.master_list,
            "--host",
            &spec.host,
            "--rack",
            &spec.rack,
            "--mem-dir",
            &self.mem_dir(i).display().to_string(),
            "--mem-capacity",
            &spec.mem_capacity.to_string(),
            "--disk-dir",
            &self.root.path().join(format!("w{i}/disk")).display().to_string(),
            "--disk-capacity",
            &spec.disk_capacity.to_string(),
            "--port",
            &port.to_string(),
            "--max-connections",
            &spec.max_connections.to_string(),
        ]
        .map(String::from)
        .to_vec();
        args.extend(spec.extra_args.iter().cloned());
        args.extend(self.secret_args());
        args.extend(self.tls_args());
        if let Some(model) = &spec.device_model {
            args.extend(["--device-model".to_string(), model.clone()]);
        }
        spawn(&self.bin, &args, &self.options.env, &self.root.path().join(format!("worker-{i}.log")))
    }

    /// A client placed at (host, rack); short-circuit reads happen when the host
    /// matches a worker's. On a secured cluster it acts as the superuser.
    pub fn client(&self, host: &str, rack: &str) -> Client {
        self.user_client(thaw_common::auth::SUPERUSER, &[], host, rack)
    }

    /// A client acting as `user` in `groups` (tokens minted with the
    /// cluster's secret; on a cluster without one, the name it gives).
    pub fn user_client(&self, user: &str, groups: &[&str], host: &str, rack: &str) -> Client {
        self.client_of(&self.master_list, user, groups, host, rack)
    }

    fn client_of(&self, masters: &str, user: &str, groups: &[&str], host: &str, rack: &str) -> Client {
        let mut cfg = ClientConfig::from_env(Some(masters.to_string()));
        cfg.position = Position { host: host.into(), rack: rack.into(), worker_address: String::new() };
        cfg.job_id = String::new();
        cfg.retry_for = Duration::from_secs(15);
        if let Some(f) = &self.certs {
            cfg.tls = Some(std::sync::Arc::new(thaw_common::tls::ClientTls::load(&f.ca).expect("the cluster's CA")));
        }
        let credentials = self.secret.as_ref().map(|s| {
            let groups = groups.iter().map(|g| g.to_string()).collect();
            std::sync::Arc::new(
                thaw_common::auth::Credentials::from_secret(s.clone(), user, groups).expect("user name"),
            )
        });
        Client::with_credentials(cfg, credentials).expect("client config")
    }

    /// The secret file's path (`ClusterOptions::secure`).
    pub fn secret_file(&self) -> Option<PathBuf> {
        self.secret.as_ref().map(|_| self.root.path().join("secret"))
    }

    fn tls_args(&self) -> Vec<String> {
        match &self.certs {
            Some(f) => [("--tls-cert", &f.cert), ("--tls-key", &f.key), ("--tls-ca", &f.ca)]
                .into_iter()
                .flat_map(|(flag, p)| [flag.to_string(), p.display().to_string()])
                .collect(),
            None => Vec::new(),
        }
    }

    fn secret_args(&self) -> Vec<String> {
        match self.secret_file() {
            Some(p) => vec!["--secret-file".into(), p.display().to_string()],
            None => Vec::new(),
        }
    }

    /// A client on a host no worker is on.
    pub fn remote_client(&self) -> Client {
        self.client("elsewhere", "r9")
    }

    /// kill -9 of worker `i`.
    pub fn kill_worker(&mut self, i: usize) {
        self.workers[i].kill();
    }

    /// Starts worker `i` again on its old port and directories, and waits until the
    /// master has the new process's registration (made after the restart; until
    /// then the master keeps the old process's blocks, and a heartbeat of the old
    /// process can still land after the kill).
    pub async fn restart_worker(&mut self, i: usize) -> Result<()> {
        let port = port_of(&self.workers[i].addr)?;
        self.workers[i].kill();
        let restarted = Instant::now();
        self.workers[i] = self.spawn_worker(i, port)?;
        let addr = self.workers[i].addr.clone();
        let deadline = restarted + Duration::from_secs(20);
        // The master's view of the new process's MEM tier, as the process
        // itself reports it, from a registration newer than the restart: on a
        // loaded machine the old process's last heartbeat can reach the master
        // after the kill, seconds late, so neither a recent heartbeat nor a
        // tier use that matches (the old process's last report may predate
        // its last write) says the new process registered.
        let mem = |tiers: &[thaw_common::proto::TierUsage]| {
            tiers.iter().find(|t| t.tier == thaw_common::proto::Tier::Mem as i32).map(|t| (t.used, t.blocks))
        };
        loop {
            let status = self.remote_client().cluster_status().await?;
            let own = self.remote_client().worker_stats(&addr).await.ok().map(|s| mem(&s.tiers));
            let heard = status.workers.iter().any(|w| {
                w.data_address == addr
                    && w.alive
                    // 2 ms: ages are whole milliseconds; a new process takes
                    // far longer than that to start and register.
                    && Duration::from_millis(w.registered_ms_ago + 2) < restarted.elapsed()
                    && own.is_some_and(|own| own == mem(&w.tiers))
            });
            if heard {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("restarted worker {i} did not reach the master in 20 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process id of worker `i`, while it runs.
    pub fn worker_pid(&self, i: usize) -> Option<u32> {
        self.workers[i].child.as_ref().map(Child::id)
    }

    /// The process id of the master, while it runs.
    pub fn master_pid(&self) -> Option<u32> {
        self.masters[0].child.as_ref().map(Child::id)
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// kill -9 of the master (the first of a group).
    pub fn kill_master(&mut self) {
        self.masters[0].kill();
    }

    /// Starts master `i` again (its port, journal and place in the group),
    /// returning once it listens.
    pub fn respawn_master_n(&mut self, i: usize) -> Result<()> {
        let port = port_of(&self.masters[i].addr)?;
        self.masters[i].kill();
        self.masters[i] = self.spawn_master(i, port)?;
        Ok(())
    }

    /// kill -9 of master `i` of the group.
    pub fn kill_master_n(&mut self, i: usize) {
        self.masters[i].kill();
    }

    /// Master `i`'s process id, while it runs.
    pub fn master_pid_n(&self, i: usize) -> Option<u32> {
        self.masters[i].child.as_ref().map(Child::id)
    }

    /// Starts the master again on its old port and journal, and waits for the
    /// workers to re-register.
    pub async fn restart_master(&mut self) -> Result<()> {
        self.restart_master_n(0).await
    }

    /// Starts master `i` again (its port, journal and place in the group),
    /// and waits until a master serves with every live worker registered.
    pub async fn restart_master_n(&mut self, i: usize) -> Result<()> {
        self.respawn_master_n(i)?;
        let live = self.workers.iter().filter(|w| w.child.is_some()).count();
        self.wait_for_workers(live, Duration::from_secs(20)).await
    }

    pub async fn alive_workers(&self) -> Result<usize> {
        let status = self.remote_client().cluster_status().await?;
        Ok(status.workers.iter().filter(|w| w.alive).count())
    }

    /// Waits until at least `n` workers are alive at the master.
    pub async fn wait_for_workers(&self, n: usize, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.alive_workers().await {
                Ok(k) if k >= n => return Ok(()),
                _ if Instant::now() > deadline => {
                    bail!("{n} workers did not come up in {timeout:?}")
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Waits until the master counts worker `i` dead.
    pub async fn wait_worker_dead(&self, i: usize, timeout: Duration) -> Result<()> {
        let addr = self.workers[i].addr.clone();
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.remote_client().cluster_status().await?;
            if status.workers.iter().any(|w| w.data_address == addr && !w.alive) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("worker {i} was not declared dead in {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The processes' logs, for a failing test's message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let mut names: Vec<_> = std::fs::read_dir(self.root.path())
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "log")).collect())
            .unwrap_or_else(|_| Vec::new());
        names.sort();
        for p in names {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            out.push_str(&format!("==> {} <==\n", p.display()));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

/// `n` ports free now (bound, noted and released).
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let held: Vec<std::net::TcpListener> =
        (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0")).collect::<std::io::Result<_>>()?;
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

fn port_of(addr: &str) -> Result<u16> {
    addr.rsplit(':').next().and_then(|p| p.parse().ok()).with_context(|| format!("no port in {addr}"))
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.masters {
            m.kill();
        }
        for w in &mut self.workers {
            w.kill();
        }
    }
}

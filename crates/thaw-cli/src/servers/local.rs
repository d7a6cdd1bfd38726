//! `thaw local`: a whole cluster in this process (a master, or a group of
//! them, and its workers), with directories of its own that it removes when it
//! stops ([`crate::local_dirs`]); also what `thaw demo` runs on.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use thaw_common::size::format_size;
use thaw_worker::{TierConfig, WorkerConfig};
use tokio_util::sync::CancellationToken;

use super::master::master_config;
use super::{DEFAULT_RACK, LocalArgs};
use super::{listen, listen_metrics, listen_optional, say, stop_on_signal};

/// A URI as it is; a directory (`fs://`, `file://` or a path) made if missing and
/// named by its canonical path.
fn local_ufs(ufs: &str) -> anyhow::Result<String> {
    if let Some((scheme, _)) = ufs.split_once("://")
        && !matches!(scheme, "fs" | "file")
    {
        return Ok(ufs.to_string());
    }
    let dir = ufs.strip_prefix("fs://").or_else(|| ufs.strip_prefix("file://")).unwrap_or(ufs);
    std::fs::create_dir_all(dir).with_context(|| format!("under-store directory {dir}"))?;
    Ok(std::fs::canonicalize(dir)?.display().to_string())
}

/// A master and its workers running in this process.
pub struct LocalCluster {
    /// The master's address, or the group's (`a,b,c`): what clients use.
    pub master_addr: String,
    /// Where each part serves its metrics ("master", "worker 1", ...), if asked.
    pub metrics_addrs: Vec<(String, SocketAddr)>,
    /// Where the master serves the web dashboard, if asked.
    pub web_addr: Option<SocketAddr>,
    /// Where the S3 gateway serves, if asked.
    pub s3_addr: Option<SocketAddr>,
    pub mem_root: PathBuf,
    /// The under-store's URI (a local one as its canonical directory).
    pub ufs: String,
    /// Directories of dead clusters removed at start.
    pub swept: Vec<PathBuf>,
    shutdown: CancellationToken,
    tasks: tokio::task::JoinSet<thaw_common::Result<()>>,
    /// Its MEM root and, unless kept (--state-dir), its state: removed when it
    /// stops (dropped), by the next cluster if it is killed.
    _owned: Vec<crate::local_dirs::Owned>,
}

impl LocalCluster {
    pub async fn start(args: &LocalArgs, shutdown: CancellationToken) -> anyhow::Result<Self> {
        if args.workers == 0 {
            anyhow::bail!("--workers must be at least 1");
        }
        if let Some((i, _)) = args.worker_device_model.iter().find(|(i, _)| *i == 0 || *i > args.workers) {
            anyhow::bail!(
                "--worker-device-model {i}: there are {} worker(s), numbered 1 to {} as `thaw status` shows them",
                args.workers,
                args.workers
            );
        }
        // What clusters killed before they could clean up left behind goes first.
        let temp = std::env::temp_dir();
        let mut swept = crate::local_dirs::sweep(&args.mem_root);
        swept.extend(crate::local_dirs::sweep(&temp));
        let mut owned = vec![crate::local_dirs::claim(&args.mem_root, args.port)?];
        let mem_root = owned[0].dir.clone();
        // A state directory named is kept across runs; else each run starts empty.
        let state = match &args.state_dir {
            Some(dir) => dir.clone(),
            None => {
                owned.push(crate::local_dirs::claim(&temp, args.port)?);
                owned[1].dir.clone()
            }
        };
        std::fs::create_dir_all(&state).with_context(|| format!("state directory {}", state.display()))?;
        let state = std::fs::canonicalize(&state)?;
        let ufs = local_ufs(&args.ufs)?;
        if args.masters == 0 {
            anyhow::bail!("--masters must be at least 1");
        }
        let mut master_listeners = vec![listen(&args.bind, args.port).await?];
        for _ in 1..args.masters {
            master_listeners.push(listen(&args.bind, 0).await?);
        }
        let peers: Vec<String> =
            master_listeners.iter().map(|l| l.local_addr().map(|a| a.to_string())).collect::<Result<_, _>>()?;
        let master_addr = peers.join(",");
        let secret = args.secret.load()?;
        let mut config = master_config(
            ufs.clone(),
            state.join("journal"),
            args.block_size,
            &args.timing,
            &args.planner,
            &args.recompute,
            &args.affinity,
        );
        config.secret = secret.clone();
        // Its workers reach its master over TLS when the master serves it.
        let tls = args.tls.server()?;
        let master_tls = if tls.is_some() { args.tls.client()? } else { None };
        anyhow::ensure!(
            tls.is_none() || master_tls.is_some(),
            "--tls-cert needs --tls-ca on a local cluster: its workers connect to its master"
        );
        config.tls = tls.clone();
        config.tls_ca = args.tls.tls_ca.clone();
        // Every listener is bound before anything starts: a taken port fails the start.
        let mut metrics = Vec::new();
        for i in 0..=args.workers {
            // The master on the port, worker I on port + I (0: any free).
            let port = match args.metrics_port {
                None | Some(0) => args.metrics_port,
                Some(p) => Some(u16::try_from(i).ok().and_then(|i| p.checked_add(i)).with_context(|| {
                    format!("--metrics-port {p}: {} worker(s) need ports past 65535", args.workers)
                })?),
            };
            metrics.push(listen_metrics(&args.bind, port).await?);
        }
        let mut metrics_addrs = Vec::new();
        for (i, m) in metrics.iter().enumerate() {
            if let Some(m) = m {
                let who = if i == 0 { "master".to_string() } else { format!("worker {i}") };
                metrics_addrs.push((who, m.local_addr()?));
            }
        }
        let web = listen_optional(&args.bind, args.web_port, "--web-port").await?;
        let web_addr = web.as_ref().map(|w| w.local_addr()).transpose()?;
        let mut metrics = metrics.into_iter();
        let mut tasks = tokio::task::JoinSet::new();
        let mut http = Some(thaw_master::HttpListeners { metrics: metrics.next().flatten(), web });
        let group = args.masters > 1;
        for (i, listener) in master_listeners.into_iter().enumerate() {
            let mut config = config.clone();
            if group {
                config.journal_dir = state.join(format!("journal-{}", i + 1));
                config.group = Some(thaw_master::ha::GroupConfig::new(i as u64 + 1, peers.clone())?);
            }
            // The first master serves the dashboard and metrics (in a group:
            // while it leads).
            let http = http.take().unwrap_or_default();
            if !group {
                tasks.spawn(thaw_master::serve_with_http(config, listener, http, shutdown.clone()));
                continue;
            }
            // Each master of a group on threads of its own, as if in its own
            // process: a leader's commit blocks its caller's thread until
            // the followers answer, and they must not need that thread.
            let (done, result) = tokio::sync::oneshot::channel();
            let (shutdown, listener) = (shutdown.clone(), listener.into_std()?);
            std::thread::Builder::new().name(format!("thaw-master-{}", i + 1)).spawn(move || {
                let r = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(thaw_common::ThawError::from)
                    .and_then(|rt| {
                        rt.block_on(async move {
                            let listener = tokio::net::TcpListener::from_std(listener)?;
                            thaw_master::serve_with_http(config, listener, http, shutdown).await
                        })
                    });
                let _ = done.send(r);
            })?;
            tasks.spawn(async move {
                result.await.unwrap_or_else(|_| Err(thaw_common::ThawError::internal("a master's thread died")))
            });
        }
        let host = thaw_common::hostname();
        // Worker I (from 1) is the master's worker I, as `thaw status`, the
        // dashboard and --worker-device-model number it: each starts once
        // the one before it has registered (ids go by registration).
        let (registered, mut ids) = tokio::sync::mpsc::unbounded_channel();
        for i in 1..=args.workers {
            let listener = listen(&args.bind, 0).await?;
            let config = WorkerConfig {
                master: master_addr.clone(),
                host: host.clone(),
                rack: DEFAULT_RACK.into(),
                mem: Some(TierConfig { dir: mem_root.join(format!("worker-{i}")), capacity: args.mem_capacity }),
                disk: Some(TierConfig { dir: state.join(format!("worker-{i}/disk")), capacity: args.disk_capacity }),
                advertise: None,
                remove_mem_on_exit: true,
                max_connections: thaw_worker::DEFAULT_MAX_CONNECTIONS,
                max_connections_per_user: thaw_worker::DEFAULT_MAX_CONNECTIONS / 2,
                stall_timeout: thaw_worker::data::DEFAULT_STALL_TIMEOUT,
                migration: args.buffer.config(),
                replacement: args.buffer.replacement,
                cache_window: args.buffer.cache_window,
                // The last model given for this worker, else the one of all workers.
                device_models: args
                    .worker_device_model
                    .iter()
                    .rev()
                    .find(|(w, _)| *w == i)
                    .map(|(_, m)| m.clone())
                    .or_else(|| args.device_model.clone())
                    .unwrap_or_default(),
                checkpoint_bandwidth: args.checkpoint.checkpoint_bandwidth.unwrap_or(0),
                keep_page_cache: args.buffer.keep_page_cache,
                secret: secret.clone(),
                tls: tls.clone(),
                master_tls: master_tls.clone(),
                registered: Some(registered.clone()),
            };
            tasks.spawn(thaw_worker::serve_with_metrics(config, listener, metrics.next().flatten(), shutdown.clone()));
            let id = tokio::select! {
                id = ids.recv() => id,
                Some(ended) = tasks.join_next() => {
                    shutdown.cancel();
                    let why = match ended {
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(())) => "it stopped".to_string(),
                        Err(e) => e.to_string(),
                    };
                    anyhow::bail!("the local cluster did not start: {why}");
                }
                _ = tokio::time::sleep(Duration::from_secs(60)) => None,
            };
            match id {
                Some(id) if id == i as u64 => {}
                Some(id) => eprintln!("thaw local: worker {i} registered with the master as worker {id}"),
                None => {
                    shutdown.cancel();
                    anyhow::bail!("worker {i} did not register with the master within 60 s");
                }
            }
        }
        let s3_addr = match args.s3_port {
            None => None,
            Some(port) => {
                let listener = listen(&args.bind, port).await.with_context(|| format!("--s3-port {port}"))?;
                let addr = listener.local_addr()?;
                let mut client_config = thaw_client::ClientConfig::from_env(Some(master_addr.clone()));
                client_config.tls = master_tls.clone();
                let client = thaw_client::Client::with_credentials(client_config, None)?;
                // With a secret, S3 keys act as their users; with TLS, HTTPS.
                let config =
                    thaw_gateway::GatewayConfig { secret: secret.clone(), tls: tls.clone(), ..Default::default() };
                let gateway = thaw_gateway::Gateway::new(client, config)?;
                let stop = shutdown.clone();
                tasks.spawn(async move {
                    gateway.serve(listener, stop.cancelled_owned()).await;
                    Ok(())
                });
                Some(addr)
            }
        };
        Ok(LocalCluster {
            master_addr,
            metrics_addrs,
            web_addr,
            s3_addr,
            mem_root,
            ufs,
            swept,
            shutdown,
            tasks,
            _owned: owned,
        })
    }

    /// Waits until the cluster stops (shutdown, or one part failing, which stops
    /// the rest), then removes the tmpfs files.
    pub async fn wait(mut self) -> anyhow::Result<()> {
        let mut first_error = None;
        while let Some(r) = self.tasks.join_next().await {
            self.shutdown.cancel();
            match r {
                Ok(Err(e)) if first_error.is_none() => first_error = Some(anyhow::Error::from(e)),
                Err(e) if first_error.is_none() => first_error = Some(e.into()),
                _ => {}
            }
        }
        let _ = std::fs::remove_dir_all(&self.mem_root);
        first_error.map_or(Ok(()), Err)
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.wait().await
    }
}

pub async fn run_local(args: LocalArgs) -> anyhow::Result<()> {
    let shutdown = stop_on_signal();
    if args.exit_with_stdin {
        // A plain thread: a blocked read must not hold up the runtime's shutdown.
        let token = shutdown.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            token.cancel();
        });
    }
    let cluster = LocalCluster::start(&args, shutdown).await?;
    for dir in &cluster.swept {
        eprintln!("thaw local: removed {}, left by a cluster that was killed", dir.display());
    }
    say(format_args!(
        "thaw local: master at {}; {} worker(s), MEM {} each under {}, under-store {}\n  export THAW_MASTER={}   # then: thaw fs ls /   (Ctrl-C stops the cluster)",
        cluster.master_addr,
        args.workers,
        format_size(args.mem_capacity),
        cluster.mem_root.display(),
        cluster.ufs,
        cluster.master_addr
    ));
    for (who, addr) in &cluster.metrics_addrs {
        say(format_args!("thaw local: {who} metrics listening on {addr}"));
    }
    if let Some(addr) = cluster.web_addr {
        say(format_args!("thaw local: dashboard at http://{addr}/"));
    }
    if let Some(addr) = cluster.s3_addr {
        let scheme = if args.tls.tls_cert.is_some() { "https" } else { "http" };
        if args.secret.secret_file.is_some() {
            say(format_args!("thaw local: S3 gateway at {scheme}://{addr} (keys: thaw auth s3-key create --user U)"));
        } else {
            say(format_args!(
                "thaw local: S3 gateway at {scheme}://{addr} (access key {}, secret key {})",
                thaw_gateway::DEFAULT_ACCESS_KEY,
                thaw_gateway::DEFAULT_SECRET_KEY
            ));
        }
    }
    let result = cluster.wait().await;
    if let Some(dir) = &args.remove_on_exit {
        let _ = std::fs::remove_dir_all(dir);
    }
    result?;
    eprintln!("thaw local: stopped");
    Ok(())
}

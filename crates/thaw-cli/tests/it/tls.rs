//! TLS on both protocols (`--tls-cert`, `--tls-key`, `--tls-ca`;
//! thaw_common::tls): everything works over it, and whoever does not trust
//! the cluster's CA, or speaks plain TCP, gets nothing.

use std::process::Command;
use std::sync::Arc;

use crate::common::*;
use thaw_client::ClientConfig;
use thaw_common::proto::*;
use thaw_common::tls::{ClientTls, make_certs};

fn over_tls(workers: usize) -> ClusterOptions {
    ClusterOptions { tls: true, secure: true, ..ClusterOptions::workers(workers) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_type_and_read_path_works_over_tls() {
    let c = start(over_tls(2)).await;
    let local = c.client("h0", "r0");
    let remote = c.remote_client();
    for (i, wt) in [WriteType::MustCache, WriteType::CacheThrough, WriteType::Through, WriteType::AsyncThrough]
        .into_iter()
        .enumerate()
    {
        let bytes = data(3 * (1 << 20) + 12345, i as u64);
        let path = format!("/tls/{i}.bin");
        // Written from another host: every byte crosses TLS to the worker.
        remote.write_all(&path, &bytes, opts(wt)).await.unwrap();
        assert_eq!(remote.read_all(&path).await.unwrap(), bytes, "{wt:?} streamed over TLS");
        assert_eq!(local.read_all(&path).await.unwrap(), bytes, "{wt:?} read on the worker's host");
    }
    // A replicated write goes to both workers over TLS.
    let bytes = data(2 << 20, 9);
    remote.write_all("/tls/replicated.bin", &bytes, opts(WriteType::ReplicatedDisk)).await.unwrap();
    assert_eq!(remote.read_all("/tls/replicated.bin").await.unwrap(), bytes);
    // Workers heartbeat and migrate over TLS: a cold file moves into memory.
    cold_file(&c, "/cold/c.bin", 2 << 20, 11);
    local.migrate("tls-job", &["/cold/c.bin".into()], EvictionMode::Explicit, None).await.unwrap();
    wait_in_memory(&local, "tls-job").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_clients_and_other_cas_get_nothing() {
    let c = start(over_tls(1)).await;
    c.client("h0", "r0").write_all("/f", &data(4096, 1), opts(WriteType::MustCache)).await.unwrap();
    let secret = c.secret.clone().unwrap();
    let creds = || {
        Some(Arc::new(
            thaw_common::auth::Credentials::from_secret(secret.clone(), thaw_common::auth::SUPERUSER, Vec::new())
                .unwrap(),
        ))
    };
    let config = |tls: Option<Arc<ClientTls>>| ClientConfig {
        retry_for: std::time::Duration::from_millis(200),
        tls,
        ..ClientConfig::from_env(Some(c.master_addr().to_string()))
    };
    // Plain gRPC to a TLS master: no answer.
    let plain = Client::with_credentials(config(None), creds());
    let err = match plain {
        Ok(p) => p.stat("/f").await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    // A CA that did not sign the cluster's certificate: refused.
    let other = make_certs(&c.root().join("other-ca"), &["127.0.0.1".into()]).unwrap();
    let stranger = Client::with_credentials(config(Some(Arc::new(ClientTls::load(&other.ca).unwrap()))), creds());
    let err = stranger.unwrap().stat("/f").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    // Plain bytes to a TLS worker: the handshake fails and nothing is served.
    let mut sock = tokio::net::TcpStream::connect(c.worker_addr(0)).await.unwrap();
    let req = DataRequest {
        version: thaw_proto::DATA_PROTOCOL_VERSION,
        request: Some(data_request::Request::Stats(WorkerStatsRequest {})),
        ..Default::default()
    };
    let _ = thaw_common::frame::write_msg(&mut sock, &req).await;
    let answer = thaw_common::frame::read_msg::<_, DataResponse>(&mut sock).await;
    assert!(!matches!(answer, Ok(Some(_))), "a plain request was answered: {answer:?}");

    // The CLI with THAW_TLS_CA reads; without it, it says it cannot reach the master.
    let certs = c.certs.clone().unwrap();
    let cat = |ca: Option<&std::path::Path>| {
        let mut cmd = Command::new(BIN);
        cmd.args(["fs", "cat", "/f"])
            .env("THAW_MASTER", c.master_addr())
            .env("THAW_SECRET_FILE", c.secret_file().unwrap())
            .env("THAW_USER", thaw_common::auth::SUPERUSER)
            .env_remove("THAW_TLS_CA");
        if let Some(ca) = ca {
            cmd.env("THAW_TLS_CA", ca);
        }
        cmd.output().unwrap()
    };
    let out = cat(Some(&certs.ca));
    assert!(out.status.success() && out.stdout == data(4096, 1), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cat(None);
    assert!(!out.status.success(), "a plain CLI read a TLS cluster");
    // It says why: TLS, and what to set. (About one call in three once
    // said only "unreachable: operation was canceled": the connection's
    // end raced the call, so each command runs several times.)
    for args in [&["fs", "cat", "/f"][..], &["lineage", "ls"], &["status"], &["jobs"]].repeat(4) {
        let out = Command::new(BIN)
            .args(args)
            .env("THAW_MASTER", c.master_addr())
            .env("THAW_SECRET_FILE", c.secret_file().unwrap())
            .env("THAW_USER", thaw_common::auth::SUPERUSER)
            .env_remove("THAW_TLS_CA")
            .output()
            .unwrap();
        let msg = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && msg.contains("TLS") && msg.contains("THAW_TLS_CA"), "{args:?}: {msg}");
    }
}

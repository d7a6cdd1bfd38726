//! Security on (`--secret-file`): every master call and every data request is
//! refused without valid credentials, and paths' owners and modes hold
//! (thaw_common::auth, thaw_master::master::permissions, thaw_worker::authorize).

use std::process::Command;
use std::sync::Arc;

use crate::common::*;
use thaw_common::auth::{self, Credentials, MasterClient, Secret};
use thaw_common::frame;
use thaw_common::proto::*;

fn secured(workers: usize) -> ClusterOptions {
    ClusterOptions { secure: true, ..ClusterOptions::workers(workers) }
}

fn token_client(c: &Cluster, token: String) -> MasterClient {
    auth::master_client(c.master_addr(), Some(Arc::new(Credentials::Token(token))), None).unwrap()
}

/// Every RPC of the master service, called with `m`: the errors.
async fn every_rpc(m: &MasterClient) -> Vec<(&'static str, Option<tonic::Status>)> {
    macro_rules! calls {
        ($($name:ident($req:ty)),* $(,)?) => {
            vec![$((stringify!($name), m.clone().$name(<$req>::default()).await.err())),*]
        };
    }
    calls![
        mkdir(MkdirRequest),
        get_status(GetStatusRequest),
        list_status(ListStatusRequest),
        create_file(CreateFileRequest),
        complete_file(CompleteFileRequest),
        delete(DeleteRequest),
        rename(RenameRequest),
        set_attributes(SetAttributesRequest),
        issue_token(IssueTokenRequest),
        who_am_i(WhoAmIRequest),
        get_cluster_status(GetClusterStatusRequest),
        register_worker(RegisterWorkerRequest),
        heartbeat(HeartbeatRequest),
        commit_block(CommitBlockRequest),
        commit_blocks(CommitBlocksRequest),
        report_block_changes(BlockChangesRequest),
        migrate(MigrateRequest),
        evict(EvictRequest),
        renew_lease(RenewLeaseRequest),
        renew_writer_lease(RenewWriterLeaseRequest),
        list_jobs(ListJobsRequest),
        report_job_tasks(ReportJobTasksRequest),
        migration_events(MigrationEventsRequest),
        persist(PersistRequest),
        checkpoint_done(CheckpointDoneRequest),
        submit_dependency(SubmitDependencyRequest),
        get_lineage(GetLineageRequest),
        list_lineage(ListLineageRequest),
        recompute(RecomputeRequest),
        claim_recomputations(ClaimRecomputationsRequest),
        recomputation_done(RecomputationDoneRequest),
        report_app_usage(ReportAppUsageRequest),
        get_cache_report(GetCacheReportRequest),
    ]
}

fn assert_all_refused(calls: &[(&str, Option<tonic::Status>)], says: &str) {
    assert_eq!(calls.len(), 33);
    for (name, err) in calls {
        let s = err.as_ref().unwrap_or_else(|| panic!("{name} was served"));
        assert_eq!(s.code(), tonic::Code::PermissionDenied, "{name}: {s:?}");
        assert!(s.message().contains(says), "{name}: {:?} does not say {says:?}", s.message());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_refused_without_credentials_or_with_wrong_or_expired_ones() {
    let c = start(secured(1)).await;
    let admin = c.client("h0", "r0");
    admin.write_all("/f", &data(4096, 1), opts(WriteType::MustCache)).await.unwrap();
    let secret = c.secret.clone().unwrap();

    let none = auth::master_client(c.master_addr(), None, None).unwrap();
    assert_all_refused(&every_rpc(&none).await, "requires credentials");

    let other = Arc::new(Secret::from_bytes(&[7u8; 32]).unwrap());
    let wrong = Credentials::from_secret(other.clone(), auth::SUPERUSER, Vec::new()).unwrap();
    let wrong = auth::master_client(c.master_addr(), Some(Arc::new(wrong)), None).unwrap();
    assert_all_refused(&every_rpc(&wrong).await, "does not match");

    let old =
        TokenClaims { user: auth::SUPERUSER.into(), groups: Vec::new(), expires_ms: thaw_common::now_ms() - 5000 };
    assert_all_refused(&every_rpc(&token_client(&c, secret.mint(&old))).await, "expired");

    let junk = token_client(&c, "thaw1.not base64.x".into());
    assert_all_refused(&every_rpc(&junk).await, "malformed token");

    // A worker with another secret is never taken into the cluster.
    let other_file = c.root().join("other-secret");
    std::fs::write(&other_file, "x".repeat(40)).unwrap();
    std::fs::set_permissions(&other_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mem = tempfile::tempdir().unwrap();
    let mut rogue = Command::new(BIN)
        .args(["worker", "--master", c.master_addr(), "--host", "rogue", "--mem-capacity", "8MiB"])
        .arg("--mem-dir")
        .arg(mem.path())
        .arg("--secret-file")
        .arg(&other_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let workers = admin.cluster_status().await.unwrap().workers;
    rogue.kill().unwrap();
    rogue.wait().unwrap();
    assert_eq!(workers.len(), 1, "{workers:?}");

    // Other gRPC tools may send `authorization: Bearer TOKEN`.
    let bearer: tonic::metadata::MetadataValue<_> =
        format!("Bearer {}", secret.mint(&auth::claims("carol", &[], 60_000).unwrap())).parse().unwrap();
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.master_addr())).unwrap().connect_lazy();
    let mut tool = thaw_common::proto::master_service_client::MasterServiceClient::with_interceptor(
        channel,
        move |mut req: tonic::Request<()>| {
            req.metadata_mut().insert("authorization", bearer.clone());
            Ok(req)
        },
    );
    assert_eq!(tool.who_am_i(WhoAmIRequest {}).await.unwrap().into_inner().user, "carol");

    // The right credentials are served, the superuser's and a user's.
    assert_eq!(admin.read_all("/f").await.unwrap(), data(4096, 1));
    let me = c.user_client("alice", &["eng"], "h0", "r0").who_am_i().await.unwrap();
    assert!(me.security && me.user == "alice" && me.groups == ["eng"] && !me.superuser, "{me:?}");
}

/// Sends `req` on a fresh connection to worker `addr`; the response header.
async fn data_call(addr: &str, req: DataRequest) -> DataResponse {
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    frame::write_msg(&mut sock, &req).await.unwrap();
    frame::read_msg::<_, DataResponse>(&mut sock).await.unwrap().expect("an answer")
}

fn req(access: Option<SignedAccess>, token: &str, r: data_request::Request) -> DataRequest {
    DataRequest {
        version: thaw_proto::DATA_PROTOCOL_VERSION,
        job_id: "t".into(),
        access,
        token: token.into(),
        request: Some(r),
    }
}

fn read(block: u64, ufs: Option<&str>) -> data_request::Request {
    let ufs = ufs.map(|p| UfsSource { path: p.into(), offset: 0, length: 4096 });
    data_request::Request::ReadBlock(ReadBlockRequest { block_id: block, ufs, ..Default::default() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_serves_only_what_the_master_granted() {
    let c = start(secured(1)).await;
    let admin = c.client("h0", "r0");
    admin.write_all("/a", &data(4096, 2), opts(WriteType::MustCache)).await.unwrap();
    admin.write_all("/b", &data(4096, 3), opts(WriteType::MustCache)).await.unwrap();
    let (a, _) = admin.stat_blocks("/a", true).await.unwrap();
    let (b, _) = admin.stat_blocks("/b", true).await.unwrap();
    let (ablock, bblock) = (&a.blocks[0], &b.blocks[0]);
    let grant = a.access.clone().expect("a secured master grants reads");
    let addr = c.worker_addr(0);
    let secret = c.secret.clone().unwrap();
    let denied = |r: &DataResponse, says: &str| {
        assert_eq!(r.code(), ErrorCode::PermissionDenied, "{r:?}");
        assert!(r.message.contains(says), "{:?} does not say {says:?}", r.message);
    };

    denied(&data_call(addr, req(None, "", read(ablock.block_id, None))).await, "none sent");
    denied(&data_call(addr, req(Some(grant.clone()), "", read(bblock.block_id, None))).await, "not for this");
    denied(&data_call(addr, req(Some(grant.clone()), "", read(ablock.block_id, Some("/b")))).await, "does not cover");
    let forged = Secret::from_bytes(&[9u8; 32]).unwrap().grant(&AccessClaims {
        user: "x".into(),
        expires_ms: u64::MAX,
        write: false,
        id: a.file_id,
        ufs_path: "/a".into(),
    });
    denied(&data_call(addr, req(Some(forged), "", read(ablock.block_id, None))).await, "does not match");
    let expired = secret.grant(&AccessClaims {
        user: "x".into(),
        expires_ms: thaw_common::now_ms() - 1000,
        write: false,
        id: a.file_id,
        ufs_path: "/a".into(),
    });
    denied(&data_call(addr, req(Some(expired), "", read(ablock.block_id, None))).await, "expired");
    let open = data_request::Request::OpenLocal(OpenLocalBlockRequest { block_id: bblock.block_id });
    denied(&data_call(addr, req(Some(grant.clone()), "", open)).await, "not for this");
    let write = data_request::Request::WriteFile(WriteFileRequest {
        file_id: a.file_id,
        block_size: 4096,
        tier: Tier::Mem as i32,
        ..Default::default()
    });
    denied(&data_call(addr, req(Some(grant.clone()), "", write)).await, "reading file");
    let stats = || data_request::Request::Stats(WorkerStatsRequest {});
    denied(&data_call(addr, req(None, "", stats())).await, "requires a token");
    let alice = secret.mint(&auth::claims("alice", &[], 60_000).unwrap());
    let control = || {
        data_request::Request::DeviceControl(DeviceControlRequest { device: "disk".into(), interference_streams: 1 })
    };
    denied(&data_call(addr, req(None, &alice, control())).await, "superuser");

    // What was granted is served, byte for byte.
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    frame::write_msg(&mut sock, &req(Some(grant), "", read(ablock.block_id, None))).await.unwrap();
    let r = frame::read_msg::<_, DataResponse>(&mut sock).await.unwrap().unwrap();
    assert_eq!((r.code(), r.length), (ErrorCode::Ok, 4096), "{r:?}");
    let mut got = vec![0u8; 4096];
    tokio::io::AsyncReadExt::read_exact(&mut sock, &mut got).await.unwrap();
    assert_eq!(got, data(4096, 2));
    assert_eq!(data_call(addr, req(None, &alice, stats())).await.code(), ErrorCode::Ok);
    let su = secret.mint(&auth::claims(auth::SUPERUSER, &[], 60_000).unwrap());
    let r = data_call(addr, req(None, &su, control())).await;
    assert_ne!(r.code(), ErrorCode::PermissionDenied, "{r:?}");

    // Block files are the worker's user's only.
    let mode = std::fs::metadata(c.mem_dir(0)).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o700);
}

fn refused<T: std::fmt::Debug>(r: thaw_common::Result<T>, says: &str) {
    let e = r.expect_err("refused");
    assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e}");
    assert!(e.message.contains(says), "{:?} does not say {says:?}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_and_modes_decide_who_reads_writes_and_changes_what() {
    let c = start(secured(1)).await;
    let admin = c.client("h0", "r0");
    let alice = c.user_client("alice", &["eng"], "h0", "r0");
    let bob = c.user_client("bob", &["ops"], "h0", "r0");
    let carol = c.user_client("carol", &["eng"], "h0", "r0");

    // The root is the superuser's: users make nothing there.
    refused(alice.mkdir("/mine", false, false).await.map(|_| ()), "may not change entries of /");
    admin.mkdir("/home/alice", true, false).await.unwrap();
    admin.set_attributes("/home/alice", None, Some("alice".into()), Some("eng".into())).await.unwrap();

    let bytes = data(300_000, 4);
    let private = WriteOptions { mode: Some(0o600), ..opts(WriteType::CacheThrough) };
    let info = alice.write_all("/home/alice/private", &bytes, private).await.unwrap();
    assert_eq!((info.owner.as_str(), info.group.as_str(), info.mode), ("alice", "eng", 0o600));
    alice.write_all("/home/alice/shared", &bytes, opts(WriteType::MustCache)).await.unwrap();

    // Bob sees the entries (the directory is 755) but cannot read the 0600 file.
    let names: Vec<String> = bob.list("/home/alice").await.unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(names, ["private", "shared"]);
    refused(bob.read_all("/home/alice/private").await, "bob may not read /home/alice/private");
    refused(carol.read_all("/home/alice/private").await, "may not read");
    assert_eq!(bob.read_all("/home/alice/shared").await.unwrap(), bytes);
    // Nor move it into memory, write, delete or rename in alice's directory.
    let job = bob.migrate("bob-job", &["/home/alice/private".into()], EvictionMode::Explicit, None).await;
    refused(job.map(|_| ()), "may not read");
    refused(bob.write_all("/home/alice/x", b"x", opts(WriteType::MustCache)).await, "may not change entries");
    refused(bob.delete("/home/alice/shared", false).await, "may not change entries");
    refused(bob.rename("/home/alice/shared", "/home/alice/y").await, "may not change entries");
    refused(bob.set_attributes("/home/alice/private", Some(0o644), None, None).await, "its owner is alice");
    // Owners change modes and groups (to their own groups), never owners.
    refused(alice.set_attributes("/home/alice/private", None, Some("bob".into()), None).await, "only the superuser");
    refused(alice.set_attributes("/home/alice/private", None, None, Some("ops".into())).await, "not in group ops");
    // A user's token is its own: no one else's.
    refused(bob.issue_token("alice", &[], 0).await, "another user");
    let t = alice.issue_token("", &[], 3_600_000).await.unwrap();
    let via_token = auth::master_client(c.master_addr(), Some(Arc::new(Credentials::Token(t.token))), None).unwrap();
    let me = via_token.clone().who_am_i(WhoAmIRequest {}).await.unwrap().into_inner();
    assert_eq!((me.user.as_str(), me.groups.as_slice()), ("alice", ["eng".to_string()].as_slice()));
    // A job is its submitter's.
    alice.migrate("alice-job", &["/home/alice/shared".into()], EvictionMode::Explicit, None).await.unwrap();
    refused(bob.evict("alice-job", &[]).await, "job alice-job is alice's");
    alice.evict("alice-job", &[]).await.unwrap();

    // Group read lets carol (eng) in; bob (ops) stays out.
    alice.set_attributes("/home/alice/private", Some(0o640), None, None).await.unwrap();
    assert_eq!(carol.read_all("/home/alice/private").await.unwrap(), bytes);
    refused(bob.read_all("/home/alice/private").await, "may not read");
    // A directory without x for others closes everything under it.
    alice.set_attributes("/home/alice", Some(0o750), None, None).await.unwrap();
    refused(bob.stat("/home/alice/shared").await, "bob may not pass through /home/alice");
    // The superuser reads anything, and the permissions survive a master restart.
    assert_eq!(admin.read_all("/home/alice/private").await.unwrap(), bytes);
    let mut c = c;
    c.restart_master().await.unwrap();
    let info = c.client("h0", "r0").stat("/home/alice/private").await.unwrap();
    assert_eq!((info.owner.as_str(), info.group.as_str(), info.mode), ("alice", "eng", 0o640));
    refused(c.user_client("bob", &["ops"], "h0", "r0").read_all("/home/alice/private").await, "may not");
}

fn thaw(c: &Cluster, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env("THAW_MASTER", c.master_addr())
        .env_remove("THAW_SECRET_FILE")
        .env_remove("THAW_TOKEN")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_carries_secrets_and_tokens_and_another_os_user_streams_what_it_may_read() {
    let c = start(secured(1)).await;
    let secret = c.secret_file().unwrap();
    let secret = secret.to_str().unwrap();
    let admin = [("THAW_SECRET_FILE", secret), ("THAW_USER", "thaw")];

    // `thaw auth secret` makes a fresh 600 file, and refuses to overwrite one.
    let made = c.root().join("made-secret");
    ok(thaw(&c, &[], &["auth", "secret", made.to_str().unwrap()]));
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&made).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    Secret::load(&made).unwrap();
    assert!(!thaw(&c, &[], &["auth", "secret", made.to_str().unwrap()]).status.success());

    let out = thaw(&c, &[], &["fs", "ls", "/"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("requires credentials"), "{out:?}");
    assert!(ok(thaw(&c, &admin, &["auth", "whoami"])).contains("thaw (superuser)"));
    ok(thaw(&c, &admin, &["fs", "mkdir", "-p", "/home/alice"]));
    ok(thaw(&c, &admin, &["fs", "chown", "alice:eng", "/home/alice"]));
    let token = ok(thaw(&c, &admin, &["auth", "token", "--user", "alice", "--groups", "eng", "--hours", "1"]));
    let as_alice = [("THAW_TOKEN", token.trim())];
    assert!(ok(thaw(&c, &as_alice, &["auth", "whoami"])).starts_with("alice groups [eng]"));

    let local = c.root().join("in.bin");
    let bytes = data(3 << 20, 5);
    std::fs::write(&local, &bytes).unwrap();
    ok(thaw(&c, &as_alice, &["fs", "put", local.to_str().unwrap(), "/home/alice/f", "--mode", "640"]));
    let ls = ok(thaw(&c, &as_alice, &["fs", "ls", "/home/alice"]));
    assert!(ls.contains("-rw-r-----  alice  eng") && ls.contains(" f"), "{ls}");

    // `nobody` on this host, reading with alice's token: the worker's block
    // files are not its to open, so it streams them, byte-exact.
    let mut cat = Command::new("setpriv");
    cat.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", BIN, "fs", "cat", "/home/alice/f"])
        .env("THAW_MASTER", c.master_addr())
        .env("THAW_TOKEN", token.trim())
        .env("THAW_HOST", "h0")
        .env_remove("THAW_SECRET_FILE");
    let out = cat.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == bytes, "nobody read {} bytes, not alice's file", out.stdout.len());
    // And with bob's token it is refused.
    let bob = ok(thaw(&c, &admin, &["auth", "token", "--user", "bob"]));
    let out = thaw(&c, &[("THAW_TOKEN", bob.trim())], &["fs", "cat", "/home/alice/f"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("bob may not read /home/alice/f"), "{err}");
    let out = thaw(&c, &[("THAW_TOKEN", bob.trim())], &["fs", "chmod", "777", "/home/alice/f"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("its owner is alice"), "{out:?}");
}

/// The status code of `GET /` on the dashboard at `addr`, with `authorization`.
async fn dashboard_status(addr: &str, authorization: Option<String>) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    let req = format!("GET / HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8_lossy(&raw);
    raw.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("an HTTP status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_of_a_secured_master_is_the_superusers() {
    let c = start(ClusterOptions { master_args: vec!["--web-port".into(), "0".into()], ..secured(1) }).await;
    let web = c.master_web_addr().unwrap();
    let secret = c.secret.clone().unwrap();
    let token = |user: &str| secret.mint(&auth::claims(user, &[], 60_000).unwrap());
    let basic = |t: String| {
        use base64::Engine;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!(":{t}")))
    };
    assert_eq!(dashboard_status(web, None).await, 401);
    assert_eq!(dashboard_status(web, Some("Bearer thaw1.x.y".into())).await, 401);
    assert_eq!(dashboard_status(web, Some(basic(token("alice")))).await, 403);
    assert_eq!(dashboard_status(web, Some(basic(token(auth::SUPERUSER)))).await, 200);
    assert_eq!(dashboard_status(web, Some(format!("Bearer {}", token(auth::SUPERUSER)))).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_cannot_hold_every_connection_of_a_worker() {
    let mut options = secured(1);
    options.workers[0].extra_args = vec!["--max-connections-per-user".into(), "2".into()];
    let c = start(options).await;
    let secret = c.secret.clone().unwrap();
    let token = |user: &str| secret.mint(&auth::claims(user, &[], 60_000).unwrap());
    let (alice, bob) = (token("alice"), token("bob"));
    let stats = |t: &str| req(None, t, data_request::Request::Stats(WorkerStatsRequest {}));
    let addr = c.worker_addr(0);
    // Alice's two connections stay open after their first request.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        frame::write_msg(&mut sock, &stats(&alice)).await.unwrap();
        let r = frame::read_msg::<_, DataResponse>(&mut sock).await.unwrap().unwrap();
        assert_eq!(r.code(), ErrorCode::Ok, "{r:?}");
        held.push(sock);
    }
    let r = data_call(addr, stats(&alice)).await;
    assert_eq!(r.code(), ErrorCode::ResourceExhausted, "{r:?}");
    assert!(r.message.contains("alice holds 2 connections"), "{}", r.message);
    // Others are served, and alice again once one of hers closes.
    assert_eq!(data_call(addr, stats(&bob)).await.code(), ErrorCode::Ok);
    drop(held.pop());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while data_call(addr, stats(&alice)).await.code() != ErrorCode::Ok {
        assert!(std::time::Instant::now() < deadline, "alice's closed connection was never given back");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

//! The gRPC layer: thin adapters from `MasterService` calls to `Master` methods.

use std::sync::Arc;

use thaw_common::proto::master_service_server::MasterService;
use thaw_common::proto::*;
use tonic::{Request, Response, Status};

use thaw_common::{ThawError, auth};

use crate::master::Master;
use crate::master::permissions::{CALLER, Caller};

/// What serves the calls: this master, or whichever master of its group
/// leads (the others answer "not the leader", pointing at it).
pub enum Serving {
    One(Arc<Master>),
    Group(Arc<crate::ha::Group>),
}

pub struct MasterRpc {
    pub serving: Serving,
}

type Reply<T> = Result<Response<T>, Status>;

fn reply<T>(r: thaw_common::Result<T>) -> Reply<T> {
    r.map(Response::new).map_err(Status::from)
}

impl MasterRpc {
    async fn master(&self) -> Result<Arc<Master>, Status> {
        match &self.serving {
            Serving::One(m) => Ok(m.clone()),
            Serving::Group(g) => g.master().await,
        }
    }

    fn config(&self) -> &crate::config::MasterConfig {
        match &self.serving {
            Serving::One(m) => m.config(),
            Serving::Group(g) => g.master_config(),
        }
    }

    /// Who sends `r`: on a master with a secret, the user its token names
    /// (refused without a valid one); else whom it says it is.
    fn authenticate<T>(&self, r: &Request<T>) -> Result<Caller, Status> {
        authenticate(self.config(), r)
    }
}

/// [`MasterRpc::authenticate`], for any service of the master.
fn authenticate<T>(config: &crate::config::MasterConfig, r: &Request<T>) -> Result<Caller, Status> {
    {
        let Some(secret) = config.secret.as_ref() else {
            let said = r.metadata().get(auth::USER_HEADER).and_then(|v| v.to_str().ok());
            let user = said.filter(|u| auth::check_name(u, "user").is_ok()).unwrap_or_default();
            let superuser = user == config.superuser;
            return Ok(Caller { user: user.to_string(), groups: Vec::new(), checked: false, expires_ms: 0, superuser });
        };
        // Thaw's clients send `thaw-token`; other gRPC tools `authorization`.
        let token = if let Some(t) = r.metadata().get(auth::TOKEN_HEADER) {
            t.to_str().map_err(|_| ThawError::permission_denied("malformed token (not ASCII)"))?
        } else if let Some(h) = r.metadata().get(auth::AUTH_HEADER) {
            h.to_str()
                .ok()
                .and_then(|h| h.strip_prefix("Bearer "))
                .ok_or_else(|| ThawError::permission_denied("authorization metadata must be `Bearer <token>`"))?
        } else {
            return Err(ThawError::permission_denied(
                "this cluster requires credentials: set THAW_TOKEN, THAW_TOKEN_FILE or THAW_SECRET_FILE",
            )
            .into());
        };
        let claims = secret.verify(token)?;
        let superuser = auth::is_superuser(&claims.user, &claims.groups) || claims.user == config.superuser;
        Ok(Caller { user: claims.user, groups: claims.groups, checked: true, expires_ms: claims.expires_ms, superuser })
    }
}

/// Serves an RPC as its caller ([`CALLER`]): authenticated first, and for the
/// worker and executor protocols required to be the superuser; answered once
/// its journal commits are durable (on a group: held by a majority)
/// ([`crate::commits::await_commits`]).
macro_rules! serve {
    ($self:ident, $r:ident, superuser $what:literal, |$req:pat_param| $body:expr) => {{
        let caller = $self.authenticate(&$r)?;
        caller.require_superuser($what)?;
        let $req = $r.into_inner();
        CALLER.scope(std::sync::Arc::new(caller), crate::commits::await_commits(async move { $body })).await
    }};
    ($self:ident, $r:ident, |$req:pat_param| $body:expr) => {{
        let caller = $self.authenticate(&$r)?;
        let $req = $r.into_inner();
        CALLER.scope(std::sync::Arc::new(caller), crate::commits::await_commits(async move { $body })).await
    }};
}

#[tonic::async_trait]
impl MasterService for MasterRpc {
    async fn mkdir(&self, r: Request<MkdirRequest>) -> Reply<MkdirResponse> {
        serve!(self, r, |req| reply(self.master().await?.mkdir(req).await))
    }
    async fn get_status(&self, r: Request<GetStatusRequest>) -> Reply<GetStatusResponse> {
        serve!(self, r, |req| reply(self.master().await?.get_status(req).await))
    }
    async fn list_status(&self, r: Request<ListStatusRequest>) -> Reply<ListStatusResponse> {
        serve!(self, r, |req| reply(self.master().await?.list_status(req).await))
    }
    async fn create_file(&self, r: Request<CreateFileRequest>) -> Reply<CreateFileResponse> {
        serve!(self, r, |req| reply(self.master().await?.create_file(req).await))
    }
    async fn complete_file(&self, r: Request<CompleteFileRequest>) -> Reply<CompleteFileResponse> {
        serve!(self, r, |req| reply(self.master().await?.complete_file(req).await))
    }
    async fn delete(&self, r: Request<DeleteRequest>) -> Reply<DeleteResponse> {
        serve!(self, r, |req| reply(self.master().await?.delete(req).await))
    }
    async fn rename(&self, r: Request<RenameRequest>) -> Reply<RenameResponse> {
        serve!(self, r, |req| reply(self.master().await?.rename(req).await))
    }
    async fn get_cluster_status(&self, r: Request<GetClusterStatusRequest>) -> Reply<GetClusterStatusResponse> {
        serve!(self, r, |_req| {
            let mut status = self.master().await?.cluster_status();
            if let Serving::Group(g) = &self.serving {
                status.masters = g.members();
            }
            Ok(Response::new(status))
        })
    }
    async fn register_worker(&self, r: Request<RegisterWorkerRequest>) -> Reply<RegisterWorkerResponse> {
        serve!(self, r, superuser "registering a worker", |req| reply(self.master().await?.register_worker(req)))
    }
    async fn heartbeat(&self, r: Request<HeartbeatRequest>) -> Reply<HeartbeatResponse> {
        serve!(self, r, superuser "a worker's heartbeat", |req| Ok(Response::new(self.master().await?.ask(req).await)))
    }
    async fn commit_block(&self, r: Request<CommitBlockRequest>) -> Reply<CommitBlockResponse> {
        serve!(self, r, superuser "committing a block (workers do)", |req| reply(self.master().await?.commit_block(req)))
    }
    async fn commit_blocks(&self, r: Request<CommitBlocksRequest>) -> Reply<CommitBlocksResponse> {
        serve!(self, r, superuser "committing blocks (workers do)", |req| Ok(Response::new(self.master().await?.commit_blocks(req))))
    }
    async fn report_block_changes(&self, r: Request<BlockChangesRequest>) -> Reply<BlockChangesResponse> {
        serve!(self, r, superuser "reporting block changes (workers do)", |req| Ok(Response::new(self.master().await?.block_changes_report(req))))
    }
    async fn migrate(&self, r: Request<MigrateRequest>) -> Reply<MigrateResponse> {
        serve!(self, r, |req| reply(self.master().await?.migrate(req).await))
    }
    async fn evict(&self, r: Request<EvictRequest>) -> Reply<EvictResponse> {
        serve!(self, r, |req| reply(self.master().await?.evict(req).await))
    }
    async fn renew_lease(&self, r: Request<RenewLeaseRequest>) -> Reply<RenewLeaseResponse> {
        serve!(self, r, |req| Ok(Response::new(self.master().await?.renew_lease(req))))
    }
    async fn renew_writer_lease(&self, r: Request<RenewWriterLeaseRequest>) -> Reply<RenewWriterLeaseResponse> {
        serve!(self, r, |req| reply(self.master().await?.renew_writer_lease(req)))
    }
    async fn list_jobs(&self, r: Request<ListJobsRequest>) -> Reply<ListJobsResponse> {
        serve!(self, r, |req| reply(self.master().await?.list_jobs(req)))
    }
    async fn report_app_usage(&self, r: Request<ReportAppUsageRequest>) -> Reply<ReportAppUsageResponse> {
        serve!(self, r, |req| reply(self.master().await?.report_app_usage(req).await))
    }
    async fn get_cache_report(&self, r: Request<GetCacheReportRequest>) -> Reply<GetCacheReportResponse> {
        serve!(self, r, |req| reply(Ok(self.master().await?.cache_report(req))))
    }
    async fn report_job_tasks(&self, r: Request<ReportJobTasksRequest>) -> Reply<ReportJobTasksResponse> {
        serve!(self, r, |req| reply(self.master().await?.report_job_tasks(req)))
    }
    async fn migration_events(&self, r: Request<MigrationEventsRequest>) -> Reply<MigrationEventsResponse> {
        serve!(self, r, |req| Ok(Response::new(self.master().await?.migration_events(req))))
    }
    async fn persist(&self, r: Request<PersistRequest>) -> Reply<PersistResponse> {
        serve!(self, r, |req| reply(self.master().await?.persist(req).await))
    }
    async fn checkpoint_done(&self, r: Request<CheckpointDoneRequest>) -> Reply<CheckpointDoneResponse> {
        serve!(self, r, superuser "reporting a checkpoint (workers do)", |req| reply(self.master().await?.checkpoint_done(req).await))
    }
    async fn submit_dependency(&self, r: Request<SubmitDependencyRequest>) -> Reply<SubmitDependencyResponse> {
        serve!(self, r, |req| reply(self.master().await?.submit_dependency(req).await))
    }
    async fn get_lineage(&self, r: Request<GetLineageRequest>) -> Reply<GetLineageResponse> {
        serve!(self, r, |req| reply(self.master().await?.get_lineage(req).await))
    }
    async fn list_lineage(&self, r: Request<ListLineageRequest>) -> Reply<ListLineageResponse> {
        serve!(self, r, |_req| Ok(Response::new(self.master().await?.list_lineage())))
    }
    async fn recompute(&self, r: Request<RecomputeRequest>) -> Reply<RecomputeResponse> {
        serve!(self, r, |req| reply(self.master().await?.recompute(req).await))
    }
    async fn claim_recomputations(&self, r: Request<ClaimRecomputationsRequest>) -> Reply<ClaimRecomputationsResponse> {
        serve!(self, r, superuser "claiming lineage reruns (the executor does)", |req| reply(self.master().await?.claim_recomputations(req)))
    }
    async fn recomputation_done(&self, r: Request<RecomputationDoneRequest>) -> Reply<RecomputationDoneResponse> {
        serve!(self, r, superuser "reporting a lineage rerun (the executor does)", |req| Ok(Response::new(self.master().await?.recomputation_done(req))))
    }
    async fn set_attributes(&self, r: Request<SetAttributesRequest>) -> Reply<SetAttributesResponse> {
        serve!(self, r, |req| reply(self.master().await?.set_attributes(req).await))
    }
    async fn issue_token(&self, r: Request<IssueTokenRequest>) -> Reply<IssueTokenResponse> {
        serve!(self, r, |req| reply(self.master().await?.issue_token(req)))
    }
    async fn who_am_i(&self, r: Request<WhoAmIRequest>) -> Reply<WhoAmIResponse> {
        serve!(self, r, |_req| Ok(Response::new(self.master().await?.who_am_i())))
    }
    async fn create_s3_key(&self, r: Request<CreateS3KeyRequest>) -> Reply<CreateS3KeyResponse> {
        serve!(self, r, |req| reply(self.master().await?.create_s3_key(req)))
    }
    async fn list_s3_keys(&self, r: Request<ListS3KeysRequest>) -> Reply<ListS3KeysResponse> {
        serve!(self, r, |req| reply(self.master().await?.list_s3_keys(req)))
    }
    async fn delete_s3_key(&self, r: Request<DeleteS3KeyRequest>) -> Reply<DeleteS3KeyResponse> {
        serve!(self, r, |req| reply(self.master().await?.delete_s3_key(req)))
    }
    async fn set_s3_key_job(&self, r: Request<SetS3KeyJobRequest>) -> Reply<ListS3KeysResponse> {
        serve!(self, r, |req| reply(self.master().await?.set_s3_key_job(req)))
    }
}

/// Raft's messages from the other masters of the group.
pub struct RaftRpc {
    pub group: Arc<crate::ha::Group>,
}

#[tonic::async_trait]
impl thaw_common::proto::master_raft_server::MasterRaft for RaftRpc {
    async fn raft(&self, r: Request<RaftMessage>) -> Reply<RaftMessage> {
        authenticate(self.group.master_config(), &r)?.require_superuser("Raft messages (masters send them)")?;
        reply(self.group.handle(r.into_inner()).await)
    }
}

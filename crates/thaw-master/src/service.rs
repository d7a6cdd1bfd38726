//! The gRPC layer: thin adapters from `MasterService` calls to `Master` methods.

use std::sync::Arc;

use thaw_common::proto::master_service_server::MasterService;
use thaw_common::proto::*;
use tonic::{Request, Response, Status};

use crate::master::Master;

pub struct MasterRpc {
    pub master: Arc<Master>,
}

type Reply<T> = Result<Response<T>, Status>;

fn reply<T>(r: thaw_common::Result<T>) -> Reply<T> {
    r.map(Response::new).map_err(Status::from)
}

#[tonic::async_trait]
impl MasterService for MasterRpc {
    async fn mkdir(&self, r: Request<MkdirRequest>) -> Reply<MkdirResponse> {
        reply(self.master.mkdir(r.into_inner()).await)
    }
    async fn get_status(&self, r: Request<GetStatusRequest>) -> Reply<GetStatusResponse> {
        reply(self.master.get_status(r.into_inner()).await)
    }
    async fn list_status(&self, r: Request<ListStatusRequest>) -> Reply<ListStatusResponse> {
        reply(self.master.list_status(r.into_inner()).await)
    }
    async fn create_file(&self, r: Request<CreateFileRequest>) -> Reply<CreateFileResponse> {
        reply(self.master.create_file(r.into_inner()).await)
    }
    async fn complete_file(&self, r: Request<CompleteFileRequest>) -> Reply<CompleteFileResponse> {
        reply(self.master.complete_file(r.into_inner()).await)
    }
    async fn delete(&self, r: Request<DeleteRequest>) -> Reply<DeleteResponse> {
        reply(self.master.delete(r.into_inner()).await)
    }
    async fn rename(&self, r: Request<RenameRequest>) -> Reply<RenameResponse> {
        reply(self.master.rename(r.into_inner()).await)
    }
    async fn get_cluster_status(&self, _r: Request<GetClusterStatusRequest>) -> Reply<GetClusterStatusResponse> {
        Ok(Response::new(self.master.cluster_status()))
    }
    async fn register_worker(&self, r: Request<RegisterWorkerRequest>) -> Reply<RegisterWorkerResponse> {
        reply(self.master.register_worker(r.into_inner()))
    }
    async fn heartbeat(&self, r: Request<HeartbeatRequest>) -> Reply<HeartbeatResponse> {
        Ok(Response::new(self.master.ask(r.into_inner()).await))
    }
    async fn commit_block(&self, r: Request<CommitBlockRequest>) -> Reply<CommitBlockResponse> {
        reply(self.master.commit_block(r.into_inner()))
    }
    async fn migrate(&self, r: Request<MigrateRequest>) -> Reply<MigrateResponse> {
        reply(self.master.migrate(r.into_inner()).await)
    }
    async fn evict(&self, r: Request<EvictRequest>) -> Reply<EvictResponse> {
        reply(self.master.evict(r.into_inner()).await)
    }
    async fn renew_lease(&self, r: Request<RenewLeaseRequest>) -> Reply<RenewLeaseResponse> {
        Ok(Response::new(self.master.renew_lease(r.into_inner())))
    }
    async fn renew_writer_lease(&self, r: Request<RenewWriterLeaseRequest>) -> Reply<RenewWriterLeaseResponse> {
        reply(self.master.renew_writer_lease(r.into_inner()))
    }
    async fn list_jobs(&self, r: Request<ListJobsRequest>) -> Reply<ListJobsResponse> {
        reply(self.master.list_jobs(r.into_inner()))
    }
    async fn report_app_usage(&self, r: Request<ReportAppUsageRequest>) -> Reply<ReportAppUsageResponse> {
        reply(self.master.report_app_usage(r.into_inner()).await)
    }
    async fn get_cache_report(&self, r: Request<GetCacheReportRequest>) -> Reply<GetCacheReportResponse> {
        reply(Ok(self.master.cache_report(r.into_inner())))
    }
    async fn report_job_tasks(&self, r: Request<ReportJobTasksRequest>) -> Reply<ReportJobTasksResponse> {
        reply(self.master.report_job_tasks(r.into_inner()))
    }
    async fn migration_events(&self, r: Request<MigrationEventsRequest>) -> Reply<MigrationEventsResponse> {
        Ok(Response::new(self.master.migration_events(r.into_inner())))
    }
    async fn persist(&self, r: Request<PersistRequest>) -> Reply<PersistResponse> {
        reply(self.master.persist(r.into_inner()).await)
    }
    async fn checkpoint_done(&self, r: Request<CheckpointDoneRequest>) -> Reply<CheckpointDoneResponse> {
        reply(self.master.checkpoint_done(r.into_inner()).await)
    }
    async fn submit_dependency(&self, r: Request<SubmitDependencyRequest>) -> Reply<SubmitDependencyResponse> {
        reply(self.master.submit_dependency(r.into_inner()).await)
    }
    async fn get_lineage(&self, r: Request<GetLineageRequest>) -> Reply<GetLineageResponse> {
        reply(self.master.get_lineage(r.into_inner()).await)
    }
    async fn list_lineage(&self, _r: Request<ListLineageRequest>) -> Reply<ListLineageResponse> {
        Ok(Response::new(self.master.list_lineage()))
    }
    async fn recompute(&self, r: Request<RecomputeRequest>) -> Reply<RecomputeResponse> {
        reply(self.master.recompute(r.into_inner()).await)
    }
    async fn claim_recomputations(&self, r: Request<ClaimRecomputationsRequest>) -> Reply<ClaimRecomputationsResponse> {
        reply(self.master.claim_recomputations(r.into_inner()))
    }
    async fn recomputation_done(&self, r: Request<RecomputationDoneRequest>) -> Reply<RecomputationDoneResponse> {
        Ok(Response::new(self.master.recomputation_done(r.into_inner())))
    }
}

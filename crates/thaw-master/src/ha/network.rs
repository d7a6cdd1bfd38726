//! Raft's messages between the masters of a group, over the master's own gRPC
//! port (`MasterRaft`): one address per master, the same TLS and, on a
//! secured cluster, a superuser token minted from the cluster secret.

use std::sync::Arc;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{AnyError, BasicNode};
use thaw_common::auth::{Attach, Credentials};
use thaw_common::proto::master_raft_client::MasterRaftClient;
use thaw_common::proto::{RaftKind, RaftMessage};
use thaw_common::tls::ClientTls;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::TypeConfig;

type NodeId = u64;

/// Makes one [`Peer`] per other master.
pub struct Network {
    pub credentials: Option<Arc<Credentials>>,
    pub tls: Option<Arc<ClientTls>>,
    /// Whom each message reached ([`super::contact`]).
    pub contacts: Arc<super::contact::Contacts>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Peer {
        let client = thaw_common::auth::channel(&node.addr, self.tls.as_deref())
            .map(|ch| MasterRaftClient::with_interceptor(ch, Attach::new(self.credentials.clone())));
        Peer { target, addr: node.addr.clone(), client, contacts: self.contacts.clone() }
    }
}

pub struct Peer {
    target: NodeId,
    addr: String,
    client: thaw_common::Result<MasterRaftClient<InterceptedService<Channel, Attach>>>,
    contacts: Arc<super::contact::Contacts>,
}

impl Peer {
    /// Sends `req` as `kind`; the peer's answer is openraft's `Result` of it.
    async fn call<Req, Resp, E>(
        &mut self,
        kind: RaftKind,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: serde::Serialize,
        Resp: serde::de::DeserializeOwned,
        E: std::error::Error + serde::de::DeserializeOwned,
    {
        let client = match &mut self.client {
            Ok(c) => c,
            Err(e) => return Err(RPCError::Unreachable(Unreachable::new(&AnyError::error(e)))),
        };
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let mut request = tonic::Request::new(RaftMessage { kind: kind as i32, body });
        request.set_timeout(option.hard_ttl());
        let answer = client.raft(request).await;
        // Any answer, even a refusal, is word from it; no answer is none.
        match &answer {
            Ok(_) => self.contacts.heard(self.target, std::time::Instant::now()),
            Err(s) if matches!(s.code(), tonic::Code::Unavailable | tonic::Code::DeadlineExceeded) => {
                self.contacts.failed(self.target, std::time::Instant::now())
            }
            Err(_) => {}
        }
        let answer = match answer {
            Ok(a) => a.into_inner(),
            // A master that is down, or starting: Raft backs off before trying again.
            Err(s) if matches!(s.code(), tonic::Code::Unavailable | tonic::Code::DeadlineExceeded) => {
                let why = format!("master {} ({}): {}", self.target, self.addr, s.message());
                return Err(RPCError::Unreachable(Unreachable::new(&AnyError::error(why))));
            }
            Err(s) => {
                let why = format!("master {} ({}): {}", self.target, self.addr, s.message());
                return Err(RPCError::Network(NetworkError::new(&AnyError::error(why))));
            }
        };
        let result: Result<Resp, RaftError<NodeId, E>> =
            serde_json::from_slice(&answer.body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RaftKind::AppendEntries, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        self.call(RaftKind::InstallSnapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(RaftKind::Vote, &rpc, &option).await
    }
}

/// A peer's message handed to this master's Raft; the answer is its result
/// as JSON. Its sender (the leader or candidate it names) is heard from.
pub async fn handle(
    raft: &super::ThawRaft,
    contacts: &super::contact::Contacts,
    msg: RaftMessage,
) -> thaw_common::Result<RaftMessage> {
    fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
        serde_json::to_vec(v).expect("raft messages serialize")
    }
    fn parse<T: serde::de::DeserializeOwned>(b: &[u8]) -> thaw_common::Result<T> {
        serde_json::from_slice(b).map_err(|e| thaw_common::ThawError::invalid(format!("malformed raft message: {e}")))
    }
    let kind = RaftKind::try_from(msg.kind).unwrap_or(RaftKind::Unspecified);
    let heard = |vote: &openraft::Vote<NodeId>| {
        if let Some(id) = vote.leader_id().voted_for() {
            contacts.heard(id, std::time::Instant::now());
        }
    };
    let body = match kind {
        RaftKind::AppendEntries => {
            let rpc: AppendEntriesRequest<TypeConfig> = parse(&msg.body)?;
            heard(&rpc.vote);
            json(&raft.append_entries(rpc).await)
        }
        RaftKind::Vote => {
            let rpc: VoteRequest<NodeId> = parse(&msg.body)?;
            heard(&rpc.vote);
            json(&raft.vote(rpc).await)
        }
        RaftKind::InstallSnapshot => {
            let rpc: InstallSnapshotRequest<TypeConfig> = parse(&msg.body)?;
            heard(&rpc.vote);
            json(&raft.install_snapshot(rpc).await)
        }
        RaftKind::Unspecified => {
            return Err(thaw_common::ThawError::invalid(format!("unknown raft message kind {}", msg.kind)));
        }
    };
    Ok(RaftMessage { kind: msg.kind, body })
}

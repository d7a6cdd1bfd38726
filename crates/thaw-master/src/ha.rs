//! Highly available masters: a group of masters over a replicated journal.
//!
//! Ignem (III-A5) and DYRS (III-C1) assume a backup master; Alluxio runs
//! several on an embedded Raft journal. Here each master of a group
//! (`thaw master --id N --peers a,b,c`) runs a Raft node (openraft: the most
//! used Raft crate in Rust, async on tokio, with snapshots, and storage and
//! network left to the application, so the log lives in the journal's own
//! redb file and the messages travel on the master's gRPC port). Its state
//! machine *is* the journal ([`store`]): every master holds the namespace and
//! lineage on disk. The leader alone runs a [`Master`]: built from its copy of
//! the journal when it is elected (after applying everything committed), its
//! commits go through Raft and return once a majority holds them. Everything
//! else stays soft, as after a restart today: workers re-register with the new
//! leader (a new epoch), migrations start empty and jobs ask again. The
//! others answer every call "not the leader" with the leader's address, which
//! clients follow ([`thaw_common::failover`]).
//!
//! Raft's own timing: heartbeats every 100 ms; a follower stands for
//! election after its leader's lease (1 s) and a random 0.5-1 s more of
//! silence, so a dead leader is replaced within about 2 s, while a busy
//! 2-core machine does not call needless elections.

pub mod contact;
pub mod network;
pub mod store;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openraft::{BasicNode, ServerState};
use thaw_common::failover::NOT_LEADER_HEADER;
use thaw_common::proto::RaftMessage;
use thaw_common::{Result, ThawError};
use tokio_util::sync::CancellationToken;

pub use crate::config::GroupConfig;
use crate::config::MasterConfig;
use crate::journal::{Commit, Journal, JournalOp};
use crate::master::Master;

openraft::declare_raft_types!(
    /// Raft's types for a group of masters: a log entry carries one journal
    /// commit ([`Batch`]).
    pub TypeConfig:
        D = Batch,
        R = (),
        SnapshotData = std::io::Cursor<Vec<u8>>,
);

pub type ThawRaft = openraft::Raft<TypeConfig>;

/// One master commit, encoded (`JournalBatch`): a Raft log entry's payload.
/// It crosses the wire (JSON) as base64.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch(pub Vec<u8>);

impl serde::Serialize for Batch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use base64::Engine;
        s.serialize_str(&base64::engine::general_purpose::STANDARD_NO_PAD.encode(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Batch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use base64::Engine;
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD_NO_PAD.decode(s).map(Batch).map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "journal batch ({} bytes)", self.0.len())
    }
}

/// The leader's current term: its master and the tasks that run it.
struct Leading {
    master: Arc<Master>,
    stop: CancellationToken,
    /// The term it was built for: a master re-elected in a later term (its
    /// state may have missed what another leader committed meanwhile) builds
    /// a new one.
    term: u64,
}

/// A master's membership in a group: its Raft node, and while it leads, the
/// [`Master`] that serves.
pub struct Group {
    pub config: GroupConfig,
    master_config: MasterConfig,
    raft: ThawRaft,
    /// Raft runs on threads of its own: a master commit blocks its caller
    /// (under the state lock) until Raft commits, which must not wait for a
    /// thread that caller holds.
    rt: std::sync::Mutex<Option<tokio::runtime::Runtime>>,
    rt_handle: tokio::runtime::Handle,
    journal: Arc<Journal>,
    leading: RwLock<Option<Leading>>,
    /// Set by a commit Raft refused: this master stops serving at once.
    deposed: tokio::sync::Notify,
    /// When a heartbeat round that a majority acknowledged began (the
    /// leader's lease runs from there).
    confirmed: std::sync::Mutex<Option<std::time::Instant>>,
    /// When each other master was last heard from (status shows it).
    contacts: Arc<contact::Contacts>,
}

/// How long after a majority acknowledged it a leader serves without asking
/// again: well inside the followers' own lease (1 s), so that no other
/// leader can exist meanwhile.
const LEASE: Duration = Duration::from_millis(300);

/// Commits through Raft, as HDFS's NameNode logs its edits: the entry is
/// appended to the log under the master's state lock (so the log's order is
/// the state's order), and the wait for a majority happens after the lock is
/// let go, before the caller's answer ([`await_commits`]): concurrent
/// callers' entries share replication rounds and fsyncs (group commit), and
/// no thread waits on the network under the lock. A commit outside an RPC (a
/// lease expiry, a checkpoint's record) is awaited by a task of its own. A
/// commit that fails leaves this master's state ahead of the group's: it
/// stops serving at once (a new leader starts from the replicated journal).
struct RaftCommit {
    raft: ThawRaft,
    rt: tokio::runtime::Handle,
    group: std::sync::Weak<Group>,
    /// The term its master was built for: in another, its state may lack
    /// what another leader committed, so it commits nothing more.
    term: u64,
}

/// A commit that takes longer has no majority (a partition, or most of the
/// group down): the caller gets an error instead of waiting forever.
const COMMIT_WAIT: Duration = Duration::from_secs(10);

impl Commit for RaftCommit {
    fn commit(&self, ops: &[JournalOp], next_id: u64) -> Result<()> {
        if self.raft.metrics().borrow().current_term != self.term {
            self.deposed();
            return Err(ThawError::unavailable("this master no longer leads its group (a new term began): retry"));
        }
        let batch = Batch(crate::journal::encode_batch(ops, next_id));
        // An unbounded channel's send to Raft's core: it does not wait.
        let rx = futures::executor::block_on(self.raft.client_write_ff(batch)).map_err(|e| {
            self.deposed();
            ThawError::unavailable(format!("the journal is not accepting writes ({e}); retry"))
        })?;
        let group = self.group.clone();
        let wait: crate::commits::Pending = Box::pin(async move {
            let why = match tokio::time::timeout(COMMIT_WAIT, rx).await {
                Ok(Ok(Ok(_))) => return Ok(()),
                Ok(Ok(Err(e))) => e.to_string(),
                Ok(Err(_)) => "the group's log stopped".to_string(),
                Err(_) => format!("no majority of the group answered within {COMMIT_WAIT:?}"),
            };
            if let Some(g) = group.upgrade() {
                g.deposed.notify_one();
            }
            Err(ThawError::unavailable(format!(
                "the journal write was not committed ({why}); this master no longer leads its group: retry"
            )))
        });
        if let Some(wait) = crate::commits::defer(wait) {
            // Not within an RPC: its own task waits, and deposes on failure.
            self.rt.spawn(async move {
                if let Err(e) = wait.await {
                    tracing::warn!(error = %e, "a background journal commit failed");
                }
            });
        }
        Ok(())
    }
}

impl RaftCommit {
    fn deposed(&self) {
        if let Some(g) = self.group.upgrade() {
            g.deposed.notify_one();
        }
    }
}

impl Group {
    /// Starts this master's Raft node (initializing the group on first start)
    /// and the task that runs a [`Master`] while this one leads.
    pub async fn start(
        group: GroupConfig,
        master_config: MasterConfig,
        http: crate::tasks::HttpListeners,
        rpc: thaw_common::metrics::Latencies,
        shutdown: CancellationToken,
    ) -> Result<Arc<Group>> {
        let journal = Arc::new(Journal::open(&master_config.journal_dir)?);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("thaw-raft")
            .enable_all()
            .build()
            .map_err(|e| ThawError::internal(format!("raft runtime: {e}")))?;
        let rt_handle = rt.handle().clone();
        let raft_config = openraft::Config {
            cluster_name: "thaw-masters".into(),
            heartbeat_interval: 100,
            election_timeout_min: 500,
            election_timeout_max: 1000,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(5000),
            max_in_snapshot_log_to_keep: 1000,
            ..Default::default()
        }
        .validate()
        .map_err(|e| ThawError::invalid(format!("raft config: {e}")))?;
        let credentials = match &master_config.secret {
            Some(s) => Some(Arc::new(thaw_common::auth::Credentials::from_secret(
                s.clone(),
                thaw_common::auth::SUPERUSER,
                Vec::new(),
            )?)),
            None => None,
        };
        let tls = match &master_config.tls_ca {
            Some(ca) => Some(Arc::new(thaw_common::tls::ClientTls::load(ca)?)),
            None => None,
        };
        let contacts = Arc::new(contact::Contacts::default());
        let network = network::Network { credentials, tls, contacts: contacts.clone() };
        let (log, sm) = (store::LogStore::new(journal.clone()), store::StateMachine::new(journal.clone()));
        let id = group.id;
        let raft = rt_handle
            .spawn(async move { ThawRaft::new(id, Arc::new(raft_config), network, log, sm).await })
            .await
            .map_err(|e| ThawError::internal(format!("raft: {e}")))?
            .map_err(|e| ThawError::internal(format!("raft: {e}")))?;
        let members: BTreeMap<u64, BasicNode> =
            group.peers.iter().enumerate().map(|(i, a)| (i as u64 + 1, BasicNode::new(a))).collect();
        // A new group starts when its master 1 does: it alone initializes the
        // membership (the others learn it from its first messages), so a new
        // group's first leader is master 1.
        let raft2 = raft.clone();
        let fresh =
            rt_handle.spawn(async move { !raft2.is_initialized().await.unwrap_or(true) }).await.unwrap_or(false);
        if fresh && id == 1 {
            let raft = raft.clone();
            rt_handle
                .spawn(async move { raft.initialize(members).await })
                .await
                .map_err(|e| ThawError::internal(format!("raft: {e}")))?
                .map_err(|e| ThawError::internal(format!("initializing the group: {e}")))?;
            tracing::info!(id, peers = ?group.peers, "a new group of masters: initialized");
        } else if fresh {
            tracing::info!(id, "a new group: waiting for master 1 to start it");
        } else {
            // The group is fixed when it starts: a journal of another group
            // (or another order of --peers) would split it.
            let recorded: Vec<String> = {
                let m = raft.metrics().borrow().membership_config.clone();
                m.nodes().map(|(_, n)| n.addr.clone()).collect()
            };
            if !recorded.is_empty() && recorded != group.peers {
                let raft = raft.clone();
                let _ = rt_handle.spawn(async move { raft.shutdown().await }).await;
                rt.shutdown_background();
                return Err(ThawError::invalid(format!(
                    "the journal in {} belongs to the group {} but --peers says {}; \
                     a group's masters and their order are fixed when it starts",
                    master_config.journal_dir.display(),
                    recorded.join(","),
                    group.peers.join(",")
                )));
            }
        }
        tracing::info!(id, address = group.address(), "master joined its group; waiting for a leader");
        let g = Arc::new(Group {
            config: group,
            master_config,
            raft,
            rt: std::sync::Mutex::new(Some(rt)),
            rt_handle,
            journal,
            leading: RwLock::new(None),
            deposed: tokio::sync::Notify::new(),
            confirmed: std::sync::Mutex::new(None),
            contacts,
        });
        tokio::spawn(g.clone().follow_leadership(http, rpc, shutdown));
        Ok(g)
    }

    /// The master that serves now, or a "not the leader" status that points
    /// clients to the one that does.
    ///
    /// A leader serves only while a majority has acknowledged it within
    /// [`LEASE`]: no other master can have been elected since (followers
    /// refuse votes for a second after they last heard from their leader),
    /// so what it serves is current. Past that (a leader paused, or cut off),
    /// it asks the group first (one heartbeat round).
    pub async fn master(&self) -> std::result::Result<Arc<Master>, tonic::Status> {
        let (leader, term, leads) = self.leadership();
        let serving =
            self.leading.read().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| (l.master.clone(), l.term));
        if let Some((master, t)) = serving
            && leads
            && t == term
        {
            let fresh = self.confirmed.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|at| at.elapsed() < LEASE);
            if fresh {
                return Ok(master);
            }
            let asked = std::time::Instant::now();
            let raft = self.raft.clone();
            let confirmed =
                self.rt_handle.spawn(async move { raft.get_read_log_id().await.is_ok() }).await.unwrap_or(false);
            if confirmed && self.leadership().1 == term {
                *self.confirmed.lock().unwrap_or_else(|e| e.into_inner()) = Some(asked);
                return Ok(master);
            }
        }
        let addr = leader.and_then(|l| self.config.address_of(l)).unwrap_or_default().to_string();
        let why = if addr.is_empty() {
            format!("master {} ({}) is not serving: its group has no leader yet", self.config.id, self.config.address())
        } else if leader == Some(self.config.id) {
            format!("master {} ({}) was just elected and is loading its journal", self.config.id, addr)
        } else {
            format!(
                "master {} ({}) is not the leader of its group; the leader is {addr}",
                self.config.id,
                self.config.address()
            )
        };
        let mut status: tonic::Status = ThawError::unavailable(why).into();
        if let Ok(v) = addr.parse() {
            status.metadata_mut().insert(NOT_LEADER_HEADER, v);
        }
        Err(status)
    }

    pub fn master_config(&self) -> &MasterConfig {
        &self.master_config
    }

    /// A peer's Raft message, handled on Raft's threads.
    pub async fn handle(&self, msg: RaftMessage) -> Result<RaftMessage> {
        let (raft, contacts) = (self.raft.clone(), self.contacts.clone());
        self.rt_handle
            .spawn(async move { network::handle(&raft, &contacts, msg).await })
            .await
            .map_err(|e| ThawError::internal(format!("raft: {e}")))?
    }

    /// The group as this master sees it (replication progress is known to
    /// the leader only), with whether each answers and since when it has not.
    pub fn members(&self) -> Vec<thaw_common::proto::MasterMember> {
        let m = self.raft.metrics().borrow().clone();
        let last = m.last_log_index.unwrap_or(0);
        let now = std::time::Instant::now();
        self.config
            .peers
            .iter()
            .enumerate()
            .map(|(i, addr)| {
                let id = i as u64 + 1;
                let leader = m.current_leader == Some(id);
                let held = if id == self.config.id {
                    Some(last)
                } else {
                    m.replication.as_ref().and_then(|r| r.get(&id)).map(|l| l.map_or(0, |l| l.index))
                };
                let liveness = if id == self.config.id {
                    contact::Liveness { reachable: true, last_heard: Some(std::time::Duration::ZERO) }
                } else {
                    self.contacts.liveness(id, now)
                };
                thaw_common::proto::MasterMember {
                    id,
                    address: addr.clone(),
                    leader,
                    log_index: held.unwrap_or(0),
                    behind: held.map_or(0, |h| last.saturating_sub(h)),
                    term: m.current_term,
                    reachable: liveness.reachable,
                    last_heard_ms_ago: liveness.last_heard.map(|d| d.as_millis() as u64),
                }
            })
            .collect()
    }

    /// (who leads, the term, whether this master does), as Raft knows now.
    fn leadership(&self) -> (Option<u64>, u64, bool) {
        let watch = self.raft.metrics();
        let m = watch.borrow();
        (m.current_leader, m.current_term, m.state == ServerState::Leader && m.current_leader == Some(self.config.id))
    }

    /// Who leads, as this master knows: (id, address).
    pub fn leader(&self) -> Option<(u64, String)> {
        let id = self.raft.metrics().borrow().current_leader?;
        Some((id, self.config.address_of(id)?.to_string()))
    }

    /// Runs a [`Master`] while this one leads, until `shutdown`.
    async fn follow_leadership(
        self: Arc<Self>,
        http: crate::tasks::HttpListeners,
        rpc: thaw_common::metrics::Latencies,
        shutdown: CancellationToken,
    ) {
        // The HTTP listeners outlive terms: each term serves on a copy.
        let web = http.web.and_then(|l| l.into_std().ok());
        let metrics = http.metrics.and_then(|l| l.into_std().ok());
        let mut watch = self.raft.metrics();
        loop {
            let (leads, term) = {
                let m = watch.borrow_and_update();
                (m.state == ServerState::Leader && m.current_leader == Some(self.config.id), m.current_term)
            };
            let serving_term = self.leading.read().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| l.term);
            if leads && serving_term.is_some_and(|t| t != term) {
                tracing::warn!(id = self.config.id, term, "leading again in a new term: rebuilding from the journal");
                self.step_down();
            }
            let serving = self.leading.read().unwrap_or_else(|e| e.into_inner()).is_some();
            if leads && !serving {
                let copy = |l: &Option<std::net::TcpListener>| {
                    l.as_ref().and_then(|l| l.try_clone().ok()).and_then(|l| tokio::net::TcpListener::from_std(l).ok())
                };
                let http = crate::tasks::HttpListeners { web: copy(&web), metrics: copy(&metrics) };
                // A restarted leader believes it leads until a peer answers
                // (ensure_linearizable fails then): it waits for the group.
                if let Err(e) = self.lead(http, rpc.clone(), &shutdown).await {
                    tracing::info!(error = %e, "not serving: leadership not confirmed by the group");
                    self.step_down();
                }
            } else if !leads && serving {
                tracing::warn!(id = self.config.id, "no longer the leader: stopped serving");
                self.step_down();
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                r = watch.changed() => if r.is_err() { break },
                _ = self.deposed.notified() => {
                    tracing::warn!(id = self.config.id, "a commit failed: stopped serving until re-elected");
                    self.step_down();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        self.step_down();
        let raft = self.raft.clone();
        let _ = self.rt_handle.spawn(async move { raft.shutdown().await }).await;
        if let Some(rt) = self.rt.lock().unwrap_or_else(|e| e.into_inner()).take() {
            rt.shutdown_background();
        }
    }

    /// Becomes the serving master: waits until this node has applied every
    /// committed entry, then builds a [`Master`] on its journal.
    async fn lead(
        self: &Arc<Self>,
        http: crate::tasks::HttpListeners,
        rpc: thaw_common::metrics::Latencies,
        shutdown: &CancellationToken,
    ) -> Result<()> {
        let started = std::time::Instant::now();
        let term = self.raft.metrics().borrow().current_term;
        let raft = self.raft.clone();
        self.rt_handle
            .spawn(async move { raft.ensure_linearizable().await })
            .await
            .map_err(|e| ThawError::internal(format!("raft: {e}")))?
            .map_err(|e| ThawError::unavailable(format!("not the leader after all: {e}")))?;
        let loaded = Master::load(&self.journal)?;
        let commit = Arc::new(RaftCommit {
            raft: self.raft.clone(),
            rt: self.rt_handle.clone(),
            group: Arc::downgrade(self),
            term,
        });
        if self.raft.metrics().borrow().current_term != term {
            return Err(ThawError::unavailable("the term changed while the journal was loading"));
        }
        let master = Arc::new(Master::open_with(self.master_config.clone(), loaded, commit)?);
        master.check_under_store().await?;
        let stop = shutdown.child_token();
        crate::tasks::spawn_background(&master, http, &rpc, &stop);
        tracing::info!(
            id = self.config.id,
            address = self.config.address(),
            took_ms = started.elapsed().as_millis() as u64,
            "leading the group: serving"
        );
        *self.leading.write().unwrap_or_else(|e| e.into_inner()) = Some(Leading { master, stop, term });
        Ok(())
    }

    fn step_down(&self) {
        if let Some(l) = self.leading.write().unwrap_or_else(|e| e.into_inner()).take() {
            l.stop.cancel();
        }
    }
}

//! The server state one shard owns: metadata (the sequencer's, or a replica), partitions,
//! sessions, consumer groups, connections; the metadata commit path ([`Server::commit`]) and
//! the periodic work. Requests enter through `Server::handle`, which the handlers define
//! (their pipeline decides what this shard answers and what goes to the sequencer): this
//! module knows nothing of them.
//!
//! With several shards ([`crate::node`]), a shard handles the data path itself (send, poll,
//! fetch and offsets, reads of metadata) against its metadata replica and the shared partition
//! routes; what changes metadata, sessions or consumer groups, or reads the groups, is
//! forwarded whole to the leader (the metadata sequencer), which answers it with its own
//! server and hands the connection state back.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::{Rc, Weak};
use std::sync::Arc;

use proto::header::EvictionReason;
use proto::primitives::Permissions;
use segment::storage::either::Either;

pub use crate::connection::ClientRecord;
use crate::connection::{Connection, TransportKind};
pub use crate::data::ShardStorage;
use crate::data::{Cancel, DataError, DataPlane, GroupConfig, ShardPlace};
use crate::liveness::{self, Activity, Liveness, Stale};
use crate::login_limit::{LoginLimiter, LoginLimits};
pub use crate::mail::ReplicaError;
use crate::mail::{Reply, ShardMessage};
use crate::metadata::{Journal, JournalError, Metadata, MetadataOp, UserStatus};
use crate::node::{Node, ShardGone};
use crate::refusal::Refusal;
use crate::sessions::Sessions;

mod replication;
mod sequencer;

pub use replication::{Replication, Submission};

use sequencer::Sequencer;

/// The server version reported at login and in stats: the Iggy generation we answer as.
pub const SERVER_VERSION: &str = "0.9.0";
/// `SERVER_VERSION` as the decimal semver stats report (`major·1e6 + minor·1e3 + patch`).
pub const SERVER_SEMVER: u32 = 9000;

/// Validations of one metadata change at most while others' changes keep committing ahead
/// of it (each stale attempt means another change committed: progress, not a livelock).
/// Creates racing for the next free id commit one per round, so a crowd of N such clients
/// takes N rounds for its last one: 200 at once commit in half a second in memory.
const VALIDATIONS_MAX: u32 = 1024;

/// What the server says about itself: the roster and start time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// Every node of the cluster; one node (this one) outside cluster mode, whose ports are
    /// the ones its listeners bound.
    pub roster: crate::cluster::Roster,
    /// The port the TCP listener bound; 0 when TCP is off.
    pub tcp_port: u16,
    /// The port the WebSocket listener bound; 0 when it is off.
    pub websocket_port: u16,
    /// The port the QUIC listener bound; 0 when it is off.
    pub quic_port: u16,
    /// The port the HTTP listener bound; 0 when it is off.
    pub http_port: u16,
    /// µs since the epoch.
    pub started_at_us: u64,
    /// Consumer-group timeouts (`consumer_group.rebalancing_timeout`, `heartbeat.interval`).
    pub groups: GroupConfig,
    /// Failed-login backoff (`[login]`).
    pub logins: LoginLimits,
    /// Reads verify every message checksum (`[system.partition] validate_checksum`).
    pub validate_checksum: bool,
    /// `replicated` topics sync before the acknowledgement too, as `persisted` ones do
    /// (`[system.partition] enforce_fsync`).
    pub enforce_fsync: bool,
    /// `replicated`'s threshold sync starts at most once per this many µs
    /// (`[system.partition] sync_interval`; 0: at every threshold).
    pub sync_interval_us: u64,
    /// Start from the metadata snapshot alone when the journal lost its start
    /// (`--accept-metadata-loss`; see [`Journal::open_with`]).
    pub accept_metadata_loss: bool,
}

/// Everything a shard serves from: metadata, partitions, sessions, consumer groups.
#[derive(Debug)]
pub struct Server {
    /// The leader's metadata, or this shard's replica of it. Shared, so a reader that must
    /// hold it across an await takes the `Rc` instead of a copy; a commit changes it in place
    /// unless such a reader still holds the previous state.
    pub(crate) metadata: RefCell<Rc<Metadata>>,
    /// The leader's commit queue and journal.
    sequencer: Sequencer,
    /// This server, for the tasks it starts (constructors hand out an `Rc`).
    me: Weak<Server>,
    pub(crate) data: DataPlane,
    /// The session table; only the leader's changes (see [`Sessions`]).
    pub(crate) sessions: RefCell<Sessions>,
    pub(crate) info: ServerInfo,
    /// What the shards share: routes, live sessions, clients, parked requests, inboxes.
    pub(crate) node: Arc<Node>,
    /// CPU usage between two `GET_STATS` on this shard.
    pub(crate) cpu: crate::cpu::CpuSampler,
    /// Failed logins by address and user name; only the leader's is used (logins go there).
    pub(crate) logins: RefCell<LoginLimiter>,
    /// Cluster mode: how changes are replicated before they apply (`crate::cluster`).
    pub(crate) replication: std::cell::OnceCell<Replication>,
    /// Cluster mode: the sends applied, by their SDK identity, so a retry is not applied
    /// twice.
    pub(crate) retries: RefCell<crate::retries::Retries>,
    /// Cluster mode: the metadata changes applied, by their SDK identity (a table of its own,
    /// the same on every node: see `crate::retries`).
    pub(crate) changes: RefCell<crate::retries::Retries>,
    /// How credentials are stored (sealed when encryption at rest is on).
    pub(crate) credentials: crate::at_rest::credentials::CredentialSeal,
}

/// A parked request's registration: its cancel signal, removed from the registry on drop.
#[derive(Debug)]
pub struct Parked<'s> {
    server: &'s Server,
    key: (u128, u64),
    pub cancel: Arc<Cancel>,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.server.node.parked.pin().remove(&self.key);
    }
}

/// Start-up failed: the metadata (snapshot and journal) cannot be read or replayed, or
/// partitions cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("open the metadata journal")]
    Journal(#[from] JournalError),
    #[error("open the partitions")]
    Data(#[from] DataError),
    #[error("partition directories the metadata does not hold")]
    Orphans(#[from] crate::data::OrphanError),
}

impl Server {
    /// A server whose metadata lives only in memory and whose data plane is rooted at
    /// `root`: for tests, and for callers that replay nothing. Every constructor hands out
    /// the server shared, as the tasks it starts hold it too.
    pub fn new(info: ServerInfo, metadata: Metadata, root: PathBuf) -> Rc<Self> {
        let (node, _) = Node::new(1);
        Self::for_shard(info, metadata, root, node, 0)
    }

    /// Shard `index` of the server whose shards share `node`, starting from `metadata` (the
    /// leader's state at start-up, for the other shards). Opens no partition.
    pub fn for_shard(
        info: ServerInfo,
        metadata: Metadata,
        root: PathBuf,
        node: Arc<Node>,
        index: usize,
    ) -> Rc<Self> {
        let storage = Either::Left(crate::disk::compio());
        Self::for_shard_on(storage, info, metadata, root, node, index)
    }

    /// [`Self::for_shard`] on `storage`.
    pub fn for_shard_on(
        storage: ShardStorage,
        info: ServerInfo,
        metadata: Metadata,
        root: PathBuf,
        node: Arc<Node>,
        index: usize,
    ) -> Rc<Self> {
        let session_seed = info.started_at_us / 1000;
        let place = ShardPlace {
            index,
            count: node.shard_count(),
            sequencer: node.sequencer(),
        };
        let routes = Arc::clone(&node.routes);
        Rc::new_cyclic(|me| Self {
            metadata: RefCell::new(Rc::new(metadata)),
            sequencer: Sequencer::default(),
            me: me.clone(),
            data: DataPlane::for_shard(storage, root, info.groups, place, routes)
                .with_validate_checksum(info.validate_checksum)
                .with_enforce_fsync(info.enforce_fsync)
                .with_sync_interval(info.sync_interval_us)
                .with_group_views(Arc::clone(&node.group_views))
                .with_clock(Arc::clone(&node.clock))
                .with_metrics(Arc::clone(node.metrics.shard(index)))
                .with_record_key(node.record_key.get().cloned()),
            sessions: RefCell::new(
                Sessions::publishing(session_seed, Arc::clone(&node.sessions))
                    .with_owners(Arc::clone(&node.session_owners)),
            ),
            logins: RefCell::new(LoginLimiter::new(info.logins)),
            replication: std::cell::OnceCell::new(),
            retries: RefCell::new(crate::retries::Retries::sends()),
            changes: RefCell::new(crate::retries::Retries::changes()),
            credentials: node.credentials(),
            info,
            node,
            cpu: crate::cpu::CpuSampler::new(),
        })
    }

    /// The metadata as this shard holds it now (shared, not copied).
    pub fn metadata(&self) -> Rc<Metadata> {
        Rc::clone(&self.metadata.borrow())
    }

    /// The topic settings a create starts from: the catalog's, with `replication_factor`
    /// the number of nodes, as every partition is on every node (§7.4: the answering node's
    /// default; 1 on a single node). It is also the largest factor a create may ask for.
    pub fn topic_defaults(&self) -> crate::metadata::TopicSettings {
        let nodes = u32::try_from(self.info.roster.nodes.len()).unwrap_or(u32::MAX);
        crate::metadata::TopicSettings {
            replication_factor: nodes.max(1),
            ..crate::metadata::TopicSettings::default()
        }
    }

    /// What the server says about itself.
    pub fn info(&self) -> &ServerInfo {
        &self.info
    }

    /// For every consumer group and partition, the members that may be served it now (see
    /// [`DataPlane::group_servers`]).
    pub fn group_servers(&self) -> Vec<(crate::data::GroupKey, u32, Vec<u128>)> {
        self.data.group_servers()
    }

    /// Whether every group's published view says what the sequencer's runtime decided (its
    /// generation, members and who may be served each partition); the reason when not.
    pub fn check_group_views(&self) -> Result<(), String> {
        self.data.check_group_views()
    }

    /// The time now, by the node's clock (µs since the epoch).
    pub fn now_us(&self) -> u64 {
        self.node.clock.now_us()
    }

    /// This shard's measurements (`crate::metrics`).
    pub fn metrics(&self) -> &crate::metrics::ShardMetrics {
        self.node.metrics.shard(self.place().index)
    }

    /// This shard's place among the server's shards.
    pub fn place(&self) -> ShardPlace {
        self.data.place()
    }

    /// Cluster mode, before the replica log replays: see [`DataPlane::rebuilt_from_log`].
    pub fn rebuilt_from_log(&self) {
        self.data.rebuilt_from_log();
    }

    /// Opens the partitions this shard owns (start-up of a shard other than the leader,
    /// after [`Self::for_shard`]).
    pub async fn open_partitions(&self) -> Result<(), DataError> {
        let snapshot = Rc::clone(&self.metadata.borrow());
        self.data.open_all(&snapshot).await
    }

    /// Opens the leader (or only) shard on the data directory `root`: loads
    /// `metadata/snapshot.bin` and replays `metadata/journal.wal` after it (a torn tail cut,
    /// corruption refused; see [`crate::metadata::journal`]) and opens the partitions it
    /// owns. The other shards start from [`Self::metadata`] afterwards.
    pub async fn open(
        info: ServerInfo,
        root: PathBuf,
        node: Arc<Node>,
    ) -> Result<Rc<Self>, OpenError> {
        Self::open_on(Either::Left(crate::disk::compio()), info, root, node).await
    }

    /// [`Self::open`] on `storage`.
    pub async fn open_on(
        storage: ShardStorage,
        info: ServerInfo,
        root: PathBuf,
        node: Arc<Node>,
    ) -> Result<Rc<Self>, OpenError> {
        let directory = segment::layout::metadata_directory(&root);
        let accept_loss = info.accept_metadata_loss;
        let (journal, metadata) = Journal::open_with(&storage, &directory, accept_loss).await?;
        crate::data::set_aside_orphans(&storage, &root, &metadata, accept_loss).await?;
        let sequencer = node.sequencer();
        let server = Self::for_shard_on(storage, info, metadata, root, node, sequencer);
        server.open_partitions().await?;
        server.sequencer.set_journal(journal);
        Ok(server)
    }

    /// Sends shard `shard` the message `letter` makes around a reply channel, and waits for
    /// the reply.
    pub(crate) async fn ask<T>(
        &self,
        shard: usize,
        letter: impl FnOnce(Reply<T>) -> ShardMessage,
    ) -> Result<T, ShardGone> {
        let (reply, answer) = crossfire::oneshot::oneshot();
        self.node.send(shard, letter(reply)).await?;
        match answer.await {
            Ok(value) => Ok(value),
            // The message was dropped unanswered: the shard's runtime ended.
            Err(crossfire::RecvError) => Err(ShardGone(shard)),
        }
    }

    /// Commits one metadata operation on the sequencer (from any shard; see the `sequencer`
    /// module). Returns the new commit number once every shard has applied it, so a client
    /// that is answered reads its write on whichever shard serves its next request.
    pub async fn commit(&self, op: MetadataOp) -> Result<u64, Refusal> {
        self.commit_from(op, None).await
    }

    /// As [`Self::commit`] for a change a client asked for as `origin` (cluster mode
    /// remembers it, so a retry is answered instead of applied twice: `crate::retries`).
    async fn commit_from(
        &self,
        op: MetadataOp,
        origin: Option<crate::retries::Origin>,
    ) -> Result<u64, Refusal> {
        if !self.place().is_leader() {
            // Only cluster mode uses origins, and it runs one shard: the leader.
            let sequencer = self.node.sequencer();
            let committed = self
                .ask(sequencer, |reply| ShardMessage::Commit { op, reply })
                .await;
            return committed.unwrap_or(Err(Refusal::Internal));
        }
        self.sequence(op, origin).await
    }

    /// Validates with `check` against this shard's metadata and commits the op it builds,
    /// answering the op and its commit number. When a change queued ahead of it committed
    /// first and the op no longer applies ([`Refusal::Stale`]: two clients creating one name,
    /// or taking the next free id, at once), it validates again: the sequencer answers only
    /// once every shard applied that change, so this shard's metadata has it, and the check
    /// now gives the typed refusal (`1012` name taken) or an op that applies (the next id).
    ///
    /// A cluster-mode retry whose first attempt committed meanwhile (it was still in the log
    /// of a view change) is answered with that attempt's op and commit, not validated again
    /// into "already exists". A change that stays stale with no commit in between is a
    /// disagreement between validation and apply, not a race: `1 Error` at once.
    pub(crate) async fn commit_validated(
        &self,
        origin: Option<crate::retries::Origin>,
        check: impl Fn(&Metadata) -> Result<MetadataOp, Refusal>,
    ) -> Result<(MetadataOp, u64), Refusal> {
        for _ in 0..VALIDATIONS_MAX {
            if let Some(first) = self.committed_change(origin) {
                return Ok(first);
            }
            let validated_at = self.metadata.borrow().commit;
            let op = check(&self.metadata.borrow())?;
            let committed = self.commit_from(op.clone(), origin).await;
            if committed != Err(Refusal::Stale) {
                return committed.map(|commit| (op, commit));
            }
            if self.metadata.borrow().commit == validated_at {
                log::error!(
                    "metadata: {} validated but does not apply at commit {validated_at}",
                    op.kind()
                );
                return Err(Refusal::Internal);
            }
        }
        log::warn!("a metadata change went stale {VALIDATIONS_MAX} times in a row");
        Err(Refusal::Internal)
    }

    /// Has every other shard apply the committed `op`, in commit order (the sequencer runs
    /// one commit at a time). A shard that fails to follow is logged: its replica no longer
    /// matches.
    async fn replicate(&self, op: &MetadataOp) {
        let others = (0..self.node.shard_count()).filter(|&shard| shard != self.place().index);
        let applied = others.map(|shard| {
            let op = op.clone();
            async move {
                let result = self
                    .ask(shard, |reply| ShardMessage::Apply { op, reply })
                    .await;
                (shard, result)
            }
        });
        for (shard, result) in futures_util::future::join_all(applied).await {
            match result {
                Ok(Ok(())) => {}
                Ok(Err(error)) => log::error!("shard {shard}: following a commit: {error}"),
                Err(gone) => log::error!("replicating a commit: {gone}"),
            }
        }
    }

    /// Applies an op the leader committed to this shard's replica and opens or closes the
    /// partitions it owns accordingly.
    pub async fn apply_committed(&self, op: &MetadataOp) -> Result<(), ReplicaError> {
        // Cluster mode numbers commits by replica-log op, which this count would not follow;
        // it runs one shard, so no other shard ever follows a commit there.
        debug_assert!(
            self.replication().is_none(),
            "a follower shard in cluster mode"
        );
        let next = {
            let mut metadata = self.metadata.borrow_mut();
            Rc::make_mut(&mut metadata).apply(op)?;
            Rc::clone(&metadata)
        };
        self.data.on_applied(op, &next).await?;
        Ok(())
    }

    /// Completes while a poll or fetch of any connection waits for the server's reply
    /// budget (`crate::reply_budget`): a transport then ends connections whose reply writes
    /// stalled.
    pub async fn replies_short(&self) {
        self.node.replies.short().await;
    }

    /// Registers a request about to wait (deferred poll, fetch) so a cancel can end it.
    pub fn park(&self, client_id: u128, request: u64) -> Parked<'_> {
        let cancel = Arc::new(Cancel::new());
        let key = (client_id, request);
        self.node.parked.pin().insert(key, Arc::clone(&cancel));
        Parked {
            server: self,
            key,
            cancel,
        }
    }

    /// Cancels the parked request of `client_id` numbered `request`; says whether one was
    /// waiting.
    pub fn cancel_parked(&self, client_id: u128, request: u64) -> bool {
        let cancel = self.node.parked.pin().get(&(client_id, request)).cloned();
        cancel.map(|cancel| cancel.cancel()).is_some()
    }

    /// Periodic work at `now_us`: stale-connection eviction, session expiry, consumer-group
    /// heartbeat eviction and hand-off timeouts. The runtime calls it on the leader every half
    /// heartbeat interval.
    /// Gives this shard's partitions the time: a `replicated` threshold sync that waited for
    /// its interval starts though no append came. Every shard calls it for its own.
    pub fn tick_partitions(&self, now_us: u64) {
        self.data.tick_partitions(now_us);
    }

    /// Tries again to open this shard's partitions that an earlier open left closed (a full
    /// disk, no free file descriptor); cheap when all are open. Every shard calls it for its
    /// own, after [`Self::tick_partitions`].
    pub async fn retry_unopened_partitions(&self, now_us: u64) {
        let metadata = || Rc::clone(&self.metadata.borrow());
        self.data.retry_unopened(now_us, metadata).await;
    }

    pub fn tick(&self, now_us: u64) {
        self.evict_stale(now_us);
        // Sessions whose identity lapsed on its own (an expired token) end within a tick.
        self.end_orphaned_sessions();
        let attached: std::collections::HashSet<u128> = self
            .node
            .clients
            .pin()
            .values()
            .filter_map(|client| client.client_id)
            .collect();
        let expired = self.sessions.borrow_mut().expire(now_us, &attached);
        for client_id in expired {
            log::info!("session of client {client_id:#x} ended: no connection for 60 s");
            self.data.leave_all_groups(client_id, now_us);
        }
        self.complete_handoffs(now_us);
    }

    /// Completes the consumer-group hand-offs that may complete now: the old owner's data
    /// is no longer in flight, or the rebalancing timeout passed. Cheap when none is
    /// pending; the runtime calls it often (leader only), since a stored offset or a
    /// finished poll that ends a hand-off's wait tells the group nothing by itself, and the
    /// new owner gets nothing from the partition until the hand-off completes.
    pub fn complete_handoffs(&self, now_us: u64) {
        for group in self.data.tick_groups(now_us) {
            log::debug!(
                "group {}/{}/{}: hand-off completed",
                group.stream_id,
                group.topic_id,
                group.group_id
            );
        }
    }

    /// Evicts every connection [`liveness::stale`] picks (§1.14): its client leaves all its
    /// groups, its session ends, and the connection's shard is told to send it
    /// `Eviction(StaleClient)` and close it. Leader only: the groups and sessions live there.
    fn evict_stale(&self, now_us: u64) {
        assert!(
            self.place().is_leader(),
            "groups and sessions live on the leader"
        );
        let Some(idle_max_us) = self.info.groups.idle_max_us() else {
            return;
        };
        let clients = self.node.clients.pin();
        let connections: Vec<Activity> = clients
            .iter()
            .map(|(number, record)| Activity {
                client_number: *number,
                client_id: record.client_id,
                last_request_us: record.liveness.last_request_us(),
            })
            .collect();
        let is_member = |client_id| self.data.is_group_member(client_id);
        for stale in liveness::stale(&connections, now_us, idle_max_us, is_member) {
            let Stale {
                client_number,
                client_id,
            } = stale;
            self.data.leave_all_groups(client_id, now_us);
            self.sessions.borrow_mut().end(client_id);
            if let Some(record) = clients.get(&client_number) {
                record.liveness.eviction().fire(EvictionReason::StaleClient);
            }
            log::info!(
                "client {client_number} (client id {client_id:#x}) evicted: nothing sent for \
                 more than {idle_max_us} µs while a consumer-group member"
            );
        }
    }

    /// One pass of the message cleaner at `now_us` (leader only: it reaches every partition
    /// through the routes); returns how many segments it deleted.
    pub async fn clean_messages(&self, now_us: u64) -> usize {
        let metadata = Rc::clone(&self.metadata.borrow());
        let deleted = self.data.enforce_retention(&metadata, now_us).await;
        let count = u64::try_from(deleted).unwrap_or(u64::MAX);
        self.metrics()
            .add(|metrics| &metrics.retention_deleted_segments, count);
        deleted
    }

    /// Closes every partition (shutdown).
    pub async fn close(&self) -> Result<(), DataError> {
        self.data.close().await
    }

    /// The at-rest key's fingerprint (zeros when encryption is off), which cluster nodes
    /// compare at their handshake.
    pub fn at_rest_fingerprint(&self) -> [u8; 32] {
        self.node.at_rest_fingerprint()
    }

    /// Commits the root user (id 0, every permission) when no user exists yet (first boot);
    /// says whether it did. `password_hash` is the plain argon2 hash: it is sealed here when
    /// encryption at rest is on.
    pub async fn ensure_root_user(
        &self,
        username: &str,
        password_hash: String,
    ) -> Result<bool, Refusal> {
        if !self.metadata.borrow().users.is_empty() {
            return Ok(false);
        }
        let op = MetadataOp::CreateUser {
            id: 0,
            username: username.to_owned(),
            password_hash: self.credentials.protect(password_hash),
            status: UserStatus::Active,
            permissions: Some(Permissions::root()),
            created_at: self.now_us(),
        };
        self.commit(op).await.map(|_| true)
    }

    /// Whether the user `username` exists with `password_hash` (a plain PHC string) as its
    /// password hash: how a cluster node tells that the root user committed is the one its
    /// own seed asked for.
    pub fn user_has_password_hash(&self, username: &str, password_hash: &str) -> bool {
        self.metadata.borrow().users.values().any(|user| {
            user.username == username
                && self
                    .credentials
                    .reveal(&user.password_hash)
                    .is_ok_and(|plain| plain == password_hash)
        })
    }

    /// The metadata commit number replies report.
    pub fn commit_number(&self) -> u64 {
        self.metadata.borrow().commit
    }

    /// Registers a new connection and returns its state.
    pub fn open_connection(&self, address: SocketAddr, transport: TransportKind) -> Connection {
        let number = self.node.next_client_number();
        let liveness = Arc::new(Liveness::new(self.now_us()));
        let record = ClientRecord {
            address,
            transport,
            user_id: None,
            client_id: None,
            liveness: Arc::clone(&liveness),
        };
        self.node.clients.pin().insert(number, record);
        Connection::new(number, address, transport, liveness)
    }

    /// Forgets a closed connection. Its session lives on for a `BIND_SESSION`.
    pub fn close_connection(&self, connection: &Connection) {
        self.node.clients.pin().remove(&connection.client_number);
    }

    /// Every open connection of every shard, by client number.
    pub fn clients(&self) -> BTreeMap<u32, ClientRecord> {
        let clients = self.node.clients.pin();
        clients
            .iter()
            .map(|(number, record)| (*number, record.clone()))
            .collect()
    }

    /// Ends, on the leader, every session whose identity no longer holds after a commit (its
    /// user deleted or deactivated, its token deleted), so nothing of it — groups, a later
    /// user under the same id — carries over; its connections are evicted.
    pub(crate) fn end_orphaned_sessions(&self) {
        let now = self.now_us();
        let ended = {
            let metadata = self.metadata.borrow();
            self.sessions.borrow_mut().end_where(|_, record| {
                let token = record.token.as_ref();
                metadata
                    .session_identity(record.user_id, token, now, &self.credentials)
                    .is_err()
            })
        };
        self.evict_ended(&ended, now, "its identity was revoked");
    }

    /// Ends, on the leader, every session of user `user_id` but the one of `keep` (a password
    /// change: the sessions opened with the old password end; the changer's stays).
    pub fn end_sessions_of(&self, user_id: u32, keep: Option<u128>) {
        if !self.place().is_leader() {
            return;
        }
        let ended = self
            .sessions
            .borrow_mut()
            .end_where(|client_id, record| record.user_id == user_id && Some(client_id) != keep);
        self.evict_ended(&ended, self.now_us(), "its user's password changed");
    }

    /// Makes the ended sessions of `ended` leave their groups and evicts their connections.
    /// One pass over the connections, however many sessions ended: a token shared by
    /// thousands of sessions must not cost thousands of passes.
    fn evict_ended(&self, ended: &[u128], now: u64, why: &str) {
        if ended.is_empty() {
            return;
        }
        for client_id in ended {
            self.data.leave_all_groups(*client_id, now);
            log::info!("session of client {client_id:#x} ended: {why}");
        }
        let ended: std::collections::HashSet<u128> = ended.iter().copied().collect();
        let clients = self.node.clients.pin();
        let connections = clients
            .values()
            .filter(|record| record.client_id.is_some_and(|id| ended.contains(&id)));
        for record in connections {
            record.liveness.eviction().fire(EvictionReason::NoSession);
        }
    }

    /// A connection closed: on the leader, a client left with no open connection leaves its
    /// consumer groups at once (its partitions move to the remaining members), as the
    /// reference server does; its session stays for a `BIND_SESSION` until it expires.
    pub async fn connection_closed(&self, client_id: u128) {
        if !self.place().is_leader() {
            let sequencer = self.node.sequencer();
            let forwarded = self
                .ask(sequencer, |reply| ShardMessage::ConnectionClosed {
                    client_id,
                    reply,
                })
                .await;
            if let Err(gone) = forwarded {
                log::warn!("client {client_id:#x} closed: {gone}");
            }
            return;
        }
        // Only a group member has anything to leave; checking that first keeps a mass
        // disconnect of N clients from scanning every connection N times.
        if !self.data.is_group_member(client_id) {
            return;
        }
        let attached = self
            .node
            .clients
            .pin()
            .values()
            .any(|record| record.client_id == Some(client_id));
        if !attached {
            self.data.leave_all_groups(client_id, self.now_us());
        }
    }
}

#[cfg(test)]
mod tests;

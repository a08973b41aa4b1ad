//! The server state one shard owns, and the entry point for every request.
//!
//! [`Server::handle`] applies the rules every command shares — header validation for the
//! connection's dialect, what an unauthenticated connection may send (PROTOCOL.md §1.9), body
//! decoding — and hands the decoded request to its family in [`crate::handler`].

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::lock::Mutex;

use proto::codes::CommandCode;
use proto::commands::Request;
use proto::header::{EvictionReason, HEADER_SIZE, Operation, RequestHeader};
use proto::primitives::Permissions;
use proto::{DecodeError, ErrorCode};
use segment::storage::compio::CompioStorage;

use crate::connection::{Connection, TransportKind};
use crate::data::{Cancel, DataError, DataPlane, GroupConfig};
use crate::handler;
use crate::metadata::{ApplyError, Journal, JournalError, Metadata, MetadataOp, UserStatus};
use crate::outcome::Outcome;
use crate::sessions::Sessions;

/// The server version reported at login and in stats: the Iggy generation we answer as.
pub const SERVER_VERSION: &str = "0.9.0";
/// `SERVER_VERSION` as the decimal semver stats report (`major·1e6 + minor·1e3 + patch`).
pub const SERVER_SEMVER: u32 = 9000;
/// The metadata journal, under `<system.path>/metadata/`.
pub const JOURNAL_FILE: &str = "journal.wal";

/// What the server says about itself: the one-node roster and start time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    pub cluster_name: String,
    pub node_name: String,
    /// The address clients are told (informational for a one-node roster).
    pub node_ip: String,
    /// The port the TCP listener bound; 0 when TCP is off.
    pub tcp_port: u16,
    /// µs since the epoch.
    pub started_at_us: u64,
    /// Consumer-group timeouts (`consumer_group.rebalancing_timeout`, `heartbeat.interval`).
    pub groups: GroupConfig,
}

/// What `GET_CLIENT(S)` reports about one open connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRecord {
    pub address: SocketAddr,
    pub transport: TransportKind,
    pub user_id: Option<u32>,
    /// The VSR client id of the bound session: group membership is keyed by it.
    pub client_id: Option<u128>,
}

/// Everything a shard serves from: metadata, partitions, sessions, consumer groups.
#[derive(Debug)]
pub struct Server {
    pub metadata: RefCell<Metadata>,
    /// `None` keeps metadata in memory only (tests); commits are serialised by the lock,
    /// which is held across the journal append and the data plane's follow-up.
    pub journal: Mutex<Option<Journal<CompioStorage>>>,
    pub data: DataPlane,
    pub sessions: RefCell<Sessions>,
    pub info: ServerInfo,
    /// Open connections by client number.
    pub clients: RefCell<BTreeMap<u32, ClientRecord>>,
    /// Deferred polls and fetches waiting, by (client id, request number), for
    /// `CANCEL_DEFERRED_REQUEST` (§2.11).
    parked: RefCell<HashMap<(u128, u64), Rc<Cancel>>>,
    next_client_number: Cell<u32>,
}

/// A parked request's registration: its cancel signal, removed from the registry on drop.
#[derive(Debug)]
pub struct Parked<'s> {
    server: &'s Server,
    key: (u128, u64),
    pub cancel: Rc<Cancel>,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.server.parked.borrow_mut().remove(&self.key);
    }
}

/// Start-up failed: the journal cannot be read or replayed, or partitions cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("create the metadata directory {path}")]
    Directory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("open the metadata journal")]
    Journal(#[from] JournalError),
    #[error("replay the metadata journal")]
    Replay(#[from] ApplyError),
    #[error("open the partitions")]
    Data(#[from] DataError),
}

impl Server {
    /// A server whose metadata lives only in memory and whose data plane is rooted at
    /// `root`: for tests, and for callers that replay nothing.
    pub fn new(info: ServerInfo, metadata: Metadata, root: PathBuf) -> Self {
        let session_seed = info.started_at_us / 1000;
        Self {
            metadata: RefCell::new(metadata),
            journal: Mutex::new(None),
            data: DataPlane::with_storage(CompioStorage::new(), root, info.groups),
            sessions: RefCell::new(Sessions::new(session_seed)),
            info,
            clients: RefCell::new(BTreeMap::new()),
            parked: RefCell::new(HashMap::new()),
            next_client_number: Cell::new(1),
        }
    }

    /// Opens the server on the data directory `root`: replays `metadata/journal.wal` (its
    /// torn tail truncated) and opens every partition it names.
    pub async fn open(info: ServerInfo, root: PathBuf) -> Result<Self, OpenError> {
        let directory = root.join("metadata");
        std::fs::create_dir_all(&directory).map_err(|source| OpenError::Directory {
            path: directory.clone(),
            source,
        })?;
        let storage = CompioStorage::new();
        let (journal, ops) = Journal::open(&storage, &directory.join(JOURNAL_FILE)).await?;
        let mut metadata = Metadata::default();
        for op in &ops {
            metadata.apply(op)?;
        }
        log::info!(
            "metadata: replayed {} operation(s), commit {}",
            ops.len(),
            metadata.commit
        );
        let server = Self::new(info, metadata, root);
        let snapshot = server.metadata.borrow().clone();
        server.data.open_all(&snapshot).await?;
        *server.journal.lock().await = Some(journal);
        Ok(server)
    }

    /// Commits one metadata operation: applies it to a copy to prove it applies, appends it
    /// to the journal (fsynced), applies it, then lets the data plane follow. Returns the new
    /// commit number.
    pub async fn commit(&self, op: MetadataOp) -> Result<u64, ErrorCode> {
        let mut journal = self.journal.lock().await;
        let mut next = self.metadata.borrow().clone();
        if let Err(error) = next.apply(&op) {
            log::error!("metadata: {op:?} does not apply: {error}");
            return Err(ErrorCode::Error);
        }
        if let Some(journal) = journal.as_mut()
            && let Err(error) = journal.append(&op).await
        {
            log::error!("metadata: journal append failed: {error}");
            return Err(ErrorCode::Error);
        }
        let commit = next.commit;
        self.metadata.replace(next.clone());
        if let Err(error) = self.data.on_applied(&op, &next).await {
            log::error!("data: following commit {commit} failed: {error}");
            return Err(ErrorCode::Error);
        }
        Ok(commit)
    }

    /// Registers a request about to wait (deferred poll, fetch) so a cancel can end it.
    pub fn park(&self, client_id: u128, request: u64) -> Parked<'_> {
        let cancel = Rc::new(Cancel::new());
        let key = (client_id, request);
        self.parked.borrow_mut().insert(key, Rc::clone(&cancel));
        Parked {
            server: self,
            key,
            cancel,
        }
    }

    /// Cancels the parked request of `client_id` numbered `request`; says whether one was
    /// waiting.
    pub fn cancel_parked(&self, client_id: u128, request: u64) -> bool {
        let cancel = self.parked.borrow().get(&(client_id, request)).cloned();
        cancel.map(|cancel| cancel.cancel()).is_some()
    }

    /// Periodic work at `now_us`: consumer-group heartbeat eviction and hand-off timeouts.
    /// The runtime calls it every half heartbeat interval.
    pub fn tick(&self, now_us: u64) {
        let attached: std::collections::HashSet<u128> = self
            .clients
            .borrow()
            .values()
            .filter_map(|client| client.client_id)
            .collect();
        let expired = self.sessions.borrow_mut().expire(now_us, &attached);
        for client_id in expired {
            log::info!("session of client {client_id:#x} ended: no connection for 60 s");
            self.data.leave_all_groups(client_id, now_us);
        }
        for (group, client_id) in self.data.tick_groups(now_us) {
            log::info!(
                "group {}/{}/{}: evicted silent member {client_id:#x}",
                group.stream_id,
                group.topic_id,
                group.group_id
            );
        }
    }

    /// Closes every partition (shutdown).
    pub async fn close(&self) -> Result<(), DataError> {
        self.data.close().await
    }

    /// Commits the root user (id 0, every permission) when no user exists yet (first boot);
    /// says whether it did.
    pub async fn ensure_root_user(
        &self,
        username: &str,
        password_hash: String,
    ) -> Result<bool, ErrorCode> {
        if !self.metadata.borrow().users.is_empty() {
            return Ok(false);
        }
        let op = MetadataOp::CreateUser {
            id: 0,
            username: username.to_owned(),
            password_hash,
            status: UserStatus::Active,
            permissions: Some(Permissions::root()),
            created_at: now_us(),
        };
        self.commit(op).await.map(|_| true)
    }

    /// The metadata commit number replies report.
    pub fn commit_number(&self) -> u64 {
        self.metadata.borrow().commit
    }

    /// Registers a new connection and returns its state.
    pub fn open_connection(&self, address: SocketAddr, transport: TransportKind) -> Connection {
        let number = self.next_client_number.get();
        self.next_client_number.set(number.wrapping_add(1).max(1));
        let record = ClientRecord {
            address,
            transport,
            user_id: None,
            client_id: None,
        };
        self.clients.borrow_mut().insert(number, record);
        Connection::new(number, address, transport)
    }

    /// Forgets a closed connection. Its session lives on for a `BIND_SESSION`.
    pub fn close_connection(&self, connection: &Connection) {
        self.clients.borrow_mut().remove(&connection.client_number);
    }

    /// Handles one request frame from `connection`: `header` is the raw 256-byte header
    /// whose frame prefix the transport checked.
    pub async fn handle(
        &self,
        connection: &mut Connection,
        header: &[u8; HEADER_SIZE],
        body: &[u8],
    ) -> Outcome {
        let header = match RequestHeader::parse(header, connection.dialect) {
            Ok(header) => header,
            Err(error) => {
                log::warn!(
                    "client {}: bad request header: {error}",
                    connection.client_number
                );
                let bound = connection.session.is_some();
                return Outcome::Evict(header_eviction(&error, bound));
            }
        };
        let outcome = self.handle_request(connection, header, body).await;
        self.note_user(connection);
        outcome
    }

    async fn handle_request(
        &self,
        connection: &mut Connection,
        header: &RequestHeader,
        body: &[u8],
    ) -> Outcome {
        let operation = header
            .operation()
            .expect("RequestHeader::parse accepts known operations only");
        let commit = self.commit_number();
        if operation == Operation::Register {
            return handler::session::login(self, connection, header, body);
        }
        if let Some(bound) = connection.session
            && !self
                .sessions
                .borrow()
                .is_live(bound.client_id, bound.session)
        {
            // The session ended elsewhere (a logout on another link, or expiry): §2.6.
            connection.session = None;
            return Outcome::Evict(EvictionReason::NoSession);
        }
        let code = header.code().and_then(CommandCode::from_u32);
        if connection.session.is_none()
            && let Some(outcome) = unauthenticated(operation, code, commit)
        {
            return outcome;
        }
        let Some(code) = code else {
            let raw = header.code.get();
            log::info!(
                "client {}: unknown command code {raw}",
                connection.client_number
            );
            return Outcome::refused(operation, ErrorCode::InvalidCommand, commit);
        };
        let request = match Request::decode(code, body, connection.dialect) {
            Ok(request) => request,
            Err(error) => {
                log::info!(
                    "client {}: undecodable {code:?}: {error}",
                    connection.client_number
                );
                return Outcome::refused(operation, error.status(), commit);
            }
        };
        handler::dispatch(self, connection, header, request).await
    }

    fn note_user(&self, connection: &Connection) {
        if let Some(record) = self.clients.borrow_mut().get_mut(&connection.client_number) {
            record.user_id = connection.user_id();
            record.client_id = connection.session.map(|session| session.client_id);
        }
    }
}

/// What an unauthenticated connection gets instead of dispatch (§1.9), or `None` for the
/// codes it may send: `PING` and `BIND_SESSION`.
fn unauthenticated(
    operation: Operation,
    code: Option<CommandCode>,
    commit: u64,
) -> Option<Outcome> {
    match (operation, code) {
        (Operation::NonReplicated, Some(CommandCode::Ping | CommandCode::BindSession)) => None,
        (
            Operation::NonReplicated,
            Some(CommandCode::LoginUser | CommandCode::LoginWithPersonalAccessToken),
        ) => Some(Outcome::Evict(EvictionReason::MalformedLogin)),
        (Operation::NonReplicated, _) => Some(Outcome::refused(
            operation,
            ErrorCode::Unauthenticated,
            commit,
        )),
        _ => Some(Outcome::Evict(EvictionReason::NoSession)),
    }
}

/// The eviction for a header that fails validation; a replicated request without a session
/// on an unauthenticated connection is the `NoSession` case of §1.9.
fn header_eviction(error: &DecodeError, bound: bool) -> EvictionReason {
    match error.field {
        "request.operation" => EvictionReason::InvalidRequestOperation,
        "request.session" | "request.request" if !bound => EvictionReason::NoSession,
        "request.session" => EvictionReason::SessionTooLow,
        _ => EvictionReason::InvalidRequestBody,
    }
}

/// µs since the Unix epoch; 0 if the clock is before it.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests;

//! What the server knows about one client connection.

use std::net::SocketAddr;
use std::sync::Arc;

use proto::Dialect;

use crate::affinity::Affinity;
use crate::liveness::Liveness;
use crate::reply_budget::{REPLY_BUDGET_BYTES, ReplyBudget};

/// How the client reached us (reported by `GET_CLIENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    Tcp,
    Quic,
    Http,
    WebSocket,
}

impl TransportKind {
    /// Every transport, in [`Self::index`] order.
    pub const ALL: [Self; 4] = [Self::Tcp, Self::Quic, Self::Http, Self::WebSocket];

    /// A dense number, `0..4`, for tables indexed by transport (metrics).
    pub fn index(self) -> usize {
        match self {
            Self::Tcp => 0,
            Self::Quic => 1,
            Self::Http => 2,
            Self::WebSocket => 3,
        }
    }

    /// The name metrics label it with.
    pub fn label(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Quic => "quic",
            Self::Http => "http",
            Self::WebSocket => "websocket",
        }
    }
}

/// One connection's state: its dialect once a login fixed it, the session it is bound to, and
/// its liveness (shared with its registry record).
#[derive(Debug, Clone)]
pub struct Connection {
    /// The server-assigned id `GET_CLIENT(S)` reports.
    pub client_number: u32,
    pub address: SocketAddr,
    pub transport: TransportKind,
    /// Fixed by the first login; 0.12.2 until then.
    pub dialect: Dialect,
    /// The authenticated session, if any.
    pub session: Option<BoundSession>,
    /// The same `Arc` as its [`ClientRecord`]'s.
    pub liveness: Arc<Liveness>,
    /// Reply memory its polls and fetches may hold at once.
    pub replies: Arc<ReplyBudget>,
    /// Where its data requests' partitions live: the transport moves it there.
    pub affinity: Affinity,
    /// The session (client id, number) this data connection was attached to by
    /// `ATTACH_CONSUMER_SESSION` (0.11.0 clients of a multi-node roster, §12.2): its group
    /// polls and offset writes act as that client, the member its coordinator connection
    /// joined as (`handler::routing`).
    pub consumer_session: Option<(u128, u64)>,
}

/// The session a connection is bound to after a login or `BIND_SESSION`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundSession {
    /// The VSR client id (request header `client`): consumer-group membership is keyed by it.
    pub client_id: u128,
    /// The session number handed out at login.
    pub session: u64,
    pub user_id: u32,
}

impl Connection {
    pub fn new(
        client_number: u32,
        address: SocketAddr,
        transport: TransportKind,
        liveness: Arc<Liveness>,
    ) -> Self {
        Self {
            client_number,
            address,
            transport,
            dialect: Dialect::V0_12_2,
            session: None,
            liveness,
            replies: ReplyBudget::new(REPLY_BUDGET_BYTES),
            affinity: Affinity::default(),
            consumer_session: None,
        }
    }

    pub fn user_id(&self) -> Option<u32> {
        self.session.map(|session| session.user_id)
    }
}

/// What `GET_CLIENT(S)` reports about one open connection, and its liveness.
#[derive(Debug, Clone)]
pub struct ClientRecord {
    pub address: SocketAddr,
    pub transport: TransportKind,
    pub user_id: Option<u32>,
    /// The VSR client id of the bound session: group membership is keyed by it.
    pub client_id: Option<u128>,
    /// The same `Arc` as the connection's: its shard stamps it, the leader's tick reads it.
    pub liveness: Arc<Liveness>,
}

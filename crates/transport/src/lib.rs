//! Sockets only: frames in, replies and evictions out (STYLE §2.7).
//!
//! The crate knows the frame (PROTOCOL.md §1.2–§1.6) and nothing of what a request means: a
//! [`ConnectionHandler`] supplied by the binary turns a request frame into an [`Answer`], and
//! [`frame`] encodes that answer as the reply or eviction frame the client expects; the handler
//! can also evict a connection between requests ([`ConnectionHandler::evicted`]). A bad frame
//! (a size outside `256..=frame_size_max`, a command other than Request) gets an eviction and
//! closes that connection only.

pub mod frame;
#[cfg(any(feature = "tcp", feature = "ws"))]
pub mod handoff;
#[cfg(any(feature = "tcp", feature = "ws", feature = "tls", feature = "http"))]
pub mod listen;
#[cfg(any(feature = "ws", feature = "tls"))]
mod message_link;
#[cfg(feature = "quic")]
pub mod quic;
#[cfg(feature = "replica")]
pub mod replica;
#[cfg(feature = "tcp")]
pub mod tcp;
#[cfg(all(test, any(feature = "ws", feature = "tls")))]
mod test_handler;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "tls")]
pub mod tls_tcp;
#[cfg(feature = "ws")]
pub mod ws;

use std::any::Any;
use std::future::Future;
use std::net::SocketAddr;

use proto::Dialect;
use proto::header::{EvictionReason, HEADER_SIZE};

pub use frame::Answer;

/// How long a reply write may take before, while the server is short of reply memory
/// ([`ConnectionHandler::replies_short`]), the connection is ended to free what its replies
/// hold; when nobody waits for memory, the write timeout alone applies. It counts from the
/// write's start, not from its last progress: under memory pressure a client that reads a
/// large reply slowly is shed too (it reconnects and polls again), which is the price of
/// not tracking progress inside one vectored write.
#[cfg(any(feature = "tcp", feature = "ws", feature = "tls"))]
const REPLY_STALL: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a connection ended when [`unless_stalled_while_short`] gave up its write.
#[cfg(any(feature = "tcp", feature = "ws", feature = "tls"))]
pub(crate) const STALLED_WHILE_SHORT: &str =
    "a reply write the client did not take while replies wait for memory";

/// `write`'s output, or `None` once it has waited on its client for [`REPLY_STALL`] while
/// `handler`'s server is short of reply memory (the write is dropped with the connection).
#[cfg(any(feature = "tcp", feature = "ws", feature = "tls"))]
pub(crate) async fn unless_stalled_while_short<H: ConnectionHandler, F: Future>(
    handler: &H,
    write: F,
) -> Option<F::Output> {
    use futures_util::future::{Either, select};
    let shed = async {
        compio::time::sleep(REPLY_STALL).await;
        handler.replies_short().await;
    };
    match select(std::pin::pin!(write), std::pin::pin!(shed)).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(((), _)) => None,
    }
}

/// The business side of a connection, implemented by the binary on top of the shard.
///
/// One handler serves every connection of a shard; each connection keeps its own state in
/// `Self::Connection`, created at accept and dropped through [`close`](Self::close). Requests
/// of one connection are handled concurrently (a parked poll must not hold up the cancel
/// behind it), so the state is shared: it needs interior mutability.
pub trait ConnectionHandler {
    type Connection;

    /// State for a connection just accepted from `peer`.
    fn open(&self, peer: SocketAddr) -> Self::Connection;

    /// Answers one request frame whose prefix has been checked (command 5, size in range).
    fn handle(
        &self,
        connection: &Self::Connection,
        header: &[u8; HEADER_SIZE],
        body: &[u8],
    ) -> impl Future<Output = Answer>;

    /// As [`handle`](Self::handle) for a body read into the shard's buffer pool, handed over
    /// whole so the handler can keep its memory (a send's batch goes to the partition as
    /// it is); by default it is handled as bytes.
    fn handle_pooled(
        &self,
        connection: &Self::Connection,
        header: &[u8; HEADER_SIZE],
        body: pool::Buffer,
    ) -> impl Future<Output = Answer> {
        async move { self.handle(connection, header, &body).await }
    }

    /// The shard the connection should move to now, if any: its requests keep going to work
    /// that shard owns. The transport moves it between two frames, with nothing in flight.
    fn move_to(&self, connection: &Self::Connection) -> Option<usize> {
        let _ = connection;
        None
    }

    /// Whether the connection may move soon: while it may, its next frame is read only
    /// after the previous one is answered, so a move never cuts a frame in two.
    fn may_move(&self, connection: &Self::Connection) -> bool {
        let _ = connection;
        false
    }

    /// Packs the state of a connection that moves to another shard (it is not closed: it
    /// lives on there); a handler that cannot pack it hands it back and the connection stays.
    fn detach(
        &self,
        connection: Self::Connection,
    ) -> Result<Box<dyn Any + Send>, Self::Connection> {
        Err(connection)
    }

    /// The state [`detach`](Self::detach) packed on another shard, taken over here.
    fn attach(&self, detached: Box<dyn Any + Send>) -> Option<Self::Connection> {
        let _ = detached;
        None
    }

    /// The server's metrics in the Prometheus text format, for an authenticated scrape of
    /// the HTTP listener's metrics endpoint; `None` when this handler has none to give.
    fn metrics(&self) -> impl Future<Output = Option<String>> {
        async { None }
    }

    /// Completes while requests wait for reply memory the server has run short of: a
    /// connection whose reply write has not finished within a short stall (2 s, a client
    /// that reads slowly as well as one that stopped) is then ended rather than left to hold
    /// its replies until the write timeout. By default, never.
    fn replies_short(&self) -> impl Future<Output = ()> {
        std::future::pending()
    }

    /// Completes when the server ends the connection's session on its own (a stale client):
    /// the transport then writes an eviction frame with the reason and closes the connection.
    /// Polled for the connection's whole life, alongside its requests.
    fn evicted(&self, connection: &Self::Connection) -> impl Future<Output = EvictionReason>;

    /// The dialect the connection speaks now: refusal codes are mapped to ones it knows.
    fn dialect(&self, connection: &Self::Connection) -> Dialect;

    /// Whether the connection is bound to a session: until it is, frames are held to the
    /// small unauthenticated size and the connection to the handshake grace.
    fn authenticated(&self, connection: &Self::Connection) -> bool;

    /// The connection ended (peer closed, eviction, bad frame or shutdown).
    fn close(&self, connection: Self::Connection);
}

/// Why a connection was closed before its peer closed it, for the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadFrame {
    /// The size field is below 256 or above the configured maximum.
    Size,
    /// The command byte is not Request (5).
    Command,
}

impl BadFrame {
    /// The eviction a client gets for the frame: the reason its SDK maps to `InvalidCommand`.
    pub fn eviction_reason(self) -> EvictionReason {
        match self {
            Self::Size => EvictionReason::InvalidRequestBodySize,
            Self::Command => EvictionReason::InvalidRequestOperation,
        }
    }
}

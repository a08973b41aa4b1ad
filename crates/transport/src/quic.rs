//! The binary protocol over QUIC (PROTOCOL.md §1.12), on compio sockets through
//! `compio-quic` (quinn-proto's protocol code on compio's runtime, rustls with ring; the
//! same pair the reference server uses, and no tokio).
//!
//! One request per bidirectional stream: the client writes one frame and finishes its side;
//! the server reads the stream to its end (never more than the frame size limit), answers
//! with one frame on the same stream and finishes it, or finishes it empty for a silent
//! answer (a cancelled deferred poll, §4.4.5). Streams of a logged-in connection are handled
//! concurrently, up to `max_concurrent_bidi_streams` (QUIC's own flow control); before login,
//! one at a time. A stream
//! that is not one request frame gets an eviction on that stream and the connection is
//! closed; a connection that has not logged in within the handshake grace (which also
//! bounds the QUIC handshake) is closed. A server-side eviction (a stale session) closes
//! the connection with the eviction reason as the application close code, since QUIC has
//! no stream to carry it.
//!
//! The listener serves its connections on the shard it runs on; the shard core forwards
//! partition work to the owning shard.

use std::future::{Future, IntoFuture};
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use compio_quic::crypto::rustls::QuicServerConfig;
use compio_quic::{
    Connection, Endpoint, EndpointConfig, IdleTimeout, Incoming, RecvStream, SendStream,
    ServerConfig, TransportConfig, VarInt,
};
use futures_util::future::{Either, select};
use futures_util::stream::{FuturesUnordered, StreamExt};
use proto::header::{EvictionReason, HEADER_SIZE};

use crate::frame::{self, Answer};
use crate::message_link::Shared;
use crate::{BadFrame, ConnectionHandler};

/// The application close code of a connection the server ends without an eviction reason.
const CLOSE_NORMAL: u32 = 0;

/// Limits and address of a QUIC listener (`[quic]`, and `[message_bus]` for the frame limits
/// every binary transport shares).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuicConfig {
    pub address: SocketAddr,
    /// Connections open at once; more are refused during their handshake, with a log line.
    pub connections_max: usize,
    /// Largest frame, header included (`message_bus.max_message_size`).
    pub frame_size_max: u32,
    /// Largest frame before the connection is authenticated.
    pub unauthenticated_frame_size_max: u32,
    /// How long the handshake and the login together may take.
    pub handshake_grace: Duration,
    /// How long a stream's frame may take to arrive once the stream is open.
    pub frame_read_timeout: Duration,
    /// How long an answer may wait for the client to take it.
    pub write_timeout: Duration,
    /// Requests of one connection in flight at once (`quic.max_concurrent_bidi_streams`).
    pub max_concurrent_bidi_streams: u32,
    pub initial_mtu: u16,
    pub send_window: u64,
    pub receive_window: u64,
    pub stream_receive_window: u64,
    /// `None`: no keep-alive PINGs.
    pub keep_alive_interval: Option<Duration>,
    /// `None`: connections never time out idle.
    pub max_idle_timeout: Option<Duration>,
    /// The UDP socket's receive buffer (`SO_RCVBUF`); 0: the kernel's default.
    pub socket_receive_buffer: usize,
    /// The UDP socket's send buffer (`SO_SNDBUF`); 0: the kernel's default.
    pub socket_send_buffer: usize,
}

/// Binding the listener failed.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("bind QUIC listener on {address}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("the QUIC listener's TLS configuration: {0}")]
    Tls(String),
    #[error("invalid QUIC setting `{key}`: {reason}")]
    Setting { key: &'static str, reason: String },
    #[error("read the local address of the QUIC listener")]
    LocalAddress(#[source] io::Error),
}

/// A bound listener, not yet accepting.
#[derive(Debug)]
pub struct QuicServer {
    endpoint: Endpoint,
    config: QuicConfig,
    local_address: SocketAddr,
}

impl QuicServer {
    /// Binds `config.address` (UDP) with the certificate in `tls`.
    pub fn bind(config: QuicConfig, tls: rustls::ServerConfig) -> Result<Self, ListenError> {
        let crypto =
            QuicServerConfig::try_from(tls).map_err(|error| ListenError::Tls(error.to_string()))?;
        let mut server = ServerConfig::with_crypto(Arc::new(crypto));
        server.transport_config(Arc::new(transport(&config)?));
        let bind_error = |source| ListenError::Bind {
            address: config.address,
            source,
        };
        let (socket, granted) = socket::bind(
            config.address,
            config.socket_receive_buffer,
            config.socket_send_buffer,
        )
        .map_err(bind_error)?;
        if granted.receive < config.socket_receive_buffer {
            log::warn!(
                "quic: the kernel granted a {} B receive buffer of the {} B asked \
                 (net.core.rmem_max); bursts past it are dropped and resent",
                granted.receive,
                config.socket_receive_buffer
            );
        }
        let endpoint = Endpoint::new(socket, EndpointConfig::default(), Some(server), None)
            .map_err(bind_error)?;
        let local_address = endpoint.local_addr().map_err(ListenError::LocalAddress)?;
        Ok(Self {
            endpoint,
            config,
            local_address,
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_address(&self) -> SocketAddr {
        self.local_address
    }

    /// Serves every connection on the current runtime until `shutdown` completes, then lets
    /// the requests being handled finish (up to ten seconds) and closes the endpoint.
    pub async fn serve<H>(self, handler: Rc<H>, shutdown: impl Future<Output = ()>)
    where
        H: ConnectionHandler + 'static,
    {
        let shared = Rc::new(Shared::default());
        let accepting = pin!(self.accept_loop(&handler, &shared));
        let _ = select(accepting, pin!(shutdown)).await;
        shared.stop_and_drain("quic").await;
        self.endpoint
            .close(VarInt::from_u32(CLOSE_NORMAL), b"shutdown");
    }

    async fn accept_loop<H>(&self, handler: &Rc<H>, shared: &Rc<Shared>)
    where
        H: ConnectionHandler + 'static,
    {
        while let Some(incoming) = self.endpoint.wait_incoming().await {
            let peer = incoming.remote_address();
            let Some(slot) = shared.admit("quic", peer, self.config.connections_max) else {
                incoming.refuse();
                continue;
            };
            let task =
                serve_connection(incoming, Rc::clone(handler), self.config, Rc::clone(shared));
            compio::runtime::spawn(async move {
                let _slot = slot;
                task.await;
            })
            .detach();
        }
    }
}

/// The connection's receive window before login: room for one frame of the unauthenticated
/// limit and a little over (what QUIC adds around it), never more than `receive_window`.
fn unauthenticated_window(config: &QuicConfig) -> u64 {
    let frame = u64::from(
        config
            .unauthenticated_frame_size_max
            .min(config.frame_size_max),
    );
    frame
        .saturating_add(UNAUTHENTICATED_WINDOW_SLACK)
        .min(config.receive_window)
}

/// What the window before login allows beyond one frame.
const UNAUTHENTICATED_WINDOW_SLACK: u64 = 16 << 10;

/// quinn's transport settings from the config.
fn transport(config: &QuicConfig) -> Result<TransportConfig, ListenError> {
    let var = |key: &'static str, value: u64| {
        VarInt::from_u64(value).map_err(|error| ListenError::Setting {
            key,
            reason: error.to_string(),
        })
    };
    let mut transport = TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(config.max_concurrent_bidi_streams.max(1)))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .initial_mtu(config.initial_mtu.max(1200))
        .send_window(config.send_window)
        // A connection starts with the window of one unauthenticated frame: before login only
        // one stream is read at a time, and the window bounds what a peer may send on the
        // others meanwhile. Its first login opens `receive_window` (`Link::open_window`).
        .receive_window(var("quic.receive_window", unauthenticated_window(config))?)
        .stream_receive_window(var(
            "quic.stream_receive_window",
            config.stream_receive_window.min(config.receive_window),
        )?)
        .keep_alive_interval(config.keep_alive_interval);
    let idle = match config.max_idle_timeout {
        Some(timeout) => {
            Some(
                IdleTimeout::try_from(timeout).map_err(|error| ListenError::Setting {
                    key: "quic.max_idle_timeout",
                    reason: error.to_string(),
                })?,
            )
        }
        None => None,
    };
    transport.max_idle_timeout(idle);
    Ok(transport)
}

/// Why a connection ended, for the log line.
#[derive(Debug)]
enum Ended {
    PeerClosed(String),
    Stopping,
    Evicted(EvictionReason),
    LoginTimedOut,
    Bad(BadFrame, String),
}

/// Completes the handshake, then serves one connection until it ends.
async fn serve_connection<H: ConnectionHandler>(
    incoming: Incoming,
    handler: Rc<H>,
    config: QuicConfig,
    shared: Rc<Shared>,
) {
    let peer = incoming.remote_address();
    let accepted = Instant::now();
    match compio::time::timeout(config.handshake_grace, incoming.into_future()).await {
        Ok(Ok(connection)) => {
            let state = handler.open(peer);
            let link = Link {
                handler: &*handler,
                state: &state,
                config,
                shared: &shared,
            };
            let ended = link.serve(&connection, accepted).await;
            let code = match &ended {
                Ended::Evicted(reason) => u32::from(*reason as u8),
                _ => CLOSE_NORMAL,
            };
            connection.close(VarInt::from_u32(code), b"");
            match ended {
                Ended::PeerClosed(why) => log::debug!("quic: {peer} closed: {why}"),
                Ended::Stopping => log::debug!("quic: {peer} closed at shutdown"),
                Ended::Bad(kind, error) => {
                    log::warn!("quic: {peer} sent a bad frame ({kind:?}: {error}); closed");
                }
                Ended::Evicted(reason) => log::info!("quic: {peer} evicted ({reason:?})"),
                Ended::LoginTimedOut => log::info!("quic: {peer} closed: the login timed out"),
            }
            handler.close(state);
        }
        Ok(Err(error)) => log::info!("quic: {peer}: handshake failed: {error}"),
        Err(_elapsed) => log::info!("quic: {peer}: handshake timed out"),
    }
}

/// One connection and what it serves with.
struct Link<'l, H: ConnectionHandler> {
    handler: &'l H,
    state: &'l H::Connection,
    config: QuicConfig,
    shared: &'l Shared,
}

/// How one stream ended.
enum StreamEnd {
    Answered,
    /// The answer was an eviction, written on the stream: the connection ends.
    Evicted(EvictionReason),
    /// Not one request frame: an eviction was written on the stream.
    Bad(BadFrame, String),
    /// The stream failed (reset, timed out); the connection goes on.
    Failed,
}

/// What the connection loop acts on next.
enum Event {
    Stream(Result<(SendStream, RecvStream), String>),
    Done(StreamEnd),
    Evicted(EvictionReason),
    Stopping,
    LoginTimedOut,
}

impl<H: ConnectionHandler> Link<'_, H> {
    /// Accepts streams and handles each concurrently until the peer closes, a stream is bad,
    /// the session is evicted, the login grace ends or the server shuts down (then the
    /// streams in flight are answered first).
    async fn serve(&self, connection: &Connection, accepted: Instant) -> Ended {
        let mut pending = FuturesUnordered::new();
        let mut evicted = pin!(self.handler.evicted(self.state));
        let mut unauthenticated_since = accepted;
        let mut authenticated = self.handler.authenticated(self.state);
        let mut window_open = false;
        if authenticated {
            window_open = self.open_window(connection);
        }
        let mut stopping = false;
        loop {
            let grace_end =
                (!authenticated).then(|| unauthenticated_since + self.config.handshake_grace);
            // Before login a client waits for each answer: one stream at a time, so what a
            // connection that proved nothing makes the server hold stays one small frame.
            let accept = !stopping && (authenticated || pending.is_empty());
            let watch = (accept, !stopping, grace_end);
            let event = self
                .next_event(connection, &mut pending, evicted.as_mut(), watch)
                .await;
            match event {
                Event::Stream(Ok((send, recv))) => {
                    pending.push(self.stream(send, recv, authenticated));
                }
                Event::Stream(Err(error)) => return Ended::PeerClosed(error),
                Event::Done(StreamEnd::Evicted(reason)) | Event::Evicted(reason) => {
                    return Ended::Evicted(reason);
                }
                Event::Done(StreamEnd::Bad(kind, error)) => return Ended::Bad(kind, error),
                Event::Done(StreamEnd::Answered | StreamEnd::Failed) => {
                    let now = self.handler.authenticated(self.state);
                    if authenticated && !now {
                        // A logout: the grace starts again for the next login.
                        unauthenticated_since = Instant::now();
                    }
                    if now && !window_open {
                        window_open = self.open_window(connection);
                    }
                    authenticated = now;
                    if stopping && pending.is_empty() {
                        return Ended::Stopping;
                    }
                }
                Event::Stopping if pending.is_empty() => return Ended::Stopping,
                Event::Stopping => stopping = true,
                Event::LoginTimedOut => return Ended::LoginTimedOut,
            }
        }
    }

    /// Opens the connection's receive window to `receive_window` at its first login; says
    /// whether it did. Once: quinn cannot take back credit it granted (a smaller window only
    /// stops new credit until the peer has used it up), and a window set again after a
    /// logout grows by the whole window on top of what is left, so a connection that logs
    /// out keeps the window it had, as it keeps its connection.
    fn open_window(&self, connection: &Connection) -> bool {
        // `transport` checked `receive_window` as a VarInt.
        let Ok(window) = VarInt::from_u64(self.config.receive_window) else {
            return false;
        };
        connection.set_receive_window(window);
        true
    }

    /// Waits for the next stream (when `accept`), finished stream, eviction, shutdown (until
    /// seen) or the end of the login grace. Every loser is cancel-safe: accepting a stream and a
    /// `FuturesUnordered`'s `next` lose nothing, `evicted` is polled again next time.
    async fn next_event<F>(
        &self,
        connection: &Connection,
        pending: &mut FuturesUnordered<F>,
        evicted: std::pin::Pin<&mut impl Future<Output = EvictionReason>>,
        (accept, watch_stop, grace_end): (bool, bool, Option<Instant>),
    ) -> Event
    where
        F: Future<Output = StreamEnd>,
    {
        let stream = async {
            if !accept {
                return std::future::pending().await;
            }
            Event::Stream(
                connection
                    .accept_bi()
                    .await
                    .map_err(|error| error.to_string()),
            )
        };
        let done = async {
            match pending.next().await {
                Some(end) => Event::Done(end),
                None => std::future::pending().await,
            }
        };
        let stopping = async {
            if !watch_stop {
                return std::future::pending().await;
            }
            self.shared.stopping().await;
            Event::Stopping
        };
        let login = async {
            match grace_end {
                Some(end) => {
                    compio::time::sleep(end.saturating_duration_since(Instant::now())).await;
                    Event::LoginTimedOut
                }
                None => std::future::pending().await,
            }
        };
        let evicted = async { Event::Evicted(evicted.await) };
        first(first(evicted, first(stream, done)), first(stopping, login)).await
    }

    /// Reads one stream's frame, answers it on the same stream and finishes it.
    async fn stream(
        &self,
        mut send: SendStream,
        mut recv: RecvStream,
        authenticated: bool,
    ) -> StreamEnd {
        let size_max = if authenticated {
            self.config.frame_size_max
        } else {
            self.config
                .unauthenticated_frame_size_max
                .min(self.config.frame_size_max)
        };
        let limit = usize::try_from(size_max).unwrap_or(usize::MAX);
        let read = read_bounded(&mut recv, limit);
        let bytes = match compio::time::timeout(self.config.frame_read_timeout, read).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(Unread::TooLong)) => {
                let _ = recv.stop(VarInt::from_u32(CLOSE_NORMAL));
                let eviction = frame::eviction_of(0, BadFrame::Size.eviction_reason());
                self.write(&mut send, vec![Bytes::from(eviction)], true)
                    .await;
                return StreamEnd::Bad(BadFrame::Size, format!("a stream over {size_max} bytes"));
            }
            Ok(Err(Unread::Failed)) | Err(_) => return StreamEnd::Failed,
        };
        let header = match frame::check_whole(&bytes, size_max) {
            Ok(header) => header,
            Err((header, kind, error)) => {
                let eviction = frame::eviction(&header, kind.eviction_reason());
                self.write(&mut send, vec![Bytes::from(eviction)], true)
                    .await;
                return StreamEnd::Bad(kind, error);
            }
        };
        let body = bytes.get(HEADER_SIZE..).unwrap_or_default();
        let answer = self.handler.handle(self.state, &header, body).await;
        let end = match answer {
            Answer::Evict(reason) => StreamEnd::Evicted(reason),
            _ => StreamEnd::Answered,
        };
        let dialect = self.handler.dialect(self.state);
        let chunks = match frame::encode(&header, answer, dialect) {
            Some(frame) => vec![Bytes::from(frame.head), Bytes::from(frame.tail)],
            None => Vec::new(),
        };
        let evicts = matches!(end, StreamEnd::Evicted(_));
        if !self.write(&mut send, chunks, evicts).await {
            return StreamEnd::Failed;
        }
        end
    }

    /// Writes `chunks` and finishes the stream, within the write timeout; says whether it
    /// all went. With `delivered`, also waits until the peer has it all (an eviction, after
    /// which the connection is closed: a close drops what is not yet acknowledged).
    async fn write(&self, send: &mut SendStream, mut chunks: Vec<Bytes>, delivered: bool) -> bool {
        chunks.retain(|chunk| !chunk.is_empty());
        let written = async {
            if !chunks.is_empty() {
                send.write_all_chunks(&mut chunks).await.ok()?;
            }
            send.finish().ok()?;
            if delivered {
                send.stopped().await.ok()?;
            }
            Some(())
        };
        let done = matches!(
            compio::time::timeout(self.config.write_timeout, written).await,
            Ok(Some(()))
        );
        if !done {
            // Reset, not finished (what dropping the stream would do): the peer must not take
            // a cut answer for a whole one, and quinn drops what it still buffers for it.
            let _ = send.reset(VarInt::from_u32(CLOSE_NORMAL));
        }
        done
    }
}

/// Why a stream's frame could not be read.
enum Unread {
    TooLong,
    Failed,
}

/// Reads the stream to its end, refusing more than `limit` bytes (before holding them).
async fn read_bounded(recv: &mut RecvStream, limit: usize) -> Result<Vec<u8>, Unread> {
    let mut bytes = Vec::new();
    loop {
        let room = limit.saturating_sub(bytes.len()).saturating_add(1);
        match recv.read_chunk(room, true).await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.bytes.len() > limit {
                    return Err(Unread::TooLong);
                }
                bytes.extend_from_slice(&chunk.bytes);
            }
            Ok(None) => return Ok(bytes),
            Err(_) => return Err(Unread::Failed),
        }
    }
}

/// The first of two events.
async fn first(a: impl Future<Output = Event>, b: impl Future<Output = Event>) -> Event {
    match select(pin!(a), pin!(b)).await {
        Either::Left((event, _)) | Either::Right((event, _)) => event,
    }
}

mod socket;
#[cfg(test)]
mod tests;

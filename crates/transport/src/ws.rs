//! The binary protocol over WebSocket (PROTOCOL.md §1.13), on compio sockets through
//! `compio-ws` (tungstenite's protocol code on compio's runtime; the same pair the reference
//! server uses, and no tokio).
//!
//! Each request is one Binary message holding exactly one frame (header and body); each
//! answer goes back as one Binary message. A message whose length is not its header's
//! `size`, a frame over the size limit, a command other than Request or a Text message gets
//! an eviction and ends that connection only. Ping and Pong are answered by tungstenite.
//! Requests of one connection are handled concurrently and answered as they complete, as
//! on TCP; before login the connection is read in lockstep, must log in within the
//! handshake grace (which also bounds the upgrade), and may read no more from its socket
//! toward one message than the unauthenticated frame limit and a little room ([`metered`]),
//! since tungstenite's message limit is the authenticated one for the whole connection.
//!
//! [`WsServer::serve`] serves every connection on the shard it runs on;
//! [`WsServer::serve_sharded`] hands plain connections to every shard at accept
//! ([`handoff`]). Either way the shard core forwards partition work to the owning shard.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use compio::net::{TcpListener, TcpStream};
use compio_ws::tungstenite::protocol::WebSocketConfig;
use compio_ws::tungstenite::{Error as WsError, Message};
use futures_util::{SinkExt, StreamExt};

use crate::ConnectionHandler;
use crate::message_link::{Link, LinkConfig, Piece, ReadMeter, Shared, accept_until, log_end};

/// Limits and address of a WebSocket listener (`[websocket]`, and `[message_bus]` for the
/// frame limits every binary transport shares).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsConfig {
    pub address: SocketAddr,
    /// Connections open at once; one more is accepted and closed at once, with a log line.
    pub connections_max: usize,
    /// Largest frame, header included (`message_bus.max_message_size`); it also caps the
    /// WebSocket message tungstenite reassembles.
    pub frame_size_max: u32,
    /// Largest WebSocket frame of a fragmented message (`websocket.max_frame_size`).
    pub fragment_size_max: usize,
    /// Requests of one connection being handled at once; at the limit the connection is
    /// not read until an answer is written.
    pub in_flight_max: usize,
    /// Largest frame before the connection is authenticated.
    pub unauthenticated_frame_size_max: u32,
    /// How long the upgrade and the login together may take (`message_bus.handshake_grace`).
    pub handshake_grace: Duration,
    /// How long an answer may wait for the client to take it before the connection closes.
    pub write_timeout: Duration,
    /// tungstenite's buffers (`websocket.read_buffer_size` and the write ones).
    pub read_buffer_size: usize,
    pub write_buffer_size: usize,
    pub write_buffer_size_max: usize,
    /// RFC 6455 wants clients to mask their frames; `true` accepts unmasked ones too.
    pub accept_unmasked_frames: bool,
}

impl WsConfig {
    fn link(&self) -> LinkConfig {
        LinkConfig {
            frame_size_max: self.frame_size_max,
            unauthenticated_frame_size_max: self.unauthenticated_frame_size_max,
            in_flight_max: self.in_flight_max,
            handshake_grace: self.handshake_grace,
            write_timeout: self.write_timeout,
        }
    }

    fn websocket(&self) -> WebSocketConfig {
        let message_max = usize::try_from(self.frame_size_max).unwrap_or(usize::MAX);
        WebSocketConfig::default()
            .read_buffer_size(self.read_buffer_size)
            .write_buffer_size(self.write_buffer_size)
            .max_write_buffer_size(self.write_buffer_size_max.max(self.write_buffer_size + 1))
            .max_message_size(Some(message_max))
            .max_frame_size(Some(self.fragment_size_max.min(message_max)))
            .accept_unmasked_frames(self.accept_unmasked_frames)
    }
}

/// Binding the listener failed.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("bind WebSocket listener on {address}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("read the local address of the WebSocket listener")]
    LocalAddress(#[source] io::Error),
}

/// A bound listener, not yet accepting.
pub struct WsServer {
    listener: TcpListener,
    config: WsConfig,
    local_address: SocketAddr,
    /// WSS: each connection's TLS handshake comes before its upgrade.
    #[cfg(feature = "tls")]
    tls: Option<compio_tls::TlsAcceptor>,
}

impl std::fmt::Debug for WsServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("WsServer")
            .field("config", &self.config)
            .field("local_address", &self.local_address)
            .finish_non_exhaustive()
    }
}

impl WsServer {
    /// Binds `config.address`, retrying a port still held ([`crate::listen::bind`]).
    pub async fn bind(config: WsConfig) -> Result<Self, ListenError> {
        let listener = crate::listen::bind(config.address)
            .await
            .map_err(|source| ListenError::Bind {
                address: config.address,
                source,
            })?;
        let local_address = listener.local_addr().map_err(ListenError::LocalAddress)?;
        Ok(Self {
            listener,
            config,
            local_address,
            #[cfg(feature = "tls")]
            tls: None,
        })
    }

    /// Serves WSS: TLS with `tls` under every connection.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn with_tls(mut self, tls: rustls::ServerConfig) -> Self {
        self.tls = Some(compio_tls::TlsAcceptor::from(std::sync::Arc::new(tls)));
        self
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_address(&self) -> SocketAddr {
        self.local_address
    }

    /// The listener's settings.
    pub fn config(&self) -> WsConfig {
        self.config
    }

    /// Whether connections are WSS (TLS first), which stay on the shard that accepts them.
    pub fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        {
            self.tls.is_some()
        }
        #[cfg(not(feature = "tls"))]
        {
            false
        }
    }

    /// Serves every connection on the current runtime until `shutdown` completes, then
    /// lets the requests being handled finish (up to ten seconds).
    pub async fn serve<H>(self, handler: Rc<H>, shutdown: impl Future<Output = ()>)
    where
        H: ConnectionHandler + 'static,
    {
        let config = self.config;
        #[cfg(feature = "tls")]
        let tls = &self.tls;
        #[cfg(not(feature = "tls"))]
        let tls = &None::<NoTls>;
        let serve = |stream, peer, shared| {
            let tls = tls.clone();
            serve_connection(stream, peer, tls, Rc::clone(&handler), config, shared)
        };
        let connections_max = config.connections_max;
        accept_until(
            "websocket",
            &self.listener,
            connections_max,
            serve,
            shutdown,
        )
        .await;
    }
}

/// Upgrades, then serves one connection until it ends.
async fn serve_connection<H: ConnectionHandler>(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<Acceptor>,
    handler: Rc<H>,
    config: WsConfig,
    shared: Rc<Shared>,
) {
    let _ = stream.set_nodelay(true);
    crate::listen::end_when_unacknowledged(&stream, config.write_timeout, "websocket");
    let accepted = Instant::now();
    let meter = Rc::new(ReadMeter::new(metered::unauthenticated_read_max(
        config.unauthenticated_frame_size_max,
    )));
    let (read, write) = stream.into_split();
    let stream = (
        metered::MeteredRead {
            socket: read,
            meter: Rc::clone(&meter),
        },
        write,
    );
    let upgrade = async {
        match tls {
            #[cfg(feature = "tls")]
            Some(acceptor) => {
                let stream = acceptor.accept(stream).await?;
                compio_ws::accept_async_with_config(stream, config.websocket()).await
            }
            _ => compio_ws::accept_async_with_config(stream, config.websocket()).await,
        }
    };
    // Boxed: the TLS handshake and the upgrade together make a large future.
    let socket = match compio::time::timeout(config.handshake_grace, Box::pin(upgrade)).await {
        Ok(Ok(socket)) => socket,
        Ok(Err(error)) => return log::info!("websocket: {peer}: upgrade failed: {error}"),
        Err(_elapsed) => return log::info!("websocket: {peer}: upgrade timed out"),
    };
    let (sink, messages) = socket.split();
    let pieces = messages.map(piece);
    // The sink keeps tungstenite's error type: `sink_map_err` takes its function once and
    // panics at a second error (a failed write, then a failed close).
    let replies = sink.with(|bytes: Vec<u8>| {
        std::future::ready(Ok::<_, compio_ws::tungstenite::Error>(Message::binary(
            bytes,
        )))
    });
    let connection = handler.open(peer);
    let link = Link {
        handler: &*handler,
        connection: &connection,
        config: config.link(),
        shared: &shared,
        read_meter: Some(&meter),
    };
    let ended = link.serve(pieces, pin!(replies), accepted).await;
    log_end("websocket", peer, &ended);
    handler.close(connection);
}

/// The TLS acceptor of a WSS listener.
#[cfg(feature = "tls")]
type Acceptor = compio_tls::TlsAcceptor;
/// Without feature `tls` there is none.
#[cfg(not(feature = "tls"))]
type Acceptor = NoTls;

/// Stands for the acceptor a build without TLS cannot have.
#[cfg(not(feature = "tls"))]
#[derive(Debug, Clone)]
enum NoTls {}

/// What a WebSocket message is to the link.
fn piece(message: Result<Message, WsError>) -> Piece {
    match message {
        Ok(Message::Binary(bytes)) => Piece::Frame(bytes),
        Ok(Message::Text(_)) => Piece::NotAFrame("a Text message"),
        Ok(Message::Close(_)) => Piece::Closed,
        // Ping and Pong are answered inside tungstenite; raw frames are never read.
        Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => Piece::Nothing,
        Err(error) => Piece::Failed(error.to_string()),
    }
}

pub mod handoff;
mod metered;
#[cfg(test)]
mod tests;

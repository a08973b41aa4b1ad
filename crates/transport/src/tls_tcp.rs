//! The binary protocol over TCP wrapped in TLS (PROTOCOL.md §1.11, `[tcp.tls]`): rustls
//! through `compio-tls`, the same frames back to back inside the TLS stream.
//!
//! A TLS connection is served on the shard that accepted it (shard 0): its session state lives
//! in the TLS stream, which cannot move to another thread as a plain socket can, so partition
//! work goes to the owning shard through the shard core. The handshake counts against the
//! handshake grace. A reader reads each frame's header, refuses a size over the limit (the
//! unauthenticated one before login) before it reads the body, then reads the body within
//! the frame read timeout; the connection loop is the one WebSocket uses
//! ([`crate::message_link`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use compio::net::{TcpListener, TcpStream};
use compio_tls::TlsAcceptor;
use futures_channel::mpsc;
use futures_util::future::{Either, select};
use futures_util::{AsyncRead, AsyncReadExt, AsyncWriteExt, SinkExt};
use proto::header::HEADER_SIZE;

use crate::ConnectionHandler;
use crate::message_link::{Link, LinkConfig, Piece, Shared, accept_until, log_end};

/// Limits and address of a TLS-wrapped TCP listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsTcpConfig {
    pub address: SocketAddr,
    /// Connections open at once; one more is accepted and closed at once, with a log line.
    pub connections_max: usize,
    pub frame_size_max: u32,
    pub unauthenticated_frame_size_max: u32,
    pub in_flight_max: usize,
    /// How long the TLS handshake and the login together may take.
    pub handshake_grace: Duration,
    /// How long the rest of a frame may take once its first byte arrived.
    pub frame_read_timeout: Duration,
    pub write_timeout: Duration,
}

/// Binding the listener failed.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("bind TCP (TLS) listener on {address}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("read the local address of the TCP (TLS) listener")]
    LocalAddress(#[source] io::Error),
}

/// A bound listener, not yet accepting.
pub struct TlsTcpServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    config: TlsTcpConfig,
    local_address: SocketAddr,
}

impl std::fmt::Debug for TlsTcpServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TlsTcpServer")
            .field("config", &self.config)
            .field("local_address", &self.local_address)
            .finish_non_exhaustive()
    }
}

impl TlsTcpServer {
    /// Binds `config.address`, retrying a port still held ([`crate::listen::bind`]).
    pub async fn bind(
        config: TlsTcpConfig,
        tls: rustls::ServerConfig,
    ) -> Result<Self, ListenError> {
        let listener = crate::listen::bind(config.address)
            .await
            .map_err(|source| ListenError::Bind {
                address: config.address,
                source,
            })?;
        let local_address = listener.local_addr().map_err(ListenError::LocalAddress)?;
        Ok(Self {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            config,
            local_address,
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_address(&self) -> SocketAddr {
        self.local_address
    }

    /// Serves every connection on the current runtime until `shutdown` completes, then lets
    /// the requests being handled finish (up to ten seconds).
    pub async fn serve<H>(self, handler: Rc<H>, shutdown: impl Future<Output = ()>)
    where
        H: ConnectionHandler + 'static,
    {
        let config = self.config;
        let acceptor = &self.acceptor;
        let serve = |stream, peer, shared| {
            let acceptor = acceptor.clone();
            serve_connection(stream, peer, acceptor, Rc::clone(&handler), config, shared)
        };
        let connections_max = config.connections_max;
        accept_until("tcp+tls", &self.listener, connections_max, serve, shutdown).await;
    }
}

/// Completes the TLS handshake, then serves one connection until it ends.
async fn serve_connection<H: ConnectionHandler>(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    handler: Rc<H>,
    config: TlsTcpConfig,
    shared: Rc<Shared>,
) {
    let _ = stream.set_nodelay(true);
    crate::listen::end_when_unacknowledged(&stream, config.write_timeout, "tcp+tls");
    let accepted = Instant::now();
    let stream = match compio::time::timeout(config.handshake_grace, acceptor.accept(stream)).await
    {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => return log::info!("tcp+tls: {peer}: handshake failed: {error}"),
        Err(_elapsed) => return log::info!("tcp+tls: {peer}: handshake timed out"),
    };
    let (reader, writer) = stream.split();
    let replies = futures_util::sink::unfold(writer, |mut writer, bytes: Vec<u8>| async move {
        writer
            .write_all(&bytes)
            .await
            .map_err(|error| error.to_string())?;
        writer.flush().await.map_err(|error| error.to_string())?;
        Ok::<_, String>(writer)
    });
    // One frame read ahead at most: the channel holds none, its sender one.
    let (sender, pieces) = mpsc::channel(0);
    let connection = handler.open(peer);
    let link_config = LinkConfig {
        frame_size_max: config.frame_size_max,
        unauthenticated_frame_size_max: config.unauthenticated_frame_size_max,
        in_flight_max: config.in_flight_max,
        handshake_grace: config.handshake_grace,
        write_timeout: config.write_timeout,
    };
    let link = Link {
        handler: &*handler,
        connection: &connection,
        config: link_config,
        shared: &shared,
        // Frames are sized from their headers before their bodies are read.
        read_meter: None,
    };
    let size_max = || link_config.size_max(handler.authenticated(&connection));
    let reading = read_frames(reader, size_max, config.frame_read_timeout, sender);
    let replies = pin!(replies);
    let serving = link.serve(pieces, replies, accepted);
    // The link ends the connection; the reader ends with it (or earlier, at the peer's end,
    // which it reports through the channel).
    let ended = match select(pin!(serving), pin!(reading)).await {
        Either::Left((ended, _)) => ended,
        Either::Right(((), serving)) => serving.await,
    };
    log_end("tcp+tls", peer, &ended);
    handler.close(connection);
}

/// Reads frames in order into `sender` until the peer closes, reading fails, a frame is
/// refused or the link stops taking them. A frame's size is checked against `size_max()`
/// before its body is read.
async fn read_frames<R: AsyncRead + Unpin>(
    mut reader: R,
    size_max: impl Fn() -> u32,
    frame_read_timeout: Duration,
    mut sender: mpsc::Sender<Piece>,
) {
    loop {
        let piece = read_frame(&mut reader, &size_max, frame_read_timeout).await;
        let last = !matches!(piece, Piece::Frame(_));
        if sender.send(piece).await.is_err() || last {
            return;
        }
    }
}

/// Bytes of a body read before the frame grows for more: a header whose body never comes
/// holds this much, not what it declared.
const BODY_FIRST_PART_BYTES: usize = 64 << 10;

/// Reads one frame. Its limit is `size_max()` as it is once the header arrived, not when the
/// read began: the reader waits for a frame while its predecessor is answered, and a login's
/// answer raises the limit for the frame after it. The body grows the frame as it arrives,
/// at most doubling it, so memory follows the bytes sent rather than the size declared.
async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    size_max: &impl Fn() -> u32,
    frame_read_timeout: Duration,
) -> Piece {
    let mut frame = vec![0_u8; HEADER_SIZE];
    // An idle connection may wait for its next frame as long as it likes (the link keeps the
    // login grace); once a byte came, the rest of the frame has the read timeout.
    match reader.read(&mut frame[..1]).await {
        Ok(0) => return Piece::Closed,
        Ok(_) => {}
        Err(error) => return Piece::Failed(error.to_string()),
    }
    let deadline = Instant::now() + frame_read_timeout;
    if let Err(piece) = read_until(reader, &mut frame[1..], deadline).await {
        return piece;
    }
    let mut header = Box::new([0_u8; HEADER_SIZE]);
    header.copy_from_slice(&frame);
    let prefix = match crate::frame::request_prefix(&frame, size_max()) {
        Ok(prefix) => prefix,
        Err((kind, error)) => return Piece::Refused((header, kind, error.to_string())),
    };
    let end = HEADER_SIZE + prefix.body_length();
    while frame.len() < end {
        let filled = frame.len();
        let part_end = end.min((filled - HEADER_SIZE).max(BODY_FIRST_PART_BYTES) + filled);
        frame.resize(part_end, 0);
        if let Err(piece) = read_until(reader, &mut frame[filled..], deadline).await {
            return piece;
        }
    }
    Piece::Frame(Bytes::from(frame))
}

/// Fills `buffer` by `deadline`.
async fn read_until<R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &mut [u8],
    deadline: Instant,
) -> Result<(), Piece> {
    let left = deadline.saturating_duration_since(Instant::now());
    match compio::time::timeout(left, reader.read_exact(buffer)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) if error.kind() == io::ErrorKind::UnexpectedEof => Err(Piece::Closed),
        Ok(Err(error)) => Err(Piece::Failed(error.to_string())),
        Err(_elapsed) => Err(Piece::Failed("a frame read timed out".into())),
    }
}

#[cfg(test)]
mod tests;

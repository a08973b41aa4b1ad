//! The binary protocol over WebSocket (PROTOCOL.md §1.13), on compio sockets through
//! `compio-ws` (tungstenite's protocol code on compio's runtime; the same pair the reference
//! server uses, and no tokio).
//!
//! Each request is one Binary message holding exactly one frame (header and body); each
//! answer goes back as one Binary message. A message whose length is not its header's
//! `size`, a frame over the size limit, a command other than Request or a Text message gets
//! an eviction and ends that connection only. Ping and Pong are answered by tungstenite.
//! Requests of one connection are handled concurrently and answered as they complete, as
//! on TCP; before login the connection is read in lockstep and must log in within the
//! handshake grace (which also bounds the upgrade).
//!
//! The listener serves its connections on the shard it runs on; the shard core forwards
//! partition work to the owning shard.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use compio::net::{TcpListener, TcpStream};
use compio_ws::tungstenite::protocol::WebSocketConfig;
use compio_ws::tungstenite::{Bytes, Error as WsError, Message};
use futures_util::future::{Either, select};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::{Sink, SinkExt};
use proto::header::{EvictionReason, HEADER_SIZE};

use crate::frame::{self, Answer, Refused};
use crate::{BadFrame, ConnectionHandler};

/// How long shutdown waits for requests already being handled.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed accept (descriptor exhaustion), so the loop does not spin.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(50);

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
#[derive(Debug)]
pub struct WsServer {
    listener: TcpListener,
    config: WsConfig,
    local_address: SocketAddr,
}

/// What the listener's connection tasks share.
#[derive(Debug, Default)]
struct Shared {
    open: Cell<usize>,
    stopping: Cell<bool>,
    /// Notified when shutdown starts, and when a connection ends.
    changed: event_listener::Event,
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
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_address(&self) -> SocketAddr {
        self.local_address
    }

    /// Serves every connection on the current runtime until `shutdown` completes, then
    /// lets the requests being handled finish (up to ten seconds).
    pub async fn serve<H>(self, handler: Rc<H>, shutdown: impl Future<Output = ()>)
    where
        H: ConnectionHandler + 'static,
    {
        let shared = Rc::new(Shared::default());
        let accepting = pin!(self.accept_loop(&handler, &shared));
        let _ = select(accepting, pin!(shutdown)).await;
        shared.stopping.set(true);
        shared.changed.notify(usize::MAX);
        log::info!(
            "websocket: stopped accepting; {} connection(s) open",
            shared.open.get()
        );
        let drained = async {
            while shared.open.get() > 0 {
                let changed = shared.changed.listen();
                if shared.open.get() == 0 {
                    break;
                }
                changed.await;
            }
        };
        if compio::time::timeout(DRAIN_TIMEOUT, drained).await.is_err() {
            log::warn!(
                "websocket: {} connection(s) still open after the drain timeout",
                shared.open.get()
            );
        }
    }

    async fn accept_loop<H>(&self, handler: &Rc<H>, shared: &Rc<Shared>)
    where
        H: ConnectionHandler + 'static,
    {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    log::warn!("websocket: accept failed: {error}");
                    compio::time::sleep(ACCEPT_RETRY_DELAY).await;
                    continue;
                }
            };
            if shared.open.get() >= self.config.connections_max {
                log::warn!(
                    "websocket: {peer} refused: {} connections open (max_connections)",
                    shared.open.get()
                );
                continue;
            }
            shared.open.set(shared.open.get() + 1);
            let task = serve_connection(
                stream,
                peer,
                Rc::clone(handler),
                self.config,
                Rc::clone(shared),
            );
            compio::runtime::spawn(task).detach();
        }
    }
}

/// Why a connection ended, for the log line.
#[derive(Debug)]
enum Ended {
    PeerClosed,
    Stopping,
    Evicted,
    TimedOut(&'static str),
    Bad(BadFrame, String),
    Io(String),
}

/// Upgrades, then serves one connection until it ends.
async fn serve_connection<H: ConnectionHandler>(
    stream: TcpStream,
    peer: SocketAddr,
    handler: Rc<H>,
    config: WsConfig,
    shared: Rc<Shared>,
) {
    let _ = stream.set_nodelay(true);
    let accepted = Instant::now();
    let upgrade = compio_ws::accept_async_with_config(stream, config.websocket());
    match compio::time::timeout(config.handshake_grace, upgrade).await {
        Ok(Ok(socket)) => {
            let connection = handler.open(peer);
            let link = Link {
                handler: &*handler,
                connection: &connection,
                config,
                shared: &shared,
            };
            let ended = link.serve(socket, accepted).await;
            match ended {
                Ended::PeerClosed | Ended::Stopping => log::debug!("websocket: {peer} closed"),
                Ended::Bad(kind, error) => {
                    log::warn!("websocket: {peer} sent a bad frame ({kind:?}: {error}); closed");
                }
                Ended::Evicted => log::info!("websocket: {peer} evicted"),
                Ended::TimedOut(what) => log::info!("websocket: {peer} closed: {what} timed out"),
                Ended::Io(error) => log::info!("websocket: {peer} closed: {error}"),
            }
            handler.close(connection);
        }
        Ok(Err(error)) => log::info!("websocket: {peer}: upgrade failed: {error}"),
        Err(_elapsed) => log::info!("websocket: {peer}: upgrade timed out"),
    }
    shared.open.set(shared.open.get().saturating_sub(1));
    shared.changed.notify(usize::MAX);
}

/// One connection's loop and what it serves with.
struct Link<'l, H: ConnectionHandler> {
    handler: &'l H,
    connection: &'l H::Connection,
    config: WsConfig,
    shared: &'l Shared,
}

/// What the connection loop waits for besides answers and evictions.
#[derive(Debug, Clone, Copy)]
struct Watch {
    /// A message may be read.
    read: bool,
    /// Shutdown has not been seen yet.
    stop: bool,
    /// Unauthenticated: the login must come by then.
    grace_end: Option<Instant>,
}

/// What the connection loop acts on next.
enum Event {
    Message(Option<Result<Message, String>>),
    Answered(Box<[u8; HEADER_SIZE]>, Answer),
    Evicted(EvictionReason),
    Stopping,
    LoginTimedOut,
}

/// What the connection loop knows of its link between events.
struct Progress {
    authenticated: bool,
    /// Since when the link is unauthenticated (its accept, or its last logout).
    unauthenticated_since: Instant,
    /// Messages are still read (the peer has not closed, the socket has not failed).
    reading: bool,
    /// Shutdown seen: nothing more is read, the requests in flight are answered.
    stopping: bool,
    /// The client id of the latest request, for an eviction that answers none.
    client: u128,
}

impl Progress {
    /// What to wait for with `pending` requests in flight. Before login a client waits for
    /// each answer: read in lockstep, so the next frame is sized by what the answer made of
    /// the connection.
    fn watch(&self, pending: usize, in_flight_max: usize, grace: Duration) -> Watch {
        let limit = if self.authenticated { in_flight_max } else { 1 };
        Watch {
            read: self.reading && !self.stopping && pending < limit,
            stop: !self.stopping,
            grace_end: (!self.authenticated).then(|| self.unauthenticated_since + grace),
        }
    }
}

impl<H: ConnectionHandler> Link<'_, H> {
    /// Reads messages, handles their frames concurrently and writes each answer as it
    /// completes, until the peer closes, a frame is bad, the server evicts the session or
    /// shuts down (then the requests in flight are answered first).
    async fn serve<S>(&self, socket: S, accepted: Instant) -> Ended
    where
        S: futures_util::Stream<Item = Result<Message, WsError>>
            + Sink<Message, Error = WsError>
            + Unpin,
    {
        let (mut sink, mut messages) = socket.split();
        let mut pending = FuturesUnordered::new();
        let mut evicted = pin!(self.handler.evicted(self.connection));
        let mut progress = Progress {
            authenticated: self.handler.authenticated(self.connection),
            unauthenticated_since: accepted,
            reading: true,
            stopping: false,
            client: 0,
        };
        let in_flight_max = self.config.in_flight_max.max(1);
        loop {
            let watch = progress.watch(pending.len(), in_flight_max, self.config.handshake_grace);
            let event = self
                .next_event(&mut messages, &mut pending, evicted.as_mut(), watch)
                .await;
            let timeout = self.config.write_timeout;
            let result = match event {
                Event::Message(message) => {
                    match self.on_message(message, &mut progress, &mut sink).await {
                        Ok(Some((header, bytes))) => {
                            pending.push(self.answer(header, bytes));
                            Ok(())
                        }
                        // The stream ended: done once the requests in flight are answered.
                        Ok(None) if !progress.reading => idle_end(&pending, Ended::PeerClosed),
                        Err(Ended::Io(error)) if pending.is_empty() => Err(Ended::Io(error)),
                        // A failed read ends the link once the requests in flight are done.
                        Ok(None) | Err(Ended::Io(_)) => Ok(()),
                        Err(ended) => Err(ended),
                    }
                }
                Event::Answered(header, answer) => {
                    let written = self.on_answer(&header, answer, &mut progress, &mut sink);
                    match written.await {
                        Ok(()) if !progress.reading || progress.stopping => {
                            idle_end(&pending, Ended::Stopping)
                        }
                        other => other,
                    }
                }
                Event::Evicted(reason) => {
                    let eviction = frame::eviction_of(progress.client, reason);
                    send(&mut sink, eviction, timeout)
                        .await
                        .and(Err(Ended::Evicted))
                }
                Event::Stopping => {
                    progress.stopping = true;
                    idle_end(&pending, Ended::Stopping)
                }
                Event::LoginTimedOut => Err(Ended::TimedOut("the login")),
            };
            if let Err(ended) = result {
                let _ = compio::time::timeout(timeout, sink.close()).await;
                return ended;
            }
        }
    }

    /// A message arrived, or the stream ended (then `progress.reading` turns false): the
    /// request frame to handle, if it was one; a bad message is evicted here.
    async fn on_message<S>(
        &self,
        message: Option<Result<Message, String>>,
        progress: &mut Progress,
        sink: &mut S,
    ) -> Result<Option<(Box<[u8; HEADER_SIZE]>, Bytes)>, Ended>
    where
        S: Sink<Message, Error = WsError> + Unpin,
    {
        let timeout = self.config.write_timeout;
        match message {
            Some(Ok(Message::Binary(bytes))) => match self.check(&bytes, progress.authenticated) {
                Ok(header) => {
                    progress.client = frame::client(&header);
                    Ok(Some((header, bytes)))
                }
                Err((header, kind, error)) => {
                    let eviction = frame::eviction(&header, kind.eviction_reason());
                    send(sink, eviction, timeout).await?;
                    Err(Ended::Bad(kind, error))
                }
            },
            Some(Ok(Message::Text(_))) => {
                let reason = BadFrame::Command.eviction_reason();
                send(sink, frame::eviction_of(progress.client, reason), timeout).await?;
                Err(Ended::Bad(BadFrame::Command, "a Text message".into()))
            }
            Some(Ok(Message::Close(_))) | None => {
                progress.reading = false;
                Ok(None)
            }
            // Ping and Pong (answered inside tungstenite) and raw frames carry no request.
            Some(Ok(_)) => Ok(None),
            Some(Err(error)) => {
                progress.reading = false;
                Err(Ended::Io(error))
            }
        }
    }

    /// Writes an answer; notes a login or a logout it made.
    async fn on_answer<S>(
        &self,
        header: &[u8; HEADER_SIZE],
        answer: Answer,
        progress: &mut Progress,
        sink: &mut S,
    ) -> Result<(), Ended>
    where
        S: Sink<Message, Error = WsError> + Unpin,
    {
        let evicts = matches!(answer, Answer::Evict(_));
        let dialect = self.handler.dialect(self.connection);
        if let Some(frame) = frame::encode(header, answer, dialect) {
            send(sink, frame.into_bytes(), self.config.write_timeout).await?;
        }
        let authenticated = self.handler.authenticated(self.connection);
        if progress.authenticated && !authenticated {
            // A logout: the grace starts again for the next login.
            progress.unauthenticated_since = Instant::now();
        }
        progress.authenticated = authenticated;
        if evicts { Err(Ended::Evicted) } else { Ok(()) }
    }

    /// Waits for the next message (only when `read`), answer, eviction, shutdown or the end
    /// of the login grace. The losers of the race lose nothing: a stream's `next` and a
    /// `FuturesUnordered`'s `next` are cancel-safe, and `evicted` is polled again next time.
    async fn next_event<M, F>(
        &self,
        messages: &mut M,
        pending: &mut FuturesUnordered<F>,
        evicted: std::pin::Pin<&mut impl Future<Output = EvictionReason>>,
        watch: Watch,
    ) -> Event
    where
        M: futures_util::Stream<Item = Result<Message, WsError>> + Unpin,
        F: Future<Output = (Box<[u8; HEADER_SIZE]>, Answer)>,
    {
        let message = async {
            if watch.read {
                let next = messages.next().await;
                Event::Message(next.map(|item| item.map_err(|error| error.to_string())))
            } else {
                std::future::pending().await
            }
        };
        let answered = async {
            match pending.next().await {
                Some((header, answer)) => Event::Answered(header, answer),
                None => std::future::pending().await,
            }
        };
        let stopping = async {
            if !watch.stop {
                return std::future::pending().await;
            }
            loop {
                let listener = self.shared.changed.listen();
                if self.shared.stopping.get() {
                    return Event::Stopping;
                }
                listener.await;
            }
        };
        let login = async {
            match watch.grace_end {
                Some(end) => {
                    let left = end.saturating_duration_since(Instant::now());
                    compio::time::sleep(left).await;
                    Event::LoginTimedOut
                }
                None => std::future::pending().await,
            }
        };
        let evicted = async { Event::Evicted(evicted.await) };
        let work = first(message, answered);
        first(first(evicted, work), first(stopping, login)).await
    }

    /// The frame's header when the message is one valid request frame.
    fn check(&self, bytes: &[u8], authenticated: bool) -> Result<Box<[u8; HEADER_SIZE]>, Refused> {
        let size_max = if authenticated {
            self.config.frame_size_max
        } else {
            self.config
                .unauthenticated_frame_size_max
                .min(self.config.frame_size_max)
        };
        frame::check_whole(bytes, size_max)
    }

    /// Handles one frame; the header comes back with the answer for the reply to echo.
    async fn answer(
        &self,
        header: Box<[u8; HEADER_SIZE]>,
        bytes: Bytes,
    ) -> (Box<[u8; HEADER_SIZE]>, Answer) {
        let body = bytes.get(HEADER_SIZE..).unwrap_or_default();
        let answer = self.handler.handle(self.connection, &header, body).await;
        (header, answer)
    }
}

/// The first of two events.
async fn first(a: impl Future<Output = Event>, b: impl Future<Output = Event>) -> Event {
    match select(pin!(a), pin!(b)).await {
        Either::Left((event, _)) | Either::Right((event, _)) => event,
    }
}

/// Reading ended with `ended`: the connection ends now when nothing is pending; otherwise
/// the pending requests are answered first (the loop ends after the last answer).
fn idle_end<F>(pending: &FuturesUnordered<F>, ended: Ended) -> Result<(), Ended> {
    if pending.is_empty() {
        Err(ended)
    } else {
        Ok(())
    }
}

/// Sends one Binary message within `timeout`.
async fn send<S>(sink: &mut S, bytes: Vec<u8>, timeout: Duration) -> Result<(), Ended>
where
    S: Sink<Message, Error = WsError> + Unpin,
{
    match compio::time::timeout(timeout, sink.send(Message::binary(bytes))).await {
        Ok(result) => result.map_err(|error| Ended::Io(error.to_string())),
        Err(_elapsed) => Err(Ended::TimedOut("a reply write")),
    }
}

#[cfg(test)]
mod tests;

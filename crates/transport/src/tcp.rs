//! The binary protocol over TCP on compio sockets (PROTOCOL.md §1.11).
//!
//! Thread-per-core: one accept loop (on shard 0) hands each accepted connection to a shard
//! round-robin, as a file descriptor, before a byte of it is read; each shard's [`TcpShard`]
//! runs one task per connection it was given, on its own runtime, for the connection's life.
//! A connection's task reads frames, asks the handler, and writes each answer as it
//! completes, and writes the eviction the handler signals when the server ends the session on
//! its own (a stale client). The frame size is checked before a body byte is read, and a bad
//! frame ends only its own connection.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use compio::BufResult;
use compio::io::AsyncWriteExt;
use compio::net::{TcpListener, TcpStream};
use futures_channel::mpsc;
use futures_util::future::{Either, select};
use futures_util::stream::{FuturesUnordered, StreamExt};
use pool::Pool;
use proto::header::{EvictionReason, HEADER_SIZE};

use self::body::{Body, UnauthenticatedBudget};
use crate::frame::{self, Answer};
use crate::{BadFrame, ConnectionHandler};

/// How long shutdown waits for requests already being handled.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Limits and address of a TCP listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpConfig {
    pub address: SocketAddr,
    /// Connections open at once; one more is accepted and closed at once, with a log line.
    pub connections_max: usize,
    /// Largest frame, header included (`message_bus.max_message_size`); a larger `size` gets
    /// an eviction and the connection is closed before its body is read.
    pub frame_size_max: u32,
    /// Requests of one connection read but not yet answered; at the limit the connection is
    /// not read until an answer is written (TCP backpressure). At least 1.
    pub in_flight_max: usize,
    /// Largest frame before the connection is authenticated: its body is read onto the heap,
    /// never from the pool, so connections that proved nothing cannot starve it.
    pub unauthenticated_frame_size_max: u32,
    /// How long a connection may stay unauthenticated (`message_bus.handshake_grace`).
    pub handshake_grace: Duration,
    /// How long the rest of a frame may take once its first bytes arrived.
    pub frame_read_timeout: Duration,
    /// How long a reply may wait for the client to take it before the connection is closed.
    pub write_timeout: Duration,
    /// Connections open at once from one IP address; 0 = no limit.
    pub connections_per_ip_max: usize,
}

/// Binding the listener failed.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("bind TCP listener on {address}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("read the local address of the TCP listener")]
    LocalAddress(#[source] io::Error),
}

/// A bound listener, not yet accepting.
#[derive(Debug)]
pub struct TcpServer {
    listener: TcpListener,
    config: TcpConfig,
    local_address: SocketAddr,
}

/// Counters of one shard's connection tasks.
#[derive(Debug, Default)]
struct ServeState {
    in_flight: Cell<usize>,
    stopping: Cell<bool>,
    /// What the unauthenticated bodies of the shard's connections hold.
    unauthenticated: Rc<UnauthenticatedBudget>,
}

impl ServeState {
    /// `count` requests are no longer in flight (answered, or dropped with their connection).
    fn done(&self, count: usize) {
        self.in_flight
            .set(self.in_flight.get().saturating_sub(count));
    }
}

/// A connection's place in [`Connections`], given back when dropped unless `address` was
/// taken (the connection moved to another shard, which gives it back in turn).
struct Counted {
    connections: ConnectionCount,
    address: Option<IpAddr>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(address) = self.address.take() {
            self.connections.close(address);
        }
    }
}

/// Connections open on every shard, counted against `connections_max` (and per address
/// against `connections_per_ip_max`) by the accept loop.
pub type ConnectionCount = Arc<Connections>;

/// The open connections of every shard: a total and a count per peer address.
#[derive(Debug, Default)]
pub struct Connections {
    open: AtomicUsize,
    per_address: std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>,
}

impl Connections {
    /// Counts a new connection from `address` unless a limit is reached (`per_address_max`
    /// 0 = none); says whether it was counted.
    fn try_open(&self, address: IpAddr, max: usize, per_address_max: usize) -> Result<(), String> {
        let open = self.open.load(Ordering::Relaxed);
        if open >= max {
            return Err(format!("{open} connections open (tcp.max_connections)"));
        }
        if per_address_max > 0 {
            let mut per_address = self.lock();
            let count = per_address.entry(address).or_insert(0);
            if *count >= per_address_max {
                let count = *count;
                return Err(format!(
                    "{count} connections open from it (tcp.max_connections_per_ip)"
                ));
            }
            *count += 1;
        }
        self.open.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A counted connection from `address` ended.
    fn close(&self, address: IpAddr) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        let mut per_address = self.lock();
        if let Some(count) = per_address.get_mut(&address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                per_address.remove(&address);
            }
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<IpAddr, usize>> {
        // A panic while counting cannot leave the map inconsistent (one integer update).
        self.per_address
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A connection on its way to the shard that will serve it: just accepted, or moving with
/// the state its previous shard packed.
pub struct Handed {
    descriptor: OwnedFd,
    peer: SocketAddr,
    /// `None` for a new connection.
    state: Option<Box<dyn Any + Send>>,
}

/// What a hand-off channel carries.
pub enum Arrival {
    Connection(Handed),
    /// The server stops: the receiving shard stops taking connections.
    Stop,
}

/// A sending end of one shard's hand-off channel (the accept loop's, or another shard's for
/// moving connections).
pub type Handoff = crate::handoff::Sender<Arrival>;

/// A shard's end of its hand-off channel; see [`TcpShard::receive`].
pub type HandoffInbox = crate::handoff::Receiver<Arrival>;

/// A hand-off channel for one shard.
pub fn handoff_channel() -> (Handoff, HandoffInbox) {
    crate::handoff::channel()
}

/// One shard's side of TCP: serves the connections handed to it, on the current runtime.
pub struct TcpShard<H> {
    config: TcpConfig,
    handler: Rc<H>,
    state: Rc<ServeState>,
    connections: ConnectionCount,
    /// The shard's buffer pool: request bodies are read into it.
    pool: Rc<Pool>,
    /// Every shard's hand-off channel by shard index (`None` for this one and for shards
    /// without one): where moving connections go.
    peers: Peers,
}

/// Hand-off channels by shard index, shared by a shard's connection tasks.
type Peers = Rc<RefCell<Vec<Option<Handoff>>>>;

impl<H: ConnectionHandler + 'static> TcpShard<H> {
    /// A shard serving with `handler` and reading bodies into `pool`; `connections` is
    /// shared with the accept loop and the other shards.
    pub fn new(
        config: TcpConfig,
        handler: Rc<H>,
        connections: ConnectionCount,
        pool: Rc<Pool>,
    ) -> Self {
        Self {
            config,
            handler,
            state: Rc::default(),
            connections,
            pool,
            peers: Rc::default(),
        }
    }

    /// The hand-off channels of the shards, by index: connections may move to them.
    pub fn set_peers(&self, peers: Vec<Option<Handoff>>) {
        *self.peers.borrow_mut() = peers;
    }

    /// Serves the connections that arrive in `inbox` (accepted, or moving here from another
    /// shard) until it says stop or every sender is gone.
    pub async fn receive(&self, inbox: HandoffInbox) {
        while let Ok(Arrival::Connection(handed)) = inbox.recv().await {
            let Handed {
                descriptor,
                peer,
                state,
            } = handed;
            let connection = match state.map(|state| self.handler.attach(state)) {
                None => None,
                Some(Some(connection)) => Some(connection),
                Some(None) => {
                    log::warn!("tcp: {peer}: a moving connection's state was not taken");
                    self.connections.close(peer.ip());
                    continue;
                }
            };
            let std_stream = std::net::TcpStream::from(descriptor);
            match TcpStream::from_std(std_stream) {
                Ok(stream) => self.adopt(stream, peer, connection),
                Err(error) => {
                    log::warn!("tcp: {peer}: adopt handed connection: {error}");
                    if let Some(connection) = connection {
                        self.handler.close(connection);
                    }
                    self.connections.close(peer.ip());
                }
            }
        }
    }

    /// Serves `stream`, already counted in the connections, until it closes or moves to
    /// another shard; `connection` is the state of one moving here, `None` for a new one.
    fn adopt(&self, stream: TcpStream, peer: SocketAddr, connection: Option<H::Connection>) {
        if let Err(error) = stream.set_nodelay(true) {
            log::warn!("tcp: {peer}: set TCP_NODELAY: {error}");
        }
        let handler = Rc::clone(&self.handler);
        let state = Rc::clone(&self.state);
        let connections = Arc::clone(&self.connections);
        let config = self.config;
        let pool = Rc::clone(&self.pool);
        let unauthenticated = Rc::clone(&self.state.unauthenticated);
        let peers = Rc::clone(&self.peers);
        compio::runtime::spawn(async move {
            // Gives the connection's count back when the task ends, by any path, a panic's
            // unwinding included (a per-address slot must never leak), unless handed over.
            let mut counted = Counted {
                connections,
                address: Some(peer.ip()),
            };
            let connection = connection.unwrap_or_else(|| handler.open(peer));
            let serving = Serving {
                config,
                handler: &*handler,
                state: &state,
                pool,
                unauthenticated,
                peers: &peers,
            };
            let (connection, moving) = serve_connection(stream, peer, serving, connection).await;
            let Some((target, descriptor)) = moving else {
                handler.close(connection);
                return;
            };
            let state = match handler.detach(connection) {
                Ok(state) => state,
                Err(connection) => {
                    handler.close(connection);
                    return;
                }
            };
            let handed = Handed {
                descriptor,
                peer,
                state: Some(state),
            };
            if hand_to(&peers, target, handed).await {
                // Counted still, on the shard that took it.
                counted.address = None;
            } else {
                // The target stopped (shutdown): the connection ends with it.
                log::info!("tcp: {peer}: shard {target} is gone; connection closed");
            }
        })
        .detach();
    }

    /// Stops taking requests and waits (up to a bound) for the ones being handled to be
    /// answered. Connections still open are dropped with the runtime.
    pub async fn drain(&self) {
        self.state.stopping.set(true);
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while self.state.in_flight.get() > 0 && Instant::now() < deadline {
            compio::time::sleep(Duration::from_millis(5)).await;
        }
        log::info!(
            "tcp: shard drained; {} request(s) unanswered",
            self.state.in_flight.get()
        );
    }
}

impl TcpServer {
    /// Binds `config.address`, retrying a port still held ([`crate::listen::bind`]).
    pub async fn bind(config: TcpConfig) -> Result<Self, ListenError> {
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

    /// Serves every connection on the current runtime (one shard), reading bodies into
    /// `pool`, until `shutdown` completes, then lets the requests being handled finish.
    pub async fn serve<H>(self, handler: Rc<H>, pool: Rc<Pool>, shutdown: impl Future<Output = ()>)
    where
        H: ConnectionHandler + 'static,
    {
        let shard = TcpShard::new(self.config, handler, ConnectionCount::default(), pool);
        self.accept(&shard, Vec::new(), None, shutdown).await;
        shard.drain().await;
    }

    /// Accepts connections until `shutdown` completes. Connection *n* goes to shard
    /// `n % (1 + others.len())`: 0 is `local`, served here; shard *i* gets the descriptor
    /// through `others[i - 1]`. Dropping the hand-offs on return ends the shards'
    /// [`TcpShard::receive`].
    /// Connections moving to this shard arrive in `inbox`, served here too. On return the
    /// other shards are told to stop taking connections.
    pub async fn accept<H>(
        self,
        local: &TcpShard<H>,
        others: Vec<Handoff>,
        inbox: Option<HandoffInbox>,
        shutdown: impl Future<Output = ()>,
    ) where
        H: ConnectionHandler + 'static,
    {
        let accept = pin!(accept_loop(&self.listener, local, &others));
        let moving_in = pin!(async {
            if let Some(inbox) = inbox {
                local.receive(inbox).await;
            }
            // No shard can send here any more (or never could): accepting goes on.
            std::future::pending::<()>().await;
        });
        let serving = select(accept, moving_in);
        let shutdown = pin!(shutdown);
        let _ = select(serving, shutdown).await;
        for other in &others {
            let _ = other.send(Arrival::Stop).await;
        }
        log::info!(
            "tcp: stopped accepting; {} connection(s) open",
            local.connections.open()
        );
    }
}

async fn accept_loop<H>(listener: &TcpListener, local: &TcpShard<H>, others: &[Handoff])
where
    H: ConnectionHandler + 'static,
{
    let shards = others.len().saturating_add(1);
    let mut next: usize = 0;
    loop {
        let (stream, peer) = crate::listen::accept_next("tcp", listener).await;
        let config = &local.config;
        let counted = local.connections.try_open(
            peer.ip(),
            config.connections_max,
            config.connections_per_ip_max,
        );
        if let Err(reason) = counted {
            log::warn!("tcp: refused {peer}: {reason}");
            drop(stream);
            continue;
        }
        let shard = next % shards;
        next = next.wrapping_add(1);
        match shard.checked_sub(1).and_then(|index| others.get(index)) {
            None => local.adopt(stream, peer, None),
            Some(handoff) => hand_off(handoff, stream, peer, &local.connections).await,
        }
    }
}

/// Sends a just-accepted connection to another shard.
async fn hand_off(
    handoff: &Handoff,
    stream: TcpStream,
    peer: SocketAddr,
    connections: &ConnectionCount,
) {
    let arrival = |descriptor| {
        Arrival::Connection(Handed {
            descriptor,
            peer,
            state: None,
        })
    };
    if !crate::handoff::pass("tcp", handoff, stream, peer, arrival).await {
        connections.close(peer.ip());
    }
}

/// Sends a moving connection to shard `target`; says whether its channel took it.
async fn hand_to(peers: &Peers, target: usize, handed: Handed) -> bool {
    let handoff = peers.borrow().get(target).cloned().flatten();
    match handoff {
        Some(handoff) => handoff.send(Arrival::Connection(handed)).await.is_ok(),
        None => false,
    }
}

/// Why a connection loop ended, for the log.
enum Ended {
    PeerClosed,
    Io(io::Error),
    BadFrame(BadFrame, proto::DecodeError),
    Evicted,
    Stopping,
    /// A read or write did not complete in time: what it was.
    TimedOut(&'static str),
    /// The connection moves to shard `.0`; nothing is in flight and no byte of the next
    /// frame was read.
    Moving(usize),
}

/// What the reader task hands the connection loop.
enum Incoming {
    Frame(Box<[u8; HEADER_SIZE]>, Body),
    /// The frame's prefix is bad: evict with the header as sent, then close.
    Bad(Box<[u8; HEADER_SIZE]>, BadFrame, proto::DecodeError),
    /// Reading stopped: the peer closed or the socket failed.
    End(Ended),
}

/// What a connection's task serves with.
struct Serving<'s, H> {
    config: TcpConfig,
    handler: &'s H,
    state: &'s ServeState,
    pool: Rc<Pool>,
    unauthenticated: Rc<UnauthenticatedBudget>,
    /// Where the connection may move.
    peers: &'s Peers,
}

/// Serves one connection until it ends; returns its state and, when it moves to another
/// shard, the target and a duplicate of its descriptor (the stream itself is closed here).
async fn serve_connection<H: ConnectionHandler>(
    stream: TcpStream,
    peer: SocketAddr,
    serving: Serving<'_, H>,
    connection: H::Connection,
) -> (H::Connection, Option<(usize, OwnedFd)>) {
    let Serving {
        config,
        handler,
        state,
        pool,
        unauthenticated,
        peers,
    } = serving;
    let (reader, mut writer) = stream.into_split();
    // The channel holds one frame read ahead; `serve_frames` bounds the ones being handled.
    let (sender, mut frames) = mpsc::channel(0);
    let authenticated = Rc::new(Cell::new(handler.authenticated(&connection)));
    let answered = Rc::new(event_listener::Event::new());
    let unauthenticated_since = Rc::new(Cell::new(Instant::now()));
    let may_move = Rc::new(Cell::new(false));
    let moving = Rc::new(Cell::new(None));
    let reading = Reading {
        config,
        pool,
        authenticated: Rc::clone(&authenticated),
        answered: Rc::clone(&answered),
        unauthenticated_since: Rc::clone(&unauthenticated_since),
        unauthenticated,
        may_move: Rc::clone(&may_move),
        moving: Rc::clone(&moving),
    };
    let reader = compio::runtime::spawn(read_frames(reader, reading, sender));
    let link = Link {
        handler,
        state,
        connection: &connection,
        authenticated: &authenticated,
        answered: &answered,
        unauthenticated_since: &unauthenticated_since,
        may_move: &may_move,
        moving: &moving,
        peers,
        config,
    };
    let ended = serve_frames(&mut frames, &mut writer, &link).await;
    if let Ended::Moving(target) = ended {
        // The reader ended itself after its last frame, its read half dropped.
        let _ = reader.await;
        match writer.as_fd().try_clone_to_owned() {
            Ok(descriptor) => {
                log::info!("tcp: {peer} moves to shard {target}");
                return (connection, Some((target, descriptor)));
            }
            Err(error) => log::warn!("tcp: {peer}: duplicate descriptor to move: {error}"),
        }
        return (connection, None);
    }
    match ended {
        Ended::PeerClosed | Ended::Stopping => log::debug!("tcp: {peer} closed"),
        Ended::Io(error) => log::info!("tcp: {peer} closed: {error}"),
        Ended::Evicted => log::info!("tcp: {peer} evicted"),
        Ended::TimedOut(what) => log::info!("tcp: {peer} closed: {what} timed out"),
        Ended::BadFrame(kind, error) => {
            log::warn!("tcp: {peer} sent a bad frame ({kind:?}: {error}); connection closed");
        }
        Ended::Moving(_) => unreachable!("a move returned above"),
    }
    (connection, None)
}

/// What the connection loop serves one connection with.
struct Link<'l, H: ConnectionHandler> {
    handler: &'l H,
    state: &'l ServeState,
    connection: &'l H::Connection,
    /// Shared with the reader task, which sizes and times frames by it.
    authenticated: &'l Cell<bool>,
    /// Notified after every answer, once `authenticated` is up to date.
    answered: &'l event_listener::Event,
    /// Shared with the reader task: reset when a logout makes the link unauthenticated.
    unauthenticated_since: &'l Cell<Instant>,
    /// Shared with the reader task: while set, it reads a frame only after the previous
    /// one is answered.
    may_move: &'l Cell<bool>,
    /// Shared with the reader task: the shard to move to, set only when nothing is in
    /// flight; the reader ends there at its next point between frames.
    moving: &'l Cell<Option<usize>>,
    peers: &'l Peers,
    config: TcpConfig,
}

impl<H: ConnectionHandler> Link<'_, H> {
    /// After an answer: the link's login state and whether it moves, for the reader task,
    /// which is woken to re-check them. `idle`: no other request is in flight.
    fn note_answer(&self, idle: bool) {
        let authenticated = self.handler.authenticated(self.connection);
        if self.authenticated.replace(authenticated) && !authenticated {
            // A logout: the handshake grace starts again for the next login.
            self.unauthenticated_since.set(Instant::now());
        }
        let may_move = authenticated && self.handler.may_move(self.connection);
        self.may_move.set(may_move);
        let target = (may_move && idle)
            .then(|| self.handler.move_to(self.connection))
            .flatten()
            .filter(|&target| self.peers.borrow().get(target).is_some_and(Option::is_some));
        self.moving.set(target);
        self.answered.notify(usize::MAX);
    }
}

/// The connection loop: takes frames from the reader task, handles them concurrently, and
/// writes each answer as it completes (replies are matched by request number, §1.11). An
/// eviction the handler signals (the server ended the session) is written at once and ends
/// the connection; the requests still being handled go unanswered. A write the client does
/// not take within the write timeout ends the connection, freeing what its requests hold.
async fn serve_frames<H: ConnectionHandler>(
    frames: &mut mpsc::Receiver<Incoming>,
    writer: &mut TcpStream,
    link: &Link<'_, H>,
) -> Ended {
    let Link {
        handler,
        state,
        connection,
        config,
        ..
    } = *link;
    let in_flight_max = config.in_flight_max.max(1);
    let write_timeout = config.write_timeout;
    let mut pending = FuturesUnordered::new();
    let mut evicted = pin!(handler.evicted(connection));
    let mut reading = true;
    // Why reading ended, while the requests in flight are still being answered.
    let mut ending = None;
    // The client id of the latest request, for an eviction that answers none.
    let mut client = 0;
    loop {
        let read = reading && pending.len() < in_flight_max;
        let event = next_event(frames, &mut pending, evicted.as_mut(), read).await;
        let result = match event {
            Event::Incoming(Some(Incoming::Frame(header, body))) if !state.stopping.get() => {
                // In flight again: no move until it is answered.
                link.moving.set(None);
                client = frame::client(&header);
                state.in_flight.set(state.in_flight.get().saturating_add(1));
                pending.push(answer(handler, connection, header, body));
                Ok(())
            }
            Event::Incoming(Some(Incoming::Frame(..))) => {
                // Shutting down: no new request; the ones in flight still get answers.
                reading = false;
                end_when_idle(pending.is_empty(), Ended::Stopping, &mut ending)
            }
            Event::Incoming(Some(Incoming::Bad(header, kind, error))) => {
                let eviction = frame::eviction(&header, kind.eviction_reason());
                write(writer, eviction, write_timeout)
                    .await
                    .and(Err(Ended::BadFrame(kind, error)))
            }
            Event::Incoming(Some(Incoming::End(ended))) => {
                reading = false;
                end_when_idle(pending.is_empty(), ended, &mut ending)
            }
            Event::Incoming(None) | Event::Idle => Err(ending.take().unwrap_or(Ended::PeerClosed)),
            Event::Answered(header, answer) => {
                let written = write_answer(writer, link, &header, answer).await;
                state.done(1);
                // After the write: a move must not leave an answer unwritten.
                link.note_answer(pending.is_empty());
                written
            }
            Event::Evicted(reason) => {
                let eviction = frame::eviction_of(client, reason);
                write(writer, eviction, write_timeout)
                    .await
                    .and(Err(Ended::Evicted))
            }
        };
        if let Err(ended) = result {
            // Requests still pending are dropped with the connection.
            state.done(pending.len());
            return ended;
        }
    }
}

/// Reading ended with `ended`: the connection ends now when no request is pending;
/// otherwise the pending ones are answered first, with `ended` kept as the reason.
fn end_when_idle(idle: bool, ended: Ended, ending: &mut Option<Ended>) -> Result<(), Ended> {
    if idle {
        return Err(ended);
    }
    *ending = Some(ended);
    Ok(())
}

/// What the connection loop acts on next.
enum Event {
    /// From the reader task; `None` when it is gone.
    Incoming(Option<Incoming>),
    Answered(Box<[u8; HEADER_SIZE]>, Answer),
    Evicted(EvictionReason),
    /// Nothing is being handled and nothing more is read.
    Idle,
}

/// Waits for the next frame (only when `read`), answer or eviction. Dropping the losers of
/// the race loses nothing: a channel's `next` and a `FuturesUnordered`'s `next` are
/// cancel-safe, and `evicted` is polled again on the next call.
async fn next_event<F>(
    frames: &mut mpsc::Receiver<Incoming>,
    pending: &mut FuturesUnordered<F>,
    evicted: Pin<&mut impl Future<Output = EvictionReason>>,
    read: bool,
) -> Event
where
    F: Future<Output = (Box<[u8; HEADER_SIZE]>, Answer)>,
{
    let work = async {
        if !read {
            match pending.next().await {
                Some((header, answer)) => Event::Answered(header, answer),
                None => Event::Idle,
            }
        } else if pending.is_empty() {
            Event::Incoming(frames.next().await)
        } else {
            match select(frames.next(), pending.next()).await {
                Either::Left((incoming, _)) => Event::Incoming(incoming),
                Either::Right((done, _)) => {
                    let (header, answer) = done.expect("pending is not empty");
                    Event::Answered(header, answer)
                }
            }
        }
    };
    match select(evicted, pin!(work)).await {
        Either::Left((reason, _)) => Event::Evicted(reason),
        Either::Right((event, _)) => event,
    }
}

/// Handles one frame; the header comes back with the answer for the reply to echo.
async fn answer<H: ConnectionHandler>(
    handler: &H,
    connection: &H::Connection,
    header: Box<[u8; HEADER_SIZE]>,
    body: Body,
) -> (Box<[u8; HEADER_SIZE]>, Answer) {
    let answer = match body {
        Body::Pooled(buffer) => handler.handle_pooled(connection, &header, buffer).await,
        body => handler.handle(connection, &header, &body).await,
    };
    (header, answer)
}

async fn write_answer<H: ConnectionHandler>(
    writer: &mut TcpStream,
    link: &Link<'_, H>,
    header: &[u8; HEADER_SIZE],
    answer: Answer,
) -> Result<(), Ended> {
    let evicted = matches!(answer, Answer::Evict(_));
    let dialect = link.handler.dialect(link.connection);
    if let Some(frame) = frame::encode(header, answer, dialect) {
        let written = write_frame(writer, frame, link.config.write_timeout);
        match crate::unless_stalled_while_short(link.handler, written).await {
            Some(result) => result?,
            None => return Err(Ended::TimedOut(crate::STALLED_WHILE_SHORT)),
        }
    }
    if evicted { Err(Ended::Evicted) } else { Ok(()) }
}

/// What the reader task reads with.
struct Reading {
    config: TcpConfig,
    pool: Rc<Pool>,
    /// Set by the connection loop after each answer.
    authenticated: Rc<Cell<bool>>,
    /// Notified by the connection loop after each answer.
    answered: Rc<event_listener::Event>,
    /// Since when the connection is unauthenticated (its accept, or its last logout): the
    /// handshake grace runs from here.
    unauthenticated_since: Rc<Cell<Instant>>,
    /// The shard's budget for unauthenticated bodies.
    unauthenticated: Rc<UnauthenticatedBudget>,
    /// Set by the connection loop: read in lockstep, the connection may move.
    may_move: Rc<Cell<bool>>,
    /// Set by the connection loop: the shard to move to.
    moving: Rc<Cell<Option<usize>>>,
}

/// The reader task: frames in order until the peer closes, the socket fails, a frame is bad
/// or a read times out. The bounded channel is the in-flight limit: reading pauses while it
/// is full.
async fn read_frames(mut stream: TcpStream, reading: Reading, mut sender: mpsc::Sender<Incoming>) {
    loop {
        let incoming = match read_frame(&mut stream, &reading).await {
            Ok(incoming) => incoming,
            Err(ended) => Incoming::End(ended),
        };
        let last = !matches!(incoming, Incoming::Frame(..));
        // Before login a client is lockstep (it waits for the login's answer): the next frame
        // is read only once this one is answered, so it is sized and timed by what the
        // answer made of the connection. A connection that may move is read the same way,
        // so it can move after an answer without a byte of the next frame read.
        let wait_answer = !reading.authenticated.get() || reading.may_move.get();
        let lockstep = (!last && wait_answer).then(|| reading.answered.listen());
        let ready = std::future::poll_fn(|context| sender.poll_ready(context)).await;
        if ready.is_err() || sender.try_send(incoming).is_err() || last {
            return;
        }
        if let Some(answered) = lockstep {
            answered.await;
            if let Some(target) = reading.moving.get() {
                let ready = std::future::poll_fn(|context| sender.poll_ready(context)).await;
                if ready.is_ok() {
                    let _ = sender.try_send(Incoming::End(Ended::Moving(target)));
                }
                return;
            }
        }
    }
}

/// Reads one frame. An unauthenticated connection must deliver it within the handshake
/// grace and within the small frame limit, its body on the heap; an authenticated one may
/// idle between frames, and its body comes from the pool. Either way, once a frame's first
/// bytes arrived the rest must follow within the frame read timeout.
async fn read_frame(stream: &mut TcpStream, reading: &Reading) -> Result<Incoming, Ended> {
    let config = reading.config;
    let login = body::LoginWatch {
        authenticated: &reading.authenticated,
        unauthenticated_since: &reading.unauthenticated_since,
        answered: &reading.answered,
        grace: config.handshake_grace,
    };
    let (header_bytes, started) =
        body::read_header(stream, &login, config.frame_read_timeout).await?;
    // Sized by what the link is once the frame's first bytes came.
    let authenticated = reading.authenticated.get();
    let header: Box<[u8; HEADER_SIZE]> = header_bytes
        .into_boxed_slice()
        .try_into()
        .expect("read_header fills exactly HEADER_SIZE bytes");
    let size_max = if authenticated {
        config.frame_size_max
    } else {
        config
            .unauthenticated_frame_size_max
            .min(config.frame_size_max)
    };
    let prefix = match frame::request_prefix(&header[..], size_max) {
        Ok(prefix) => prefix,
        Err((kind, error)) => return Ok(Incoming::Bad(header, kind, error)),
    };
    let deadline = started + config.frame_read_timeout;
    acknowledge_if_body_waits(stream, prefix.body_length());
    let body = if authenticated {
        body::read_body(stream, prefix.body_length(), &reading.pool, deadline).await?
    } else {
        // Before login the whole frame must come within the handshake grace too.
        let grace = reading.unauthenticated_since.get() + config.handshake_grace;
        let length = prefix.body_length();
        let held = reading.unauthenticated.take_by(length, grace).await?;
        let bytes = body::read_heap_until(stream, length, deadline.min(grace)).await?;
        Body::Unauthenticated(bytes, held)
    };
    Ok(Incoming::Frame(header, body))
}

/// Sends the acknowledgement the kernel holds back for the header just read, when the body
/// has not all arrived with it. A client that keeps Nagle's algorithm on (the SDK's default,
/// `nodelay = false`) and writes the header and the body separately holds a body shorter
/// than one segment until the header is acknowledged, and Linux delays that acknowledgement
/// by up to 40 ms: every such request then took 40 ms (iggy-bench with its defaults,
/// 100 × 100-byte messages per batch: about 2,300 msg/s at p50 44 ms, against Apache Iggy as
/// against us). `TCP_QUICKACK` sends a pending acknowledgement at once; it is not sticky, so
/// it is set per frame. When the body is already here (a client that wrote the frame at
/// once, or a frame without a body) it is skipped: the extra pure ACK it sends cost
/// one-message requests a quarter of their rate (10.3 k → 7.6 k msg/s). A failure of either
/// call only loses the shortcut.
fn acknowledge_if_body_waits(stream: &TcpStream, body_length: usize) {
    let arrived = rustix::io::ioctl_fionread(stream).unwrap_or(0);
    if usize::try_from(arrived).is_ok_and(|arrived| arrived >= body_length) {
        return;
    }
    if let Err(error) = rustix::net::sockopt::set_tcp_quickack(stream, true) {
        log::debug!("TCP_QUICKACK: {error}");
    }
}

async fn write(stream: &mut TcpStream, bytes: Vec<u8>, timeout: Duration) -> Result<(), Ended> {
    match compio::time::timeout(timeout, stream.write_all(bytes)).await {
        Ok(BufResult(result, _)) => result.map_err(Ended::Io),
        Err(_elapsed) => Err(Ended::TimedOut("a reply write")),
    }
}

/// Writes the head and then the tail with one vectored write (no copy of the tail).
async fn write_frame(
    stream: &mut TcpStream,
    frame: frame::Frame,
    timeout: Duration,
) -> Result<(), Ended> {
    if frame.tail.is_empty() {
        return write(stream, frame.head, timeout).await;
    }
    let written = stream.write_vectored_all([frame.head, frame.tail]);
    match compio::time::timeout(timeout, written).await {
        Ok(BufResult(result, _)) => result.map_err(Ended::Io),
        Err(_elapsed) => Err(Ended::TimedOut("a reply write")),
    }
}

mod body;
#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod tests;

//! One connection of a message-framed or stream transport that is served where it was
//! accepted (WebSocket, TCP wrapped in TLS): whole frames in as [`Piece`]s, each answer out
//! as one frame through a sink; requests handled concurrently and answered as they complete
//! (PROTOCOL.md §1.11, §1.13); before login, lockstep reads, the unauthenticated frame limit
//! and the handshake grace; a bad frame or a message that is not one gets an eviction and ends
//! that connection only.

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::{Either, select};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::{Sink, SinkExt, Stream};
use proto::header::{EvictionReason, HEADER_SIZE};

use crate::frame::{self, Answer, Refused};
pub(crate) use crate::listen::{Shared, accept_until};
use crate::{BadFrame, ConnectionHandler};

/// The limits one link obeys (`[message_bus]`, and the listener's section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkConfig {
    /// Largest frame, header included.
    pub(crate) frame_size_max: u32,
    /// Largest frame before the connection is authenticated.
    pub(crate) unauthenticated_frame_size_max: u32,
    /// Requests of one connection being handled at once; at the limit the connection is not
    /// read until an answer is written.
    pub(crate) in_flight_max: usize,
    /// How long the transport's handshake and the login together may take.
    pub(crate) handshake_grace: Duration,
    /// How long an answer may wait for the client to take it.
    pub(crate) write_timeout: Duration,
}

impl LinkConfig {
    /// The largest frame a link may send now.
    pub(crate) fn size_max(&self, authenticated: bool) -> u32 {
        if authenticated {
            self.frame_size_max
        } else {
            self.unauthenticated_frame_size_max.min(self.frame_size_max)
        }
    }
}

/// What the transport read: a whole frame, or why there is none.
#[derive(Debug)]
pub(crate) enum Piece {
    /// One message (header and body) to check as one request frame.
    Frame(Bytes),
    /// A frame refused before its body was read (a size over the limit).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    Refused(Refused),
    /// A message that cannot be a frame (WebSocket Text).
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    NotAFrame(&'static str),
    /// Nothing for the server (WebSocket Ping and Pong, answered underneath).
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    Nothing,
    /// The peer closed.
    Closed,
    /// Reading failed.
    Failed(String),
}

/// Bytes a link's transport has read from its socket toward the next message, bounded while
/// the link is unauthenticated. A transport whose message limit is fixed for the whole
/// connection (tungstenite's, set at the upgrade) would otherwise let a client that has not
/// logged in make the server hold a fragmented message up to the authenticated limit.
#[derive(Debug)]
pub(crate) struct ReadMeter {
    /// Bytes read since the last whole message.
    read: Cell<usize>,
    /// The most `read` may reach while unauthenticated.
    unauthenticated_max: usize,
    authenticated: Cell<bool>,
}

impl ReadMeter {
    /// A meter of an unauthenticated link allowing `unauthenticated_max` bytes per message.
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn new(unauthenticated_max: usize) -> Self {
        Self {
            read: Cell::new(0),
            unauthenticated_max,
            authenticated: Cell::new(false),
        }
    }

    /// Whether the transport may read more from its socket now.
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn allows_reading(&self) -> bool {
        self.authenticated.get() || self.read.get() < self.unauthenticated_max
    }

    /// The transport read `bytes` from its socket.
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn count(&self, bytes: usize) {
        self.read.set(self.read.get().saturating_add(bytes));
    }

    /// The most an unauthenticated message may take from the socket.
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub(crate) fn unauthenticated_max(&self) -> usize {
        self.unauthenticated_max
    }

    /// A whole message arrived: the next one starts from nothing.
    fn message_read(&self) {
        self.read.set(0);
    }

    fn set_authenticated(&self, authenticated: bool) {
        self.authenticated.set(authenticated);
    }
}

/// The log line of a link's end.
pub(crate) fn log_end(name: &str, peer: SocketAddr, ended: &Ended) {
    match ended {
        Ended::PeerClosed | Ended::Stopping => log::debug!("{name}: {peer} closed"),
        Ended::Bad(kind, error) => {
            log::warn!("{name}: {peer} sent a bad frame ({kind:?}: {error}); closed");
        }
        Ended::Evicted => log::info!("{name}: {peer} evicted"),
        Ended::TimedOut(what) => log::info!("{name}: {peer} closed: {what} timed out"),
        Ended::Io(error) => log::info!("{name}: {peer} closed: {error}"),
    }
}

/// Why a connection ended, for the log line.
#[derive(Debug)]
pub(crate) enum Ended {
    PeerClosed,
    Stopping,
    Evicted,
    TimedOut(&'static str),
    Bad(BadFrame, String),
    Io(String),
}

/// One connection's loop and what it serves with.
pub(crate) struct Link<'l, H: ConnectionHandler> {
    pub(crate) handler: &'l H,
    pub(crate) connection: &'l H::Connection,
    pub(crate) config: LinkConfig,
    pub(crate) shared: &'l Shared,
    /// The transport's bound on what it reads before login, if it needs one.
    pub(crate) read_meter: Option<&'l ReadMeter>,
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
    Message(Option<Piece>),
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
    pub(crate) async fn serve<P, R>(&self, mut messages: P, mut sink: R, accepted: Instant) -> Ended
    where
        P: Stream<Item = Piece> + Unpin,
        R: Sink<Vec<u8>> + Unpin,
        R::Error: std::fmt::Display,
    {
        let mut pending = FuturesUnordered::new();
        let mut evicted = pin!(self.handler.evicted(self.connection));
        let mut progress = Progress {
            authenticated: self.handler.authenticated(self.connection),
            unauthenticated_since: accepted,
            reading: true,
            stopping: false,
            client: 0,
        };
        if let Some(meter) = self.read_meter {
            meter.set_authenticated(progress.authenticated);
        }
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
                // What the requests still in flight hold (reply memory among it) goes now,
                // not after the close.
                drop(pending);
                close(&mut sink, &ended, timeout).await;
                return ended;
            }
        }
    }

    /// A message arrived, or the stream ended (then `progress.reading` turns false): the
    /// request frame to handle, if it was one; a bad message is evicted here.
    async fn on_message<S>(
        &self,
        message: Option<Piece>,
        progress: &mut Progress,
        sink: &mut S,
    ) -> Result<Option<(Box<[u8; HEADER_SIZE]>, Bytes)>, Ended>
    where
        S: Sink<Vec<u8>> + Unpin,
        S::Error: std::fmt::Display,
    {
        let timeout = self.config.write_timeout;
        // Only a whole data message ends what the meter counts: tungstenite hands over a Ping
        // or Pong between the fragments of a message it is still assembling, so a reset on
        // those would let a message grow past the bound one fragment at a time.
        let whole = matches!(
            message,
            Some(Piece::Frame(_) | Piece::Refused(_) | Piece::NotAFrame(_))
        );
        if let (Some(meter), true) = (self.read_meter, whole) {
            meter.message_read();
        }
        let refused = match message {
            Some(Piece::Frame(bytes)) => match self.check(&bytes, progress.authenticated) {
                Ok(header) => {
                    progress.client = frame::client(&header);
                    return Ok(Some((header, bytes)));
                }
                Err(refused) => refused,
            },
            Some(Piece::Refused(refused)) => refused,
            Some(Piece::NotAFrame(what)) => {
                let reason = BadFrame::Command.eviction_reason();
                send(sink, frame::eviction_of(progress.client, reason), timeout).await?;
                return Err(Ended::Bad(BadFrame::Command, what.into()));
            }
            Some(Piece::Nothing) => return Ok(None),
            Some(Piece::Closed) | None => {
                progress.reading = false;
                return Ok(None);
            }
            Some(Piece::Failed(error)) => {
                progress.reading = false;
                return Err(Ended::Io(error));
            }
        };
        let (header, kind, error) = refused;
        send(
            sink,
            frame::eviction(&header, kind.eviction_reason()),
            timeout,
        )
        .await?;
        Err(Ended::Bad(kind, error))
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
        S: Sink<Vec<u8>> + Unpin,
        S::Error: std::fmt::Display,
    {
        let evicts = matches!(answer, Answer::Evict(_));
        let dialect = self.handler.dialect(self.connection);
        if let Some(frame) = frame::encode(header, answer, dialect) {
            let sent = send(sink, frame.into_bytes(), self.config.write_timeout);
            match crate::unless_stalled_while_short(self.handler, sent).await {
                Some(result) => result?,
                None => return Err(Ended::TimedOut(crate::STALLED_WHILE_SHORT)),
            }
        }
        let authenticated = self.handler.authenticated(self.connection);
        if progress.authenticated && !authenticated {
            // A logout: the grace starts again for the next login.
            progress.unauthenticated_since = Instant::now();
        }
        progress.authenticated = authenticated;
        if let Some(meter) = self.read_meter {
            meter.set_authenticated(authenticated);
        }
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
        M: Stream<Item = Piece> + Unpin,
        F: Future<Output = (Box<[u8; HEADER_SIZE]>, Answer)>,
    {
        let message = async {
            if watch.read {
                Event::Message(messages.next().await)
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
            self.shared.stopping().await;
            Event::Stopping
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
        frame::check_whole(bytes, self.config.size_max(authenticated))
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

/// Sends one frame within `timeout`.
async fn send<S>(sink: &mut S, bytes: Vec<u8>, timeout: Duration) -> Result<(), Ended>
where
    S: Sink<Vec<u8>> + Unpin,
    S::Error: std::fmt::Display,
{
    match compio::time::timeout(timeout, sink.send(bytes)).await {
        Ok(result) => result.map_err(|error| Ended::Io(error.to_string())),
        Err(_elapsed) => Err(Ended::TimedOut(REPLY_WRITE)),
    }
}

/// Closes the sink of a link that ended with `ended`, unless its client took no reply: it
/// would not take the close's flush either, and waiting for it would hold the link a whole
/// write timeout more.
async fn close<S>(sink: &mut S, ended: &Ended, timeout: Duration)
where
    S: Sink<Vec<u8>> + Unpin,
{
    if !matches!(
        ended,
        Ended::TimedOut(REPLY_WRITE | crate::STALLED_WHILE_SHORT)
    ) {
        let _ = compio::time::timeout(timeout, sink.close()).await;
    }
}

/// What timed out when a reply's write did.
const REPLY_WRITE: &str = "a reply write";

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use futures_util::{Sink, StreamExt, stream};

    use super::{Ended, Link, LinkConfig, Piece, ReadMeter, Shared};
    use crate::test_handler::{Scripted, request};

    /// A peer that takes nothing: every write and the close wait for ever.
    struct Deaf;

    impl Sink<Vec<u8>> for Deaf {
        type Error = String;

        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), String>> {
            Poll::Pending
        }

        fn start_send(self: Pin<&mut Self>, _: Vec<u8>) -> Result<(), String> {
            Ok(())
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), String>> {
            Poll::Pending
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), String>> {
            Poll::Pending
        }
    }

    #[test]
    fn a_reply_stalled_while_memory_is_short_ends_the_link_without_a_closing_flush() {
        let runtime = compio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let handler = Scripted::short_of_reply_memory();
            let shared = Shared::default();
            let link = Link {
                handler: &handler,
                connection: &(),
                config: LinkConfig {
                    frame_size_max: 1 << 20,
                    unauthenticated_frame_size_max: 1 << 16,
                    in_flight_max: 4,
                    handshake_grace: Duration::from_mins(1),
                    // Far past the test's bound: only the shed may end the link in time.
                    write_timeout: Duration::from_mins(1),
                },
                shared: &shared,
                read_meter: None,
            };
            let frame = Piece::Frame(Bytes::from(request(3, b"hello")));
            let pieces = stream::iter([frame]).chain(stream::pending());
            let started = Instant::now();
            let ended = link.serve(pieces, Deaf, started).await;
            assert!(matches!(ended, Ended::TimedOut(crate::STALLED_WHILE_SHORT)));
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the link waited {:?} to close on a peer that reads nothing",
                started.elapsed()
            );
        });
    }

    #[test]
    fn the_read_meter_bounds_each_unauthenticated_message_and_nothing_after_login() {
        let meter = ReadMeter::new(100);
        meter.count(99);
        assert!(meter.allows_reading());
        meter.count(1);
        assert!(!meter.allows_reading(), "at the bound");
        meter.message_read();
        assert!(meter.allows_reading(), "each message starts from nothing");
        meter.set_authenticated(true);
        meter.count(1 << 30);
        assert!(
            meter.allows_reading(),
            "logged in: the transport's own limit"
        );
        meter.set_authenticated(false);
        assert!(
            !meter.allows_reading(),
            "a logout bounds the message being read"
        );
        meter.message_read();
        assert!(meter.allows_reading());
    }
}

//! The replica bus: TCP between the nodes of a cluster, carrying the consensus messages as
//! whole frames (a 256-byte header whose `size` field, at offset 48, covers header and body).
//!
//! Each node dials every peer and sends only on the connections it dialed; it receives only
//! on the ones it accepted. So a connection carries one direction, and the acceptor checks
//! the dialer once, at the handshake ([`handshake`]). The bus is best effort, as the
//! protocol above it expects: a peer that is down or slow has frames for it dropped once its
//! queue is full, and a dialer reconnects with a growing pause.
//!
//! The frames themselves are not interpreted here: the caller decodes (and the decoder
//! verifies the checksums), and a connection whose frame the caller refuses is closed.
//!
//! With `[cluster.tls]` ([`tls`], feature `tls`) each connection is a TLS session (the
//! acceptor is the TLS server) and everything above, the handshake included, runs inside it.

pub mod handshake;
#[cfg(feature = "tls")]
pub mod tls;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use compio::BufResult;
use compio::buf::{IntoInner, IoBuf};
use compio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use compio::net::{TcpListener, TcpStream};

use handshake::{Answer, Hello, MESSAGE_SIZE, Secrets};

/// Bytes of a frame header, and where its size field is.
const HEADER_SIZE: usize = 256;
const SIZE_AT: usize = 48;
/// Frames waiting for one peer; more are dropped until it takes them.
pub const PEER_QUEUE_MAX: usize = 1024;
/// Bytes waiting for one peer (a frame into an empty queue is always taken, whatever its
/// size): a peer that is down or slow costs at most this much memory.
pub const PEER_QUEUE_BYTES_MAX: usize = 64 << 20;
/// Bytes of a frame body read (and allocated) at a time.
const BODY_PIECE: usize = 1 << 20;
/// Accepted connections at once: two per peer leaves room for a reconnect racing the old.
const INBOUND_PER_PEER: usize = 2;
const REDIAL_PAUSE_MIN: Duration = Duration::from_millis(50);
const REDIAL_PAUSE_MAX: Duration = Duration::from_secs(1);

/// The TLS sides of the bus (feature `tls`).
#[cfg(feature = "tls")]
pub use tls::ReplicaTls;

/// Without feature `tls` the bus is plain TCP: no value of this type exists.
#[cfg(not(feature = "tls"))]
#[derive(Debug)]
pub enum ReplicaTls {}

/// The identity of the cluster named `name`, as the handshake and every frame carry it.
pub fn cluster_id(name: &str) -> u128 {
    let hash = blake3::hash(name.as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&hash.as_bytes()[..16]);
    u128::from_le_bytes(id)
}

/// What every connection of the bus needs to know.
#[derive(Debug, Clone)]
pub struct BusConfig {
    pub replica: u8,
    /// The cluster's identity (a hash of its name): frames of another cluster are refused.
    pub cluster: u128,
    /// Every other node: its replica id and replica-port address.
    pub peers: Vec<(u8, SocketAddr)>,
    /// `[cluster.auth]`; `None`: peers are not asked for a proof.
    pub secrets: Option<Secrets>,
    /// The largest frame accepted.
    pub frame_size_max: usize,
    /// `[cluster.tls]`; `None`: plain TCP.
    pub tls: Option<Rc<ReplicaTls>>,
    /// How long a connection may take to complete its handshake.
    pub handshake_timeout: Duration,
    /// This node's encryption-at-rest key fingerprint (zeros without encryption): peers
    /// under another key are refused at the handshake (see [`handshake`]).
    pub at_rest: [u8; 32],
}

/// The sending side: a queue per peer, drained by that peer's dialer task.
#[derive(Debug)]
pub struct Outbound {
    queues: Vec<(u8, Rc<PeerQueue>)>,
}

#[derive(Debug, Default)]
struct PeerQueue {
    frames: RefCell<VecDeque<Vec<u8>>>,
    /// The bytes of `frames`.
    bytes: Cell<usize>,
    ready: event_listener::Event,
    dropped: Cell<u64>,
    connected: Cell<bool>,
}

impl Outbound {
    /// Queues `frame` for replica `to`; drops it when that peer's queue is full (in frames
    /// or bytes) or `to` is no peer (the protocol retransmits what matters).
    pub fn send(&self, to: u8, frame: Vec<u8>) {
        let Some((_, queue)) = self.queues.iter().find(|(id, _)| *id == to) else {
            return;
        };
        let mut frames = queue.frames.borrow_mut();
        let bytes = queue.bytes.get().saturating_add(frame.len());
        let over_bytes = bytes > PEER_QUEUE_BYTES_MAX && !frames.is_empty();
        if frames.len() >= PEER_QUEUE_MAX || over_bytes {
            queue.dropped.set(queue.dropped.get() + 1);
            return;
        }
        queue.bytes.set(bytes);
        frames.push_back(frame);
        drop(frames);
        queue.ready.notify(1);
    }

    /// Whether this node's connection to `to` is established now.
    pub fn is_connected(&self, to: u8) -> bool {
        self.queues
            .iter()
            .any(|(id, queue)| *id == to && queue.connected.get())
    }
}

/// Starts a dialer task per peer on the current runtime and returns the queues they drain.
pub fn dial(config: &Rc<BusConfig>) -> Outbound {
    let mut queues = Vec::with_capacity(config.peers.len());
    for &(id, address) in &config.peers {
        let queue = Rc::new(PeerQueue::default());
        queues.push((id, Rc::clone(&queue)));
        let config = Rc::clone(config);
        compio::runtime::spawn(async move { keep_dialing(config, id, address, queue).await })
            .detach();
    }
    Outbound { queues }
}

async fn keep_dialing(config: Rc<BusConfig>, id: u8, address: SocketAddr, queue: Rc<PeerQueue>) {
    let mut pause = REDIAL_PAUSE_MIN;
    loop {
        match dial_once(&config, id, address, &queue).await {
            Ok(error) => {
                pause = REDIAL_PAUSE_MIN;
                log::warn!("replica {id}: connection to {address} lost: {error}");
            }
            Err(error) => log::debug!("replica {id}: dial {address}: {error}"),
        }
        compio::time::sleep(pause).await;
        pause = (pause * 2).min(REDIAL_PAUSE_MAX);
    }
}

/// One connection to peer `id`: dialed, the TLS session if configured, the handshake, then
/// the queue drained until the connection fails (`Ok`: why it ended).
async fn dial_once(
    config: &BusConfig,
    id: u8,
    address: SocketAddr,
    queue: &PeerQueue,
) -> io::Result<io::Error> {
    let stream = within(config.handshake_timeout, TcpStream::connect(address)).await?;
    stream.set_nodelay(true)?;
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let server = address.ip().to_string();
        let stream = within(
            config.handshake_timeout,
            tls.connector.connect(&server, stream),
        )
        .await?;
        return serve_dialed(stream, config, id, address, queue).await;
    }
    serve_dialed(stream, config, id, address, queue).await
}

async fn serve_dialed<S: AsyncRead + AsyncWrite>(
    mut stream: S,
    config: &BusConfig,
    id: u8,
    address: SocketAddr,
    queue: &PeerQueue,
) -> io::Result<io::Error> {
    within(
        config.handshake_timeout,
        prove(&mut stream, config, id, address),
    )
    .await?;
    log::info!("replica {id}: connected to {address}");
    queue.connected.set(true);
    let error = drain(stream, queue).await;
    queue.connected.set(false);
    // What was queued for the lost connection is stale by the time a new one is up; the
    // protocol resends what is still needed.
    queue.frames.borrow_mut().clear();
    queue.bytes.set(0);
    Ok(error)
}

/// The dialer's side of the handshake: the acceptor's hello, then this node's proof.
async fn prove<S: AsyncRead + AsyncWrite>(
    stream: &mut S,
    config: &BusConfig,
    id: u8,
    address: SocketAddr,
) -> io::Result<()> {
    let hello = read_exactly(stream, MESSAGE_SIZE).await?;
    let hello = Hello::decode(&fixed(&hello)).map_err(invalid)?;
    if hello.cluster != config.cluster || hello.acceptor != id {
        let reason = format!("{address} is not replica {id} of this cluster");
        return Err(io::Error::new(io::ErrorKind::InvalidData, reason));
    }
    if hello.at_rest != config.at_rest {
        return Err(invalid(handshake::HandshakeError::OtherAtRestKey));
    }
    let answer = hello
        .answer(config.replica, config.secrets.as_ref(), config.at_rest)
        .encode();
    let BufResult(written, _) = stream.write_all(answer.to_vec()).await;
    written?;
    stream.flush().await
}

/// Writes queued frames until the connection fails (returns why). A frame taken off the
/// queue and not written is lost, which the protocol tolerates.
async fn drain<S: AsyncWrite>(mut stream: S, queue: &PeerQueue) -> io::Error {
    loop {
        let next = queue.frames.borrow_mut().pop_front();
        if let Some(frame) = &next {
            queue
                .bytes
                .set(queue.bytes.get().saturating_sub(frame.len()));
        }
        let Some(frame) = next else {
            let listener = queue.ready.listen();
            if queue.frames.borrow().is_empty() {
                listener.await;
            }
            continue;
        };
        let BufResult(written, _) = stream.write_all(frame).await;
        if let Err(error) = written {
            return error;
        }
        // A TLS session buffers what is written until it is flushed (a no-op on plain TCP).
        if let Err(error) = stream.flush().await {
            return error;
        }
    }
}

/// Accepts peers' connections until the runtime ends; each frame read from an admitted peer
/// is given to `deliver`, which says whether it was a valid frame (a peer that sends an
/// invalid one is disconnected).
pub async fn accept(
    listener: TcpListener,
    config: Rc<BusConfig>,
    deliver: Rc<dyn Fn(u8, Vec<u8>) -> bool>,
) {
    let open = Rc::new(Cell::new(0usize));
    let open_max = config.peers.len() * INBOUND_PER_PEER;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                log::warn!("replica listener: accept failed: {error}");
                compio::time::sleep(REDIAL_PAUSE_MIN).await;
                continue;
            }
        };
        if open.get() >= open_max {
            log::warn!("replica listener: {peer} refused: {open_max} replica connections open");
            continue;
        }
        open.set(open.get() + 1);
        let (config, deliver, open) = (Rc::clone(&config), Rc::clone(&deliver), Rc::clone(&open));
        compio::runtime::spawn(async move {
            match receive(stream, &config, &*deliver).await {
                Ok(replica) => log::info!("replica {replica} ({peer}) disconnected"),
                Err(error) => log::warn!("replica connection from {peer} closed: {error}"),
            }
            open.set(open.get() - 1);
        })
        .detach();
    }
}

/// One accepted connection: the TLS session if configured, then [`receive_on`].
async fn receive(
    stream: TcpStream,
    config: &BusConfig,
    deliver: &dyn Fn(u8, Vec<u8>) -> bool,
) -> io::Result<u8> {
    stream.set_nodelay(true)?;
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let stream = within(config.handshake_timeout, tls.acceptor.accept(stream)).await?;
        return receive_on(stream, config, deliver).await;
    }
    receive_on(stream, config, deliver).await
}

/// The handshake, then frames until the peer closes (returns its id) or misbehaves.
async fn receive_on<S: AsyncRead + AsyncWrite>(
    mut stream: S,
    config: &BusConfig,
    deliver: &dyn Fn(u8, Vec<u8>) -> bool,
) -> io::Result<u8> {
    let peers: Vec<u8> = config.peers.iter().map(|(id, _)| *id).collect();
    let handshake = async {
        let mut challenge = [0u8; 32];
        getrandom::fill(&mut challenge).map_err(|error| io::Error::other(error.to_string()))?;
        let hello = Hello {
            cluster: config.cluster,
            acceptor: config.replica,
            challenge,
            at_rest: config.at_rest,
        };
        let BufResult(written, _) = stream.write_all(hello.encode().to_vec()).await;
        written?;
        stream.flush().await?;
        let answer = read_exactly(&mut stream, MESSAGE_SIZE).await?;
        let answer = Answer::decode(&fixed(&answer)).map_err(invalid)?;
        hello
            .verify(&answer, &peers, config.secrets.as_ref())
            .map_err(invalid)
    };
    let replica = within(config.handshake_timeout, handshake).await?;
    loop {
        let header = match read_exactly(&mut stream, HEADER_SIZE).await {
            Ok(header) => header,
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(replica),
            Err(error) => return Err(error),
        };
        let mut size = [0u8; 4];
        size.copy_from_slice(&header[SIZE_AT..SIZE_AT + 4]);
        let size = usize::try_from(u32::from_le_bytes(size)).unwrap_or(usize::MAX);
        if !(HEADER_SIZE..=config.frame_size_max).contains(&size) {
            let reason = format!("replica {replica} sent a frame of {size} bytes");
            return Err(io::Error::new(io::ErrorKind::InvalidData, reason));
        }
        let mut frame = header;
        // The body is read in pieces, so memory grows only with bytes that actually arrive:
        // a header may declare up to a pipeline of client frames, and without cluster.auth
        // anyone who can reach the port gets this far.
        let mut left = size - HEADER_SIZE;
        while left > 0 {
            let piece = left.min(BODY_PIECE);
            frame.extend_from_slice(&read_exactly(&mut stream, piece).await?);
            left -= piece;
        }
        if !deliver(replica, frame) {
            let reason = format!("replica {replica} sent an invalid frame");
            return Err(io::Error::new(io::ErrorKind::InvalidData, reason));
        }
    }
}

/// Exactly `length` bytes from `stream` (`UnexpectedEof` if it ends first).
async fn read_exactly<S: AsyncRead>(stream: &mut S, length: usize) -> io::Result<Vec<u8>> {
    if length == 0 {
        return Ok(Vec::new());
    }
    let buffer = Vec::with_capacity(length).slice(..length);
    let BufResult(read, buffer) = stream.read_exact(buffer).await;
    read?;
    Ok(buffer.into_inner())
}

fn fixed(bytes: &[u8]) -> [u8; MESSAGE_SIZE] {
    let mut array = [0u8; MESSAGE_SIZE];
    let length = bytes.len().min(MESSAGE_SIZE);
    array[..length].copy_from_slice(&bytes[..length]);
    array
}

fn invalid(error: handshake::HandshakeError) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, error)
}

async fn within<T>(timeout: Duration, work: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    compio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_elapsed| Err(io::Error::new(io::ErrorKind::TimedOut, "handshake")))
}

#[cfg(test)]
mod tests;

//! Plain WebSocket on every shard, as Iggy serves it: the listener on the leader accepts and
//! hands each connection, before its upgrade, to a shard in turn (itself included), which
//! upgrades and serves it. WSS stays on the leader: a TLS session cannot move between
//! threads. A connection's requests for partitions of another shard are forwarded by the
//! shard core, as for every transport.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use compio::net::{TcpListener, TcpStream};
use futures_util::future::select;

use super::{WsConfig, WsServer, serve_connection};
use crate::ConnectionHandler;
use crate::listen::OpenSlot;
use crate::message_link::Shared;

/// What a shard's WebSocket hand-off channel carries.
pub enum WsArrival {
    /// An accepted connection, not yet upgraded.
    Connection {
        descriptor: OwnedFd,
        peer: SocketAddr,
    },
    /// The server stops: the shard stops taking connections and drains its own.
    Stop,
}

/// The leader's end of one shard's hand-off channel.
pub type WsHandoff = crate::handoff::Sender<WsArrival>;
/// A shard's end of its hand-off channel; see [`WsShard::receive`].
pub type WsInbox = crate::handoff::Receiver<WsArrival>;

/// A hand-off channel for one shard.
pub fn handoff_channel() -> (WsHandoff, WsInbox) {
    crate::handoff::channel()
}

/// Connections open on every shard, counted against `connections_max` by the accept loop.
pub type WsCount = Arc<AtomicUsize>;

/// One shard's side of plain WebSocket: upgrades and serves the connections handed to it.
pub struct WsShard<H> {
    config: WsConfig,
    handler: Rc<H>,
    count: WsCount,
    /// This shard's connections, for the drain at shutdown.
    shared: Rc<Shared>,
}

impl<H: ConnectionHandler + 'static> WsShard<H> {
    /// A shard serving with `handler`; `count` is shared with the accept loop.
    pub fn new(config: WsConfig, handler: Rc<H>, count: WsCount) -> Self {
        Self {
            config,
            handler,
            count,
            shared: Rc::default(),
        }
    }

    /// Serves the connections arriving in `inbox` until it says stop (or the leader is
    /// gone), then lets this shard's connections end (up to the drain timeout).
    pub async fn receive(&self, inbox: WsInbox) {
        while let Ok(WsArrival::Connection { descriptor, peer }) = inbox.recv().await {
            match TcpStream::from_std(std::net::TcpStream::from(descriptor)) {
                Ok(stream) => self.adopt(stream, peer),
                Err(error) => {
                    log::warn!("websocket: {peer}: adopt handed connection: {error}");
                    self.count.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        self.shared.stop_and_drain("websocket").await;
    }

    /// Upgrades and serves `stream`, already counted, on this shard.
    fn adopt(&self, stream: TcpStream, peer: SocketAddr) {
        // No local limit: the accept loop holds the count of every shard.
        let slot = Slot {
            count: Arc::clone(&self.count),
            _open: self.shared.admit("websocket", peer, usize::MAX),
        };
        let task = serve_connection(
            stream,
            peer,
            None,
            Rc::clone(&self.handler),
            self.config,
            Rc::clone(&self.shared),
        );
        compio::runtime::spawn(async move {
            // Dropped when the task ends, by any path, a panic's unwinding included.
            let _slot = slot;
            task.await;
        })
        .detach();
    }
}

/// A connection's place in the count of every shard (and, through `_open`, in this
/// shard's), given back when dropped.
struct Slot {
    count: WsCount,
    _open: Option<OpenSlot>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

impl WsServer {
    /// Serves until `shutdown` completes: plain connections go to the shards in turn
    /// (connection *n* to shard `n % (1 + others.len())`, 0 being `local`); with TLS every
    /// connection is served here and the other shards are told to stop at once. On return
    /// the other shards have been told to stop, and `local`'s connections have drained.
    pub async fn serve_sharded<H>(
        self,
        local: &WsShard<H>,
        others: Vec<WsHandoff>,
        shutdown: impl Future<Output = ()>,
    ) where
        H: ConnectionHandler + 'static,
    {
        if self.is_tls() {
            for other in &others {
                let _ = other.send(WsArrival::Stop).await;
            }
            return self.serve(Rc::clone(&local.handler), shutdown).await;
        }
        let accepting = pin!(accept_loop(&self.listener, local, &others));
        let _ = select(accepting, pin!(shutdown)).await;
        for other in &others {
            let _ = other.send(WsArrival::Stop).await;
        }
        local.shared.stop_and_drain("websocket").await;
    }
}

async fn accept_loop<H>(listener: &TcpListener, local: &WsShard<H>, others: &[WsHandoff])
where
    H: ConnectionHandler + 'static,
{
    let shards = others.len().saturating_add(1);
    let mut next: usize = 0;
    loop {
        let (stream, peer) = crate::listen::accept_next("websocket", listener).await;
        let open = local.count.load(Ordering::Relaxed);
        if open >= local.config.connections_max {
            log::warn!("websocket: {peer} refused: {open} connections open (max_connections)");
            continue;
        }
        local.count.fetch_add(1, Ordering::Relaxed);
        let shard = next % shards;
        next = next.wrapping_add(1);
        match shard.checked_sub(1).and_then(|index| others.get(index)) {
            None => local.adopt(stream, peer),
            Some(handoff) => hand_off(handoff, stream, peer, &local.count).await,
        }
    }
}

/// Sends a just-accepted connection to another shard.
async fn hand_off(handoff: &WsHandoff, stream: TcpStream, peer: SocketAddr, count: &WsCount) {
    let arrival = |descriptor| WsArrival::Connection { descriptor, peer };
    if !crate::handoff::pass("websocket", handoff, stream, peer, arrival).await {
        count.fetch_sub(1, Ordering::Relaxed);
    }
}

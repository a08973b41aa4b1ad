//! What the shards of one server share, and how they reach each other.
//!
//! Thread-per-core: each shard is a [`Server`] on its own compio runtime thread. One shard,
//! the metadata sequencer (shard 0 in the binary; a parameter of the [`Node`]), holds the
//! metadata journal, the session table and the consumer groups; every other shard keeps a
//! replica of the metadata that the sequencer updates by sending it each committed op. A
//! shard reaches another by sending a [`ShardMessage`] into one of the target's two bounded
//! lanes ([`crate::mail`]).
//!
//! The maps every request reads (partition routes, live sessions, open clients, parked
//! requests) are papaya maps: reads never lock and never wait for a writer.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crossfire::{AsyncRx, MAsyncTx, mpsc};
use event_listener::Event;
use futures_util::future::{Either, select};

use crate::clock::{Clock, SystemClock};
use crate::data::leases::GroupViews;
use crate::data::{Cancel, Routes};
use crate::hashing::HashPool;
use crate::mail::{LANE_CAPACITY, Lane, RUNNING_MAX, ShardMessage};
use crate::server::{ClientRecord, Server};

/// A boxed future that stays on its thread.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// The target shard is gone (its thread ended at shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shard {0} no longer runs")]
pub struct ShardGone(pub usize);

/// Live sessions by VSR client id: the sequencer writes, every shard reads (`is_live`, bind).
pub type SessionView = papaya::HashMap<u128, SessionEntry>;

/// One live session as every shard sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionEntry {
    pub session: u64,
    pub user_id: u32,
    /// The digest of the personal access token the session logged in with, if any.
    pub token: Option<crate::sessions::TokenDigest>,
}

/// The state all shards of one server share.
#[derive(Debug)]
pub struct Node {
    lanes: Vec<Lanes>,
    /// The shard that sequences metadata (see the module docs).
    sequencer: usize,
    /// Every open partition's handle, by key.
    pub routes: Arc<Routes>,
    /// What the sequencer decided about every consumer group (polls are checked on it).
    pub group_views: Arc<GroupViews>,
    pub sessions: Arc<SessionView>,
    /// Live sessions' users by session number (who may use an idempotent producer id).
    pub session_owners: Arc<crate::sessions::SessionOwners>,
    /// Open connections of every shard, by client number (`GET_CLIENTS`).
    pub clients: papaya::HashMap<u32, ClientRecord>,
    /// Deferred polls and fetches waiting, by (client id, request number), for
    /// `CANCEL_DEFERRED_REQUEST` (§2.11) from any shard.
    pub parked: papaya::HashMap<(u128, u64), Arc<Cancel>>,
    next_client_number: AtomicU32,
    /// The password hashing threads (logins and password changes run there, not on a shard).
    pub hasher: HashPool,
    /// Where every shard's time comes from.
    pub clock: Arc<dyn Clock>,
}

/// The sending ends of one shard's lanes.
#[derive(Debug)]
struct Lanes {
    ordered: MAsyncTx<mpsc::Array<ShardMessage>>,
    concurrent: MAsyncTx<mpsc::Array<ShardMessage>>,
}

/// The receiving ends of one shard's lanes.
pub struct Inbox {
    ordered: AsyncRx<mpsc::Array<ShardMessage>>,
    concurrent: AsyncRx<mpsc::Array<ShardMessage>>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Inbox")
    }
}

impl Node {
    /// The shared state of `shard_count` shards (at least 1) on the system clock, with
    /// hashing threads, and their inboxes in order; shard 0 sequences metadata.
    pub fn new(shard_count: usize) -> (Arc<Self>, Vec<Inbox>) {
        let hasher = HashPool::new(hash_threads());
        Self::with(shard_count, 0, Arc::new(SystemClock), hasher)
    }

    /// The shared state of `shard_count` shards (at least 1) of which `sequencer` sequences
    /// metadata, whose time is `clock` and whose passwords `hasher` hashes (the simulator's:
    /// simulated time, hashing inline).
    pub fn with(
        shard_count: usize,
        sequencer: usize,
        clock: Arc<dyn Clock>,
        hasher: HashPool,
    ) -> (Arc<Self>, Vec<Inbox>) {
        let shard_count = shard_count.max(1);
        assert!(
            sequencer < shard_count,
            "the sequencer is one of the shards"
        );
        let (lanes, receivers): (Vec<_>, Vec<_>) = (0..shard_count)
            .map(|_| {
                let (ordered, ordered_rx) = mpsc::bounded_async(LANE_CAPACITY);
                let (concurrent, concurrent_rx) = mpsc::bounded_async(LANE_CAPACITY);
                let inbox = Inbox {
                    ordered: ordered_rx,
                    concurrent: concurrent_rx,
                };
                (
                    Lanes {
                        ordered,
                        concurrent,
                    },
                    inbox,
                )
            })
            .unzip();
        let node = Self {
            lanes,
            sequencer,
            routes: Arc::default(),
            group_views: Arc::default(),
            sessions: Arc::default(),
            session_owners: Arc::default(),
            clients: papaya::HashMap::new(),
            parked: papaya::HashMap::new(),
            next_client_number: AtomicU32::new(1),
            hasher,
            clock,
        };
        (Arc::new(node), receivers)
    }

    pub fn shard_count(&self) -> usize {
        self.lanes.len()
    }

    /// The shard that sequences metadata.
    pub fn sequencer(&self) -> usize {
        self.sequencer
    }

    /// Queues `message` on its lane of shard `shard`. A full lane is backpressure: the
    /// sender waits for room (see [`RUNNING_MAX`]).
    pub async fn send(&self, shard: usize, message: ShardMessage) -> Result<(), ShardGone> {
        let lanes = self.lanes.get(shard).ok_or(ShardGone(shard))?;
        let lane = match message.lane() {
            Lane::Ordered => &lanes.ordered,
            Lane::Concurrent => &lanes.concurrent,
        };
        // The send error only hands the message back: the receiver is gone.
        match lane.send(message).await {
            Ok(()) => Ok(()),
            Err(crossfire::SendError(_)) => Err(ShardGone(shard)),
        }
    }

    /// A fresh client number (`GET_CLIENT`), unique across shards; never 0.
    pub fn next_client_number(&self) -> u32 {
        loop {
            let number = self.next_client_number.fetch_add(1, Ordering::Relaxed);
            if number != 0 {
                return number;
            }
        }
    }
}

/// Hashing threads: a quarter of the cores, at least one, so a login storm never takes the
/// cores the shards run on.
fn hash_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| (cores.get() / 4).max(1))
}

impl Inbox {
    /// Handles every message sent to this shard until `stop` completes.
    pub async fn serve(self, server: Rc<Server>, stop: impl Future<Output = ()>) {
        self.serve_in_transit(server, stop, || 0).await;
    }

    /// [`Self::serve`], with every message held for `transit()` µs of the node's clock
    /// before it is handled (the simulator's delivery delay; concurrent-lane messages may so
    /// overtake each other).
    pub async fn serve_in_transit(
        self,
        server: Rc<Server>,
        stop: impl Future<Output = ()>,
        transit: impl FnMut() -> u64,
    ) {
        let transit = Rc::new(std::cell::RefCell::new(transit));
        let delay = move || (transit.borrow_mut())();
        let ordered = serve_ordered(self.ordered, Rc::clone(&server), delay.clone());
        let concurrent = serve_concurrent(self.concurrent, server, delay);
        let receiving = futures_util::future::join(ordered, concurrent);
        let receiving = std::pin::pin!(receiving);
        let stop = std::pin::pin!(stop);
        if let Either::Left(_) = select(receiving, stop).await {
            log::debug!("shard inbox closed");
        }
    }
}

/// Waits `transit_us` of the node's clock (nothing when 0).
async fn in_transit(server: &Server, transit_us: u64) {
    if transit_us > 0 {
        let deadline = server.now_us().saturating_add(transit_us);
        server.node.clock.sleep_until(deadline).await;
    }
}

/// The ordered lane: one message at a time, in arrival order.
async fn serve_ordered(
    lane: AsyncRx<mpsc::Array<ShardMessage>>,
    server: Rc<Server>,
    mut transit: impl FnMut() -> u64,
) {
    while let Ok(message) = lane.recv().await {
        in_transit(&server, transit()).await;
        server.receive(message).await;
    }
}

/// The concurrent lane: each message its own task, at most [`RUNNING_MAX`] at once.
async fn serve_concurrent(
    lane: AsyncRx<mpsc::Array<ShardMessage>>,
    server: Rc<Server>,
    mut transit: impl FnMut() -> u64,
) {
    let running = Rc::new(Running::default());
    loop {
        running.wait_below(RUNNING_MAX).await;
        let Ok(message) = lane.recv().await else {
            return;
        };
        let slot = Running::take(&running);
        let server = Rc::clone(&server);
        let transit_us = transit();
        compio::runtime::spawn(async move {
            in_transit(&server, transit_us).await;
            server.receive(message).await;
            drop(slot);
        })
        .detach();
    }
}

/// How many concurrent-lane messages run on this shard, and a wake-up when one ends.
#[derive(Default)]
struct Running {
    count: Cell<usize>,
    ended: Event,
}

/// One running message's place in [`Running`]; given back on drop.
struct Slot(Rc<Running>);

impl Running {
    fn take(running: &Rc<Self>) -> Slot {
        running.count.set(running.count.get() + 1);
        Slot(Rc::clone(running))
    }

    /// Completes once fewer than `max` run.
    async fn wait_below(&self, max: usize) {
        while self.count.get() >= max {
            // Registered before the check below, so an end between the two is not missed.
            let ended = self.ended.listen();
            if self.count.get() < max {
                return;
            }
            ended.await;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.count.set(self.0.count.get().saturating_sub(1));
        self.0.ended.notify(1);
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;

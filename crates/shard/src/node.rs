//! What the shards of one server share, and how they reach each other.
//!
//! Thread-per-core: each shard is a `Server` on its own compio runtime thread. One shard,
//! the metadata sequencer (shard 0 in the binary; a parameter of the [`Node`]), holds the
//! metadata journal, the session table and the consumer groups; every other shard keeps a
//! replica of the metadata that the sequencer updates by sending it each committed op. A
//! shard reaches another by sending a [`ShardMessage`] into one of the target's two bounded
//! lanes ([`crate::mail`]).
//!
//! The maps every request reads (partition routes, live sessions, open clients, parked
//! requests) are papaya maps: reads never lock and never wait for a writer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crossfire::{AsyncRx, AsyncTxTrait, MAsyncTx, mpsc};

use crate::clock::{Clock, SystemClock};
use crate::connection::ClientRecord;
use crate::data::leases::GroupViews;
use crate::data::{Cancel, Routes};
use crate::hashing::HashPool;
use crate::mail::{LANE_CAPACITY, Lane, ShardMessage};
use crate::metrics::{Metrics, SpanSink};
use crate::sessions::SessionView;

/// The target shard is gone (its thread ended at shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shard {0} no longer runs")]
pub struct ShardGone(pub usize);

/// The state all shards of one server share.
#[derive(Debug)]
pub struct Node {
    lanes: Vec<Lanes>,
    /// The shard that sequences metadata (see the module docs).
    sequencer: usize,
    /// Every open partition's handle, by key.
    pub(crate) routes: Arc<Routes>,
    /// What the sequencer decided about every consumer group (polls are checked on it).
    pub(crate) group_views: Arc<GroupViews>,
    pub(crate) sessions: Arc<SessionView>,
    /// Live sessions' users by session number (who may use an idempotent producer id).
    pub(crate) session_owners: Arc<crate::sessions::SessionOwners>,
    /// Open connections of every shard, by client number (`GET_CLIENTS`).
    pub(crate) clients: papaya::HashMap<u32, ClientRecord>,
    /// Deferred polls and fetches waiting, by (client id, request number), for
    /// `CANCEL_DEFERRED_REQUEST` (§2.11) from any shard.
    pub(crate) parked: papaya::HashMap<(u128, u64), Arc<Cancel>>,
    next_client_number: AtomicU32,
    /// The password hashing threads (logins and password changes run there, not on a shard).
    pub(crate) hasher: HashPool,
    /// Where every shard's time comes from.
    pub(crate) clock: Arc<dyn Clock>,
    /// Every shard's measurements (`crate::metrics`).
    pub(crate) metrics: Metrics,
    /// Where finished requests go as trace spans, when tracing is on.
    pub(crate) spans: std::sync::OnceLock<Arc<dyn SpanSink>>,
    /// The at-rest key every shard seals and opens records with, when encryption is on.
    pub(crate) record_key: std::sync::OnceLock<Arc<crate::at_rest::RecordKey>>,
    /// Reply bytes of every connection's polls and fetches at once (`crate::reply_budget`).
    pub(crate) replies: Arc<crate::reply_budget::ReplyBudget>,
}

/// The sending ends of one shard's lanes.
#[derive(Debug)]
struct Lanes {
    ordered: MAsyncTx<mpsc::Array<ShardMessage>>,
    concurrent: MAsyncTx<mpsc::Array<ShardMessage>>,
}

/// The receiving ends of one shard's lanes (the server's inbound side serves them:
/// `Inbox::serve`).
pub struct Inbox {
    pub(crate) ordered: AsyncRx<mpsc::Array<ShardMessage>>,
    pub(crate) concurrent: AsyncRx<mpsc::Array<ShardMessage>>,
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
            metrics: Metrics::new(shard_count),
            spans: std::sync::OnceLock::new(),
            record_key: std::sync::OnceLock::new(),
            replies: crate::reply_budget::ReplyBudget::new(
                crate::reply_budget::NODE_REPLY_BUDGET_BYTES,
            ),
        };
        (Arc::new(node), receivers)
    }

    /// Every shard's measurements.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Sends every finished request to `sink` as a span from now on (set once, at start).
    pub fn trace_to(&self, sink: Arc<dyn SpanSink>) {
        let _ = self.spans.set(sink);
    }

    /// Seals every message sent from now on with `key` and opens sealed ones read (set once,
    /// at start, before any shard is built: a shard takes the key when it is made).
    pub fn encrypt_with(&self, key: Arc<crate::at_rest::RecordKey>) {
        let _ = self.record_key.set(key);
    }

    /// The at-rest key's fingerprint (zeros when encryption is off), for the cluster
    /// handshake.
    pub fn at_rest_fingerprint(&self) -> [u8; 32] {
        crate::at_rest::fingerprint(self.record_key.get().map(AsRef::as_ref))
    }

    /// How credentials are stored: sealed under the at-rest key when encryption is on.
    pub fn credentials(&self) -> crate::at_rest::credentials::CredentialSeal {
        crate::at_rest::credentials::CredentialSeal::new(self.record_key.get().cloned())
    }

    /// Messages waiting in each shard's `(ordered, concurrent)` lanes.
    pub fn queue_depths(&self) -> Vec<(usize, usize)> {
        self.lanes
            .iter()
            .map(|lanes| (lanes.ordered.len(), lanes.concurrent.len()))
            .collect()
    }

    pub fn shard_count(&self) -> usize {
        self.lanes.len()
    }

    /// The shard that sequences metadata.
    pub fn sequencer(&self) -> usize {
        self.sequencer
    }

    /// Queues `message` on its lane of shard `shard`. A full lane is backpressure: the
    /// sender waits for room (see [`crate::mail::RUNNING_MAX`]).
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

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;

//! What the shards of one server share, and how they reach each other.
//!
//! Thread-per-core: each shard is a [`Server`] on its own compio runtime thread. Shard 0, the
//! leader, holds the metadata journal, the session table and the consumer groups; every
//! other shard keeps a replica of the metadata that the leader updates by sending it each
//! committed op. A shard reaches another by sending a [`ShardTask`] into its bounded
//! crossfire inbox: the task runs on the target's thread with the target's `Server`.
//!
//! The maps every request reads (partition routes, live sessions, open clients, parked
//! requests) are papaya maps: reads never lock and never wait for a writer.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crossfire::{AsyncRx, MAsyncTx, mpsc};
use futures_util::future::{Either, select};

use crate::clock::{Clock, SystemClock};
use crate::data::{Cancel, Routes};
use crate::hashing::HashPool;
use crate::server::{ClientRecord, Server};

/// A unit of work one shard sends another: it runs on the target's thread, borrowing the
/// target's server for as long as it runs.
pub type ShardTask = Box<dyn for<'s> FnOnce(&'s Server) -> LocalFuture<'s, ()> + Send>;

/// A boxed future that stays on its thread.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Tasks one shard's inbox holds before senders wait: shard-to-shard traffic is metadata
/// commits, forwarded control requests and connection hand-offs, never message batches.
pub const INBOX_MAX: usize = 1024;

/// The target shard is gone (its thread ended at shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shard {0} no longer runs")]
pub struct ShardGone(pub usize);

/// Live sessions by VSR client id: the leader writes, every shard reads (`is_live`, bind).
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
    inboxes: Vec<MAsyncTx<mpsc::Array<ShardTask>>>,
    /// Every open partition's handle, by key.
    pub routes: Arc<Routes>,
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

/// The receiving end of one shard's inbox.
pub struct Inbox(AsyncRx<mpsc::Array<ShardTask>>);

impl std::fmt::Debug for Inbox {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Inbox")
    }
}

impl Node {
    /// The shared state of `shard_count` shards (at least 1) on the system clock, with
    /// hashing threads, and their inboxes in order.
    pub fn new(shard_count: usize) -> (Arc<Self>, Vec<Inbox>) {
        let hasher = HashPool::new(hash_threads());
        Self::with(shard_count, Arc::new(SystemClock), hasher)
    }

    /// The shared state of `shard_count` shards (at least 1) whose time is `clock` and
    /// whose passwords `hasher` hashes (the simulator's: simulated time, hashing inline).
    pub fn with(
        shard_count: usize,
        clock: Arc<dyn Clock>,
        hasher: HashPool,
    ) -> (Arc<Self>, Vec<Inbox>) {
        let (inboxes, receivers): (Vec<_>, Vec<_>) = (0..shard_count.max(1))
            .map(|_| {
                let (sender, receiver) = mpsc::bounded_async(INBOX_MAX);
                (sender, Inbox(receiver))
            })
            .unzip();
        let node = Self {
            inboxes,
            routes: Arc::default(),
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
        self.inboxes.len()
    }

    /// Queues `task` on shard `shard` (waits while its inbox is full).
    pub async fn send(&self, shard: usize, task: ShardTask) -> Result<(), ShardGone> {
        let inbox = self.inboxes.get(shard).ok_or(ShardGone(shard))?;
        // The send error only hands the task back: the receiver is gone.
        match inbox.send(task).await {
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
    /// Runs every task sent to this shard, each as its own task on this thread, until
    /// `stop` completes.
    pub async fn serve(self, server: Rc<Server>, stop: impl Future<Output = ()>) {
        let receiving = async {
            while let Ok(task) = self.0.recv().await {
                let server = Rc::clone(&server);
                compio::runtime::spawn(async move { task(&server).await }).detach();
            }
        };
        let receiving = std::pin::pin!(receiving);
        let stop = std::pin::pin!(stop);
        if let Either::Left(((), _)) = select(receiving, stop).await {
            log::debug!("shard inbox closed");
        }
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;

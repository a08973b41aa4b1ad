//! What one shard sends another: every message is a value of [`ShardMessage`], so a queue
//! can hold, count, delay or drop it (the simulator delays and reorders them), and a reader
//! can see every kind of traffic between shards in one place.
//!
//! Two lanes per shard ([`Lane`]): committed metadata ops arrive on the ordered lane and are
//! applied one after another, in commit order; everything else (requests for the metadata
//! sequencer) runs concurrently, a bounded number at a time. The ordered lane never waits for
//! another shard, so it always drains, and a sequencer waiting for its replicas to apply can
//! never deadlock with requests queued behind it.

use proto::header::HEADER_SIZE;

use crate::connection::Connection;
use crate::data::DataError;
use crate::metadata::{ApplyError, MetadataOp};
use crate::outcome::Outcome;
use crate::refusal::Refusal;

/// Where the answer to a message goes: a one-shot channel back to the asking shard.
pub type Reply<T> = crossfire::oneshot::TxOneshot<T>;

/// One message between shards.
pub enum ShardMessage {
    /// To the sequencer: commit `op` (validated by the sender's handler) and answer with the
    /// new commit number once every shard applied it.
    Commit {
        op: MetadataOp,
        reply: Reply<Result<u64, Refusal>>,
    },
    /// From the sequencer: apply the committed `op` to the replica; the answer says whether
    /// it applied (a replica that cannot follow is logged by the sequencer).
    Apply {
        op: MetadataOp,
        reply: Reply<Result<(), ReplicaError>>,
    },
    /// To the sequencer: answer a request that changes metadata, sessions or groups (or reads
    /// groups) for a connection of the sender.
    Forward(Box<Forwarded>),
    /// To the sequencer: a connection of `client_id` closed; answered once handled.
    ConnectionClosed { client_id: u128, reply: Reply<()> },
}

/// A committed op could not be applied on this shard's replica.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("apply to the metadata replica")]
    Apply(#[from] ApplyError),
    #[error("open or close the partitions")]
    Data(#[from] DataError),
}

/// A request forwarded whole: the connection's state goes along and comes back with the
/// outcome, since a login or bind changes it.
pub struct Forwarded {
    pub connection: Connection,
    pub header: [u8; HEADER_SIZE],
    pub body: Vec<u8>,
    pub reply: Reply<(Outcome, Connection)>,
}

/// The two queues of a shard's inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Handled one at a time in arrival order.
    Ordered,
    /// Handled concurrently, at most [`RUNNING_MAX`] at once.
    Concurrent,
}

/// Messages one lane holds before senders wait.
pub const LANE_CAPACITY: usize = 1024;

/// Concurrent-lane messages a shard runs at once; beyond it the shard stops taking from the
/// lane, the lane fills and senders wait (their connections are not read meanwhile, so the
/// wait reaches the clients as TCP backpressure).
pub const RUNNING_MAX: usize = 256;

impl ShardMessage {
    /// The lane the message travels on.
    pub fn lane(&self) -> Lane {
        match self {
            Self::Apply { .. } => Lane::Ordered,
            Self::Commit { .. } | Self::Forward(_) | Self::ConnectionClosed { .. } => {
                Lane::Concurrent
            }
        }
    }

    /// The message's kind, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Commit { .. } => "commit",
            Self::Apply { .. } => "apply",
            Self::Forward(_) => "forward",
            Self::ConnectionClosed { .. } => "connection-closed",
        }
    }
}

impl std::fmt::Debug for ShardMessage {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.kind())
    }
}

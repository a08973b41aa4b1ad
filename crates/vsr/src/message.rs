//! The messages replicas exchange, and the client request they order.

use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::entry::chain_length_from;
use crate::{Checksum, Entry, Op, ReplicaId, View};

/// A log after its committed prefix: the entries of ops `commit + 1 ..`, chained to `head`,
/// the checksum of the entry at `commit` ([`crate::ROOT_CHECKSUM`] for 0). View changes and
/// recovery carry this rather than a whole log, so their size is bounded by the ops not yet
/// committed, not by the data; a replica that lacks committed ops below it fetches them
/// with `RequestPrepares` (any replica serves its committed ops).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suffix {
    /// An op the sender knows committed, and holds.
    pub commit: Op,
    pub head: Checksum,
    pub entries: Vec<Entry>,
}

impl Suffix {
    /// The last op of the log this suffix ends.
    pub fn op(&self) -> Op {
        let count = Op::try_from(self.entries.len()).unwrap_or(Op::MAX);
        self.commit.saturating_add(count)
    }

    /// Whether the entries are ops `commit + 1 ..` in order, each intact and chained from
    /// `head`.
    pub fn is_chain(&self) -> bool {
        let first = self.commit.saturating_add(1);
        chain_length_from(&self.entries, first, self.head) == self.entries.len()
    }

    /// The checksum of the entry at `op`, if this suffix names it (`head` at `commit`).
    pub fn checksum_at(&self, op: Op) -> Option<Checksum> {
        if op == self.commit {
            return Some(self.head);
        }
        let index = usize::try_from(op.checked_sub(self.commit)?.checked_sub(1)?).ok()?;
        self.entries.get(index).map(|entry| entry.checksum)
    }
}

/// A message to or from a replica. `replica` is always the sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A client's request (the primary prepares it; backups ignore it).
    Request {
        client: u128,
        request: u64,
        body: Arc<[u8]>,
    },
    /// The primary's entry at `entry.op`, with its commit number.
    Prepare {
        view: View,
        replica: ReplicaId,
        commit: Op,
        entry: Entry,
    },
    /// A backup has written every entry up to `op` of `view`'s log.
    PrepareOk {
        view: View,
        replica: ReplicaId,
        op: Op,
    },
    /// The primary's heartbeat: everything up to `commit` is committed.
    Commit {
        view: View,
        replica: ReplicaId,
        commit: Op,
    },
    /// The sender has left every view below `view`.
    StartViewChange { view: View, replica: ReplicaId },
    /// To `view`'s primary: the sender's log after the ops it knows committed, and the last
    /// view it was normal in.
    DoViewChange {
        view: View,
        replica: ReplicaId,
        log_view: View,
        log: Suffix,
    },
    /// From `view`'s primary: the log of the new view after its commit number.
    StartView {
        view: View,
        replica: ReplicaId,
        log: Suffix,
    },
    /// Asks `view`'s primary for a `StartView` (a replica that missed it, or restarted).
    RequestStartView { view: View, replica: ReplicaId },
    /// Asks `view`'s primary for its prepares `op_min..=op_max`; any other replica answers
    /// with those it knows committed.
    RequestPrepares {
        view: View,
        replica: ReplicaId,
        op_min: Op,
        op_max: Op,
    },
    /// From a replica that lost its disk: who is primary, and what is the log?
    Recovery { replica: ReplicaId, nonce: u64 },
    /// The answer to `nonce`; only the primary of `view` sends its log after its commit.
    RecoveryResponse {
        view: View,
        replica: ReplicaId,
        nonce: u64,
        primary_state: Option<Suffix>,
    },
}

/// The wire command of each message (PROTOCOL.md §1.2's replica commands; the two recovery
/// messages have no code in Iggy's table and take two from the unassigned range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Command {
    Request = 5,
    Prepare = 6,
    PrepareOk = 7,
    Commit = 9,
    StartViewChange = 10,
    DoViewChange = 11,
    StartView = 12,
    RequestStartView = 17,
    RequestPrepares = 18,
    Recovery = 200,
    RecoveryResponse = 201,
}

impl Message {
    /// The message's wire command.
    pub fn command(&self) -> Command {
        match self {
            Message::Request { .. } => Command::Request,
            Message::Prepare { .. } => Command::Prepare,
            Message::PrepareOk { .. } => Command::PrepareOk,
            Message::Commit { .. } => Command::Commit,
            Message::StartViewChange { .. } => Command::StartViewChange,
            Message::DoViewChange { .. } => Command::DoViewChange,
            Message::StartView { .. } => Command::StartView,
            Message::RequestStartView { .. } => Command::RequestStartView,
            Message::RequestPrepares { .. } => Command::RequestPrepares,
            Message::Recovery { .. } => Command::Recovery,
            Message::RecoveryResponse { .. } => Command::RecoveryResponse,
        }
    }

    /// The sending replica (`None` for a client's request).
    pub fn sender(&self) -> Option<ReplicaId> {
        match self {
            Message::Request { .. } => None,
            Message::Prepare { replica, .. }
            | Message::PrepareOk { replica, .. }
            | Message::Commit { replica, .. }
            | Message::StartViewChange { replica, .. }
            | Message::DoViewChange { replica, .. }
            | Message::StartView { replica, .. }
            | Message::RequestStartView { replica, .. }
            | Message::RequestPrepares { replica, .. }
            | Message::Recovery { replica, .. }
            | Message::RecoveryResponse { replica, .. } => Some(*replica),
        }
    }
}

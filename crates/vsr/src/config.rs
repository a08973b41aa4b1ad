//! The cluster's shape and its timeouts, counted in ticks (the caller decides how long a
//! tick is; time is an input).

use crate::{REPLICAS_MAX, ReplicaId};

/// What every replica of one cluster must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Replicas in the cluster: 1 to [`REPLICAS_MAX`].
    pub replica_count: u8,
    /// Ticks between the primary's Commit heartbeats while it has nothing to prepare.
    pub commit_interval: u64,
    /// Ticks a backup waits without hearing from its primary before it starts a view change;
    /// replica `i` waits `i` quarter timeouts longer, so that one replica usually moves first.
    pub heartbeat_timeout: u64,
    /// Ticks a view change may take before the replica tries the next view.
    pub view_change_timeout: u64,
    /// Ticks between retransmissions of unacknowledged prepares, view-change messages and
    /// recovery requests.
    pub retransmit_interval: u64,
    /// A deliberate bug (simulator self-tests only).
    #[cfg(feature = "__broken")]
    pub broken: Option<Break>,
}

impl Config {
    /// A cluster of `replica_count` replicas with the default timeouts (a tick is meant to be
    /// about 10 ms: heartbeats every 50 ms, a view change after 1 s of silence).
    pub fn new(replica_count: u8) -> Self {
        assert!(replica_count >= 1, "a cluster has at least one replica");
        assert!(usize::from(replica_count) <= REPLICAS_MAX);
        Self {
            replica_count,
            commit_interval: 5,
            heartbeat_timeout: 100,
            view_change_timeout: 200,
            retransmit_interval: 10,
            #[cfg(feature = "__broken")]
            broken: None,
        }
    }

    /// Replicas that make a quorum: a majority.
    pub fn quorum(&self) -> usize {
        quorum(self.replica_count)
    }

    /// The primary of `view`.
    pub fn primary(&self, view: u32) -> ReplicaId {
        let count = u32::from(self.replica_count);
        // The remainder is below `replica_count`, itself a u8.
        u8::try_from(view % count).unwrap_or(0)
    }

    /// Whether `broken` is the bug this replica runs with.
    #[inline]
    // Without the planted bugs (`__broken`) the answer is always no, `self` unread.
    #[cfg_attr(not(feature = "__broken"), allow(clippy::unused_self))]
    pub(crate) fn is_broken(&self, broken: Break) -> bool {
        #[cfg(feature = "__broken")]
        {
            self.broken == Some(broken)
        }
        #[cfg(not(feature = "__broken"))]
        {
            let _ = broken;
            false
        }
    }
}

/// A majority of `replica_count`: any two quorums share a replica.
pub const fn quorum(replica_count: u8) -> usize {
    (replica_count as usize) / 2 + 1
}

const _: () = assert!(quorum(1) == 1);
const _: () = assert!(quorum(3) == 2);
const _: () = assert!(quorum(4) == 3);
const _: () = assert!(quorum(5) == 3);
// Two quorums always intersect.
const _: () = assert!(2 * quorum(5) > 5 && 2 * quorum(4) > 4);

/// One way of breaking replication that the cluster simulator must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// The primary commits an op as soon as it has written it itself, without a quorum.
    CommitWithoutQuorum,
    /// A new primary takes its own log in a view change instead of the most recent one of
    /// the `DoViewChange` quorum.
    ViewChangeKeepsOwnLog,
    /// A replica that restarts with a lost disk takes part in view changes at once, before
    /// it has recovered what it had acknowledged.
    RecoveringReplicaVotes,
    /// A replica labels its disk with a new view's `log_view` before the log that view
    /// installed is written, so a crash leaves the old view's entries under the new label.
    LogViewBeforeLog,
}

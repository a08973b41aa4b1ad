//! What a replica keeps of its log in memory, and what of it a view change or recovery
//! carries: ops leave memory once applied and written (the caller reads them back from disk
//! for a peer that asks, [`crate::Effect::SendPrepares`]), and only the ops after the
//! committed prefix travel in a [`Suffix`], so neither grows with the data.

use crate::{EVICT_SLACK, Op, PIPELINE_MAX, ROOT_CHECKSUM, Replica, Suffix};

impl Replica {
    /// The ops of this replica's log known committed. Besides `commit`: a primary prepares an
    /// op only while fewer than [`PIPELINE_MAX`] are uncommitted, so whoever prepared the last
    /// entry of a chain had committed every op `PIPELINE_MAX` below it, and a chain is that
    /// primary's log. So a replica that restarted without hearing a commit still vouches for
    /// all but its last `PIPELINE_MAX` ops, and its view-change messages stay that small.
    pub(crate) fn committed_prefix(&self) -> Op {
        let pipeline = Op::try_from(PIPELINE_MAX).unwrap_or(Op::MAX);
        let pipelined = self.op().saturating_sub(pipeline);
        self.commit.max(pipelined).min(self.op())
    }

    /// This replica's log after its committed prefix, for view changes and recovery.
    pub(crate) fn suffix(&self) -> Suffix {
        let commit = self.committed_prefix();
        let start = usize::try_from(commit.saturating_sub(self.base)).unwrap_or(usize::MAX);
        Suffix {
            commit,
            head: self.checksum_at(commit).unwrap_or(ROOT_CHECKSUM),
            entries: self.log.get(start..).unwrap_or_default().to_vec(),
        }
    }

    /// Drops from memory the entries both applied and written, but the last [`EVICT_SLACK`].
    pub(crate) fn evict(&mut self) {
        let floor = self.applied.min(self.durable);
        if floor <= self.base.saturating_add(EVICT_SLACK) {
            return;
        }
        let base = floor - EVICT_SLACK;
        let count = usize::try_from(base - self.base).unwrap_or(usize::MAX);
        self.base_checksum = self
            .log
            .get(count.saturating_sub(1))
            .map_or(self.base_checksum, |entry| entry.checksum);
        self.log.drain(..count);
        self.base = base;
    }
}

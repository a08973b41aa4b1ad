//! The metadata sequencer: the leader's commits, one at a time, in arrival order, run by one
//! task of the shard's runtime instead of inside the request that asked for them.
//!
//! A request's future may be dropped at any await (its connection is evicted, its client
//! stops reading). Were the commit run inside it, a drop between the journal append and the
//! replicas' apply would leave the journal, the leader's state and the replicas disagreeing.
//! So a commit is queued here and answered through a one-shot channel; the drain task owns
//! the journal while it runs, and no lock is held across the journal's I/O or the replicas'
//! replies: the queue is the order.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use super::Server;
use crate::data::ShardStorage;
use crate::mail::Reply;
use crate::metadata::{Journal, Metadata, MetadataOp};
use crate::refusal::Refusal;
use crate::retries::Origin;

/// A queued op, the SDK identity of the request behind it, and where its commit number goes.
type Queued = (MetadataOp, Option<Origin>, Reply<Result<u64, Refusal>>);

/// The leader's commit queue and journal.
#[derive(Default)]
pub(crate) struct Sequencer {
    /// `None` on other shards and for metadata kept in memory only (tests); taken by the
    /// drain task while it commits.
    journal: RefCell<Option<Journal<ShardStorage>>>,
    queue: RefCell<VecDeque<Queued>>,
    /// A drain task runs (at most one does).
    draining: Cell<bool>,
}

impl std::fmt::Debug for Sequencer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Sequencer")
            .field("queued", &self.queue.borrow().len())
            .field("draining", &self.draining.get())
            .finish_non_exhaustive()
    }
}

impl Sequencer {
    pub(crate) fn set_journal(&self, journal: Journal<ShardStorage>) {
        self.journal.replace(Some(journal));
    }
}

impl Server {
    /// Queues `op` on this shard's sequencer and waits for its commit number; starts the
    /// drain task when none runs.
    pub(super) async fn sequence(
        &self,
        op: MetadataOp,
        origin: Option<Origin>,
    ) -> Result<u64, Refusal> {
        let (reply, answer) = crossfire::oneshot::oneshot();
        self.sequencer
            .queue
            .borrow_mut()
            .push_back((op, origin, reply));
        if !self.sequencer.draining.replace(true) {
            let Some(server) = self.me.upgrade() else {
                // The server is being dropped: nothing will commit.
                self.sequencer.draining.set(false);
                return Err(Refusal::Internal);
            };
            compio::runtime::spawn(async move { server.drain().await }).detach();
        }
        // A dropped reply means the runtime ended with the commit unanswered.
        answer.await.unwrap_or(Err(Refusal::Internal))
    }

    /// Commits every queued op in order until the queue is empty. The task ends before its
    /// last answer is read: whoever queues next starts a new one.
    async fn drain(self: Rc<Self>) {
        loop {
            let next = self.sequencer.queue.borrow_mut().pop_front();
            let Some((op, origin, reply)) = next else {
                self.sequencer.draining.set(false);
                return;
            };
            let mut journal = self.sequencer.journal.take();
            let committed = self.commit_now(journal.as_mut(), op, origin).await;
            self.sequencer.journal.replace(journal);
            let last = self.sequencer.queue.borrow().is_empty();
            if last {
                self.sequencer.draining.set(false);
            }
            reply.send(committed);
            if last {
                return;
            }
        }
    }

    /// Applies `op` to a copy to prove it applies, appends it to the journal (fsynced),
    /// applies it, has every other shard apply it, then lets the leader's data plane follow.
    async fn commit_now(
        &self,
        journal: Option<&mut Journal<ShardStorage>>,
        op: MetadataOp,
        origin: Option<Origin>,
    ) -> Result<u64, Refusal> {
        // The op is applied to a copy first: the journal must only ever hold ops that apply.
        let mut next = Metadata::clone(&self.metadata.borrow());
        if let Err(error) = next.apply(&op) {
            // Validated against the metadata before a change queued ahead of it committed
            // (two clients creating the same name, or the next free id, at once): the
            // caller validates again against the metadata that change left on every shard.
            log::debug!("metadata: {} no longer applies: {error}", op.kind());
            return Err(Refusal::Stale);
        }
        if let Some(replication) = self.replication() {
            // Cluster mode: the op is applied once a quorum has it, on every node, by the
            // replica driver (`crate::cluster`); metadata is always synced by the quorum.
            // Its origin goes with it, so a retry of the request is not applied twice.
            let op = match origin {
                Some(origin) => crate::cluster::ReplicatedOp::MetadataFrom { op, origin },
                None => crate::cluster::ReplicatedOp::Metadata(op),
            };
            return match replication.submit(&op, true).await? {
                crate::cluster::Applied::Metadata { commit } => Ok(commit),
                _ => Err(Refusal::Internal),
            };
        }
        if let Some(journal) = journal
            && let Err(error) = journal.append(&op, &next).await
        {
            log::error!("metadata: journal append failed: {error}");
            return Err(Refusal::Internal);
        }
        let commit = next.commit;
        let next = Rc::new(next);
        self.metadata.replace(Rc::clone(&next));
        self.replicate(&op).await;
        if op.may_revoke_identity() {
            self.end_orphaned_sessions();
        }
        if let Err(error) = self.data.on_applied(&op, &next).await {
            // The change is committed and in force on every shard: answering an error would
            // tell the client it did not happen, and its retry would find it "already
            // exists". Partitions that did not open are retried
            // (`DataPlane::retry_unopened`); files a deletion could not remove stay, named
            // in this line.
            log::error!("data: following commit {commit} failed: {error}");
        }
        Ok(commit)
    }
}

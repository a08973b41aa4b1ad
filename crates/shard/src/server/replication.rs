//! Cluster mode's runtime side of the shard: the channel to the replica driver
//! ([`Replication`]) and the apply of committed ops ([`Server::apply_replicated`]). The
//! ops, roster and status are `crate::cluster`'s.

use std::rc::Rc;
use std::sync::Arc;

use super::Server;
use crate::cluster::{Applied, ClusterStatus, LocalFault, ReplicatedOp};
use crate::data::{DataError, PartitionHandle, PartitionKey, SendPlan};
use crate::mail::Reply;
use crate::metadata::{Metadata, MetadataOp};
use crate::refusal::{Missing, Refusal};
use crate::retries::{Origin, Outcome};

/// The longest a request waits for its submission's outcome: the driver's own commit wait
/// (10 s) and a little more.
const SUBMISSION_WAIT: std::time::Duration = std::time::Duration::from_secs(12);

/// An op on its way to the replica driver, and where its outcome goes: `body` is an entry
/// body ([`crate::cluster::entry_body`]).
pub struct Submission {
    pub body: Vec<u8>,
    /// The op must be synced by a quorum before it counts (`persisted` topics, metadata).
    pub sync: bool,
    pub reply: Reply<Result<Applied, Refusal>>,
}

impl std::fmt::Debug for Submission {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Submission")
            .field("bytes", &self.body.len())
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

/// The primary's way to the replica driver, and the status it publishes.
#[derive(Debug)]
pub struct Replication {
    pub replica_id: u8,
    pub status: Arc<ClusterStatus>,
    submissions: crossfire::MAsyncTx<crossfire::mpsc::Array<Submission>>,
}

impl Replication {
    pub fn new(
        replica_id: u8,
        status: Arc<ClusterStatus>,
        submissions: crossfire::MAsyncTx<crossfire::mpsc::Array<Submission>>,
    ) -> Self {
        Self {
            replica_id,
            status,
            submissions,
        }
    }

    /// Whether this node's state is the cluster's now (normal and caught up).
    pub fn is_caught_up(&self) -> bool {
        self.status.is_caught_up()
    }

    /// Whether this node is the primary of a view in normal operation.
    pub fn is_primary(&self) -> bool {
        self.status.is_normal() && self.status.primary() == self.replica_id
    }

    /// What a request that only the primary serves gets here, if this node is not it:
    /// partition requests at a backup in normal operation `89 NotPrimary` (the SDK
    /// re-routes), everything else `58 TransientNotAccepted` (the SDK re-reads the roster
    /// and retries).
    ///
    /// A node between views (or recovering) answers `58` even to partition requests: the
    /// SDK takes `89` as proof that the refusing node knows a view newer than the route
    /// that named it, and from then on refuses every route of that view (§2.9). The
    /// designated primary of a view still being changed would otherwise fence the clients
    /// off the very view it is about to serve.
    pub fn refusal(&self, partition_plane: bool) -> Option<Refusal> {
        if self.is_primary() {
            return None;
        }
        Some(if partition_plane && self.status.is_normal() {
            Refusal::NotPrimary
        } else {
            Refusal::NotAccepted
        })
    }

    /// Replicates `op` and waits until this node has applied it: its outcome then, or a
    /// refusal when this node is between views (`58`), its queue is full (`58`), or the op
    /// was not committed in time (`57`: it may still commit). A backup forwards the op to
    /// the primary.
    pub async fn submit(&self, op: &ReplicatedOp, sync: bool) -> Result<Applied, Refusal> {
        let mut body = vec![u8::from(sync)];
        body.extend_from_slice(&op.encode());
        self.submit_body(body, sync).await
    }

    /// [`Replication::submit`] for a send, its batch encoded straight from the request.
    pub async fn submit_append(
        &self,
        append: crate::cluster::AppendRef<'_>,
        sync: bool,
    ) -> Result<Applied, Refusal> {
        self.submit_body(append.entry_body(sync), sync).await
    }

    /// Submits an entry body ([`crate::cluster::entry_body`]).
    async fn submit_body(&self, body: Vec<u8>, sync: bool) -> Result<Applied, Refusal> {
        if !self.status.is_normal() {
            return Err(Refusal::NotAccepted);
        }
        let (reply, outcome) = crossfire::oneshot::oneshot();
        let submission = Submission { body, sync, reply };
        if self.submissions.try_send(submission).is_err() {
            return Err(Refusal::NotAccepted);
        }
        // The driver answers a submission by its commit wait (10 s); one held up (its log
        // write stuck on a frozen disk) answers nothing, so the wait ends here too.
        match compio::time::timeout(SUBMISSION_WAIT, outcome).await {
            Ok(outcome) => outcome.unwrap_or(Err(Refusal::NotCommitted)),
            Err(_elapsed) => Err(Refusal::NotCommitted),
        }
    }
}

impl Server {
    /// Cluster mode's replication, if this server runs in it.
    pub fn replication(&self) -> Option<&Replication> {
        self.replication.get()
    }

    /// In cluster mode, the metadata change the request `origin` already committed (the
    /// request is its retry) and that change's commit.
    pub(crate) fn committed_change(&self, origin: Option<Origin>) -> Option<(MetadataOp, u64)> {
        let origin = origin.filter(|_| self.replication().is_some())?;
        match self.changes.borrow().get(origin)? {
            (Outcome::Changed(op), commit) => Some((op.clone(), commit)),
            (Outcome::Sent(_) | Outcome::Truncated, _) => None,
        }
    }

    /// Turns cluster mode on: changes are replicated through `replication` from now on.
    pub fn set_replication(&self, replication: Replication) {
        if self.replication.set(replication).is_err() {
            log::error!("cluster replication was set twice; the first stays");
        }
    }

    /// A committed append: appended, unless its origin names a send already applied (a
    /// retry after a lost answer), which gets that send's outcome instead.
    async fn apply_append(
        &self,
        number: u64,
        (key, producer, origin): (
            PartitionKey,
            Option<(proto::batch::Producer, u32)>,
            Option<Origin>,
        ),
        batch: Vec<u8>,
        now_us: u64,
    ) -> Result<Applied, Unapplied> {
        if let Some(origin) = origin
            && let Some((Outcome::Sent(confirmations), op)) = self.retries.borrow().get(origin)
        {
            return Ok(Applied::Appended(confirmations.clone(), op));
        }
        let handle = self.partition_here(number, key)?;
        let plan = SendPlan {
            key,
            handle,
            producer,
        };
        let sent = self.data.send(&plan, batch.into(), now_us).await;
        let confirmations = sent.map_err(|error| self.data_failure(number, &error))?;
        if let Some(origin) = origin {
            let sent = Outcome::Sent(confirmations.clone());
            self.retries.borrow_mut().record(origin, number, sent);
        }
        Ok(Applied::Appended(confirmations, number))
    }

    /// Applies the committed op numbered `number` (every node, in op order): its outcome for
    /// the request. A refusal is deterministic — every node refuses the same op alike — so
    /// the op then changes nothing anywhere. A failure of this node's own (its disk, a
    /// partition that did not open here) is `Err`: the op changed the others' state and not
    /// this one's, so the node must not go on (see [`LocalFault`]).
    pub async fn apply_replicated(
        &self,
        number: u64,
        op: ReplicatedOp,
    ) -> Result<Result<Applied, Refusal>, LocalFault> {
        match self.apply_op(number, op).await {
            Ok(applied) => Ok(Ok(applied)),
            Err(Unapplied::Refused(refusal)) => Ok(Err(refusal)),
            Err(Unapplied::Fault(fault)) => {
                log::error!("cluster: {fault}");
                Err(fault)
            }
        }
    }

    async fn apply_op(&self, number: u64, op: ReplicatedOp) -> Result<Applied, Unapplied> {
        match op {
            ReplicatedOp::Register {
                client_id,
                user_id,
                bind_secret,
                token,
            } => Ok(self.register_replicated(number, client_id, user_id, bind_secret, token)?),
            ReplicatedOp::Metadata(op) => self.apply_metadata(number, op, None).await,
            ReplicatedOp::MetadataFrom { op, origin } => {
                self.apply_metadata(number, op, Some(origin)).await
            }
            ReplicatedOp::Append {
                key,
                now_us,
                producer,
                origin,
                batch,
            } => {
                let plan = (key, producer, origin);
                self.apply_append(number, plan, batch, now_us).await
            }
            ReplicatedOp::StoreOffset {
                key,
                owner,
                offset,
                forward_only,
            } => {
                self.apply_store_offset(number, (key, owner), offset, forward_only)
                    .await
            }
            ReplicatedOp::Purge {
                stream_id,
                topic_id,
                origin,
            } => {
                if let Some(first) = self.record_truncation(number, origin) {
                    return Ok(Applied::Truncated(first));
                }
                let purged = self.data.purge(stream_id, topic_id).await;
                purged
                    .map(|()| Applied::Truncated(number))
                    .map_err(|error| self.data_failure(number, &error))
            }
            ReplicatedOp::DeleteSegments { key, below, origin } => {
                if let Some(first) = self.record_truncation(number, origin) {
                    return Ok(Applied::Truncated(first));
                }
                match self.data.delete_segments_below(key, below).await {
                    Ok(Some(_)) => Ok(Applied::Truncated(number)),
                    Ok(None) => Err(self.missing_partition(number, key)),
                    Err(error) => Err(self.data_failure(number, &error)),
                }
            }
            ReplicatedOp::DeleteOffset { key, owner } => {
                let handle = self.partition_here(number, key)?;
                let deleted = handle.delete_offset(owner).await;
                deleted
                    .map(|deleted| Applied::Offset(deleted, number))
                    .map_err(|source| {
                        self.data_failure(number, &DataError::Partition { key, source })
                    })
            }
        }
    }

    /// In cluster mode, the op that applied the purge or segment deletion the request
    /// `origin` asked for, if one did (the request is its retry).
    pub(crate) fn truncated_by(&self, origin: Option<Origin>) -> Option<u64> {
        let origin = origin.filter(|_| self.replication().is_some())?;
        match self.changes.borrow().get(origin)? {
            (Outcome::Truncated, op) => Some(op),
            (Outcome::Sent(_) | Outcome::Changed(_), _) => None,
        }
    }

    /// Notes the truncation committed as op `number` for `origin`, unless that origin's
    /// truncation was applied before: then that op, and this one applies as nothing (a retry
    /// after a lost answer must not delete again: a count of segments would go twice).
    fn record_truncation(&self, number: u64, origin: Option<Origin>) -> Option<u64> {
        let origin = origin?;
        if let Some(first) = self.truncated_by(Some(origin)) {
            return Some(first);
        }
        self.changes
            .borrow_mut()
            .record(origin, number, Outcome::Truncated);
        None
    }

    /// A committed offset store; a forward-only one (a group's auto-commit) that would move
    /// the offset back changes nothing.
    async fn apply_store_offset(
        &self,
        number: u64,
        (key, owner): (PartitionKey, segment::offsets::OffsetOwner),
        offset: u64,
        forward_only: bool,
    ) -> Result<Applied, Unapplied> {
        let handle = self.partition_here(number, key)?;
        let behind = handle
            .stored_offset(owner)
            .is_some_and(|stored| stored >= offset);
        if forward_only && behind {
            return Ok(Applied::Offset(true, number));
        }
        let stored = handle.store_offset(owner, offset).await;
        stored
            .map(|()| Applied::Offset(true, number))
            .map_err(|source| self.data_failure(number, &DataError::Partition { key, source }))
    }

    /// A data-plane error of the committed op `number`: a refusal every node gives alike (a
    /// producer's duplicate, a malformed batch, a limit), or a failure of this node's
    /// storage (I/O, a full disk, a quarantined or poisoned partition), which the others do
    /// not share. A partition closed under the op is either gone everywhere or only here
    /// (its task ended: a failed purge, a panic), as the metadata tells.
    fn data_failure(&self, number: u64, error: &DataError) -> Unapplied {
        if let DataError::Partition {
            key,
            source: segment::partition::PartitionError::Closed,
        } = error
        {
            return self.missing_partition(number, *key);
        }
        match error.refusal() {
            Refusal::Internal | Refusal::Storage(_) => Unapplied::Fault(LocalFault {
                op: number,
                cause: crate::data::causes(error),
            }),
            refusal => Unapplied::Refused(refusal),
        }
    }

    /// The partition `key` as this node holds it open.
    fn partition_here(&self, number: u64, key: PartitionKey) -> Result<PartitionHandle, Unapplied> {
        self.data
            .partition(key)
            .ok_or_else(|| self.missing_partition(number, key))
    }

    /// A committed op's partition that is not open here: missing everywhere when the
    /// metadata has no such partition, this node's fault when it has (its open failed).
    fn missing_partition(&self, number: u64, key: PartitionKey) -> Unapplied {
        let metadata = self.metadata.borrow();
        let known = metadata
            .topic_by_ids(key.stream_id, key.topic_id)
            .is_some_and(|topic| topic.partitions.contains_key(&key.partition_id));
        if known {
            Unapplied::Fault(LocalFault {
                op: number,
                cause: format!("partition {key:?} is not open on this node"),
            })
        } else {
            Unapplied::Refused(Refusal::Missing(Missing::Partition))
        }
    }

    /// A login's session, numbered by its op so every node gives it the same number.
    fn register_replicated(
        &self,
        number: u64,
        client_id: u128,
        user_id: u32,
        bind_secret: [u8; 32],
        token: Option<[u8; 32]>,
    ) -> Result<Applied, Refusal> {
        let registered = self.sessions.borrow_mut().register_numbered(
            client_id,
            Some(number),
            user_id,
            proto::commands::session::BindSecret(bind_secret),
            token,
        );
        registered
            .map(|record| Applied::Session(record.session))
            .map_err(|error| {
                log::info!("cluster: register of op {number}: {error}");
                Refusal::Internal
            })
    }

    /// Applies the metadata change committed as op `number`, which becomes the metadata's
    /// commit number, unless `origin` names a change already applied (a retry whose first
    /// attempt committed too): that one's commit answers it, and nothing changes.
    async fn apply_metadata(
        &self,
        number: u64,
        op: MetadataOp,
        origin: Option<Origin>,
    ) -> Result<Applied, Unapplied> {
        if let Some((_, commit)) = self.committed_change(origin) {
            return Ok(Applied::Metadata { commit });
        }
        let mut next = Metadata::clone(&self.metadata.borrow());
        if let Err(error) = next.apply_at(&op, number) {
            log::info!("metadata: committed {} does not apply: {error}", op.kind());
            return Err(Unapplied::Refused(Refusal::Internal));
        }
        let commit = next.commit;
        let next = Rc::new(next);
        self.metadata.replace(Rc::clone(&next));
        if op.may_revoke_identity() {
            self.end_orphaned_sessions();
        }
        if let Some(origin) = origin {
            let changed = Outcome::Changed(op.clone());
            self.changes.borrow_mut().record(origin, number, changed);
        }
        if let Err(error) = self.data.on_applied(&op, &next).await {
            // The metadata changed and this node's files did not follow. A partition that
            // did not open is retried (`DataPlane::retry_unopened`); an op that needs it
            // before then stops the node ([`Self::missing_partition`]). Not a fault here:
            // a limit every node shares (open files) would stop them all, at every start.
            log::error!("data: following replicated commit {commit} failed: {error}");
        }
        Ok(Applied::Metadata { commit })
    }
}

/// Why a committed op did not apply here.
#[derive(Debug)]
enum Unapplied {
    /// Refused alike on every node.
    Refused(Refusal),
    /// This node's own failure.
    Fault(LocalFault),
}

impl From<Refusal> for Unapplied {
    fn from(refusal: Refusal) -> Self {
        Self::Refused(refusal)
    }
}

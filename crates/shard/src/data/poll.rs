//! Polling (PROTOCOL.md §4.4): planning a poll against metadata, group ownership and stored
//! offsets (synchronous), then reading, auto-committing and, for deferred polls and fetches,
//! parking until enough messages arrive, the wait runs out or the request is cancelled.

use proto::Dialect;
use proto::codec::{Writer, encode_to_vec};
use proto::commands::messages::{PolledMessages, poll_head_length};
use proto::commands::poll_selector::PollSelector;
use proto::header::PartitionContext;
use proto::primitives::{ConsumerKind, PollingKind, PollingStrategy};
use segment::log::{ReadStart, Records};
use segment::offsets::OffsetOwner;
use segment::storage::Storage;

use std::sync::Arc;

use crate::reply_budget::{ReplyPermits, ReplyRoom};

use super::leases::Lease;
use super::resolve::{offset_owner, resolve_group, resolve_topic};
use super::signal::{Cancel, race};
use super::{DataError, DataPlane, GroupKey, PartitionHandle, PartitionKey};
use crate::metadata::{Metadata, Topic};
use crate::refusal::{Missing, Refusal, Unavailable};

/// Where a read starts for `strategy`, given the consumer's stored offset: Next is the
/// stored offset + 1, or 0 when none is stored.
pub fn read_start(strategy: PollingStrategy, count: u32, stored: Option<u64>) -> ReadStart {
    match strategy.kind {
        PollingKind::Offset => ReadStart::Offset(strategy.value),
        PollingKind::Timestamp => ReadStart::Timestamp(strategy.value),
        PollingKind::First => ReadStart::First,
        PollingKind::Last => ReadStart::Last(count),
        PollingKind::Next => ReadStart::Offset(stored.map_or(0, |offset| offset.saturating_add(1))),
    }
}

/// A poll as the handler received it.
#[derive(Debug, Clone, Copy)]
pub struct PollRequest<'a> {
    pub selector: &'a PollSelector,
    /// The VSR client id of the caller (group membership).
    pub client_id: u128,
    pub dialect: Dialect,
    /// The partition context stamped in the request header (0.12.2; zero for 0.11.0).
    pub context: PartitionContext,
    /// Budget for the reply body, head included.
    pub max_bytes: u64,
}

/// Why a poll is not served as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollRefusal {
    /// Refuse through the header status.
    Status(Refusal),
    /// Answer an empty poll naming this partition (0.11.0 re-sync sentinel `u32::MAX`, or
    /// partition 0 for a group poll without a partition).
    Empty { partition_id: u32 },
}

impl From<Refusal> for PollRefusal {
    fn from(refusal: Refusal) -> Self {
        Self::Status(refusal)
    }
}

/// A poll ready to run.
#[derive(Debug, Clone)]
pub struct PollPlan {
    pub key: PartitionKey,
    pub handle: PartitionHandle,
    pub start: ReadStart,
    pub count: u32,
    /// Budget for the records.
    pub max_bytes: u64,
    /// Whose offset auto-commit stores, when the request asked for it.
    pub auto_commit: Option<OffsetOwner>,
    /// What the reply reports.
    pub context: PartitionContext,
    /// The consumer group polling, whose hand-off rule tracks what it was served.
    pub group: Option<GroupKey>,
    /// The group poll's lease: it counts the poll in flight until the last clone of the
    /// plan is dropped.
    pub lease: Option<Arc<Lease>>,
    /// The polling member's client id (0 for a plain consumer).
    pub poller: u128,
}

/// A poll's result, ready to encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Polled {
    pub partition_id: u32,
    pub current_offset: u64,
    pub context: PartitionContext,
    pub records: Records,
}

impl Polled {
    /// An empty reply naming `partition_id` (see [`PollRefusal::Empty`]).
    pub fn empty(partition_id: u32) -> Self {
        Self {
            partition_id,
            current_offset: 0,
            context: PartitionContext::default(),
            records: Records::default(),
        }
    }

    /// The reply body split in two, without copying the records: the 40-byte (0.12.2) or
    /// 16-byte (0.11.0) head, and the records.
    pub fn into_head_and_records(self, dialect: Dialect) -> (Vec<u8>, Vec<u8>) {
        let mut head = Vec::with_capacity(poll_head_length(dialect));
        self.reply()
            .encode_head(&mut Writer::new(&mut head, dialect));
        (head, self.records.bytes)
    }

    /// The reply body: the 40-byte (0.12.2) or 16-byte (0.11.0) head and the records.
    pub fn encode(&self, dialect: Dialect) -> Vec<u8> {
        encode_to_vec(&self.reply(), dialect)
    }

    fn reply(&self) -> PolledMessages<'_> {
        PolledMessages {
            partition_id: self.partition_id,
            current_offset: self.current_offset,
            messages_count: self.records.messages_count,
            context: self.context,
            records: &self.records.bytes,
        }
    }
}

/// A fetch ready to run: one entry per target, refused targets included.
#[derive(Debug, Clone)]
pub struct FetchPlan {
    pub targets: Vec<FetchTargetPlan>,
    pub min_count: u32,
    pub count: u32,
    pub max_bytes: u64,
    pub wait_us: u64,
}

/// One fetch target: a plan, or the status its section reports.
#[derive(Debug, Clone)]
pub struct FetchTargetPlan {
    pub partition_id: u32,
    pub plan: Result<PollPlan, Refusal>,
    /// The per-target record budget.
    pub max_bytes: u64,
}

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// Resolves a poll: namespace, partition, group ownership, start and auto-commit.
    pub fn plan_poll(
        &self,
        metadata: &Metadata,
        request: &PollRequest<'_>,
    ) -> Result<PollPlan, PollRefusal> {
        let selector = request.selector;
        let (stream_id, topic) = resolve_topic(metadata, &selector.stream_id, &selector.topic_id)?;
        let group = match selector.consumer.kind {
            ConsumerKind::ExternalGroup => {
                return Err(Refusal::Unavailable(Unavailable::Feature).into());
            }
            ConsumerKind::ConsumerGroup => Some(
                resolve_group(topic, &selector.consumer.id)
                    .ok_or(Refusal::Missing(Missing::Group))?,
            ),
            ConsumerKind::Consumer => None,
        };
        let Some(partition_id) = selector.partition.0.or(group.is_none().then_some(0)) else {
            return Err(PollRefusal::Empty { partition_id: 0 });
        };
        let (owner_generation, lease) = match group {
            Some(group_id) => {
                let key = GroupKey {
                    stream_id,
                    topic_id: topic.id,
                    group_id,
                };
                let (generation, lease) = self.check_group_poll(key, partition_id, request)?;
                (generation, Some(Arc::new(lease)))
            }
            None if request.dialect == Dialect::V0_12_2
                && request.context.owner_generation != 0 =>
            {
                return Err(Refusal::NotOwned.into());
            }
            None => (0, None),
        };
        let key = PartitionKey {
            stream_id,
            topic_id: topic.id,
            partition_id,
        };
        let mut plan = self.plan_read(metadata, topic, key, request.context.incarnation)?;
        let owner = offset_owner(topic, &selector.consumer)?;
        plan.start = read_start(
            selector.strategy,
            selector.count,
            plan.handle.stored_offset(owner),
        );
        plan.count = selector.count;
        plan.max_bytes = request
            .max_bytes
            .saturating_sub(poll_head_length(request.dialect) as u64);
        plan.auto_commit = selector.auto_commit.then_some(owner);
        plan.context.owner_generation = owner_generation;
        plan.group = group.map(|group_id| GroupKey {
            stream_id,
            topic_id: topic.id,
            group_id,
        });
        plan.poller = request.client_id;
        plan.lease = lease;
        Ok(plan)
    }

    /// Membership and ownership of a group poll: `5006`/`5009` for 0.12.2, the re-sync
    /// sentinel for 0.11.0. Returns the generation to report and the poll's lease.
    fn check_group_poll(
        &self,
        key: GroupKey,
        partition_id: u32,
        request: &PollRequest<'_>,
    ) -> Result<(u64, Lease), PollRefusal> {
        let checked = self.lease_group_poll(key, request.client_id, partition_id);
        checked.map_err(|refusal| match (request.dialect, refusal) {
            (Dialect::V0_11_0, Refusal::Missing(Missing::Group)) | (Dialect::V0_12_2, _) => {
                PollRefusal::Status(refusal)
            }
            (Dialect::V0_11_0, _) => PollRefusal::Empty {
                partition_id: PolledMessages::RESYNC_PARTITION,
            },
        })
    }

    /// The partition's handle and context; `3007` when unknown, `87` when the stamped
    /// incarnation is stale (0 is accepted: 0.11.0 clients and first requests stamp none).
    pub(super) fn plan_read(
        &self,
        metadata: &Metadata,
        topic: &Topic,
        key: PartitionKey,
        stamped_incarnation: u64,
    ) -> Result<PollPlan, Refusal> {
        let partition = topic
            .partitions
            .get(&key.partition_id)
            .ok_or(Refusal::Missing(Missing::Partition))?;
        if stamped_incarnation != 0 && stamped_incarnation != partition.incarnation {
            return Err(Refusal::Unavailable(Unavailable::History));
        }
        let handle = self
            .partition(key)
            .ok_or(Refusal::Missing(Missing::Partition))?;
        Ok(PollPlan {
            key,
            handle,
            start: ReadStart::First,
            count: 0,
            max_bytes: 0,
            auto_commit: None,
            context: PartitionContext {
                incarnation: partition.incarnation,
                owner_generation: 0,
                metadata_op: metadata.commit,
            },
            group: None,
            lease: None,
            poller: 0,
        })
    }

    /// Runs an immediate poll (100).
    pub async fn poll(&self, plan: &PollPlan) -> Result<Polled, DataError> {
        let records = self.read(plan, plan.count, plan.max_bytes).await?;
        self.serve_group_poll(plan, records.last_offset)?;
        finish(plan, records).await
    }

    /// Ends a group member's poll that read up to `last_offset`: when the member still owns
    /// the partition under the poll's lease (not handing it off), what it was served is
    /// noted and the poll may answer; otherwise the partition moved while the poll read or
    /// waited, and it answers `5009` instead of serving (and committing) what is now another
    /// member's. Plain polls always may.
    pub(super) fn end_group_poll(&self, plan: &PollPlan, last_offset: Option<u64>) -> bool {
        let (Some(group), Some(lease)) = (plan.group, plan.lease.as_ref()) else {
            return true;
        };
        self.finish_lease(
            group,
            lease,
            plan.poller,
            plan.key.partition_id,
            last_offset,
        )
    }

    fn serve_group_poll(&self, plan: &PollPlan, last_offset: Option<u64>) -> Result<(), DataError> {
        if self.end_group_poll(plan, last_offset) {
            Ok(())
        } else {
            Err(DataError::NotOwner)
        }
    }

    /// Runs a deferred poll (106): parks until `min_count` messages are there, `wait_us`
    /// passes or `cancel` fires, then answers with what there is, and with the permits for
    /// `room` that the answer holds until it is handed on (taken for each read, given back
    /// while it waits).
    pub async fn poll_deferred(
        &self,
        plan: &PollPlan,
        (min_count, wait_us): (u32, u64),
        cancel: &Cancel,
        room: &ReplyRoom,
    ) -> Result<(Polled, ReplyPermits), DataError> {
        let deadline = self.clock.now_us().saturating_add(wait_us);
        loop {
            let appended = plan.handle.appended();
            let Some(permit) = self.room_until(room, deadline, cancel).await else {
                // The wait ended while the read waited for memory: answered with nothing.
                self.serve_group_poll(plan, None)?;
                let empty = finish(plan, Records::default()).await;
                return empty.map(|polled| (polled, ReplyPermits::default()));
            };
            let records = self.read(plan, plan.count, plan.max_bytes).await?;
            let now = self.clock.now_us();
            let full = records.messages_count >= min_count || records.byte_budget_reached;
            if full || now >= deadline || cancel.is_cancelled() {
                self.serve_group_poll(plan, records.last_offset)?;
                return finish(plan, records).await.map(|polled| (polled, permit));
            }
            // Nothing held while waiting: what was read is read again after the wait.
            drop((records, permit));
            race(vec![
                Box::pin(appended),
                self.clock.sleep_until(deadline),
                Box::pin(cancel.cancelled()),
            ])
            .await;
        }
    }
}

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// `room`'s permits, or `None` when `deadline` passes or `cancel` fires before there is
    /// room: a waiting read whose wait ended answers with nothing instead of waiting on for
    /// memory (room there already is taken first, whatever the time).
    pub(super) async fn room_until(
        &self,
        room: &ReplyRoom,
        deadline: u64,
        cancel: &Cancel,
    ) -> Option<ReplyPermits> {
        use futures_util::future::{Either, select};
        let ended = race(vec![
            self.clock.sleep_until(deadline),
            Box::pin(cancel.cancelled()),
        ]);
        match select(std::pin::pin!(room.take()), ended).await {
            Either::Left((permits, _)) => Some(permits),
            Either::Right(((), _)) => None,
        }
    }

    /// Reads up to `count` messages and `max_bytes` of the plan's partition, timed.
    pub(super) async fn read(
        &self,
        plan: &PollPlan,
        count: u32,
        max_bytes: u64,
    ) -> Result<Records, DataError> {
        if count == 0 {
            return Ok(Records::default());
        }
        let read = plan.handle.read(plan.start, count, max_bytes);
        let mut records = self
            .timed(|metrics| &metrics.read_us, read)
            .await
            .map_err(|source| DataError::Partition {
                key: plan.key,
                source,
            })?;
        crate::at_rest::open(self.record_key.as_deref(), &mut records).map_err(|source| {
            DataError::Unopenable {
                key: plan.key,
                source,
            }
        })?;
        Ok(records)
    }
}

/// Auto-commits the last returned offset and builds the reply. A group's offset only moves
/// forward: a member's late reply never takes it back past what another committed.
pub(super) async fn finish(plan: &PollPlan, records: Records) -> Result<Polled, DataError> {
    let forward = |owner, last: u64| {
        plan.group.is_none()
            || plan
                .handle
                .stored_offset(owner)
                .is_none_or(|stored| last > stored)
    };
    if let (Some(owner), Some(last)) = (plan.auto_commit, records.last_offset)
        && forward(owner, last)
    {
        plan.handle
            .store_offset(owner, last)
            .await
            .map_err(|source| DataError::Partition {
                key: plan.key,
                source,
            })?;
    }
    Ok(Polled {
        partition_id: plan.key.partition_id,
        current_offset: plan.handle.stats().current_offset,
        context: plan.context,
        records,
    })
}

/// The offset a section reports as `next_offset` when it returned nothing.
pub(super) fn resolved_start(start: ReadStart) -> u64 {
    match start {
        ReadStart::Offset(offset) => offset,
        ReadStart::Timestamp(_) | ReadStart::First | ReadStart::Last(_) => 0,
    }
}

#[cfg(test)]
#[path = "poll_tests.rs"]
mod tests;

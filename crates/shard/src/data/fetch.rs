//! `FETCH_MESSAGES` (109, PROTOCOL.md §4.4.4): a long poll over several partitions of one
//! topic, with `min_count`, `count` and `max_bytes` applying to the sum of all sections and a
//! status per section.

use std::sync::Arc;

use proto::Dialect;
use proto::codec::encode_to_vec;
use proto::commands::messages::{FetchMessages, FetchSection, FetchedMessages};
use proto::header::PartitionContext;
use proto::primitives::ConsumerKind;
use segment::log::Records;
use segment::storage::Storage;

use super::leases::Lease;
use super::poll::{FetchPlan, FetchTargetPlan, read_start, resolved_start};
use super::resolve::{offset_owner, resolve_group, resolve_topic};
use super::signal::{Cancel, Waiting, race};
use super::{DataError, DataPlane, GroupKey, PartitionKey};
use crate::metadata::Metadata;
use crate::refusal::{Missing, Refusal, Unavailable};
use crate::reply_budget::{ReplyPermits, ReplyRoom};

/// One section of a fetch reply, owning its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSectionOwned {
    pub partition_id: u32,
    /// 0, or the `Refusal` of this partition.
    pub status: u32,
    pub current_offset: u64,
    pub context: PartitionContext,
    pub next_offset: u64,
    pub records: Records,
}

/// A fetch's result, ready to encode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetched {
    pub sections: Vec<FetchSectionOwned>,
}

impl Fetched {
    pub fn messages_count(&self) -> u64 {
        self.sections
            .iter()
            .map(|section| u64::from(section.records.messages_count))
            .sum()
    }

    /// The reply body: the section table, then every section's records.
    pub fn encode(&self) -> Vec<u8> {
        let reply = FetchedMessages {
            sections: self
                .sections
                .iter()
                .map(|section| FetchSection {
                    partition_id: section.partition_id,
                    status: section.status,
                    current_offset: section.current_offset,
                    messages_count: section.records.messages_count,
                    context: section.context,
                    next_offset: section.next_offset,
                    records: &section.records.bytes,
                })
                .collect(),
        };
        encode_to_vec(&reply, Dialect::V0_12_2)
    }
}

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// Resolves a fetch. Namespace and consumer errors refuse the whole request; partition,
    /// incarnation and ownership errors become section statuses.
    pub fn plan_fetch(
        &self,
        metadata: &Metadata,
        request: &FetchMessages,
        client_id: u128,
    ) -> Result<FetchPlan, Refusal> {
        let (stream_id, topic) = resolve_topic(metadata, &request.stream_id, &request.topic_id)?;
        let group = match request.consumer.kind {
            ConsumerKind::ExternalGroup => return Err(Refusal::Unavailable(Unavailable::Feature)),
            ConsumerKind::ConsumerGroup => Some(GroupKey {
                stream_id,
                topic_id: topic.id,
                group_id: resolve_group(topic, &request.consumer.id)
                    .ok_or(Refusal::Missing(Missing::Group))?,
            }),
            ConsumerKind::Consumer => None,
        };
        let owner = offset_owner(topic, &request.consumer)?;
        let mut targets = Vec::with_capacity(request.targets.len());
        for target in &request.targets {
            let key = PartitionKey {
                stream_id,
                topic_id: topic.id,
                partition_id: target.partition_id,
            };
            let plan = self
                .fetch_lease(group, client_id, target.partition_id)
                .and_then(|(generation, lease)| {
                    if group.is_none() && target.owner_generation != 0 {
                        return Err(Refusal::NotOwned);
                    }
                    let mut plan = self.plan_read(metadata, topic, key, target.incarnation)?;
                    let stored = plan.handle.stored_offset(owner);
                    plan.start = read_start(target.strategy, request.count, stored);
                    plan.auto_commit = request.auto_commit.then_some(owner);
                    plan.context.owner_generation = generation;
                    plan.group = group;
                    plan.poller = client_id;
                    plan.lease = lease.map(Arc::new);
                    Ok(plan)
                });
            targets.push(FetchTargetPlan {
                partition_id: target.partition_id,
                plan,
                max_bytes: u64::from(target.max_bytes).min(super::REPLY_RECORD_BYTES_MAX),
            });
        }
        Ok(FetchPlan {
            targets,
            min_count: request.min_count,
            count: request.count,
            max_bytes: u64::from(request.max_bytes).min(super::REPLY_RECORD_BYTES_MAX),
            wait_us: request.wait_us,
        })
    }

    /// A fetch section's group check: the generation to report and the section's lease
    /// (none for a plain consumer).
    fn fetch_lease(
        &self,
        group: Option<GroupKey>,
        client_id: u128,
        partition_id: u32,
    ) -> Result<(u64, Option<Lease>), Refusal> {
        let Some(key) = group else {
            return Ok((0, None));
        };
        let (generation, lease) = self.lease_group_poll(key, client_id, partition_id)?;
        Ok((generation, Some(lease)))
    }

    /// Runs a fetch: parks until `min_count` messages over all sections are there, the wait
    /// passes or `cancel` fires; then auto-commits and answers, with the permits for `room`
    /// that the answer holds until it is handed on (taken for each read, given back while it
    /// waits).
    pub async fn fetch(
        &self,
        plan: &FetchPlan,
        cancel: &Cancel,
        room: &ReplyRoom,
    ) -> Result<(Fetched, ReplyPermits), DataError> {
        let deadline = self.clock.now_us().saturating_add(plan.wait_us);
        loop {
            let mut waits: Vec<Waiting<'_>> = plan
                .targets
                .iter()
                .filter_map(|target| target.plan.as_ref().ok())
                .map(|plan| -> Waiting<'_> { Box::pin(plan.handle.appended()) })
                .collect();
            // The wait ended while the read waited for memory: answered with nothing read.
            let (permit, reading) = match self.room_until(room, deadline, cancel).await {
                Some(permit) => (permit, true),
                None => (ReplyPermits::default(), false),
            };
            let mut fetched = match read_sections(self, plan, reading).await {
                Ok(fetched) => fetched,
                Err(error) => {
                    self.end_group_polls(plan, None);
                    return Err(error);
                }
            };
            let enough = fetched.messages_count() >= u64::from(plan.min_count);
            if enough || !reading || self.clock.now_us() >= deadline || cancel.is_cancelled() {
                self.end_group_polls(plan, Some(&mut fetched));
                commit(plan, &fetched).await?;
                return Ok((fetched, permit));
            }
            // Nothing held while waiting: what was read is read again after the wait.
            drop((fetched, permit));
            waits.push(self.clock.sleep_until(deadline));
            waits.push(Box::pin(cancel.cancelled()));
            race(waits).await;
        }
    }
}

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// Ends every section's group poll; a section whose partition moved to another member
    /// while the fetch waited is refused with `5009` instead of served (and committed).
    fn end_group_polls(&self, plan: &FetchPlan, mut fetched: Option<&mut Fetched>) {
        for (index, target) in plan.targets.iter().enumerate() {
            let Ok(poll) = &target.plan else { continue };
            let section = fetched
                .as_deref_mut()
                .and_then(|fetched| fetched.sections.get_mut(index));
            let last = section
                .as_ref()
                .and_then(|section| section.records.last_offset);
            if !self.end_group_poll(poll, last)
                && let Some(section) = section
            {
                *section = refused(target.partition_id, Refusal::NotOwned);
            }
        }
    }
}

/// Reads every section once, within the request's total count and byte budget.
async fn read_sections<S: Storage + Clone + 'static>(
    data: &DataPlane<S>,
    plan: &FetchPlan,
    reading: bool,
) -> Result<Fetched, DataError> {
    let mut fetched = Fetched::default();
    // Not `reading`: every section as it stands, with no records.
    let count = if reading { plan.count } else { 0 };
    let (mut count_left, mut bytes_left) = (count, plan.max_bytes);
    for target in &plan.targets {
        let poll = match &target.plan {
            Ok(poll) => poll,
            Err(refusal) => {
                fetched
                    .sections
                    .push(refused(target.partition_id, *refusal));
                continue;
            }
        };
        let budget = target.max_bytes.min(bytes_left);
        let mut records = if count_left == 0 || budget == 0 {
            Records::default()
        } else {
            data.read(poll, count_left, budget).await?
        };
        let bytes = records.bytes.len() as u64;
        let anything_before = bytes_left < plan.max_bytes;
        if bytes > bytes_left && anything_before {
            // Only the first record of the whole reply may go over the budget.
            records = Records::default();
        }
        count_left = count_left.saturating_sub(records.messages_count);
        bytes_left = bytes_left.saturating_sub(records.bytes.len() as u64);
        let next_offset = records
            .last_offset
            .map_or(resolved_start(poll.start), |last| last.saturating_add(1));
        fetched.sections.push(FetchSectionOwned {
            partition_id: target.partition_id,
            status: 0,
            current_offset: poll.handle.stats().current_offset,
            context: poll.context,
            next_offset,
            records,
        });
    }
    Ok(fetched)
}

fn refused(partition_id: u32, refusal: Refusal) -> FetchSectionOwned {
    FetchSectionOwned {
        partition_id,
        status: refusal.code().as_u32(),
        current_offset: 0,
        context: PartitionContext::default(),
        next_offset: 0,
        records: Records::default(),
    }
}

async fn commit(plan: &FetchPlan, fetched: &Fetched) -> Result<(), DataError> {
    for (target, section) in plan.targets.iter().zip(&fetched.sections) {
        let Ok(poll) = &target.plan else { continue };
        // A group's offset only moves forward (as in `poll::finish`).
        let backward = |owner, last: u64| {
            poll.group.is_some()
                && poll
                    .handle
                    .stored_offset(owner)
                    .is_some_and(|stored| last <= stored)
        };
        if let (Some(owner), Some(last)) = (poll.auto_commit, section.records.last_offset)
            && !backward(owner, last)
        {
            poll.handle
                .store_offset(owner, last)
                .await
                .map_err(|source| DataError::Partition {
                    key: poll.key,
                    source,
                })?;
        }
    }
    Ok(())
}

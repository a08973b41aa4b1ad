//! Consumer offsets (120–122, PROTOCOL.md §4.5): get, store and delete through the partition
//! task's [`segment::offsets::ConsumerOffsets`], with the reference refusals: `4100` for an
//! offset past the head or on an empty partition, `3021` for deleting nothing, `3007`, `5000`.

use proto::commands::offsets::{ConsumerOffset, OffsetSelector};
use proto::primitives::ConsumerKind;
use segment::offsets::OffsetOwner;
use segment::storage::Storage;

use super::resolve::{offset_owner, resolve_topic};
use super::{DataError, DataPlane, GroupKey, PartitionHandle, PartitionKey};
use crate::metadata::Metadata;
use crate::refusal::{Invalid, Missing, Refusal};

/// An offset write ready to run.
#[derive(Debug, Clone)]
pub struct OffsetRequest {
    pub key: PartitionKey,
    pub handle: PartitionHandle,
    pub owner: OffsetOwner,
}

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// `GET_CONSUMER_OFFSET` (120): `Ok(None)` is the empty reply (nothing stored, or an
    /// unknown group, as the reference answers).
    pub fn get_offset(
        &self,
        metadata: &Metadata,
        selector: &OffsetSelector,
    ) -> Result<Option<ConsumerOffset>, Refusal> {
        let target = match self.resolve_offset(metadata, selector) {
            Ok(target) => target,
            Err(Refusal::Missing(Missing::Group)) => return Ok(None),
            Err(refusal) => return Err(refusal),
        };
        Ok(target
            .handle
            .stored_offset(target.owner)
            .map(|stored_offset| ConsumerOffset {
                partition_id: target.key.partition_id,
                current_offset: target.handle.stats().current_offset,
                stored_offset,
            }))
    }

    /// Checks a `STORE_CONSUMER_OFFSET` (121) of `offset`.
    pub fn plan_store_offset(
        &self,
        metadata: &Metadata,
        selector: &OffsetSelector,
        offset: u64,
    ) -> Result<OffsetRequest, Refusal> {
        let target = self.resolve_offset(metadata, selector)?;
        let stats = target.handle.stats();
        if stats.is_empty() || offset > stats.current_offset {
            return Err(Refusal::Invalid(Invalid::Offset));
        }
        Ok(target)
    }

    /// Checks a `DELETE_CONSUMER_OFFSET` (122).
    pub fn plan_delete_offset(
        &self,
        metadata: &Metadata,
        selector: &OffsetSelector,
    ) -> Result<OffsetRequest, Refusal> {
        let target = self.resolve_offset(metadata, selector)?;
        if target.handle.stored_offset(target.owner).is_none() {
            return Err(Refusal::Missing(Missing::ConsumerOffset));
        }
        Ok(target)
    }

    /// Checks that `client_id` may write the offset `request` plans: a consumer group's
    /// offset is written by its members, for the partitions they own
    /// ([`super::leases::GroupView::may_commit`]), as the reference checks. A member that lost
    /// the partition, or a client that never joined, would otherwise move the offset under
    /// its new owner: back, and the owner's SDK drops what it reads again as seen, for good;
    /// forward, and messages are skipped. The same offsets written as an external group's
    /// (kind 3, which names the same slot) are the client's own only while the group has no
    /// member to disturb (`5006` otherwise).
    pub fn check_offset_writer(
        &self,
        selector: &OffsetSelector,
        request: &OffsetRequest,
        client_id: u128,
    ) -> Result<(), Refusal> {
        let OffsetOwner::Group(group_id) = request.owner else {
            return Ok(());
        };
        let key = GroupKey {
            stream_id: request.key.stream_id,
            topic_id: request.key.topic_id,
            group_id,
        };
        match selector.consumer.kind {
            ConsumerKind::ConsumerGroup => self
                .group_view(key)?
                .may_commit(client_id, request.key.partition_id),
            ConsumerKind::ExternalGroup => match self.group_view(key) {
                Ok(view) if !view.members.is_empty() => Err(Refusal::Missing(Missing::GroupMember)),
                _ => Ok(()),
            },
            ConsumerKind::Consumer => Ok(()),
        }
    }

    pub async fn store_offset(
        &self,
        request: &OffsetRequest,
        offset: u64,
    ) -> Result<(), DataError> {
        request
            .handle
            .store_offset(request.owner, offset)
            .await
            .map_err(|source| DataError::Partition {
                key: request.key,
                source,
            })
    }

    /// Deletes the offset; `false` when another request deleted it first (answer `3021`).
    pub async fn delete_offset(&self, request: &OffsetRequest) -> Result<bool, DataError> {
        request
            .handle
            .delete_offset(request.owner)
            .await
            .map_err(|source| DataError::Partition {
                key: request.key,
                source,
            })
    }

    /// Namespace, partition (absent = 0) and slot of an offset request.
    fn resolve_offset(
        &self,
        metadata: &Metadata,
        selector: &OffsetSelector,
    ) -> Result<OffsetRequest, Refusal> {
        let (stream_id, topic) = resolve_topic(metadata, &selector.stream_id, &selector.topic_id)?;
        let owner = offset_owner(topic, &selector.consumer)?;
        let key = PartitionKey {
            stream_id,
            topic_id: topic.id,
            partition_id: selector.partition.0.unwrap_or(0),
        };
        if !topic.partitions.contains_key(&key.partition_id) {
            return Err(Refusal::Missing(Missing::Partition));
        }
        let handle = self
            .partition(key)
            .ok_or(Refusal::Missing(Missing::Partition))?;
        Ok(OffsetRequest { key, handle, owner })
    }
}

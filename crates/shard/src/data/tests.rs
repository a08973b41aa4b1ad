//! Data-plane tests over memory storage on a compio runtime: partitions follow metadata ops,
//! send / poll / offsets / groups end to end without a socket.

use std::collections::BTreeMap;
use std::path::Path;

use proto::batch::{Batch, OutgoingMessage, Producer, encode_batch};
use proto::codec::decode_exact;
use proto::commands::messages::{PolledMessages, SendMessages};
use proto::commands::offsets::OffsetSelector;
use proto::commands::poll_selector::PollSelector;
use proto::header::PartitionContext;
use proto::primitives::{
    Consumer, ConsumerKind, Identifier, OptionalPartition, Partitioning, PollingStrategy,
};
use proto::{Dialect, batch::Integrity};
use segment::storage::memory::MemoryStorage;

use super::*;
use crate::metadata::{ConsumerGroup, Partition, Stream, TopicSettings};
use crate::refusal::{Invalid, Missing, Refusal, StorageFault, Unavailable};
use proto::primitives::OptionsBlock;

pub(crate) fn metadata(partitions: u32, groups: &[u32]) -> Metadata {
    let topic = Topic {
        id: 0,
        name: "t".into(),
        created_at: 0,
        options: OptionsBlock::default(),
        settings: TopicSettings::default(),
        partitions: (0..partitions)
            .map(|id| {
                let partition = Partition {
                    id,
                    created_at: 0,
                    incarnation: u64::from(id) + 1,
                };
                (id, partition)
            })
            .collect(),
        groups: groups
            .iter()
            .map(|id| {
                let group = ConsumerGroup {
                    id: *id,
                    name: format!("g{id}"),
                    created_at: 0,
                };
                (*id, group)
            })
            .collect(),
        next_group_id: 0,
    };
    let stream = Stream {
        id: 0,
        name: "s".into(),
        created_at: 0,
        options: OptionsBlock::default(),
        topics: BTreeMap::from([(0, topic)]),
    };
    Metadata {
        streams: BTreeMap::from([(0, stream)]),
        users: BTreeMap::new(),
        commit: 7,
    }
}

pub(crate) fn plane(storage: &MemoryStorage) -> DataPlane<MemoryStorage> {
    DataPlane::with_storage(storage.clone(), "/data".into(), GroupConfig::default())
}

pub(crate) fn runtime() -> compio::runtime::Runtime {
    compio::runtime::Runtime::new().unwrap()
}

pub(crate) fn send_request(bytes: &[u8], partitioning: Partitioning) -> SendMessages<'_> {
    SendMessages {
        stream_id: Identifier::Numeric(0),
        topic_id: Identifier::Numeric(0),
        partitioning,
        batch: Batch::parse(bytes, Dialect::V0_12_2, Integrity::Full, 0).unwrap(),
        batch_offset: 0,
    }
}

pub(crate) fn poll_selector(
    kind: ConsumerKind,
    partition: Option<u32>,
    count: u32,
) -> PollSelector {
    PollSelector {
        consumer: Consumer {
            kind,
            id: Identifier::Numeric(0),
        },
        stream_id: Identifier::Numeric(0),
        topic_id: Identifier::Numeric(0),
        partition: OptionalPartition(partition),
        strategy: PollingStrategy::next(),
        count,
        auto_commit: true,
    }
}

pub(crate) fn request(selector: &PollSelector, client_id: u128) -> PollRequest<'_> {
    PollRequest {
        selector,
        client_id,
        dialect: Dialect::V0_12_2,
        context: PartitionContext::default(),
        max_bytes: 1 << 20,
    }
}

pub(crate) async fn send(plane: &DataPlane<MemoryStorage>, meta: &Metadata, count: usize) {
    let bytes = batch(count, None);
    let plan = plane
        .plan_send(meta, &send_request(&bytes, Partitioning::Balanced), 0)
        .unwrap();
    plane.send(&plan, bytes.clone().into(), 1).await.unwrap();
}

#[test]
fn a_partition_that_cannot_be_opened_leaves_the_others_served_and_is_retried() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        // Start-up on a disk that refuses every change: the server still starts.
        storage.fail_after(Some(0));
        let plane = plane(&storage);
        plane.open_all(&metadata(2, &[])).await.unwrap();
        assert_eq!(plane.totals(None, None).partitions_count, 0);
        storage.fail_after(None);
        plane
            .retry_unopened(u64::MAX, || metadata(2, &[]).into())
            .await;
        assert_eq!(plane.totals(None, None).partitions_count, 2);
        // A new partition fails to open: the commit's error names it, the open ones stay.
        storage.fail_after(Some(0));
        let grown = metadata(3, &[]);
        let op = MetadataOp::CreatePartitions {
            stream_id: 0,
            topic_id: 0,
            count: 1,
            created_at: 0,
        };
        let failed = plane.on_applied(&op, &grown).await;
        assert!(
            matches!(failed, Err(DataError::Partition { key, .. }) if key.partition_id == 2),
            "{failed:?}"
        );
        assert_eq!(plane.totals(None, None).partitions_count, 2);
        assert!(
            plane
                .partition(PartitionKey {
                    stream_id: 0,
                    topic_id: 0,
                    partition_id: 0
                })
                .is_some()
        );
        // Not retried before its wait, which grows with each failed try.
        let first = plane.unopened_retry.get().unwrap();
        // Another change meanwhile is not refused for it, and leaves its retry as it was.
        let group = MetadataOp::CreateConsumerGroup {
            stream_id: 0,
            topic_id: 0,
            id: 1,
            name: "readers".to_owned(),
            created_at: 0,
        };
        plane.on_applied(&group, &grown).await.unwrap();
        assert_eq!(plane.unopened_retry.get(), Some(first));
        plane
            .retry_unopened(first.at_us - 1, || grown.clone().into())
            .await;
        assert_eq!(plane.unopened_retry.get(), Some(first));
        plane
            .retry_unopened(first.at_us, || grown.clone().into())
            .await;
        let second = plane.unopened_retry.get().unwrap();
        assert_eq!(second.wait_us, 2 * first.wait_us);
        assert_eq!(plane.totals(None, None).partitions_count, 2);
        // Opened at the next retry once the disk takes changes again.
        storage.fail_after(None);
        plane
            .retry_unopened(second.at_us, || grown.clone().into())
            .await;
        assert_eq!(plane.totals(None, None).partitions_count, 3);
        assert_eq!(plane.unopened_retry.get(), None);
        // All open: a retry has nothing to do, whatever the metadata says.
        plane
            .retry_unopened(u64::MAX, || metadata(5, &[]).into())
            .await;
        assert_eq!(plane.totals(None, None).partitions_count, 3);
    });
}

#[test]
fn partitions_follow_metadata_ops() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let plane = plane(&storage);
        plane.open_all(&metadata(2, &[])).await.unwrap();
        assert_eq!(plane.totals(None, None).partitions_count, 2);
        let grown = metadata(3, &[]);
        let op = MetadataOp::CreatePartitions {
            stream_id: 0,
            topic_id: 0,
            count: 1,
            created_at: 0,
        };
        plane.on_applied(&op, &grown).await.unwrap();
        assert_eq!(plane.totals(Some(0), Some(0)).partitions_count, 3);
        let mut shrunk = metadata(1, &[]);
        plane
            .on_applied(
                &MetadataOp::DeletePartitions {
                    stream_id: 0,
                    topic_id: 0,
                    count: 2,
                },
                &shrunk,
            )
            .await
            .unwrap();
        assert_eq!(plane.totals(None, None).partitions_count, 1);
        let gone = partition_directory(Path::new("/data"), 0, 0, 2);
        assert!(!storage.exists(&gone).await);
        shrunk.streams.clear();
        plane
            .on_applied(&MetadataOp::DeleteStream { id: 0 }, &shrunk)
            .await
            .unwrap();
        assert_eq!(plane.totals(None, None), Totals::default());
        assert!(!storage.exists(Path::new("/data/streams/0")).await);
        plane.close().await.unwrap();
    });
}

#[test]
fn send_poll_auto_commit_and_offsets() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let plane = plane(&storage);
        let meta = metadata(2, &[]);
        plane.open_all(&meta).await.unwrap();
        for _ in 0..4 {
            send(&plane, &meta, 3).await;
        }
        let stats = plane.partition_stats(key(0)).unwrap();
        assert_eq!((stats.messages_count, stats.current_offset), (6, 5));
        assert_eq!(plane.totals(None, None).messages_count, 12);

        let selector = poll_selector(ConsumerKind::Consumer, Some(0), 4);
        let plan = plane.plan_poll(&meta, &request(&selector, 1)).unwrap();
        assert_eq!(plan.start, segment::log::ReadStart::Offset(0));
        let polled = plane.poll(&plan).await.unwrap();
        assert_eq!(polled.records.messages_count, 4);
        assert_eq!(polled.context.incarnation, 1);
        let body = polled.encode(Dialect::V0_12_2);
        let decoded = decode_exact::<PolledMessages<'_>>(&body, Dialect::V0_12_2).unwrap();
        assert_eq!((decoded.messages_count, decoded.current_offset), (4, 5));
        assert_eq!(polled.encode(Dialect::V0_11_0).len(), body.len() - 24);
        for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
            let whole = polled.encode(dialect);
            let (mut head, records) = polled.clone().into_head_and_records(dialect);
            assert_eq!(
                head.len(),
                proto::commands::messages::poll_head_length(dialect)
            );
            head.extend_from_slice(&records);
            assert_eq!(head, whole, "head + records is the body, {dialect:?}");
        }

        let offsets = OffsetSelector {
            consumer: selector.consumer.clone(),
            stream_id: Identifier::Numeric(0),
            topic_id: Identifier::Numeric(0),
            partition: OptionalPartition(Some(0)),
        };
        let stored = plane.get_offset(&meta, &offsets).unwrap().unwrap();
        assert_eq!((stored.stored_offset, stored.current_offset), (3, 5));
        let next = plane.plan_poll(&meta, &request(&selector, 1)).unwrap();
        assert_eq!(next.start, segment::log::ReadStart::Offset(4));

        assert_eq!(
            plane.plan_store_offset(&meta, &offsets, 6).err(),
            Some(Refusal::Invalid(Invalid::Offset))
        );
        let store = plane.plan_store_offset(&meta, &offsets, 5).unwrap();
        plane.store_offset(&store, 5).await.unwrap();
        let delete = plane.plan_delete_offset(&meta, &offsets).unwrap();
        assert!(plane.delete_offset(&delete).await.unwrap());
        assert_eq!(
            plane.plan_delete_offset(&meta, &offsets).err(),
            Some(Refusal::Missing(Missing::ConsumerOffset))
        );
        let mut empty_partition = offsets.clone();
        empty_partition.partition = OptionalPartition(Some(9));
        assert_eq!(
            plane.get_offset(&meta, &empty_partition),
            Err(Refusal::Missing(Missing::Partition))
        );
        plane.purge(0, Some(0)).await.unwrap();
        assert_eq!(plane.totals(None, None).messages_count, 0);
    });
}

#[test]
fn send_refusals_and_key_partitioning() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let plane = plane(&storage);
        let meta = metadata(3, &[]);
        plane.open_all(&meta).await.unwrap();
        let bytes = batch(1, None);
        let refused = |partitioning, incarnation| {
            plane
                .plan_send(&meta, &send_request(&bytes, partitioning), incarnation)
                .err()
        };
        assert_eq!(
            refused(Partitioning::PartitionId(3), 0),
            Some(Refusal::Missing(Missing::Partition))
        );
        assert_eq!(
            refused(Partitioning::PartitionId(1), 9),
            Some(Refusal::Unavailable(Unavailable::History))
        );
        assert_eq!(refused(Partitioning::PartitionId(1), 2), None);
        let key_bytes = proto::codec::ShortBytes::new(b"key".to_vec()).unwrap();
        let expected = xxhash_rust::xxh32::xxh32(b"key", 0) % 3;
        let plan = plane
            .plan_send(
                &meta,
                &send_request(&bytes, Partitioning::MessagesKey(key_bytes)),
                0,
            )
            .unwrap();
        assert_eq!(plan.key.partition_id, expected);
        let producer = Producer {
            producer_id: 1,
            epoch: 0,
            base_sequence: 0,
        };
        let with_producer = batch(1, Some(producer));
        let balanced = send_request(&with_producer, Partitioning::Balanced);
        assert_eq!(
            plane.plan_send(&meta, &balanced, 0).err(),
            Some(Refusal::Invalid(Invalid::ProducerPartitioning))
        );
    });
}

/// A plane over two partitions with consumer group 0 and one message sent.
async fn grouped(storage: &MemoryStorage) -> (DataPlane<MemoryStorage>, Metadata, GroupKey) {
    let plane = plane(storage);
    let meta = metadata(2, &[0]);
    plane.open_all(&meta).await.unwrap();
    send(&plane, &meta, 1).await;
    let group = GroupKey {
        stream_id: 0,
        topic_id: 0,
        group_id: 0,
    };
    (plane, meta, group)
}

#[test]
fn group_polls_check_membership_and_ownership() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let (plane, meta, group) = grouped(&storage).await;
        let selector = poll_selector(ConsumerKind::ConsumerGroup, Some(1), 10);
        let refusal = plane.plan_poll(&meta, &request(&selector, 5)).err();
        assert_eq!(
            refusal,
            Some(PollRefusal::Status(Refusal::Missing(Missing::GroupMember)))
        );
        let mut legacy = request(&selector, 5);
        legacy.dialect = Dialect::V0_11_0;
        assert_eq!(
            plane.plan_poll(&meta, &legacy).err(),
            Some(PollRefusal::Empty {
                partition_id: u32::MAX
            })
        );
        plane.change_group(group, |group| group.join(5, 0)).unwrap();
        plane.change_group(group, |group| group.join(6, 0)).unwrap();
        // Member 5 was served nothing, so partition 1 moved to member 6 at once.
        let assigned = plane
            .change_group(group, |group| group.sync(6, 0, &GroupConfig::default()))
            .unwrap();
        assert_eq!(assigned, Some(vec![1]));
        assert_eq!(
            plane.plan_poll(&meta, &request(&selector, 5)).err(),
            Some(PollRefusal::Status(Refusal::NotOwned))
        );
        let plan = plane.plan_poll(&meta, &request(&selector, 6)).unwrap();
        assert_eq!(
            plan.auto_commit,
            Some(segment::offsets::OffsetOwner::Group(0))
        );
        assert!(plan.context.owner_generation > 0);
        let no_partition = poll_selector(ConsumerKind::ConsumerGroup, None, 10);
        assert_eq!(
            plane.plan_poll(&meta, &request(&no_partition, 6)).err(),
            Some(PollRefusal::Empty { partition_id: 0 })
        );
        plane.leave_all_groups(6, 1);
        assert_eq!(
            plane.with_group(group, GroupRuntime::members_count),
            Some(1)
        );
        plane
            .on_applied(
                &MetadataOp::DeleteConsumerGroup {
                    stream_id: 0,
                    topic_id: 0,
                    id: 0,
                },
                &metadata(2, &[]),
            )
            .await
            .unwrap();
        assert_eq!(plane.with_group(group, GroupRuntime::generation), None);
    });
}

/// A consumer group's offset is written by the member that owns the partition: a client
/// that never joined, or a member the partition moved away from, is refused (it would move
/// the offset under the new owner). An external group's offsets are anyone's.
#[test]
fn a_group_offset_is_written_by_the_partition_owner_only() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let (plane, meta, group) = grouped(&storage).await;
        // The message went to partition 0; partition 1 is empty (nothing to store).
        let selector = poll_selector(ConsumerKind::ConsumerGroup, Some(0), 10);
        let offsets = OffsetSelector {
            consumer: selector.consumer.clone(),
            stream_id: Identifier::Numeric(0),
            topic_id: Identifier::Numeric(0),
            partition: OptionalPartition(Some(0)),
        };
        let plan = plane.plan_store_offset(&meta, &offsets, 0).unwrap();
        let writer = |client_id| plane.check_offset_writer(&offsets, &plan, client_id);
        assert_eq!(writer(5), Err(Refusal::Missing(Missing::GroupMember)));
        plane.change_group(group, |group| group.join(5, 0)).unwrap();
        assert_eq!(writer(5), Ok(()));
        plane.change_group(group, |group| group.join(6, 0)).unwrap();
        // Member 5 was served nothing, so partition 1 moved to member 6 at once; 0 stays.
        let config = GroupConfig::default();
        let moved = plane.change_group(group, |group| group.sync(6, 0, &config));
        assert_eq!(moved.unwrap(), Some(vec![1]));
        assert_eq!(writer(5), Ok(()));
        assert_eq!(writer(6), Err(Refusal::NotOwned));
        plane.leave_all_groups(5, 1);
        plane.change_group(group, |group| group.sync(6, 1, &config));
        assert_eq!(writer(5), Err(Refusal::Missing(Missing::GroupMember)));
        assert_eq!(writer(6), Ok(()), "partition 0 moved to the member left");
        let delete = plane.plan_store_offset(&meta, &offsets, 0).unwrap();
        assert_eq!(
            plane.check_offset_writer(&offsets, &delete, 7),
            Err(Refusal::Missing(Missing::GroupMember))
        );
        // As an external group, the same slot: not while the group has a member.
        let mut external = offsets.clone();
        external.consumer.kind = ConsumerKind::ExternalGroup;
        let plan = plane.plan_store_offset(&meta, &external, 0).unwrap();
        assert_eq!(
            plane.check_offset_writer(&external, &plan, 7),
            Err(Refusal::Missing(Missing::GroupMember))
        );
        plane.leave_all_groups(6, 2);
        assert_eq!(plane.check_offset_writer(&external, &plan, 7), Ok(()));
    });
}

#[test]
fn a_waiting_hand_off_completes_at_the_first_check_after_its_poll_ends() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let (plane, meta, group) = grouped(&storage).await;
        plane.change_group(group, |group| group.join(5, 0)).unwrap();
        // Member 5 is polling partition 1 when member 6 joins: the partition waits.
        let selector = poll_selector(ConsumerKind::ConsumerGroup, Some(1), 10);
        let polling = plane.plan_poll(&meta, &request(&selector, 5)).unwrap();
        // The plane's clock is the system's: the hand-off's wait is measured from now.
        let now = plane.clock.now_us();
        plane
            .change_group(group, |group| group.join(6, now))
            .unwrap();
        assert_eq!(
            plane.with_group(group, GroupRuntime::is_handing_off),
            Some(true)
        );
        // A check while the poll runs completes nothing and publishes nothing new.
        let before = plane.group_views.pin().get(&group).cloned().unwrap();
        assert!(plane.tick_groups(now + 1).is_empty());
        let after = plane.group_views.pin().get(&group).cloned().unwrap();
        assert!(Arc::ptr_eq(&before, &after));
        // The poll ends having served nothing: the next check moves the partition.
        drop(polling);
        assert_eq!(plane.tick_groups(now + 2), vec![group]);
        let view = plane.group_views.pin().get(&group).cloned().unwrap();
        assert!(view.generation > before.generation);
        assert_eq!(
            plane.with_group(group, GroupRuntime::is_handing_off),
            Some(false)
        );
        assert_eq!(
            plane.with_group(group, |group| group.owner(1).map(|o| o.owner)),
            Some(Some(6))
        );
    });
}

/// Sends a batch of `count` messages to partition `partition_id`.
async fn send_to<S: Storage + Clone + 'static>(
    plane: &DataPlane<S>,
    meta: &Metadata,
    partition_id: u32,
    count: usize,
) -> Result<u64, DataError> {
    let bytes = batch(count, None);
    let request = send_request(&bytes, Partitioning::PartitionId(partition_id));
    let plan = plane.plan_send(meta, &request, 0).unwrap();
    let confirmed = plane.send(&plan, bytes.clone().into(), 1).await?;
    Ok(confirmed.0[0].base_offset)
}

async fn poll_all<S: Storage + Clone + 'static>(
    plane: &DataPlane<S>,
    meta: &Metadata,
    partition_id: u32,
) -> u32 {
    let selector = poll_selector(ConsumerKind::Consumer, Some(partition_id), 100);
    let plan = plane.plan_poll(meta, &request(&selector, 1)).unwrap();
    plane.poll(&plan).await.unwrap().records.messages_count
}

#[test]
fn a_quarantined_partition_refuses_sends_while_its_sibling_serves() {
    let root = std::env::temp_dir().join(format!("shard-data-quarantine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let meta = metadata(2, &[]);
    let open = || {
        let storage = segment::storage::compio::CompioStorage::new();
        DataPlane::with_storage(storage, root.clone(), GroupConfig::default())
    };
    runtime().block_on(async {
        let plane = open();
        plane.open_all(&meta).await.unwrap();
        for partition_id in [0, 1] {
            for _ in 0..3 {
                send_to(&plane, &meta, partition_id, 2).await.unwrap();
            }
        }
        plane.close().await.unwrap();
    });
    // A payload byte of partition 0's second record goes bad while the server is down.
    let directory = partition_directory(&root, 0, 0, 0);
    let log = segment::layout::SegmentPaths::new(&directory, 0).log;
    let mut bytes = std::fs::read(&log).unwrap();
    let record = batch(2, None).len();
    bytes[record + 256 + 48] ^= 0x01;
    std::fs::write(&log, &bytes).unwrap();
    runtime().block_on(async {
        let plane = open();
        plane.open_all(&meta).await.unwrap();
        assert_eq!(plane.quarantined(), [key(0)]);
        let refused = send_to(&plane, &meta, 0, 1).await.unwrap_err();
        assert_eq!(
            refused.refusal(),
            Refusal::Storage(StorageFault::CannotAppend),
            "{refused}"
        );
        assert_eq!(
            poll_all(&plane, &meta, 0).await,
            2,
            "the record before the damage"
        );
        assert_eq!(send_to(&plane, &meta, 1, 2).await.unwrap(), 6);
        assert_eq!(poll_all(&plane, &meta, 1).await, 8);
        plane.close().await.unwrap();
    });
    assert_eq!(
        std::fs::read(&log).unwrap(),
        bytes,
        "the damaged file is kept"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_stored_record_that_fails_its_checksums_is_never_served_when_validate_checksum_is_on() {
    for validate_checksum in [true, false] {
        let storage = MemoryStorage::new();
        runtime().block_on(async {
            let plane = plane(&storage).with_validate_checksum(validate_checksum);
            let meta = metadata(1, &[]);
            plane.open_all(&meta).await.unwrap();
            send_to(&plane, &meta, 0, 2).await.unwrap();
            let directory = partition_directory(Path::new("/data"), 0, 0, 0);
            let log = segment::layout::SegmentPaths::new(&directory, 0).log;
            let mut bytes = storage.contents(&log).unwrap();
            bytes[256 + 48] ^= 0x01;
            storage.replace(&log, bytes);
            let selector = poll_selector(ConsumerKind::Consumer, Some(0), 100);
            let plan = plane.plan_poll(&meta, &request(&selector, 1)).unwrap();
            let polled = plane.poll(&plan).await.unwrap();
            if validate_checksum {
                // Never served: skipped as a gap, and the partition quarantined.
                assert_eq!(polled.records.messages_count, 0, "served though checked");
                assert_eq!(plane.quarantined(), [key(0)]);
            } else {
                assert_eq!(polled.records.messages_count, 2);
                assert!(plane.quarantined().is_empty());
            }
        });
    }
}

#[test]
fn enforce_fsync_makes_replicated_sends_durable_before_their_ack() {
    for enforce_fsync in [false, true] {
        let storage = MemoryStorage::new();
        let meta = metadata(1, &[]);
        assert_eq!(
            meta.streams[&0].topics[&0].settings.durability,
            Durability::Replicated
        );
        runtime().block_on(async {
            let plane = plane(&storage).with_enforce_fsync(enforce_fsync);
            plane.open_all(&meta).await.unwrap();
            send_to(&plane, &meta, 0, 2).await.unwrap();
            // No close (which would sync): the power goes right after the ack.
            std::mem::forget(plane);
        });
        // Only what was synced before the ack survives.
        storage.crash(segment::storage::memory::CrashMode::DropUnsynced);
        runtime().block_on(async {
            let plane = plane(&storage);
            plane.open_all(&meta).await.unwrap();
            let kept = poll_all(&plane, &meta, 0).await;
            assert_eq!(kept, if enforce_fsync { 2 } else { 0 }, "{enforce_fsync}");
        });
    }
}

fn key(partition_id: u32) -> PartitionKey {
    PartitionKey {
        stream_id: 0,
        topic_id: 0,
        partition_id,
    }
}

/// A batch of `count` messages as a producer sends it.
pub(crate) fn batch(count: usize, producer: Option<Producer>) -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = (0..count).map(|index| vec![b'm'; index + 1]).collect();
    let messages: Vec<OutgoingMessage<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(index, payload)| OutgoingMessage {
            id: u128::try_from(index).unwrap() + 1,
            origin_timestamp: 1_700_000_000_000_000,
            payload,
            user_headers: &[],
        })
        .collect();
    let mut bytes = Vec::new();
    encode_batch(&messages, producer, &mut bytes).unwrap();
    bytes
}

/// Streams made one after another, one topic and partition each, split evenly over the
/// shards (iggy-bench's eight streams: four on each of two), and one topic's partitions go
/// round the shards from its own start, so each shard gets its share of them too.
#[test]
fn consecutive_streams_and_a_topics_partitions_spread_evenly_over_the_shards() {
    for count in 1..=4usize {
        let place = |index| ShardPlace {
            index,
            count,
            sequencer: 0,
        };
        let mut per_shard = vec![0usize; count];
        for stream_id in 0..8u32 {
            let key = PartitionKey {
                stream_id,
                topic_id: 0,
                partition_id: 0,
            };
            let owner = place(0).owner(key);
            assert!(place(owner).owns(key));
            per_shard[owner] += 1;
        }
        let (least, most) = (per_shard.iter().min(), per_shard.iter().max());
        assert!(
            most.unwrap() - least.unwrap() <= 1,
            "{count} shards: {per_shard:?}"
        );
        for stream_id in 0..3u32 {
            let mut partitions = vec![0usize; count];
            for partition_id in 0..24u32 {
                let key = PartitionKey {
                    stream_id,
                    topic_id: 5,
                    partition_id,
                };
                partitions[place(0).owner(key)] += 1;
            }
            assert!(partitions.iter().all(|owned| *owned == 24 / count));
        }
    }
}

/// A partition directory left by an earlier partition of the same ids (a delete whose
/// removal failed, lost metadata) is moved aside, never served as the new partition's; the
/// partition's own directory, and one made before directories recorded their partition, are
/// opened with their messages.
#[test]
fn a_directory_left_by_an_earlier_partition_of_the_same_ids_is_moved_aside() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let first = metadata(1, &[]);
        let data = plane(&storage);
        data.open_all(&first).await.unwrap();
        send(&data, &first, 5).await;
        data.close().await.unwrap();
        // The same metadata again: its own directory, its messages.
        let data = plane(&storage);
        data.open_all(&first).await.unwrap();
        assert_eq!(data.totals(None, None).messages_count, 5);
        data.close().await.unwrap();
        // A directory without `partition.id` (an earlier build's) is adopted.
        let directory = partition_directory(Path::new("/data"), 0, 0, 0);
        storage
            .remove_file(&directory.join("partition.id"))
            .await
            .unwrap();
        let data = plane(&storage);
        data.open_all(&first).await.unwrap();
        assert_eq!(data.totals(None, None).messages_count, 5);
        data.close().await.unwrap();
        // A new partition with the same ids (another incarnation) starts empty.
        let mut second = metadata(1, &[]);
        let topic = second.streams.get_mut(&0).unwrap().topics.get_mut(&0);
        topic.unwrap().partitions.get_mut(&0).unwrap().incarnation = 42;
        let data = plane(&storage);
        data.open_all(&second).await.unwrap();
        assert_eq!(data.totals(None, None).partitions_count, 1);
        assert_eq!(
            data.totals(None, None).messages_count,
            0,
            "not the old messages"
        );
        let aside = Path::new("/data").join(ORPHANS).join("0-0-0-incarnation-1");
        assert!(
            storage.exists(&aside).await,
            "the old directory is kept aside"
        );
        send(&data, &second, 2).await;
        data.close().await.unwrap();
        let data = plane(&storage);
        data.open_all(&second).await.unwrap();
        assert_eq!(data.totals(None, None).messages_count, 2);
    });
}

/// At start, partition directories the metadata does not hold go to `orphaned/`; beside
/// metadata with no history at all they stop the start, unless the loss is accepted.
#[test]
fn partition_directories_the_metadata_does_not_hold_are_set_aside_at_start() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let root = Path::new("/data");
        let held = partition_directory(root, 0, 0, 0);
        let leftovers = [
            partition_directory(root, 0, 0, 5),
            partition_directory(root, 3, 0, 0),
        ];
        for directory in leftovers.iter().chain([&held]) {
            storage.create_dir_all(directory).await.unwrap();
        }
        let meta = metadata(1, &[]);
        let moved = set_aside_orphans(&storage, root, &meta, false)
            .await
            .unwrap();
        assert_eq!(moved, 2);
        assert!(storage.exists(&held).await);
        for leftover in &leftovers {
            assert!(!storage.exists(leftover).await);
        }
        let orphans = storage.list_dir(&root.join(ORPHANS)).await.unwrap();
        assert_eq!(orphans, ["0-0-5", "3-0-0"]);

        let lost = Metadata::default();
        let refused = set_aside_orphans(&storage, root, &lost, false).await;
        assert!(matches!(
            refused,
            Err(OrphanError::MetadataLost { count: 1, .. })
        ));
        assert!(storage.exists(&held).await, "nothing moved when refused");
        let moved = set_aside_orphans(&storage, root, &lost, true)
            .await
            .unwrap();
        assert_eq!(moved, 1);
        assert!(!storage.exists(&held).await);
    });
}

/// A stream delete is committed before its directory goes: a removal the disk refuses is
/// logged, not answered as a failure, and what it left is never served again.
#[test]
fn a_delete_whose_directory_cannot_be_removed_is_still_done() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let meta = metadata(1, &[]);
        let data = plane(&storage);
        data.open_all(&meta).await.unwrap();
        send(&data, &meta, 3).await;
        storage.fail_after(Some(0));
        let mut gone = meta.clone();
        gone.streams.clear();
        let delete = MetadataOp::DeleteStream { id: 0 };
        data.on_applied(&delete, &gone).await.unwrap();
        assert_eq!(data.totals(None, None), Totals::default());
        let leftover = partition_directory(Path::new("/data"), 0, 0, 0);
        assert!(
            storage.exists(&leftover).await,
            "the refused removal left it"
        );
        storage.fail_after(None);
        // A removal cut short may take `partition.id` and leave the rest: a directory
        // without it is adopted only for a partition the metadata held at start.
        let identity = leftover.join(segment::layout::IDENTITY_FILE);
        storage.remove_file(&identity).await.unwrap();
        let mut again = metadata(1, &[]);
        let topic = again.streams.get_mut(&0).unwrap().topics.get_mut(&0);
        topic.unwrap().partitions.get_mut(&0).unwrap().incarnation = 9;
        data.on_applied(
            &MetadataOp::CreateStream {
                id: 0,
                name: "s".into(),
                created_at: 0,
                options: OptionsBlock::default(),
            },
            &again,
        )
        .await
        .unwrap();
        data.open_all(&again).await.unwrap();
        assert_eq!(data.totals(None, None).partitions_count, 1);
        assert_eq!(data.totals(None, None).messages_count, 0);
    });
}

/// Client mistakes and a partition deleted under a request are answered as such, not as
/// the server's fault (`1`); in cluster mode a fault of the server's own stops the node.
#[test]
fn misnumbered_frames_and_a_partition_closed_under_a_request_are_not_server_faults() {
    use segment::log::AppendError;
    use segment::partition::PartitionError;
    let closed = DataError::Partition {
        key: key(0),
        source: PartitionError::Closed,
    };
    assert_eq!(closed.refusal(), Refusal::Missing(Missing::Partition));
    let misnumbered = DataError::Partition {
        key: key(0),
        source: PartitionError::Append(AppendError::OffsetDelta { index: 1, found: 5 }),
    };
    assert_eq!(misnumbered.refusal(), Refusal::Malformed);
}

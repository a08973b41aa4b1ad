//! Tests of the state machine as a whole: apply, the op codec, and property tests over
//! random op sequences. The generators here serve `journal_tests.rs` too.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use proptest::prelude::*;
use proto::codec::WireName;
use proto::primitives::{OptionsBlock, Permissions, TlvEntry};
use segment::log::Durability;

use super::op_codec::{decode_op, encode_op};
use super::*;

/// Drives a `MemoryStorage` future, which completes on its first poll.
pub(super) fn ready<F: Future>(future: F) -> F::Output {
    let mut context = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut context) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("memory storage futures are always ready"),
    }
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-c]{1,2}", "\\PC{1,6}"]
}

fn options() -> impl Strategy<Value = OptionsBlock> {
    let key = "[a-z_]{1,12}".prop_map(|key| WireName::new(key).unwrap());
    let value = prop_oneof![
        any::<u64>().prop_map(TlvEntry::uint64),
        any::<bool>().prop_map(TlvEntry::boolean),
        "[a-z]{1,8}".prop_map(|text| TlvEntry::string(&text).unwrap()),
    ];
    proptest::collection::btree_map(key, value, 0..3)
        .prop_map(|entries| OptionsBlock(entries.into_iter().collect()))
}

fn settings() -> impl Strategy<Value = TopicSettings> {
    (
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        any::<u64>(),
        any::<bool>(),
        any::<u32>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(expiry, max, segment, persisted, count, gzip, fixed)| {
            let durability = if persisted {
                Durability::Persisted
            } else {
                Durability::Replicated
            };
            TopicSettings {
                message_expiry_us: expiry,
                max_topic_size_bytes: max,
                segment_size_bytes: segment,
                durability,
                consumer_offset_durability: durability,
                messages_required_to_save: count,
                size_of_messages_required_to_save: segment / 3,
                compression_gzip: gzip,
                replication_factor: count / 7,
                preallocate_segments: !gzip,
                partitions_fixed: fixed,
            }
        })
}

fn permissions() -> impl Strategy<Value = Option<Permissions>> {
    prop_oneof![
        Just(None),
        Just(Some(Permissions::root())),
        Just(Some(Permissions::default())),
    ]
}

fn status() -> impl Strategy<Value = UserStatus> {
    prop_oneof![Just(UserStatus::Active), Just(UserStatus::Inactive)]
}

fn stream_op() -> impl Strategy<Value = MetadataOp> {
    let id = 0_u32..4;
    prop_oneof![
        (id.clone(), name(), any::<u64>(), options()).prop_map(
            |(id, name, created_at, options)| {
                MetadataOp::CreateStream {
                    id,
                    name,
                    created_at,
                    options,
                }
            }
        ),
        (
            id.clone(),
            proptest::option::of(name()),
            proptest::option::of(options())
        )
            .prop_map(|(id, name, options)| MetadataOp::UpdateStream { id, name, options }),
        id.prop_map(|id| MetadataOp::DeleteStream { id }),
    ]
}

fn topic_op() -> impl Strategy<Value = MetadataOp> {
    let id = 0_u32..4;
    prop_oneof![
        (
            id.clone(),
            id.clone(),
            name(),
            any::<u64>(),
            0_u32..4,
            options(),
            settings()
        )
            .prop_map(
                |(stream_id, id, name, created_at, partitions_count, options, settings)| {
                    MetadataOp::CreateTopic {
                        stream_id,
                        id,
                        name,
                        created_at,
                        partitions_count,
                        options,
                        settings,
                    }
                }
            ),
        (
            id.clone(),
            id.clone(),
            proptest::option::of(name()),
            proptest::option::of(options()),
            proptest::option::of(settings())
        )
            .prop_map(|(stream_id, id, name, options, settings)| {
                MetadataOp::UpdateTopic {
                    stream_id,
                    id,
                    name,
                    options,
                    settings,
                }
            }),
        (id.clone(), id).prop_map(|(stream_id, id)| MetadataOp::DeleteTopic { stream_id, id }),
    ]
}

fn topic_child_op() -> impl Strategy<Value = MetadataOp> {
    let id = 0_u32..4;
    prop_oneof![
        (id.clone(), id.clone(), 0_u32..5, any::<u64>()).prop_map(
            |(stream_id, topic_id, count, created_at)| MetadataOp::CreatePartitions {
                stream_id,
                topic_id,
                count,
                created_at,
            }
        ),
        (id.clone(), id.clone(), 0_u32..5).prop_map(|(stream_id, topic_id, count)| {
            MetadataOp::DeletePartitions {
                stream_id,
                topic_id,
                count,
            }
        }),
        (id.clone(), id.clone(), id.clone(), name(), any::<u64>()).prop_map(
            |(stream_id, topic_id, id, name, created_at)| MetadataOp::CreateConsumerGroup {
                stream_id,
                topic_id,
                id,
                name,
                created_at,
            }
        ),
        (id.clone(), id.clone(), id).prop_map(|(stream_id, topic_id, id)| {
            MetadataOp::DeleteConsumerGroup {
                stream_id,
                topic_id,
                id,
            }
        }),
    ]
}

fn user_op() -> impl Strategy<Value = MetadataOp> {
    let id = 0_u32..4;
    prop_oneof![
        (
            id.clone(),
            name(),
            name(),
            status(),
            permissions(),
            any::<u64>()
        )
            .prop_map(
                |(id, username, password_hash, status, permissions, created_at)| {
                    MetadataOp::CreateUser {
                        id,
                        username,
                        password_hash,
                        status,
                        permissions,
                        created_at,
                    }
                }
            ),
        (
            id.clone(),
            proptest::option::of(name()),
            proptest::option::of(status())
        )
            .prop_map(|(id, username, status)| MetadataOp::UpdateUser {
                id,
                username,
                status,
            }),
        id.clone().prop_map(|id| MetadataOp::DeleteUser { id }),
        (id.clone(), name())
            .prop_map(|(id, password_hash)| MetadataOp::ChangePassword { id, password_hash }),
        (id.clone(), permissions())
            .prop_map(|(id, permissions)| MetadataOp::UpdatePermissions { id, permissions }),
        (
            id.clone(),
            name(),
            name(),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(user_id, name, token_hash, expiry_at)| {
                MetadataOp::CreatePersonalAccessToken {
                    user_id,
                    name,
                    token_hash,
                    expiry_at,
                }
            }),
        (id, name())
            .prop_map(|(user_id, name)| MetadataOp::DeletePersonalAccessToken { user_id, name }),
    ]
}

pub(super) fn any_op() -> impl Strategy<Value = MetadataOp> {
    prop_oneof![stream_op(), topic_op(), topic_child_op(), user_op()]
}

fn apply_all(ops: &[MetadataOp]) -> (Metadata, Vec<Result<(), ApplyError>>) {
    let mut metadata = Metadata::default();
    let results = ops.iter().map(|op| metadata.apply(op)).collect();
    (metadata, results)
}

proptest! {
    #[test]
    fn op_codec_round_trips(op in any_op()) {
        prop_assert_eq!(decode_op(&encode_op(&op)).unwrap(), op);
    }

    #[test]
    fn op_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_op(&bytes);
    }

    #[test]
    fn apply_is_deterministic_and_counts_successes(
        ops in proptest::collection::vec(any_op(), 0..40)
    ) {
        let (first, results) = apply_all(&ops);
        let (second, _) = apply_all(&ops);
        prop_assert_eq!(&first, &second);
        let applied = results.iter().filter(|result| result.is_ok()).count();
        prop_assert_eq!(first.commit, u64::try_from(applied).unwrap());
    }

    #[test]
    fn refused_ops_change_nothing(ops in proptest::collection::vec(any_op(), 0..40)) {
        let mut metadata = Metadata::default();
        for op in &ops {
            let before = metadata.clone();
            if metadata.apply(op).is_err() {
                prop_assert_eq!(&metadata, &before);
            }
        }
    }
}

pub(super) fn sample_ops() -> Vec<MetadataOp> {
    vec![
        MetadataOp::CreateStream {
            id: 0,
            name: String::from("orders"),
            created_at: 1,
            options: OptionsBlock::default(),
        },
        MetadataOp::CreateTopic {
            stream_id: 0,
            id: 0,
            name: String::from("eu"),
            created_at: 2,
            partitions_count: 2,
            options: OptionsBlock::default(),
            settings: TopicSettings::default(),
        },
        MetadataOp::CreatePartitions {
            stream_id: 0,
            topic_id: 0,
            count: 1,
            created_at: 3,
        },
    ]
}

#[test]
fn partitions_are_dense_and_carry_their_creating_commit() {
    let (metadata, results) = apply_all(&sample_ops());
    assert!(results.iter().all(Result::is_ok));
    let topic = &metadata.streams[&0].topics[&0];
    let incarnations: Vec<_> = topic
        .partitions
        .values()
        .map(|p| (p.id, p.incarnation))
        .collect();
    assert_eq!(incarnations, [(0, 2), (1, 2), (2, 3)]);
    assert_eq!(metadata.commit, 3);
}

#[test]
fn deleting_partitions_removes_the_highest_ids() {
    let mut ops = sample_ops();
    ops.push(MetadataOp::DeletePartitions {
        stream_id: 0,
        topic_id: 0,
        count: 2,
    });
    let (metadata, _) = apply_all(&ops);
    let ids: Vec<_> = metadata.streams[&0].topics[&0]
        .partitions
        .keys()
        .copied()
        .collect();
    assert_eq!(ids, [0]);
    let mut too_many = metadata.clone();
    let op = MetadataOp::DeletePartitions {
        stream_id: 0,
        topic_id: 0,
        count: 2,
    };
    assert!(too_many.apply(&op).is_err());
    assert_eq!(too_many, metadata);
}

#[test]
fn apply_at_takes_only_a_commit_above_the_current_one() {
    let create = |id: u32, name: &str| MetadataOp::CreateStream {
        id,
        name: name.into(),
        created_at: 0,
        options: OptionsBlock::default(),
    };
    let mut metadata = Metadata::default();
    metadata.apply_at(&create(0, "a"), 40).unwrap();
    assert_eq!(metadata.commit, 40);
    let before = metadata.clone();
    for stale in [0, 39, 40] {
        let refused = metadata.apply_at(&create(1, "b"), stale);
        assert!(matches!(refused, Err(ApplyError::CommitNotAbove { .. })));
        assert_eq!(metadata, before, "a refused op changes nothing");
    }
    metadata.apply(&create(1, "b")).unwrap();
    assert_eq!(metadata.commit, 41);
}

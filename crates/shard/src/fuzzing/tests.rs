//! Stable replay of the metadata fuzz targets: the committed corpora under
//! `fuzz/corpus/<target>/`, seeds built from the encoders, and random and mutated inputs from
//! a fixed seed, so CI covers the journal, op and snapshot decoders without a fuzzing
//! toolchain.

use std::collections::BTreeMap;

use proto::fuzzing::replay::{read_corpus, replay};
use proto::primitives::{OptionsBlock, Permissions, TlvEntry};

use super::*;
use crate::metadata::replay::encode_entry;
use crate::metadata::{
    ConsumerGroup, Partition, PersonalAccessToken, Stream, Topic, TopicSettings, User, UserStatus,
};

/// Inputs each target sees per run, split between random and mutated seeds.
const INPUTS_PER_TARGET: usize = 30_000;

/// Runs `target` over `seeds`, the committed corpus, and random and mutated inputs.
fn replay_target(name: &str, mut seeds: Vec<Vec<u8>>, target: fn(&[u8])) {
    let corpus = read_corpus(env!("CARGO_MANIFEST_DIR"), name);
    assert!(!corpus.is_empty(), "fuzz/corpus/{name} is empty");
    seeds.extend(corpus);
    replay(name, &seeds, INPUTS_PER_TARGET, 8, target);
}

/// One op of every kind, in an order that applies.
pub(crate) fn op_seeds() -> Vec<MetadataOp> {
    let mut options = OptionsBlock::default();
    options.set("message_expiry", TlvEntry::uint64(60));
    vec![
        MetadataOp::CreateStream {
            id: 1,
            name: "orders".into(),
            created_at: 1,
            options: options.clone(),
        },
        MetadataOp::UpdateStream {
            id: 1,
            name: Some("orders-eu".into()),
            options: Some(OptionsBlock::default()),
        },
        MetadataOp::CreateTopic {
            stream_id: 1,
            id: 2,
            name: "payments".into(),
            created_at: 2,
            partitions_count: 2,
            options,
            settings: TopicSettings::default(),
        },
        MetadataOp::UpdateTopic {
            stream_id: 1,
            id: 2,
            name: None,
            options: None,
            settings: Some(TopicSettings {
                max_topic_size_bytes: Some(1 << 30),
                ..TopicSettings::default()
            }),
        },
        MetadataOp::CreatePartitions {
            stream_id: 1,
            topic_id: 2,
            count: 3,
            created_at: 3,
        },
        MetadataOp::DeletePartitions {
            stream_id: 1,
            topic_id: 2,
            count: 1,
        },
        MetadataOp::CreateConsumerGroup {
            stream_id: 1,
            topic_id: 2,
            id: 0,
            name: "readers".into(),
            created_at: 4,
        },
        MetadataOp::CreateUser {
            id: 1,
            username: "alice".into(),
            password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
            status: UserStatus::Active,
            permissions: Some(Permissions::root()),
            created_at: 5,
        },
        MetadataOp::UpdateUser {
            id: 1,
            username: Some("alicia".into()),
            status: Some(UserStatus::Inactive),
        },
        MetadataOp::ChangePassword {
            id: 1,
            password_hash: "$argon2id$other".into(),
        },
        MetadataOp::UpdatePermissions {
            id: 1,
            permissions: None,
        },
        MetadataOp::CreatePersonalAccessToken {
            user_id: 1,
            name: "ci".into(),
            token_hash: "ab".repeat(32),
            expiry_at: Some(99),
        },
        MetadataOp::DeletePersonalAccessToken {
            user_id: 1,
            name: "ci".into(),
        },
        MetadataOp::DeleteConsumerGroup {
            stream_id: 1,
            topic_id: 2,
            id: 0,
        },
        MetadataOp::DeleteTopic {
            stream_id: 1,
            id: 2,
        },
        MetadataOp::DeleteUser { id: 1 },
        MetadataOp::DeleteStream { id: 1 },
    ]
}

/// Journals: every op, one with a base record, a torn tail and a zero-filled tail.
pub(crate) fn journal_seeds() -> Vec<Vec<u8>> {
    let entries: Vec<Vec<u8>> = op_seeds()
        .iter()
        .map(|op| encode_entry(op).unwrap())
        .collect();
    let all = entries.concat();
    let mut based = encode_base_entry(40);
    based.extend(entries[..3].concat());
    let torn = all[..all.len() - 5].to_vec();
    let mut zeros = entries[..2].concat();
    zeros.resize(zeros.len() + 64, 0);
    vec![all, based, torn, zeros, Vec::new()]
}

/// A state with one of everything a snapshot holds.
fn snapshot_state() -> Metadata {
    let partition = Partition {
        id: 0,
        created_at: 1,
        incarnation: 2,
    };
    let topic = Topic {
        id: 2,
        name: "payments".into(),
        created_at: 1,
        options: OptionsBlock::default(),
        settings: TopicSettings::default(),
        partitions: BTreeMap::from([(0, partition)]),
        groups: BTreeMap::from([(
            0,
            ConsumerGroup {
                id: 0,
                name: "readers".into(),
                created_at: 3,
            },
        )]),
        next_group_id: 1,
    };
    let token = PersonalAccessToken {
        name: "ci".into(),
        token_hash: "ab".repeat(32),
        expiry_at: None,
    };
    let user = User {
        id: 0,
        username: "iggy".into(),
        password_hash: "$argon2id$hash".into(),
        status: UserStatus::Active,
        permissions: Some(Permissions::root()),
        created_at: 1,
        tokens: BTreeMap::from([("ci".to_owned(), token)]),
    };
    let stream = Stream {
        id: 1,
        name: "orders".into(),
        created_at: 1,
        options: OptionsBlock::default(),
        topics: BTreeMap::from([(2, topic)]),
    };
    Metadata {
        streams: BTreeMap::from([(1, stream)]),
        users: BTreeMap::from([(0, user)]),
        commit: 17,
    }
}

/// Snapshots, selector first: whole files (even) and bare bodies (odd).
pub(crate) fn snapshot_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for state in [Metadata::default(), snapshot_state()] {
        let file = encode_snapshot(&state);
        seeds.push([&[0_u8][..], &file].concat());
        seeds.push([&[1_u8][..], &file[32..]].concat());
    }
    seeds
}

#[test]
fn replay_journal_replay() {
    replay_target("journal_replay", journal_seeds(), fuzz_journal);
}

#[test]
fn replay_partition_identity() {
    use crate::data::identity::Identity;
    let identity = Identity {
        incarnation: 12,
        created_at: 1_765_000_000_000_000,
    };
    let seeds = vec![identity.encode().to_vec()];
    replay_target("partition_identity", seeds, fuzz_partition_identity);
}

#[test]
fn replay_metadata_op() {
    let seeds = op_seeds().iter().map(encode_op).collect();
    replay_target("metadata_op", seeds, fuzz_op);
}

#[test]
fn replay_cluster_op() {
    use crate::cluster::ReplicatedOp;
    use crate::data::PartitionKey;
    let key = PartitionKey {
        stream_id: 1,
        topic_id: 2,
        partition_id: 0,
    };
    let mut ops: Vec<ReplicatedOp> = op_seeds().into_iter().map(ReplicatedOp::Metadata).collect();
    ops.push(ReplicatedOp::Append {
        key,
        now_us: 7,
        producer: None,
        origin: None,
        batch: vec![0; 300],
    });
    ops.push(ReplicatedOp::Append {
        key,
        now_us: 8,
        producer: None,
        origin: crate::retries::Origin::of(0xfeed, 3),
        batch: vec![0; 300],
    });
    ops.push(ReplicatedOp::StoreOffset {
        key,
        owner: segment::offsets::OffsetOwner::Consumer(3),
        offset: 9,
        forward_only: false,
    });
    ops.push(ReplicatedOp::DeleteOffset {
        key,
        owner: segment::offsets::OffsetOwner::Group(1),
    });
    ops.push(ReplicatedOp::Purge {
        stream_id: 1,
        topic_id: Some(2),
        origin: None,
    });
    ops.push(ReplicatedOp::DeleteSegments {
        key,
        below: 40,
        origin: crate::retries::Origin::of(0xfeed, 4),
    });
    let seeds = ops
        .iter()
        .map(|op| {
            let mut body = vec![1];
            body.extend_from_slice(&op.encode());
            body
        })
        .collect::<Vec<_>>();
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/cluster_op");
    if std::env::var_os("CLUSTER_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&directory).unwrap();
        for (index, seed) in seeds.iter().enumerate().step_by(4) {
            std::fs::write(directory.join(format!("seed-{index:02}")), seed).unwrap();
        }
    }
    replay_target("cluster_op", seeds, fuzz_cluster_op);
}

#[test]
fn replay_metadata_snapshot() {
    replay_target("metadata_snapshot", snapshot_seeds(), fuzz_snapshot);
}

#[test]
fn the_op_seeds_apply_in_order() {
    let mut metadata = Metadata::default();
    for op in op_seeds() {
        metadata.apply(&op).unwrap();
    }
}

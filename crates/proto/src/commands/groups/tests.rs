//! Tests of the consumer group codecs.

use proptest::prelude::*;

use super::*;
use crate::codec::{decode_exact, encode_to_vec};
use crate::commands::topics::tests::{assert_prefixes_refused, assert_round_trip};
use crate::dialect::Dialect;

impl ConsumerGroupDetails {
    /// The value a round trip yields: the count the encoder writes.
    pub(crate) fn normalised(mut self) -> Self {
        self.group.members_count = u32::try_from(self.members.len()).unwrap();
        self
    }
}

fn group() -> ConsumerGroupResponse {
    ConsumerGroupResponse {
        id: 0,
        partitions_count: 3,
        members_count: 0,
        name: WireName::new("g").unwrap(),
    }
}

#[test]
fn golden_details() {
    let details = ConsumerGroupDetails {
        group: group(),
        members: alloc::vec![
            ConsumerGroupMember {
                id: 0,
                partition_ids: alloc::vec![0, 2],
            },
            ConsumerGroupMember {
                id: 1,
                partition_ids: alloc::vec![1],
            },
        ],
    };
    let expected = [
        0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1, b'g', //
        0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, //
        1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0,
    ];
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let bytes = encode_to_vec(&details, dialect);
        assert_eq!(bytes, expected);
        assert_eq!(
            assert_round_trip(&details.clone().normalised(), dialect),
            bytes
        );
        assert_prefixes_refused::<ConsumerGroupDetails>(&bytes, dialect);
    }
}

#[test]
fn golden_assignment_and_requests() {
    let assignment = ConsumerGroupAssignment {
        generation: 4,
        partition_ids: alloc::vec![1, 2],
    };
    let bytes = assert_round_trip(&assignment, Dialect::V0_12_2);
    assert_eq!(
        bytes,
        [4, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]
    );
    assert_prefixes_refused::<ConsumerGroupAssignment>(&bytes, Dialect::V0_12_2);
    let join = JoinConsumerGroup {
        stream_id: Identifier::Numeric(1),
        topic_id: Identifier::Numeric(2),
        group_id: Identifier::name("g").unwrap(),
    };
    let bytes = assert_round_trip(&join, Dialect::V0_11_0);
    assert_eq!(bytes, [1, 4, 1, 0, 0, 0, 1, 4, 2, 0, 0, 0, 2, 1, b'g']);
    assert_prefixes_refused::<GetConsumerGroup>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<DeleteConsumerGroup>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<JoinConsumerGroup>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<LeaveConsumerGroup>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<SyncConsumerGroup>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<CreateConsumerGroup>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<GetConsumerGroups>(&bytes[..12], Dialect::V0_12_2);
}

#[test]
fn over_long_counts_are_refused() {
    let mut details = encode_to_vec(
        &ConsumerGroupDetails {
            group: group(),
            members: alloc::vec![],
        },
        Dialect::V0_12_2,
    );
    details[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<ConsumerGroupDetails>(&details, Dialect::V0_12_2).is_err());
    details[8..12].copy_from_slice(&1000_u32.to_le_bytes());
    assert!(decode_exact::<ConsumerGroupDetails>(&details, Dialect::V0_12_2).is_err());
    let assignment = [0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
    assert!(decode_exact::<ConsumerGroupAssignment>(&assignment, Dialect::V0_12_2).is_err());
    let member = [0, 0, 0, 0, 0x40, 0x42, 0x0f, 0x00];
    assert!(decode_exact::<ConsumerGroupMember>(&member, Dialect::V0_12_2).is_err());
}

#[test]
fn groups_reply_is_concatenated() {
    let groups = ConsumerGroups(alloc::vec![group(), group()]);
    let bytes = assert_round_trip(&groups, Dialect::V0_12_2);
    assert_eq!(bytes.len(), 28);
    assert_eq!(
        decode_exact::<ConsumerGroups>(&[], Dialect::V0_12_2).unwrap(),
        ConsumerGroups::default()
    );
    for length in 1..14 {
        assert!(decode_exact::<ConsumerGroups>(&bytes[..length], Dialect::V0_12_2).is_err());
    }
}

proptest! {
    #[test]
    fn records_round_trip(
        group in any::<ConsumerGroupResponse>(),
        member in any::<ConsumerGroupMember>(),
        details in any::<ConsumerGroupDetails>(),
        groups in any::<ConsumerGroups>(),
        assignment in any::<ConsumerGroupAssignment>(),
        dialect in any::<Dialect>(),
    ) {
        assert_round_trip(&group, dialect);
        assert_round_trip(&member, dialect);
        assert_round_trip(&details.normalised(), dialect);
        assert_round_trip(&groups, dialect);
        assert_round_trip(&assignment, dialect);
    }

    #[test]
    fn requests_round_trip(
        get in any::<GetConsumerGroup>(),
        list in any::<GetConsumerGroups>(),
        create in any::<CreateConsumerGroup>(),
        delete in any::<DeleteConsumerGroup>(),
        join in any::<JoinConsumerGroup>(),
        leave in any::<LeaveConsumerGroup>(),
        sync in any::<SyncConsumerGroup>(),
        dialect in any::<Dialect>(),
    ) {
        assert_round_trip(&get, dialect);
        assert_round_trip(&list, dialect);
        assert_round_trip(&create, dialect);
        assert_round_trip(&delete, dialect);
        assert_round_trip(&join, dialect);
        assert_round_trip(&leave, dialect);
        assert_round_trip(&sync, dialect);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
            let _ = decode_exact::<ConsumerGroupDetails>(&bytes, dialect);
            let _ = decode_exact::<ConsumerGroups>(&bytes, dialect);
            let _ = decode_exact::<ConsumerGroupAssignment>(&bytes, dialect);
        }
    }
}

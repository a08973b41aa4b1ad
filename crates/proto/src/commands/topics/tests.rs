//! Tests of the topic codecs, and the test helpers the other resource modules share.

use alloc::vec::Vec;
use core::fmt::Debug;

use proptest::prelude::*;

use super::*;
use crate::codec::{decode_exact, encode_to_vec};
use crate::primitives::TlvEntry;

impl Arbitrary for ReplicaIds {
    type Parameters = ();
    type Strategy = BoxedStrategy<Self>;
    fn arbitrary_with((): ()) -> Self::Strategy {
        proptest::collection::vec(any::<u8>(), 0..4)
            .prop_map(|ids| ReplicaIds::new(ids).unwrap())
            .boxed()
    }
}

impl TopicHeader {
    /// The value a `dialect` round trip yields: 0.12.2 drops the inline settings.
    pub(crate) fn normalised_for(mut self, dialect: Dialect) -> Self {
        if dialect == Dialect::V0_12_2 {
            self.message_expiry_micros = 0;
            self.compression = 0;
            self.max_topic_size_bytes = 0;
        }
        self
    }
}

impl PartitionResponse {
    /// The value a `dialect` round trip yields: 0.11.0 drops context and member lists.
    pub(crate) fn normalised_for(mut self, dialect: Dialect) -> Self {
        if dialect == Dialect::V0_11_0 {
            self.context = PartitionContext::default();
            self.members = ReplicaIds::default();
            self.in_sync_members = ReplicaIds::default();
        }
        self
    }
}

impl TopicDetails {
    /// The value a `dialect` round trip yields, with the count the encoder writes.
    pub(crate) fn normalised_for(mut self, dialect: Dialect) -> Self {
        self.topic = self.topic.normalised_for(dialect);
        self.topic.partitions_count = u32::try_from(self.partitions.len()).unwrap();
        self.partitions = self
            .partitions
            .into_iter()
            .map(|partition| partition.normalised_for(dialect))
            .collect();
        self
    }
}

/// Asserts `decode_exact(encode(value)) == value` in `dialect` and returns the bytes.
pub(crate) fn assert_round_trip<T>(value: &T, dialect: Dialect) -> Vec<u8>
where
    T: for<'a> Codec<'a> + Debug + PartialEq,
{
    let bytes = encode_to_vec(value, dialect);
    assert_eq!(&decode_exact::<T>(&bytes, dialect).unwrap(), value);
    bytes
}

/// Asserts every strict prefix of `bytes` is refused in `dialect`.
pub(crate) fn assert_prefixes_refused<T>(bytes: &[u8], dialect: Dialect)
where
    T: for<'a> Codec<'a> + Debug,
{
    for length in 0..bytes.len() {
        let result = decode_exact::<T>(&bytes[..length], dialect);
        assert!(
            result.is_err(),
            "prefix of {length} bytes decoded: {result:?}"
        );
    }
}

fn sample_header() -> TopicHeader {
    let mut derived = OptionsBlock::default();
    derived.set("message_expiry", TlvEntry::uint64(u64::MAX));
    TopicHeader {
        id: 1,
        created_at_micros: 1_700_000_000_000_000,
        partitions_count: 1,
        size_bytes: 5,
        messages_count: 1,
        name: WireName::new("events").unwrap(),
        options: OptionsBlock::default(),
        derived_options: derived,
        message_expiry_micros: 7,
        compression: 1,
        max_topic_size_bytes: 9,
    }
}

fn sample_partition() -> PartitionResponse {
    PartitionResponse {
        id: 0,
        created_at_micros: 3,
        segments_count: 1,
        current_offset: 0,
        size_bytes: 5,
        messages_count: 1,
        context: PartitionContext {
            incarnation: 2,
            owner_generation: 0,
            metadata_op: 3,
        },
        members: ReplicaIds::single(0),
        in_sync_members: ReplicaIds::single(0),
    }
}

#[test]
fn golden_create_topic_a4() {
    let mut options = OptionsBlock::default();
    let replicated = TlvEntry::string("replicated").unwrap();
    options.set("consumer_offset_durability", replicated.clone());
    options.set("durability", replicated);
    let request = CreateTopic {
        stream_id: Identifier::Numeric(0),
        partitions_count: 3,
        name: WireName::new("events").unwrap(),
        options,
    };
    let mut expected = Vec::new();
    expected.extend_from_slice(&[1, 4, 0, 0, 0, 0, 3, 0, 0, 0, 6]);
    expected.extend_from_slice(b"events");
    expected.extend_from_slice(b"\x02\x1a\x00\x00\x00consumer_offset_durability");
    expected.extend_from_slice(b"\x02\x0a\x00\x00\x00replicated");
    expected.extend_from_slice(b"\x02\x0a\x00\x00\x00durability");
    expected.extend_from_slice(b"\x02\x0a\x00\x00\x00replicated");
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        assert_eq!(assert_round_trip(&request, dialect), expected);
    }
    // Cut inside the name or the options: never a value.
    for length in 0..17 {
        assert!(decode_exact::<CreateTopic>(&expected[..length], Dialect::V0_12_2).is_err());
    }
    assert!(decode_exact::<CreateTopic>(&expected[..30], Dialect::V0_12_2).is_err());
}

#[test]
fn topic_header_layout_per_dialect() {
    let header = sample_header();
    let new = encode_to_vec(&header, Dialect::V0_12_2);
    assert_eq!(new[32], 6, "0.12.2 name length at offset 32");
    assert_eq!(&new[33..39], b"events");
    assert_eq!(&new[39..43], [0, 0, 0, 0], "empty explicit block");
    let old = encode_to_vec(&header, Dialect::V0_11_0);
    assert_eq!(&old[16..24], 7_u64.to_le_bytes(), "message_expiry at 16");
    assert_eq!(old[24], 1, "compression at 24");
    assert_eq!(&old[25..33], 9_u64.to_le_bytes(), "max_topic_size at 25");
    assert_eq!(old[49], 6, "0.11.0 name length at offset 49");
    assert_eq!(old.len(), new.len() + 17);
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let bytes = assert_round_trip(&header.clone().normalised_for(dialect), dialect);
        assert_prefixes_refused::<TopicHeader>(&bytes, dialect);
    }
}

#[test]
fn partition_layout_per_dialect() {
    let partition = sample_partition();
    let new = encode_to_vec(&partition, Dialect::V0_12_2);
    assert_eq!(new.len(), 68);
    assert_eq!(&new[40..48], 2_u64.to_le_bytes(), "incarnation at 40");
    assert_eq!(&new[64..], [1, 0, 1, 0], "single-node member lists");
    let old = encode_to_vec(&partition, Dialect::V0_11_0);
    assert_eq!(old.len(), 40);
    assert_eq!(old[..], new[..40]);
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let bytes = assert_round_trip(&partition.clone().normalised_for(dialect), dialect);
        assert_prefixes_refused::<PartitionResponse>(&bytes, dialect);
    }
}

#[test]
fn details_carry_exactly_the_announced_partitions() {
    let mut topic = sample_header();
    topic.partitions_count = 99;
    let details = TopicDetails {
        topic,
        partitions: alloc::vec![sample_partition(), sample_partition()],
    };
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let bytes = encode_to_vec(&details, dialect);
        assert_eq!(bytes[12], 2, "the encoder writes the real count");
        let normalised = details.clone().normalised_for(dialect);
        assert_eq!(assert_round_trip(&normalised, dialect), bytes);
        assert_prefixes_refused::<TopicDetails>(&bytes, dialect);
        let mut extra = bytes.clone();
        extra.extend_from_slice(&[0; 3]);
        assert!(decode_exact::<TopicDetails>(&extra, dialect).is_err());
    }
}

#[test]
fn over_long_counts_are_refused_before_allocating() {
    let mut header = encode_to_vec(&sample_header(), Dialect::V0_12_2);
    header[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<TopicDetails>(&header, Dialect::V0_12_2).is_err());
    let topics = [0xff, 0xff, 0xff, 0xff];
    assert!(decode_exact::<Topics>(&topics, Dialect::V0_12_2).is_err());
    let mut partition = encode_to_vec(&sample_partition(), Dialect::V0_12_2);
    partition[64] = 200;
    assert!(decode_exact::<PartitionResponse>(&partition, Dialect::V0_12_2).is_err());
}

#[test]
fn topics_reply_accepts_an_empty_body() {
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        assert_eq!(
            decode_exact::<Topics>(&[], dialect).unwrap(),
            Topics::default()
        );
        assert_eq!(encode_to_vec(&Topics::default(), dialect), [0, 0, 0, 0]);
        let listed = Topics(alloc::vec![sample_header().normalised_for(dialect)]);
        let bytes = assert_round_trip(&listed, dialect);
        assert_eq!(&bytes[..4], [1, 0, 0, 0]);
        // The empty prefix is "no topics"; every other prefix is cut inside a record.
        for length in 1..bytes.len() {
            assert!(decode_exact::<Topics>(&bytes[..length], dialect).is_err());
        }
    }
}

#[test]
fn request_goldens() {
    let request = GetTopic {
        stream_id: Identifier::Numeric(1),
        topic_id: Identifier::name("t").unwrap(),
    };
    let bytes = assert_round_trip(&request, Dialect::V0_12_2);
    assert_eq!(bytes, [1, 4, 1, 0, 0, 0, 2, 1, b't']);
    assert_prefixes_refused::<GetTopic>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<DeleteTopic>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<GetTopics>(&bytes[..6], Dialect::V0_12_2);
    let mut bad_kind = bytes.clone();
    bad_kind[6] = 3;
    assert!(decode_exact::<GetTopic>(&bad_kind, Dialect::V0_12_2).is_err());
}

proptest! {
    #[test]
    fn topic_header_round_trips(value in any::<TopicHeader>(), dialect in any::<Dialect>()) {
        assert_round_trip(&value.normalised_for(dialect), dialect);
    }

    #[test]
    fn partition_round_trips(value in any::<PartitionResponse>(), dialect in any::<Dialect>()) {
        assert_round_trip(&value.normalised_for(dialect), dialect);
    }

    #[test]
    fn details_round_trip(value in any::<TopicDetails>(), dialect in any::<Dialect>()) {
        assert_round_trip(&value.normalised_for(dialect), dialect);
    }

    #[test]
    fn topics_round_trip(value in any::<Topics>(), dialect in any::<Dialect>()) {
        let value = Topics(value.0.into_iter().map(|t| t.normalised_for(dialect)).collect());
        assert_round_trip(&value, dialect);
    }

    #[test]
    fn requests_round_trip(
        get in any::<GetTopic>(),
        list in any::<GetTopics>(),
        create in any::<CreateTopic>(),
        delete in any::<DeleteTopic>(),
        dialect in any::<Dialect>(),
    ) {
        assert_round_trip(&get, dialect);
        assert_round_trip(&list, dialect);
        assert_round_trip(&create, dialect);
        assert_round_trip(&delete, dialect);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
            let _ = decode_exact::<TopicDetails>(&bytes, dialect);
            let _ = decode_exact::<Topics>(&bytes, dialect);
            let _ = decode_exact::<CreateTopic>(&bytes, dialect);
        }
    }
}

proptest! {
    #[test]
    fn replica_ids_round_trip(value in any::<ReplicaIds>(), dialect in any::<Dialect>()) {
        assert_round_trip(&value, dialect);
    }
}

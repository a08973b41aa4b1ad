//! Tests of the stream codecs.

use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::codec::{decode_exact, encode_to_vec};
use crate::commands::topics::tests::{assert_prefixes_refused, assert_round_trip};
use crate::primitives::TlvEntry;
use crate::result::ResultSection;

impl StreamResponse {
    /// The value a `dialect` round trip yields: 0.11.0 drops the derived block.
    pub(crate) fn normalised_for(mut self, dialect: Dialect) -> Self {
        if dialect == Dialect::V0_11_0 {
            self.derived_options = OptionsBlock::default();
        }
        self
    }
}

impl StreamDetails {
    /// The value a `dialect` round trip yields, with the count the encoder writes.
    pub(crate) fn normalised_for(mut self, dialect: Dialect) -> Self {
        self.stream = self.stream.normalised_for(dialect);
        self.stream.topics_count = u32::try_from(self.topics.len()).unwrap();
        self.topics = self
            .topics
            .into_iter()
            .map(|topic| topic.normalised_for(dialect))
            .collect();
        self
    }
}

fn orders() -> WireName {
    WireName::new("orders").unwrap()
}

fn created_orders() -> StreamDetails {
    StreamDetails {
        stream: StreamResponse {
            id: 0,
            created_at_micros: 1_700_000_000_000_000,
            topics_count: 0,
            size_bytes: 0,
            messages_count: 0,
            name: orders(),
            options: OptionsBlock::default(),
            derived_options: OptionsBlock::default(),
        },
        topics: Vec::new(),
    }
}

#[test]
fn golden_create_stream_a4() {
    let request = CreateStream {
        name: orders(),
        options: OptionsBlock::default(),
    };
    let expected = [0x06, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x73];
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        assert_eq!(assert_round_trip(&request, dialect), expected);
        assert_prefixes_refused::<CreateStream>(&expected, dialect);
    }
}

#[test]
fn golden_create_stream_reply_a4() {
    let mut expected = alloc::vec![0, 0, 0, 0, 0, 0, 0, 0];
    expected.extend_from_slice(&[0x00, 0x40, 0x1e, 0x18, 0x24, 0x0a, 0x06, 0x00]);
    expected.extend_from_slice(&[0; 20]);
    expected.extend_from_slice(b"\x06orders");
    expected.extend_from_slice(&[0; 8]);
    // The appendix shows the full body; the result section is the framing layer's.
    let mut reader = Reader::new(&expected, Dialect::V0_12_2);
    assert_eq!(
        ResultSection::decode(&mut reader).unwrap(),
        ResultSection::Ok
    );
    let payload = &expected[4..];
    assert_eq!(
        assert_round_trip(&created_orders(), Dialect::V0_12_2),
        payload
    );
    assert_prefixes_refused::<StreamDetails>(payload, Dialect::V0_12_2);
    // 0.11.0 has one option block: the same record four bytes shorter.
    let old = assert_round_trip(&created_orders(), Dialect::V0_11_0);
    assert_eq!(old, payload[..payload.len() - 4]);
    assert_prefixes_refused::<StreamDetails>(&old, Dialect::V0_11_0);
}

#[test]
fn details_carry_exactly_the_announced_topics() {
    let mut details = created_orders();
    details.stream.topics_count = 5;
    let mut derived = OptionsBlock::default();
    derived.set("encryption_key_source", TlvEntry::string("none").unwrap());
    details.stream.derived_options = derived;
    let topic = TopicHeader {
        id: 0,
        created_at_micros: 1,
        partitions_count: 3,
        size_bytes: 0,
        messages_count: 0,
        name: WireName::new("events").unwrap(),
        options: OptionsBlock::default(),
        derived_options: OptionsBlock::default(),
        message_expiry_micros: 0,
        compression: 1,
        max_topic_size_bytes: 0,
    };
    details.topics = alloc::vec![topic];
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let bytes = encode_to_vec(&details, dialect);
        assert_eq!(bytes[12], 1, "the encoder writes the real count");
        let normalised = details.clone().normalised_for(dialect);
        assert_eq!(assert_round_trip(&normalised, dialect), bytes);
        assert_prefixes_refused::<StreamDetails>(&bytes, dialect);
    }
    let mut forged = encode_to_vec(&created_orders(), Dialect::V0_12_2);
    forged[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<StreamDetails>(&forged, Dialect::V0_12_2).is_err());
    forged[12..16].copy_from_slice(&4000_u32.to_le_bytes());
    assert!(decode_exact::<StreamDetails>(&forged, Dialect::V0_12_2).is_err());
}

#[test]
fn streams_reply_is_concatenated() {
    let record = created_orders().stream;
    let streams = Streams(alloc::vec![record.clone(), record]);
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let bytes = assert_round_trip(&streams, dialect);
        let one = encode_to_vec(&streams.0[0], dialect);
        assert_eq!(bytes.len(), 2 * one.len());
        assert_eq!(
            decode_exact::<Streams>(&[], dialect).unwrap(),
            Streams::default()
        );
        assert!(decode_exact::<Streams>(&bytes[..bytes.len() - 1], dialect).is_err());
    }
}

#[test]
fn request_goldens() {
    let get = GetStream {
        stream_id: Identifier::Numeric(7),
    };
    let bytes = assert_round_trip(&get, Dialect::V0_12_2);
    assert_eq!(bytes, [1, 4, 7, 0, 0, 0]);
    assert_prefixes_refused::<GetStream>(&bytes, Dialect::V0_12_2);
    assert_prefixes_refused::<DeleteStream>(&bytes, Dialect::V0_12_2);
    assert!(decode_exact::<DeleteStream>(&[1, 3, 7, 0, 0], Dialect::V0_12_2).is_err());
}

proptest! {
    #[test]
    fn stream_response_round_trips(value in any::<StreamResponse>(), dialect in any::<Dialect>()) {
        assert_round_trip(&value.normalised_for(dialect), dialect);
    }

    #[test]
    fn details_round_trip(value in any::<StreamDetails>(), dialect in any::<Dialect>()) {
        assert_round_trip(&value.normalised_for(dialect), dialect);
    }

    #[test]
    fn streams_round_trip(value in any::<Streams>(), dialect in any::<Dialect>()) {
        let value = Streams(value.0.into_iter().map(|s| s.normalised_for(dialect)).collect());
        assert_round_trip(&value, dialect);
    }

    #[test]
    fn requests_round_trip(
        get in any::<GetStream>(),
        create in any::<CreateStream>(),
        delete in any::<DeleteStream>(),
        dialect in any::<Dialect>(),
    ) {
        assert_round_trip(&get, dialect);
        assert_round_trip(&create, dialect);
        assert_round_trip(&delete, dialect);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
            let _ = decode_exact::<StreamDetails>(&bytes, dialect);
            let _ = decode_exact::<Streams>(&bytes, dialect);
            let _ = decode_exact::<CreateStream>(&bytes, dialect);
        }
    }
}

//! Tests of the message-plane codecs: golden bytes of PROTOCOL.md A.5, A.7, A.8 and round
//! trips in both dialects.

use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::batch::{Batch, Integrity, OutgoingMessage, encode_batch, stamp};
use crate::codec::{Codec, decode_exact, encode_to_vec};
use crate::commands::poll_selector::PollSelector;
use crate::dialect::Dialect;
use crate::header::PartitionContext;
use crate::primitives::{
    Consumer, ConsumerKind, Identifier, OptionalPartition, Partitioning, PollingStrategy,
};

const ORIGIN: u64 = 1_700_000_000_000_000;

fn hello_batch() -> Vec<u8> {
    let message = OutgoingMessage {
        id: 1,
        origin_timestamp: ORIGIN,
        payload: b"hello",
        user_headers: &[],
    };
    let mut out = Vec::new();
    encode_batch(&[message], None, &mut out).unwrap();
    out
}

fn send_body(batch: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&[
        0x16, 0, 0, 0, 1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 2, 4, 0, 0, 0, 0,
    ]);
    body.extend_from_slice(&[1, 0, 0, 0]);
    body.extend_from_slice(batch);
    body
}

#[test]
fn golden_send_messages_appendix_a7() {
    let body = send_body(&hello_batch());
    assert_eq!(body.len(), 335);
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let send = decode_exact::<SendMessages<'_>>(&body, dialect).unwrap();
        assert_eq!(send.stream_id, Identifier::Numeric(0));
        assert_eq!(send.partitioning, Partitioning::PartitionId(0));
        assert_eq!(send.batch_offset, 26);
        assert_eq!(send.batch.messages().next().unwrap().payload, b"hello");
        assert_eq!(encode_to_vec(&send, dialect), body);
    }
}

#[test]
fn send_refuses_count_mismatch_and_bad_checksums() {
    let mut body = send_body(&hello_batch());
    body[22] = 2;
    let error = decode_exact::<SendMessages<'_>>(&body, Dialect::V0_12_2).unwrap_err();
    assert_eq!(error.status(), crate::ErrorCode::InvalidMessagesCount);
    let mut body = send_body(&hello_batch());
    let last = body.len() - 1;
    body[last] ^= 1;
    let error = decode_exact::<SendMessages<'_>>(&body, Dialect::V0_12_2).unwrap_err();
    assert_eq!(error.status(), crate::ErrorCode::InvalidMessageChecksum);
    let mut body = send_body(&hello_batch());
    body[26] = 9;
    let error = decode_exact::<SendMessages<'_>>(&body, Dialect::V0_12_2).unwrap_err();
    assert_eq!(error.status(), crate::ErrorCode::InvalidBatchChecksum);
}

fn golden_poll_reply() -> Vec<u8> {
    let mut batch = hello_batch();
    stamp(&mut batch, 0, 1_700_000_000_000_500).unwrap();
    let mut body = Vec::new();
    body.extend_from_slice(&[0; 12]);
    body.extend_from_slice(&[1, 0, 0, 0]);
    body.extend_from_slice(&2_u64.to_le_bytes());
    body.extend_from_slice(&0_u64.to_le_bytes());
    body.extend_from_slice(&3_u64.to_le_bytes());
    body.extend_from_slice(&batch);
    body
}

#[test]
fn golden_poll_reply_appendix_a8() {
    let body = golden_poll_reply();
    assert_eq!(body.len(), 349);
    assert_eq!(
        body[56..64],
        [0xf4, 0x41, 0x1e, 0x18, 0x24, 0x0a, 0x06, 0x00]
    );
    assert_eq!(
        body[80..88],
        [0xfb, 0xc1, 0x94, 0xce, 0xa8, 0x65, 0x53, 0xeb]
    );
    let polled = decode_exact::<PolledMessages<'_>>(&body, Dialect::V0_12_2).unwrap();
    let context = PartitionContext {
        incarnation: 2,
        owner_generation: 0,
        metadata_op: 3,
    };
    assert_eq!(polled.context, context);
    assert_eq!(polled.messages_count, 1);
    assert_eq!(encode_to_vec(&polled, Dialect::V0_12_2), body);
    let old = encode_to_vec(&polled, Dialect::V0_11_0);
    assert_eq!(old.len(), 349 - 24);
    assert!(decode_exact::<PolledMessages<'_>>(&old, Dialect::V0_11_0).is_ok());
}

#[test]
fn poll_reply_refuses_miscounted_records() {
    let mut body = golden_poll_reply();
    body[12] = 2;
    assert!(decode_exact::<PolledMessages<'_>>(&body, Dialect::V0_12_2).is_err());
    for length in 0..body.len() {
        let truncated = &body[..length];
        let expect_ok = false;
        assert_eq!(
            decode_exact::<PolledMessages<'_>>(truncated, Dialect::V0_12_2).is_ok(),
            expect_ok
        );
    }
}

fn golden_selector() -> PollSelector {
    PollSelector {
        consumer: Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        },
        stream_id: Identifier::Numeric(0),
        topic_id: Identifier::Numeric(0),
        partition: OptionalPartition(Some(0)),
        strategy: PollingStrategy::next(),
        count: 10,
        auto_commit: true,
    }
}

#[test]
fn golden_deferred_poll_appendix_a5() {
    let mut expected = encode_to_vec(&golden_selector(), Dialect::V0_12_2);
    expected.extend_from_slice(&[0; 8]);
    expected.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0x10, 0, 0x80, 0x96, 0x98, 0, 0, 0, 0, 0]);
    let deferred = PollMessagesDeferred {
        selector: golden_selector(),
        wait_us: 0,
        min_count: 1,
        max_bytes: 1 << 20,
        request_timeout_us: 10_000_000,
    };
    assert_eq!(encode_to_vec(&deferred, Dialect::V0_12_2), expected);
    assert_eq!(
        decode_exact::<PollMessagesDeferred>(&expected, Dialect::V0_12_2).unwrap(),
        deferred
    );
}

#[test]
fn deferred_poll_validation() {
    let valid = PollMessagesDeferred {
        selector: golden_selector(),
        wait_us: 1_000_000,
        min_count: 1,
        max_bytes: POLL_BYTES_MIN,
        request_timeout_us: 2_000_000,
    };
    let cases = [
        PollMessagesDeferred {
            wait_us: WAIT_US_MAX + 1,
            request_timeout_us: REQUEST_TIMEOUT_US_MAX,
            ..valid.clone()
        },
        PollMessagesDeferred {
            request_timeout_us: 1_999_999,
            ..valid.clone()
        },
        PollMessagesDeferred {
            request_timeout_us: 0,
            wait_us: 0,
            ..valid.clone()
        },
        PollMessagesDeferred {
            min_count: 0,
            ..valid.clone()
        },
        PollMessagesDeferred {
            min_count: 11,
            ..valid.clone()
        },
        PollMessagesDeferred {
            max_bytes: POLL_BYTES_MIN - 1,
            ..valid.clone()
        },
    ];
    assert!(
        decode_exact::<PollMessagesDeferred>(
            &encode_to_vec(&valid, Dialect::V0_12_2),
            Dialect::V0_12_2
        )
        .is_ok()
    );
    for case in cases {
        let bytes = encode_to_vec(&case, Dialect::V0_12_2);
        assert!(
            decode_exact::<PollMessagesDeferred>(&bytes, Dialect::V0_12_2).is_err(),
            "{case:?}"
        );
    }
}

#[test]
fn golden_route_appendix_a5() {
    let request = GetPartitionRoute {
        stream_id: 0.into(),
        topic_id: 0.into(),
        partition_id: 0,
    };
    let bytes = [1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(encode_to_vec(&request, Dialect::V0_12_2), bytes);
    let route = PartitionRoute {
        incarnation: 2,
        metadata_op: 3,
        view: 0,
        partitions_count: 3,
        primary_replica: 0,
    };
    let reply = [
        2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0,
    ];
    assert_eq!(encode_to_vec(&route, Dialect::V0_12_2), reply);
    assert!(decode_exact::<PartitionRoute>(&reply[..24], Dialect::V0_12_2).is_err());
}

fn valid_fetch() -> impl Strategy<Value = FetchMessages> {
    let target = (
        any::<u32>(),
        prop_oneof![
            Just(PollingStrategy::next()),
            any::<u64>().prop_map(PollingStrategy::offset)
        ],
        POLL_BYTES_MIN..=1_000_000,
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(partition_id, strategy, max_bytes, incarnation, owner_generation)| FetchTarget {
                partition_id,
                strategy,
                max_bytes,
                incarnation,
                owner_generation,
            },
        );
    (
        any::<Consumer>(),
        any::<Identifier>(),
        any::<Identifier>(),
        0..=WAIT_US_MAX,
        1..=1000_u32,
        any::<bool>(),
        proptest::collection::vec(target, 1..5),
    )
        .prop_map(
            |(consumer, stream_id, topic_id, wait_us, count, auto_commit, mut targets)| {
                targets.sort_by_key(|t| t.partition_id);
                targets.dedup_by_key(|t| t.partition_id);
                FetchMessages {
                    consumer,
                    stream_id,
                    topic_id,
                    wait_us,
                    request_timeout_us: wait_us + REQUEST_TIMEOUT_MARGIN_US,
                    min_count: 1,
                    count,
                    max_bytes: 1_000_000,
                    auto_commit,
                    targets,
                }
            },
        )
}

fn stamped_records(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut records = Vec::new();
    for (index, payload) in payloads.iter().enumerate() {
        let message = OutgoingMessage {
            id: 1,
            origin_timestamp: ORIGIN,
            payload,
            user_headers: &[],
        };
        let start = records.len();
        encode_batch(&[message, message], None, &mut records).unwrap();
        stamp(&mut records[start..], index as u64 * 2, ORIGIN).unwrap();
    }
    records
}

proptest! {
    #[test]
    fn fetch_round_trips(fetch in valid_fetch()) {
        let bytes = encode_to_vec(&fetch, Dialect::V0_12_2);
        prop_assert_eq!(decode_exact::<FetchMessages>(&bytes, Dialect::V0_12_2).unwrap(), fetch);
    }

    #[test]
    fn fetched_round_trips(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..50), 0..4),
        context in any::<PartitionContext>(),
        status in 1_u32..6000,
    ) {
        fetched_round_trip(&payloads, context, status)?;
    }

    #[test]
    fn polled_round_trips(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..50), 0..4),
        context in any::<PartitionContext>(),
        dialect in any::<Dialect>(),
    ) {
        let records = stamped_records(&payloads);
        let old = dialect == Dialect::V0_11_0;
        let context = if old { PartitionContext::default() } else { context };
        let polled = polled_messages(&records, payloads.len(), context);
        let bytes = encode_to_vec(&polled, dialect);
        prop_assert_eq!(bytes.len(), poll_head_length(dialect) + records.len());
        prop_assert_eq!(decode_exact::<PolledMessages<'_>>(&bytes, dialect).unwrap(), polled);
    }

    #[test]
    fn send_round_trips(
        stream_id in any::<Identifier>(),
        topic_id in any::<Identifier>(),
        partitioning in any::<Partitioning>(),
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..50), 1..4),
        dialect in any::<Dialect>(),
    ) {
        let messages: Vec<_> = payloads.iter().map(|p| outgoing(p)).collect();
        let mut batch_bytes = Vec::new();
        encode_batch(&messages, None, &mut batch_bytes).unwrap();
        let batch = Batch::parse(&batch_bytes, dialect, Integrity::Full, 0).unwrap();
        let send = SendMessages { stream_id, topic_id, partitioning, batch, batch_offset: 0 };
        let bytes = encode_to_vec(&send, dialect);
        let decoded = decode_exact::<SendMessages<'_>>(&bytes, dialect).unwrap();
        prop_assert_eq!(decoded.batch_offset, bytes.len() - batch_bytes.len());
        prop_assert_eq!(decoded, send);
    }

    #[test]
    fn small_types_round_trip(
        confirmations in any::<SendConfirmations>(),
        route in any::<PartitionRoute>(),
        request in any::<GetPartitionRoute>(),
        dialect in any::<Dialect>(),
    ) {
        round_trip(&confirmations, dialect)?;
        round_trip(&route, dialect)?;
        round_trip(&request, dialect)?;
    }
}

fn round_trip<T: for<'a> Codec<'a> + PartialEq + core::fmt::Debug>(
    value: &T,
    dialect: Dialect,
) -> Result<(), TestCaseError> {
    let bytes = encode_to_vec(value, dialect);
    prop_assert_eq!(&decode_exact::<T>(&bytes, dialect).unwrap(), value);
    Ok(())
}

fn outgoing(payload: &[u8]) -> OutgoingMessage<'_> {
    OutgoingMessage {
        id: 5,
        origin_timestamp: ORIGIN,
        payload,
        user_headers: &[],
    }
}

fn polled_messages(
    records: &[u8],
    batches: usize,
    context: PartitionContext,
) -> PolledMessages<'_> {
    let messages_count = u32::try_from(batches * 2).unwrap();
    PolledMessages {
        partition_id: 3,
        current_offset: 7,
        messages_count,
        context,
        records,
    }
}

fn fetched_round_trip(
    payloads: &[Vec<u8>],
    context: PartitionContext,
    status: u32,
) -> Result<(), TestCaseError> {
    let records = stamped_records(payloads);
    let ok = FetchSection {
        partition_id: 1,
        status: 0,
        current_offset: 9,
        messages_count: u32::try_from(payloads.len() * 2).unwrap(),
        context,
        next_offset: 10,
        records: &records,
    };
    let refused = FetchSection {
        partition_id: 2,
        status,
        current_offset: 0,
        messages_count: 0,
        context,
        next_offset: 0,
        records: &[],
    };
    let fetched = FetchedMessages {
        sections: alloc::vec![ok, refused],
    };
    let bytes = encode_to_vec(&fetched, Dialect::V0_12_2);
    let decoded = decode_exact::<FetchedMessages<'_>>(&bytes, Dialect::V0_12_2).unwrap();
    prop_assert_eq!(decoded, fetched);
    Ok(())
}

#[test]
fn send_refusals_carry_the_protocols_payload_codes() {
    let mut body = send_body(&hello_batch());
    // payload_length of the only frame, 26 (batch start) + 256 + 36.
    let at = 26 + 256 + 36;
    for (length, code) in [
        (0_u32, crate::ErrorCode::InvalidMessagePayloadLength),
        (64_000_001, crate::ErrorCode::TooBigMessagePayload),
    ] {
        body[at..at + 4].copy_from_slice(&length.to_le_bytes());
        let error = decode_exact::<SendMessages<'_>>(&body, Dialect::V0_12_2).unwrap_err();
        assert_eq!(error.status(), code, "payload length {length}");
    }
    let mut body = send_body(&hello_batch());
    let headers_at = 26 + 256 + 32;
    body[headers_at..headers_at + 4].copy_from_slice(&100_001_u32.to_le_bytes());
    let error = decode_exact::<SendMessages<'_>>(&body, Dialect::V0_12_2).unwrap_err();
    assert_eq!(error.status(), crate::ErrorCode::TooBigUserHeaders);
}

//! The 0.11.0 message plane: batches (no producer section) and `SEND_MESSAGES` bodies the SDK
//! encodes decode with `proto::batch` and `proto::commands::messages`; batches, 16-byte-head
//! poll replies and send confirmations `proto` encodes decode with the SDK. Poll requests are
//! checked both ways. Deferred polls, fetches and routes do not exist in this dialect.

mod common;

use bytes::BytesMut;
use common::{DIALECT, our_bytes, ours, sdk_decode, sdk_encode};
use iggy_binary_protocol::batch::{BatchIntegrity, decode_batch_slice, decode_batch_slice_with};
use iggy_binary_protocol::requests::messages::{
    PollMessagesRequest, RawMessage, SendMessagesEncoder, SendMessagesHeader,
};
use iggy_binary_protocol::responses::messages::PollMessagesResponse;
use iggy_binary_protocol::{
    WireConsumer, WireIdentifier, WirePartitioning, WirePollingStrategy, encode_user_headers,
};
use proto::batch::{Batch, Integrity, OutgoingMessage, Producer, encode_batch, stamp};
use proto::commands::messages::Confirmation;
use proto::commands::messages::{PolledMessages, SendConfirmations, SendMessages};
use proto::commands::poll_selector::PollSelector;
use proto::header::PartitionContext;
use proto::primitives::{
    Consumer, ConsumerKind, Identifier, OptionalPartition, Partitioning, PollingStrategy,
};

const ORIGIN_US: u64 = 1_700_000_000_000_000;

/// A user-headers block with one string and one u64 header, built by the SDK's encoder.
fn sdk_user_headers() -> Vec<u8> {
    let mut buf = BytesMut::new();
    let value = 42_u64.to_le_bytes();
    encode_user_headers(&[(2, b"trace", 2, b"abc"), (2, b"n", 12, &value)], &mut buf);
    buf.to_vec()
}

struct Sample {
    id: u128,
    origin_timestamp: u64,
    payload: Vec<u8>,
    headers: Vec<u8>,
}

fn samples() -> Vec<Sample> {
    vec![
        Sample {
            id: 1,
            origin_timestamp: ORIGIN_US,
            payload: b"hello".to_vec(),
            headers: vec![],
        },
        Sample {
            id: u128::MAX,
            origin_timestamp: ORIGIN_US + 250,
            payload: vec![0xee; 1000],
            headers: sdk_user_headers(),
        },
        Sample {
            id: 0x0123_4567_89ab_cdef,
            origin_timestamp: ORIGIN_US + u64::from(u32::MAX),
            payload: vec![7],
            headers: vec![],
        },
    ]
}

fn raw(samples: &[Sample]) -> Vec<RawMessage<'_>> {
    samples
        .iter()
        .map(|s| RawMessage {
            id: s.id,
            origin_timestamp: s.origin_timestamp,
            headers: (!s.headers.is_empty()).then_some(s.headers.as_slice()),
            payload: &s.payload,
        })
        .collect()
}

fn outgoing(samples: &[Sample]) -> Vec<OutgoingMessage<'_>> {
    samples
        .iter()
        .map(|s| OutgoingMessage {
            id: s.id,
            origin_timestamp: s.origin_timestamp,
            payload: &s.payload,
            user_headers: &s.headers,
        })
        .collect()
}

/// Checks the messages of one of our batch views against the samples.
fn assert_ours_carry(batch: &Batch<'_>, samples: &[Sample]) {
    let origin = samples.iter().map(|s| s.origin_timestamp).min().unwrap();
    assert_eq!(batch.header().origin_timestamp.get(), origin);
    assert_eq!(batch.message_count() as usize, samples.len());
    let messages: Vec<_> = batch.messages().collect();
    assert_eq!(messages.len(), samples.len());
    for (index, (message, sample)) in messages.iter().zip(samples).enumerate() {
        assert_eq!(message.header.id.get(), sample.id);
        assert_eq!(message.header.offset_delta.get() as usize, index);
        let delta = u64::from(message.header.timestamp_delta.get());
        assert_eq!(origin + delta, sample.origin_timestamp);
        assert_eq!(message.payload, sample.payload.as_slice());
        assert_eq!(message.user_headers, sample.headers.as_slice());
    }
}

fn sdk_send_body(
    stream: &WireIdentifier,
    topic: &WireIdentifier,
    partitioning: &WirePartitioning,
    samples: &[Sample],
) -> Vec<u8> {
    let mut buf = BytesMut::new();
    SendMessagesEncoder::encode(&mut buf, stream, topic, partitioning, &raw(samples))
        .expect("SDK encodes the send");
    assert_eq!(
        buf.len(),
        SendMessagesEncoder::encoded_size(stream, topic, partitioning, &raw(samples))
    );
    buf.to_vec()
}

#[test]
fn sdk_send_bodies_decode_with_ours() {
    let samples = samples();
    let routes = [
        (
            WireIdentifier::numeric(1),
            WireIdentifier::numeric(2),
            WirePartitioning::Balanced,
        ),
        (
            WireIdentifier::named("orders").unwrap(),
            WireIdentifier::named("eu").unwrap(),
            WirePartitioning::messages_key(b"user-7".to_vec()).unwrap(),
        ),
        (
            WireIdentifier::numeric(9),
            WireIdentifier::numeric(0),
            WirePartitioning::PartitionId(3),
        ),
    ];
    for (stream, topic, partitioning) in &routes {
        for count in 1..=samples.len() {
            let body = sdk_send_body(stream, topic, partitioning, &samples[..count]);
            let send: SendMessages<'_> = ours(&body);
            assert_eq!(send.stream_id, ours::<Identifier>(&sdk_encode(stream)));
            assert_eq!(send.topic_id, ours::<Identifier>(&sdk_encode(topic)));
            assert_eq!(
                send.partitioning,
                ours::<Partitioning>(&sdk_encode(partitioning))
            );
            assert_eq!(&body[send.batch_offset..], send.batch.as_bytes());
            assert_ours_carry(&send.batch, &samples[..count]);
            assert_eq!(send.batch.producer(), None);
            // Our re-encoding of the decoded send is the SDK's bytes again.
            assert_eq!(our_bytes(&send), body);
        }
    }
}

#[test]
fn our_batches_verify_with_the_sdk() {
    let samples = samples();
    for count in 1..=samples.len() {
        let mut bytes = Vec::new();
        encode_batch(&outgoing(&samples[..count]), None, &mut bytes).unwrap();
        let sdk = decode_batch_slice(&bytes).expect("SDK verifies our batch");
        assert_eq!(sdk.header.total_size(), bytes.len());
        assert_eq!(sdk.message_count() as usize, count);
        for (index, (view, sample)) in sdk.iter().zip(&samples).enumerate() {
            assert_eq!(view.header.id, sample.id);
            assert_eq!(view.header.offset_delta as usize, index);
            let origin = sdk.header.origin_timestamp + u64::from(view.header.timestamp_delta);
            assert_eq!(origin, sample.origin_timestamp);
            assert_eq!(view.payload, sample.payload.as_slice());
            assert_eq!(view.user_headers, sample.headers.as_slice());
        }
    }
}

#[test]
fn our_send_bodies_decode_with_the_sdk() {
    let samples = samples();
    let mut batch = Vec::new();
    encode_batch(&outgoing(&samples), None, &mut batch).unwrap();
    let send = SendMessages {
        stream_id: Identifier::name("orders").unwrap(),
        topic_id: Identifier::Numeric(4),
        partitioning: Partitioning::PartitionId(2),
        batch: Batch::parse(&batch, DIALECT, Integrity::Full, 0).unwrap(),
        batch_offset: 0,
    };
    let body = our_bytes(&send);
    let metadata_length = u32::from_le_bytes(body[..4].try_into().unwrap()) as usize;
    let header: SendMessagesHeader = sdk_decode(&body[4..4 + metadata_length]);
    assert_eq!(header.stream_id, WireIdentifier::named("orders").unwrap());
    assert_eq!(header.topic_id, WireIdentifier::numeric(4));
    assert_eq!(header.partitioning, WirePartitioning::PartitionId(2));
    assert_eq!(header.messages_count as usize, samples.len());
    let sdk = decode_batch_slice(&body[4 + metadata_length..]).expect("SDK verifies");
    assert_eq!(sdk.header.total_size(), body.len() - 4 - metadata_length);
}

/// A stored record as a server serves it: encoded, then stamped with offset and time.
fn stored_record(samples: &[Sample], base_offset: u64, base_timestamp: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_batch(&outgoing(samples), None, &mut bytes).unwrap();
    stamp(&mut bytes, base_offset, base_timestamp).unwrap();
    bytes
}

/// The producer section is 0.12.2 only: the 0.11.0 SDK refuses a batch carrying one, and so
/// does our decoder in this dialect.
#[test]
fn producer_sections_are_refused_in_this_dialect() {
    let producer = Producer {
        producer_id: 1,
        epoch: 0,
        base_sequence: 0,
    };
    let mut bytes = Vec::new();
    encode_batch(&outgoing(&samples()), Some(producer), &mut bytes).unwrap();
    assert!(decode_batch_slice(&bytes).is_err());
    assert!(Batch::parse(&bytes, DIALECT, Integrity::Full, 0).is_err());
}

#[test]
fn stamped_batches_still_verify_with_the_sdk() {
    let bytes = stored_record(&samples(), 1000, ORIGIN_US + 5_000);
    let sdk = decode_batch_slice_with(&bytes, BatchIntegrity::Verify).expect("SDK verifies");
    assert_eq!(sdk.header.base_offset, 1000);
    assert_eq!(sdk.header.base_timestamp, ORIGIN_US + 5_000);
}

#[test]
fn our_poll_replies_decode_with_the_sdk() {
    let samples = samples();
    let mut records = stored_record(&samples[..2], 10, ORIGIN_US + 1);
    records.extend(stored_record(&samples[2..], 12, ORIGIN_US + 2));
    // 0.11.0 has no context in the poll head: neither written nor read.
    let context = PartitionContext::default();
    for (records, count) in [(&records[..], 3), (&[][..], 0)] {
        let reply = PolledMessages {
            partition_id: 1,
            current_offset: 12,
            messages_count: count,
            context,
            records,
        };
        let body = our_bytes(&reply);
        let sdk = PollMessagesResponse::decode(&body).expect("SDK poll head");
        assert_eq!(sdk.header.partition_id, 1);
        assert_eq!(sdk.header.current_offset, 12);
        assert_eq!(sdk.header.messages_count, count);
        assert_eq!(body.len(), 16 + records.len(), "a 16-byte head");
        let messages: Vec<_> = sdk
            .messages
            .collect::<Result<_, _>>()
            .expect("SDK walks records");
        assert_eq!(messages.len() as u32, count);
        for (index, (message, sample)) in messages.iter().zip(&samples).enumerate() {
            assert_eq!(message.offset, 10 + index as u64);
            assert_eq!(message.id, sample.id);
            assert_eq!(message.origin_timestamp, sample.origin_timestamp);
            assert_eq!(message.payload, sample.payload.as_slice());
            assert_eq!(message.user_headers, sample.headers.as_slice());
        }
        assert_eq!(
            messages.get(2).map(|m| m.timestamp),
            (count == 3).then_some(ORIGIN_US + 2)
        );
        // And back: our decoder accepts the reply it produced.
        assert_eq!(ours::<PolledMessages<'_>>(&body), reply);
    }
}

#[test]
fn our_sliced_records_decode_with_the_sdk() {
    let samples = samples();
    let stored = stored_record(&samples, 100, ORIGIN_US);
    let batch = Batch::parse(&stored, DIALECT, Integrity::Full, 0).unwrap();
    for (skip, take) in [(0, 3), (1, 1), (1, 2), (2, 1), (0, 1)] {
        let record = batch.slice(skip, take).expect("a non-empty range");
        let mut bytes = record.header.to_vec();
        bytes.extend_from_slice(record.frames);
        let sdk = decode_batch_slice_with(&bytes, BatchIntegrity::Verify)
            .unwrap_or_else(|error| panic!("slice {skip}+{take}: {error:?}"));
        let offsets: Vec<u64> = sdk
            .iter()
            .map(|view| sdk.header.base_offset + u64::from(view.header.offset_delta))
            .collect();
        let wanted: Vec<u64> = (skip..skip + take)
            .map(|index| 100 + index as u64)
            .collect();
        assert_eq!(offsets, wanted, "slice {skip}+{take}");
    }
}

fn sdk_poll(partition_id: Option<u32>, strategy: WirePollingStrategy) -> PollMessagesRequest {
    PollMessagesRequest {
        consumer: WireConsumer::consumer_group(WireIdentifier::named("workers").unwrap()),
        stream_id: WireIdentifier::numeric(1),
        topic_id: WireIdentifier::named("events").unwrap(),
        partition_id,
        strategy,
        count: 100,
        auto_commit: true,
    }
}

fn expected_selector(request: &PollMessagesRequest) -> PollSelector {
    PollSelector {
        consumer: ours::<Consumer>(&sdk_encode(&request.consumer)),
        stream_id: ours::<Identifier>(&sdk_encode(&request.stream_id)),
        topic_id: ours::<Identifier>(&sdk_encode(&request.topic_id)),
        partition: OptionalPartition(request.partition_id),
        strategy: ours::<PollingStrategy>(&sdk_encode(&request.strategy)),
        count: request.count,
        auto_commit: request.auto_commit,
    }
}

#[test]
fn sdk_polls_decode_with_ours() {
    for (partition, strategy) in [
        (Some(0), WirePollingStrategy::offset(5)),
        (None, WirePollingStrategy::next()),
        (Some(u32::MAX), WirePollingStrategy::timestamp(ORIGIN_US)),
    ] {
        let sdk = sdk_poll(partition, strategy);
        let expected = expected_selector(&sdk);
        assert_eq!(expected.consumer.kind, ConsumerKind::ConsumerGroup);
        assert_eq!(ours::<PollSelector>(&sdk_encode(&sdk)), expected);
        assert_eq!(
            sdk_decode::<PollMessagesRequest>(&our_bytes(&expected)),
            sdk
        );
    }
}

#[test]
fn our_send_confirmations_decode_with_the_sdk() {
    let none = our_bytes(&SendConfirmations::default());
    assert!(none.is_empty());
    let decoded = iggy_common::decode_send_confirmations(&none).expect("an empty body");
    assert!(decoded.confirmations.is_empty());

    let one = SendConfirmations(vec![Confirmation {
        stream_id: 1,
        topic_id: 2,
        partition_id: 3,
        base_offset: u64::MAX,
    }]);
    let decoded = iggy_common::decode_send_confirmations(&our_bytes(&one)).expect("one entry");
    assert_eq!(decoded.confirmations.len(), 1);
    let c = &decoded.confirmations[0];
    assert_eq!(
        (c.stream_id, c.topic_id, c.partition_id, c.base_offset),
        (1, 2, 3, u64::MAX)
    );
}

/// The SDK's encoder writes an empty confirmation list as `count = 0`; ours refuses that
/// count (it expects an empty body instead). Servers never decode this reply, so the
/// disagreement only matters to clients built on `proto`.
#[test]
fn sdk_empty_confirmation_list_decodes_with_ours() {
    use iggy_binary_protocol::WireEncode;
    let sdk = iggy_binary_protocol::responses::messages::SendMessagesResponse {
        confirmations: vec![],
    };
    assert_eq!(
        ours::<SendConfirmations>(&sdk.to_bytes()),
        SendConfirmations::default()
    );
}

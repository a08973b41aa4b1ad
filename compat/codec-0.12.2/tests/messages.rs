//! The message plane: batches and `SEND_MESSAGES` bodies the SDK encodes decode with
//! `proto::batch` and `proto::commands::messages`; batches, poll replies, fetch replies, routes
//! and send confirmations `proto` encodes decode with the SDK. Poll, deferred poll, fetch and
//! route requests are checked SDK → proto.

mod common;

use bytes::BytesMut;
use common::{DIALECT, our_bytes, ours, sdk_decode, sdk_encode};
use iggy_binary_protocol::batch::{
    BatchIntegrity, BatchProducer, decode_batch_slice, decode_batch_slice_with,
};
use iggy_binary_protocol::requests::messages::{
    DeferredPollMessagesRequest, FetchMessagesRequest, FetchMessagesTarget,
    GetPartitionRouteRequest, PollMessagesRequest, RawMessage, SendMessagesEncoder,
    SendMessagesHeader,
};
use iggy_binary_protocol::responses::messages::{
    FetchMessagesResponse, PartitionRouteResponse, PollMessagesResponse,
};
use iggy_binary_protocol::{
    PartitionContext as SdkContext, WireConsumer, WireDecode, WireIdentifier, WirePartitioning,
    WirePollingStrategy, encode_user_headers,
};
use proto::batch::{Batch, Integrity, OutgoingMessage, Producer, encode_batch, stamp};
use proto::commands::messages::Confirmation;
use proto::commands::messages::{
    FetchMessages, FetchSection, FetchedMessages, GetPartitionRoute, PartitionRoute,
    PollMessagesDeferred, PolledMessages, SendConfirmations, SendMessages,
};
use proto::commands::poll_selector::PollSelector;
use proto::header::PartitionContext;
use proto::primitives::{
    Consumer, ConsumerKind, Identifier, OptionalPartition, Partitioning, PollingKind,
    PollingStrategy,
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
    producer: Option<BatchProducer>,
    samples: &[Sample],
) -> Vec<u8> {
    let mut buf = BytesMut::new();
    SendMessagesEncoder::encode_with_producer(
        &mut buf,
        stream,
        topic,
        partitioning,
        producer,
        &raw(samples),
    )
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
    let producers = [None, BatchProducer::new(0x7fff_ffff_ffff_ffff, 3, 41)];
    for (stream, topic, partitioning) in &routes {
        for producer in producers {
            for count in 1..=samples.len() {
                let body = sdk_send_body(stream, topic, partitioning, producer, &samples[..count]);
                let send: SendMessages<'_> = ours(&body);
                assert_eq!(send.stream_id, ours::<Identifier>(&sdk_encode(stream)));
                assert_eq!(send.topic_id, ours::<Identifier>(&sdk_encode(topic)));
                assert_eq!(
                    send.partitioning,
                    ours::<Partitioning>(&sdk_encode(partitioning))
                );
                assert_eq!(&body[send.batch_offset..], send.batch.as_bytes());
                assert_ours_carry(&send.batch, &samples[..count]);
                let expected = producer.map(|p| Producer {
                    producer_id: p.producer_id(),
                    epoch: p.epoch(),
                    base_sequence: p.base_sequence(),
                });
                assert_eq!(send.batch.producer(), expected);
                // Our re-encoding of the decoded send is the SDK's bytes again.
                assert_eq!(our_bytes(&send), body);
            }
        }
    }
}

#[test]
fn our_batches_verify_with_the_sdk() {
    let samples = samples();
    let producers = [
        None,
        Some(Producer {
            producer_id: 5 << 20,
            epoch: 0,
            base_sequence: 0,
        }),
    ];
    for producer in producers {
        for count in 1..=samples.len() {
            let mut bytes = Vec::new();
            encode_batch(&outgoing(&samples[..count]), producer, &mut bytes).unwrap();
            let sdk = decode_batch_slice(&bytes).expect("SDK verifies our batch");
            assert_eq!(sdk.header.total_size(), bytes.len());
            assert_eq!(sdk.message_count() as usize, count);
            assert_eq!(
                sdk.header
                    .producer
                    .map(|p| (p.producer_id(), p.epoch(), p.base_sequence())),
                producer.map(|p| (p.producer_id, p.epoch, p.base_sequence))
            );
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
    let context = PartitionContext {
        incarnation: 3,
        owner_generation: 4,
        metadata_op: 5,
    };
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
        assert_eq!(
            sdk.header.context,
            SdkContext {
                incarnation: 3,
                owner_generation: 4,
                metadata_op: 5
            }
        );
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

        for (wait_us, min_count, timeout) in [(0, 1, 1), (30_000_000, 10, 31_000_000)] {
            let deferred = DeferredPollMessagesRequest {
                poll: sdk.clone(),
                wait_us,
                min_count,
                max_bytes: 1 << 20,
                request_timeout_us: timeout,
            };
            let expected = PollMessagesDeferred {
                selector: expected.clone(),
                wait_us,
                min_count,
                max_bytes: 1 << 20,
                request_timeout_us: timeout,
            };
            assert_eq!(
                ours::<PollMessagesDeferred>(&sdk_encode(&deferred)),
                expected
            );
            assert_eq!(
                sdk_decode::<DeferredPollMessagesRequest>(&our_bytes(&expected)),
                deferred
            );
        }
    }
}

/// The limits both decoders enforce on a deferred poll, probed at their edges.
#[test]
fn deferred_poll_limits_agree() {
    let cases = [
        (600_000_000, 1, 344, 630_000_000),
        (600_000_001, 1, 344, 630_000_000),
        (0, 1, 343, 1),
        (0, 0, 344, 1),
        (0, 101, 344, 1),
        (0, 1, 344, 0),
        (1_000, 1, 344, 1_000_999),
        (1_000, 1, 344, 1_001_000),
        (0, 1, 344, 630_000_001),
    ];
    for (wait_us, min_count, max_bytes, request_timeout_us) in cases {
        let sdk = DeferredPollMessagesRequest {
            poll: sdk_poll(Some(1), WirePollingStrategy::next()),
            wait_us,
            min_count,
            max_bytes,
            request_timeout_us,
        };
        let bytes = sdk_encode(&sdk);
        let sdk_ok = DeferredPollMessagesRequest::decode(&bytes).is_ok();
        let ours_ok = proto::codec::decode_exact::<PollMessagesDeferred>(&bytes, DIALECT).is_ok();
        assert_eq!(
            ours_ok, sdk_ok,
            "wait {wait_us} min {min_count} bytes {max_bytes} timeout {request_timeout_us}"
        );
    }
}

fn sdk_fetch() -> FetchMessagesRequest {
    FetchMessagesRequest {
        consumer: WireConsumer::external_group(WireIdentifier::numeric(8)),
        stream_id: WireIdentifier::named("s").unwrap(),
        topic_id: WireIdentifier::numeric(2),
        wait_us: 5_000_000,
        request_timeout_us: 6_000_000,
        min_count: 1,
        count: 500,
        max_bytes: 4 << 20,
        auto_commit: false,
        targets: vec![
            FetchMessagesTarget {
                partition_id: 0,
                strategy: WirePollingStrategy::next(),
                max_bytes: 1 << 20,
                incarnation: 11,
                owner_generation: 12,
            },
            FetchMessagesTarget {
                partition_id: 3,
                strategy: WirePollingStrategy::offset(77),
                max_bytes: 344,
                incarnation: 13,
                owner_generation: 0,
            },
        ],
    }
}

#[test]
fn sdk_fetches_decode_with_ours() {
    let sdk = sdk_fetch();
    sdk.validate().expect("the SDK's own limits");
    let decoded: FetchMessages = ours(&sdk_encode(&sdk));
    assert_eq!(
        decoded.consumer,
        ours::<Consumer>(&sdk_encode(&sdk.consumer))
    );
    assert_eq!(decoded.consumer.kind, ConsumerKind::ExternalGroup);
    assert_eq!(decoded.stream_id, Identifier::name("s").unwrap());
    assert_eq!(decoded.topic_id, Identifier::Numeric(2));
    assert_eq!(
        (
            decoded.wait_us,
            decoded.request_timeout_us,
            decoded.min_count,
            decoded.count
        ),
        (5_000_000, 6_000_000, 1, 500)
    );
    assert_eq!((decoded.max_bytes, decoded.auto_commit), (4 << 20, false));
    assert_eq!(decoded.targets.len(), 2);
    for (ours, sdk) in decoded.targets.iter().zip(&sdk.targets) {
        assert_eq!(ours.partition_id, sdk.partition_id);
        assert_eq!(
            ours.strategy,
            proto::codec::decode_exact(&sdk_encode(&sdk.strategy), DIALECT).unwrap()
        );
        assert_eq!(
            (ours.max_bytes, ours.incarnation, ours.owner_generation),
            (sdk.max_bytes, sdk.incarnation, sdk.owner_generation)
        );
    }
    assert_eq!(decoded.targets[1].strategy.kind, PollingKind::Offset);
    assert_eq!(
        sdk_decode::<FetchMessagesRequest>(&our_bytes(&decoded)),
        sdk
    );
}

#[test]
fn our_fetch_replies_decode_with_the_sdk() {
    let samples = samples();
    let first = stored_record(&samples[..2], 0, ORIGIN_US);
    let second = stored_record(&samples[2..], 40, ORIGIN_US);
    let context = PartitionContext {
        incarnation: 1,
        owner_generation: 2,
        metadata_op: 3,
    };
    let reply = FetchedMessages {
        sections: vec![
            FetchSection {
                partition_id: 0,
                status: 0,
                current_offset: 1,
                messages_count: 2,
                context,
                next_offset: 2,
                records: &first,
            },
            FetchSection {
                partition_id: 3,
                status: 1009,
                current_offset: 0,
                messages_count: 0,
                context: PartitionContext::default(),
                next_offset: 0,
                records: &[],
            },
            FetchSection {
                partition_id: 4,
                status: 0,
                current_offset: 40,
                messages_count: 1,
                context,
                next_offset: 41,
                records: &second,
            },
        ],
    };
    let body = our_bytes(&reply);
    let sdk = FetchMessagesResponse::decode(&body).expect("SDK decodes our fetch reply");
    assert_eq!(sdk.sections.len(), 3);
    for (sdk, ours) in sdk.sections.iter().zip(&reply.sections) {
        let h = &sdk.header;
        assert_eq!(
            (h.partition_id, h.status, h.current_offset),
            (ours.partition_id, ours.status, ours.current_offset)
        );
        assert_eq!(
            (h.messages_count, h.next_offset),
            (ours.messages_count, ours.next_offset)
        );
        assert_eq!(h.records_len as usize, ours.records.len());
        let c = &h.context;
        assert_eq!(
            (c.incarnation, c.owner_generation, c.metadata_op),
            (
                ours.context.incarnation,
                ours.context.owner_generation,
                ours.context.metadata_op
            )
        );
        assert_eq!(sdk.records, ours.records);
    }
    let empty = our_bytes(&FetchedMessages::default());
    assert!(
        FetchMessagesResponse::decode(&empty)
            .expect("an empty fetch")
            .sections
            .is_empty()
    );
}

#[test]
fn routes_both_ways() {
    let sdk = GetPartitionRouteRequest {
        stream_id: WireIdentifier::named("s").unwrap(),
        topic_id: WireIdentifier::numeric(7),
        partition_id: 12,
    };
    let expected = GetPartitionRoute {
        stream_id: Identifier::name("s").unwrap(),
        topic_id: Identifier::Numeric(7),
        partition_id: 12,
    };
    assert_eq!(ours::<GetPartitionRoute>(&sdk_encode(&sdk)), expected);

    let route = PartitionRoute {
        incarnation: 9,
        metadata_op: u64::MAX,
        view: 3,
        partitions_count: 24,
        primary_replica: 0,
    };
    let sdk = PartitionRouteResponse::decode_from(&our_bytes(&route)).expect("exactly 25 bytes");
    assert_eq!(
        sdk,
        PartitionRouteResponse {
            incarnation: 9,
            metadata_op: u64::MAX,
            view: 3,
            partitions_count: 24,
            primary_replica: 0,
        }
    );
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

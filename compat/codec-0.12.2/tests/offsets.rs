//! Consumer offsets 120–122: the requests the SDK encodes decode with
//! `proto::commands::offsets` (every consumer kind of the dialect, with and without a
//! partition, both ack levels); our 20-byte offset reply and the empty store/delete replies
//! (behind the result section of operations 161/162) decode with the SDK. The commands are the
//! same in both dialects but for the consumer kinds (`common::dialect_consumers`), so
//! `codec-0.11.0/tests/offsets.rs` is a link to this file.

mod common;

use common::{ours, ours_request, sdk_encode, sdk_reply};
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::consumer_offsets::{
    DeleteConsumerOffsetRequest, GetConsumerOffsetRequest, StoreConsumerOffsetRequest,
};
use iggy_binary_protocol::responses::EmptyResponse;
use iggy_binary_protocol::responses::consumer_offsets::ConsumerOffsetResponse;
use iggy_binary_protocol::{AckLevel as SdkAck, WireConsumer, WireIdentifier};
use proto::codes::CommandCode;
use proto::commands::offsets::{
    ConsumerOffset, DeleteConsumerOffset, GetConsumerOffset, OffsetSelector, StoreConsumerOffset,
};
use proto::commands::{Empty, Request};
use proto::header::Operation;
use proto::primitives::{AckLevel, Consumer, Identifier, OptionalPartition};

struct Target {
    consumer: WireConsumer,
    stream_id: WireIdentifier,
    topic_id: WireIdentifier,
    partition_id: Option<u32>,
}

impl Target {
    fn selector(&self) -> OffsetSelector {
        OffsetSelector {
            consumer: ours::<Consumer>(&sdk_encode(&self.consumer)),
            stream_id: ours::<Identifier>(&sdk_encode(&self.stream_id)),
            topic_id: ours::<Identifier>(&sdk_encode(&self.topic_id)),
            partition: OptionalPartition(self.partition_id),
        }
    }
}

fn targets() -> Vec<Target> {
    let named = |text: &str| WireIdentifier::named(text).unwrap();
    let mut consumers = vec![
        WireConsumer::consumer(WireIdentifier::numeric(1)),
        WireConsumer::consumer(named("reader-7")),
        WireConsumer::consumer_group(WireIdentifier::numeric(0)),
        WireConsumer::consumer_group(named("billing")),
    ];
    consumers.extend(common::dialect_consumers());
    let mut targets = Vec::new();
    for consumer in consumers {
        for partition_id in [None, Some(0), Some(u32::MAX)] {
            targets.push(Target {
                consumer: consumer.clone(),
                stream_id: named("orders"),
                topic_id: WireIdentifier::numeric(u32::MAX),
                partition_id,
            });
        }
    }
    targets
}

const ACKS: [(SdkAck, AckLevel); 2] = [
    (SdkAck::NoAck, AckLevel::NoAck),
    (SdkAck::Quorum, AckLevel::Quorum),
];

#[test]
fn sdk_get_consumer_offset_requests_decode_with_ours() {
    for target in targets() {
        let sdk = GetConsumerOffsetRequest {
            consumer: target.consumer.clone(),
            stream_id: target.stream_id.clone(),
            topic_id: target.topic_id.clone(),
            partition_id: target.partition_id,
        };
        let expected = GetConsumerOffset {
            selector: target.selector(),
        };
        let bytes = sdk_encode(&sdk);
        assert_eq!(ours::<GetConsumerOffset>(&bytes), expected);
        assert_eq!(
            ours_request(CommandCode::GetConsumerOffset, &bytes),
            Request::GetConsumerOffset(expected)
        );
    }
}

#[test]
fn sdk_offset_writes_decode_with_ours() {
    for target in targets() {
        for (sdk_ack, ack) in ACKS {
            for offset in [0, 1, u64::MAX] {
                let sdk = StoreConsumerOffsetRequest {
                    consumer: target.consumer.clone(),
                    stream_id: target.stream_id.clone(),
                    topic_id: target.topic_id.clone(),
                    partition_id: target.partition_id,
                    offset,
                    ack: sdk_ack,
                };
                let expected = StoreConsumerOffset {
                    selector: target.selector(),
                    offset,
                    ack,
                };
                assert_eq!(ours::<StoreConsumerOffset>(&sdk_encode(&sdk)), expected);
            }
            let sdk = DeleteConsumerOffsetRequest {
                consumer: target.consumer.clone(),
                stream_id: target.stream_id.clone(),
                topic_id: target.topic_id.clone(),
                partition_id: target.partition_id,
                ack: sdk_ack,
            };
            let expected = DeleteConsumerOffset {
                selector: target.selector(),
                ack,
            };
            assert_eq!(ours::<DeleteConsumerOffset>(&sdk_encode(&sdk)), expected);
        }
    }
}

#[test]
fn our_consumer_offset_reply_decodes_with_the_sdk() {
    for (partition_id, current_offset, stored_offset) in [
        (0, 0, 0),
        (3, 1000, 999),
        (u32::MAX, u64::MAX, u64::MAX - 1),
    ] {
        let ours = ConsumerOffset {
            partition_id,
            current_offset,
            stored_offset,
        };
        let sdk: ConsumerOffsetResponse = sdk_reply(
            &Some(ours),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.partition_id, partition_id);
        assert_eq!(sdk.current_offset, current_offset);
        assert_eq!(sdk.stored_offset, stored_offset);
    }
    assert!(common::our_reply(&None::<ConsumerOffset>, Operation::NonReplicated).is_empty());
}

#[test]
fn our_empty_offset_write_replies_decode_with_the_sdk() {
    for (ours, sdk) in [
        (
            Operation::StoreConsumerOffset,
            SdkOperation::StoreConsumerOffset,
        ),
        (
            Operation::DeleteConsumerOffset,
            SdkOperation::DeleteConsumerOffset,
        ),
    ] {
        let _: EmptyResponse = sdk_reply(&Empty, ours, sdk);
    }
}

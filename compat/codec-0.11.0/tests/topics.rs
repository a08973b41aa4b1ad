//! Topic, partition and segment commands: `GET_TOPIC`, `GET_TOPICS`, `CREATE_TOPIC`,
//! `DELETE_TOPIC`, `CREATE_PARTITIONS`, `DELETE_PARTITIONS` and `DELETE_SEGMENTS` requests
//! SDK → proto; topic details (the 0.11.0 header with inline expiry, compression and maximum
//! size, and 40-byte partition records: our context and member lists must not reach the
//! wire; behind a result section for `CREATE_TOPIC`), the counted topic list and the empty
//! write replies proto → SDK.

mod common;

use common::{
    name, our_bytes, our_options, ours, ours_request, sample_names, sample_options, sdk_encode,
    sdk_name, sdk_reply,
};
use iggy_binary_protocol::WireIdentifier;
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::partitions::{
    CreatePartitionsRequest, DeletePartitionsRequest,
};
use iggy_binary_protocol::requests::segments::DeleteSegmentsRequest;
use iggy_binary_protocol::requests::topics::{
    CreateTopicRequest, DeleteTopicRequest, GetTopicRequest, GetTopicsRequest,
};
use iggy_binary_protocol::responses::EmptyResponse;
use iggy_binary_protocol::responses::streams::TopicHeader as SdkTopic;
use iggy_binary_protocol::responses::topics::{GetTopicResponse, GetTopicsResponse};
use proto::codes::CommandCode;
use proto::commands::Empty;
use proto::commands::Request;
use proto::commands::partitions::{CreatePartitions, DeletePartitions, DeleteSegments};
use proto::commands::topics::{
    CreateTopic, DeleteTopic, GetTopic, GetTopics, PartitionResponse, ReplicaIds, TopicDetails,
    TopicHeader, Topics,
};
use proto::header::{Operation, PartitionContext};
use proto::primitives::Identifier;

/// `(stream, topic)` pairs mixing numeric and named identifiers.
fn routes() -> Vec<(WireIdentifier, WireIdentifier)> {
    let named = |text: &str| WireIdentifier::named(text).unwrap();
    vec![
        (WireIdentifier::numeric(0), WireIdentifier::numeric(0)),
        (named("orders"), WireIdentifier::numeric(u32::MAX)),
        (WireIdentifier::numeric(7), named(&"t".repeat(255))),
    ]
}

fn id(sdk: &WireIdentifier) -> Identifier {
    ours(&sdk_encode(sdk))
}

#[test]
fn sdk_topic_lookups_and_deletes_decode_with_ours() {
    for (stream, topic) in routes() {
        let get = sdk_encode(&GetTopicRequest {
            stream_id: stream.clone(),
            topic_id: topic.clone(),
        });
        let expected = GetTopic {
            stream_id: id(&stream),
            topic_id: id(&topic),
        };
        assert_eq!(ours::<GetTopic>(&get), expected);
        let list = sdk_encode(&GetTopicsRequest {
            stream_id: stream.clone(),
        });
        assert_eq!(
            ours_request(CommandCode::GetTopics, &list),
            Request::GetTopics(GetTopics {
                stream_id: id(&stream)
            })
        );
        let delete = sdk_encode(&DeleteTopicRequest {
            stream_id: stream.clone(),
            topic_id: topic.clone(),
        });
        let expected = DeleteTopic {
            stream_id: id(&stream),
            topic_id: id(&topic),
        };
        assert_eq!(ours::<DeleteTopic>(&delete), expected);
    }
}

#[test]
fn sdk_create_topic_requests_decode_with_ours() {
    for (stream, _) in routes() {
        for (text, partitions_count) in sample_names().into_iter().zip([0, 1, 1000, u32::MAX]) {
            for options in sample_options() {
                let sdk = CreateTopicRequest {
                    stream_id: stream.clone(),
                    partitions_count,
                    name: sdk_name(&text),
                    options: options.clone(),
                };
                let expected = CreateTopic {
                    stream_id: id(&stream),
                    partitions_count,
                    name: name(&text),
                    options: our_options(&options),
                };
                let bytes = sdk_encode(&sdk);
                assert_eq!(ours::<CreateTopic>(&bytes), expected);
                assert_eq!(
                    ours_request(CommandCode::CreateTopic, &bytes),
                    Request::CreateTopic(expected)
                );
            }
        }
    }
}

#[test]
fn sdk_partition_and_segment_requests_decode_with_ours() {
    for (stream, topic) in routes() {
        for count in [0, 1, 1000, u32::MAX] {
            let create = sdk_encode(&CreatePartitionsRequest {
                stream_id: stream.clone(),
                topic_id: topic.clone(),
                partitions_count: count,
            });
            let expected = CreatePartitions {
                stream_id: id(&stream),
                topic_id: id(&topic),
                partitions_count: count,
            };
            assert_eq!(ours::<CreatePartitions>(&create), expected);
            let delete = sdk_encode(&DeletePartitionsRequest {
                stream_id: stream.clone(),
                topic_id: topic.clone(),
                partitions_count: count,
            });
            let expected = DeletePartitions {
                stream_id: id(&stream),
                topic_id: id(&topic),
                partitions_count: count,
            };
            assert_eq!(ours::<DeletePartitions>(&delete), expected);
            let segments = sdk_encode(&DeleteSegmentsRequest {
                stream_id: stream.clone(),
                topic_id: topic.clone(),
                partition_id: count / 2,
                segments_count: count,
            });
            let expected = DeleteSegments {
                stream_id: id(&stream),
                topic_id: id(&topic),
                partition_id: count / 2,
                segments_count: count,
            };
            assert_eq!(ours::<DeleteSegments>(&segments), expected);
        }
    }
}

fn headers() -> Vec<TopicHeader> {
    let options = sample_options();
    sample_names()
        .into_iter()
        .enumerate()
        .map(|(index, text)| TopicHeader {
            id: index as u32 + 1,
            created_at_micros: 1_700_000_000_000_000 + index as u64,
            partitions_count: index as u32,
            size_bytes: 1 << (10 * index),
            messages_count: u64::MAX - index as u64,
            name: name(&text),
            options: our_options(&options[index % options.len()]),
            derived_options: our_options(&options[(index + 1) % options.len()]),
            message_expiry_micros: [u64::MAX, 0, 1, 86_400_000_000][index],
            compression: [2, 1, 2, 1][index],
            max_topic_size_bytes: [0, u64::MAX, 1 << 40, 1][index],
        })
        .collect()
}

fn partition(id: u32, members: &[u8], in_sync: &[u8]) -> PartitionResponse {
    PartitionResponse {
        id,
        created_at_micros: 1_700_000_000_000_000 + u64::from(id),
        segments_count: id + 1,
        current_offset: u64::from(id) * 1000,
        size_bytes: u64::MAX - u64::from(id),
        messages_count: u64::from(id) * 1000 + 1,
        context: PartitionContext {
            incarnation: u64::from(id) + 17,
            owner_generation: 0,
            metadata_op: u64::MAX - 3,
        },
        members: ReplicaIds::new(members).unwrap(),
        in_sync_members: ReplicaIds::new(in_sync).unwrap(),
    }
}

fn partitions(count: usize) -> Vec<PartitionResponse> {
    let many: Vec<u8> = (0..=254).collect();
    let samples = [
        partition(0, &[0], &[0]),
        partition(1, &[], &[]),
        partition(2, &[3, 1, 2], &[1]),
        partition(u32::MAX - 1, &many, &many[..10]),
    ];
    samples.into_iter().take(count).collect()
}

fn assert_topic(sdk: &SdkTopic, ours: &TopicHeader, partitions_count: u32) {
    assert_eq!(sdk.id, ours.id);
    assert_eq!(sdk.created_at, ours.created_at_micros);
    assert_eq!(sdk.partitions_count, partitions_count);
    assert_eq!(sdk.message_expiry, ours.message_expiry_micros);
    assert_eq!(sdk.compression_algorithm, ours.compression);
    assert_eq!(sdk.max_topic_size, ours.max_topic_size_bytes);
    assert_eq!(sdk.size_bytes, ours.size_bytes);
    assert_eq!(sdk.messages_count, ours.messages_count);
    assert_eq!(sdk.name.as_str(), ours.name.as_str());
    assert_eq!(sdk.options.as_bytes(), our_bytes(&ours.options));
    assert_eq!(
        sdk.derived_options.as_bytes(),
        our_bytes(&ours.derived_options)
    );
}

fn assert_details(sdk: &GetTopicResponse, ours: &TopicDetails) {
    assert_topic(&sdk.topic, &ours.topic, ours.partitions.len() as u32);
    assert_eq!(sdk.partitions.len(), ours.partitions.len());
    for (sdk, ours) in sdk.partitions.iter().zip(&ours.partitions) {
        assert_eq!(sdk.id, ours.id);
        assert_eq!(sdk.created_at, ours.created_at_micros);
        assert_eq!(sdk.segments_count, ours.segments_count);
        assert_eq!(sdk.current_offset, ours.current_offset);
        assert_eq!(sdk.size_bytes, ours.size_bytes);
        assert_eq!(sdk.messages_count, ours.messages_count);
    }
}

#[test]
fn our_topic_details_decode_with_the_sdk() {
    for (count, topic) in headers().into_iter().enumerate() {
        let details = TopicDetails {
            topic,
            partitions: partitions(count),
        };
        let read: GetTopicResponse = sdk_reply(
            &Some(details.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_details(&read, &details);
        let created: GetTopicResponse =
            sdk_reply(&details, Operation::CreateTopic, SdkOperation::CreateTopic);
        assert_details(&created, &details);
    }
    assert!(common::our_reply(&None::<TopicDetails>, Operation::NonReplicated).is_empty());
}

#[test]
fn our_topic_lists_decode_with_the_sdk() {
    let all = headers();
    for count in 0..=all.len() {
        let records = all[..count].to_vec();
        let sdk: GetTopicsResponse = sdk_reply(
            &Topics(records.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.topics.len(), count);
        for (sdk, ours) in sdk.topics.iter().zip(&records) {
            assert_topic(sdk, ours, ours.partitions_count);
        }
    }
}

#[test]
fn our_empty_topic_write_replies_decode_with_the_sdk() {
    for (ours, sdk) in [
        (Operation::DeleteTopic, SdkOperation::DeleteTopic),
        (Operation::CreatePartitions, SdkOperation::CreatePartitions),
        (Operation::DeletePartitions, SdkOperation::DeletePartitions),
        (Operation::DeleteSegments, SdkOperation::DeleteSegments),
    ] {
        let _: EmptyResponse = sdk_reply(&Empty, ours, sdk);
    }
}

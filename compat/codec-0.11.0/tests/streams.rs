//! Stream commands: `GET_STREAM`, `GET_STREAMS`, `CREATE_STREAM` and `DELETE_STREAM` requests
//! SDK → proto; the stream details (with topic headers, and behind a result section for
//! `CREATE_STREAM`), the stream list and the empty delete reply proto → SDK. 0.11.0 stream
//! records carry one options block (our derived block must not reach the wire); topic headers
//! carry message expiry, compression and maximum size inline.

mod common;

use common::{
    name, our_bytes, our_options, ours, ours_request, sample_names, sample_options, sdk_encode,
    sdk_name, sdk_reply,
};
use iggy_binary_protocol::WireIdentifier;
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::streams::{
    CreateStreamRequest, DeleteStreamRequest, GetStreamRequest, GetStreamsRequest,
};
use iggy_binary_protocol::responses::EmptyResponse;
use iggy_binary_protocol::responses::streams::{
    GetStreamResponse, GetStreamsResponse, StreamResponse as SdkStream, TopicHeader as SdkTopic,
};
use proto::codes::CommandCode;
use proto::commands::streams::{
    CreateStream, DeleteStream, GetStream, StreamDetails, StreamResponse, Streams,
};
use proto::commands::topics::TopicHeader;
use proto::commands::{Empty, Request};
use proto::header::Operation;
use proto::primitives::Identifier;

fn ids() -> Vec<WireIdentifier> {
    vec![
        WireIdentifier::numeric(0),
        WireIdentifier::numeric(u32::MAX),
        WireIdentifier::named("orders").unwrap(),
        WireIdentifier::named("x".repeat(255)).unwrap(),
    ]
}

#[test]
fn sdk_stream_lookups_and_deletes_decode_with_ours() {
    for sdk_id in ids() {
        let stream_id: Identifier = ours(&sdk_encode(&sdk_id));
        let get = sdk_encode(&GetStreamRequest {
            stream_id: sdk_id.clone(),
        });
        assert_eq!(
            ours::<GetStream>(&get),
            GetStream {
                stream_id: stream_id.clone()
            }
        );
        let delete = sdk_encode(&DeleteStreamRequest { stream_id: sdk_id });
        assert_eq!(ours::<DeleteStream>(&delete), DeleteStream { stream_id });
    }
    let list = sdk_encode(&GetStreamsRequest);
    assert_eq!(
        ours_request(CommandCode::GetStreams, &list),
        Request::GetStreams(Empty)
    );
}

#[test]
fn sdk_create_stream_requests_decode_with_ours() {
    for text in sample_names() {
        for options in sample_options() {
            let sdk = CreateStreamRequest {
                name: sdk_name(&text),
                options: options.clone(),
            };
            let expected = CreateStream {
                name: name(&text),
                options: our_options(&options),
            };
            let bytes = sdk_encode(&sdk);
            assert_eq!(ours::<CreateStream>(&bytes), expected);
            assert_eq!(
                ours_request(CommandCode::CreateStream, &bytes),
                Request::CreateStream(expected)
            );
        }
    }
}

/// Topic headers in the 0.11.0 layout, inline settings included.
fn topic_headers() -> Vec<TopicHeader> {
    let options = sample_options();
    sample_names()
        .into_iter()
        .enumerate()
        .map(|(index, text)| TopicHeader {
            id: index as u32,
            created_at_micros: 1_700_000_000_000_000 + index as u64,
            partitions_count: [0, 1, 1000, u32::MAX][index],
            size_bytes: u64::MAX - index as u64,
            messages_count: 10 * index as u64,
            name: name(&text),
            options: our_options(&options[index % options.len()]),
            derived_options: our_options(&options[(index + 2) % options.len()]),
            message_expiry_micros: [0, 1, 3_600_000_000, u64::MAX][index],
            compression: [1, 2, 1, 2][index],
            max_topic_size_bytes: [u64::MAX, 0, 1 << 30, 7][index],
        })
        .collect()
}

fn assert_topic(sdk: &SdkTopic, ours: &TopicHeader) {
    assert_eq!(sdk.id, ours.id);
    assert_eq!(sdk.created_at, ours.created_at_micros);
    assert_eq!(sdk.partitions_count, ours.partitions_count);
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

fn streams() -> Vec<StreamResponse> {
    let options = sample_options();
    sample_names()
        .into_iter()
        .enumerate()
        .map(|(index, text)| StreamResponse {
            id: index as u32 * 1000,
            created_at_micros: 1_700_000_000_000_000 - index as u64,
            topics_count: index as u32,
            size_bytes: 1 << index,
            messages_count: u64::MAX / (index as u64 + 1),
            name: name(&text),
            options: our_options(&options[(index + 1) % options.len()]),
            derived_options: our_options(&options[2]),
        })
        .collect()
}

fn assert_stream(sdk: &SdkStream, ours: &StreamResponse, topics_count: u32) {
    assert_eq!(sdk.id, ours.id);
    assert_eq!(sdk.created_at, ours.created_at_micros);
    assert_eq!(sdk.topics_count, topics_count);
    assert_eq!(sdk.size_bytes, ours.size_bytes);
    assert_eq!(sdk.messages_count, ours.messages_count);
    assert_eq!(sdk.name.as_str(), ours.name.as_str());
    assert_eq!(sdk.options.as_bytes(), our_bytes(&ours.options));
}

#[test]
fn our_stream_details_decode_with_the_sdk() {
    let topics = topic_headers();
    for (count, stream) in streams().into_iter().enumerate() {
        let details = StreamDetails {
            stream,
            topics: topics[..count].to_vec(),
        };
        let sdk: GetStreamResponse = sdk_reply(
            &Some(details.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_stream(&sdk.stream, &details.stream, count as u32);
        assert_eq!(sdk.topics.len(), count);
        for (sdk, ours) in sdk.topics.iter().zip(&details.topics) {
            assert_topic(sdk, ours);
        }
    }
    assert!(common::our_reply(&None::<StreamDetails>, Operation::NonReplicated).is_empty());
}

#[test]
fn our_created_stream_decodes_with_the_sdk() {
    for stream in streams() {
        let details = StreamDetails {
            stream,
            topics: vec![],
        };
        let sdk: GetStreamResponse = sdk_reply(
            &details,
            Operation::CreateStream,
            SdkOperation::CreateStream,
        );
        assert_stream(&sdk.stream, &details.stream, 0);
        assert!(sdk.topics.is_empty());
    }
}

#[test]
fn our_stream_lists_decode_with_the_sdk() {
    let all = streams();
    for count in 0..=all.len() {
        let records = all[..count].to_vec();
        let sdk: GetStreamsResponse = sdk_reply(
            &Streams(records.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.streams.len(), count);
        for (sdk, ours) in sdk.streams.iter().zip(&records) {
            assert_stream(sdk, ours, ours.topics_count);
        }
    }
}

#[test]
fn our_delete_stream_reply_decodes_with_the_sdk() {
    let _: EmptyResponse = sdk_reply(&Empty, Operation::DeleteStream, SdkOperation::DeleteStream);
}

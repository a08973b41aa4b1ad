//! Codes only the 0.11.0 dialect knows: `UPDATE_USER` (35), `FLUSH_UNSAVED_BUFFER` (102),
//! `UPDATE_STREAM` (204), `PURGE_STREAM` (205), `UPDATE_TOPIC` (304) and `PURGE_TOPIC` (305),
//! plus the multi-node codes the stable 0.11.0 crate can encode: `ATTACH_CONSUMER_SESSION`
//! (14), `GET_POLL_ROUTING` (103) and `POLL_MESSAGES_ON_PRIMARY` (104) with the poll body,
//! and `GET_CONSUMER_OFFSET_ROUTING` (123) with the offset body. Requests SDK → proto through
//! `Request::decode`; the routing reply and the empty replies proto → SDK.

mod common;

use common::{
    DIALECT, name, our_options, ours, ours_request, sample_names, sample_options, sdk_encode,
    sdk_name, sdk_reply,
};
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::consumer_offsets::GetConsumerOffsetRequest;
use iggy_binary_protocol::requests::messages::{FlushUnsavedBufferRequest, PollMessagesRequest};
use iggy_binary_protocol::requests::streams::{PurgeStreamRequest, UpdateStreamRequest};
use iggy_binary_protocol::requests::system::AttachConsumerSessionRequest;
use iggy_binary_protocol::requests::topics::{PurgeTopicRequest, UpdateTopicRequest};
use iggy_binary_protocol::requests::users::UpdateUserRequest;
use iggy_binary_protocol::responses::EmptyResponse;
use iggy_binary_protocol::responses::messages::PollRoutingResponse;
use iggy_binary_protocol::{WireConsumer, WireIdentifier, WirePollingStrategy};
use proto::codes::CommandCode;
use proto::commands::legacy::{
    AttachConsumerSession, ConsumerRouting, FlushUnsavedBuffer, GetConsumerOffsetRouting,
    GetPollRouting, LegacyClusterNode, PollMessagesOnPrimary, PurgeStream, PurgeTopic,
    UpdateStream, UpdateTopic, UpdateUser,
};
use proto::commands::offsets::OffsetSelector;
use proto::commands::poll_selector::PollSelector;
use proto::commands::{Empty, Request};
use proto::header::Operation;
use proto::primitives::{Consumer, Identifier, OptionalPartition, PollingStrategy};

fn ids() -> Vec<WireIdentifier> {
    vec![
        WireIdentifier::numeric(0),
        WireIdentifier::numeric(u32::MAX),
        WireIdentifier::named("orders").unwrap(),
        WireIdentifier::named("x".repeat(255)).unwrap(),
    ]
}

fn id(sdk: &WireIdentifier) -> Identifier {
    ours(&sdk_encode(sdk))
}

#[test]
fn legacy_codes_are_known_here_and_unknown_in_0_12_2() {
    for code in [
        CommandCode::AttachConsumerSession,
        CommandCode::UpdateUser,
        CommandCode::FlushUnsavedBuffer,
        CommandCode::GetPollRouting,
        CommandCode::PollMessagesOnPrimary,
        CommandCode::GetConsumerOffsetRouting,
        CommandCode::UpdateStream,
        CommandCode::PurgeStream,
        CommandCode::UpdateTopic,
        CommandCode::PurgeTopic,
    ] {
        assert!(code.is_known_in(DIALECT), "{code:?}");
        assert!(!code.is_known_in(proto::Dialect::V0_12_2), "{code:?}");
    }
}

#[test]
fn sdk_update_user_requests_decode_with_ours() {
    let usernames = [None, Some("renamed"), Some("zażółć-user")];
    for user_id in ids() {
        for username in usernames {
            for status in [None, Some(1), Some(2)] {
                for options in sample_options() {
                    let sdk = UpdateUserRequest {
                        user_id: user_id.clone(),
                        username: username.map(sdk_name),
                        status,
                        options: options.clone(),
                    };
                    let expected = UpdateUser {
                        user_id: id(&user_id),
                        username: username.map(name),
                        status,
                        options: our_options(&options),
                    };
                    let bytes = sdk_encode(&sdk);
                    assert_eq!(
                        ours_request(CommandCode::UpdateUser, &bytes),
                        Request::UpdateUser(expected)
                    );
                }
            }
        }
    }
}

#[test]
fn sdk_flush_requests_decode_with_ours() {
    for (stream, topic) in ids().into_iter().zip(ids().into_iter().rev()) {
        for (partition_id, fsync) in [(0, false), (1, true), (u32::MAX, true)] {
            let sdk = FlushUnsavedBufferRequest {
                stream_id: stream.clone(),
                topic_id: topic.clone(),
                partition_id,
                fsync,
            };
            let expected = FlushUnsavedBuffer {
                stream_id: id(&stream),
                topic_id: id(&topic),
                partition_id,
                fsync,
            };
            assert_eq!(
                ours_request(CommandCode::FlushUnsavedBuffer, &sdk_encode(&sdk)),
                Request::FlushUnsavedBuffer(expected)
            );
        }
    }
}

#[test]
fn sdk_stream_updates_and_purges_decode_with_ours() {
    for stream in ids() {
        for text in sample_names() {
            for options in sample_options() {
                let sdk = UpdateStreamRequest {
                    stream_id: stream.clone(),
                    name: sdk_name(&text),
                    options: options.clone(),
                };
                let expected = UpdateStream {
                    stream_id: id(&stream),
                    name: name(&text),
                    options: our_options(&options),
                };
                assert_eq!(
                    ours_request(CommandCode::UpdateStream, &sdk_encode(&sdk)),
                    Request::UpdateStream(expected)
                );
            }
        }
        let purge = sdk_encode(&PurgeStreamRequest {
            stream_id: stream.clone(),
        });
        assert_eq!(
            ours_request(CommandCode::PurgeStream, &purge),
            Request::PurgeStream(PurgeStream {
                stream_id: id(&stream)
            })
        );
    }
}

#[test]
fn sdk_topic_updates_and_purges_decode_with_ours() {
    for (stream, topic) in ids().into_iter().zip(ids().into_iter().rev()) {
        for text in sample_names() {
            for options in sample_options() {
                let sdk = UpdateTopicRequest {
                    stream_id: stream.clone(),
                    topic_id: topic.clone(),
                    name: sdk_name(&text),
                    options: options.clone(),
                };
                let expected = UpdateTopic {
                    stream_id: id(&stream),
                    topic_id: id(&topic),
                    name: name(&text),
                    options: our_options(&options),
                };
                assert_eq!(
                    ours_request(CommandCode::UpdateTopic, &sdk_encode(&sdk)),
                    Request::UpdateTopic(expected)
                );
            }
        }
        let purge = sdk_encode(&PurgeTopicRequest {
            stream_id: stream.clone(),
            topic_id: topic.clone(),
        });
        let expected = PurgeTopic {
            stream_id: id(&stream),
            topic_id: id(&topic),
        };
        assert_eq!(
            ours_request(CommandCode::PurgeTopic, &purge),
            Request::PurgeTopic(expected)
        );
    }
}

#[test]
fn sdk_attach_consumer_session_decodes_with_ours() {
    for (client, session, metadata_watermark) in [(0, 0, 0), (u128::MAX, 7, 11), (1 << 100, 1, 0)] {
        let sdk = AttachConsumerSessionRequest {
            client_id: client,
            session,
            metadata_watermark,
        };
        let expected = AttachConsumerSession {
            client,
            session,
            metadata_watermark,
        };
        assert_eq!(
            ours_request(CommandCode::AttachConsumerSession, &sdk_encode(&sdk)),
            Request::AttachConsumerSession(expected)
        );
    }
}

fn consumers() -> Vec<WireConsumer> {
    vec![
        WireConsumer::consumer(WireIdentifier::numeric(1)),
        WireConsumer::consumer_group(WireIdentifier::named("workers").unwrap()),
    ]
}

#[test]
fn sdk_routed_polls_decode_with_ours() {
    let strategies = [
        WirePollingStrategy::offset(5),
        WirePollingStrategy::next(),
        WirePollingStrategy::timestamp(1_700_000_000_000_000),
    ];
    for consumer in consumers() {
        for (partition_id, strategy) in [None, Some(0), Some(u32::MAX)]
            .into_iter()
            .zip(strategies.clone())
        {
            let sdk = PollMessagesRequest {
                consumer: consumer.clone(),
                stream_id: WireIdentifier::numeric(1),
                topic_id: WireIdentifier::named("events").unwrap(),
                partition_id,
                strategy,
                count: 100,
                auto_commit: partition_id.is_some(),
            };
            let selector = PollSelector {
                consumer: ours::<Consumer>(&sdk_encode(&sdk.consumer)),
                stream_id: id(&sdk.stream_id),
                topic_id: id(&sdk.topic_id),
                partition: OptionalPartition(partition_id),
                strategy: ours::<PollingStrategy>(&sdk_encode(&sdk.strategy)),
                count: 100,
                auto_commit: sdk.auto_commit,
            };
            let bytes = sdk_encode(&sdk);
            assert_eq!(
                ours_request(CommandCode::GetPollRouting, &bytes),
                Request::GetPollRouting(GetPollRouting {
                    selector: selector.clone()
                })
            );
            assert_eq!(
                ours_request(CommandCode::PollMessagesOnPrimary, &bytes),
                Request::PollMessagesOnPrimary(PollMessagesOnPrimary { selector })
            );
        }
    }
}

#[test]
fn sdk_offset_routing_requests_decode_with_ours() {
    for consumer in consumers() {
        for partition_id in [None, Some(0), Some(u32::MAX)] {
            let sdk = GetConsumerOffsetRequest {
                consumer: consumer.clone(),
                stream_id: WireIdentifier::named("orders").unwrap(),
                topic_id: WireIdentifier::numeric(2),
                partition_id,
            };
            let selector = OffsetSelector {
                consumer: ours::<Consumer>(&sdk_encode(&sdk.consumer)),
                stream_id: id(&sdk.stream_id),
                topic_id: id(&sdk.topic_id),
                partition: OptionalPartition(partition_id),
            };
            assert_eq!(
                ours_request(CommandCode::GetConsumerOffsetRouting, &sdk_encode(&sdk)),
                Request::GetConsumerOffsetRouting(GetConsumerOffsetRouting { selector })
            );
        }
    }
}

#[test]
fn our_routing_reply_decodes_with_the_sdk() {
    for (role, status) in [(0, 0), (1, 3), (1, 4)] {
        let ours = ConsumerRouting {
            client: u128::MAX - 9,
            session: 42,
            metadata_watermark: 1234,
            primary: LegacyClusterNode {
                name: "iggy-node-2".to_owned(),
                ip: "10.0.0.2".to_owned(),
                tcp_port: 8090,
                quic_port: 0,
                http_port: 3000,
                websocket_port: u16::MAX,
                role,
                status,
            },
        };
        let sdk: PollRoutingResponse =
            sdk_reply(&ours, Operation::NonReplicated, SdkOperation::NonReplicated);
        let session = &sdk.consumer_session;
        assert_eq!(session.client_id, ours.client);
        assert_eq!(session.session, ours.session);
        assert_eq!(session.metadata_watermark, ours.metadata_watermark);
        let (sdk, ours) = (&sdk.primary, &ours.primary);
        assert_eq!(sdk.name, ours.name);
        assert_eq!(sdk.ip, ours.ip);
        assert_eq!(
            [
                sdk.tcp_port,
                sdk.quic_port,
                sdk.http_port,
                sdk.websocket_port
            ],
            [
                ours.tcp_port,
                ours.quic_port,
                ours.http_port,
                ours.websocket_port
            ]
        );
        assert_eq!((sdk.role, sdk.status), (ours.role, ours.status));
    }
}

#[test]
fn our_empty_legacy_replies_decode_with_the_sdk() {
    for (ours, sdk) in [
        (Operation::UpdateUser, SdkOperation::UpdateUser),
        (Operation::UpdateStream, SdkOperation::UpdateStream),
        (Operation::PurgeStream, SdkOperation::PurgeStream),
        (Operation::UpdateTopic, SdkOperation::UpdateTopic),
        (Operation::PurgeTopic, SdkOperation::PurgeTopic),
        // FLUSH_UNSAVED_BUFFER and ATTACH_CONSUMER_SESSION.
        (Operation::NonReplicated, SdkOperation::NonReplicated),
    ] {
        let _: EmptyResponse = sdk_reply(&Empty, ours, sdk);
    }
}

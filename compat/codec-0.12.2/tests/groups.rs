//! Consumer group commands 600–606: the requests the SDK encodes decode with
//! `proto::commands::groups`; group details (plain for `GET_CONSUMER_GROUP`, behind a result
//! section for `CREATE_CONSUMER_GROUP`), the group list, the sync assignment and the empty
//! delete/join/leave replies decode with the SDK. The commands are identical in both dialects,
//! so `codec-0.11.0/tests/groups.rs` is a link to this file.

mod common;

use common::{name, ours, ours_request, sample_names, sdk_encode, sdk_name, sdk_reply};
use iggy_binary_protocol::WireIdentifier;
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::consumer_groups::{
    CreateConsumerGroupRequest, DeleteConsumerGroupRequest, GetConsumerGroupRequest,
    GetConsumerGroupsRequest, JoinConsumerGroupRequest, LeaveConsumerGroupRequest,
    SyncConsumerGroupRequest,
};
use iggy_binary_protocol::responses::EmptyResponse;
use iggy_binary_protocol::responses::consumer_groups::{
    ConsumerGroupDetailsResponse, ConsumerGroupResponse as SdkGroup, GetConsumerGroupsResponse,
    SyncConsumerGroupResponse,
};
use proto::codes::CommandCode;
use proto::commands::groups::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupMember, ConsumerGroupResponse,
    ConsumerGroups, CreateConsumerGroup, DeleteConsumerGroup, GetConsumerGroup, GetConsumerGroups,
    JoinConsumerGroup, LeaveConsumerGroup, SyncConsumerGroup,
};
use proto::commands::{Empty, Request};
use proto::header::Operation;
use proto::primitives::Identifier;

/// `(stream, topic, group)` triples mixing numeric and named identifiers.
fn targets() -> Vec<(WireIdentifier, WireIdentifier, WireIdentifier)> {
    let named = |text: &str| WireIdentifier::named(text).unwrap();
    vec![
        (
            WireIdentifier::numeric(0),
            WireIdentifier::numeric(0),
            WireIdentifier::numeric(0),
        ),
        (
            named("orders"),
            WireIdentifier::numeric(u32::MAX),
            named("billing"),
        ),
        (
            WireIdentifier::numeric(9),
            named(&"t".repeat(255)),
            WireIdentifier::numeric(3),
        ),
    ]
}

fn id(sdk: &WireIdentifier) -> Identifier {
    ours(&sdk_encode(sdk))
}

#[test]
fn sdk_group_addressed_requests_decode_with_ours() {
    for (stream, topic, group) in targets() {
        let (stream_id, topic_id, group_id) = (id(&stream), id(&topic), id(&group));
        let (s, t, g) = (stream.clone(), topic.clone(), group.clone());
        let cases = [
            (
                CommandCode::GetConsumerGroup,
                sdk_encode(&GetConsumerGroupRequest {
                    stream_id: s.clone(),
                    topic_id: t.clone(),
                    group_id: g.clone(),
                }),
            ),
            (
                CommandCode::DeleteConsumerGroup,
                sdk_encode(&DeleteConsumerGroupRequest {
                    stream_id: s.clone(),
                    topic_id: t.clone(),
                    group_id: g.clone(),
                }),
            ),
            (
                CommandCode::JoinConsumerGroup,
                sdk_encode(&JoinConsumerGroupRequest {
                    stream_id: s.clone(),
                    topic_id: t.clone(),
                    group_id: g.clone(),
                }),
            ),
            (
                CommandCode::LeaveConsumerGroup,
                sdk_encode(&LeaveConsumerGroupRequest {
                    stream_id: s.clone(),
                    topic_id: t.clone(),
                    group_id: g.clone(),
                }),
            ),
            (
                CommandCode::SyncConsumerGroup,
                sdk_encode(&SyncConsumerGroupRequest {
                    stream_id: s,
                    topic_id: t,
                    group_id: g,
                }),
            ),
        ];
        for (code, bytes) in cases {
            let (stream_id, topic_id, group_id) =
                (stream_id.clone(), topic_id.clone(), group_id.clone());
            let expected = match code {
                CommandCode::GetConsumerGroup => Request::GetConsumerGroup(GetConsumerGroup {
                    stream_id,
                    topic_id,
                    group_id,
                }),
                CommandCode::DeleteConsumerGroup => {
                    Request::DeleteConsumerGroup(DeleteConsumerGroup {
                        stream_id,
                        topic_id,
                        group_id,
                    })
                }
                CommandCode::JoinConsumerGroup => Request::JoinConsumerGroup(JoinConsumerGroup {
                    stream_id,
                    topic_id,
                    group_id,
                }),
                CommandCode::LeaveConsumerGroup => {
                    Request::LeaveConsumerGroup(LeaveConsumerGroup {
                        stream_id,
                        topic_id,
                        group_id,
                    })
                }
                _ => Request::SyncConsumerGroup(SyncConsumerGroup {
                    stream_id,
                    topic_id,
                    group_id,
                }),
            };
            assert_eq!(ours_request(code, &bytes), expected);
        }
    }
}

#[test]
fn sdk_group_list_and_create_requests_decode_with_ours() {
    for (stream, topic, _) in targets() {
        let list = sdk_encode(&GetConsumerGroupsRequest {
            stream_id: stream.clone(),
            topic_id: topic.clone(),
        });
        let expected = GetConsumerGroups {
            stream_id: id(&stream),
            topic_id: id(&topic),
        };
        assert_eq!(ours::<GetConsumerGroups>(&list), expected);
        for text in sample_names() {
            let create = sdk_encode(&CreateConsumerGroupRequest {
                stream_id: stream.clone(),
                topic_id: topic.clone(),
                name: sdk_name(&text),
            });
            let expected = CreateConsumerGroup {
                stream_id: id(&stream),
                topic_id: id(&topic),
                name: name(&text),
            };
            assert_eq!(ours::<CreateConsumerGroup>(&create), expected);
        }
    }
}

fn groups() -> Vec<ConsumerGroupResponse> {
    sample_names()
        .into_iter()
        .enumerate()
        .map(|(index, text)| ConsumerGroupResponse {
            id: index as u32,
            partitions_count: [0, 1, 1000, u32::MAX][index],
            members_count: index as u32,
            name: name(&text),
        })
        .collect()
}

fn members(count: usize) -> Vec<ConsumerGroupMember> {
    let samples = [
        ConsumerGroupMember {
            id: 0,
            partition_ids: vec![],
        },
        ConsumerGroupMember {
            id: 1,
            partition_ids: vec![0, 2, 4],
        },
        ConsumerGroupMember {
            id: u32::MAX,
            partition_ids: (0..1000).collect(),
        },
    ];
    samples.into_iter().take(count).collect()
}

fn assert_group(sdk: &SdkGroup, ours: &ConsumerGroupResponse, members_count: u32) {
    assert_eq!(sdk.id, ours.id);
    assert_eq!(sdk.partitions_count, ours.partitions_count);
    assert_eq!(sdk.members_count, members_count);
    assert_eq!(sdk.name.as_str(), ours.name.as_str());
}

fn assert_details(sdk: &ConsumerGroupDetailsResponse, ours: &ConsumerGroupDetails) {
    assert_group(&sdk.group, &ours.group, ours.members.len() as u32);
    assert_eq!(sdk.members.len(), ours.members.len());
    for (sdk, ours) in sdk.members.iter().zip(&ours.members) {
        assert_eq!(sdk.id, ours.id);
        assert_eq!(sdk.partitions_count as usize, ours.partition_ids.len());
        assert_eq!(sdk.partitions, ours.partition_ids);
    }
}

#[test]
fn our_group_details_decode_with_the_sdk() {
    for (count, group) in groups().into_iter().take(3).enumerate() {
        let details = ConsumerGroupDetails {
            group,
            members: members(count),
        };
        let read: ConsumerGroupDetailsResponse = sdk_reply(
            &Some(details.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_details(&read, &details);
        let created = ConsumerGroupDetails {
            members: vec![],
            ..details
        };
        let sdk: ConsumerGroupDetailsResponse = sdk_reply(
            &created,
            Operation::CreateConsumerGroup,
            SdkOperation::CreateConsumerGroup,
        );
        assert_details(&sdk, &created);
    }
    assert!(common::our_reply(&None::<ConsumerGroupDetails>, Operation::NonReplicated).is_empty());
}

#[test]
fn our_group_lists_decode_with_the_sdk() {
    let all = groups();
    for count in 0..=all.len() {
        let records = all[..count].to_vec();
        let sdk: GetConsumerGroupsResponse = sdk_reply(
            &ConsumerGroups(records.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.groups.len(), count);
        for (sdk, ours) in sdk.groups.iter().zip(&records) {
            assert_group(sdk, ours, ours.members_count);
        }
    }
}

#[test]
fn our_sync_assignments_decode_with_the_sdk() {
    for (generation, partition_ids) in [
        (0, vec![]),
        (1, vec![7]),
        (u64::MAX, (0..1000).rev().collect::<Vec<u32>>()),
    ] {
        let ours = ConsumerGroupAssignment {
            generation,
            partition_ids: partition_ids.clone(),
        };
        let sdk: SyncConsumerGroupResponse = sdk_reply(
            &Some(ours),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.generation, generation);
        assert_eq!(sdk.partitions, partition_ids);
    }
    let none = None::<ConsumerGroupAssignment>;
    assert!(common::our_reply(&none, Operation::NonReplicated).is_empty());
}

#[test]
fn our_empty_group_write_replies_decode_with_the_sdk() {
    for (ours, sdk) in [
        (
            Operation::DeleteConsumerGroup,
            SdkOperation::DeleteConsumerGroup,
        ),
        (
            Operation::JoinConsumerGroup,
            SdkOperation::JoinConsumerGroup,
        ),
        (
            Operation::LeaveConsumerGroup,
            SdkOperation::LeaveConsumerGroup,
        ),
    ] {
        let _: EmptyResponse = sdk_reply(&Empty, ours, sdk);
    }
}

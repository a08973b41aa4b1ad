//! System commands in the 0.11.0 dialect: the requests the SDK encodes for `PING`,
//! `GET_STATS`, `GET_SNAPSHOT_FILE`, `GET_CLUSTER_METADATA`, `DESCRIBE_OPTIONS`, `GET_ME`,
//! `GET_CLIENT` and `GET_CLIENTS` decode with `proto::commands::system`, and our replies
//! (stats without the open-files tail, snapshot, roster without replica ids, option catalog
//! without flags, client details and lists, the empty `PING` reply) decode with the SDK.
//! `UPDATE_RESOURCE` and `GET_METADATA_CHANGES` do not exist in this dialect.

mod common;

use common::{DIALECT, name, ours, ours_request, sdk_encode, sdk_reply, sdk_reply_prefix};
use iggy_binary_protocol::consensus::Operation as SdkOperation;
use iggy_binary_protocol::requests::system::{
    DescribeOptionsRequest, GetClientRequest, GetClientsRequest, GetClusterMetadataRequest,
    GetMeRequest, GetSnapshotRequest, GetStatsRequest, OPTIONS_SCOPE_STREAM, OPTIONS_SCOPE_TOPIC,
    OPTIONS_SCOPE_USER, PingRequest,
};
use iggy_binary_protocol::responses::EmptyResponse;
use iggy_binary_protocol::responses::clients::get_client::ClientDetailsResponse;
use iggy_binary_protocol::responses::clients::get_clients::GetClientsResponse;
use iggy_binary_protocol::responses::system::describe_options::DescribeOptionsResponse;
use iggy_binary_protocol::responses::system::get_cluster_metadata::ClusterMetadataResponse;
use iggy_binary_protocol::responses::system::get_snapshot::GetSnapshotResponse;
use iggy_binary_protocol::responses::system::get_stats::StatsResponse;
use proto::codes::CommandCode;
use proto::commands::system::{
    CacheMetric, ClientDetails, ClientGroup, ClientInfo, Clients, ClusterMetadata, ClusterNode,
    DescribeOptions, GetClient, NodeRole, NodeStatus, OptionDescriptor, OptionDescriptors,
    OptionScope, SnapshotCompression, SnapshotFile, SnapshotRequest, SnapshotType, Stats,
    Transport,
};
use proto::commands::{Empty, Request};
use proto::header::Operation;
use proto::primitives::HeaderKind;

#[test]
fn sdk_empty_system_requests_decode_with_ours() {
    let cases = [
        (CommandCode::Ping, sdk_encode(&PingRequest)),
        (CommandCode::GetStats, sdk_encode(&GetStatsRequest)),
        (
            CommandCode::GetClusterMetadata,
            sdk_encode(&GetClusterMetadataRequest),
        ),
        (CommandCode::GetMe, sdk_encode(&GetMeRequest)),
        (CommandCode::GetClients, sdk_encode(&GetClientsRequest)),
    ];
    for (code, bytes) in cases {
        let request = ours_request(code, &bytes);
        assert_eq!(request.code(), code);
        assert!(matches!(
            request,
            Request::Ping(Empty)
                | Request::GetStats(Empty)
                | Request::GetClusterMetadata(Empty)
                | Request::GetMe(Empty)
                | Request::GetClients(Empty)
        ));
    }
}

#[test]
fn our_ping_reply_decodes_with_the_sdk() {
    let _: EmptyResponse = sdk_reply(
        &Empty,
        Operation::NonReplicated,
        SdkOperation::NonReplicated,
    );
}

fn stats(semver: u32, metrics: usize) -> Stats {
    let cache_metrics = (0..metrics)
        .map(|index| CacheMetric {
            stream_id: index as u32,
            topic_id: index as u32 + 1,
            partition_id: u32::MAX - index as u32,
            hits: 1000 * index as u64,
            misses: u64::MAX - index as u64,
            hit_ratio: 0.25 * index as f32,
        })
        .collect();
    Stats {
        process_id: 4242,
        cpu_usage: 12.5,
        total_cpu_usage: 99.75,
        memory_usage: 1 << 30,
        total_memory: 1 << 34,
        available_memory: 1 << 33,
        run_time: 3_600_000_000,
        start_time: 1_700_000_000_000_000,
        read_bytes: 1,
        written_bytes: 2,
        messages_size_bytes: 3,
        streams_count: 4,
        topics_count: 5,
        partitions_count: 6,
        segments_count: 7,
        messages_count: 8,
        clients_count: 9,
        consumer_groups_count: 10,
        hostname: "node-a.example".to_owned(),
        os_name: "Linux".to_owned(),
        os_version: String::new(),
        kernel_version: "6.8.0-zażółć".to_owned(),
        iggy_server_version: "0.9.0".to_owned(),
        iggy_server_semver: semver,
        cache_metrics,
        threads_count: 16,
        free_disk_space: 1 << 40,
        total_disk_space: u64::MAX,
        open_files_count: 321,
        open_files_limit: 1_048_576,
    }
}

#[test]
fn our_stats_reply_decodes_with_the_sdk_which_ignores_the_open_files_tail() {
    for (semver, metrics) in [(9000, 0), (0, 1), (1_002_003, 3)] {
        let ours = stats(semver, metrics);
        let (sdk, unread): (StatsResponse, usize) =
            sdk_reply_prefix(&ours, Operation::NonReplicated, SdkOperation::NonReplicated);
        assert_eq!(
            unread, 16,
            "only the 0.12.2 open-files tail is left for 0.11.0"
        );
        assert_eq!(sdk.process_id, ours.process_id);
        assert_eq!(sdk.cpu_usage, ours.cpu_usage);
        assert_eq!(sdk.total_cpu_usage, ours.total_cpu_usage);
        assert_eq!(
            [sdk.memory_usage, sdk.total_memory, sdk.available_memory],
            [ours.memory_usage, ours.total_memory, ours.available_memory]
        );
        assert_eq!(
            [
                sdk.run_time,
                sdk.start_time,
                sdk.read_bytes,
                sdk.written_bytes
            ],
            [
                ours.run_time,
                ours.start_time,
                ours.read_bytes,
                ours.written_bytes
            ]
        );
        assert_eq!(sdk.messages_size_bytes, ours.messages_size_bytes);
        assert_eq!(
            [
                sdk.streams_count,
                sdk.topics_count,
                sdk.partitions_count,
                sdk.segments_count
            ],
            [
                ours.streams_count,
                ours.topics_count,
                ours.partitions_count,
                ours.segments_count
            ]
        );
        assert_eq!(sdk.messages_count, ours.messages_count);
        assert_eq!(sdk.clients_count, ours.clients_count);
        assert_eq!(sdk.consumer_groups_count, ours.consumer_groups_count);
        assert_eq!(sdk.hostname, ours.hostname);
        assert_eq!(sdk.os_name, ours.os_name);
        assert_eq!(sdk.os_version, ours.os_version);
        assert_eq!(sdk.kernel_version, ours.kernel_version);
        assert_eq!(sdk.iggy_server_version, ours.iggy_server_version);
        assert_eq!(sdk.iggy_server_semver, (semver != 0).then_some(semver));
        assert_eq!(sdk.cache_metrics.len(), metrics);
        for (sdk, ours) in sdk.cache_metrics.iter().zip(&ours.cache_metrics) {
            assert_eq!(
                (sdk.stream_id, sdk.topic_id, sdk.partition_id),
                (ours.stream_id, ours.topic_id, ours.partition_id)
            );
            assert_eq!((sdk.hits, sdk.misses), (ours.hits, ours.misses));
            assert_eq!(sdk.hit_ratio, ours.hit_ratio);
        }
        assert_eq!(sdk.threads_count, ours.threads_count);
        assert_eq!(sdk.free_disk_space, ours.free_disk_space);
        assert_eq!(sdk.total_disk_space, ours.total_disk_space);
    }
}

#[test]
fn sdk_snapshot_requests_decode_with_ours() {
    let type_sets: [&[u8]; 4] = [&[], &[100], &[1, 2, 3], &[4, 5, 6, 1]];
    for compression in 1..=6 {
        for types in type_sets {
            let sdk = GetSnapshotRequest {
                compression,
                snapshot_types: types.to_vec(),
            };
            let expected = SnapshotRequest {
                compression: SnapshotCompression::from_u8(compression).unwrap(),
                types: types
                    .iter()
                    .map(|&kind| SnapshotType::from_u8(kind).unwrap())
                    .collect(),
            };
            assert_eq!(ours::<SnapshotRequest>(&sdk_encode(&sdk)), expected);
        }
    }
}

#[test]
fn our_snapshot_file_decodes_with_the_sdk() {
    for data in [vec![], b"PK\x03\x04".to_vec(), vec![0xa5; 10_000]] {
        let sdk: GetSnapshotResponse = sdk_reply(
            &SnapshotFile(data.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.data, data);
    }
}

fn node(replica_id: u8, role: u8, status: u8) -> ClusterNode {
    ClusterNode {
        replica_id,
        name: format!("iggy-node-{replica_id}"),
        ip: if replica_id.is_multiple_of(2) {
            "127.0.0.1"
        } else {
            "::1"
        }
        .to_owned(),
        tcp_port: 8090,
        quic_port: 8080,
        http_port: 0,
        websocket_port: u16::MAX,
        role: NodeRole::from_u8(role).unwrap(),
        status: NodeStatus::from_u8(status).unwrap(),
    }
}

#[test]
fn our_cluster_metadata_decodes_with_the_sdk() {
    let rosters = [
        vec![],
        vec![node(0, 0, 0)],
        vec![
            node(0, 0, 0),
            node(1, 1, 1),
            node(2, 1, 2),
            node(3, 1, 3),
            node(255, 1, 4),
        ],
    ];
    for nodes in rosters {
        let ours = ClusterMetadata {
            name: "iggy-cluster".to_owned(),
            nodes,
        };
        let sdk: ClusterMetadataResponse =
            sdk_reply(&ours, Operation::NonReplicated, SdkOperation::NonReplicated);
        assert_eq!(sdk.name, ours.name);
        assert_eq!(sdk.nodes.len(), ours.nodes.len());
        for (sdk, ours) in sdk.nodes.iter().zip(&ours.nodes) {
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
            assert_eq!(sdk.role, ours.role.as_u8());
            assert_eq!(sdk.status, ours.status.as_u8());
        }
    }
}

#[test]
fn sdk_describe_options_requests_decode_with_ours() {
    for scope in [
        OPTIONS_SCOPE_TOPIC,
        OPTIONS_SCOPE_STREAM,
        OPTIONS_SCOPE_USER,
    ] {
        let sdk = DescribeOptionsRequest { scope };
        let expected = DescribeOptions {
            scope: OptionScope::from_u8(scope).unwrap(),
        };
        assert_eq!(ours::<DescribeOptions>(&sdk_encode(&sdk)), expected);
    }
}

#[test]
fn our_option_catalog_decodes_with_the_sdk() {
    let entries = [
        OptionDescriptor {
            key: name("message_expiry"),
            kind: HeaderKind::Uint64,
            flags: OptionDescriptor::FLAG_UPDATABLE | OptionDescriptor::FLAG_RESETTABLE,
            default_value: 0_u64.to_le_bytes().to_vec(),
            description: "How long messages are kept, µs".to_owned(),
        },
        OptionDescriptor {
            key: name("encryption_key"),
            kind: HeaderKind::Raw,
            flags: OptionDescriptor::FLAG_SECRET | OptionDescriptor::FLAG_CRITICAL,
            default_value: vec![],
            description: String::new(),
        },
        OptionDescriptor {
            key: name("replication_factor"),
            kind: HeaderKind::Float64,
            flags: OptionDescriptor::FLAG_READ_ONLY,
            default_value: vec![0xff; 255],
            description: "x".repeat(1000),
        },
    ];
    for count in 0..=entries.len() {
        let ours = OptionDescriptors(entries[..count].to_vec());
        let sdk: DescribeOptionsResponse =
            sdk_reply(&ours, Operation::NonReplicated, SdkOperation::NonReplicated);
        assert_eq!(sdk.entries.len(), count);
        for (sdk, ours) in sdk.entries.iter().zip(&ours.0) {
            assert_eq!(sdk.key.as_str(), ours.key.as_str());
            assert_eq!(sdk.kind, ours.kind.as_u8());
            assert_eq!(sdk.default_value.as_ref(), ours.default_value.as_slice());
            assert_eq!(sdk.description, ours.description);
        }
    }
}

#[test]
fn codes_this_dialect_lacks_are_unknown_to_ours() {
    // 0.11.0 clients never send UPDATE_RESOURCE, GET_METADATA_CHANGES or BIND_SESSION.
    for code in [
        CommandCode::UpdateResource,
        CommandCode::GetMetadataChanges,
        CommandCode::BindSession,
    ] {
        assert!(!code.is_known_in(DIALECT));
        assert!(Request::decode(code, &[], DIALECT).is_err());
    }
}

#[test]
fn sdk_get_client_request_decodes_with_ours() {
    for client_id in [0, 1, u32::MAX] {
        let sdk = GetClientRequest { client_id };
        assert_eq!(
            ours::<GetClient>(&sdk_encode(&sdk)),
            GetClient { client_id }
        );
    }
}

fn client(client_id: u32, transport: Transport, groups: u32) -> ClientDetails {
    ClientDetails {
        client_id,
        user_id: if client_id == 1 {
            ClientInfo::USER_ID_UNAUTHENTICATED
        } else {
            client_id * 10
        },
        transport,
        address: format!("127.0.0.1:{}", 50_000 + client_id),
        consumer_groups: (0..groups)
            .map(|group| ClientGroup {
                stream_id: group,
                topic_id: group + 1,
                group_id: u32::MAX - group,
            })
            .collect(),
    }
}

fn clients() -> Vec<ClientDetails> {
    vec![
        client(1, Transport::Tcp, 0),
        client(2, Transport::Quic, 1),
        client(3, Transport::Http, 3),
        client(u32::MAX / 10, Transport::WebSocket, 2),
    ]
}

fn assert_client_details(sdk: &ClientDetailsResponse, ours: &ClientDetails) {
    assert_eq!(sdk.client.client_id, ours.client_id);
    assert_eq!(sdk.client.user_id, ours.user_id);
    assert_eq!(sdk.client.transport, ours.transport.as_u8());
    assert_eq!(sdk.client.address, ours.address);
    assert_eq!(
        sdk.client.consumer_groups_count as usize,
        ours.consumer_groups.len()
    );
    assert_eq!(sdk.consumer_groups.len(), ours.consumer_groups.len());
    for (sdk, ours) in sdk.consumer_groups.iter().zip(&ours.consumer_groups) {
        assert_eq!(
            (sdk.stream_id, sdk.topic_id, sdk.group_id),
            (ours.stream_id, ours.topic_id, ours.group_id)
        );
    }
}

#[test]
fn our_client_details_decode_with_the_sdk_for_get_me_and_get_client() {
    for ours in clients() {
        let sdk: ClientDetailsResponse =
            sdk_reply(&ours, Operation::NonReplicated, SdkOperation::NonReplicated);
        assert_client_details(&sdk, &ours);
        let found: ClientDetailsResponse = sdk_reply(
            &Some(ours.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_client_details(&found, &ours);
    }
    assert!(common::our_reply(&None::<ClientDetails>, Operation::NonReplicated).is_empty());
}

#[test]
fn our_client_lists_decode_with_the_sdk() {
    let all = clients();
    for count in 0..=all.len() {
        let records: Vec<_> = all[..count]
            .iter()
            .map(|details| ClientInfo {
                client_id: details.client_id,
                user_id: details.user_id,
                transport: details.transport,
                address: details.address.clone(),
                consumer_groups_count: details.consumer_groups.len() as u32,
            })
            .collect();
        let sdk: GetClientsResponse = sdk_reply(
            &Clients(records.clone()),
            Operation::NonReplicated,
            SdkOperation::NonReplicated,
        );
        assert_eq!(sdk.clients.len(), count);
        for (sdk, ours) in sdk.clients.iter().zip(&records) {
            assert_eq!(sdk.client_id, ours.client_id);
            assert_eq!(sdk.user_id, ours.user_id);
            assert_eq!(sdk.transport, ours.transport.as_u8());
            assert_eq!(sdk.address, ours.address);
            assert_eq!(sdk.consumer_groups_count, ours.consumer_groups_count);
        }
    }
}

use alloc::string::String;
use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::codec::{decode_exact, encode_to_vec};
use crate::commands::session::tests::{assert_truncations_fail, round_trip};
use crate::primitives::TlvEntry;

impl Arbitrary for UpdateResource {
    type Parameters = ();
    type Strategy = BoxedStrategy<Self>;
    fn arbitrary_with((): ()) -> Self::Strategy {
        let reset = proptest::collection::btree_set(any::<WireName>(), 0..3)
            .prop_map(|keys| ResetKeys::new(keys.into_iter().collect()).unwrap());
        (any::<ResourceTarget>(), reset, any::<OptionsBlock>())
            .prop_filter("a patch changes something", |(_, reset, options)| {
                !(reset.is_empty() && options.is_empty())
            })
            .prop_filter("no key both set and reset", |(_, reset, options)| {
                !options.0.iter().any(|(key, _)| reset.contains(key))
            })
            .prop_map(|(target, reset, options)| UpdateResource {
                target,
                reset,
                options,
            })
            .boxed()
    }
}

fn page_token_strategy() -> impl Strategy<Value = PageToken> {
    (
        any::<MetadataCursor>(),
        any::<u32>(),
        any::<u8>(),
        any::<MetadataGroup>(),
        any::<WireName>(),
    )
        .prop_map(|(anchor, head_gap, mask, group, name)| {
            let key_length = match group {
                MetadataGroup::Streams | MetadataGroup::Users => 4,
                MetadataGroup::ConsumerGroups => 12,
                MetadataGroup::ConsumerGroupMembers => 16,
                _ => 8,
            };
            let mut last_key = alloc::vec![7_u8; key_length];
            if group == MetadataGroup::PersonalAccessTokens {
                last_key.truncate(4);
                last_key.extend_from_slice(&encode_to_vec(&name, Dialect::V0_12_2));
            }
            PageToken {
                anchor,
                required_head: anchor.op.saturating_add(u64::from(head_gap)),
                groups_mask: mask | group.mask_bit(),
                group,
                last_key,
            }
        })
}

impl Arbitrary for MetadataChangesRequest {
    type Parameters = ();
    type Strategy = BoxedStrategy<Self>;
    fn arbitrary_with((): ()) -> Self::Strategy {
        let start = prop_oneof![
            Just(MetadataStart::Earliest),
            Just(MetadataStart::Latest),
            any::<MetadataCursor>().prop_map(MetadataStart::After),
            proptest::option::of(page_token_strategy()).prop_map(MetadataStart::Current),
        ];
        let groups = proptest::collection::vec(any::<MetadataGroup>(), 0..4);
        (
            start,
            any::<Option<u64>>(),
            any::<Option<u64>>(),
            any::<u32>(),
            groups,
        )
            .prop_map(
                |(start, since, until, limit, groups)| MetadataChangesRequest {
                    start,
                    since,
                    until,
                    limit,
                    groups,
                },
            )
            .boxed()
    }
}

impl Arbitrary for MetadataChanges {
    type Parameters = ();
    type Strategy = BoxedStrategy<Self>;
    fn arbitrary_with((): ()) -> Self::Strategy {
        let page = prop_oneof![
            small_vec::<MetadataRecord>().prop_map(MetadataPage::Changes),
            (
                small_vec::<MetadataItem>(),
                proptest::option::of(page_token_strategy())
            )
                .prop_map(|(items, token)| MetadataPage::Current { items, token }),
        ];
        let head = (
            any::<MetadataChangesStatus>(),
            any::<Option<u128>>(),
            any::<[u64; 3]>(),
        );
        (head, any::<Option<MetadataCursor>>(), any::<bool>(), page)
            .prop_map(
                |((status, log_id, ops), next, has_more, page)| MetadataChanges {
                    status,
                    log_id,
                    oldest_op: ops[0],
                    retained_since: ops[1],
                    head_op: ops[2],
                    next,
                    has_more,
                    page,
                },
            )
            .boxed()
    }
}

#[test]
fn metadata_changes_golden_and_refusals() {
    let request = MetadataChangesRequest {
        start: MetadataStart::Latest,
        since: Some(5),
        until: None,
        limit: 10,
        groups: alloc::vec![MetadataGroup::Users],
    };
    let mut expected = Vec::from([1_u8]);
    expected.extend_from_slice(&[0; 44]);
    expected.extend_from_slice(&[1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 1, 6, 0, 0]);
    assert_eq!(round_trip(&request, Dialect::V0_12_2), expected);
    assert_truncations_fail::<MetadataChangesRequest>(&expected, Dialect::V0_12_2);
    let mut cursor_when_latest = expected.clone();
    cursor_when_latest[1] = 1;
    assert!(decode_exact::<MetadataChangesRequest>(&cursor_when_latest, Dialect::V0_12_2).is_err());
    let mut non_canonical = cursor_when_latest.clone();
    non_canonical[0] = 2;
    non_canonical[25] = 1;
    assert!(decode_exact::<MetadataChangesRequest>(&non_canonical, Dialect::V0_12_2).is_err());
    let mut bad_group = expected.clone();
    bad_group[59] = 9;
    assert!(decode_exact::<MetadataChangesRequest>(&bad_group, Dialect::V0_12_2).is_err());

    let reply = MetadataChanges {
        status: MetadataChangesStatus::Ok,
        log_id: None,
        oldest_op: 1,
        retained_since: 2,
        head_op: 3,
        next: None,
        has_more: false,
        page: MetadataPage::Current {
            items: alloc::vec![MetadataItem {
                group: 6,
                body: alloc::vec![9],
            }],
            token: None,
        },
    };
    let bytes = round_trip(&reply, Dialect::V0_12_2);
    assert_truncations_fail::<MetadataChanges>(&bytes, Dialect::V0_12_2);
    let mut changes_with_items = bytes.clone();
    changes_with_items[1] = 0;
    assert!(decode_exact::<MetadataChanges>(&changes_with_items, Dialect::V0_12_2).is_err());
    let mut huge = bytes.clone();
    huge[29..33].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<MetadataChanges>(&huge, Dialect::V0_12_2).is_err());
}

fn text(value: &str) -> String {
    String::from(value)
}

fn golden_cluster() -> ClusterMetadata {
    ClusterMetadata {
        name: text("iggy-cluster"),
        nodes: alloc::vec![ClusterNode {
            replica_id: 0,
            name: text("iggy-node"),
            ip: text("127.0.0.1"),
            tcp_port: 8090,
            quic_port: 8080,
            http_port: 3000,
            websocket_port: 8092,
            role: NodeRole::Leader,
            status: NodeStatus::Healthy,
        }],
    }
}

fn golden_cluster_bytes(dialect: Dialect) -> Vec<u8> {
    let mut bytes = Vec::from(*b"\x0c\x00\x00\x00iggy-cluster\x01\x00\x00\x00");
    if dialect == Dialect::V0_12_2 {
        bytes.push(0);
    }
    bytes.extend_from_slice(b"\x09\x00\x00\x00iggy-node\x09\x00\x00\x00127.0.0.1");
    bytes.extend_from_slice(&[0x9a, 0x1f, 0x90, 0x1f, 0xb8, 0x0b, 0x9c, 0x1f, 0, 0]);
    bytes
}

#[test]
fn golden_cluster_metadata_a9() {
    for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
        let bytes = golden_cluster_bytes(dialect);
        assert_eq!(round_trip(&golden_cluster(), dialect), bytes);
        assert_truncations_fail::<ClusterMetadata>(&bytes, dialect);
        let mut unknown_status = bytes.clone();
        *unknown_status.last_mut().unwrap() = 5;
        assert!(decode_exact::<ClusterMetadata>(&unknown_status, dialect).is_err());
        let mut bad_role = bytes.clone();
        let role = bad_role.len() - 2;
        bad_role[role] = 2;
        assert!(decode_exact::<ClusterMetadata>(&bad_role, dialect).is_err());
    }
    let mut over_long = golden_cluster_bytes(Dialect::V0_12_2);
    over_long[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<ClusterMetadata>(&over_long, Dialect::V0_12_2).is_err());
}

fn stats() -> Stats {
    Stats {
        process_id: 1,
        cpu_usage: 1.5,
        total_cpu_usage: 2.5,
        memory_usage: 3,
        total_memory: 4,
        available_memory: 5,
        run_time: 6,
        start_time: 7,
        read_bytes: 8,
        written_bytes: 9,
        messages_size_bytes: 10,
        streams_count: 11,
        topics_count: 12,
        partitions_count: 13,
        segments_count: 14,
        messages_count: 15,
        clients_count: 16,
        consumer_groups_count: 17,
        hostname: text("host"),
        os_name: text("Linux"),
        os_version: text("6"),
        kernel_version: text("6.1"),
        iggy_server_version: text("0.9.0"),
        iggy_server_semver: 9000,
        cache_metrics: alloc::vec![CacheMetric {
            stream_id: 1,
            topic_id: 2,
            partition_id: 3,
            hits: 4,
            misses: 5,
            hit_ratio: 0.5,
        }],
        threads_count: 18,
        free_disk_space: 19,
        total_disk_space: 20,
        open_files_count: 21,
        open_files_limit: 22,
    }
}

#[test]
fn stats_layout_and_open_files_tail() {
    let full = encode_to_vec(&stats(), Dialect::V0_12_2);
    let strings = 4 * 5 + 4 + 5 + 1 + 3 + 5;
    let base = 108 + strings + 4 + 4 + 32 + 4 + 8 + 8;
    assert_eq!(full.len(), base + 16);
    assert_eq!(&full[108..112], &4_u32.to_le_bytes());
    assert_eq!(&full[base..base + 8], &21_u64.to_le_bytes());
    let old = encode_to_vec(&stats(), Dialect::V0_11_0);
    assert_eq!(old, full[..base]);
    let mut without_tail = stats();
    without_tail.open_files_count = 0;
    without_tail.open_files_limit = 0;
    for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
        assert_eq!(decode_exact::<Stats>(&full, dialect).unwrap(), stats());
        assert_eq!(decode_exact::<Stats>(&old, dialect).unwrap(), without_tail);
        for cut in 1..16 {
            assert!(decode_exact::<Stats>(&full[..base + cut], dialect).is_err());
        }
        for length in 0..base {
            assert!(decode_exact::<Stats>(&full[..length], dialect).is_err());
        }
    }
    let mut huge_count = full.clone();
    let count_at = 108 + strings + 4;
    huge_count[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<Stats>(&huge_count, Dialect::V0_12_2).is_err());
}

#[test]
fn snapshot_request_and_file() {
    let request = SnapshotRequest {
        compression: SnapshotCompression::Deflated,
        types: alloc::vec![SnapshotType::ProcessList, SnapshotType::All],
    };
    assert_eq!(round_trip(&request, Dialect::V0_12_2), [2, 2, 2, 100]);
    assert_truncations_fail::<SnapshotRequest>(&[2, 2, 2, 100], Dialect::V0_12_2);
    for bad in [&[0, 0][..], &[7, 0], &[1, 1, 7], &[1, 1, 0]] {
        assert!(decode_exact::<SnapshotRequest>(bad, Dialect::V0_12_2).is_err());
    }
    let file = SnapshotFile(Vec::from(*b"PK\x03\x04"));
    assert_eq!(round_trip(&file, Dialect::V0_11_0), b"PK\x03\x04");
}

#[test]
fn describe_options_dialects() {
    assert_eq!(
        round_trip(
            &DescribeOptions {
                scope: OptionScope::User
            },
            Dialect::V0_12_2
        ),
        [3]
    );
    for bad in [0_u8, 4] {
        assert!(decode_exact::<DescribeOptions>(&[bad], Dialect::V0_12_2).is_err());
    }
    let entry = OptionDescriptor {
        key: WireName::new("segment_size").unwrap(),
        kind: HeaderKind::Uint64,
        flags: OptionDescriptor::FLAG_UPDATABLE | OptionDescriptor::FLAG_RESETTABLE,
        default_value: Vec::from(1_u64.to_le_bytes()),
        description: text("d"),
    };
    let reply = OptionDescriptors(alloc::vec![entry.clone()]);
    let mut new = Vec::from(*b"\x01\x00\x00\x00\x0csegment_size\x0c\x03\x08\x00\x00\x00");
    new.extend_from_slice(&1_u64.to_le_bytes());
    new.extend_from_slice(b"\x01\x00\x00\x00d");
    assert_eq!(round_trip(&reply, Dialect::V0_12_2), new);
    assert_truncations_fail::<OptionDescriptors>(&new, Dialect::V0_12_2);
    let mut old = new.clone();
    old.remove(18);
    let old_reply = OptionDescriptors(alloc::vec![OptionDescriptor { flags: 0, ..entry }]);
    assert_eq!(round_trip(&old_reply, Dialect::V0_11_0), old);
    let mut bad_kind = new.clone();
    bad_kind[17] = 16;
    assert!(decode_exact::<OptionDescriptors>(&bad_kind, Dialect::V0_12_2).is_err());
}

#[test]
fn update_resource_golden_and_refusals() {
    let mut options = OptionsBlock::default();
    options.set("name", TlvEntry::string("new").unwrap());
    let patch = UpdateResource {
        target: ResourceTarget::Stream {
            stream_id: Identifier::Numeric(1),
        },
        reset: ResetKeys::default(),
        options,
    };
    let expected =
        b"\x02\x01\x04\x01\x00\x00\x00\x00\x02\x04\x00\x00\x00name\x02\x03\x00\x00\x00new";
    assert_eq!(round_trip(&patch, Dialect::V0_12_2), expected);
    let refused: [&[u8]; 5] = [
        b"\x04\x01\x04\x01\x00\x00\x00\x00",
        b"\x02\x01\x04\x01\x00\x00\x00\x00",
        b"\x03\x01\x04\x01\x00\x00\x00\x02\x01k\x01k",
        b"\x02\x01\x04\x01\x00\x00\x00\x01\x04name\x02\x04\x00\x00\x00name\x02\x01\x00\x00\x00x",
        b"\x01\x01\x04\x01\x00\x00\x00\x01\x01k",
    ];
    for body in refused {
        assert!(
            decode_exact::<UpdateResource>(body, Dialect::V0_12_2).is_err(),
            "{body:?}"
        );
    }
    let reset_only = b"\x02\x01\x04\x01\x00\x00\x00\x01\x01k";
    let decoded = decode_exact::<UpdateResource>(reset_only, Dialect::V0_12_2).unwrap();
    assert_eq!(decoded.reset.as_slice(), [WireName::new("k").unwrap()]);
    assert!(ResetKeys::new(alloc::vec![decoded.reset.as_slice()[0].clone(); 2]).is_none());
}

#[test]
fn client_details_and_list() {
    let details = ClientDetails {
        client_id: 7,
        user_id: ClientInfo::USER_ID_UNAUTHENTICATED,
        transport: Transport::Quic,
        address: text("1.2.3.4:5"),
        consumer_groups: alloc::vec![ClientGroup {
            stream_id: 1,
            topic_id: 2,
            group_id: 3,
        }],
    };
    let mut expected = Vec::from(*b"\x07\x00\x00\x00\xff\xff\xff\xff\x02\x09\x00\x00\x001.2.3.4:5");
    expected.extend_from_slice(&[1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
    assert_eq!(round_trip(&details, Dialect::V0_12_2), expected);
    assert_truncations_fail::<ClientDetails>(&expected, Dialect::V0_12_2);
    let info = ClientInfo {
        client_id: 7,
        user_id: ClientInfo::USER_ID_UNAUTHENTICATED,
        transport: Transport::Quic,
        address: text("1.2.3.4:5"),
        consumer_groups_count: 1,
    };
    let clients = Clients(alloc::vec![info.clone(), info]);
    let record = &expected[..expected.len() - 12];
    assert_eq!(
        round_trip(&clients, Dialect::V0_11_0),
        [record, record].concat()
    );
    let mut bad_transport = expected.clone();
    bad_transport[8] = 5;
    assert!(decode_exact::<ClientDetails>(&bad_transport, Dialect::V0_12_2).is_err());
    assert_eq!(
        round_trip(&GetClient { client_id: 7 }, Dialect::V0_12_2),
        [7, 0, 0, 0]
    );
}

fn node_for(mut node: ClusterNode, dialect: Dialect) -> ClusterNode {
    if dialect == Dialect::V0_11_0 {
        node.replica_id = 0;
    }
    node
}

proptest! {
    #[test]
    fn stats_round_trip(mut x in any::<Stats>(), dialect in any::<Dialect>()) {
        if dialect == Dialect::V0_11_0 {
            x.open_files_count = 0;
            x.open_files_limit = 0;
        }
        // NaN never equals itself; compare the bytes instead.
        let bytes = encode_to_vec(&x, dialect);
        let decoded = decode_exact::<Stats>(&bytes, dialect).unwrap();
        prop_assert_eq!(encode_to_vec(&decoded, dialect), bytes);
    }

    #[test]
    fn cluster_round_trips(mut x in any::<ClusterMetadata>(), dialect in any::<Dialect>()) {
        x.nodes = x.nodes.into_iter().map(|node| node_for(node, dialect)).collect();
        round_trip(&x, dialect);
    }

    #[test]
    fn options_round_trip(
        mut descriptors in any::<OptionDescriptors>(),
        describe in any::<DescribeOptions>(),
        patch in any::<UpdateResource>(),
        dialect in any::<Dialect>(),
    ) {
        if dialect == Dialect::V0_11_0 {
            descriptors.0.iter_mut().for_each(|entry| entry.flags = 0);
        }
        round_trip(&descriptors, dialect);
        round_trip(&describe, dialect);
        round_trip(&patch, dialect);
    }

    #[test]
    fn client_and_snapshot_round_trip(
        details in any::<ClientDetails>(),
        clients in any::<Clients>(),
        get in any::<GetClient>(),
        request in any::<SnapshotRequest>(),
        file in any::<SnapshotFile>(),
        dialect in any::<Dialect>(),
    ) {
        round_trip(&details, dialect);
        round_trip(&clients, dialect);
        round_trip(&get, dialect);
        round_trip(&request, dialect);
        round_trip(&file, dialect);
    }

    #[test]
    fn metadata_changes_round_trip(
        request in any::<MetadataChangesRequest>(),
        reply in any::<MetadataChanges>(),
        dialect in any::<Dialect>(),
    ) {
        round_trip(&request, dialect);
        round_trip(&reply, dialect);
    }

    #[test]
    fn system_decoders_are_total(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
            let _ = decode_exact::<Stats>(&bytes, dialect);
            let _ = decode_exact::<ClusterMetadata>(&bytes, dialect);
            let _ = decode_exact::<OptionDescriptors>(&bytes, dialect);
            let _ = decode_exact::<UpdateResource>(&bytes, dialect);
            let _ = decode_exact::<ClientDetails>(&bytes, dialect);
            let _ = decode_exact::<Clients>(&bytes, dialect);
            let _ = decode_exact::<SnapshotRequest>(&bytes, dialect);
            let _ = decode_exact::<MetadataChangesRequest>(&bytes, dialect);
            let _ = decode_exact::<MetadataChanges>(&bytes, dialect);
        }
    }
}

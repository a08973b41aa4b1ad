//! Shared encodings (identifier, consumer, partitioning, polling strategy, ack level,
//! permissions, options and user-header TLVs, version prefix) and the status-code table,
//! checked both ways against the SDK's own codecs.

mod common;

use std::collections::BTreeMap;

use common::{DIALECT, name, our_bytes, ours, sample_names, sdk_decode, sdk_encode, sdk_name};
use iggy_binary_protocol::primitives::options::{decode_options_prefixed, encode_options_prefixed};
use iggy_binary_protocol::{
    AckLevel as SdkAck, ClientVersionInfo, IGGY_PROTOCOL_VERSION, WireConsumer,
    WireGlobalPermissions, WireIdentifier, WireOptions, WirePartitioning, WirePermissions,
    WirePollingStrategy, WireStreamPermissions, WireTopicPermissions, WireUserHeaders,
    encode_user_headers,
};
use iggy_common::IggyError;
use proto::codec::ShortBytes;
use proto::dialect::{ProtocolVersion, VersionPrefix};
use proto::primitives::{
    AckLevel, Consumer, ConsumerKind, GlobalPermissions, HeaderKind, Identifier, OptionsBlock,
    Partitioning, Permissions, PollingKind, PollingStrategy, StreamPermissions, TlvEntry,
    TopicPermissions, UserHeaders,
};
use proto::status::ErrorCode;

fn identifiers() -> Vec<(WireIdentifier, Identifier)> {
    let mut pairs: Vec<_> = [0, 1, 0xdead_beef, u32::MAX]
        .into_iter()
        .map(|id| (WireIdentifier::numeric(id), Identifier::Numeric(id)))
        .collect();
    for text in sample_names() {
        let sdk = WireIdentifier::named(text.clone()).expect("an SDK name");
        pairs.push((sdk, Identifier::Name(name(&text))));
    }
    pairs
}

#[test]
fn identifiers_both_ways() {
    for (sdk, expected) in identifiers() {
        assert_eq!(ours::<Identifier>(&sdk_encode(&sdk)), expected);
        assert_eq!(sdk_decode::<WireIdentifier>(&our_bytes(&expected)), sdk);
    }
}

#[test]
fn consumers_both_ways() {
    let kinds = [
        (
            ConsumerKind::Consumer,
            WireConsumer::consumer as fn(WireIdentifier) -> WireConsumer,
        ),
        (ConsumerKind::ConsumerGroup, WireConsumer::consumer_group),
        (ConsumerKind::ExternalGroup, WireConsumer::external_group),
    ];
    for (kind, build) in kinds {
        for (sdk_id, id) in identifiers() {
            let sdk = build(sdk_id);
            let expected = Consumer { kind, id };
            assert_eq!(ours::<Consumer>(&sdk_encode(&sdk)), expected);
            assert_eq!(sdk_decode::<WireConsumer>(&our_bytes(&expected)), sdk);
        }
    }
}

#[test]
fn partitioning_both_ways() {
    let mut pairs = vec![
        (WirePartitioning::Balanced, Partitioning::Balanced),
        (
            WirePartitioning::PartitionId(0),
            Partitioning::PartitionId(0),
        ),
        (
            WirePartitioning::PartitionId(u32::MAX),
            Partitioning::PartitionId(u32::MAX),
        ),
    ];
    for key in [vec![0], b"user-42".to_vec(), vec![0xff; 255]] {
        let sdk = WirePartitioning::messages_key(key.clone()).expect("an SDK key");
        let short = ShortBytes::new(key).expect("1..=255 bytes");
        pairs.push((sdk, Partitioning::MessagesKey(short)));
    }
    for (sdk, expected) in pairs {
        assert_eq!(ours::<Partitioning>(&sdk_encode(&sdk)), expected);
        assert_eq!(sdk_decode::<WirePartitioning>(&our_bytes(&expected)), sdk);
    }
}

#[test]
fn polling_strategies_both_ways() {
    let pairs = [
        (WirePollingStrategy::offset(7), PollingKind::Offset, 7),
        (
            WirePollingStrategy::timestamp(1_700_000_000_000_000),
            PollingKind::Timestamp,
            1_700_000_000_000_000,
        ),
        (WirePollingStrategy::first(), PollingKind::First, 0),
        (WirePollingStrategy::last(), PollingKind::Last, 0),
        (WirePollingStrategy::next(), PollingKind::Next, 0),
        (
            WirePollingStrategy::offset(u64::MAX),
            PollingKind::Offset,
            u64::MAX,
        ),
    ];
    for (sdk, kind, value) in pairs {
        let expected = PollingStrategy { kind, value };
        assert_eq!(ours::<PollingStrategy>(&sdk_encode(&sdk)), expected);
        assert_eq!(
            sdk_decode::<WirePollingStrategy>(&our_bytes(&expected)),
            sdk
        );
    }
}

#[test]
fn ack_levels_agree() {
    for (sdk, expected) in [
        (SdkAck::NoAck, AckLevel::NoAck),
        (SdkAck::Quorum, AckLevel::Quorum),
    ] {
        assert_eq!(ours::<AckLevel>(&[sdk.as_u8()]), expected);
        assert_eq!(
            SdkAck::from_code(our_bytes(&expected)[0]).expect("an SDK ack"),
            sdk
        );
    }
    for value in 2..=u8::MAX {
        assert!(SdkAck::from_code(value).is_err());
        assert!(proto::codec::decode_exact::<AckLevel>(&[value], DIALECT).is_err());
    }
}

fn flags(seed: u32, count: usize) -> Vec<bool> {
    (0..count).map(|bit| seed >> bit & 1 == 1).collect()
}

fn sdk_permissions(seed: u32, streams: &[(u32, &[u32])]) -> WirePermissions {
    let g = flags(seed, 10);
    let global = WireGlobalPermissions {
        manage_servers: g[0],
        read_servers: g[1],
        manage_users: g[2],
        read_users: g[3],
        manage_streams: g[4],
        read_streams: g[5],
        manage_topics: g[6],
        read_topics: g[7],
        poll_messages: g[8],
        send_messages: g[9],
    };
    let streams = streams
        .iter()
        .map(|&(stream_id, topics)| {
            let s = flags(seed.rotate_left(stream_id), 6);
            let topics = topics
                .iter()
                .map(|&topic_id| {
                    let t = flags(seed.rotate_right(topic_id), 4);
                    WireTopicPermissions {
                        topic_id,
                        manage_topic: t[0],
                        read_topic: t[1],
                        poll_messages: t[2],
                        send_messages: t[3],
                    }
                })
                .collect();
            WireStreamPermissions {
                stream_id,
                manage_stream: s[0],
                read_stream: s[1],
                manage_topics: s[2],
                read_topics: s[3],
                poll_messages: s[4],
                send_messages: s[5],
                topics,
            }
        })
        .collect();
    WirePermissions { global, streams }
}

fn expected_permissions(sdk: &WirePermissions) -> Permissions {
    let g = &sdk.global;
    let global = GlobalPermissions {
        manage_servers: g.manage_servers,
        read_servers: g.read_servers,
        manage_users: g.manage_users,
        read_users: g.read_users,
        manage_streams: g.manage_streams,
        read_streams: g.read_streams,
        manage_topics: g.manage_topics,
        read_topics: g.read_topics,
        poll_messages: g.poll_messages,
        send_messages: g.send_messages,
    };
    let streams = sdk
        .streams
        .iter()
        .map(|s| {
            let topics = s
                .topics
                .iter()
                .map(|t| {
                    let topic = TopicPermissions {
                        manage_topic: t.manage_topic,
                        read_topic: t.read_topic,
                        poll_messages: t.poll_messages,
                        send_messages: t.send_messages,
                    };
                    (t.topic_id, topic)
                })
                .collect::<BTreeMap<_, _>>();
            let stream = StreamPermissions {
                manage_stream: s.manage_stream,
                read_stream: s.read_stream,
                manage_topics: s.manage_topics,
                read_topics: s.read_topics,
                poll_messages: s.poll_messages,
                send_messages: s.send_messages,
                topics,
            };
            (s.stream_id, stream)
        })
        .collect();
    Permissions { global, streams }
}

/// Sample permission trees; stream and topic ids ascend, the order our map encodes in.
pub fn permission_samples() -> Vec<WirePermissions> {
    vec![
        sdk_permissions(0, &[]),
        sdk_permissions(u32::MAX, &[]),
        sdk_permissions(0b10_1101_0110, &[(1, &[])]),
        sdk_permissions(0x5a5a_5a5a, &[(1, &[1, 2, 3]), (7, &[]), (u32::MAX, &[9])]),
    ]
}

#[test]
fn permissions_both_ways() {
    for sdk in permission_samples() {
        let expected = expected_permissions(&sdk);
        assert_eq!(ours::<Permissions>(&sdk_encode(&sdk)), expected);
        assert_eq!(sdk_decode::<WirePermissions>(&our_bytes(&expected)), sdk);
    }
}

/// `(key, value kind, value bytes)` entries covering every TLV kind the SDK names.
fn tlv_samples() -> Vec<(String, HeaderKind, Vec<u8>)> {
    vec![
        (
            "segment_size".into(),
            HeaderKind::Uint64,
            (1_u64 << 30).to_le_bytes().to_vec(),
        ),
        ("preallocate_segments".into(), HeaderKind::Bool, vec![1]),
        (
            "durability".into(),
            HeaderKind::String,
            b"persisted".to_vec(),
        ),
        (
            "replicas".into(),
            HeaderKind::Uint32,
            3_u32.to_le_bytes().to_vec(),
        ),
        ("raw".into(), HeaderKind::Raw, vec![0, 1, 2, 0xff]),
        (
            "i128".into(),
            HeaderKind::Int128,
            (-5_i128).to_le_bytes().to_vec(),
        ),
        (
            "f64".into(),
            HeaderKind::Float64,
            2.5_f64.to_le_bytes().to_vec(),
        ),
        ("k".repeat(255), HeaderKind::String, vec![b'v'; 255]),
    ]
}

fn sdk_tlv_block(entries: &[(String, HeaderKind, Vec<u8>)]) -> Vec<u8> {
    let tuples: Vec<(u8, &[u8], u8, &[u8])> = entries
        .iter()
        .map(|(key, kind, value)| (2, key.as_bytes(), kind.as_u8(), value.as_slice()))
        .collect();
    let mut buf = bytes::BytesMut::new();
    encode_user_headers(&tuples, &mut buf);
    buf.to_vec()
}

fn our_options(entries: &[(String, HeaderKind, Vec<u8>)]) -> OptionsBlock {
    let mut block = OptionsBlock::default();
    for (key, kind, value) in entries {
        block.set(key, TlvEntry::new(*kind, value).expect("1..=255 bytes"));
    }
    block
}

#[test]
fn options_blocks_both_ways() {
    let samples = tlv_samples();
    for count in 0..=samples.len() {
        let entries = &samples[..count];
        let raw = sdk_tlv_block(entries);
        let sdk = WireOptions::from_slice(&raw).expect("SDK-valid options");
        let expected = our_options(entries);
        assert_eq!(ours::<OptionsBlock>(&sdk_encode(&sdk)), expected);

        let mut prefixed = bytes::BytesMut::new();
        encode_options_prefixed(&sdk, &mut prefixed);
        let mut reader = proto::Reader::new(&prefixed, DIALECT);
        assert_eq!(
            OptionsBlock::decode_prefixed(&mut reader).expect("prefixed"),
            expected
        );
        reader.finish("trailing").expect("whole prefix consumed");

        let mut our_prefixed = Vec::new();
        expected.encode_prefixed(&mut proto::Writer::new(&mut our_prefixed, DIALECT));
        let (decoded, consumed) = decode_options_prefixed(&our_prefixed, 0).expect("SDK decode");
        assert_eq!(consumed, our_prefixed.len());
        assert_eq!(decoded, sdk);
        let pairs: Vec<_> = decoded
            .iter()
            .map(|entry| (entry.key.to_vec(), entry.value_kind.0, entry.value.to_vec()))
            .collect();
        let wanted: Vec<_> = entries
            .iter()
            .map(|(key, kind, value)| (key.as_bytes().to_vec(), kind.as_u8(), value.clone()))
            .collect();
        assert_eq!(pairs, wanted);
    }
}

#[test]
fn user_headers_both_ways() {
    let samples = tlv_samples();
    let raw = sdk_tlv_block(&samples);
    let sdk = WireUserHeaders::from_slice(&raw).expect("SDK-valid headers");
    let decoded = UserHeaders::decode(sdk.as_bytes()).expect("proto accepts SDK headers");
    assert_eq!(decoded.0.len(), samples.len());
    for ((key, value), (text, kind, bytes)) in decoded.0.iter().zip(&samples) {
        assert_eq!(key.as_str(), Some(text.as_str()));
        assert_eq!(
            (value.kind, value.data.as_bytes()),
            (kind.as_u8(), bytes.as_slice())
        );
    }
    let mut ours = Vec::new();
    decoded.encode_into(&mut ours);
    assert_eq!(ours, raw);
    WireUserHeaders::from_slice(&ours).expect("SDK accepts proto headers");
}

#[test]
fn version_prefix_both_ways() {
    let sdk = ClientVersionInfo {
        protocol_version: IGGY_PROTOCOL_VERSION,
        sdk_name: sdk_name("rust-sdk"),
        sdk_version: sdk_name("0.11.1-edge.9"),
    };
    let expected = VersionPrefix::rust_sdk(DIALECT);
    assert_eq!(
        expected.protocol_version,
        ProtocolVersion(IGGY_PROTOCOL_VERSION)
    );
    assert_eq!(ours::<VersionPrefix>(&sdk_encode(&sdk)), expected);
    assert_eq!(sdk_decode::<ClientVersionInfo>(&our_bytes(&expected)), sdk);
    assert_eq!(
        proto::Dialect::for_version(ProtocolVersion(IGGY_PROTOCOL_VERSION)),
        Some(DIALECT)
    );
}

/// Every code in our table means the same error to the SDK, by number and by name.
#[test]
fn error_codes_agree() {
    for code in ErrorCode::all() {
        let value = code.as_u32();
        assert_eq!(IggyError::from_code(value).as_code(), value, "{code:?}");
        assert_eq!(
            IggyError::from_code_as_string(value),
            code.name(),
            "{code:?}"
        );
    }
}

//! Tests of the 0.11.0-only codecs.

use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::codec::decode_exact;
use crate::commands::topics::tests::{assert_prefixes_refused, assert_round_trip};
use crate::dialect::Dialect;
use crate::primitives::{Consumer, ConsumerKind, OptionalPartition, PollingStrategy, TlvEntry};

fn node() -> LegacyClusterNode {
    LegacyClusterNode {
        name: String::from("iggy-node"),
        ip: String::from("127.0.0.1"),
        tcp_port: 8090,
        quic_port: 8080,
        http_port: 3000,
        websocket_port: 8092,
        role: 0,
        status: 0,
    }
}

fn selector() -> PollSelector {
    PollSelector {
        consumer: Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(1),
        },
        stream_id: Identifier::Numeric(0),
        topic_id: Identifier::Numeric(0),
        partition: OptionalPartition(Some(0)),
        strategy: PollingStrategy::next(),
        count: 10,
        auto_commit: true,
    }
}

#[test]
fn golden_routing_reply() {
    let routing = ConsumerRouting {
        client: 7,
        session: 42,
        metadata_watermark: 3,
        primary: node(),
    };
    let mut expected = Vec::new();
    expected.extend_from_slice(&7_u128.to_le_bytes());
    expected.extend_from_slice(&42_u64.to_le_bytes());
    expected.extend_from_slice(&3_u64.to_le_bytes());
    // A.9's node without its leading replica id: the 0.11.0 layout of §12.3.
    expected.extend_from_slice(b"\x09\x00\x00\x00iggy-node\x09\x00\x00\x00127.0.0.1");
    expected.extend_from_slice(&[0x9a, 0x1f, 0x90, 0x1f, 0xb8, 0x0b, 0x9c, 0x1f, 0, 0]);
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        assert_eq!(assert_round_trip(&routing, dialect), expected);
        assert_prefixes_refused::<ConsumerRouting>(&expected, dialect);
    }
    let mut bad_utf8 = expected.clone();
    bad_utf8[36] = 0xff;
    assert!(decode_exact::<ConsumerRouting>(&bad_utf8, Dialect::V0_11_0).is_err());
    let mut long_name = expected;
    long_name[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<ConsumerRouting>(&long_name, Dialect::V0_11_0).is_err());
}

#[test]
fn routing_requests_embed_the_selectors() {
    let poll = GetPollRouting {
        selector: selector(),
    };
    let bytes = assert_round_trip(&poll, Dialect::V0_11_0);
    assert_eq!(bytes.len(), 38);
    assert_eq!(bytes[..7], [1, 1, 4, 1, 0, 0, 0]);
    assert_prefixes_refused::<GetPollRouting>(&bytes, Dialect::V0_11_0);
    assert_prefixes_refused::<PollMessagesOnPrimary>(&bytes, Dialect::V0_11_0);
    let offset = GetConsumerOffsetRouting {
        selector: OffsetSelector {
            consumer: selector().consumer,
            stream_id: Identifier::Numeric(0),
            topic_id: Identifier::Numeric(0),
            partition: OptionalPartition(None),
        },
    };
    let bytes = assert_round_trip(&offset, Dialect::V0_11_0);
    assert_eq!(bytes[19..], [0, 0, 0, 0, 0]);
    assert_prefixes_refused::<GetConsumerOffsetRouting>(&bytes, Dialect::V0_11_0);
}

#[test]
fn golden_update_user() {
    let mut options = OptionsBlock::default();
    options.set("k", TlvEntry::boolean(true));
    let update = UpdateUser {
        user_id: Identifier::Numeric(2),
        username: Some(WireName::new("bob").unwrap()),
        status: Some(2),
        options,
    };
    let mut expected = alloc::vec![1, 4, 2, 0, 0, 0, 1, 3, b'b', b'o', b'b', 1, 2];
    expected.extend_from_slice(&[2, 1, 0, 0, 0, b'k', 3, 1, 0, 0, 0, 1]);
    assert_eq!(assert_round_trip(&update, Dialect::V0_11_0), expected);
    assert_prefixes_refused::<UpdateUser>(&expected[..13], Dialect::V0_11_0);
    let bare = [1, 4, 2, 0, 0, 0, 0, 0];
    let decoded = decode_exact::<UpdateUser>(&bare, Dialect::V0_11_0).unwrap();
    assert_eq!(decoded.username, None);
    assert_eq!(decoded.status, None);
    assert!(decode_exact::<UpdateUser>(&[1, 4, 2, 0, 0, 0, 2, 0], Dialect::V0_11_0).is_err());
    assert!(decode_exact::<UpdateUser>(&[1, 4, 2, 0, 0, 0, 0, 3], Dialect::V0_11_0).is_err());
}

#[test]
fn golden_fixed_requests() {
    let attach = AttachConsumerSession {
        client: 1,
        session: 2,
        metadata_watermark: 3,
    };
    let bytes = assert_round_trip(&attach, Dialect::V0_11_0);
    assert_eq!(bytes.len(), 32);
    assert_eq!(bytes[16], 2);
    assert_eq!(bytes[24], 3);
    assert_prefixes_refused::<AttachConsumerSession>(&bytes, Dialect::V0_11_0);
    let flush = FlushUnsavedBuffer {
        stream_id: Identifier::Numeric(1),
        topic_id: Identifier::Numeric(2),
        partition_id: 3,
        fsync: true,
    };
    let bytes = assert_round_trip(&flush, Dialect::V0_11_0);
    assert_eq!(bytes[12..], [3, 0, 0, 0, 1]);
    assert_prefixes_refused::<FlushUnsavedBuffer>(&bytes, Dialect::V0_11_0);
    let purge = PurgeTopic {
        stream_id: Identifier::Numeric(1),
        topic_id: Identifier::name("t").unwrap(),
    };
    let bytes = assert_round_trip(&purge, Dialect::V0_11_0);
    assert_eq!(bytes, [1, 4, 1, 0, 0, 0, 2, 1, b't']);
    assert_prefixes_refused::<PurgeTopic>(&bytes, Dialect::V0_11_0);
    assert_prefixes_refused::<PurgeStream>(&bytes[..6], Dialect::V0_11_0);
}

#[test]
fn golden_updates() {
    let update = UpdateTopic {
        stream_id: Identifier::Numeric(1),
        topic_id: Identifier::Numeric(2),
        name: WireName::new("t").unwrap(),
        options: OptionsBlock::default(),
    };
    let bytes = assert_round_trip(&update, Dialect::V0_11_0);
    assert_eq!(bytes, [1, 4, 1, 0, 0, 0, 1, 4, 2, 0, 0, 0, 1, b't']);
    assert_prefixes_refused::<UpdateTopic>(&bytes, Dialect::V0_11_0);
    assert_prefixes_refused::<UpdateStream>(&bytes[6..], Dialect::V0_11_0);
    // An odd options tail (a key with no value) is refused.
    let mut dangling = bytes.clone();
    dangling.extend_from_slice(&[2, 1, 0, 0, 0, b'k']);
    assert!(decode_exact::<UpdateTopic>(&dangling, Dialect::V0_11_0).is_err());
}

proptest! {
    #[test]
    fn requests_round_trip(
        attach in any::<AttachConsumerSession>(),
        user in any::<UpdateUser>(),
        flush in any::<FlushUnsavedBuffer>(),
        stream in any::<UpdateStream>(),
        purge_stream in any::<PurgeStream>(),
        topic in any::<UpdateTopic>(),
        purge_topic in any::<PurgeTopic>(),
        dialect in any::<Dialect>(),
    ) {
        assert_round_trip(&attach, dialect);
        assert_round_trip(&user, dialect);
        assert_round_trip(&flush, dialect);
        assert_round_trip(&stream, dialect);
        assert_round_trip(&purge_stream, dialect);
        assert_round_trip(&topic, dialect);
        assert_round_trip(&purge_topic, dialect);
    }

    #[test]
    fn routing_round_trips(
        poll in any::<GetPollRouting>(),
        primary in any::<PollMessagesOnPrimary>(),
        offset in any::<GetConsumerOffsetRouting>(),
        reply in any::<ConsumerRouting>(),
        dialect in any::<Dialect>(),
    ) {
        let poll = GetPollRouting { selector: poll.selector.normalised_for(dialect) };
        assert_round_trip(&poll, dialect);
        let primary = PollMessagesOnPrimary { selector: primary.selector.normalised_for(dialect) };
        assert_round_trip(&primary, dialect);
        let offset = GetConsumerOffsetRouting { selector: offset.selector.normalised_for(dialect) };
        assert_round_trip(&offset, dialect);
        assert_round_trip(&reply, dialect);
    }

    #[test]
    fn node_round_trips(value in any::<LegacyClusterNode>(), dialect in any::<Dialect>()) {
        assert_round_trip(&value, dialect);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
            let _ = decode_exact::<UpdateUser>(&bytes, dialect);
            let _ = decode_exact::<ConsumerRouting>(&bytes, dialect);
            let _ = decode_exact::<UpdateTopic>(&bytes, dialect);
        }
    }
}

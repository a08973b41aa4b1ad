//! Tests of `GET_CLUSTER_METADATA`: the Appendix A.9 golden roster, refusals and round trips.

use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::codec::decode_exact;
use crate::commands::session::tests::{assert_truncations_fail, round_trip};
use crate::commands::system::tests::text;

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

fn node_for(mut node: ClusterNode, dialect: Dialect) -> ClusterNode {
    if dialect == Dialect::V0_11_0 {
        node.replica_id = 0;
    }
    node
}

proptest! {
    #[test]
    fn cluster_round_trips(mut x in any::<ClusterMetadata>(), dialect in any::<Dialect>()) {
        x.nodes = x.nodes.into_iter().map(|node| node_for(node, dialect)).collect();
        round_trip(&x, dialect);
    }
}

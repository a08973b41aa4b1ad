//! Tests of `DESCRIBE_OPTIONS` in both dialects; the options round trip also covers
//! `UPDATE_RESOURCE` patches (their strategy is in `update_resource_tests.rs`).

use proptest::prelude::*;

use super::*;
use crate::codec::decode_exact;
use crate::commands::session::tests::{assert_truncations_fail, round_trip};
use crate::commands::system::UpdateResource;
use crate::commands::system::tests::text;

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

proptest! {
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
}

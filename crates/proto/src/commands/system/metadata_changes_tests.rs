//! Tests of `GET_METADATA_CHANGES`: strategies for requests, replies and page tokens, golden
//! bytes, refusals and round trips.

use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::codec::WireName;
use crate::codec::{decode_exact, encode_to_vec};
use crate::commands::session::tests::{assert_truncations_fail, round_trip};
use crate::dialect::Dialect;

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

proptest! {
    #[test]
    fn metadata_changes_round_trip(
        request in any::<MetadataChangesRequest>(),
        reply in any::<MetadataChanges>(),
        dialect in any::<Dialect>(),
    ) {
        round_trip(&request, dialect);
        round_trip(&reply, dialect);
    }
}

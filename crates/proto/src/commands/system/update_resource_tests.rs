//! Tests of `UPDATE_RESOURCE`: the patch strategy, golden bytes and refused patches.

use proptest::prelude::*;

use super::*;
use crate::codec::decode_exact;
use crate::commands::session::tests::round_trip;
use crate::dialect::Dialect;
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

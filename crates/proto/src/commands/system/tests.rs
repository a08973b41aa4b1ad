//! Tests across every system command, and helpers the per-family test files share.

use alloc::string::String;

use proptest::prelude::*;

use super::*;
use crate::codec::decode_exact;
use crate::dialect::Dialect;

/// An owned `String` from a literal.
pub(super) fn text(value: &str) -> String {
    String::from(value)
}

proptest! {
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

//! Tests of `GET_SNAPSHOT_FILE`: golden bytes and refused enum bytes. Its round trips run
//! with the clients' (`clients_tests.rs`).

use super::*;
use crate::codec::decode_exact;
use crate::commands::session::tests::{assert_truncations_fail, round_trip};
use crate::dialect::Dialect;

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

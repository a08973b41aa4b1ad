//! Tests of `GET_CLIENT` / `GET_CLIENTS`: golden records, refusals and round trips (with the
//! snapshot types, whose request and file round-trip here too).

use proptest::prelude::*;

use super::*;
use crate::codec::decode_exact;
use crate::commands::session::tests::{assert_truncations_fail, round_trip};
use crate::commands::system::tests::text;
use crate::commands::system::{SnapshotFile, SnapshotRequest};
use crate::dialect::Dialect;

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

proptest! {
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
}

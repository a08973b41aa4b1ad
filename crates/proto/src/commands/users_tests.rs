use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::codec::{decode_exact, encode_to_vec};
use crate::commands::session::tests::{assert_truncations_fail, round_trip};
use crate::primitives::{GlobalPermissions, StreamPermissions, TlvEntry, TopicPermissions};

/// The Appendix A.10 / §3.7 example block.
const PERMISSIONS_A10: [u8; 32] = [
    0, 1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 5, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 2, 0, 0, 0, 0, 1, 1, 0, 0, 0,
];

fn permissions_a10() -> Permissions {
    let topic = TopicPermissions {
        manage_topic: false,
        read_topic: true,
        poll_messages: true,
        send_messages: false,
    };
    let stream = StreamPermissions {
        manage_stream: true,
        read_stream: true,
        manage_topics: false,
        read_topics: true,
        poll_messages: true,
        send_messages: true,
        topics: BTreeMap::from([(2, topic)]),
    };
    Permissions {
        global: GlobalPermissions {
            read_servers: true,
            read_users: true,
            read_streams: true,
            read_topics: true,
            poll_messages: true,
            ..GlobalPermissions::default()
        },
        streams: BTreeMap::from([(5, stream)]),
    }
}

fn user(id: u32) -> UserResponse {
    UserResponse {
        id,
        created_at: 1_700_000_000_000_000,
        status: UserStatus::Active,
        username: WireName::new("iggy").unwrap(),
        options: OptionsBlock::default(),
        derived_options: OptionsBlock::default(),
    }
}

fn user_bytes(id: u32, dialect: Dialect) -> Vec<u8> {
    let mut bytes = Vec::from(id.to_le_bytes());
    bytes.extend_from_slice(&1_700_000_000_000_000_u64.to_le_bytes());
    bytes.extend_from_slice(b"\x01\x04iggy\x00\x00\x00\x00");
    if dialect == Dialect::V0_12_2 {
        bytes.extend_from_slice(&[0; 4]);
    }
    bytes
}

#[test]
fn golden_update_permissions_a10() {
    let request = UpdatePermissions {
        user_id: Identifier::Numeric(3),
        permissions: Some(permissions_a10()),
    };
    let mut expected = Vec::from([1, 4, 3, 0, 0, 0, 1, 32, 0, 0, 0]);
    expected.extend_from_slice(&PERMISSIONS_A10);
    for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
        assert_eq!(encode_to_vec(&request, dialect), expected);
        assert_eq!(
            decode_exact::<UpdatePermissions>(&expected, dialect).unwrap(),
            request
        );
        assert_truncations_fail::<UpdatePermissions>(&expected, dialect);
    }
    let cleared = UpdatePermissions {
        user_id: Identifier::Numeric(3),
        permissions: None,
    };
    assert_eq!(
        encode_to_vec(&cleared, Dialect::V0_12_2),
        [1, 4, 3, 0, 0, 0, 0]
    );
}

#[test]
fn golden_user_details_a10_and_absent_trailer() {
    for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
        let mut with = user_bytes(1, dialect);
        with.extend_from_slice(&[1, 32, 0, 0, 0]);
        with.extend_from_slice(&PERMISSIONS_A10);
        let details = UserDetails {
            user: user(1),
            permissions: Some(permissions_a10()),
        };
        assert_eq!(encode_to_vec(&details, dialect), with);
        assert_eq!(
            decode_exact::<UserDetails>(&with, dialect).unwrap(),
            details
        );
        assert_truncations_fail::<UserDetails>(&with, dialect);

        let mut without = user_bytes(1, dialect);
        without.extend_from_slice(&[0, 0, 0, 0]);
        let details = UserDetails {
            user: user(1),
            permissions: None,
        };
        assert_eq!(encode_to_vec(&details, dialect), without);
        assert_eq!(
            decode_exact::<UserDetails>(&without, dialect).unwrap(),
            details
        );
    }
}

#[test]
fn permissions_length_must_match_the_block() {
    for length in [31_u32, 33, 0, u32::MAX] {
        let mut body = Vec::from([1, 4, 3, 0, 0, 0, 1]);
        body.extend_from_slice(&length.to_le_bytes());
        body.extend_from_slice(&PERMISSIONS_A10);
        body.push(0);
        assert!(
            decode_exact::<UpdatePermissions>(&body, Dialect::V0_12_2).is_err(),
            "length {length}"
        );
    }
}

#[test]
fn user_details_refuse_bad_trailers_and_statuses() {
    let mut padding = user_bytes(1, Dialect::V0_12_2);
    padding.extend_from_slice(&[0, 0, 1, 0]);
    assert!(decode_exact::<UserDetails>(&padding, Dialect::V0_12_2).is_err());
    let mut flag = user_bytes(1, Dialect::V0_12_2);
    flag.extend_from_slice(&[2, 0, 0, 0]);
    assert!(decode_exact::<UserDetails>(&flag, Dialect::V0_12_2).is_err());
    for status in [0_u8, 3, 255] {
        let mut bad = user_bytes(1, Dialect::V0_12_2);
        bad[12] = status;
        assert!(decode_exact::<UserResponse>(&bad, Dialect::V0_12_2).is_err());
    }
}

#[test]
fn golden_users_are_concatenated() {
    let users = Users(alloc::vec![user(1), user(2)]);
    for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
        let mut expected = user_bytes(1, dialect);
        expected.extend_from_slice(&user_bytes(2, dialect));
        assert_eq!(round_trip(&users, dialect), expected);
        let one = user_bytes(1, dialect);
        for length in (1..one.len()).chain(one.len() + 1..expected.len()) {
            assert!(decode_exact::<Users>(&expected[..length], dialect).is_err());
        }
    }
    assert_eq!(round_trip(&Users::default(), Dialect::V0_12_2), []);
}

#[test]
fn golden_create_user() {
    let mut options = OptionsBlock::default();
    options.set("k", TlvEntry::boolean(true));
    let request = CreateUser {
        username: WireName::new("bob").unwrap(),
        password: Secret::new("secret").unwrap(),
        status: UserStatus::Inactive,
        permissions: Some(permissions_a10()),
        options,
    };
    let mut expected = Vec::from(*b"\x03bob\x06secret\x02\x01\x20\x00\x00\x00");
    expected.extend_from_slice(&PERMISSIONS_A10);
    expected.extend_from_slice(b"\x02\x01\x00\x00\x00k\x03\x01\x00\x00\x00\x01");
    assert_eq!(round_trip(&request, Dialect::V0_12_2), expected);
    assert_truncations_fail::<CreateUser>(&expected[..expected.len() - 12], Dialect::V0_12_2);
    let mut odd_options = expected.clone();
    odd_options.truncate(expected.len() - 6);
    assert!(decode_exact::<CreateUser>(&odd_options, Dialect::V0_12_2).is_err());
}

#[test]
fn golden_change_password() {
    let request = ChangePassword {
        user_id: Identifier::name("bob").unwrap(),
        current_password: Secret::new("old").unwrap(),
        new_password: Secret::new("newer").unwrap(),
    };
    let expected = b"\x02\x03bob\x03old\x05newer";
    assert_eq!(round_trip(&request, Dialect::V0_11_0), expected);
    assert_truncations_fail::<ChangePassword>(expected, Dialect::V0_11_0);
}

fn normalised_for(mut user: UserResponse, dialect: Dialect) -> UserResponse {
    if dialect == Dialect::V0_11_0 {
        user.derived_options = OptionsBlock::default();
    }
    user
}

proptest! {
    #[test]
    fn user_response_round_trips(x in any::<UserResponse>(), dialect in any::<Dialect>()) {
        round_trip(&normalised_for(x, dialect), dialect);
    }

    #[test]
    fn user_details_round_trip(mut x in any::<UserDetails>(), dialect in any::<Dialect>()) {
        x.user = normalised_for(x.user, dialect);
        round_trip(&x, dialect);
    }

    #[test]
    fn users_round_trip(mut x in any::<Users>(), dialect in any::<Dialect>()) {
        x.0 = x.0.into_iter().map(|user| normalised_for(user, dialect)).collect();
        round_trip(&x, dialect);
    }

    #[test]
    fn user_requests_round_trip(
        create in any::<CreateUser>(),
        get in any::<GetUser>(),
        delete in any::<DeleteUser>(),
        update in any::<UpdatePermissions>(),
        change in any::<ChangePassword>(),
        status in any::<UserStatus>(),
        dialect in any::<Dialect>(),
    ) {
        round_trip(&create, dialect);
        round_trip(&get, dialect);
        round_trip(&delete, dialect);
        round_trip(&update, dialect);
        round_trip(&change, dialect);
        round_trip(&status, dialect);
    }

    #[test]
    fn user_decoders_are_total(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
            let _ = decode_exact::<UserDetails>(&bytes, dialect);
            let _ = decode_exact::<Users>(&bytes, dialect);
            let _ = decode_exact::<CreateUser>(&bytes, dialect);
            let _ = decode_exact::<UpdatePermissions>(&bytes, dialect);
            let _ = decode_exact::<ChangePassword>(&bytes, dialect);
        }
    }
}

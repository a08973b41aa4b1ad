use alloc::string::String;
use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::codec::{decode_exact, encode_to_vec};
use crate::commands::Empty;

/// Every strict prefix of a valid body must be refused, never panic.
pub(crate) fn assert_truncations_fail<'a, T: Codec<'a> + core::fmt::Debug>(
    bytes: &'a [u8],
    dialect: Dialect,
) {
    for length in 0..bytes.len() {
        let result = decode_exact::<T>(&bytes[..length], dialect);
        assert!(
            result.is_err(),
            "prefix of {length} bytes decoded: {result:?}"
        );
    }
}

/// Encodes, decodes and compares; returns the bytes.
pub(crate) fn round_trip<T>(value: &T, dialect: Dialect) -> Vec<u8>
where
    T: for<'a> Codec<'a> + core::fmt::Debug + PartialEq,
{
    let bytes = encode_to_vec(value, dialect);
    let decoded = decode_exact::<T>(&bytes, dialect).expect("encoded bytes decode");
    assert_eq!(&decoded, value);
    bytes
}

fn name(text: &str) -> WireName {
    WireName::new(text).unwrap()
}

fn golden_login() -> LoginRegister {
    LoginRegister {
        version: VersionPrefix::rust_sdk(Dialect::V0_12_2),
        bind_secret: BindSecret([0xab; 32]),
        username: name("iggy"),
        password: Secret::new("iggy").unwrap(),
        context: String::new(),
    }
}

fn golden_login_bytes() -> Vec<u8> {
    let mut bytes = Vec::from(*b"\x02\x30\x00\x00\x08rust-sdk\x0d0.11.1-edge.9");
    bytes.extend_from_slice(&[0xab; 32]);
    bytes.extend_from_slice(b"\x04iggy\x04iggy\x00\x00\x00\x00");
    bytes
}

#[test]
fn golden_login_register_a3() {
    let bytes = golden_login_bytes();
    assert_eq!(bytes.len(), 73);
    assert_eq!(encode_to_vec(&golden_login(), Dialect::V0_12_2), bytes);
    assert_eq!(
        decode_exact::<LoginRegister>(&bytes, Dialect::V0_12_2).unwrap(),
        golden_login()
    );
    assert_truncations_fail::<LoginRegister>(&bytes, Dialect::V0_12_2);
}

#[test]
fn golden_login_reply_a3_without_result_section() {
    let body = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x30, 0, 0, 5, b'0', b'.', b'9',
        b'.', b'0',
    ];
    let reply = LoginReply {
        user_id: 0,
        session: 1,
        server_protocol_version: ProtocolVersion::V0_12_2,
        server_version: name("0.9.0"),
    };
    let payload = &body[4..];
    for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
        assert_eq!(encode_to_vec(&reply, dialect), payload);
        assert_eq!(decode_exact::<LoginReply>(payload, dialect).unwrap(), reply);
    }
    let mut reader = Reader::new(&body, Dialect::V0_12_2);
    let section = crate::result::ResultSection::decode(&mut reader).unwrap();
    assert_eq!(section, crate::result::ResultSection::Ok);
    assert_eq!(LoginReply::decode(&mut reader).unwrap(), reply);
    assert_truncations_fail::<LoginReply>(payload, Dialect::V0_12_2);
}

#[test]
fn old_dialect_login_has_no_bind_secret() {
    let mut login = golden_login();
    login.version = VersionPrefix::rust_sdk(Dialect::V0_11_0);
    login.bind_secret = BindSecret::default();
    let bytes = round_trip(&login, Dialect::V0_11_0);
    let mut expected = Vec::from(*b"\x00\x2c\x00\x00\x08rust-sdk\x060.11.0");
    expected.extend_from_slice(b"\x04iggy\x04iggy\x00\x00\x00\x00");
    assert_eq!(bytes, expected);
    // The 0.12.2 body is 32 bytes longer and not a valid 0.11.0 body.
    assert!(decode_exact::<LoginRegister>(&golden_login_bytes(), Dialect::V0_11_0).is_err());
}

#[test]
fn login_refuses_bad_lengths_and_utf8() {
    let prefix_end = 4 + 9 + 14 + 32;
    let mut empty_password = golden_login_bytes();
    empty_password.truncate(prefix_end + 5);
    empty_password.extend_from_slice(&[0, 0, 0, 0, 0]);
    assert!(decode_exact::<LoginRegister>(&empty_password, Dialect::V0_12_2).is_err());
    let mut bad_utf8 = golden_login_bytes();
    bad_utf8[prefix_end + 6] = 0xff;
    assert!(decode_exact::<LoginRegister>(&bad_utf8, Dialect::V0_12_2).is_err());
    let mut huge_context = golden_login_bytes();
    let length = huge_context.len() - 4;
    huge_context[length..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<LoginRegister>(&huge_context, Dialect::V0_12_2).is_err());
    let mut trailing = golden_login_bytes();
    trailing.push(0);
    assert!(decode_exact::<LoginRegister>(&trailing, Dialect::V0_12_2).is_err());
}

#[test]
fn secrets_are_redacted_in_debug() {
    let mut login = golden_login();
    login.password = Secret::new("hunter2").unwrap();
    let text = alloc::format!("{login:?}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!text.contains("171"), "{text}");
}

#[test]
fn truncated_session_bodies_fail() {
    for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
        let bind = BindSession {
            version: VersionPrefix::rust_sdk(dialect),
            client_id: 7,
            session: 9,
            metadata_watermark: 3,
            bind_secret: BindSecret([1; 32]),
        };
        assert_truncations_fail::<BindSession>(&round_trip(&bind, dialect), dialect);
        let pat = LoginRegisterWithPat {
            version: VersionPrefix::rust_sdk(dialect),
            bind_secret: BindSecret::default(),
            token: Secret::new("token").unwrap(),
            context: String::from("ctx"),
        };
        assert_truncations_fail::<LoginRegisterWithPat>(&round_trip(&pat, dialect), dialect);
        let legacy = LoginUser {
            username: name("user"),
            password: Secret::new("pass").unwrap(),
            version: String::from("1"),
            context: String::new(),
        };
        assert_truncations_fail::<LoginUser>(&round_trip(&legacy, dialect), dialect);
    }
}

#[test]
fn logout_is_empty() {
    assert!(encode_to_vec(&Empty, Dialect::V0_12_2).is_empty());
    assert!(decode_exact::<Empty>(&[0], Dialect::V0_12_2).is_err());
}

fn normalised_for<T: Clone>(value: &T, dialect: Dialect, clear: impl Fn(&mut T)) -> T {
    let mut value = value.clone();
    if dialect == Dialect::V0_11_0 {
        clear(&mut value);
    }
    value
}

proptest! {
    #[test]
    fn login_register_round_trips(x in any::<LoginRegister>(), dialect in any::<Dialect>()) {
        let x = normalised_for(&x, dialect, |x| x.bind_secret = BindSecret::default());
        round_trip(&x, dialect);
    }

    #[test]
    fn login_register_with_pat_round_trips(
        x in any::<LoginRegisterWithPat>(),
        dialect in any::<Dialect>(),
    ) {
        let x = normalised_for(&x, dialect, |x| x.bind_secret = BindSecret::default());
        round_trip(&x, dialect);
    }

    #[test]
    fn login_reply_round_trips(x in any::<LoginReply>(), dialect in any::<Dialect>()) {
        round_trip(&x, dialect);
    }

    #[test]
    fn bind_session_round_trips(x in any::<BindSession>(), dialect in any::<Dialect>()) {
        round_trip(&x, dialect);
    }

    #[test]
    fn legacy_logins_round_trip(
        user in any::<LoginUser>(),
        token in any::<LoginWithPersonalAccessToken>(),
        identity in any::<UserIdentity>(),
        dialect in any::<Dialect>(),
    ) {
        round_trip(&user, dialect);
        round_trip(&token, dialect);
        round_trip(&identity, dialect);
    }

    #[test]
    fn session_decoders_are_total(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
            let _ = decode_exact::<LoginRegister>(&bytes, dialect);
            let _ = decode_exact::<LoginRegisterWithPat>(&bytes, dialect);
            let _ = decode_exact::<BindSession>(&bytes, dialect);
            let _ = decode_exact::<LoginReply>(&bytes, dialect);
            let _ = decode_exact::<LoginUser>(&bytes, dialect);
        }
    }
}

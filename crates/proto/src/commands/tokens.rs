//! Personal access token commands (PROTOCOL.md §4.3): `GET_PERSONAL_ACCESS_TOKENS` (41),
//! `CREATE_PERSONAL_ACCESS_TOKEN` (42) and `DELETE_PERSONAL_ACCESS_TOKEN` (43). The layouts are
//! the same in both dialects.
//!
//! The clear-text token appears only in the create reply and is held in a [`Secret`].

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, WireName, Writer};
use crate::commands::session::Secret;
use crate::commands::{decode_concatenated, encode_concatenated};
use crate::error::DecodeError;

/// One token of the calling user: `[name WireName][expiry_at:u64]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PersonalAccessTokenInfo {
    pub name: WireName,
    /// Absolute expiry in microseconds since the Unix epoch; 0 = never expires.
    pub expiry_at: u64,
}

impl PersonalAccessTokenInfo {
    /// The `expiry_at` of a token that never expires.
    pub const NEVER_EXPIRES: u64 = 0;
}

impl Codec<'_> for PersonalAccessTokenInfo {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.name.encode(writer);
        writer.u64(self.expiry_at);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            name: WireName::decode(reader)?,
            expiry_at: reader.u64("token.expiry_at")?,
        })
    }
}

/// `GET_PERSONAL_ACCESS_TOKENS` (41) reply: concatenated records, no count prefix; empty =
/// none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PersonalAccessTokens(
    #[cfg_attr(test, proptest(strategy = "tokens_strategy()"))] pub Vec<PersonalAccessTokenInfo>,
);

impl<'a> Codec<'a> for PersonalAccessTokens {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_concatenated(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        decode_concatenated(reader).map(Self)
    }
}

/// `CREATE_PERSONAL_ACCESS_TOKEN` (42) request; the reply is a result section then
/// [`RawPersonalAccessToken`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CreatePersonalAccessToken {
    pub name: WireName,
    /// Lifetime in microseconds relative to now, or one of the two sentinels below.
    pub expiry: u64,
}

impl CreatePersonalAccessToken {
    /// `expiry` asking for the server's default lifetime.
    pub const EXPIRY_SERVER_DEFAULT: u64 = 0;
    /// `expiry` asking for a token that never expires.
    pub const EXPIRY_NEVER: u64 = u64::MAX;
}

impl Codec<'_> for CreatePersonalAccessToken {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.name.encode(writer);
        writer.u64(self.expiry);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            name: WireName::decode(reader)?,
            expiry: reader.u64("create_token.expiry")?,
        })
    }
}

/// The `CREATE_PERSONAL_ACCESS_TOKEN` reply payload: the clear-text token, shown only once
/// (`[token WireName]`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct RawPersonalAccessToken {
    pub token: Secret,
}

impl Codec<'_> for RawPersonalAccessToken {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.token.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Secret::decode(reader).map(|token| Self { token })
    }
}

/// `DELETE_PERSONAL_ACCESS_TOKEN` (43) request; the reply is a result section only.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeletePersonalAccessToken {
    pub name: WireName,
}

impl Codec<'_> for DeletePersonalAccessToken {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.name.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        WireName::decode(reader).map(|name| Self { name })
    }
}

#[cfg(test)]
fn tokens_strategy() -> impl proptest::strategy::Strategy<Value = Vec<PersonalAccessTokenInfo>> {
    proptest::collection::vec(proptest::prelude::any::<PersonalAccessTokenInfo>(), 0..4)
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use proptest::prelude::*;

    use super::*;
    use crate::codec::decode_exact;
    use crate::commands::session::tests::{assert_truncations_fail, round_trip};
    use crate::dialect::Dialect;

    fn name(text: &str) -> WireName {
        WireName::new(text).unwrap()
    }

    #[test]
    fn golden_token_list() {
        let tokens = PersonalAccessTokens(alloc::vec![
            PersonalAccessTokenInfo {
                name: name("ci"),
                expiry_at: PersonalAccessTokenInfo::NEVER_EXPIRES,
            },
            PersonalAccessTokenInfo {
                name: name("dev"),
                expiry_at: 0x0102,
            },
        ]);
        let mut expected = Vec::from(*b"\x02ci");
        expected.extend_from_slice(&[0; 8]);
        expected.extend_from_slice(b"\x03dev\x02\x01\x00\x00\x00\x00\x00\x00");
        for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
            assert_eq!(round_trip(&tokens, dialect), expected);
            for length in (1..11).chain(12..expected.len()) {
                assert!(
                    decode_exact::<PersonalAccessTokens>(&expected[..length], dialect).is_err()
                );
            }
        }
        assert_eq!(
            round_trip(&PersonalAccessTokens::default(), Dialect::V0_12_2),
            []
        );
    }

    #[test]
    fn golden_create_and_delete() {
        let create = CreatePersonalAccessToken {
            name: name("ci"),
            expiry: CreatePersonalAccessToken::EXPIRY_NEVER,
        };
        let expected = b"\x02ci\xff\xff\xff\xff\xff\xff\xff\xff";
        assert_eq!(round_trip(&create, Dialect::V0_12_2), expected);
        assert_truncations_fail::<CreatePersonalAccessToken>(expected, Dialect::V0_12_2);
        let raw = RawPersonalAccessToken {
            token: Secret::new("abc=").unwrap(),
        };
        assert_eq!(round_trip(&raw, Dialect::V0_11_0), b"\x04abc=");
        assert!(!alloc::format!("{raw:?}").contains("abc="));
        let delete = DeletePersonalAccessToken { name: name("ci") };
        assert_eq!(round_trip(&delete, Dialect::V0_12_2), b"\x02ci");
        assert!(decode_exact::<DeletePersonalAccessToken>(b"\x00", Dialect::V0_12_2).is_err());
    }

    proptest! {
        #[test]
        fn token_codecs_round_trip(
            list in any::<PersonalAccessTokens>(),
            create in any::<CreatePersonalAccessToken>(),
            raw in any::<RawPersonalAccessToken>(),
            delete in any::<DeletePersonalAccessToken>(),
            dialect in any::<Dialect>(),
        ) {
            round_trip(&list, dialect);
            round_trip(&create, dialect);
            round_trip(&raw, dialect);
            round_trip(&delete, dialect);
        }

        #[test]
        fn token_decoders_are_total(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_exact::<PersonalAccessTokens>(&bytes, Dialect::V0_12_2);
            let _ = decode_exact::<CreatePersonalAccessToken>(&bytes, Dialect::V0_12_2);
            let _ = decode_exact::<RawPersonalAccessToken>(&bytes, Dialect::V0_12_2);
        }
    }
}

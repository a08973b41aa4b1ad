//! Login, session binding and logout bodies (PROTOCOL.md §2.3–2.7, §12.1).
//!
//! Every login body opens with the [`VersionPrefix`]; the caller peeks its packed version to
//! pick the dialect before decoding the rest. 0.12.2 logins carry a 32-byte bind secret after
//! the prefix, 0.11.0 logins do not. `LOGOUT_USER` (39) is empty both ways and uses
//! [`crate::commands::Empty`].
//!
//! Clear-text credentials are held in [`Secret`] and [`BindSecret`], whose `Debug` output is
//! redacted so a logged request never leaks them.

use alloc::string::String;

use crate::codec::{Codec, LONG_TEXT_LENGTH_MAX, Reader, WireName, Writer};
use crate::dialect::{Dialect, ProtocolVersion, VersionPrefix};
use crate::error::DecodeError;

/// Bytes of the bind secret a 0.12.2 login carries.
pub const BIND_SECRET_LENGTH: usize = 32;
/// Bytes the optional `context` and legacy `version` strings may span: the SDKs send none.
pub const CONTEXT_LENGTH_MAX: usize = 64 * 1024;

const _: () = assert!(CONTEXT_LENGTH_MAX <= LONG_TEXT_LENGTH_MAX);

/// Clear-text credential text of 1..=255 UTF-8 bytes behind a `u8` length: passwords and
/// personal access tokens. `Debug` never prints the value.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    pub const LENGTH_MAX: usize = 255;

    /// Accepts 1..=255 bytes of UTF-8; the server applies its tighter policy (3..=100 for
    /// passwords) after decoding.
    pub fn new(text: impl Into<String>) -> Option<Self> {
        let text = text.into();
        (1..=Self::LENGTH_MAX)
            .contains(&text.len())
            .then_some(Self(text))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl core::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.write_str("Secret(<redacted>)")
    }
}

impl Codec<'_> for Secret {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.bytes_u8(self.0.as_bytes());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        reader
            .text_u8(1, "secret")
            .map(|text| Self(String::from(text)))
    }
}

/// The per-session bearer proof a 0.12.2 client registers at login and presents again in
/// `BIND_SESSION`. `Debug` never prints the value.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct BindSecret(pub [u8; BIND_SECRET_LENGTH]);

impl core::fmt::Debug for BindSecret {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.write_str("BindSecret(<redacted>)")
    }
}

impl Codec<'_> for BindSecret {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.bytes(&self.0);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        reader.array("bind_secret").map(Self)
    }
}

/// `LOGIN_REGISTER` (40) request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LoginRegister {
    #[cfg_attr(test, proptest(strategy = "version_strategy()"))]
    pub version: VersionPrefix,
    /// 0.12.2 only: 0.11.0 neither writes nor reads it (decodes as all zero).
    pub bind_secret: BindSecret,
    pub username: WireName,
    pub password: Secret,
    /// Empty when absent (the SDKs always send length 0).
    #[cfg_attr(test, proptest(strategy = "context_strategy()"))]
    pub context: String,
}

impl Codec<'_> for LoginRegister {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.version.encode(writer);
        encode_bind_secret(&self.bind_secret, writer);
        self.username.encode(writer);
        self.password.encode(writer);
        writer.bytes_u32(self.context.as_bytes());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            version: VersionPrefix::decode(reader)?,
            bind_secret: decode_bind_secret(reader)?,
            username: WireName::decode(reader)?,
            password: Secret::decode(reader)?,
            context: decode_context(reader, "login.context")?,
        })
    }
}

/// `LOGIN_REGISTER_WITH_PAT` (45) request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LoginRegisterWithPat {
    #[cfg_attr(test, proptest(strategy = "version_strategy()"))]
    pub version: VersionPrefix,
    /// 0.12.2 only: 0.11.0 neither writes nor reads it (decodes as all zero).
    pub bind_secret: BindSecret,
    pub token: Secret,
    /// Empty when absent (the SDKs always send length 0).
    #[cfg_attr(test, proptest(strategy = "context_strategy()"))]
    pub context: String,
}

impl Codec<'_> for LoginRegisterWithPat {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.version.encode(writer);
        encode_bind_secret(&self.bind_secret, writer);
        self.token.encode(writer);
        writer.bytes_u32(self.context.as_bytes());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            version: VersionPrefix::decode(reader)?,
            bind_secret: decode_bind_secret(reader)?,
            token: Secret::decode(reader)?,
            context: decode_context(reader, "login.context")?,
        })
    }
}

/// The reply payload of `LOGIN_REGISTER`, `LOGIN_REGISTER_WITH_PAT` (after the result section)
/// and `BIND_SESSION` (not result-framed).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LoginReply {
    pub user_id: u32,
    /// Non-zero on success; the SDK refuses 0.
    pub session: u64,
    /// Informational: the client does not gate on it.
    pub server_protocol_version: ProtocolVersion,
    pub server_version: WireName,
}

impl Codec<'_> for LoginReply {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.user_id);
        writer.u64(self.session);
        writer.u32(self.server_protocol_version.0);
        self.server_version.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            user_id: reader.u32("login_reply.user_id")?,
            session: reader.u64("login_reply.session")?,
            server_protocol_version: ProtocolVersion(
                reader.u32("login_reply.server_protocol_version")?,
            ),
            server_version: WireName::decode(reader)?,
        })
    }
}

/// `BIND_SESSION` (15) request: re-attaches a fresh connection to a session. The command
/// exists only in 0.12.2; its layout does not depend on the dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct BindSession {
    #[cfg_attr(test, proptest(strategy = "version_strategy()"))]
    pub version: VersionPrefix,
    pub client_id: u128,
    /// 0 asks whether the client's Register committed (recovering a lost login reply).
    pub session: u64,
    /// Highest metadata commit the client has seen (§2.10).
    pub metadata_watermark: u64,
    pub bind_secret: BindSecret,
}

impl Codec<'_> for BindSession {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.version.encode(writer);
        writer.u128(self.client_id);
        writer.u64(self.session);
        writer.u64(self.metadata_watermark);
        self.bind_secret.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            version: VersionPrefix::decode(reader)?,
            client_id: reader.u128("bind_session.client_id")?,
            session: reader.u64("bind_session.session")?,
            metadata_watermark: reader.u64("bind_session.metadata_watermark")?,
            bind_secret: BindSecret::decode(reader)?,
        })
    }
}

/// Legacy `LOGIN_USER` (38) request: defined but never sent; decoded only to refuse it
/// knowingly.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LoginUser {
    pub username: WireName,
    pub password: Secret,
    /// Empty when absent.
    #[cfg_attr(test, proptest(strategy = "context_strategy()"))]
    pub version: String,
    /// Empty when absent.
    #[cfg_attr(test, proptest(strategy = "context_strategy()"))]
    pub context: String,
}

impl Codec<'_> for LoginUser {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.username.encode(writer);
        self.password.encode(writer);
        writer.bytes_u32(self.version.as_bytes());
        writer.bytes_u32(self.context.as_bytes());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            username: WireName::decode(reader)?,
            password: Secret::decode(reader)?,
            version: decode_context(reader, "login_user.version")?,
            context: decode_context(reader, "login_user.context")?,
        })
    }
}

/// Legacy `LOGIN_WITH_PERSONAL_ACCESS_TOKEN` (44) request: `[token WireName]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LoginWithPersonalAccessToken {
    pub token: Secret,
}

impl Codec<'_> for LoginWithPersonalAccessToken {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.token.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Secret::decode(reader).map(|token| Self { token })
    }
}

/// Reply of the legacy logins 38 and 44: `[user_id:u32]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct UserIdentity {
    pub user_id: u32,
}

impl Codec<'_> for UserIdentity {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.user_id);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        reader
            .u32("user_identity.user_id")
            .map(|user_id| Self { user_id })
    }
}

fn encode_bind_secret(secret: &BindSecret, writer: &mut Writer<'_>) {
    if writer.dialect() == Dialect::V0_12_2 {
        secret.encode(writer);
    }
}

fn decode_bind_secret(reader: &mut Reader<'_>) -> Result<BindSecret, DecodeError> {
    match reader.dialect() {
        Dialect::V0_12_2 => BindSecret::decode(reader),
        Dialect::V0_11_0 => Ok(BindSecret::default()),
    }
}

fn decode_context(reader: &mut Reader<'_>, field: &'static str) -> Result<String, DecodeError> {
    reader.text_u32(CONTEXT_LENGTH_MAX, field).map(String::from)
}

#[cfg(test)]
pub(crate) fn context_strategy() -> impl proptest::strategy::Strategy<Value = String> {
    "\\PC{0,12}"
}

/// Prefixes whose packed version is well formed (the prefix decoder refuses bits 30..31).
#[cfg(test)]
fn version_strategy() -> impl proptest::strategy::Strategy<Value = VersionPrefix> {
    use proptest::prelude::*;
    any::<VersionPrefix>().prop_map(|mut prefix| {
        prefix.protocol_version.0 &= 0x3fff_ffff;
        prefix
    })
}

#[cfg(test)]
mod arbitrary {
    use proptest::prelude::*;

    use super::Secret;

    impl Arbitrary for Secret {
        type Parameters = ();
        type Strategy = BoxedStrategy<Self>;
        fn arbitrary_with((): ()) -> Self::Strategy {
            "[a-zA-Z0-9!@#]{1,40}|\\PC{1,20}"
                .prop_filter_map("1..=255 bytes", Secret::new)
                .boxed()
        }
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
pub(crate) mod tests;

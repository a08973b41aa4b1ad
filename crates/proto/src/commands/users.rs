//! User records and the user commands (PROTOCOL.md §4.2, §3.7, §12.3): `GET_USER` (31),
//! `GET_USERS` (32), `CREATE_USER` (33), `DELETE_USER` (34), `UPDATE_PERMISSIONS` (36) and
//! `CHANGE_PASSWORD` (37). `UPDATE_USER` (35) lives with the legacy codecs.
//!
//! A permissions block travels behind a `u32` length and must consume exactly that many
//! bytes, so a block and its length can never disagree. 0.12.2 user records carry explicit
//! and derived option blocks, 0.11.0 records one block.

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, WireName, Writer, len_u32};
use crate::commands::session::Secret;
use crate::commands::{decode_concatenated, encode_concatenated};
use crate::dialect::Dialect;
use crate::error::{DecodeError, DecodeErrorKind};
use crate::primitives::{Identifier, OptionsBlock, Permissions};

/// Bytes a length-prefixed permissions block may span before the decoder refuses it.
pub const PERMISSIONS_LENGTH_MAX: usize = 16 * 1024 * 1024;
/// The smallest permissions block: ten global flags and `has_streams`.
const PERMISSIONS_LENGTH_MIN: usize = 11;

/// The user status byte; any other value fails the SDK's decode, so it is refused here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum UserStatus {
    Active,
    Inactive,
}

impl UserStatus {
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Active => 1,
            Self::Inactive => 2,
        }
    }

    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            1 => Some(Self::Active),
            2 => Some(Self::Inactive),
            _ => None,
        }
    }
}

impl Codec<'_> for UserStatus {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.as_u8());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let value = reader.u8("user.status")?;
        Self::from_u8(value).ok_or(DecodeError::new(
            "user.status",
            offset,
            DecodeErrorKind::InvalidValue {
                value: u64::from(value),
            },
        ))
    }
}

/// One user record (`UserResponse`), used by 31, 32 and 33.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct UserResponse {
    pub id: u32,
    /// Microseconds since the Unix epoch.
    pub created_at: u64,
    pub status: UserStatus,
    pub username: WireName,
    /// Keys the client set (0.11.0: the record's only block).
    pub options: OptionsBlock,
    /// 0.12.2 only: values the server filled in. 0.11.0 neither writes nor reads it (decodes
    /// as empty).
    pub derived_options: OptionsBlock,
}

impl Codec<'_> for UserResponse {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.id);
        writer.u64(self.created_at);
        self.status.encode(writer);
        self.username.encode(writer);
        self.options.encode_prefixed(writer);
        if writer.dialect() == Dialect::V0_12_2 {
            self.derived_options.encode_prefixed(writer);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let id = reader.u32("user.id")?;
        let created_at = reader.u64("user.created_at")?;
        let status = UserStatus::decode(reader)?;
        let username = WireName::decode(reader)?;
        let options = OptionsBlock::decode_prefixed(reader)?;
        let derived_options = match reader.dialect() {
            Dialect::V0_12_2 => OptionsBlock::decode_prefixed(reader)?,
            Dialect::V0_11_0 => OptionsBlock::default(),
        };
        Ok(Self {
            id,
            created_at,
            status,
            username,
            options,
            derived_options,
        })
    }
}

/// `UserResponse` plus its permissions: the `GET_USER` (31) and `CREATE_USER` (33) reply.
/// An empty `GET_USER` body (no such user) is `None` at the call site.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct UserDetails {
    pub user: UserResponse,
    pub permissions: Option<Permissions>,
}

impl Codec<'_> for UserDetails {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.user.encode(writer);
        match &self.permissions {
            // The "absent" form is four zero bytes here, unlike in requests.
            None => writer.u32(0),
            Some(permissions) => {
                writer.u8(1);
                encode_permissions_sized(permissions, writer);
            }
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let user = UserResponse::decode(reader)?;
        let offset = reader.offset();
        let permissions = match reader.u8("user.has_permissions")? {
            0 => {
                let padding: [u8; 3] = reader.array("user.permissions_padding")?;
                if padding != [0; 3] {
                    return Err(DecodeError::new(
                        "user.permissions_padding",
                        offset.saturating_add(1),
                        DecodeErrorKind::NonZeroReserved,
                    ));
                }
                None
            }
            1 => Some(decode_permissions_sized(reader)?),
            flag => {
                return Err(DecodeError::new(
                    "user.has_permissions",
                    offset,
                    DecodeErrorKind::InvalidValue {
                        value: u64::from(flag),
                    },
                ));
            }
        };
        Ok(Self { user, permissions })
    }
}

/// `GET_USER` (31) request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetUser {
    pub user_id: Identifier,
}

impl Codec<'_> for GetUser {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.user_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Identifier::decode(reader).map(|user_id| Self { user_id })
    }
}

/// `GET_USERS` (32) reply: concatenated records, no count prefix; empty = no users.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Users(
    #[cfg_attr(
        test,
        proptest(
            strategy = "proptest::collection::vec(proptest::prelude::any::<UserResponse>(), 0..4)"
        )
    )]
    pub Vec<UserResponse>,
);

impl<'a> Codec<'a> for Users {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_concatenated(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        decode_concatenated(reader).map(Self)
    }
}

/// `CREATE_USER` (33) request; the reply is a result section then [`UserDetails`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CreateUser {
    pub username: WireName,
    pub password: Secret,
    pub status: UserStatus,
    pub permissions: Option<Permissions>,
    /// Runs to the end of the body (the SDK sends none).
    pub options: OptionsBlock,
}

impl Codec<'_> for CreateUser {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.username.encode(writer);
        self.password.encode(writer);
        self.status.encode(writer);
        encode_permissions_flagged(self.permissions.as_ref(), writer);
        self.options.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            username: WireName::decode(reader)?,
            password: Secret::decode(reader)?,
            status: UserStatus::decode(reader)?,
            permissions: decode_permissions_flagged(reader)?,
            options: OptionsBlock::decode(reader)?,
        })
    }
}

/// `DELETE_USER` (34) request; the reply is a result section only.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeleteUser {
    pub user_id: Identifier,
}

impl Codec<'_> for DeleteUser {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.user_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Identifier::decode(reader).map(|user_id| Self { user_id })
    }
}

/// `UPDATE_PERMISSIONS` (36) request; `None` clears every permission.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct UpdatePermissions {
    pub user_id: Identifier,
    pub permissions: Option<Permissions>,
}

impl Codec<'_> for UpdatePermissions {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.user_id.encode(writer);
        encode_permissions_flagged(self.permissions.as_ref(), writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            user_id: Identifier::decode(reader)?,
            permissions: decode_permissions_flagged(reader)?,
        })
    }
}

/// `CHANGE_PASSWORD` (37) request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ChangePassword {
    pub user_id: Identifier,
    pub current_password: Secret,
    pub new_password: Secret,
}

impl Codec<'_> for ChangePassword {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.user_id.encode(writer);
        self.current_password.encode(writer);
        self.new_password.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            user_id: Identifier::decode(reader)?,
            current_password: Secret::decode(reader)?,
            new_password: Secret::decode(reader)?,
        })
    }
}

/// `[has_permissions:u8]` then, when present, `[length:u32][permissions]`: the request form.
fn encode_permissions_flagged(permissions: Option<&Permissions>, writer: &mut Writer<'_>) {
    writer.bool(permissions.is_some());
    if let Some(permissions) = permissions {
        encode_permissions_sized(permissions, writer);
    }
}

/// The request form's flag means "present" only when exactly 1 (§4.2); any other value reads
/// as absent, as the SDK's decoder does.
fn decode_permissions_flagged(reader: &mut Reader<'_>) -> Result<Option<Permissions>, DecodeError> {
    match reader.u8("permissions.has_permissions")? {
        1 => decode_permissions_sized(reader).map(Some),
        _ => Ok(None),
    }
}

/// `[length:u32][permissions]`, the length back-patched once the block is written.
fn encode_permissions_sized(permissions: &Permissions, writer: &mut Writer<'_>) {
    let length_at = writer.len();
    writer.u32(0);
    permissions.encode(writer);
    let length = writer.len().saturating_sub(length_at).saturating_sub(4);
    writer.patch_u32(length_at, len_u32(length));
}

fn decode_permissions_sized(reader: &mut Reader<'_>) -> Result<Permissions, DecodeError> {
    let length = reader.length_u32(
        PERMISSIONS_LENGTH_MIN,
        PERMISSIONS_LENGTH_MAX,
        "permissions.length",
    )?;
    let mut block = reader.sub(length, "permissions")?;
    let permissions = Permissions::decode(&mut block)?;
    block.finish("permissions.trailing")?;
    Ok(permissions)
}

#[cfg(test)]
#[path = "users_tests.rs"]
mod tests;

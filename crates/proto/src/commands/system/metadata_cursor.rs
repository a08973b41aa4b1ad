//! Positions in the metadata log for `GET_METADATA_CHANGES` (17): the change cursor, the
//! resource groups and the page token that resumes a `Current` listing.

use alloc::vec::Vec;

use super::wire::decode_enum;
use crate::codec::{Codec, Reader, WireName, Writer};
use crate::dialect::Dialect;
use crate::error::{DecodeError, DecodeErrorKind};

/// Bytes of a metadata-change cursor: `[log_id:u128][op:u64][checksum:u128][ordinal:u32]`.
pub const METADATA_CURSOR_LENGTH: usize = 44;
/// Bytes of a page token's `last_key`: a user id and a token name at most.
pub const PAGE_TOKEN_KEY_LENGTH_MAX: usize = 4 + 1 + 255;

/// A position in the metadata log. At `op = 0` checksum and ordinal must be 0 (canonical).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[cfg_attr(test, proptest(filter = "MetadataCursor::is_canonical"))]
pub struct MetadataCursor {
    pub log_id: u128,
    pub op: u64,
    pub checksum: u128,
    pub ordinal: u32,
}

impl MetadataCursor {
    pub const fn is_canonical(&self) -> bool {
        self.op != 0 || (self.checksum == 0 && self.ordinal == 0)
    }
}

impl Codec<'_> for MetadataCursor {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u128(self.log_id);
        writer.u64(self.op);
        writer.u128(self.checksum);
        writer.u32(self.ordinal);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let cursor = Self {
            log_id: reader.u128("cursor.log_id")?,
            op: reader.u64("cursor.op")?,
            checksum: reader.u128("cursor.checksum")?,
            ordinal: reader.u32("cursor.ordinal")?,
        };
        if !cursor.is_canonical() {
            return Err(DecodeError::new(
                "cursor",
                offset,
                DecodeErrorKind::NonZeroReserved,
            ));
        }
        Ok(cursor)
    }
}

/// The resource families of the metadata log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum MetadataGroup {
    Streams = 1,
    Topics = 2,
    Partitions = 3,
    ConsumerGroups = 4,
    ConsumerGroupMembers = 5,
    Users = 6,
    PersonalAccessTokens = 7,
    Sessions = 8,
}

impl MetadataGroup {
    const ALL: [Self; 8] = [
        Self::Streams,
        Self::Topics,
        Self::Partitions,
        Self::ConsumerGroups,
        Self::ConsumerGroupMembers,
        Self::Users,
        Self::PersonalAccessTokens,
        Self::Sessions,
    ];

    // A fieldless enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|group| group.as_u8() == value)
    }

    /// This group's bit in a page token's `groups_mask`.
    pub fn mask_bit(self) -> u8 {
        1_u8.checked_shl(u32::from(self.as_u8().saturating_sub(1)))
            .unwrap_or(0)
    }

    /// Whether `key` has the shape of this group's resource key.
    fn fits_key(self, key: &[u8]) -> bool {
        match self {
            Self::Streams | Self::Users => key.len() == 4,
            Self::Topics | Self::Partitions | Self::Sessions => key.len() == 8,
            Self::ConsumerGroups => key.len() == 12,
            Self::ConsumerGroupMembers => key.len() == 16,
            Self::PersonalAccessTokens => key.get(4..).is_some_and(|name| {
                let mut reader = Reader::new(name, Dialect::V0_12_2);
                WireName::decode(&mut reader).is_ok() && reader.is_empty()
            }),
        }
    }
}

/// Where a `Current` page listing resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageToken {
    pub anchor: MetadataCursor,
    /// Not below `anchor.op`.
    pub required_head: u64,
    /// Contains `group`'s bit.
    pub groups_mask: u8,
    pub group: MetadataGroup,
    /// The last key listed, shaped as `group`'s key.
    pub last_key: Vec<u8>,
}

impl PageToken {
    fn is_valid(&self) -> bool {
        self.groups_mask & self.group.mask_bit() != 0
            && self.required_head >= self.anchor.op
            && self.last_key.len() <= PAGE_TOKEN_KEY_LENGTH_MAX
            && self.group.fits_key(&self.last_key)
    }

    fn encoded_length(&self) -> usize {
        self.last_key
            .len()
            .saturating_add(METADATA_CURSOR_LENGTH + 12)
    }

    /// `[len:u16][token]`, `len = 0` for none.
    pub(super) fn encode_optional(token: Option<&Self>, writer: &mut Writer<'_>) {
        let Some(token) = token else {
            writer.u16(0);
            return;
        };
        let length = u16::try_from(token.encoded_length());
        writer.u16(length.expect("a valid token spans at most 316 bytes"));
        token.anchor.encode(writer);
        writer.u64(token.required_head);
        writer.u8(token.groups_mask);
        writer.u8(token.group.as_u8());
        writer.u16(u16::try_from(token.last_key.len()).expect("a valid key fits a u16"));
        writer.bytes(&token.last_key);
    }

    pub(super) fn decode_optional(reader: &mut Reader<'_>) -> Result<Option<Self>, DecodeError> {
        let length = reader.u16("page_token.length")?;
        if length == 0 {
            return Ok(None);
        }
        let offset = reader.offset();
        let mut body = reader.sub(usize::from(length), "page_token")?;
        let anchor = MetadataCursor::decode(&mut body)?;
        let required_head = body.u64("page_token.required_head")?;
        let groups_mask = body.u8("page_token.groups_mask")?;
        let group = decode_enum(&mut body, "page_token.group", MetadataGroup::from_u8)?;
        let key_length = usize::from(body.u16("page_token.key_length")?);
        let last_key = Vec::from(body.bytes(key_length, "page_token.last_key")?);
        body.finish("page_token.trailing")?;
        let token = Self {
            anchor,
            required_head,
            groups_mask,
            group,
            last_key,
        };
        if !token.is_valid() {
            let kind = DecodeErrorKind::InvalidValue {
                value: u64::from(token.group.as_u8()),
            };
            return Err(DecodeError::new("page_token", offset, kind));
        }
        Ok(Some(token))
    }
}

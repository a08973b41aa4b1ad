//! `DESCRIBE_OPTIONS` (13): the option scope byte shared with `UPDATE_RESOURCE`, the request
//! and the catalog of option descriptors it returns.

use alloc::string::String;
use alloc::vec::Vec;

use super::wire::{decode_counted, decode_enum, decode_text, encode_counted};
#[cfg(test)]
use super::wire::{small_vec, text_strategy};
use crate::codec::{Codec, Reader, WireName, Writer};
use crate::dialect::Dialect;
use crate::error::DecodeError;
use crate::primitives::HeaderKind;

/// Entries a `DESCRIBE_OPTIONS` reply may carry (an options block holds at most 512 keys).
pub const OPTION_DESCRIPTORS_MAX: usize = 1024;
/// Bytes of an option default: one TLV value.
pub const OPTION_DEFAULT_LENGTH_MAX: usize = 255;

/// Which resource kind an options command addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum OptionScope {
    Topic,
    Stream,
    User,
}

impl OptionScope {
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Topic => 1,
            Self::Stream => 2,
            Self::User => 3,
        }
    }

    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            1 => Some(Self::Topic),
            2 => Some(Self::Stream),
            3 => Some(Self::User),
            _ => None,
        }
    }
}

/// `DESCRIBE_OPTIONS` (13) request: `[scope:u8]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DescribeOptions {
    pub scope: OptionScope,
}

impl Codec<'_> for DescribeOptions {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.scope.as_u8());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let scope = decode_enum(reader, "describe_options.scope", OptionScope::from_u8)?;
        Ok(Self { scope })
    }
}

/// One catalog entry of a `DESCRIBE_OPTIONS` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct OptionDescriptor {
    pub key: WireName,
    /// The key's canonical value kind; the SDK refuses kinds outside 1..=15.
    pub kind: HeaderKind,
    /// 0.12.2 only: a bit set of the `FLAG_*` constants. 0.11.0 neither writes nor reads it
    /// (decodes as 0).
    pub flags: u8,
    /// The default in `kind`'s encoding; empty = no default.
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub default_value: Vec<u8>,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub description: String,
}

impl OptionDescriptor {
    pub const FLAG_UPDATABLE: u8 = 1;
    pub const FLAG_RESETTABLE: u8 = 1 << 1;
    /// Write-only: never echoed back.
    pub const FLAG_SECRET: u8 = 1 << 2;
    /// Server computed.
    pub const FLAG_READ_ONLY: u8 = 1 << 3;
    pub const FLAG_CRITICAL: u8 = 1 << 4;
}

/// The shortest descriptor: a one-byte key, its kind, two empty `u32`-prefixed fields, and in
/// 0.12.2 the flags byte. The 0.11.0 form (no flags) bounds both dialects.
const OPTION_DESCRIPTOR_LENGTH_MIN: usize = 11;

impl Codec<'_> for OptionDescriptor {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.key.encode(writer);
        writer.u8(self.kind.as_u8());
        if writer.dialect() == Dialect::V0_12_2 {
            writer.u8(self.flags);
        }
        writer.bytes_u32(&self.default_value);
        writer.bytes_u32(self.description.as_bytes());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let key = WireName::decode(reader)?;
        let kind = decode_enum(reader, "option.kind", HeaderKind::from_u8)?;
        let flags = match reader.dialect() {
            Dialect::V0_12_2 => reader.u8("option.flags")?,
            Dialect::V0_11_0 => 0,
        };
        let default_value = reader.bytes_u32(OPTION_DEFAULT_LENGTH_MAX, "option.default")?;
        Ok(Self {
            key,
            kind,
            flags,
            default_value: Vec::from(default_value),
            description: decode_text(reader, "option.description")?,
        })
    }
}

/// `DESCRIBE_OPTIONS` reply: `[count:u32]` then the entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct OptionDescriptors(
    #[cfg_attr(test, proptest(strategy = "small_vec()"))] pub Vec<OptionDescriptor>,
);

impl Codec<'_> for OptionDescriptors {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_counted(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        decode_counted(
            reader,
            OPTION_DESCRIPTORS_MAX,
            OPTION_DESCRIPTOR_LENGTH_MIN,
            "describe_options.count",
        )
        .map(Self)
    }
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;

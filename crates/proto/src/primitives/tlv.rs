//! TLV blocks (§3.8): message user headers and resource option blocks share one encoding,
//! `[kind:u8][length:u32][data]` entries taken in (key, value) pairs.
//!
//! Structural rules, enforced by every decoder here: kind ≠ 0, `1 <= length <= 255`, entries
//! tile the buffer exactly, an even number of entries. Options add: keys are strings, unique,
//! at most 1024 entries and 100,000 bytes. User headers add: kinds are known and fixed-size
//! kinds have their exact size.

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, ShortBytes, WireName, Writer, check_length, len_u32};
use crate::error::{DecodeError, DecodeErrorKind};

/// Bytes of user headers one message may carry (`MAX_USER_HEADERS_SIZE`).
pub const USER_HEADERS_LENGTH_MAX: usize = 100_000;
/// Entries an options block may hold (pairs count twice).
pub const OPTIONS_ENTRIES_MAX: usize = 1024;
/// Bytes an options block may span.
pub const OPTIONS_LENGTH_MAX: usize = 100_000;

/// The value kinds of headers and options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum HeaderKind {
    Raw = 1,
    String = 2,
    Bool = 3,
    Int8 = 4,
    Int16 = 5,
    Int32 = 6,
    Int64 = 7,
    Int128 = 8,
    Uint8 = 9,
    Uint16 = 10,
    Uint32 = 11,
    Uint64 = 12,
    Uint128 = 13,
    Float32 = 14,
    Float64 = 15,
}

impl HeaderKind {
    pub const ALL: [Self; 15] = [
        Self::Raw,
        Self::String,
        Self::Bool,
        Self::Int8,
        Self::Int16,
        Self::Int32,
        Self::Int64,
        Self::Int128,
        Self::Uint8,
        Self::Uint16,
        Self::Uint32,
        Self::Uint64,
        Self::Uint128,
        Self::Float32,
        Self::Float64,
    ];

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_u8() == value)
    }

    // A fieldless enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The exact size of fixed-size kinds; `None` for `Raw` and `String` (1..=255).
    pub const fn fixed_size(self) -> Option<usize> {
        match self {
            Self::Raw | Self::String => None,
            Self::Bool | Self::Int8 | Self::Uint8 => Some(1),
            Self::Int16 | Self::Uint16 => Some(2),
            Self::Int32 | Self::Uint32 | Self::Float32 => Some(4),
            Self::Int64 | Self::Uint64 | Self::Float64 => Some(8),
            Self::Int128 | Self::Uint128 => Some(16),
        }
    }
}

/// One TLV entry: a kind byte (non-zero, possibly unknown) and 1..=255 data bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TlvEntry {
    #[cfg_attr(test, proptest(strategy = "1_u8..=255"))]
    pub kind: u8,
    pub data: ShortBytes,
}

impl TlvEntry {
    pub fn new(kind: HeaderKind, data: &[u8]) -> Option<Self> {
        Some(Self {
            kind: kind.as_u8(),
            data: ShortBytes::new(Vec::from(data))?,
        })
    }

    pub fn string(text: &str) -> Option<Self> {
        Self::new(HeaderKind::String, text.as_bytes())
    }

    pub fn uint64(value: u64) -> Self {
        Self::new(HeaderKind::Uint64, &value.to_le_bytes()).expect("8 bytes")
    }

    pub fn uint32(value: u32) -> Self {
        Self::new(HeaderKind::Uint32, &value.to_le_bytes()).expect("4 bytes")
    }

    pub fn boolean(value: bool) -> Self {
        Self::new(HeaderKind::Bool, &[u8::from(value)]).expect("1 byte")
    }

    /// The value as a `u64` if the entry is a `Uint64`.
    pub fn as_u64(&self) -> Option<u64> {
        let bytes: [u8; 8] = self.data.as_bytes().try_into().ok()?;
        (self.kind == HeaderKind::Uint64.as_u8()).then(|| u64::from_le_bytes(bytes))
    }

    /// The value as a `u32` if the entry is a `Uint32`.
    pub fn as_u32(&self) -> Option<u32> {
        let bytes: [u8; 4] = self.data.as_bytes().try_into().ok()?;
        (self.kind == HeaderKind::Uint32.as_u8()).then(|| u32::from_le_bytes(bytes))
    }

    /// The value as text if the entry is a valid UTF-8 `String`.
    pub fn as_str(&self) -> Option<&str> {
        if self.kind != HeaderKind::String.as_u8() {
            return None;
        }
        core::str::from_utf8(self.data.as_bytes()).ok()
    }

    /// The value as a bool if the entry is a `Bool` of 0 or 1.
    pub fn as_bool(&self) -> Option<bool> {
        match (HeaderKind::from_u8(self.kind)?, self.data.as_bytes()) {
            (HeaderKind::Bool, [0]) => Some(false),
            (HeaderKind::Bool, [1]) => Some(true),
            _ => None,
        }
    }

    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.kind);
        writer.bytes_u32(self.data.as_bytes());
    }

    /// Length of the encoded entry.
    pub fn encoded_length(&self) -> usize {
        self.data.as_bytes().len().saturating_add(5)
    }
}

/// Reads one raw entry, `(kind, data)`, enforcing the structural rules.
fn decode_entry<'a>(reader: &mut Reader<'a>) -> Result<(u8, &'a [u8]), DecodeError> {
    let offset = reader.offset();
    let kind = reader.u8("tlv.kind")?;
    if kind == 0 {
        return Err(DecodeError::new(
            "tlv.kind",
            offset,
            DecodeErrorKind::InvalidValue { value: 0 },
        ));
    }
    let data = reader.bytes_u32(255, "tlv.length")?;
    if data.is_empty() {
        return Err(reader.error(
            "tlv.length",
            DecodeErrorKind::InvalidLength {
                length: 0,
                min: 1,
                max: 255,
            },
        ));
    }
    Ok((kind, data))
}

/// Walks a user-headers block without allocating and returns the number of (key, value)
/// pairs: the check the server runs on every sent message.
pub fn validate_user_headers(block: &[u8], base_offset: usize) -> Result<usize, DecodeError> {
    check_length(
        crate::codec::usize_to_u64(block.len()),
        0,
        USER_HEADERS_LENGTH_MAX,
        "user_headers",
        base_offset,
    )
    .map_err(|error| error.about(crate::error::Subject::UserHeadersLength))?;
    let mut reader = Reader::new(block, crate::Dialect::V0_12_2);
    let mut entries = 0_usize;
    while !reader.is_empty() {
        let offset = reader.offset().saturating_add(base_offset);
        let (kind, data) = decode_entry(&mut reader)?;
        let known = HeaderKind::from_u8(kind)
            .filter(|kind| kind.fixed_size().is_none_or(|size| size == data.len()));
        if known.is_none() {
            return Err(DecodeError::new(
                "user_headers.kind",
                offset,
                DecodeErrorKind::InvalidValue {
                    value: u64::from(kind),
                },
            ));
        }
        entries = entries.saturating_add(1);
    }
    if !entries.is_multiple_of(2) {
        let count = crate::codec::usize_to_u64(entries);
        return Err(DecodeError::new(
            "user_headers",
            base_offset,
            DecodeErrorKind::CountMismatch {
                declared: count,
                actual: count.saturating_add(1),
            },
        ));
    }
    Ok(entries / 2)
}

/// A message's user headers as owned (key, value) pairs, for encoders and tests; the server
/// never builds this on the data path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserHeaders(pub Vec<(TlvEntry, TlvEntry)>);

impl UserHeaders {
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut writer = Writer::new(out, crate::Dialect::V0_12_2);
        for (key, value) in &self.0 {
            key.encode(&mut writer);
            value.encode(&mut writer);
        }
    }

    pub fn decode(block: &[u8]) -> Result<Self, DecodeError> {
        validate_user_headers(block, 0)?;
        let mut reader = Reader::new(block, crate::Dialect::V0_12_2);
        let mut pairs = Vec::new();
        while !reader.is_empty() {
            let (key_kind, key) = decode_entry(&mut reader)?;
            let (value_kind, value) = decode_entry(&mut reader)?;
            pairs.push((owned_entry(key_kind, key), owned_entry(value_kind, value)));
        }
        Ok(Self(pairs))
    }
}

fn owned_entry(kind: u8, data: &[u8]) -> TlvEntry {
    let data = ShortBytes::new(Vec::from(data)).expect("decode_entry yields 1..=255 bytes");
    TlvEntry { kind, data }
}

/// An options block: string keys with typed values, in wire order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct OptionsBlock(pub Vec<(WireName, TlvEntry)>);

impl OptionsBlock {
    pub fn get(&self, key: &str) -> Option<&TlvEntry> {
        self.0
            .iter()
            .find(|(name, _)| name.as_str() == key)
            .map(|(_, value)| value)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds or replaces `key`.
    pub fn set(&mut self, key: &str, value: TlvEntry) {
        let Some(name) = WireName::new(key) else {
            return;
        };
        match self.0.iter_mut().find(|(existing, _)| *existing == name) {
            Some(entry) => entry.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// Encoded length without a prefix.
    pub fn encoded_length(&self) -> usize {
        self.0.iter().fold(0_usize, |total, (key, value)| {
            let key_length = key.as_str().len().saturating_add(5);
            total
                .saturating_add(key_length)
                .saturating_add(value.encoded_length())
        })
    }

    /// Encodes with a `u32` length prefix, as in responses.
    pub fn encode_prefixed(&self, writer: &mut Writer<'_>) {
        writer.u32(len_u32(self.encoded_length()));
        self.encode(writer);
    }

    /// Decodes a `u32`-prefixed block, as in responses.
    pub fn decode_prefixed(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let length = reader.length_u32(0, OPTIONS_LENGTH_MAX, "options.length")?;
        let mut sub = reader.sub(length, "options")?;
        Self::decode(&mut sub)
    }
}

/// Encodes without a prefix and decodes everything the reader has left: the form of create
/// requests, where the block runs to the end of the body.
impl Codec<'_> for OptionsBlock {
    fn encode(&self, writer: &mut Writer<'_>) {
        for (key, value) in &self.0 {
            writer.u8(HeaderKind::String.as_u8());
            writer.bytes_u32(key.as_str().as_bytes());
            value.encode(writer);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        check_length(
            crate::codec::usize_to_u64(reader.remaining()),
            0,
            OPTIONS_LENGTH_MAX,
            "options",
            offset,
        )?;
        let mut entries: Vec<(WireName, TlvEntry)> = Vec::new();
        while !reader.is_empty() {
            let key_offset = reader.offset();
            let (key_kind, key) = decode_entry(reader)?;
            let key = option_key(key_kind, key, key_offset)?;
            let (value_kind, value) = decode_entry(reader).map_err(|mut error| {
                if reader.is_empty() {
                    error.field = "options.value";
                }
                error
            })?;
            if entries.len() >= OPTIONS_ENTRIES_MAX / 2 || entries.iter().any(|(k, _)| *k == key) {
                return Err(DecodeError::new(
                    "options.key",
                    key_offset,
                    DecodeErrorKind::Duplicate,
                ));
            }
            entries.push((key, owned_entry(value_kind, value)));
        }
        Ok(Self(entries))
    }
}

fn option_key(kind: u8, key: &[u8], offset: usize) -> Result<WireName, DecodeError> {
    if kind != HeaderKind::String.as_u8() {
        return Err(DecodeError::new(
            "options.key_kind",
            offset,
            DecodeErrorKind::InvalidValue {
                value: u64::from(kind),
            },
        ));
    }
    let text = core::str::from_utf8(key)
        .map_err(|_utf8| DecodeError::new("options.key", offset, DecodeErrorKind::InvalidUtf8))?;
    Ok(WireName::new(text).expect("decode_entry yields 1..=255 bytes"))
}

#[cfg(test)]
pub(crate) mod arbitrary {
    use proptest::prelude::*;

    use super::{OptionsBlock, TlvEntry, UserHeaders};
    use crate::codec::WireName;

    impl Arbitrary for OptionsBlock {
        type Parameters = ();
        type Strategy = BoxedStrategy<Self>;
        fn arbitrary_with((): ()) -> Self::Strategy {
            proptest::collection::btree_map(any::<WireName>(), any::<TlvEntry>(), 0..5)
                .prop_map(|entries| OptionsBlock(entries.into_iter().collect()))
                .boxed()
        }
    }

    impl Arbitrary for UserHeaders {
        type Parameters = ();
        type Strategy = BoxedStrategy<Self>;
        fn arbitrary_with((): ()) -> Self::Strategy {
            let key = "[a-z]{1,12}".prop_map(|key| TlvEntry::string(&key).unwrap());
            let value = prop_oneof![
                any::<u64>().prop_map(TlvEntry::uint64),
                any::<u32>().prop_map(TlvEntry::uint32),
                any::<bool>().prop_map(TlvEntry::boolean),
                "\\PC{1,30}".prop_filter_map("1..=255 bytes", |text| TlvEntry::string(&text)),
            ];
            proptest::collection::vec((key, value), 0..4)
                .prop_map(UserHeaders)
                .boxed()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dialect;
    use crate::codec::{decode_exact, encode_to_vec};

    #[test]
    fn golden_options_block() {
        let mut block = OptionsBlock::default();
        block.set("preallocate_segments", TlvEntry::boolean(true));
        block.set("segment_size", TlvEntry::uint64(1 << 30));
        block.set("durability", TlvEntry::string("persisted").unwrap());
        let mut expected = Vec::new();
        expected
            .extend_from_slice(b"\x02\x14\x00\x00\x00preallocate_segments\x03\x01\x00\x00\x00\x01");
        expected.extend_from_slice(b"\x02\x0c\x00\x00\x00segment_size\x0c\x08\x00\x00\x00");
        expected.extend_from_slice(&[0, 0, 0, 0x40, 0, 0, 0, 0]);
        expected.extend_from_slice(b"\x02\x0a\x00\x00\x00durability\x02\x09\x00\x00\x00persisted");
        assert_eq!(encode_to_vec(&block, Dialect::V0_12_2), expected);
        assert_eq!(
            decode_exact::<OptionsBlock>(&expected, Dialect::V0_12_2).unwrap(),
            block
        );
    }

    #[test]
    fn user_headers_refuse_odd_entries_and_bad_sizes() {
        let mut odd = Vec::new();
        UserHeaders(alloc::vec![(
            TlvEntry::string("k").unwrap(),
            TlvEntry::uint32(7)
        )])
        .encode_into(&mut odd);
        assert_eq!(validate_user_headers(&odd, 0).unwrap(), 1);
        odd.extend_from_slice(&[2, 1, 0, 0, 0, b'x']);
        assert!(validate_user_headers(&odd, 0).is_err());
        let bad_size = [2, 1, 0, 0, 0, b'k', 11, 2, 0, 0, 0, 1, 2];
        assert!(validate_user_headers(&bad_size, 0).is_err());
    }
}

//! The reading and writing primitives every codec is built from.
//!
//! [`Reader`] is a bounds-checked cursor over a borrowed buffer: every read either returns
//! the bytes or a [`DecodeError`] naming the field and the absolute offset, so decoders built
//! on it are total by construction. [`Writer`] appends little-endian values to a `Vec<u8>`.
//! Both carry the [`Dialect`] of the connection, so one codec serves both protocol versions.

use alloc::string::String;
use alloc::vec::Vec;

use crate::dialect::Dialect;
use crate::error::{DecodeError, DecodeErrorKind};

/// A value with one wire encoding (per dialect).
pub trait Codec<'a>: Sized {
    fn encode(&self, writer: &mut Writer<'_>);
    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError>;
}

/// Encodes `value` for `dialect` into a fresh buffer.
pub fn encode_to_vec<'a, T: Codec<'a>>(value: &T, dialect: Dialect) -> Vec<u8> {
    let mut out = Vec::new();
    value.encode(&mut Writer::new(&mut out, dialect));
    out
}

/// Decodes a `T` that must span all of `bytes`.
pub fn decode_exact<'a, T: Codec<'a>>(bytes: &'a [u8], dialect: Dialect) -> Result<T, DecodeError> {
    let mut reader = Reader::new(bytes, dialect);
    let value = T::decode(&mut reader)?;
    reader.finish("trailing")?;
    Ok(value)
}

/// A bounds-checked cursor over borrowed bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    /// Offset of `bytes[0]` in the outermost buffer, for error messages.
    base: usize,
    dialect: Dialect,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], dialect: Dialect) -> Self {
        Self {
            bytes,
            position: 0,
            base: 0,
            dialect,
        }
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Absolute offset of the next byte.
    pub fn offset(&self) -> usize {
        self.base.saturating_add(self.position)
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.position)
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn error(&self, field: &'static str, kind: DecodeErrorKind) -> DecodeError {
        DecodeError::new(field, self.offset(), kind)
    }

    /// Takes the next `length` bytes.
    pub fn bytes(&mut self, length: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let end = self.position.checked_add(length);
        match end.and_then(|end| self.bytes.get(self.position..end).map(|s| (end, s))) {
            Some((end, slice)) => {
                self.position = end;
                Ok(slice)
            }
            None => Err(self.error(
                field,
                DecodeErrorKind::UnexpectedEnd {
                    needed: length,
                    available: self.remaining(),
                },
            )),
        }
    }

    /// Takes everything that is left.
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = self.bytes.get(self.position..).unwrap_or_default();
        self.position = self.bytes.len();
        rest
    }

    /// A reader over the next `length` bytes that reports offsets in this buffer's terms; an
    /// inner decoder cannot read past it.
    pub fn sub(&mut self, length: usize, field: &'static str) -> Result<Reader<'a>, DecodeError> {
        let base = self.offset();
        let bytes = self.bytes(length, field)?;
        Ok(Reader {
            bytes,
            position: 0,
            base,
            dialect: self.dialect,
        })
    }

    pub fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let slice = self.bytes(N, field)?;
        let mut array = [0_u8; N];
        array.copy_from_slice(slice);
        Ok(array)
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        self.array::<1>(field).map(|[byte]| byte)
    }

    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        self.array(field).map(u16::from_le_bytes)
    }

    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        self.array(field).map(u32::from_le_bytes)
    }

    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        self.array(field).map(u64::from_le_bytes)
    }

    pub fn u128(&mut self, field: &'static str) -> Result<u128, DecodeError> {
        self.array(field).map(u128::from_le_bytes)
    }

    pub fn f32(&mut self, field: &'static str) -> Result<f32, DecodeError> {
        self.array(field).map(f32::from_le_bytes)
    }

    /// A strict boolean: 0 or 1, anything else refused.
    pub fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        let offset = self.offset();
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::new(
                field,
                offset,
                DecodeErrorKind::InvalidValue {
                    value: u64::from(value),
                },
            )),
        }
    }

    /// A `u32` length, checked against `min..=max` before anything is read or allocated.
    pub fn length_u32(
        &mut self,
        min: usize,
        max: usize,
        field: &'static str,
    ) -> Result<usize, DecodeError> {
        let offset = self.offset();
        let length = self.u32(field)?;
        check_length(u64::from(length), min, max, field, offset)
    }

    /// A `u8` length, checked against `min..=max`.
    pub fn length_u8(
        &mut self,
        min: usize,
        max: usize,
        field: &'static str,
    ) -> Result<usize, DecodeError> {
        let offset = self.offset();
        let length = self.u8(field)?;
        check_length(u64::from(length), min, max, field, offset)
    }

    /// UTF-8 text of `length` bytes.
    pub fn text(&mut self, length: usize, field: &'static str) -> Result<&'a str, DecodeError> {
        let offset = self.offset();
        let bytes = self.bytes(length, field)?;
        core::str::from_utf8(bytes)
            .map_err(|_utf8| DecodeError::new(field, offset, DecodeErrorKind::InvalidUtf8))
    }

    /// `[u8 length][UTF-8]` with the length in `min..=255`.
    pub fn text_u8(&mut self, min: usize, field: &'static str) -> Result<&'a str, DecodeError> {
        let length = self.length_u8(min, usize::from(u8::MAX), field)?;
        self.text(length, field)
    }

    /// `[u32 length][UTF-8]` with the length at most `max`.
    pub fn text_u32(&mut self, max: usize, field: &'static str) -> Result<&'a str, DecodeError> {
        let length = self.length_u32(0, max, field)?;
        self.text(length, field)
    }

    /// `[u8 length][bytes]` with the length in `min..=255`.
    pub fn bytes_u8(&mut self, min: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let length = self.length_u8(min, usize::from(u8::MAX), field)?;
        self.bytes(length, field)
    }

    /// `[u32 length][bytes]` with the length at most `max`.
    pub fn bytes_u32(&mut self, max: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let length = self.length_u32(0, max, field)?;
        self.bytes(length, field)
    }

    /// Requires that every byte was consumed.
    pub fn finish(&self, field: &'static str) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(self.error(field, DecodeErrorKind::TrailingBytes { count })),
        }
    }
}

/// Checks a length read from the wire against its bounds.
pub fn check_length(
    length: u64,
    min: usize,
    max: usize,
    field: &'static str,
    offset: usize,
) -> Result<usize, DecodeError> {
    let bounds = (usize_to_u64(min), usize_to_u64(max));
    if length < bounds.0 || length > bounds.1 {
        return Err(DecodeError::new(
            field,
            offset,
            DecodeErrorKind::InvalidLength {
                length,
                min: bounds.0,
                max: bounds.1,
            },
        ));
    }
    // The length is at most `max`, which is a usize.
    Ok(usize::try_from(length).unwrap_or(max))
}

/// Appends little-endian values for one dialect.
#[derive(Debug)]
pub struct Writer<'o> {
    out: &'o mut Vec<u8>,
    dialect: Dialect,
}

impl<'o> Writer<'o> {
    pub fn new(out: &'o mut Vec<u8>, dialect: Dialect) -> Self {
        Self { out, dialect }
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Bytes written to the underlying buffer so far (including what it held before).
    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    pub fn bytes(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    pub fn u8(&mut self, value: u8) {
        self.out.push(value);
    }

    pub fn bool(&mut self, value: bool) {
        self.out.push(u8::from(value));
    }

    pub fn u16(&mut self, value: u16) {
        self.bytes(&value.to_le_bytes());
    }

    pub fn u32(&mut self, value: u32) {
        self.bytes(&value.to_le_bytes());
    }

    pub fn u64(&mut self, value: u64) {
        self.bytes(&value.to_le_bytes());
    }

    pub fn u128(&mut self, value: u128) {
        self.bytes(&value.to_le_bytes());
    }

    pub fn f32(&mut self, value: f32) {
        self.bytes(&value.to_le_bytes());
    }

    /// `[u8 length][bytes]`; the caller's type guarantees at most 255 bytes.
    pub fn bytes_u8(&mut self, bytes: &[u8]) {
        self.u8(len_u8(bytes.len()));
        self.bytes(bytes);
    }

    /// `[u32 length][bytes]`; the caller's type guarantees the length fits.
    pub fn bytes_u32(&mut self, bytes: &[u8]) {
        self.u32(len_u32(bytes.len()));
        self.bytes(bytes);
    }

    /// Overwrites four bytes at absolute `position` with `value` (length back-patching).
    pub fn patch_u32(&mut self, position: usize, value: u32) {
        let end = position.checked_add(4);
        let target = end.and_then(|end| self.out.get_mut(position..end));
        // Callers patch a placeholder they wrote themselves, so the range exists.
        let target = target.expect("patch_u32 targets a placeholder written earlier");
        target.copy_from_slice(&value.to_le_bytes());
    }
}

/// A length the encoder's own types bound to 255.
pub fn len_u8(length: usize) -> u8 {
    u8::try_from(length).expect("encoded u8-prefixed field longer than 255 bytes")
}

/// A length the encoder's own types bound to `u32::MAX`.
pub fn len_u32(length: usize) -> u32 {
    u32::try_from(length).expect("encoded u32-prefixed field longer than u32::MAX bytes")
}

/// Widens a wire `u32` to `usize` (lossless on every target this server runs on).
pub fn usize_from_u32(value: u32) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

/// Widens a `usize` to `u64` (lossless on every target this server runs on).
pub fn usize_to_u64(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

/// A UTF-8 name of 1..=255 bytes (`WireName`): stream, topic, group, user and key names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WireName(String);

impl WireName {
    pub const LENGTH_MAX: usize = 255;

    /// Accepts 1..=255 bytes of UTF-8.
    pub fn new(name: impl Into<String>) -> Option<Self> {
        let name = name.into();
        (1..=Self::LENGTH_MAX)
            .contains(&name.len())
            .then_some(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl core::fmt::Display for WireName {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl Codec<'_> for WireName {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.bytes_u8(self.0.as_bytes());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        reader
            .text_u8(1, "name")
            .map(|name| Self(String::from(name)))
    }
}

/// Opaque bytes of 1..=255 (raw keys, tokens, passwords as the wire carries them).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShortBytes(Vec<u8>);

impl ShortBytes {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Option<Self> {
        let bytes = bytes.into();
        (1..=255).contains(&bytes.len()).then_some(Self(bytes))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Text of 0..=`u32::MAX` bytes behind a `u32` length, bounded by the decoder's maximum.
pub const LONG_TEXT_LENGTH_MAX: usize = 1 << 20;

#[cfg(test)]
pub(crate) mod arbitrary {
    //! proptest strategies for the constrained types above.
    use proptest::prelude::*;

    use super::{ShortBytes, WireName};

    impl Arbitrary for WireName {
        type Parameters = ();
        type Strategy = BoxedStrategy<Self>;
        fn arbitrary_with((): ()) -> Self::Strategy {
            "[a-zA-Z0-9_.\\- ]{1,40}|\\PC{1,20}"
                .prop_filter_map("1..=255 bytes", WireName::new)
                .boxed()
        }
    }

    impl Arbitrary for ShortBytes {
        type Parameters = ();
        type Strategy = BoxedStrategy<Self>;
        fn arbitrary_with((): ()) -> Self::Strategy {
            proptest::collection::vec(any::<u8>(), 1..=255)
                .prop_filter_map("1..=255 bytes", ShortBytes::new)
                .boxed()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_reports_absolute_offsets_from_sub_readers() {
        let bytes = [1, 2, 3, 4, 5];
        let mut reader = Reader::new(&bytes, Dialect::V0_12_2);
        reader.u8("a").unwrap();
        let mut sub = reader.sub(2, "sub").unwrap();
        sub.u16("b").unwrap();
        let error = sub.u8("c").unwrap_err();
        assert_eq!(error.offset, 3);
        assert_eq!(error.field, "c");
    }

    #[test]
    fn lengths_are_checked_before_reading() {
        let bytes = [0xff, 0xff, 0xff, 0xff];
        let mut reader = Reader::new(&bytes, Dialect::V0_12_2);
        let error = reader.bytes_u32(100, "blob").unwrap_err();
        assert!(matches!(error.kind, DecodeErrorKind::InvalidLength { .. }));
    }

    #[test]
    fn wire_name_refuses_empty_and_long() {
        assert!(WireName::new("").is_none());
        assert!(WireName::new("x".repeat(256)).is_none());
        assert!(WireName::new("x".repeat(255)).is_some());
        let bytes = [0_u8];
        assert!(decode_exact::<WireName>(&bytes, Dialect::V0_12_2).is_err());
    }
}

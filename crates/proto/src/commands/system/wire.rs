//! Wire helpers every system command shares: counted lists, one-byte enums and bounded
//! informational text, plus the proptest strategies their types derive with.

use alloc::string::String;
use alloc::vec::Vec;

use crate::codec::{Codec, Reader, Writer, check_length, len_u32};
use crate::error::{DecodeError, DecodeErrorKind};

/// Bytes of any informational string (host names, addresses, descriptions).
pub const TEXT_LENGTH_MAX: usize = 4096;

/// `[count:u32]` then the records.
pub(super) fn encode_counted<'a, T: Codec<'a>>(records: &[T], writer: &mut Writer<'_>) {
    writer.u32(len_u32(records.len()));
    for record in records {
        record.encode(writer);
    }
}

/// `[count:u32]` then the records; the count is bounded by `max` and by how many records of
/// at least `record_length_min` bytes the input still holds, before anything is allocated.
pub(super) fn decode_counted<'a, T: Codec<'a>>(
    reader: &mut Reader<'a>,
    max: usize,
    record_length_min: usize,
    field: &'static str,
) -> Result<Vec<T>, DecodeError> {
    let offset = reader.offset();
    let count = reader.u32(field)?;
    let fitting = reader
        .remaining()
        .checked_div(record_length_min)
        .unwrap_or(max);
    let count = check_length(u64::from(count), 0, max.min(fitting), field, offset)?;
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        records.push(T::decode(reader)?);
    }
    Ok(records)
}

/// A one-byte enum, refused with its offset when `from_u8` does not know it.
pub(super) fn decode_enum<T>(
    reader: &mut Reader<'_>,
    field: &'static str,
    from_u8: impl Fn(u8) -> Option<T>,
) -> Result<T, DecodeError> {
    let offset = reader.offset();
    let value = reader.u8(field)?;
    from_u8(value).ok_or(DecodeError::new(
        field,
        offset,
        DecodeErrorKind::InvalidValue {
            value: u64::from(value),
        },
    ))
}

pub(super) fn decode_text(
    reader: &mut Reader<'_>,
    field: &'static str,
) -> Result<String, DecodeError> {
    reader.text_u32(TEXT_LENGTH_MAX, field).map(String::from)
}

#[cfg(test)]
pub(super) fn text_strategy() -> impl proptest::strategy::Strategy<Value = String> {
    "\\PC{0,16}"
}

#[cfg(test)]
pub(super) fn small_vec<T: proptest::arbitrary::Arbitrary>()
-> impl proptest::strategy::Strategy<Value = Vec<T>> {
    proptest::collection::vec(proptest::prelude::any::<T>(), 0..4)
}

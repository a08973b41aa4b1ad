//! Request and reply bodies of every command in both dialects (PROTOCOL.md §4, §12.2).
//!
//! Conventions every command module follows:
//! - A request body is a struct named after the command (`CreateStream`), a reply payload is
//!   named after what it carries (`StreamDetails`). Both implement [`Codec`]; the dialect
//!   comes from the reader and writer.
//! - Replies of result-framed operations (§1.9) are encoded *without* their result section:
//!   the framing layer writes it (`crate::result::ResultSection`).
//! - A request body must be consumed exactly; [`crate::codec::decode_exact`] enforces it.
//! - "Not found" replies that the protocol encodes as an empty body are `Option<T>` at the
//!   call site: [`decode_optional`] and [`encode_optional`].

pub mod empty;
pub mod groups;
pub mod legacy;
pub mod messages;
pub mod offsets;
pub mod partitions;
pub mod poll_selector;
pub mod session;
pub mod streams;
pub mod system;
pub mod tokens;
pub mod topics;
pub mod users;

pub use empty::Empty;

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, Writer};
use crate::error::DecodeError;

/// Encodes `None` as an empty body (the protocol's "not found").
pub fn encode_optional<'a, T: Codec<'a>>(value: Option<&T>, writer: &mut Writer<'_>) {
    if let Some(value) = value {
        value.encode(writer);
    }
}

/// Decodes an empty body as `None`.
pub fn decode_optional<'a, T: Codec<'a>>(
    reader: &mut Reader<'a>,
) -> Result<Option<T>, DecodeError> {
    if reader.is_empty() {
        return Ok(None);
    }
    T::decode(reader).map(Some)
}

/// Encodes concatenated records with no count prefix (`GET_STREAMS`, `GET_USERS`, …).
pub fn encode_concatenated<'a, T: Codec<'a>>(records: &[T], writer: &mut Writer<'_>) {
    for record in records {
        record.encode(writer);
    }
}

/// Decodes records until the body ends; the body length bounds the count.
pub fn decode_concatenated<'a, T: Codec<'a>>(
    reader: &mut Reader<'a>,
) -> Result<Vec<T>, DecodeError> {
    let mut records = Vec::new();
    while !reader.is_empty() {
        records.push(T::decode(reader)?);
    }
    Ok(records)
}

//! Entry points for the fuzz targets (`fuzz/fuzz_targets/`) and their seeded replay tests.
//!
//! Each function takes arbitrary bytes and must never panic on them. When a decoder accepts
//! the input, the value is re-encoded and decoded again, and the two values must be equal:
//! a decoder that accepts what its encoder cannot reproduce is a bug the fuzzer reports by
//! panicking here.

pub mod replay;

use alloc::vec::Vec;

use crate::batch::{Batch, Integrity, Records, stamp};
use crate::codec::{Codec, Reader, Writer, decode_exact, encode_to_vec};
use crate::codes::CommandCode;
use crate::commands::{Reply, Request};
use crate::dialect::{Dialect, VersionPrefix};
use crate::header::{
    EvictionHeader, FRAME_SIZE_MAX_DEFAULT, ReplyHeader, RequestHeader, frame_prefix,
};
use crate::primitives::{
    AckLevel, Consumer, Identifier, OptionalPartition, OptionsBlock, Partitioning, Permissions,
    PollingStrategy, UserHeaders,
};
use crate::result::ResultSection;

/// Splits a selector byte off the input: the first byte picks the dialect (low bit) and a
/// variant (the rest), so one target covers a whole decoder family.
fn split_selector(bytes: &[u8]) -> Option<(Dialect, u8, &[u8])> {
    let (&selector, rest) = bytes.split_first()?;
    let dialect = if selector & 1 == 0 {
        Dialect::V0_12_2
    } else {
        Dialect::V0_11_0
    };
    Some((dialect, selector >> 1, rest))
}

/// Decodes `bytes` as a `T`; if that works, checks that encoding and decoding again gives the
/// same value.
fn round_trip<T>(bytes: &[u8], dialect: Dialect)
where
    T: for<'a> Codec<'a> + PartialEq + core::fmt::Debug,
{
    if let Ok(value) = decode_exact::<T>(bytes, dialect) {
        let encoded = encode_to_vec(&value, dialect);
        let again = decode_exact::<T>(&encoded, dialect);
        assert_eq!(again.as_ref(), Ok(&value), "re-encoding changed the value");
    }
}

/// Frame prefix and the three header views, in both dialects.
pub fn fuzz_header(bytes: &[u8]) {
    let _ = frame_prefix(bytes, FRAME_SIZE_MAX_DEFAULT);
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        if let Ok(header) = RequestHeader::parse(bytes, dialect) {
            let _ = header.code();
            let _ = header.partition_context();
        }
    }
    if let Ok(header) = ReplyHeader::parse(bytes) {
        let _ = header.body_length();
    }
    if let Ok(header) = EvictionHeader::parse(bytes) {
        assert!(
            header.reason().is_some(),
            "a parsed eviction has a known reason"
        );
    }
}

/// The primitive encodings of PROTOCOL.md §2.2 and §3.
pub fn fuzz_primitives(bytes: &[u8]) {
    let Some((dialect, variant, rest)) = split_selector(bytes) else {
        return;
    };
    match variant % 12 {
        0 => round_trip::<Identifier>(rest, dialect),
        1 => round_trip::<Consumer>(rest, dialect),
        2 => round_trip::<Partitioning>(rest, dialect),
        3 => round_trip::<PollingStrategy>(rest, dialect),
        4 => round_trip::<OptionalPartition>(rest, dialect),
        5 => round_trip::<AckLevel>(rest, dialect),
        6 => round_trip::<Permissions>(rest, dialect),
        7 => round_trip::<OptionsBlock>(rest, dialect),
        8 => round_trip::<VersionPrefix>(rest, dialect),
        9 => fuzz_user_headers(rest),
        10 => fuzz_result_section(rest, dialect),
        _ => {
            let mut reader = Reader::new(rest, dialect);
            let _ = OptionsBlock::decode_prefixed(&mut reader);
        }
    }
}

fn fuzz_user_headers(bytes: &[u8]) {
    if let Ok(headers) = UserHeaders::decode(bytes) {
        let mut encoded = Vec::new();
        headers.encode_into(&mut encoded);
        assert_eq!(encoded, bytes, "user headers re-encode byte for byte");
    }
}

fn fuzz_result_section(bytes: &[u8], dialect: Dialect) {
    let mut reader = Reader::new(bytes, dialect);
    let _ = ResultSection::decode(&mut reader);
}

/// Batch validation, iteration, slicing and stamping, and the record walk of poll replies.
pub fn fuzz_batch(bytes: &[u8]) {
    let Some((dialect, variant, rest)) = split_selector(bytes) else {
        return;
    };
    let integrity = if variant & 1 == 0 {
        Integrity::Full
    } else {
        Integrity::LayoutOnly
    };
    if variant & 2 != 0 {
        let mut fixed = Vec::from(rest);
        crate::batch::fix_checksums(&mut fixed);
        if let Ok(batch) = Batch::parse(&fixed, dialect, Integrity::Full, 0) {
            check_batch(&batch, dialect);
        }
    }
    for record in Records::new(rest, dialect, integrity, 0) {
        let Ok(batch) = record else { break };
        check_batch(&batch, dialect);
    }
    if let Ok(batch) = Batch::parse(rest, dialect, integrity, 0) {
        check_batch(&batch, dialect);
    }
}

fn check_batch(batch: &Batch<'_>, dialect: Dialect) {
    let count = batch.messages().count();
    assert_eq!(Some(count), usize::try_from(batch.message_count()).ok());
    if let Some(slice) = batch.slice(1, count) {
        let mut record = Vec::from(slice.header);
        record.extend_from_slice(slice.frames);
        let sliced = Batch::parse(&record, dialect, Integrity::LayoutOnly, 0);
        assert!(
            sliced.is_ok(),
            "a slice of a valid batch is valid: {sliced:?}"
        );
    }
    let mut stamped = Vec::from(batch.as_bytes());
    assert!(stamp(&mut stamped, 7, 11).is_ok());
    if Batch::parse(batch.as_bytes(), dialect, Integrity::Full, 0).is_ok() {
        let restamped = Batch::parse(&stamped, dialect, Integrity::Full, 0);
        assert!(
            restamped.is_ok(),
            "stamping keeps a valid batch valid: {restamped:?}"
        );
    }
}

/// Every request decoder, selected by the first byte: dialect in the low bit, command code
/// index in the rest.
pub fn fuzz_request(bytes: &[u8]) {
    let Some((dialect, variant, body)) = split_selector(bytes) else {
        return;
    };
    let code = command_code(variant);
    if let Ok(request) = Request::decode(code, body, dialect) {
        let mut encoded = Vec::new();
        request.encode(&mut Writer::new(&mut encoded, dialect));
        let again = Request::decode(code, &encoded, dialect);
        assert_eq!(
            again.as_ref(),
            Ok(&request),
            "re-encoding changed the request"
        );
    }
    let _ = Request::decode_register(body, dialect);
}

/// Every reply decoder, selected like [`fuzz_request`]; also the result-section framing.
pub fn fuzz_reply(bytes: &[u8]) {
    let Some((dialect, variant, body)) = split_selector(bytes) else {
        return;
    };
    let code = command_code(variant);
    if let Ok(reply) = Reply::decode(code, body, dialect) {
        let mut encoded = Vec::new();
        reply.encode(&mut Writer::new(&mut encoded, dialect));
        // Replies carry floats (GET_STATS), and NaN never equals itself: compare the bytes
        // of a second encoding instead of the values.
        let again = Reply::decode(code, &encoded, dialect);
        assert!(again.is_ok(), "a re-encoded reply decodes: {again:?}");
        let mut encoded_again = Vec::new();
        if let Ok(again) = again {
            again.encode(&mut Writer::new(&mut encoded_again, dialect));
        }
        assert_eq!(encoded_again, encoded, "re-encoding changed the reply");
    }
    let _ = Reply::decode_body(code, code.operation(), body, dialect);
}

/// The command code with index `variant` (modulo the number of codes).
pub fn command_code(variant: u8) -> CommandCode {
    let count = CommandCode::all().count();
    let index = usize::from(variant).checked_rem(count).unwrap_or_default();
    CommandCode::all().nth(index).unwrap_or(CommandCode::Ping)
}

/// The selector byte that makes [`fuzz_request`] and [`fuzz_reply`] pick `code` in `dialect`.
pub fn selector_for(code: CommandCode, dialect: Dialect) -> u8 {
    let index = CommandCode::all()
        .position(|candidate| candidate == code)
        .unwrap_or_default();
    let index = u8::try_from(index).unwrap_or_default();
    index.wrapping_shl(1) | u8::from(dialect == Dialect::V0_11_0)
}

#[cfg(test)]
mod seeds;
#[cfg(test)]
mod tests;

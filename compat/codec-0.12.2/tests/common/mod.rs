//! Helpers every cross-check shares: the SDK-to-`proto` direction (`sdk_encode`, `ours`) and
//! the `proto`-to-SDK direction (`our_reply`, `sdk_payload`, `sdk_decode`), each failing with
//! the bytes in the message so a disagreement can be read off the test output.
#![allow(dead_code, unreachable_pub)]

use iggy_binary_protocol::consensus::{Operation, result_code, result_section_len};
use iggy_binary_protocol::{WireDecode, WireEncode, WireOptions, encode_user_headers};
use proto::codec::{Codec, decode_exact, encode_to_vec};
use proto::codes::CommandCode;
use proto::commands::Request;
use proto::result::ResultSection;
use proto::{Dialect, Writer};

/// The dialect the SDK crates of this project speak.
pub const DIALECT: Dialect = Dialect::V0_12_2;

/// The SDK's encoding of `value`, checked against its own size estimate.
pub fn sdk_encode<T: WireEncode>(value: &T) -> Vec<u8> {
    let bytes = value.to_bytes().to_vec();
    assert_eq!(
        bytes.len(),
        value.encoded_size(),
        "SDK encoded_size disagrees"
    );
    bytes
}

/// Decodes SDK-produced bytes with our codec; the whole buffer must be consumed.
pub fn ours<'a, T: Codec<'a>>(bytes: &'a [u8]) -> T {
    decode_exact::<T>(bytes, DIALECT)
        .unwrap_or_else(|error| panic!("proto refused SDK bytes {bytes:02x?}: {error:?}"))
}

/// Decodes SDK-produced bytes as the request body of `code`, as a server dispatches them.
pub fn ours_request(code: CommandCode, bytes: &[u8]) -> Request<'_> {
    Request::decode(code, bytes, DIALECT)
        .unwrap_or_else(|error| panic!("proto refused SDK bytes {bytes:02x?}: {error:?}"))
}

/// Decodes with the SDK and requires that it consumed every byte.
pub fn sdk_decode<T: WireDecode>(bytes: &[u8]) -> T {
    match T::decode(bytes) {
        Ok((value, consumed)) => {
            assert_eq!(consumed, bytes.len(), "SDK left bytes of {bytes:02x?}");
            value
        }
        Err(error) => panic!("SDK refused proto bytes {bytes:02x?}: {error:?}"),
    }
}

/// Our encoding of a reply payload as it goes on the wire: behind an OK result section when
/// the reply's header operation is result-framed, bare otherwise.
pub fn our_reply<'a, T: Codec<'a>>(payload: &T, operation: proto::header::Operation) -> Vec<u8> {
    let mut body = Vec::new();
    let mut writer = Writer::new(&mut body, DIALECT);
    if operation.is_result_framed() {
        ResultSection::Ok.encode(&mut writer);
    }
    payload.encode(&mut writer);
    body
}

/// What the SDK client hands its typed decoder for a reply body under `operation`: the
/// payload behind the result section when the SDK classifies the operation as result-framed
/// (non-empty `Register` bodies included), the body itself otherwise.
pub fn sdk_payload(operation: Operation, body: &[u8]) -> Vec<u8> {
    let framed =
        operation.is_result_framed() || (operation == Operation::Register && !body.is_empty());
    if !framed {
        return body.to_vec();
    }
    assert_eq!(
        result_code(body),
        Some(0),
        "SDK saw a refusal in {body:02x?}"
    );
    let start = result_section_len(body).expect("a well-formed result section");
    body[start..].to_vec()
}

/// `our_reply` then `sdk_payload` then the SDK's typed decoder.
pub fn sdk_reply<'a, T: Codec<'a>, R: WireDecode>(
    payload: &T,
    ours: proto::header::Operation,
    sdk: Operation,
) -> R {
    assert_eq!(ours.as_u8(), sdk as u8, "operation bytes differ");
    let body = our_reply(payload, ours);
    sdk_decode(&sdk_payload(sdk, &body))
}

/// Our encoding of a value that is not a whole reply (a primitive).
pub fn our_bytes<'a, T: Codec<'a>>(value: &T) -> Vec<u8> {
    encode_to_vec(value, DIALECT)
}

/// A name the test knows to be 1..=255 bytes, in both crates' types.
pub fn name(text: &str) -> proto::codec::WireName {
    proto::codec::WireName::new(text).expect("a 1..=255 byte name")
}

pub fn sdk_name(text: &str) -> iggy_binary_protocol::WireName {
    iggy_binary_protocol::WireName::new(text).expect("a 1..=255 byte name")
}

/// Names that exercise both length extremes and multi-byte UTF-8.
pub fn sample_names() -> Vec<String> {
    vec![
        "a".to_owned(),
        "orders-stream".to_owned(),
        "zażółć gęślą jaźń 🚀".to_owned(),
        "x".repeat(255),
    ]
}

/// An options block built by the SDK's own TLV encoder from `(key, kind, value)` entries.
pub fn sdk_options(entries: &[(&str, u8, &[u8])]) -> WireOptions {
    let tuples: Vec<(u8, &[u8], u8, &[u8])> = entries
        .iter()
        .map(|&(key, kind, value)| (2, key.as_bytes(), kind, value))
        .collect();
    let mut buf = bytes::BytesMut::new();
    encode_user_headers(&tuples, &mut buf);
    WireOptions::from_slice(&buf).expect("SDK-valid options")
}

/// Our reading of an SDK options block (checked both ways in `primitives.rs`).
pub fn our_options(sdk: &WireOptions) -> proto::primitives::OptionsBlock {
    ours(&sdk_encode(sdk))
}

/// Option blocks worth sending: none, one string entry, and entries of three kinds.
pub fn sample_options() -> Vec<WireOptions> {
    let expiry = 3_600_000_000_u64.to_le_bytes();
    let replicas = 1_u32.to_le_bytes();
    vec![
        sdk_options(&[]),
        sdk_options(&[("durability", 2, b"replicated")]),
        sdk_options(&[
            ("message_expiry", 12, &expiry),
            ("replication_factor", 11, &replicas),
            ("preallocate_segments", 3, &[1]),
        ]),
    ]
}

/// Consumer kinds only this dialect has: external groups (kind 3).
pub fn dialect_consumers() -> Vec<iggy_binary_protocol::WireConsumer> {
    let external = iggy_binary_protocol::WireIdentifier::named("external").unwrap();
    vec![iggy_binary_protocol::WireConsumer::external_group(external)]
}

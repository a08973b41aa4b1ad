//! Golden headers of PROTOCOL.md Appendix A.1 and A.2, and validation rules of §1.4.

use zerocopy::IntoBytes;
use zerocopy::little_endian::{U32, U64, U128};

use super::*;
use crate::dialect::Dialect;

const CLIENT: u128 = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10;

fn ping_before_login() -> [u8; 256] {
    let mut bytes = [0_u8; 256];
    bytes[0x30] = 0x00;
    bytes[0x31] = 0x01;
    bytes[0x3c] = 5;
    bytes[0x80..0x90].copy_from_slice(&[
        0x10, 0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02,
        0x01,
    ]);
    bytes[0xb0] = 2;
    bytes[0xc4] = 1;
    bytes
}

#[test]
fn golden_ping_request_appendix_a1() {
    let mut header = RequestHeader::new(CLIENT, Operation::NonReplicated, 0);
    header.code = U32::new(1);
    assert_eq!(header.as_bytes(), ping_before_login());
    let bytes = ping_before_login();
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let parsed = RequestHeader::parse(&bytes, dialect).unwrap();
        assert_eq!(parsed.code(), Some(1));
        assert_eq!(parsed.client.get(), CLIENT);
    }
    let prefix = frame_prefix(&ping_before_login(), FRAME_SIZE_MAX_DEFAULT).unwrap();
    assert_eq!(
        (prefix.command, prefix.size, prefix.body_length()),
        (Command::Request, 256, 0)
    );
}

fn get_streams_bound() -> RequestHeader {
    let mut header = RequestHeader::new(7, Operation::NonReplicated, 0);
    header.request = U64::new(5);
    header.session = U64::new(42);
    header.code = U32::new(201);
    header
}

#[test]
fn golden_bound_request_appendix_a1() {
    let header = get_streams_bound();
    let bytes = header.as_bytes();
    assert_eq!(bytes[0x80], 7);
    assert_eq!(bytes[0xa8..0xb0], [5, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(bytes[0xb0], 2);
    assert_eq!(bytes[0xb8..0xc0], [0x2a, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(bytes[0xc4..0xc8], [0xc9, 0, 0, 0]);
}

#[test]
fn golden_reply_appendix_a2() {
    let reply = ReplyHeader::for_request(&get_streams_bound(), Operation::NonReplicated, 0, 3, 0);
    let mut expected = [0_u8; 256];
    expected[0x30..0x40].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0]);
    expected[0xa0] = 7;
    expected[0xb8] = 3;
    expected[0xc8] = 5;
    expected[0xd0] = 2;
    assert_eq!(reply.as_bytes(), expected);
    let parsed = ReplyHeader::parse(&expected).unwrap();
    assert_eq!((parsed.request.get(), parsed.commit.get()), (5, 3));
}

#[test]
fn golden_eviction_appendix_a2() {
    let eviction = EvictionHeader::new(7, EvictionReason::IncompatibleProtocol);
    let mut expected = [0_u8; 256];
    expected[0x30] = 0;
    expected[0x31] = 1;
    expected[0x3c] = 0x0d;
    expected[0x80] = 7;
    expected[0x90..0x94].copy_from_slice(&[0x02, 0x30, 0, 0]);
    expected[0x94..0x98].copy_from_slice(&[0x00, 0x2c, 0, 0]);
    expected[0xff] = 0x0e;
    assert_eq!(eviction.as_bytes(), expected);
    let parsed = EvictionHeader::parse(&expected).unwrap();
    assert_eq!(parsed.reason(), Some(EvictionReason::IncompatibleProtocol));
    assert_eq!(
        EvictionReason::IncompatibleProtocol.client_error(),
        crate::ErrorCode::IncompatibleProtocolVersion
    );
}

#[test]
fn request_validation_rules() {
    let valid = get_streams_bound();
    let cases: [fn(&mut RequestHeader); 7] = [
        |h| h.client = U128::new(0),
        |h| h.operation = 0,
        |h| h.operation = 200,
        |h| h.command = 8,
        |h| h.reserved_tail[3] = 1,
        |h| {
            h.operation = Operation::CreateStream.as_u8();
            h.session = U64::new(0);
        },
        |h| {
            h.operation = Operation::Register.as_u8();
            h.request = U64::new(1);
        },
    ];
    assert!(RequestHeader::parse(valid.as_bytes(), Dialect::V0_12_2).is_ok());
    for (index, mutate) in cases.iter().enumerate() {
        let mut header = valid.clone();
        mutate(&mut header);
        assert!(
            RequestHeader::parse(header.as_bytes(), Dialect::V0_12_2).is_err(),
            "case {index}"
        );
    }
    let mut with_context = valid.clone();
    with_context.partition_incarnation = U64::new(9);
    assert!(RequestHeader::parse(with_context.as_bytes(), Dialect::V0_12_2).is_ok());
    assert!(RequestHeader::parse(with_context.as_bytes(), Dialect::V0_11_0).is_err());
    let mut retired = valid;
    retired.operation = Operation::UpdateStream.as_u8();
    assert!(RequestHeader::parse(retired.as_bytes(), Dialect::V0_12_2).is_err());
    assert!(RequestHeader::parse(retired.as_bytes(), Dialect::V0_11_0).is_ok());
}

#[test]
fn frame_sizes_are_bounded_before_the_body() {
    let mut bytes = ping_before_login();
    bytes[0x30..0x34].copy_from_slice(&255_u32.to_le_bytes());
    assert!(frame_prefix(&bytes, FRAME_SIZE_MAX_DEFAULT).is_err());
    bytes[0x30..0x34].copy_from_slice(&(FRAME_SIZE_MAX_DEFAULT + 1).to_le_bytes());
    assert!(frame_prefix(&bytes, FRAME_SIZE_MAX_DEFAULT).is_err());
    assert!(frame_prefix(&bytes[..100], FRAME_SIZE_MAX_DEFAULT).is_err());
}

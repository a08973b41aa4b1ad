//! The reply header (command 8), server to client (PROTOCOL.md §1.5).

use zerocopy::little_endian::{U32, U64, U128};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::request::frame_size;
use super::{Command, HEADER_SIZE, Operation, RequestHeader, header_bytes, invalid, reserved};
use crate::error::DecodeError;

/// The reply header as laid out on the wire.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct ReplyHeader {
    pub checksum: U128,
    pub checksum_body: U128,
    pub cluster: U128,
    pub size: U32,
    pub view: U32,
    pub release: U32,
    pub command: u8,
    pub replica: u8,
    pub reserved_frame: [u8; 66],
    pub request_checksum: U128,
    pub context: U128,
    pub client: U128,
    /// Log position of a committed operation; 0 for reads and refusals.
    pub op: U64,
    /// The metadata commit number the client keeps as its watermark.
    pub commit: U64,
    pub timestamp: U64,
    /// Echo of the request's number; the client routes the reply by it.
    pub request: U64,
    pub operation: u8,
    pub operation_padding: [u8; 7],
    /// 0, or the `ErrorCode` of a refusal (the body is then empty).
    pub status: U32,
    /// Byte 0: the committed-result marker (0.12.2 only).
    pub reserved: [u8; 4],
    pub partition_incarnation: U64,
    pub reserved_tail: [u8; 24],
}

const _: () = assert!(size_of::<ReplyHeader>() == HEADER_SIZE);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, request_checksum) == 128);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, client) == 160);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, op) == 176);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, commit) == 184);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, request) == 200);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, operation) == 208);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, status) == 216);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, reserved) == 220);
const _: () = assert!(core::mem::offset_of!(ReplyHeader, partition_incarnation) == 224);

impl ReplyHeader {
    /// The reply to `request`: echoes what the client checks (§1.5, §13 item 4).
    pub fn for_request(
        request: &RequestHeader,
        operation: Operation,
        status: u32,
        commit: u64,
        body_length: usize,
    ) -> Self {
        let mut header = Self::new_zeroed();
        header.command = Command::Reply.as_u8();
        header.size = U32::new(frame_size(body_length));
        header.request_checksum = request.request_checksum;
        header.client = request.client;
        header.commit = U64::new(commit);
        header.request = request.request;
        header.operation = operation.as_u8();
        header.status = U32::new(status);
        header.partition_incarnation = request.partition_incarnation;
        header
    }

    /// Views and validates a reply header as the SDK does (§1.5 checks 1, 2 and 4).
    pub fn parse(frame: &[u8]) -> Result<&Self, DecodeError> {
        let header =
            Self::ref_from_bytes(header_bytes(frame)?).map_err(|_size| invalid("header", 0, 0))?;
        if header.command != Command::Reply.as_u8() {
            return Err(invalid("reply.command", 60, u64::from(header.command)));
        }
        if header.operation().is_none() {
            return Err(invalid("reply.operation", 208, u64::from(header.operation)));
        }
        if header.reserved_frame.iter().any(|&byte| byte != 0) {
            return Err(reserved("reply.reserved_frame", 62));
        }
        Ok(header)
    }

    pub fn operation(&self) -> Option<Operation> {
        Operation::from_u8(self.operation)
    }

    pub fn body_length(&self) -> usize {
        crate::codec::usize_from_u32(self.size.get()).saturating_sub(HEADER_SIZE)
    }

    /// Marks the final reply of a committed replicated operation (0.12.2 only): sets the
    /// marker byte and `op = commit`.
    pub fn mark_committed(&mut self, op: u64) {
        self.op = U64::new(op);
        self.commit = U64::new(op);
        self.reserved[0] = 1;
    }
}

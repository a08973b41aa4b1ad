//! The request header (command 5), client to server (PROTOCOL.md §1.4).

use zerocopy::little_endian::{U32, U64, U128};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Command, HEADER_SIZE, Operation, header_bytes, invalid, reserved};
use crate::dialect::Dialect;
use crate::error::{DecodeError, Subject};

/// The request header as laid out on the wire.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RequestHeader {
    pub checksum: U128,
    pub checksum_body: U128,
    pub cluster: U128,
    pub size: U32,
    pub view: U32,
    pub release: U32,
    pub command: u8,
    pub replica: u8,
    pub reserved_frame: [u8; 66],
    /// Random non-zero id of the logical client session.
    pub client: U128,
    /// Identity of a logical metadata request (0.12.2) or XXH3-64 of its body (0.11.0).
    pub request_checksum: U128,
    pub timestamp: U64,
    /// Request number; the reply echoes it.
    pub request: U64,
    pub operation: u8,
    pub operation_padding: [u8; 7],
    pub session: U64,
    /// Never trusted: the acting user comes from the connection.
    pub user_id: U32,
    /// The command code when `operation` is `NonReplicated`.
    pub code: U32,
    pub partition_incarnation: U64,
    pub owner_generation: U64,
    pub minimum_metadata_op: U64,
    pub reserved_tail: [u8; 32],
}

const _: () = assert!(size_of::<RequestHeader>() == HEADER_SIZE);
const _: () = assert!(core::mem::offset_of!(RequestHeader, size) == 48);
const _: () = assert!(core::mem::offset_of!(RequestHeader, command) == 60);
const _: () = assert!(core::mem::offset_of!(RequestHeader, client) == 128);
const _: () = assert!(core::mem::offset_of!(RequestHeader, request) == 168);
const _: () = assert!(core::mem::offset_of!(RequestHeader, operation) == 176);
const _: () = assert!(core::mem::offset_of!(RequestHeader, session) == 184);
const _: () = assert!(core::mem::offset_of!(RequestHeader, code) == 196);
const _: () = assert!(core::mem::offset_of!(RequestHeader, partition_incarnation) == 200);
const _: () = assert!(core::mem::offset_of!(RequestHeader, reserved_tail) == 224);

/// The partition context a 0.12.2 client stamps into header bytes 200..224 and receives in
/// poll replies and topic details (§2.9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PartitionContext {
    pub incarnation: u64,
    pub owner_generation: u64,
    pub metadata_op: u64,
}

impl RequestHeader {
    /// A zeroed request header with the fields every request sets.
    pub fn new(client: u128, operation: Operation, body_length: usize) -> Self {
        let mut header = Self::new_zeroed();
        header.command = Command::Request.as_u8();
        header.size = U32::new(frame_size(body_length));
        header.client = U128::new(client);
        header.operation = operation.as_u8();
        header
    }

    /// The header a logged-in client sends for request number `request` of `code` in
    /// `session` (§1.8): the code itself for a non-replicated request; for a metadata
    /// change, a non-zero id of its own in `request_checksum`; the partition `context`.
    pub fn bound(
        client: u128,
        code: crate::codes::CommandCode,
        body_length: usize,
        (session, request): (u64, u64),
        context: PartitionContext,
    ) -> Self {
        let operation = code.operation();
        let mut header = Self::new(client, operation, body_length);
        if operation == Operation::NonReplicated {
            header.code = code.as_u32().into();
        } else if !operation.is_partition_plane() {
            let id = client ^ u128::from(request).rotate_left(64);
            header.request_checksum = U128::new(id | 1);
        }
        header.session = U64::new(session);
        header.request = U64::new(request);
        header.set_partition_context(context);
        header
    }

    /// Views the first 256 bytes of `frame` and validates them as a request header for
    /// `dialect`: the rules of §1.4 and the zero reserved ranges.
    pub fn parse(frame: &[u8], dialect: Dialect) -> Result<&Self, DecodeError> {
        let header =
            Self::ref_from_bytes(header_bytes(frame)?).map_err(|_size| invalid("header", 0, 0))?;
        header.validate(dialect)?;
        Ok(header)
    }

    /// The command a request frame claims, without validating the rest of its header (for
    /// labels: metrics count a request under the command it named).
    pub fn claimed_code(frame: &[u8]) -> Option<crate::codes::CommandCode> {
        let header = Self::ref_from_bytes(header_bytes(frame).ok()?).ok()?;
        header.code().and_then(crate::codes::CommandCode::from_u32)
    }

    /// The operation, if the byte is one the dialect knows.
    pub fn operation(&self) -> Option<Operation> {
        Operation::from_u8(self.operation)
    }

    /// The command code this request carries (§1.8): explicit for non-replicated requests,
    /// implied by the operation otherwise.
    pub fn code(&self) -> Option<u32> {
        crate::codes::code_for_request(self.operation()?, self.code.get())
    }

    pub fn partition_context(&self) -> PartitionContext {
        PartitionContext {
            incarnation: self.partition_incarnation.get(),
            owner_generation: self.owner_generation.get(),
            metadata_op: self.minimum_metadata_op.get(),
        }
    }

    pub fn set_partition_context(&mut self, context: PartitionContext) {
        self.partition_incarnation = U64::new(context.incarnation);
        self.owner_generation = U64::new(context.owner_generation);
        self.minimum_metadata_op = U64::new(context.metadata_op);
    }

    fn validate(&self, dialect: Dialect) -> Result<(), DecodeError> {
        if self.command != Command::Request.as_u8() {
            return Err(invalid("request.command", 60, u64::from(self.command)));
        }
        if self.release.get() != 0 {
            return Err(invalid(
                "request.release",
                56,
                u64::from(self.release.get()),
            ));
        }
        if self.client.get() == 0 {
            return Err(invalid("request.client", 128, 0));
        }
        let operation = self
            .operation()
            .filter(|operation| operation.is_valid_in(dialect))
            .ok_or(
                invalid("request.operation", 176, u64::from(self.operation))
                    .about(Subject::Operation),
            )?;
        self.validate_numbers(operation)?;
        self.validate_reserved(dialect)
    }

    fn validate_numbers(&self, operation: Operation) -> Result<(), DecodeError> {
        let (session, request) = (self.session.get(), self.request.get());
        let bad_session =
            |value| invalid("request.session", 184, value).about(Subject::SessionNumber);
        let bad_request =
            |value| invalid("request.request", 168, value).about(Subject::RequestNumber);
        match operation {
            Operation::Register if session != 0 => Err(bad_session(session)),
            Operation::Register if request != 0 => Err(bad_request(request)),
            Operation::Register | Operation::NonReplicated => Ok(()),
            _ if session == 0 => Err(bad_session(0)),
            _ if request == 0 => Err(bad_request(0)),
            _ => Ok(()),
        }
    }

    fn validate_reserved(&self, dialect: Dialect) -> Result<(), DecodeError> {
        if self.reserved_frame.iter().any(|&byte| byte != 0) {
            return Err(reserved("request.reserved_frame", 62));
        }
        if self.operation_padding.iter().any(|&byte| byte != 0) {
            return Err(reserved("request.operation_padding", 177));
        }
        if self.reserved_tail.iter().any(|&byte| byte != 0) {
            return Err(reserved("request.reserved_tail", 224));
        }
        let context_is_zero = self.partition_context() == PartitionContext::default();
        if dialect == Dialect::V0_11_0 && !context_is_zero {
            return Err(reserved("request.partition_context", 200));
        }
        Ok(())
    }
}

/// The `size` field for a frame with `body_length` body bytes. The encoder's callers bound
/// bodies by the frame maximum, far below `u32::MAX`.
pub(crate) fn frame_size(body_length: usize) -> u32 {
    let size = body_length
        .checked_add(HEADER_SIZE)
        .and_then(|size| u32::try_from(size).ok());
    size.expect("frame body longer than u32::MAX - 256 bytes")
}

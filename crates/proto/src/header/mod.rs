//! The 256-byte consensus header that opens every frame (PROTOCOL.md §1.2–§1.8), in its three
//! client-facing forms: request (command 5), reply (command 8) and eviction (command 13).
//!
//! Each form is a zerocopy view with little-endian fields, so a header is read in place from
//! the receive buffer and written in place into the send buffer. `const` assertions pin the
//! size of every view and the offset of every field the spec names.

mod eviction;
mod operation;
mod reply;
mod request;

pub use eviction::{EvictionHeader, EvictionReason};
pub use operation::Operation;
pub use reply::ReplyHeader;
pub use request::{PartitionContext, RequestHeader};

use crate::error::{DecodeError, DecodeErrorKind, Subject};

/// Bytes in every header.
pub const HEADER_SIZE: usize = 256;
/// Offset of the `u32` total frame size.
pub const SIZE_OFFSET: usize = 48;
/// Offset of the `command` byte.
pub const COMMAND_OFFSET: usize = 60;
/// The frame size the reference server allows by default (`message_bus.max_message_size`).
pub const FRAME_SIZE_MAX_DEFAULT: u32 = 64 * 1024 * 1024;

/// The `command` byte values that cross the client boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Command {
    Request = 5,
    Reply = 8,
    Eviction = 13,
}

impl Command {
    // A fieldless `repr(u8)` enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            5 => Some(Self::Request),
            8 => Some(Self::Reply),
            13 => Some(Self::Eviction),
            _ => None,
        }
    }
}

/// What the first 256 bytes of a frame announce: the command and the total frame size,
/// checked against `256..=size_max` so the caller can read the body without trusting more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramePrefix {
    pub command: Command,
    pub size: u32,
}

impl FramePrefix {
    /// Body bytes that follow the header.
    pub fn body_length(self) -> usize {
        crate::codec::usize_from_u32(self.size).saturating_sub(HEADER_SIZE)
    }
}

/// Reads the command and size of the frame whose header is `header`, refusing a size below
/// 256 or above `size_max` before any body byte is read (§1.2).
pub fn frame_prefix(header: &[u8], size_max: u32) -> Result<FramePrefix, DecodeError> {
    let size_bytes = header.get(SIZE_OFFSET..SIZE_OFFSET.saturating_add(4));
    let size_bytes: [u8; 4] = size_bytes.and_then(|b| b.try_into().ok()).ok_or_else(|| {
        DecodeError::new(
            "header.size",
            SIZE_OFFSET,
            DecodeErrorKind::UnexpectedEnd {
                needed: HEADER_SIZE,
                available: header.len(),
            },
        )
    })?;
    let size = u32::from_le_bytes(size_bytes);
    let header_size = crate::codec::usize_to_u64(HEADER_SIZE);
    if u64::from(size) < header_size || size > size_max {
        return Err(DecodeError::new(
            "header.size",
            SIZE_OFFSET,
            DecodeErrorKind::InvalidLength {
                length: u64::from(size),
                min: header_size,
                max: u64::from(size_max),
            },
        ));
    }
    let command_byte = header.get(COMMAND_OFFSET).copied().unwrap_or_default();
    let command = Command::from_u8(command_byte).ok_or(
        DecodeError::new(
            "header.command",
            COMMAND_OFFSET,
            DecodeErrorKind::InvalidValue {
                value: u64::from(command_byte),
            },
        )
        .about(Subject::Command),
    )?;
    Ok(FramePrefix { command, size })
}

/// The 256 bytes of `frame` as an array, or an error if there are fewer.
pub(crate) fn header_bytes(frame: &[u8]) -> Result<&[u8; HEADER_SIZE], DecodeError> {
    frame
        .get(..HEADER_SIZE)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(DecodeError::new(
            "header",
            0,
            DecodeErrorKind::UnexpectedEnd {
                needed: HEADER_SIZE,
                available: frame.len(),
            },
        ))
}

/// Error for a header field with a value the protocol forbids.
pub(crate) fn invalid(field: &'static str, offset: usize, value: u64) -> DecodeError {
    DecodeError::new(field, offset, DecodeErrorKind::InvalidValue { value })
}

/// Error for a reserved header range that is not all zero.
pub(crate) fn reserved(field: &'static str, offset: usize) -> DecodeError {
    DecodeError::new(field, offset, DecodeErrorKind::NonZeroReserved)
}

#[cfg(test)]
mod tests;

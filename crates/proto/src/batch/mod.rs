//! Message batches (PROTOCOL.md §5.2–§5.4): the 256-byte batch header followed by 48-byte
//! message frames, identical on the send path, in poll replies and on disk.
//!
//! [`Batch::parse`] validates a batch in place and hands out borrowed views; after it
//! succeeds, iterating the messages neither allocates nor fails. Validation covers every
//! field of §5.2: zero reserved bytes, a well-formed producer section (0.12.2 only), frames
//! that tile the blob exactly and match `message_count`, payload and user-header bounds, and,
//! with [`Integrity::Full`], every message checksum and the batch checksum.

mod checksum;
mod encode;
pub mod seal;
mod stamp;
mod view;

#[cfg(test)]
mod tests;

#[cfg(any(test, fuzzing, feature = "fuzz-replay"))]
pub use checksum::fix_checksums;
pub use checksum::{batch_checksum, message_checksum};
pub use encode::{BatchEncodeError, OutgoingMessage, encode_batch};
pub use stamp::{SlicedRecord, stamp};
pub use view::{
    Batch, BatchHeader, FrameHeader, Integrity, Message, Messages, Producer, Records, Source,
};

/// Bytes in the batch header.
pub const BATCH_HEADER_SIZE: usize = 256;
/// Bytes in a message frame header.
pub const FRAME_HEADER_SIZE: usize = 48;
/// Largest payload of one message (`MAX_MESSAGE_PAYLOAD_SIZE`).
pub const PAYLOAD_LENGTH_MAX: usize = 64_000_000;
/// Largest user-headers block of one message (`MAX_USER_HEADERS_SIZE`).
pub const USER_HEADERS_LENGTH_MAX: usize = crate::primitives::tlv::USER_HEADERS_LENGTH_MAX;
/// One batch holding one maximal message (`MAX_RECORD_SIZE`).
pub const RECORD_SIZE_MAX: usize = 64_100_304;

const _: () = assert!(
    BATCH_HEADER_SIZE + FRAME_HEADER_SIZE + PAYLOAD_LENGTH_MAX + USER_HEADERS_LENGTH_MAX
        == RECORD_SIZE_MAX
);

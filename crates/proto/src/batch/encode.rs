//! Building batches: what a producer (our bench, tests, the SDK) puts on the wire.

use alloc::vec::Vec;

use zerocopy::little_endian::{U16, U32, U64, U128};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::checksum::{batch_checksum, message_checksum};
use super::view::{BatchHeader, FrameHeader, Producer};
use super::{BATCH_HEADER_SIZE, PAYLOAD_LENGTH_MAX, USER_HEADERS_LENGTH_MAX};
use crate::codec::{len_u32, usize_to_u64};

/// One message to encode; borrowed so building a batch copies each payload once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutgoingMessage<'a> {
    pub id: u128,
    pub origin_timestamp: u64,
    pub payload: &'a [u8],
    /// An encoded user-headers TLV block (may be empty).
    pub user_headers: &'a [u8],
}

/// Why a batch could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BatchEncodeError {
    #[error("a batch needs at least one message")]
    Empty,
    #[error("message {index}: payload of {length} bytes outside 1..=64,000,000")]
    PayloadLength { index: usize, length: usize },
    #[error("message {index}: user headers of {length} bytes over 100,000")]
    UserHeadersLength { index: usize, length: usize },
    #[error("origin timestamps span more than u32::MAX µs")]
    TimestampSpread,
    #[error("more messages than a u32 counts")]
    TooManyMessages,
}

/// Appends one batch record holding `messages` to `out`, with both checksums computed and
/// `base_offset`/`base_timestamp` zero, as a producer sends it. Returns the record's length.
pub fn encode_batch(
    messages: &[OutgoingMessage<'_>],
    producer: Option<Producer>,
    out: &mut Vec<u8>,
) -> Result<usize, BatchEncodeError> {
    let origin_min = check_messages(messages)?;
    let start = out.len();
    out.resize(start.saturating_add(BATCH_HEADER_SIZE), 0);
    for (index, message) in messages.iter().enumerate() {
        append_frame(message, index, origin_min, out)?;
    }
    let length = out.len().saturating_sub(start);
    let (header_bytes, frames) = out
        .get_mut(start..)
        .unwrap_or_default()
        .split_at_mut(BATCH_HEADER_SIZE);
    let header = BatchHeader::mut_from_bytes(header_bytes).expect("the header slot is 256 bytes");
    header.origin_timestamp = U64::new(origin_min);
    header.batch_length = U64::new(usize_to_u64(length));
    header.message_count = U32::new(
        u32::try_from(messages.len()).map_err(|_count| BatchEncodeError::TooManyMessages)?,
    );
    if let Some(producer) = producer {
        header.producer_flag = 1;
        header.producer_id = U64::new(producer.producer_id);
        header.epoch = U16::new(producer.epoch);
        header.base_sequence = U32::new(producer.base_sequence);
    }
    header.batch_checksum = U64::new(batch_checksum(header, frames));
    Ok(length)
}

/// Validates sizes and returns the smallest origin timestamp.
fn check_messages(messages: &[OutgoingMessage<'_>]) -> Result<u64, BatchEncodeError> {
    let origin_min = messages
        .iter()
        .map(|m| m.origin_timestamp)
        .min()
        .ok_or(BatchEncodeError::Empty)?;
    let origin_max = messages
        .iter()
        .map(|m| m.origin_timestamp)
        .max()
        .unwrap_or(origin_min);
    if origin_max.saturating_sub(origin_min) > u64::from(u32::MAX) {
        return Err(BatchEncodeError::TimestampSpread);
    }
    for (index, message) in messages.iter().enumerate() {
        let length = message.payload.len();
        if length == 0 || length > PAYLOAD_LENGTH_MAX {
            return Err(BatchEncodeError::PayloadLength { index, length });
        }
        let length = message.user_headers.len();
        if length > USER_HEADERS_LENGTH_MAX {
            return Err(BatchEncodeError::UserHeadersLength { index, length });
        }
    }
    Ok(origin_min)
}

fn append_frame(
    message: &OutgoingMessage<'_>,
    index: usize,
    origin_min: u64,
    out: &mut Vec<u8>,
) -> Result<(), BatchEncodeError> {
    let mut header = FrameHeader::new_zeroed();
    header.id = U128::new(message.id);
    header.offset_delta =
        U32::new(u32::try_from(index).map_err(|_index| BatchEncodeError::TooManyMessages)?);
    let delta = message.origin_timestamp.saturating_sub(origin_min);
    header.timestamp_delta =
        U32::new(u32::try_from(delta).map_err(|_delta| BatchEncodeError::TimestampSpread)?);
    header.user_headers_length = U32::new(len_u32(message.user_headers.len()));
    header.payload_length = U32::new(len_u32(message.payload.len()));
    let start = out.len();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(message.payload);
    out.extend_from_slice(message.user_headers);
    let covered = out.get(start.saturating_add(8)..).unwrap_or_default();
    let checksum = message_checksum(covered);
    if let Some(slot) = out.get_mut(start..start.saturating_add(8)) {
        slot.copy_from_slice(&checksum.to_le_bytes());
    }
    Ok(())
}

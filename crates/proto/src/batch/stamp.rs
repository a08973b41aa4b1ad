//! Server-side rewrites of a batch: stamping offsets and time on append, and slicing a stored
//! batch for a poll that starts or stops inside it (§4.4.2, §5.4).

use zerocopy::FromBytes;
use zerocopy::little_endian::{U32, U64};

use super::BATCH_HEADER_SIZE;
use super::checksum::batch_checksum;
use super::view::{Batch, BatchHeader};
use crate::codec::usize_to_u64;
use crate::error::{DecodeError, DecodeErrorKind};

/// Stamps `base_offset` and `base_timestamp` into the batch held in `bytes` and recomputes
/// its batch checksum; message checksums do not cover the header, so they stay valid.
/// `bytes` must be a batch that [`Batch::parse`] accepted.
pub fn stamp(bytes: &mut [u8], base_offset: u64, base_timestamp: u64) -> Result<(), DecodeError> {
    let length = bytes.len();
    let (header_bytes, frames) =
        bytes
            .split_at_mut_checked(BATCH_HEADER_SIZE)
            .ok_or(DecodeError::new(
                "batch.header",
                0,
                DecodeErrorKind::UnexpectedEnd {
                    needed: BATCH_HEADER_SIZE,
                    available: length,
                },
            ))?;
    let header = BatchHeader::mut_from_bytes(header_bytes).map_err(|_size| {
        DecodeError::new(
            "batch.header",
            0,
            DecodeErrorKind::InvalidValue { value: 0 },
        )
    })?;
    header.base_offset = U64::new(base_offset);
    header.base_timestamp = U64::new(base_timestamp);
    header.batch_checksum = U64::new(batch_checksum(header, frames));
    Ok(())
}

/// A poll record cut from a stored batch: the stored header with `batch_length`,
/// `message_count` and `batch_checksum` rewritten, followed by the kept frames, which are
/// borrowed so a server can send them without copying. Base offset, timestamps and every
/// frame's deltas stay as stored, so the first kept frame may have a non-zero `offset_delta`.
#[derive(Debug, Clone)]
pub struct SlicedRecord<'a> {
    pub header: [u8; BATCH_HEADER_SIZE],
    pub frames: &'a [u8],
}

impl SlicedRecord<'_> {
    pub fn length(&self) -> usize {
        BATCH_HEADER_SIZE.saturating_add(self.frames.len())
    }
}

impl<'a> Batch<'a> {
    /// The record holding `take` messages after skipping `skip`, or `None` when that range is
    /// empty. A range covering the whole batch still yields a record identical to the stored
    /// batch (callers may send `as_bytes()` directly in that case).
    pub fn slice(&self, skip: usize, take: usize) -> Option<SlicedRecord<'a>> {
        let mut start = 0_usize;
        let mut end = 0_usize;
        let mut kept = 0_u32;
        for (index, message) in self.messages().enumerate() {
            let length = message.frame_length();
            if index < skip {
                start = start.saturating_add(length);
                end = start;
            } else if index < skip.saturating_add(take) {
                end = end.saturating_add(length);
                kept = kept.saturating_add(1);
            }
        }
        if kept == 0 {
            return None;
        }
        let frames = self.frames().get(start..end)?;
        let mut header = [0_u8; BATCH_HEADER_SIZE];
        header.copy_from_slice(self.as_bytes().get(..BATCH_HEADER_SIZE)?);
        let view = BatchHeader::mut_from_bytes(&mut header).ok()?;
        view.batch_length = U64::new(usize_to_u64(BATCH_HEADER_SIZE.saturating_add(frames.len())));
        view.message_count = U32::new(kept);
        view.batch_checksum = U64::new(batch_checksum(view, frames));
        Some(SlicedRecord { header, frames })
    }
}

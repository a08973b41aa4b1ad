//! The two XXH3-64 checksums of §5.4 (seed 0, default secret, stored little-endian).
//!
//! The message checksum covers a frame minus its own first 8 bytes, so server stamping of the
//! batch header leaves it unchanged. The batch checksum covers the header's identity fields
//! and the frames' checksums (payloads only through them), so it is recomputed after
//! stamping at a cost independent of payload size.

use xxhash_rust::xxh3::{Xxh3Default, xxh3_64};
use zerocopy::FromBytes;

use super::view::{BatchHeader, FrameHeader};
use crate::codec::usize_from_u32;

/// Frame checksums hashed per `update` call; batching them keeps the streaming hasher on its
/// fast path instead of 8-byte updates.
const CHECKSUMS_PER_CHUNK: usize = 64;

/// XXH3-64 of `frame[8..]` — pass exactly the covered bytes.
pub fn message_checksum(covered: &[u8]) -> u64 {
    xxh3_64(covered)
}

/// The batch checksum of `header` (its current field values) over `frames`. Frames that do not
/// fit end the walk; callers hash only validated batches or batches they built.
pub fn batch_checksum(header: &BatchHeader, frames: &[u8]) -> u64 {
    let mut hasher = Xxh3Default::new();
    let mut fields = [0_u8; 59];
    let mut cursor = FieldCursor {
        bytes: &mut fields,
        position: 0,
    };
    cursor.put(&header.partition_id.get().to_le_bytes());
    cursor.put(&header.base_offset.get().to_le_bytes());
    cursor.put(&header.base_timestamp.get().to_le_bytes());
    cursor.put(&header.origin_timestamp.get().to_le_bytes());
    cursor.put(&header.batch_length.get().to_le_bytes());
    cursor.put(&header.message_count.get().to_le_bytes());
    if header.producer_flag == 1 {
        cursor.put(&[1]);
        cursor.put(&header.producer_id.get().to_le_bytes());
        cursor.put(&header.epoch.get().to_le_bytes());
        cursor.put(&header.base_sequence.get().to_le_bytes());
    }
    let used = cursor.position;
    hasher.update(fields.get(..used).unwrap_or_default());
    hash_frame_checksums(&mut hasher, frames);
    hasher.digest()
}

fn hash_frame_checksums(hasher: &mut Xxh3Default, mut frames: &[u8]) {
    let mut chunk = [0_u8; CHECKSUMS_PER_CHUNK * 8];
    let mut filled = 0_usize;
    while let Ok((frame, rest)) = FrameHeader::ref_from_prefix(frames) {
        let body = usize_from_u32(frame.payload_length.get())
            .saturating_add(usize_from_u32(frame.user_headers_length.get()));
        let Some(next) = rest.get(body..) else { break };
        frames = next;
        let end = filled.saturating_add(8);
        if let Some(slot) = chunk.get_mut(filled..end) {
            slot.copy_from_slice(&frame.checksum.get().to_le_bytes());
        }
        filled = end;
        if filled == chunk.len() {
            hasher.update(&chunk);
            filled = 0;
        }
    }
    hasher.update(chunk.get(..filled).unwrap_or_default());
}

/// Appends fixed fields into a stack buffer sized for the largest header form.
struct FieldCursor<'b> {
    bytes: &'b mut [u8; 59],
    position: usize,
}

impl FieldCursor<'_> {
    fn put(&mut self, value: &[u8]) {
        let end = self.position.saturating_add(value.len());
        if let Some(slot) = self.bytes.get_mut(self.position..end) {
            slot.copy_from_slice(value);
            self.position = end;
        }
    }
}

/// Recomputes every message checksum and then the batch checksum of a batch whose frames
/// tile `bytes`, so fuzzers reach the code behind the checksum checks instead of stopping at
/// them. Frames that do not fit end the walk.
#[cfg(any(test, fuzzing, feature = "fuzz-replay"))]
pub fn fix_checksums(bytes: &mut [u8]) {
    let Some((header_bytes, frames)) = bytes.split_at_mut_checked(super::BATCH_HEADER_SIZE) else {
        return;
    };
    let mut rest = &mut *frames;
    while let Ok((frame, _)) = FrameHeader::ref_from_prefix(rest) {
        let length = usize_from_u32(frame.payload_length.get())
            .saturating_add(usize_from_u32(frame.user_headers_length.get()))
            .saturating_add(super::FRAME_HEADER_SIZE);
        let Some((current, next)) = rest.split_at_mut_checked(length) else {
            break;
        };
        let checksum = message_checksum(current.get(8..).unwrap_or_default());
        if let Some(slot) = current.get_mut(..8) {
            slot.copy_from_slice(&checksum.to_le_bytes());
        }
        rest = next;
    }
    if let Ok(header) = BatchHeader::mut_from_bytes(header_bytes) {
        let checksum = batch_checksum(header, frames);
        header.batch_checksum = zerocopy::little_endian::U64::new(checksum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_test_vectors() {
        assert_eq!(message_checksum(b""), 0x2D06_8005_38D3_94C2);
        assert_eq!(message_checksum(b"hello"), 0x9555_E855_5C62_DCFD);
        assert_eq!(xxhash_rust::xxh32::xxh32(b"user-1", 0), 2_755_638_957);
    }
}

//! Stored consumer offsets: a 32-byte file of two 16-byte slots, written alternately so a
//! torn write loses at most the value being written (`FORMAT.md` §6).

use xxhash_rust::xxh3::xxh3_64;

/// Bytes of an offset file.
pub const OFFSET_FILE_SIZE: usize = 32;
/// Bytes of one slot.
pub const SLOT_SIZE: usize = 16;

/// One decoded slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetSlot {
    pub sequence: u32,
    pub offset: u64,
}

impl OffsetSlot {
    /// Where in the file this slot lives.
    pub fn position(&self) -> u64 {
        u64::from(self.sequence % 2) * SLOT_SIZE as u64
    }

    pub fn encode(&self) -> [u8; SLOT_SIZE] {
        let mut bytes = [0_u8; SLOT_SIZE];
        bytes[..4].copy_from_slice(&self.sequence.to_le_bytes());
        bytes[8..].copy_from_slice(&self.offset.to_le_bytes());
        let checksum = slot_checksum(&bytes);
        bytes[4..8].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    /// `None` for a slot that was never written or was torn.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; SLOT_SIZE] = bytes.try_into().ok()?;
        let stored = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        if bytes.iter().all(|&byte| byte == 0) || slot_checksum(bytes) != stored {
            return None;
        }
        let sequence = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let mut offset = [0_u8; 8];
        offset.copy_from_slice(&bytes[8..]);
        Some(Self {
            sequence,
            offset: u64::from_le_bytes(offset),
        })
    }

    /// The slot that stores `offset` after this one.
    pub fn next(&self, offset: u64) -> Self {
        Self {
            sequence: self.sequence.wrapping_add(1),
            offset,
        }
    }
}

/// Low 32 bits of XXH3-64 over the offset and the sequence.
fn slot_checksum(bytes: &[u8; SLOT_SIZE]) -> u32 {
    let mut covered = [0_u8; 12];
    covered[..8].copy_from_slice(&bytes[8..]);
    covered[8..].copy_from_slice(&bytes[..4]);
    let [a, b, c, d, ..] = xxh3_64(&covered).to_le_bytes();
    u32::from_le_bytes([a, b, c, d])
}

/// The newest valid slot of a (possibly short or torn) offset file.
pub fn newest_slot(file: &[u8]) -> Option<OffsetSlot> {
    let first = file.get(..SLOT_SIZE).and_then(OffsetSlot::decode);
    let second = file
        .get(SLOT_SIZE..OFFSET_FILE_SIZE)
        .and_then(OffsetSlot::decode);
    match (first, second) {
        (Some(a), Some(b)) => Some(if newer(b.sequence, a.sequence) { b } else { a }),
        (slot, None) | (None, slot) => slot,
    }
}

/// Sequence comparison that survives wrap-around (serial number arithmetic).
fn newer(candidate: u32, than: u32) -> bool {
    candidate != than && candidate.wrapping_sub(than) < (1 << 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(file: &mut [u8; OFFSET_FILE_SIZE], offset: u64) {
        let slot = newest_slot(file).map_or(
            OffsetSlot {
                sequence: 0,
                offset,
            },
            |s| s.next(offset),
        );
        let position = usize::try_from(slot.position()).unwrap();
        file[position..position + SLOT_SIZE].copy_from_slice(&slot.encode());
    }

    #[test]
    fn alternating_slots_keep_the_previous_value_on_a_torn_write() {
        let mut file = [0_u8; OFFSET_FILE_SIZE];
        assert_eq!(newest_slot(&file), None);
        for offset in 0..10 {
            store(&mut file, offset);
            assert_eq!(newest_slot(&file).unwrap().offset, offset);
        }
        let slot = newest_slot(&file).unwrap().next(99);
        let position = usize::try_from(slot.position()).unwrap();
        let bytes = slot.encode();
        for torn in 1..SLOT_SIZE {
            let mut copy = file;
            copy[position..position + torn].copy_from_slice(&bytes[..torn]);
            let newest = newest_slot(&copy).unwrap().offset;
            assert!(newest == 9 || newest == 99, "torn at {torn}: {newest}");
        }
    }

    #[test]
    fn sequence_wraps() {
        assert!(newer(0, u32::MAX));
        assert!(!newer(u32::MAX, 0));
    }
}

//! `partition.state`: format version, clean-close flag and offset reservation
//! (`FORMAT.md` §5).

use xxhash_rust::xxh3::xxh3_64;

use super::{FORMAT_VERSION, FORMAT_VERSION_MIN};

/// Bytes of the file.
pub const STATE_SIZE: usize = 64;
const MAGIC: [u8; 8] = *b"IGGYPART";
const FLAG_CLEAN: u32 = 1;
/// Offsets reserved at a time: one fsync of this file per this many messages.
pub const RESERVATION_STEP: u64 = 1 << 20;

/// The decoded state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionState {
    /// Closed cleanly: `next_offset` is exact rather than a reservation.
    pub clean: bool,
    pub next_offset: u64,
    /// The machine boot that wrote the file (all zeros when unknown).
    pub boot_id: [u8; 16],
}

/// Why a state file was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("partition.state is {length} bytes, not 64")]
    Length { length: usize },
    #[error("partition.state has a bad magic")]
    Magic,
    #[error(
        "partition.state has format version {version}; this build reads \
         {FORMAT_VERSION_MIN} to {FORMAT_VERSION}"
    )]
    Version { version: u32 },
    #[error("partition.state checksum mismatch")]
    Checksum,
}

impl PartitionState {
    pub fn encode(&self) -> [u8; STATE_SIZE] {
        let mut bytes = [0_u8; STATE_SIZE];
        bytes[..8].copy_from_slice(&MAGIC);
        bytes[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        let flags = if self.clean { FLAG_CLEAN } else { 0 };
        bytes[12..16].copy_from_slice(&flags.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.next_offset.to_le_bytes());
        bytes[24..40].copy_from_slice(&self.boot_id);
        bytes[24..40].copy_from_slice(&self.boot_id);
        let checksum = xxh3_64(&bytes[..56]);
        bytes[56..].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, StateError> {
        let bytes: &[u8; STATE_SIZE] = bytes.try_into().map_err(|_length| StateError::Length {
            length: bytes.len(),
        })?;
        if bytes[..8] != MAGIC {
            return Err(StateError::Magic);
        }
        let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
            return Err(StateError::Version { version });
        }
        let mut checksum = [0_u8; 8];
        checksum.copy_from_slice(&bytes[56..]);
        if xxh3_64(&bytes[..56]) != u64::from_le_bytes(checksum) {
            return Err(StateError::Checksum);
        }
        let flags = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
        let mut next_offset = [0_u8; 8];
        next_offset.copy_from_slice(&bytes[16..24]);
        let mut boot_id = [0_u8; 16];
        boot_id.copy_from_slice(&bytes[24..40]);
        Ok(Self {
            clean: flags & FLAG_CLEAN != 0,
            next_offset: u64::from_le_bytes(next_offset),
            boot_id,
        })
    }

    /// The next offset to assign after opening, given the offset after the last record in
    /// the log and the current boot (§5): exact after a crash within the same boot (the
    /// kernel kept every accepted write), never below the reservation after a new boot
    /// (unsynced writes, and the offsets they were given, may be gone), and never below the
    /// offset a clean close recorded: a clean close synced every record, so a log that ends
    /// before it lost records to damage or removal, and their offsets are not given again.
    pub fn next_offset_after_open(&self, log_next_offset: u64, boot_id: Option<[u8; 16]>) -> u64 {
        let same_boot = boot_id.is_some_and(|id| id != [0; 16] && id == self.boot_id);
        if crate::broken::is(crate::broken::Break::ReuseOffsetAfterCrash) && !self.clean {
            // Deliberately broken (simulator check): the last offset is handed out again.
            return log_next_offset.saturating_sub(1);
        }
        if same_boot && !self.clean {
            log_next_offset
        } else {
            log_next_offset.max(self.next_offset)
        }
    }

    /// Offsets a clean close recorded that the log no longer holds (`None` when it holds
    /// them all, or the stop was not clean).
    pub fn lost_after_clean_close(&self, log_next_offset: u64) -> Option<core::ops::Range<u64>> {
        (self.clean && log_next_offset < self.next_offset)
            .then_some(log_next_offset..self.next_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let state = PartitionState {
            clean: true,
            next_offset: 42,
            boot_id: [7; 16],
        };
        let bytes = state.encode();
        assert_eq!(PartitionState::decode(&bytes), Ok(state));
        for index in 0..STATE_SIZE {
            let mut flipped = bytes;
            flipped[index] ^= 0x10;
            if (40..56).contains(&index) {
                assert_eq!(PartitionState::decode(&flipped), Err(StateError::Checksum));
            } else {
                assert!(PartitionState::decode(&flipped).is_err(), "byte {index}");
            }
        }
        assert_eq!(
            PartitionState::decode(&bytes[..10]),
            Err(StateError::Length { length: 10 })
        );
    }

    /// Version 1 (before sealed records) is still read; a version from the future is not.
    #[test]
    fn older_versions_are_read_and_newer_refused() {
        let state = PartitionState {
            clean: false,
            next_offset: 9,
            boot_id: [1; 16],
        };
        let with_version = |version: u32| {
            let mut bytes = state.encode();
            bytes[8..12].copy_from_slice(&version.to_le_bytes());
            let checksum = xxh3_64(&bytes[..56]);
            bytes[56..].copy_from_slice(&checksum.to_le_bytes());
            PartitionState::decode(&bytes)
        };
        assert_eq!(with_version(1), Ok(state));
        assert_eq!(with_version(2), Ok(state));
        assert_eq!(with_version(3), Err(StateError::Version { version: 3 }));
        assert_eq!(with_version(0), Err(StateError::Version { version: 0 }));
    }

    #[test]
    fn reservations_are_never_undercut() {
        let crashed = PartitionState {
            clean: false,
            next_offset: 1000,
            boot_id: [1; 16],
        };
        assert_eq!(crashed.next_offset_after_open(10, Some([2; 16])), 1000);
        assert_eq!(crashed.next_offset_after_open(10, None), 1000);
        assert_eq!(crashed.next_offset_after_open(2000, Some([2; 16])), 2000);
        assert_eq!(
            crashed.next_offset_after_open(10, Some([1; 16])),
            10,
            "same boot"
        );
        let unknown = PartitionState {
            boot_id: [0; 16],
            ..crashed
        };
        assert_eq!(unknown.next_offset_after_open(10, Some([0; 16])), 1000);
        let clean = PartitionState {
            clean: true,
            next_offset: 10,
            boot_id: [1; 16],
        };
        assert_eq!(clean.next_offset_after_open(10, Some([2; 16])), 10);
        assert_eq!(clean.lost_after_clean_close(10), None);
        // The log holds less than the clean close left: damage or removal, not a crash.
        assert_eq!(clean.next_offset_after_open(7, Some([1; 16])), 10);
        assert_eq!(clean.next_offset_after_open(0, None), 10);
        assert_eq!(clean.lost_after_clean_close(7), Some(7..10));
        assert_eq!(crashed.lost_after_clean_close(10), None);
    }
}

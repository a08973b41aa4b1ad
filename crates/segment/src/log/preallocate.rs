//! Reserving the active segment's blocks ahead of its appends (`LogConfig::preallocation`).
//!
//! A write that extends a file goes through the file system's delayed allocation page by
//! page; a write into blocks reserved with `fallocate(FALLOC_FL_KEEP_SIZE)` does not, and on
//! ext4 took about 0.73× the time at 1 MiB (`bench/RESULTS.md`). The file's size stays at its last
//! record, so recovery, reads and sizes see nothing of the reservation (`FORMAT.md` §2).
//!
//! What it holds: never past the segment size (beyond the record being written), and only
//! while the file system keeps [`RESERVE_FREE_MIN_BYTES`] and a hundredth of its size free
//! after it, so a small or nearly full disk reserves nothing. It is released when the
//! segment is sealed (also when recovery seals it after an unclean stop) or the log closed
//! (`Segment::trim`), and by deleting the file. A quarantined or poisoned log keeps its
//! reservation until then: its close trims nothing, since a quarantined log's end is its
//! damage, not its last record.
//!
//! A reservation is an optimisation only: a failure (a full disk reserves what fits)
//! leaves the record to be written as it would be without one, and a file system without
//! the call makes the log stop asking.

use std::io;

use crate::storage::{Space, Storage, StorageFile};

use super::PartitionLog;
use super::config::{Preallocation, RESERVE_FREE_MIN_BYTES, RESERVE_RECORD_MIN_BYTES};

/// Records a reservation under [`Preallocation::Ahead`] covers, the one being written
/// included.
const RECORDS_AHEAD: u64 = 4;

impl<S: Storage> PartitionLog<S> {
    /// Reserves the active segment's blocks for a record of `length` bytes at `position`
    /// and beyond it, as the log's [`Preallocation`] says, unless they already are.
    pub(super) async fn preallocate(&mut self, position: u64, length: u64) {
        let end = position.saturating_add(length);
        if !self.preallocation_supported || end <= self.preallocated_to {
            return;
        }
        let segment_end = self.config.segment_size_bytes.max(end);
        let to = match self.config.preallocation {
            Preallocation::Off => return,
            // A record past half the most would reserve little more than itself, a round
            // trip to the blocking pool at nearly every append.
            Preallocation::Ahead(most)
                if length < RESERVE_RECORD_MIN_BYTES || length.saturating_mul(2) > most =>
            {
                return;
            }
            Preallocation::Ahead(most) => {
                let ahead = length.saturating_mul(RECORDS_AHEAD).min(most);
                position.saturating_add(ahead).min(segment_end)
            }
            Preallocation::Segment => segment_end,
        };
        let from = self.preallocated_to.max(position);
        // Decided once per range, whatever the outcome: a disk short of space or a failure is
        // not asked again at every append, only when the next range is due.
        self.preallocated_to = to;
        let space = self.storage.space(&self.directory);
        if !space.is_some_and(|space| leaves_enough(space, to - from)) {
            return;
        }
        let reserved = self.active().log.preallocate(from, to - from).await;
        if let Err(error) = reserved {
            if unsupported(&error) {
                self.preallocation_supported = false;
            }
            log::debug!(
                "preallocating {} bytes of {}: {error}",
                to - from,
                self.active().paths.log.display()
            );
        }
    }
}

/// Whether reserving `bytes` leaves [`RESERVE_FREE_MIN_BYTES`] and a hundredth of the file
/// system free. (A tenth turned reservations off on this project's 252 GB build disk with
/// 21 GB left.)
fn leaves_enough(space: Space, bytes: u64) -> bool {
    let keep = RESERVE_FREE_MIN_BYTES.saturating_add(space.total / 100);
    space.available.saturating_sub(bytes) >= keep
}

/// Whether `error` says the file system (or, with `EINVAL`, a ring without the
/// operation: the arguments are always valid here) cannot reserve blocks at all.
fn unsupported(error: &io::Error) -> bool {
    const EINVAL: i32 = 22;
    const ENOSYS: i32 = 38;
    const EOPNOTSUPP: i32 = 95;
    matches!(error.raw_os_error(), Some(EINVAL | ENOSYS | EOPNOTSUPP))
        || error.kind() == io::ErrorKind::Unsupported
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_leaves_a_gib_and_a_hundredth_of_the_file_system() {
        let total = 500 << 30;
        let bytes = 4 << 20;
        let keep = RESERVE_FREE_MIN_BYTES + total / 100;
        let space = |available| Space { available, total };
        assert!(leaves_enough(space(keep + bytes), bytes));
        assert!(!leaves_enough(space(keep + bytes - 1), bytes));
        assert!(!leaves_enough(space(bytes / 2), bytes), "more than is free");
    }
}

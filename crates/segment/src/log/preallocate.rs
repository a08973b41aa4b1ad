//! Reserving the active segment's blocks ahead of its appends (`LogConfig::preallocate_bytes`).
//!
//! A write that extends a file goes through the file system's delayed allocation page by
//! page; a write into blocks reserved with `fallocate(FALLOC_FL_KEEP_SIZE)` does not, and on
//! ext4 took 0.72× the time at 1 MiB (`bench/RESULTS.md`). The file's size stays at its last
//! record, so recovery, reads and sizes see nothing of the reservation (`FORMAT.md` §2).
//!
//! What it holds: at most `preallocate_bytes` past the active segment's end, never past the
//! segment size, released when the segment is sealed or the log closed (`Segment::trim`),
//! and by deleting the file. A reservation is an optimisation only: a failure (a full disk
//! reserves what fits) leaves the record to be written as it would be without one, and a
//! file system without the call makes the log stop asking.

use std::io;

use crate::storage::{Storage, StorageFile};

use super::PartitionLog;

impl<S: Storage> PartitionLog<S> {
    /// Reserves the active segment's blocks for a record of `length` bytes at `position`
    /// and up to `preallocate_bytes` beyond it, unless they already are.
    pub(super) async fn preallocate(&mut self, position: u64, length: u64) {
        let ahead = self.config.preallocate_bytes;
        let end = position.saturating_add(length);
        if ahead == 0 || !self.preallocation_supported || end <= self.preallocated_to {
            return;
        }
        let from = self.preallocated_to.max(position);
        let to = end
            .saturating_add(ahead)
            .min(self.config.segment_size_bytes.max(end));
        // Asked once per range, whatever the outcome: a full disk is not asked again at
        // every append, only when the next range is due.
        self.preallocated_to = to;
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

/// Whether `error` says the file system cannot reserve blocks at all.
fn unsupported(error: &io::Error) -> bool {
    const EOPNOTSUPP: i32 = 95;
    const ENOSYS: i32 = 38;
    matches!(error.raw_os_error(), Some(EOPNOTSUPP | ENOSYS))
        || error.kind() == io::ErrorKind::Unsupported
}

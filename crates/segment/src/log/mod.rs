//! The partition log: an ordered list of segments, the active one last.
//!
//! Invariants (checked by `debug_assert`s after every mutation):
//! - segments are sorted by start offset and do not overlap; only the last is active;
//! - `next_offset` is the active segment's `next_offset`, and never exceeds the reservation
//!   recorded in `partition.state`;
//! - `synced_size` of the active segment never exceeds its `size_bytes`.

mod append;
mod config;
mod error;
pub(crate) mod open;
mod read;
mod retention;
mod segment;

pub use append::Appended;
pub use config::{Durability, LogConfig};
pub use error::{AppendError, OpenError, ReadError};
pub use open::{Cut, RecoveryReport};
pub use read::{ReadStart, Records};
pub use retention::{RetentionPolicy, SegmentRef, retention_plan};
pub use segment::SegmentInfo;

use std::path::{Path, PathBuf};

use crate::format::state::PartitionState;
use crate::layout::state_path;
use crate::storage::{Storage, StorageFile};

use error::io_error;
use segment::{Segment, append_io};

/// One partition's log on a storage.
#[derive(Debug)]
pub struct PartitionLog<S: Storage> {
    storage: S,
    directory: PathBuf,
    config: LogConfig,
    segments: Vec<Segment<S::File>>,
    state_file: S::File,
    /// Offsets below this may have been handed out; `partition.state` records it.
    reserved_offset: u64,
    /// Bytes of the active segment covered by its last fdatasync.
    synced_size: u64,
    unsynced_messages: u64,
}

impl<S: Storage> PartitionLog<S> {
    /// Opens (creating if needed) the partition in `directory`, recovering it first.
    pub async fn open(
        storage: S,
        directory: &Path,
        config: LogConfig,
    ) -> Result<(Self, RecoveryReport), OpenError> {
        let open::Recovered {
            mut segments,
            state,
            mut report,
        } = open::recover(&storage, directory).await?;
        let log_next = segments
            .last()
            .map_or(state.next_offset, |segment| segment.next_offset);
        let next_offset = state.next_offset_after_open(log_next, storage.boot_id());
        let starts_fresh = segments
            .last()
            .is_none_or(|active| active.next_offset != next_offset);
        if starts_fresh {
            drop_empty_active(&storage, &mut segments).await?;
            let active = Segment::create(&storage, directory, next_offset)
                .await
                .map_err(|error| OpenError::Io {
                    operation: "create segment",
                    path: directory.to_path_buf(),
                    source: std::io::Error::other(error),
                })?;
            if let Some(previous) = segments.last_mut() {
                previous.indexes = None;
            }
            segments.push(active);
        }
        let path = state_path(directory);
        let state_file = storage
            .open(&path, true)
            .await
            .map_err(|source| OpenError::Io {
                operation: "open",
                path: path.clone(),
                source,
            })?;
        let synced_size = segments.last().map_or(0, |segment| segment.size_bytes);
        let mut log = Self {
            storage,
            directory: directory.to_path_buf(),
            config,
            segments,
            state_file,
            reserved_offset: 0,
            synced_size,
            unsynced_messages: 0,
        };
        log.reserve(next_offset)
            .await
            .map_err(|error| OpenError::Io {
                operation: "reserve offsets",
                path: state_path(directory),
                source: std::io::Error::other(error),
            })?;
        report.next_offset = next_offset;
        report.segments = log.segments.len();
        Ok((log, report))
    }

    /// The offset the next message will get.
    pub fn next_offset(&self) -> u64 {
        self.active().next_offset
    }

    /// The first offset still stored (equal to `next_offset` when the log is empty).
    pub fn first_offset(&self) -> u64 {
        self.segments
            .iter()
            .find(|segment| !segment.is_empty())
            .map_or(self.next_offset(), |segment| segment.start_offset)
    }

    /// Messages currently stored (offsets may have gaps after a crash; this counts offsets
    /// between the first retained and the next).
    pub fn messages_count(&self) -> u64 {
        self.segments
            .iter()
            .map(|segment| segment.next_offset - segment.start_offset)
            .sum()
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|segment| segment.size_bytes).sum()
    }

    pub fn segments(&self) -> impl Iterator<Item = SegmentInfo> + '_ {
        self.segments.iter().map(Segment::info)
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// Makes every appended record durable (fdatasync of the active log).
    pub async fn sync(&mut self) -> Result<(), AppendError> {
        let size = self.active().size_bytes;
        if self.synced_size == size {
            return Ok(());
        }
        let active = self.active();
        active
            .log
            .sync_data()
            .await
            .map_err(io_error("sync", &active.paths.log, append_io))?;
        self.synced_size = size;
        self.unsynced_messages = 0;
        Ok(())
    }

    /// Whether records written since the last sync are waiting for one.
    pub fn has_unsynced(&self) -> bool {
        self.synced_size != self.active().size_bytes
    }

    /// Syncs everything and records a clean close, so the next open needs no reservation.
    pub async fn close(mut self) -> Result<(), AppendError> {
        self.sync().await?;
        let next_offset = self.next_offset();
        let boot_id = self.storage.boot_id().unwrap_or_default();
        self.write_state(PartitionState {
            clean: true,
            next_offset,
            boot_id,
        })
        .await
    }

    fn active(&self) -> &Segment<S::File> {
        // The log always holds an active segment: `open` creates one when none exists and
        // retention never removes it.
        self.segments
            .last()
            .expect("a partition log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment<S::File> {
        self.segments
            .last_mut()
            .expect("a partition log always has an active segment")
    }

    /// Records a reservation covering `up_to` and beyond in `partition.state`, durably.
    async fn reserve(&mut self, up_to: u64) -> Result<(), AppendError> {
        let state = open::reservation(up_to, self.storage.boot_id());
        self.write_state(state).await?;
        self.reserved_offset = state.next_offset;
        Ok(())
    }

    async fn write_state(&mut self, state: PartitionState) -> Result<(), AppendError> {
        let path = state_path(&self.directory);
        let (result, _) = self
            .state_file
            .write_all_at(state.encode().to_vec(), 0)
            .await;
        result.map_err(io_error("write", &path, append_io))?;
        self.state_file
            .sync_data()
            .await
            .map_err(io_error("sync", &path, append_io))?;
        self.storage
            .sync_dir(&self.directory)
            .await
            .map_err(io_error("sync", &self.directory, append_io))
    }
}

/// Removes the files of an empty active segment that cannot continue the log (offsets skip
/// past it after a crash), so the next open does not find it again.
async fn drop_empty_active<S: Storage>(
    storage: &S,
    segments: &mut Vec<Segment<S::File>>,
) -> Result<(), OpenError> {
    if !segments.last().is_some_and(Segment::is_empty) {
        return Ok(());
    }
    if let Some(empty) = segments.pop() {
        for path in [
            &empty.paths.log,
            &empty.paths.index,
            &empty.paths.time_index,
        ] {
            if storage.exists(path).await {
                storage
                    .remove_file(path)
                    .await
                    .map_err(|source| OpenError::Io {
                        operation: "remove",
                        path: path.clone(),
                        source,
                    })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

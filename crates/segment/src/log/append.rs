//! Appending a batch: stamp, roll the segment, reserve offsets, write record and index
//! entries, and sync by the topic's durability rules.

use compio_buf::IoBufMut;
use proto::Dialect;
use proto::batch::{Batch, Integrity, stamp};

use crate::format::index::IndexEntry;
use crate::format::scan::{StopReason, check_deltas};
use crate::storage::{Storage, StorageFile};

use super::PartitionLog;
use super::config::Durability;
use super::error::AppendError;
use super::segment::{Segment, append_io};

/// Where an appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: u64,
    pub message_count: u32,
    /// The stamped append time, µs.
    pub timestamp: u64,
    /// Under `Persisted`, the caller must [`PartitionLog::sync`] before acknowledging.
    pub needs_sync: bool,
}

impl<S: Storage> PartitionLog<S> {
    /// Appends one batch record. `batch` holds exactly the record; its checksums were
    /// verified when it was received (the send path decodes with full integrity), so only
    /// its layout is re-checked here. The record is stamped in place with its offsets and
    /// `now_us` (clamped to never go backwards) and written; the buffer is returned with
    /// the outcome.
    pub async fn append<B: IoBufMut>(
        &mut self,
        mut batch: B,
        now_us: u64,
    ) -> (Result<Appended, AppendError>, B) {
        if let Some(refusal) = &self.refusal {
            return (Err(refusal.error()), batch);
        }
        let message_count = match validate(batch.as_mut_slice()) {
            Ok(count) => count,
            Err(error) => return (Err(error), batch),
        };
        if let Err(error) = self.prepare(message_count).await {
            return (Err(error), batch);
        }
        let base_offset = self.next_offset();
        let timestamp = now_us.max(self.active().last_timestamp);
        if let Err(error) = stamp(batch.as_mut_slice(), base_offset, timestamp) {
            return (Err(AppendError::Invalid(error)), batch);
        }
        let (result, batch) = self
            .write_record(batch, base_offset, message_count, timestamp)
            .await;
        let appended = match result {
            Ok(()) => Appended {
                base_offset,
                message_count,
                timestamp,
                needs_sync: false,
            },
            Err(error) => return (Err(error), batch),
        };
        (Ok(self.after_write(appended)), batch)
    }

    /// Seals a full segment and reserves offsets before a record is written. Nothing is
    /// written to the log here, so a failure leaves the append retryable (unless a sync
    /// failed, which poisons).
    async fn prepare(&mut self, message_count: u32) -> Result<(), AppendError> {
        let active = self.active();
        // A sealed last segment is a roll that failed after its seal: it must roll again.
        let sealed = active.indexes.is_none();
        let full = active.size_bytes >= self.config.segment_size_bytes;
        if !active.is_empty() && (sealed || full) {
            self.roll().await?;
        }
        let next = self
            .next_offset()
            .checked_add(u64::from(message_count))
            .ok_or(AppendError::OffsetsExhausted {
                next: self.next_offset(),
                count: message_count,
            })?;
        if next > self.reserved_offset {
            self.reserve(next).await?;
        }
        Ok(())
    }

    /// Seals the active segment (trimmed, synced, indexes closed) and starts the next one.
    async fn roll(&mut self) -> Result<(), AppendError> {
        let next_offset = self.next_offset();
        // A sealed segment's indexes must hold every record (recovery trusts them), and it
        // must end at its last record (a failed write may have left bytes past it). Both
        // are retryable: nothing changed.
        self.active_mut().write_entries().await?;
        self.active().trim().await?;
        if let Err(error) = self.active_mut().seal().await {
            // Every failure of a seal is a failed fdatasync.
            let path = match &error {
                AppendError::Io { path, .. } => path.clone(),
                _ => self.active().paths.log.clone(),
            };
            self.poison(&path).await;
            return Err(error);
        }
        // Creating the files may fail midway (a full disk, no inodes): the sealed segment
        // stays last, the next append rolls again and reopens the files that exist.
        let segment = Segment::create(&self.storage, &self.directory, next_offset).await?;
        self.segments.push(segment);
        self.preallocated_to = 0;
        // The new names must be durable before a record in them is acknowledged.
        let synced = self.storage.sync_dir(&self.directory).await;
        let directory = self.directory.clone();
        self.check_sync(synced, &directory).await?;
        self.synced_size = 0;
        self.unsynced_messages = 0;
        Ok(())
    }

    async fn write_record<B: IoBufMut>(
        &mut self,
        batch: B,
        base_offset: u64,
        message_count: u32,
        timestamp: u64,
    ) -> (Result<(), AppendError>, B) {
        let position = self.active().size_bytes;
        let length = batch.buf_len() as u64;
        self.preallocate(position, length).await;
        let active = self.active_mut();
        let (result, batch) = active.log.write_all_at(batch, position).await;
        if let Err(source) = result {
            // A short write (a full disk) may have stored part of the record: cut it, so the
            // file ends at the last record again. Should the cut fail, the next append
            // overwrites the part and a roll trims what it leaves.
            let _cut = active.log.set_len(position).await;
            // The cut gave back the blocks reserved past `position` too.
            self.preallocated_to = position;
            let active = self.active();
            return (
                Err(append_io("write", active.paths.log.clone(), source)),
                batch,
            );
        }
        let entry = IndexEntry {
            relative_offset: u32::try_from(base_offset - active.start_offset).unwrap_or(u32::MAX),
            position: u32::try_from(position).unwrap_or(u32::MAX),
            timestamp,
        };
        active.size_bytes = position + length;
        active.next_offset = base_offset + u64::from(message_count);
        active.last_timestamp = timestamp;
        // The entry reaches the index files later, in bulk (`Segment::write_entries`): one
        // write per record instead of three.
        active.entries.push(entry);
        (Ok(()), batch)
    }

    /// Applies the durability rule after a write: `Persisted` needs a sync before the
    /// acknowledgement; `Replicated` acknowledges what reached the kernel and leaves the
    /// threshold sync to the caller, after it answered (see `background_sync`).
    fn after_write(&mut self, mut appended: Appended) -> Appended {
        self.unsynced_messages += u64::from(appended.message_count);
        appended.needs_sync = self.config.durability == Durability::Persisted;
        appended
    }
}

/// Layout and frame numbering of a batch to append (plain, or sealed by the server:
/// `proto::batch::seal`); returns its message count.
fn validate(bytes: &[u8]) -> Result<u32, AppendError> {
    let batch = Batch::parse_stored(bytes, Dialect::V0_12_2, Integrity::LayoutOnly, 0)
        .map_err(AppendError::Invalid)?;
    match check_deltas(&batch) {
        Ok(()) => Ok(batch.message_count()),
        Err(StopReason::OffsetDelta { index, found, .. }) => {
            Err(AppendError::OffsetDelta { index, found })
        }
        Err(_) => Err(AppendError::OffsetDelta { index: 0, found: 0 }),
    }
}

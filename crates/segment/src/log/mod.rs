//! The partition log: an ordered list of segments, the active one last.
//!
//! Invariants (checked by `debug_assert`s after every mutation):
//! - segments are sorted by start offset and do not overlap; only the last is active;
//! - `next_offset` is the active segment's `next_offset`, and never exceeds the reservation
//!   recorded in `partition.state`;
//! - `synced_size` of the active segment never exceeds its `size_bytes`;
//! - once [`Refusal`] is set it is never cleared: a quarantined or poisoned log appends
//!   nothing, starts no sync again and never records a clean close, so no offset is handed
//!   out twice and no failed fdatasync is retried as if it could succeed. (A threshold sync
//!   already in flight when a read quarantines the log may still finish; should it fail,
//!   the quarantine stays the refusal, `partition.state` already unclean.) Only reopening
//!   (after a repair or a restart) or a purge, which starts a fresh log, lifts it.
//!
//! Failures and what they leave (each append failure before the record is written leaves the
//! log as it was, so the same batch can be appended again and gets the same offset):
//! - a refused record write (a full disk) cuts whatever part of it reached the file;
//! - a refused index write cuts the record again (`append.rs`);
//! - a refused `partition.state` write leaves the old reservation in force;
//! - a segment roll that fails creating the next segment's files leaves the sealed segment
//!   last, and the next append rolls again;
//! - any failed fdatasync (log, index, state, directory) poisons the log ([`Refusal`]);
//! - a failed preallocation changes nothing but the blocks reserved: the record is written
//!   as it would have been without it (`preallocate.rs`).

mod append;
mod background_sync;
mod config;
mod error;
pub(crate) mod open;
mod preallocate;
mod read;
mod retention;
mod segment;

pub use append::Appended;
pub use background_sync::SyncStart;
pub use config::{
    Durability, LogConfig, PREALLOCATE_AHEAD_DEFAULT, Preallocation, RESERVE_FREE_MIN_BYTES,
    RESERVE_RECORD_MIN_BYTES, SYNC_INTERVAL_DEFAULT_US,
};
pub use error::{AppendError, OpenError, ReadError};
pub use open::{Cut, Damage, RecoveryReport, find_intact};
pub use read::{ReadStart, Records};
pub use retention::{RetentionPolicy, SegmentRef, retention_plan};
pub use segment::SegmentInfo;

use std::path::{Path, PathBuf};

use crate::format::state::{PartitionState, STATE_SIZE};
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
    /// The append time at which the last threshold sync started (`background_sync`).
    last_sync_start_us: Option<u64>,
    /// Why appends are refused for good, if they are.
    refusal: Option<Refusal>,
    /// Blocks of the active segment's `.log` reserved so far, from its start
    /// (`preallocate.rs`).
    preallocated_to: u64,
    /// Cleared when the file system has no `fallocate`: the log stops asking.
    preallocation_supported: bool,
}

/// Why a log refuses every append (see the module invariants).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    /// Recovery found damage at `position` of `path` that it may not cut.
    Quarantined { path: PathBuf, position: u64 },
    /// An fdatasync of `path` failed.
    Poisoned { path: PathBuf },
}

impl Refusal {
    fn error(&self) -> AppendError {
        match self {
            Self::Quarantined { path, position } => AppendError::Quarantined {
                path: path.clone(),
                position: *position,
            },
            Self::Poisoned { path } => AppendError::Poisoned { path: path.clone() },
        }
    }
}

impl<S: Storage> PartitionLog<S> {
    /// Opens (creating if needed) the partition in `directory`, recovering it first. Damage
    /// that recovery may not cut opens the log quarantined (`FORMAT.md` §7): it reads, but
    /// refuses appends, and nothing on disk changes except `partition.state`.
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
        log_recovery(directory, &report);
        let log_next = segments
            .last()
            .map_or(state.next_offset, |segment| segment.next_offset);
        let refusal = report.damage.first().map(|damage| Refusal::Quarantined {
            path: damage.path.clone(),
            position: damage.position,
        });
        // An open log always has an active segment (one is made when none is found), so a
        // cleanly closed partition without any segment lost all its records: named from 0.
        let held = segments.last().map_or(0, |segment| segment.next_offset);
        log_lost_offsets(directory, &state, held);
        let next_offset = if refusal.is_some() {
            log_next
        } else {
            let next_offset = state.next_offset_after_open(log_next, storage.boot_id());
            start_active(&storage, directory, &mut segments, next_offset).await?;
            next_offset
        };
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
            last_sync_start_us: None,
            refusal,
            preallocated_to: 0,
            preallocation_supported: true,
        };
        let recorded = if log.refusal.is_some() {
            log.record_quarantine(state.next_offset.max(log_next)).await
        } else {
            log.reserve(next_offset).await
        };
        recorded.map_err(|error| OpenError::Io {
            operation: "reserve offsets",
            path: state_path(directory),
            source: std::io::Error::other(error),
        })?;
        log.trim_state_file().await;
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

    /// Whether the log refuses appends for good: quarantined at open, or poisoned by a
    /// failed fdatasync.
    pub fn refuses_appends(&self) -> bool {
        self.refusal.is_some()
    }

    /// Makes every appended record durable (fdatasync of the active log). A failure poisons
    /// the log; a poisoned log fails here without syncing again.
    pub async fn sync(&mut self) -> Result<(), AppendError> {
        if let Some(refusal @ Refusal::Poisoned { .. }) = &self.refusal {
            return Err(refusal.error());
        }
        let size = self.active().size_bytes;
        if self.synced_size == size {
            return Ok(());
        }
        let synced = self.active().log.sync_data().await;
        let path = self.active().paths.log.clone();
        self.check_sync(synced, &path).await?;
        self.synced_size = size;
        self.unsynced_messages = 0;
        Ok(())
    }

    /// Whether records written since the last sync are waiting for one.
    pub fn has_unsynced(&self) -> bool {
        self.synced_size != self.active().size_bytes
    }

    /// Syncs everything and records a clean close, so the next open needs no reservation.
    /// A quarantined log closes without either: the unclean state written at open must
    /// outlive a repair (see [`Self::record_quarantine`]). A poisoned one refuses.
    pub async fn close(mut self) -> Result<(), AppendError> {
        match &self.refusal {
            Some(Refusal::Quarantined { .. }) => return Ok(()),
            Some(refusal @ Refusal::Poisoned { .. }) => return Err(refusal.error()),
            None => {}
        }
        self.active_mut().write_entries().await?;
        // The cut gives the blocks reserved past the last record back to the file system,
        // and removes what a failed write left past it. A clean state promises the segment
        // ends at its last record (the next open takes any stop in it for damage), so
        // without the cut the partition closes synced but unclean: the next open cuts what
        // is left past the last record as a crash's torn tail.
        let trimmed = self.active().trim().await;
        // Synced even with no record waiting: the cut must be durable before the clean state
        // that promises it.
        let synced = self.active().log.sync_data().await;
        let path = self.active().paths.log.clone();
        self.check_sync(synced, &path).await?;
        if let Err(error) = trimmed {
            log::warn!(
                "partition {}: not cut at its last record at the close ({error}); it closes \
                 unclean",
                self.directory.display()
            );
            return Ok(());
        }
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

    /// Cuts a `partition.state` longer than its fixed size (damage: garbage written over
    /// it) to the state just written at its start; otherwise every later open would find it
    /// unreadable again and ignore the offset reservation it holds. Best-effort: the state
    /// in force is already written and synced.
    async fn trim_state_file(&self) {
        let size = self.state_file.size().await;
        if !size.is_ok_and(|size| size > STATE_SIZE as u64) {
            return;
        }
        let trimmed = self.state_file.set_len(STATE_SIZE as u64).await;
        let trimmed = match trimmed {
            Ok(()) => self.state_file.sync_data().await,
            Err(error) => Err(error),
        };
        if let Err(error) = trimmed {
            let path = state_path(&self.directory);
            log::warn!("{}: not cut to {STATE_SIZE} bytes: {error}", path.display());
        }
    }

    /// Writes `partition.state` and makes it durable. A refused write leaves the old state
    /// in force (the caller hands out no offset it would cover); a failed sync poisons.
    async fn write_state(&mut self, state: PartitionState) -> Result<(), AppendError> {
        let path = state_path(&self.directory);
        let (result, _) = self
            .state_file
            .write_all_at(state.encode().to_vec(), 0)
            .await;
        result.map_err(io_error("write", &path, append_io))?;
        let synced = self.state_file.sync_data().await;
        self.check_sync(synced, &path).await?;
        let synced = self.storage.sync_dir(&self.directory).await;
        let directory = self.directory.clone();
        self.check_sync(synced, &directory).await
    }

    /// Quarantines the log on damage a read found at `position` of `path` (damage that
    /// recovery's cheap check of a sealed segment cannot see): from now on it appends
    /// nothing, and `partition.state` keeps its next offset at or above every offset handed
    /// out. Reads go on up to the damage. A no-op when the log already refuses appends.
    pub async fn quarantine_found(&mut self, path: PathBuf, position: u64) {
        if self.refusal.is_some() {
            return;
        }
        log::error!(
            "partition {}: a read found {} damaged at byte {position}; the partition is \
             quarantined: offsets before the damage stay readable, appends are refused \
             (`iggy check` and FORMAT.md §11 say how to repair)",
            self.directory.display(),
            path.display()
        );
        self.refusal = Some(Refusal::Quarantined { path, position });
        let floor = self.reserved_offset.max(self.next_offset());
        if let Err(error) = self.record_quarantine(floor).await {
            log::error!(
                "partition {}: recording the quarantine failed: {error}",
                self.directory.display()
            );
        }
    }

    /// Records a quarantine in `partition.state`: unclean, at `floor` (at or above every
    /// offset the log held, damaged records included: the old state's offset and the log's
    /// are), with an unknown boot id. So whenever the partition opens again, repaired or not,
    /// its next offset is at least `floor`, and no offset past the damage is handed out again.
    async fn record_quarantine(&mut self, floor: u64) -> Result<(), AppendError> {
        let state = PartitionState {
            clean: false,
            next_offset: floor,
            boot_id: [0; 16],
        };
        self.write_state(state).await?;
        self.reserved_offset = floor;
        Ok(())
    }

    /// Passes a sync's result on; a failure first poisons the log.
    async fn check_sync(
        &mut self,
        synced: std::io::Result<()>,
        path: &Path,
    ) -> Result<(), AppendError> {
        match synced {
            Ok(()) => Ok(()),
            Err(source) => {
                self.poison(path).await;
                Err(append_io("sync", path.to_path_buf(), source))
            }
        }
    }

    /// Refuses every later append after a failed fdatasync of `path`, and rewrites
    /// `partition.state` with an unknown boot id: records the kernel lost may have been read
    /// already, so the next open, even within this boot, must not number offsets densely from
    /// what the log then holds (§5). That rewrite is best effort; its failure is only logged.
    async fn poison(&mut self, path: &Path) {
        if self.refusal.is_some() {
            return;
        }
        log::error!(
            "partition {}: fdatasync of {} failed; the partition refuses appends until it is \
             reopened",
            self.directory.display(),
            path.display()
        );
        self.refusal = Some(Refusal::Poisoned {
            path: path.to_path_buf(),
        });
        let state = PartitionState {
            clean: false,
            next_offset: self.reserved_offset,
            boot_id: [0; 16],
        };
        let (written, _) = self
            .state_file
            .write_all_at(state.encode().to_vec(), 0)
            .await;
        let recorded = match written {
            Ok(()) => self.state_file.sync_data().await,
            Err(error) => Err(error),
        };
        if let Err(error) = recorded {
            log::error!(
                "partition {}: recording the failed sync in partition.state failed: {error}",
                self.directory.display()
            );
        }
    }
}

/// Logs what recovery cut and the damage it kept, one line each.
/// Names the offsets a clean close recorded that the log no longer holds.
fn log_lost_offsets(directory: &Path, state: &PartitionState, log_next: u64) {
    if let Some(lost) = state.lost_after_clean_close(log_next) {
        log::error!(
            "partition {}: closed cleanly at offset {} but its log ends at {}: offsets {}..{} \
             were lost since (a damaged or removed segment file, not a crash); they are not \
             given again",
            directory.display(),
            lost.end,
            lost.start,
            lost.start,
            lost.end
        );
    }
}

fn log_recovery(directory: &Path, report: &RecoveryReport) {
    for cut in &report.cuts {
        log::warn!(
            "partition {}: cut a torn tail of {} bytes from segment {} at byte {} ({:?})",
            directory.display(),
            cut.bytes_removed,
            cut.segment_start,
            cut.position,
            cut.reason
        );
    }
    if let Some(damage) = report.damage.first() {
        log::error!(
            "partition {}: {} is damaged at byte {} ({:?}); the partition is quarantined: \
             offsets before the damage stay readable, appends are refused ({} damaged \
             segment(s); `iggy check` lists them, FORMAT.md §11 says how to repair)",
            directory.display(),
            damage.path.display(),
            damage.position,
            damage.reason,
            report.damage.len()
        );
    }
}

/// Readies the active segment to continue at `next_offset`: when the last segment cannot
/// continue there (it is missing, or offsets skip past it after a crash), it is sealed and a
/// new one starts at `next_offset`.
async fn start_active<S: Storage>(
    storage: &S,
    directory: &Path,
    segments: &mut Vec<Segment<S::File>>,
    next_offset: u64,
) -> Result<(), OpenError> {
    let continues = segments
        .last()
        .is_some_and(|active| active.next_offset == next_offset);
    if continues {
        return Ok(());
    }
    drop_empty_active(storage, segments).await?;
    let wrap = |operation: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |error: AppendError| OpenError::Io {
            operation,
            path,
            source: std::io::Error::other(error),
        }
    };
    if let Some(previous) = segments.last_mut() {
        // It was scanned as the active segment; sealing makes all of it durable, as every
        // sealed segment is (recovery treats any stop in a sealed segment as damage).
        let path = previous.paths.log.clone();
        // Its entries are in memory; should the disk have no room for them, the files stay
        // short and the next open rebuilds them (a sealed segment whose last entry does not
        // end its log is scanned), rather than the partition not opening.
        if let Err(error) = previous.write_entries().await {
            log::warn!(
                "{}: index entries not written at the seal: {error}",
                path.display()
            );
        }
        // Blocks reserved past its end before the stop go back: a sealed segment is never
        // trimmed again. Only an optimisation, so a failure does not stop the open.
        if let Err(error) = previous.trim().await {
            log::warn!("{}: reserved blocks not released: {error}", path.display());
        }
        previous.seal().await.map_err(wrap("seal", &path))?;
    }
    let active = Segment::create(storage, directory, next_offset)
        .await
        .map_err(wrap("create segment", directory))?;
    segments.push(active);
    Ok(())
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
mod fault_tests;
#[cfg(test)]
mod tests;

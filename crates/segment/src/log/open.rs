//! Opening a partition: recovery as `FORMAT.md` §7 describes it.
//!
//! A scan that stops before the end of a segment's `.log` found either a torn tail, which is
//! cut, or damage, which is kept and reported ([`RecoveryReport::damage`]) so the log opens
//! quarantined: readable up to the damage, refusing appends. The rule:
//! - in a sealed segment every stop is damage: a segment is sealed only after an fdatasync
//!   of all of it, so no crash can tear it, and cutting would drop synced records and every
//!   record after the bad one;
//! - in the active segment after a crash a stop is a torn tail when no intact record
//!   continuing the log starts at any later byte (a crash leaves a prefix of the unsynced
//!   writes, §8), and damage when one does: cutting there would drop records that were
//!   written after the bad one, possibly acknowledged. A damaged last record is then
//!   indistinguishable from a torn one and is cut;
//! - in the active segment of a partition closed cleanly every stop is damage, as in a
//!   sealed one: the clean close synced the whole segment and cut it at its last record, and
//!   the open that follows marks the partition unclean before its first append, so no crash
//!   since can have torn it.

use std::path::{Path, PathBuf};

use proto::batch::BATCH_HEADER_SIZE;

use crate::format::index::{IndexEntry, OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, parse_indexes};
use crate::format::scan::{Scan, StopReason, intact_record, record_candidate, scan, scan_more};
use crate::format::state::{PartitionState, RESERVATION_STEP};
use crate::layout::{SegmentPaths, state_path};
use crate::storage::{Storage, StorageFile, read_all};

use super::error::OpenError;
use super::segment::Segment;

/// What recovery found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecoveryReport {
    pub segments: usize,
    /// Start offsets of segments whose indexes were rebuilt from the log.
    pub rebuilt_indexes: Vec<u64>,
    /// Tails cut from logs.
    pub cuts: Vec<Cut>,
    /// Damage kept in place; when there is any, the log opened quarantined.
    pub damage: Vec<Damage>,
    /// The partition was closed cleanly.
    pub clean: bool,
    /// The offset the next message gets; for a quarantined log, the offset after the last
    /// readable record of the active segment (no offset is handed out).
    pub next_offset: u64,
}

impl RecoveryReport {
    /// Whether the log opened quarantined.
    pub fn quarantined(&self) -> bool {
        !self.damage.is_empty()
    }
}

/// A damaged tail removed from a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub segment_start: u64,
    /// Where the valid records end.
    pub position: u64,
    pub bytes_removed: u64,
    pub reason: StopReason,
}

/// A record that failed validation where a torn write cannot explain it; the file is left
/// as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub segment_start: u64,
    pub path: PathBuf,
    /// Where the first invalid record starts: the valid records end here.
    pub position: u64,
    pub reason: StopReason,
    /// Where an intact record after the damage starts (active segments are searched for one;
    /// sealed ones are damaged whatever follows).
    pub intact_at: Option<u64>,
}

pub(crate) struct Recovered<F> {
    pub(crate) segments: Vec<Segment<F>>,
    pub(crate) state: PartitionState,
    pub(crate) report: RecoveryReport,
}

fn open_io(operation: &'static str, path: PathBuf, source: std::io::Error) -> OpenError {
    OpenError::Io {
        operation,
        path,
        source,
    }
}

fn io<'p>(
    operation: &'static str,
    path: &'p Path,
) -> impl FnOnce(std::io::Error) -> OpenError + 'p {
    move |source| open_io(operation, path.to_path_buf(), source)
}

/// Recovers every segment of the partition in `directory`.
pub(crate) async fn recover<S: Storage>(
    storage: &S,
    directory: &Path,
) -> Result<Recovered<S::File>, OpenError> {
    storage
        .create_dir_all(directory)
        .await
        .map_err(io("create", directory))?;
    let state = read_state(storage, directory).await?;
    let starts = segment_starts(storage, directory).await?;
    let mut report = RecoveryReport {
        clean: state.clean,
        ..RecoveryReport::default()
    };
    // A missing state file holds no promise: a partition created and never reopened, or a
    // removed file.
    let closed_cleanly = state.clean && storage.exists(&state_path(directory)).await;
    let mut segments = Vec::with_capacity(starts.len());
    for (index, start) in starts.iter().enumerate() {
        let active = index + 1 == starts.len();
        let role = match (active, closed_cleanly) {
            (false, _) => Role::Sealed,
            (true, false) => Role::Active { tearable: true },
            (true, true) => Role::Active { tearable: false },
        };
        let segment = recover_segment(storage, directory, *start, role, &mut report).await?;
        if let Some(previous) = segments.last().map(|s: &Segment<S::File>| s.next_offset)
            && segment.start_offset < previous
        {
            return Err(OpenError::Gap {
                path: segment.paths.log.clone(),
            });
        }
        segments.push(segment);
    }
    report.segments = segments.len();
    Ok(Recovered {
        segments,
        state,
        report,
    })
}

async fn read_state<S: Storage>(
    storage: &S,
    directory: &Path,
) -> Result<PartitionState, OpenError> {
    let path = state_path(directory);
    if !storage.exists(&path).await {
        return Ok(PartitionState {
            clean: true,
            next_offset: 0,
            boot_id: [0; 16],
        });
    }
    let file = storage
        .open(&path, false)
        .await
        .map_err(io("open", &path))?;
    let bytes = read_all(&file).await.map_err(io("read", &path))?;
    match PartitionState::decode(&bytes) {
        Ok(state) => Ok(state),
        Err(source) => {
            // The state is rewritten in place and synced after; a crash before the sync may
            // leave it short (a new file) or torn. It only holds the offset reservation, so
            // the partition opens as after an unclean stop with nothing reserved: offsets
            // continue from what the segments hold. Refusing would leave the server unable
            // to start after a power loss at the wrong moment.
            log::warn!(
                "{}: partition state unreadable ({source}); continuing from the segments",
                path.display()
            );
            Ok(PartitionState {
                clean: false,
                next_offset: 0,
                boot_id: [0; 16],
            })
        }
    }
}

async fn segment_starts<S: Storage>(storage: &S, directory: &Path) -> Result<Vec<u64>, OpenError> {
    let names = storage
        .list_dir(directory)
        .await
        .map_err(io("list", directory))?;
    let starts = crate::format::segment_starts(&names);
    // Its offsets are served as a gap.
    for name in crate::format::indexes_without_log(&names, &starts) {
        log::warn!(
            "partition {}: {name} has no .log: that segment's records are gone (a deletion \
             cut short, or a removed file)",
            directory.display()
        );
    }
    Ok(starts)
}

/// Which segment of a partition is opened, and whether a crash can have torn it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Sealed,
    /// The last segment; `tearable` unless the partition was closed cleanly since its last
    /// append (module doc).
    Active {
        tearable: bool,
    },
}

/// Opens one segment. The active one is always scanned in full; sealed ones are trusted when
/// their indexes agree with the last record, and scanned otherwise. The indexes of a damaged
/// segment are left as they are: they may help locate the records past the damage.
async fn recover_segment<S: Storage>(
    storage: &S,
    directory: &Path,
    start_offset: u64,
    role: Role,
    report: &mut RecoveryReport,
) -> Result<Segment<S::File>, OpenError> {
    let active = role != Role::Sealed;
    let paths = SegmentPaths::new(directory, start_offset);
    let log = storage
        .open(&paths.log, false)
        .await
        .map_err(io("open", &paths.log))?;
    let size = log.size().await.map_err(io("size", &paths.log))?;
    let stored = read_indexes(storage, &paths).await;
    let trusted = match (&stored, active) {
        (Some(entries), false) => trusted_tail(&log, entries, start_offset, size).await,
        _ => None,
    };
    let damage_before = report.damage.len();
    let found = match trusted {
        Some(found) => found,
        None => recover_scan(&log, &paths, start_offset, size, role, report).await?,
    };
    if !active && report.damage.len() == damage_before {
        note_lost_records(stored.as_deref(), &found, start_offset, &paths, report);
    }
    let damaged = report.damage.len() > damage_before;
    let mut segment = Segment {
        start_offset,
        paths,
        log,
        indexes: None,
        written_entries: found.entries.len(),
        entries: found.entries,
        size_bytes: found.size_bytes,
        next_offset: found.next_offset,
        last_timestamp: found.last_timestamp,
    };
    let agrees = stored.as_ref() == Some(&segment.entries);
    if !damaged && !agrees && !active {
        segment
            .rewrite_indexes(storage)
            .await
            .map_err(|error| OpenError::Io {
                operation: "rebuild indexes",
                path: segment.paths.index.clone(),
                source: std::io::Error::other(error),
            })?;
        report.rebuilt_indexes.push(start_offset);
    }
    if active {
        open_indexes(storage, &mut segment).await?;
        if !damaged && !agrees {
            let stored = stored.as_deref().unwrap_or_default();
            keep_agreeing_entries(&mut segment, stored).await?;
            report.rebuilt_indexes.push(start_offset);
        }
    }
    Ok(segment)
}

/// Records a sealed segment whose log lost records its index lists as damage.
fn note_lost_records(
    stored: Option<&[IndexEntry]>,
    found: &Found,
    start_offset: u64,
    paths: &SegmentPaths,
    report: &mut RecoveryReport,
) {
    let Some(stored) = stored.filter(|stored| lost_records(stored, found)) else {
        return;
    };
    report.damage.push(Damage {
        segment_start: start_offset,
        path: paths.log.clone(),
        position: found.size_bytes,
        reason: StopReason::RecordsMissing {
            indexed: stored.len() as u64,
            valid: found.entries.len() as u64,
        },
        intact_at: None,
    });
}

/// Whether a sealed segment's index lists records past the end of its valid log, starting
/// exactly where the log now ends, after entries that all agree with it: the log lost its
/// last records (cut, emptied) after the seal, while the index written with them kept them.
/// An index that disagrees anywhere else is stale or damaged itself, and is rebuilt.
fn lost_records(stored: &[IndexEntry], found: &Found) -> bool {
    let valid = found.entries.len();
    stored.len() > valid
        && stored[..valid] == found.entries[..]
        && u64::from(stored[valid].position) == found.size_bytes
}

/// The active segment's index files cut to the entries they hold that agree with the scan;
/// the rest wait in memory, as an append's do, for the next `Segment::write_entries`. Only
/// cuts: a full disk must not keep the partition from opening.
async fn keep_agreeing_entries<F: StorageFile>(
    segment: &mut Segment<F>,
    stored: &[IndexEntry],
) -> Result<(), OpenError> {
    let agreed = stored
        .iter()
        .zip(&segment.entries)
        .take_while(|(stored, scanned)| stored == scanned)
        .count();
    if let Some((index, time_index)) = &segment.indexes {
        index
            .set_len((agreed * OFFSET_ENTRY_SIZE) as u64)
            .await
            .map_err(io("truncate", &segment.paths.index))?;
        time_index
            .set_len((agreed * TIME_ENTRY_SIZE) as u64)
            .await
            .map_err(io("truncate", &segment.paths.time_index))?;
    }
    segment.written_entries = agreed;
    Ok(())
}

/// The valid records of a segment and where they end.
struct Found {
    entries: Vec<IndexEntry>,
    next_offset: u64,
    last_timestamp: u64,
    size_bytes: u64,
}

/// Scans a segment in full; a stop before its end is cut as a torn tail or kept as damage
/// (module doc).
async fn recover_scan<F: StorageFile>(
    log: &F,
    paths: &SegmentPaths,
    start_offset: u64,
    size: u64,
    role: Role,
    report: &mut RecoveryReport,
) -> Result<Found, OpenError> {
    let scanned = scan_file(log, &paths.log, start_offset, size, SCAN_CHUNK_BYTES).await?;
    if scanned.valid_length < size {
        let intact_at = if role == Role::Sealed {
            None
        } else {
            find_intact(log, &paths.log, &scanned, size, SCAN_CHUNK_BYTES).await?
        };
        if role == (Role::Active { tearable: true }) && intact_at.is_none() {
            cut_tail(log, paths, size, &scanned, report).await?;
        } else {
            report.damage.push(Damage {
                segment_start: start_offset,
                path: paths.log.clone(),
                position: scanned.valid_length,
                reason: scanned.stop.clone(),
                intact_at,
            });
        }
    }
    Ok(Found {
        entries: scanned.entries().collect(),
        next_offset: scanned.next_offset,
        last_timestamp: scanned.last_timestamp,
        size_bytes: scanned.valid_length,
    })
}

async fn read_indexes<S: Storage>(storage: &S, paths: &SegmentPaths) -> Option<Vec<IndexEntry>> {
    let offsets = storage.open(&paths.index, false).await.ok()?;
    let times = storage.open(&paths.time_index, false).await.ok()?;
    let offsets = read_all(&offsets).await.ok()?;
    let times = read_all(&times).await.ok()?;
    parse_indexes(&offsets, &times)
}

/// Trusts a sealed segment's indexes when the record their last entry points at is valid,
/// starts where the entry says and ends exactly at the end of the log.
async fn trusted_tail<F: StorageFile>(
    log: &F,
    entries: &[IndexEntry],
    start_offset: u64,
    size: u64,
) -> Option<Found> {
    let last = entries.last()?;
    let position = u64::from(last.position);
    let length = usize::try_from(size.checked_sub(position)?).ok()?;
    let bytes = crate::storage::read_exact_at(log, position, length)
        .await
        .ok()?;
    let base_offset = start_offset + u64::from(last.relative_offset);
    let scanned = scan(&bytes, base_offset);
    let record = scanned.records.first()?;
    let whole = scanned.stop == StopReason::End && scanned.records.len() == 1;
    let matches = record.entry.timestamp == last.timestamp;
    (whole && matches).then(|| Found {
        entries: entries.to_vec(),
        next_offset: scanned.next_offset,
        last_timestamp: last.timestamp,
        size_bytes: size,
    })
}

/// Bytes read per step when scanning a segment, so recovery never holds a whole segment (up
/// to 1 GiB) in memory; a larger record is read whole.
pub(crate) const SCAN_CHUNK_BYTES: u64 = 16 << 20;

/// Scans a whole `.log` in chunks.
pub(crate) async fn scan_file<F: StorageFile>(
    log: &F,
    path: &Path,
    start_offset: u64,
    size: u64,
    chunk_bytes: u64,
) -> Result<Scan, OpenError> {
    let mut scanned = Scan::new(start_offset);
    let mut want = chunk_bytes;
    while scanned.valid_length < size {
        let remaining = size - scanned.valid_length;
        let length = usize::try_from(want.min(remaining)).unwrap_or(usize::MAX);
        let bytes = crate::storage::read_exact_at(log, scanned.valid_length, length)
            .await
            .map_err(io("read", path))?;
        scan_more(&mut scanned, &bytes);
        let left = size - scanned.valid_length;
        match scanned.stop {
            StopReason::End => want = chunk_bytes,
            // The record at the chunk's end is whole in the file: read again from its start,
            // with room for all of it. A record longer than what is left is a torn tail.
            StopReason::Torn { needed, .. } if needed <= left => {
                want = needed.max(chunk_bytes);
            }
            _ => break,
        }
    }
    Ok(scanned)
}

/// Where the first intact record continuing `scanned`'s log starts after its valid prefix,
/// searching every byte to the end of the file in chunks of `chunk_bytes` (a bad length
/// field hides where the next record starts). `None` means the rest is a torn tail.
pub async fn find_intact<F: StorageFile>(
    log: &F,
    path: &Path,
    scanned: &Scan,
    size: u64,
    chunk_bytes: u64,
) -> Result<Option<u64>, OpenError> {
    let header = BATCH_HEADER_SIZE as u64;
    let mut chunk_start = scanned.valid_length + 1;
    while chunk_start + header <= size {
        // Each chunk reaches one header past the positions it searches, so a header that
        // straddles two chunks is seen whole.
        let searched_end = (chunk_start + chunk_bytes).min(size - header + 1);
        let length = usize::try_from(searched_end - chunk_start + header - 1).unwrap_or(usize::MAX);
        let chunk = crate::storage::read_exact_at(log, chunk_start, length)
            .await
            .map_err(io("read", path))?;
        for (index, position) in (chunk_start..searched_end).enumerate() {
            let Some(record_length) = record_candidate(&chunk[index..], scanned.next_offset) else {
                continue;
            };
            if position + record_length > size {
                continue;
            }
            let record_length = usize::try_from(record_length).unwrap_or(usize::MAX);
            // A read error ends the search with it: taken for "nothing intact", it would cut.
            let intact = if let Some(record) = chunk.get(index..index + record_length) {
                intact_record(record, scanned.next_offset)
            } else {
                let record = crate::storage::read_exact_at(log, position, record_length)
                    .await
                    .map_err(io("read", path))?;
                intact_record(&record, scanned.next_offset)
            };
            if intact {
                return Ok(Some(position));
            }
        }
        chunk_start = searched_end;
    }
    Ok(None)
}

/// Truncates the log after its valid prefix and records the cut.
async fn cut_tail<F: StorageFile>(
    log: &F,
    paths: &SegmentPaths,
    size: u64,
    scanned: &Scan,
    report: &mut RecoveryReport,
) -> Result<(), OpenError> {
    if scanned.valid_length == size {
        return Ok(());
    }
    log.set_len(scanned.valid_length)
        .await
        .map_err(io("truncate", &paths.log))?;
    log.sync_data().await.map_err(io("sync", &paths.log))?;
    report.cuts.push(Cut {
        segment_start: scanned.start_offset,
        position: scanned.valid_length,
        bytes_removed: size - scanned.valid_length,
        reason: scanned.stop.clone(),
    });
    Ok(())
}

async fn open_indexes<S: Storage>(
    storage: &S,
    segment: &mut Segment<S::File>,
) -> Result<(), OpenError> {
    let index = storage
        .open(&segment.paths.index, true)
        .await
        .map_err(io("open", &segment.paths.index))?;
    let time_index = storage
        .open(&segment.paths.time_index, true)
        .await
        .map_err(io("open", &segment.paths.time_index))?;
    segment.indexes = Some((index, time_index));
    Ok(())
}

/// The state to write once the partition is open: unclean, with offsets reserved past
/// `next_offset`.
pub(crate) fn reservation(next_offset: u64, boot_id: Option<[u8; 16]>) -> PartitionState {
    PartitionState {
        clean: false,
        next_offset: next_offset.saturating_add(RESERVATION_STEP),
        boot_id: boot_id.unwrap_or_default(),
    }
}

//! Offline verification of partition directories (`iggy check`): every `.log` scanned in
//! full with the validation recovery uses (`FORMAT.md` §7), both indexes compared with the
//! scan entry by entry, `partition.state` and the consumer offset files decoded. Nothing is
//! written. Each problem is a [`Finding`] naming the file and the byte it starts at, and the
//! check goes on past it, so one run lists all the damage.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::format::consumer_offset::newest_slot;
use crate::format::index::{OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, serialize};
use crate::format::scan::{Scan, StopReason};
use crate::format::segment_starts;
use crate::format::state::{PartitionState, StateError};
use crate::layout::{SegmentPaths, state_path, streams_directory};
use crate::log::OpenError;
use crate::log::open::{SCAN_CHUNK_BYTES, scan_file};
use crate::storage::{Storage, StorageFile, read_all};

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    /// The byte of the file the problem starts at.
    pub position: u64,
    pub problem: Problem,
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file or directory could not be read.
    Io {
        action: &'static str,
        kind: io::ErrorKind,
    },
    /// `partition.state` does not decode: the partition opens from its segments alone, and
    /// offsets a power loss cut may be handed out again.
    State(StateError),
    /// The `.log`'s records stop being valid here: the server cuts a torn tail of the active
    /// segment at start-up and quarantines the partition for any other damage.
    Log(StopReason),
    /// The segment starts below the offset the segment before it ends at.
    Overlap { previous_next_offset: u64 },
    /// An index file whose segment has no `.log`: the segment's records are gone (a
    /// deletion a crash cut short, which removes the `.log` first, or a removed file).
    LogMissing,
    /// `partition.state` says the partition closed cleanly at `recorded`, but its segments
    /// end at `found`: records after that were lost since (a file cut or removed).
    RecordsLost { recorded: u64, found: u64 },
    /// An index file of the segment is missing.
    IndexMissing,
    /// The index file ends in a partial entry.
    IndexPartialEntry,
    /// The index entry starting here differs from the record the log holds there.
    IndexMismatch { entry: u64 },
    /// The index ends here, before the log's last valid record.
    IndexShort { entries: u64, records: u64 },
    /// The index entry starting here has no valid record in the log.
    IndexLong { entries: u64, records: u64 },
    /// The consumer offset file holds no valid slot: the stored offset is lost.
    OffsetLost,
}

impl Problem {
    /// An index that ends early, even in a partial entry: the state of an active segment's
    /// files after a crash, as its entries are written in bulk.
    fn is_lag(&self) -> bool {
        matches!(self, Self::IndexShort { .. } | Self::IndexPartialEntry)
    }
}

/// Every partition under `<root>/streams/*/topics/*/partitions/*`, checked.
pub async fn check_partitions<S: Storage>(storage: &S, root: &Path) -> Vec<Finding> {
    let mut findings = Vec::new();
    let streams = streams_directory(root);
    if !storage.exists(&streams).await {
        return findings;
    }
    for stream in numbered_children(storage, &streams, &mut findings).await {
        let topics = stream.join("topics");
        for topic in numbered_children(storage, &topics, &mut findings).await {
            let partitions = topic.join("partitions");
            for partition in numbered_children(storage, &partitions, &mut findings).await {
                findings.extend(check_partition(storage, &partition).await);
            }
        }
    }
    findings
}

/// One partition directory, checked.
pub async fn check_partition<S: Storage>(storage: &S, directory: &Path) -> Vec<Finding> {
    let mut findings = Vec::new();
    let state = check_state(storage, directory, &mut findings).await;
    let names = match storage.list_dir(directory).await {
        Ok(names) => names,
        Err(error) => {
            findings.push(io_finding(directory, "list", &error));
            return findings;
        }
    };
    let starts = segment_starts(&names);
    check_orphan_indexes(directory, &names, &starts, &mut findings);
    let last = starts.last().copied();
    let mut previous_next_offset = None;
    let mut last_whole = true;
    for start in starts {
        let paths = SegmentPaths::new(directory, start);
        match previous_next_offset {
            Some(previous_next_offset) if start < previous_next_offset => {
                let problem = Problem::Overlap {
                    previous_next_offset,
                };
                findings.push(finding(&paths.log, 0, problem));
            }
            _ => {}
        }
        let Some(scanned) = check_log(storage, &paths, start, &mut findings).await else {
            continue;
        };
        let active = Some(start) == last;
        check_indexes(storage, &paths, &scanned, active, &mut findings).await;
        previous_next_offset = Some(scanned.next_offset);
        last_whole = scanned.stop == StopReason::End;
    }
    // A last log that stops early is reported above; one whole that ends before what a
    // clean close recorded lost records since.
    if let Some(state) = state
        && state.clean
        && last_whole
        && state.next_offset > previous_next_offset.unwrap_or(0)
    {
        let problem = Problem::RecordsLost {
            recorded: state.next_offset,
            found: previous_next_offset.unwrap_or(0),
        };
        findings.push(finding(&state_path(directory), 0, problem));
    }
    check_offsets(storage, directory, &mut findings).await;
    findings
}

/// Index files of segments that have no `.log`.
fn check_orphan_indexes(
    directory: &Path,
    names: &[String],
    starts: &[u64],
    findings: &mut Vec<Finding>,
) {
    for name in crate::format::indexes_without_log(names, starts) {
        findings.push(finding(&directory.join(name), 0, Problem::LogMissing));
    }
}

/// Decodes `partition.state`: the state, when it is there and readable.
async fn check_state<S: Storage>(
    storage: &S,
    directory: &Path,
    findings: &mut Vec<Finding>,
) -> Option<PartitionState> {
    let path = state_path(directory);
    if !storage.exists(&path).await {
        return None;
    }
    match read_file(storage, &path).await {
        Ok(bytes) => match PartitionState::decode(&bytes) {
            Ok(state) => Some(state),
            Err(error) => {
                findings.push(finding(&path, 0, Problem::State(error)));
                None
            }
        },
        Err(found) => {
            findings.push(found);
            None
        }
    }
}

/// Scans the segment's log; `None` when it cannot be read.
async fn check_log<S: Storage>(
    storage: &S,
    paths: &SegmentPaths,
    start: u64,
    findings: &mut Vec<Finding>,
) -> Option<Scan> {
    let path = &paths.log;
    let log = match storage.open(path, false).await {
        Ok(log) => log,
        Err(error) => {
            findings.push(io_finding(path, "open", &error));
            return None;
        }
    };
    let scanned = match log.size().await {
        Ok(size) => scan_file(&log, path, start, size, SCAN_CHUNK_BYTES).await,
        Err(error) => Err(OpenError::Io {
            operation: "size",
            path: path.clone(),
            source: error,
        }),
    };
    match scanned {
        Ok(scanned) => {
            if scanned.stop != StopReason::End {
                let problem = Problem::Log(scanned.stop.clone());
                findings.push(finding(path, scanned.valid_length, problem));
            }
            Some(scanned)
        }
        Err(error) => {
            findings.push(open_error_finding(path, &error));
            None
        }
    }
}

/// Compares both index files with the entries the scan derived from the log. The active
/// (last) segment's files may be missing or end early, even in a partial entry: its entries
/// reach them in bulk (threshold syncs, the seal, the close), so after a crash they lag the
/// log, and start-up completes them from its scan. That is no problem; a disagreeing entry
/// is.
async fn check_indexes<S: Storage>(
    storage: &S,
    paths: &SegmentPaths,
    scanned: &Scan,
    active: bool,
    findings: &mut Vec<Finding>,
) {
    let entries: Vec<_> = scanned.entries().collect();
    let (offsets, times) = serialize(&entries);
    let files = [
        (&paths.index, offsets, OFFSET_ENTRY_SIZE),
        (&paths.time_index, times, TIME_ENTRY_SIZE),
    ];
    for (path, expected, entry_size) in files {
        if !storage.exists(path).await {
            // The active segment's files may not exist yet after a crash (a roll makes the
            // `.log` first): start-up writes them from its scan, as it completes lagging ones.
            if !active {
                findings.push(finding(path, 0, Problem::IndexMissing));
            }
            continue;
        }
        match read_file(storage, path).await {
            Ok(found) => {
                let departure = compare_index(path, &found, &expected, entry_size);
                if let Some(missing) = records_missing(paths, scanned, active, departure.as_ref())
                    && entry_size == OFFSET_ENTRY_SIZE
                {
                    findings.push(missing);
                }
                findings.extend(departure.filter(|found| !(active && found.problem.is_lag())));
            }
            Err(found) => findings.push(found),
        }
    }
}

/// A sealed segment whose whole log is valid but whose index lists more records, agreeing
/// with every record it has: the log lost records after the seal, and start-up quarantines
/// the partition (FORMAT.md §7). Reported against the log, where the loss is.
fn records_missing(
    paths: &SegmentPaths,
    scanned: &Scan,
    active: bool,
    departure: Option<&Finding>,
) -> Option<Finding> {
    let Some(Finding {
        problem: Problem::IndexLong { entries, records },
        ..
    }) = departure
    else {
        return None;
    };
    if active || scanned.stop != StopReason::End {
        return None;
    }
    let reason = StopReason::RecordsMissing {
        indexed: *entries,
        valid: *records,
    };
    Some(finding(
        &paths.log,
        scanned.valid_length,
        Problem::Log(reason),
    ))
}

/// The first place an index file departs from the entries it should hold.
fn compare_index(path: &Path, found: &[u8], expected: &[u8], entry_size: usize) -> Option<Finding> {
    let whole = found.len() - found.len() % entry_size;
    let differing = found
        .iter()
        .zip(expected)
        .position(|(found, expected)| found != expected);
    let entries = as_u64(whole / entry_size);
    let records = as_u64(expected.len() / entry_size);
    let (position, problem) = match differing {
        Some(byte) if byte < whole => {
            let entry = byte / entry_size;
            let problem = Problem::IndexMismatch {
                entry: as_u64(entry),
            };
            (entry * entry_size, problem)
        }
        _ if whole < found.len() => (whole, Problem::IndexPartialEntry),
        _ if whole < expected.len() => (whole, Problem::IndexShort { entries, records }),
        _ if whole > expected.len() => (expected.len(), Problem::IndexLong { entries, records }),
        _ => return None,
    };
    Some(finding(path, as_u64(position), problem))
}

async fn check_offsets<S: Storage>(storage: &S, directory: &Path, findings: &mut Vec<Finding>) {
    for kind in ["consumers", "groups"] {
        let offsets = directory.join("offsets").join(kind);
        if !storage.exists(&offsets).await {
            continue;
        }
        let names = match storage.list_dir(&offsets).await {
            Ok(names) => names,
            Err(error) => {
                findings.push(io_finding(&offsets, "list", &error));
                continue;
            }
        };
        for name in names.iter().filter(|name| name.ends_with(".offset")) {
            let path = offsets.join(name);
            match read_file(storage, &path).await {
                // Empty: made for a first store that a crash (or a full disk) cut short, so
                // nothing was stored yet; the server reads it as no offset, as here.
                Ok(bytes) if bytes.is_empty() => {}
                Ok(bytes) if newest_slot(&bytes).is_none() => {
                    findings.push(finding(&path, 0, Problem::OffsetLost));
                }
                Ok(_) => {}
                Err(found) => findings.push(found),
            }
        }
    }
}

/// The children of `directory` whose names are decimal ids, in id order.
async fn numbered_children<S: Storage>(
    storage: &S,
    directory: &Path,
    findings: &mut Vec<Finding>,
) -> Vec<PathBuf> {
    if !storage.exists(directory).await {
        return Vec::new();
    }
    let names = match storage.list_dir(directory).await {
        Ok(names) => names,
        Err(error) => {
            findings.push(io_finding(directory, "list", &error));
            return Vec::new();
        }
    };
    let mut ids: Vec<u32> = names.iter().filter_map(|name| name.parse().ok()).collect();
    ids.sort_unstable();
    ids.iter()
        .map(|id| directory.join(id.to_string()))
        .collect()
}

async fn read_file<S: Storage>(storage: &S, path: &Path) -> Result<Vec<u8>, Finding> {
    let file = storage
        .open(path, false)
        .await
        .map_err(|error| io_finding(path, "open", &error))?;
    read_all(&file)
        .await
        .map_err(|error| io_finding(path, "read", &error))
}

fn finding(path: &Path, position: u64, problem: Problem) -> Finding {
    Finding {
        path: path.to_path_buf(),
        position,
        problem,
    }
}

fn io_finding(path: &Path, action: &'static str, error: &io::Error) -> Finding {
    let kind = error.kind();
    finding(path, 0, Problem::Io { action, kind })
}

fn open_error_finding(path: &Path, error: &OpenError) -> Finding {
    match error {
        OpenError::Io {
            operation, source, ..
        } => io_finding(path, operation, source),
        // `scan_file` reads and nothing else: it has no other error to return.
        OpenError::State { .. } | OpenError::Gap { .. } => {
            unreachable!("a log scan failed without I/O: {error}")
        }
    }
}

fn as_u64(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (path, position) = (self.path.display(), self.position);
        write!(f, "{path}: byte {position}: {}", self.problem)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { action, kind } => write!(f, "cannot {action}: {kind}"),
            Self::State(error) => write!(
                f,
                "{error}: the partition opens from its segments, without its offset reservation"
            ),
            Self::Log(stop) => write!(f, "{}; the records from here on are lost", Stop(stop)),
            Self::Overlap {
                previous_next_offset,
            } => write!(
                f,
                "the segment starts below offset {previous_next_offset}, where the one before \
                 it ends"
            ),
            Self::LogMissing => write!(
                f,
                "an index whose segment has no .log: its records are gone"
            ),
            Self::RecordsLost { recorded, found } => write!(
                f,
                "closed cleanly at offset {recorded}, but the segments end at {found}: offsets \
                 {found}..{recorded} were lost since (a .log cut or removed)"
            ),
            Self::IndexMissing => write!(f, "missing (rebuilt from the log at start-up)"),
            Self::IndexPartialEntry => write!(f, "ends in a partial entry"),
            Self::IndexMismatch { entry } => {
                write!(
                    f,
                    "entry {entry} disagrees with the log (rebuilt at start-up)"
                )
            }
            Self::IndexShort { entries, records } => write!(
                f,
                "{entries} entries for {records} records (rebuilt at start-up)"
            ),
            Self::IndexLong { entries, records } => write!(
                f,
                "{entries} entries for {records} valid records (rebuilt at start-up unless a \
                 sealed log lost records they list)"
            ),
            Self::OffsetLost => write!(f, "no valid slot: the stored offset is lost"),
        }
    }
}

/// A [`StopReason`] in words.
struct Stop<'a>(&'a StopReason);

impl fmt::Display for Stop<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            StopReason::End => write!(f, "no damage"),
            StopReason::Torn { needed, available } => {
                write!(f, "a torn record ({available} of {needed} bytes present)")
            }
            StopReason::Invalid(error) => write!(f, "an invalid record: {error}"),
            StopReason::RecordsMissing { indexed, valid } => write!(
                f,
                "the log ends before {} record(s) its index lists ({indexed} indexed, {valid} \
                 valid): they were lost after the seal",
                indexed.saturating_sub(*valid)
            ),
            StopReason::OffsetDiscontinuity { expected, found } => write!(
                f,
                "a record at offset {found} where {expected} should follow"
            ),
            StopReason::OffsetDelta {
                record_offset,
                index,
                found,
            } => write!(
                f,
                "message {index} of the record at offset {record_offset} has offset delta \
                 {found}"
            ),
            StopReason::TimestampBackwards { previous, found } => write!(
                f,
                "a record timestamped {found}, before the previous record's {previous}"
            ),
            StopReason::SegmentTooLarge => write!(f, "the segment exceeds 4 GiB"),
            StopReason::OffsetOverflow {
                base_offset,
                message_count,
            } => write!(
                f,
                "a record of {message_count} messages at offset {base_offset} overflows u64"
            ),
        }
    }
}

#[cfg(test)]
mod tests;

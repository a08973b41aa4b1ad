//! Walking a `.log` record by record with full validation (`FORMAT.md` §7): what recovery,
//! index rebuilds and the fuzzers share.

use alloc::vec::Vec;

use proto::batch::seal::STORED_RECORD_SIZE_MAX;
use proto::batch::{BATCH_HEADER_SIZE, Batch, FRAME_HEADER_SIZE, Integrity};
use proto::{DecodeError, DecodeErrorKind, Dialect, Subject};

use super::SEGMENT_SIZE_MAX;
use super::index::IndexEntry;

/// One valid record found by a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedRecord {
    pub entry: IndexEntry,
    pub message_count: u32,
    pub length: u32,
}

/// Why a scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Every byte belonged to a valid record.
    End,
    /// The last record is incomplete: a torn write.
    Torn { needed: u64, available: u64 },
    /// A record failed validation (a checksum, a reserved byte, a length).
    Invalid(DecodeError),
    /// A record's `base_offset` does not continue the previous record's offsets.
    OffsetDiscontinuity { expected: u64, found: u64 },
    /// A frame's `offset_delta` is not its index in the record.
    OffsetDelta {
        record_offset: u64,
        index: u32,
        found: u32,
    },
    /// A record's `base_timestamp` precedes the previous record's.
    TimestampBackwards { previous: u64, found: u64 },
    /// The segment grew past what its index can address.
    SegmentTooLarge,
    /// A record's offsets run past `u64::MAX` (possible only in a segment named near it).
    OffsetOverflow {
        base_offset: u64,
        message_count: u32,
    },
    /// A sealed segment's log ends, at a record boundary, before records its index lists:
    /// they were lost after the seal, which synced all of them (damage, not a crash).
    /// Found by comparing the log with its index (recovery, `iggy check`); a scan of the
    /// log alone cannot see it.
    RecordsMissing { indexed: u64, valid: u64 },
}

/// The outcome of a scan: the valid prefix and why it ends where it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    pub start_offset: u64,
    pub records: Vec<ScannedRecord>,
    /// Bytes of the valid prefix; everything after it is to be cut.
    pub valid_length: u64,
    /// The offset after the last valid record (the segment start when there is none).
    pub next_offset: u64,
    pub last_timestamp: u64,
    pub stop: StopReason,
}

impl Scan {
    pub fn entries(&self) -> impl Iterator<Item = IndexEntry> + '_ {
        self.records.iter().map(|record| record.entry)
    }
}

/// Scans `log`, the bytes of a segment that starts at `start_offset`.
pub fn scan(log: &[u8], start_offset: u64) -> Scan {
    let mut scan = Scan::new(start_offset);
    scan_more(&mut scan, log);
    scan
}

impl Scan {
    /// A scan of an empty segment starting at `start_offset`, to continue with
    /// [`scan_more`].
    pub fn new(start_offset: u64) -> Self {
        Self {
            start_offset,
            records: Vec::new(),
            valid_length: 0,
            next_offset: start_offset,
            last_timestamp: 0,
            stop: StopReason::End,
        }
    }
}

/// Continues `scan` over `bytes`, which start at its `valid_length` in the segment: lets a
/// caller scan a large segment in bounded chunks. A record cut by the end of the chunk stops
/// the scan as `Torn`, with `needed` saying how many bytes the next chunk must hold.
pub fn scan_more(scan: &mut Scan, bytes: &[u8]) {
    scan.stop = StopReason::End;
    let mut rest = bytes;
    while !rest.is_empty() {
        let position = scan.valid_length;
        match next_record(rest, position, scan) {
            Ok((record, remaining)) => {
                scan.valid_length = position + u64::from(record.length);
                // `next_record` refused a record whose offsets overflow.
                scan.next_offset = scan
                    .next_offset
                    .saturating_add(u64::from(record.message_count));
                scan.last_timestamp = record.entry.timestamp;
                scan.records.push(record);
                rest = remaining;
            }
            Err(stop) => {
                scan.stop = stop;
                break;
            }
        }
    }
}

fn next_record<'a>(
    rest: &'a [u8],
    position: u64,
    scan: &Scan,
) -> Result<(ScannedRecord, &'a [u8]), StopReason> {
    let offset = usize::try_from(position).unwrap_or(usize::MAX);
    let (batch, remaining) =
        Batch::parse_prefix_stored(rest, Dialect::V0_12_2, Integrity::Full, offset)
            .map_err(|error| classify(error, rest.len()))?;
    let header = batch.header();
    let base_offset = header.base_offset.get();
    if base_offset != scan.next_offset {
        return Err(StopReason::OffsetDiscontinuity {
            expected: scan.next_offset,
            found: base_offset,
        });
    }
    let timestamp = header.base_timestamp.get();
    if timestamp < scan.last_timestamp {
        return Err(StopReason::TimestampBackwards {
            previous: scan.last_timestamp,
            found: timestamp,
        });
    }
    check_deltas(&batch)?;
    let message_count = batch.message_count();
    if base_offset.checked_add(u64::from(message_count)).is_none() {
        return Err(StopReason::OffsetOverflow {
            base_offset,
            message_count,
        });
    }
    let length =
        u32::try_from(batch.as_bytes().len()).map_err(|_too_large| StopReason::SegmentTooLarge)?;
    let end = position + u64::from(length);
    let relative = base_offset - scan.start_offset;
    let relative_offset =
        u32::try_from(relative).map_err(|_too_large| StopReason::SegmentTooLarge)?;
    let position = u32::try_from(position).map_err(|_too_large| StopReason::SegmentTooLarge)?;
    if end > SEGMENT_SIZE_MAX {
        return Err(StopReason::SegmentTooLarge);
    }
    let entry = IndexEntry {
        relative_offset,
        position,
        timestamp,
    };
    Ok((
        ScannedRecord {
            entry,
            message_count,
            length,
        },
        remaining,
    ))
}

/// The length a record starting at `bytes` declares, when its header could belong to a
/// record of this log at or after `next_offset` (a plausible length and message count, an
/// offset not below it). A cheap filter before [`intact_record`]: a search for intact
/// records after damage calls it at every byte.
pub fn record_candidate(bytes: &[u8], next_offset: u64) -> Option<u64> {
    // Fields of the batch header (FORMAT.md §2): base_offset, batch_length, message_count.
    let base_offset = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    let length = u64::from_le_bytes(bytes.get(32..40)?.try_into().ok()?);
    let message_count = u32::from_le_bytes(bytes.get(48..52)?.try_into().ok()?);
    let length_min = BATCH_HEADER_SIZE
        .checked_add(FRAME_HEADER_SIZE)?
        .checked_add(1)?;
    let lengths = u64::try_from(length_min).ok()?..=u64::try_from(STORED_RECORD_SIZE_MAX).ok()?;
    let plausible = lengths.contains(&length) && message_count >= 1 && base_offset >= next_offset;
    plausible.then_some(length)
}

/// Whether `bytes` is exactly one record that passes every check a scan makes of a record
/// (layout, every checksum, frame numbering) and continues this log at or after
/// `next_offset`.
pub fn intact_record(bytes: &[u8], next_offset: u64) -> bool {
    let Ok(batch) = Batch::parse_stored(bytes, Dialect::V0_12_2, Integrity::Full, 0) else {
        return false;
    };
    let base_offset = batch.header().base_offset.get();
    base_offset >= next_offset
        && base_offset
            .checked_add(u64::from(batch.message_count()))
            .is_some()
        && check_deltas(&batch).is_ok()
}

/// Stored records number their frames 0, 1, 2, … so that offsets are dense.
pub fn check_deltas(batch: &Batch<'_>) -> Result<(), StopReason> {
    for (index, message) in (0_u32..).zip(batch.messages()) {
        let found = message.header.offset_delta.get();
        if found != index {
            let record_offset = batch.header().base_offset.get();
            return Err(StopReason::OffsetDelta {
                record_offset,
                index,
                found,
            });
        }
    }
    Ok(())
}

fn classify(error: DecodeError, available: usize) -> StopReason {
    match error.kind {
        DecodeErrorKind::UnexpectedEnd {
            needed,
            available: have,
        } if error.subject == Subject::BatchFrame => StopReason::Torn {
            needed: needed as u64,
            available: have.min(available) as u64,
        },
        DecodeErrorKind::InvalidLength { length, .. } if error.subject == Subject::BatchFrame => {
            if length > available as u64 && length <= STORED_RECORD_SIZE_MAX as u64 {
                StopReason::Torn {
                    needed: length,
                    available: available as u64,
                }
            } else {
                StopReason::Invalid(error)
            }
        }
        _ => StopReason::Invalid(error),
    }
}

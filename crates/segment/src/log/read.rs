//! Reading: from an offset, a timestamp, the first or the last N messages, bounded by a
//! message count and a byte budget. Every record read from disk is validated before it is
//! returned: its layout and batch checksum always (so the offsets and lengths a read relies
//! on are the ones written), every message checksum too with
//! [`LogConfig::validate_checksum`](super::LogConfig). A record that fails is never served:
//! a read ends before it, or skips it as a gap when it starts there ([`ReadError::Corrupt`]
//! only when even that fails).

use std::path::PathBuf;

use proto::batch::{BATCH_HEADER_SIZE, Batch, Integrity, batch_checksum};
use proto::{DecodeError, DecodeErrorKind, Dialect};

use crate::format::index::{lookup_offset, lookup_time};
use crate::storage::{Storage, StorageFile};

use super::PartitionLog;
use super::error::ReadError;
use super::segment::Segment;

/// Largest single read issued against a segment, so a poll with a huge budget still reads
/// in bounded steps.
const READ_CHUNK_BYTES_MAX: u64 = 8 << 20;

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadStart {
    Offset(u64),
    /// The first message stamped at or after this time (µs).
    Timestamp(u64),
    First,
    /// The last N messages.
    Last(u32),
}

/// The records a read returns, back to back as a poll reply carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records {
    pub bytes: Vec<u8>,
    pub messages_count: u32,
    /// Offset of the last returned message.
    pub last_offset: Option<u64>,
    /// The byte budget, not the count or the end of the log, ended the read: waiting for
    /// more messages cannot make this reply bigger.
    pub byte_budget_reached: bool,
    /// The read met a damaged record (its file and byte): it stopped there after the valid
    /// records before it, or, starting at it, skipped its offsets as a gap; the damage is
    /// the caller's to quarantine.
    pub damage: Option<(PathBuf, u64)>,
}

impl<S: Storage> PartitionLog<S> {
    /// Reads at most `count` messages from `start`, stopping before a record that would take
    /// the reply past `max_bytes` — except the first, which is always returned whole.
    pub async fn read(
        &self,
        start: ReadStart,
        count: u32,
        max_bytes: u64,
    ) -> Result<Records, ReadError> {
        let mut records = Records::default();
        let Some(from) = self.resolve(start) else {
            return Ok(records);
        };
        let first_segment = self
            .segments
            .partition_point(|segment| segment.next_offset <= from);
        let mut cursor = from;
        let integrity = if self.config.validate_checksum {
            Integrity::Full
        } else {
            Integrity::LayoutOnly
        };
        let (mut index, mut skipped) = (first_segment, 0);
        while let Some(segment) = self.segments.get(index) {
            if records.messages_count >= count {
                break;
            }
            if segment.is_empty() {
                index += 1;
                continue;
            }
            let want = (count, max_bytes);
            match read_segment(segment, &mut cursor, want, integrity, &mut records).await {
                Ok(true) => break,
                Ok(false) => index += 1,
                // Only a read that has nothing yet fails (records before damage are served
                // and end it): the damaged record is skipped as a gap, as FORMAT.md §7
                // promises, so consumers are not stopped at it for good. A read skips at
                // most `SKIPPED_RECORDS_MAX` records, so one over a ruined segment stays
                // bounded.
                Err(ReadError::Corrupt {
                    path,
                    position,
                    source,
                }) => {
                    let next =
                        skip_past(segment, position).filter(|_| skipped < SKIPPED_RECORDS_MAX);
                    log::error!(
                        "partition {}: the stored record at byte {position} of {} is invalid \
                         ({source}); reads skip its offsets {cursor}..{}",
                        self.directory.display(),
                        path.display(),
                        next.map_or_else(|| "?".to_owned(), |next| next.to_string())
                    );
                    let Some(next) = next else {
                        return Err(ReadError::Corrupt {
                            path,
                            position,
                            source,
                        });
                    };
                    skipped += 1;
                    records.damage = Some((path, position));
                    cursor = next;
                    if next >= segment.next_offset {
                        index += 1;
                    }
                }
                Err(other) => return Err(other),
            }
        }
        Ok(records)
    }

    /// The first offset to read, or `None` when nothing at or after `start` is stored.
    fn resolve(&self, start: ReadStart) -> Option<u64> {
        let next = self.next_offset();
        let first = self.first_offset();
        let from = match start {
            ReadStart::Offset(offset) => offset.max(first),
            ReadStart::First => first,
            ReadStart::Last(count) => next.saturating_sub(u64::from(count)).max(first),
            ReadStart::Timestamp(time) => self.offset_at_time(time)?,
        };
        (from < next).then_some(from)
    }

    /// The `base_timestamp` of the stored record holding `offset` (the time its batch was
    /// appended), or `None` when `offset` is not stored.
    pub fn timestamp_of(&self, offset: u64) -> Option<u64> {
        if offset < self.first_offset() || offset >= self.next_offset() {
            return None;
        }
        let index = self
            .segments
            .partition_point(|segment| segment.next_offset <= offset);
        let segment = self.segments.get(index)?;
        let relative = u32::try_from(offset.checked_sub(segment.start_offset)?).ok()?;
        // The last entry starting at or before `offset` is the record holding it.
        let entry = segment
            .entries
            .partition_point(|entry| entry.relative_offset <= relative)
            .checked_sub(1)?;
        segment.entries.get(entry).map(|entry| entry.timestamp)
    }

    fn offset_at_time(&self, time: u64) -> Option<u64> {
        let segment = self
            .segments
            .iter()
            .find(|segment| !segment.is_empty() && segment.last_timestamp >= time)?;
        let entry = segment.entries[lookup_time(&segment.entries, time)?];
        Some(segment.start_offset + u64::from(entry.relative_offset))
    }
}

/// Damaged records one read skips before it gives up with the error.
const SKIPPED_RECORDS_MAX: u32 = 64;

/// The first offset after the record that starts at byte `position` of `segment`, from its
/// index (`None` when no indexed record starts there).
fn skip_past<F>(segment: &Segment<F>, position: u64) -> Option<u64> {
    let at = segment
        .entries
        .binary_search_by_key(&position, |entry| u64::from(entry.position))
        .ok()?;
    let next = segment
        .entries
        .get(at + 1)
        .map_or(segment.next_offset, |entry| {
            segment.start_offset + u64::from(entry.relative_offset)
        });
    Some(next)
}

/// Reads records of one segment from `cursor` on; returns `true` once the count or byte
/// budget is used up.
async fn read_segment<F: StorageFile>(
    segment: &Segment<F>,
    cursor: &mut u64,
    (count, max_bytes): (u32, u64),
    integrity: Integrity,
    records: &mut Records,
) -> Result<bool, ReadError> {
    let relative = u32::try_from(cursor.saturating_sub(segment.start_offset)).unwrap_or(u32::MAX);
    let mut entry = lookup_offset(&segment.entries, relative).unwrap_or(0);
    while entry < segment.entries.len() {
        let wanted_end = *cursor + u64::from(count.saturating_sub(records.messages_count));
        let end_entry = run_end(segment, entry, max_bytes, wanted_end);
        let first_entry = entry;
        let position = u64::from(segment.entries[first_entry].position);
        let end = segment
            .entries
            .get(end_entry)
            .map_or(segment.size_bytes, |next| u64::from(next.position));
        let length = usize::try_from(end - position).unwrap_or(usize::MAX);
        let chunk = crate::storage::read_exact_at(&segment.log, position, length)
            .await
            .map_err(|source| ReadError::Io {
                path: segment.paths.log.clone(),
                source,
            })?;
        let want = (count, max_bytes);
        if take_records(segment, chunk, (position, integrity), cursor, want, records)? {
            return Ok(true);
        }
        entry = end_entry;
    }
    Ok(false)
}

/// The entry after the last record of a run starting at `first` that fits one read: within
/// the byte budget, and no further than the record holding the last wanted offset
/// (`wanted_end` is exclusive), so a 1000-message poll never reads megabytes it drops.
fn run_end<F>(segment: &Segment<F>, first: usize, max_bytes: u64, wanted_end: u64) -> usize {
    let start = u64::from(segment.entries[first].position);
    let limit = max_bytes.min(READ_CHUNK_BYTES_MAX);
    let mut end = first + 1;
    while end < segment.entries.len() {
        let next_base = segment.start_offset + u64::from(segment.entries[end].relative_offset);
        if next_base >= wanted_end {
            break;
        }
        let after = segment
            .entries
            .get(end + 1)
            .map_or(segment.size_bytes, |entry| u64::from(entry.position));
        if after - start > limit {
            break;
        }
        end += 1;
    }
    end
}

/// What a read keeps of one record of a chunk.
#[derive(Debug)]
enum Kept {
    /// The whole record: `length` bytes from `start` of the chunk.
    Whole { start: usize, length: usize },
    /// Some of its messages behind their own batch header.
    Sliced(Vec<u8>),
}

/// The records taken from one chunk so far, not yet in the read's bytes.
#[derive(Debug, Default)]
struct Taken {
    kept: Vec<Kept>,
    /// Bytes of the reply with these records: the read's bytes plus every kept piece.
    length: u64,
}

/// Validates the records in `chunk` and adds what the read wants of them. When the read is
/// still empty and wants every record of the chunk whole (a poll of whole batches, the usual
/// case), the chunk itself becomes the read's bytes: nothing is copied.
fn take_records<F>(
    segment: &Segment<F>,
    chunk: Vec<u8>,
    (position, integrity): (u64, Integrity),
    cursor: &mut u64,
    want: (u32, u64),
    records: &mut Records,
) -> Result<bool, ReadError> {
    let mut taken = Taken {
        kept: Vec::new(),
        length: records.bytes.len() as u64,
    };
    let mut rest = &chunk[..];
    let mut at = position;
    let mut done = false;
    while !rest.is_empty() {
        let offset = usize::try_from(at).unwrap_or(usize::MAX);
        let (batch, remaining) = match parse_stored(rest, integrity, offset) {
            Ok(parsed) => parsed,
            // Records before the damage are served; the read ends at it.
            Err(_) if records.messages_count > 0 || !taken.kept.is_empty() => {
                records.damage = Some((segment.paths.log.clone(), at));
                done = true;
                break;
            }
            Err(source) => {
                return Err(ReadError::Corrupt {
                    path: segment.paths.log.clone(),
                    position: at,
                    source,
                });
            }
        };
        let start = to_usize(at - position);
        at += batch.as_bytes().len() as u64;
        rest = remaining;
        if push_record(&batch, start, cursor, want, records, &mut taken) {
            done = true;
            break;
        }
    }
    keep(records, chunk, taken.kept);
    Ok(done)
}

/// Splits the stored record at the start of `rest` off and validates it: with
/// `Integrity::Full` completely; with `LayoutOnly` its layout and batch checksum, which covers
/// the header (offsets, lengths, counts) and every message's checksum but no payload byte.
fn parse_stored(
    rest: &[u8],
    integrity: Integrity,
    offset: usize,
) -> Result<(Batch<'_>, &[u8]), DecodeError> {
    let (batch, remaining) = Batch::parse_prefix_stored(rest, Dialect::V0_12_2, integrity, offset)?;
    let header = batch.header();
    if integrity == Integrity::LayoutOnly
        && batch_checksum(header, batch.frames()) != header.batch_checksum.get()
    {
        let field_offset = offset.saturating_add(40);
        let kind = DecodeErrorKind::BatchChecksum;
        return Err(DecodeError::new("batch.batch_checksum", field_offset, kind));
    }
    Ok((batch, remaining))
}

/// Moves `chunk` into the empty read when `kept` is all of it, whole and in order; copies
/// the kept pieces otherwise.
fn keep(records: &mut Records, chunk: Vec<u8>, kept: Vec<Kept>) {
    let mut covered = 0;
    let all_whole = kept.iter().all(|piece| match piece {
        Kept::Whole { start, length } if *start == covered => {
            covered += length;
            true
        }
        _ => false,
    });
    if records.bytes.is_empty() && all_whole && covered == chunk.len() {
        records.bytes = chunk;
        return;
    }
    for piece in kept {
        match piece {
            Kept::Whole { start, length } => {
                records
                    .bytes
                    .extend_from_slice(&chunk[start..start + length]);
            }
            Kept::Sliced(bytes) => records.bytes.extend_from_slice(&bytes),
        }
    }
}

/// Takes the wanted part of one record (at `start` of its chunk); returns `true` when the
/// read is complete. `want` is the read's message count and byte budget.
fn push_record(
    batch: &Batch<'_>,
    start: usize,
    cursor: &mut u64,
    (count, max_bytes): (u32, u64),
    records: &mut Records,
    taken: &mut Taken,
) -> bool {
    let base = batch.header().base_offset.get();
    let stored = batch.message_count();
    let last = base + u64::from(stored);
    if last <= *cursor {
        return false;
    }
    let skip = cursor.saturating_sub(base);
    let take = u64::from(count - records.messages_count).min(u64::from(stored) - skip);
    let whole = skip == 0 && take == u64::from(stored);
    let length = if whole {
        batch.as_bytes().len()
    } else {
        sliced_length(batch, skip, take)
    };
    let over_budget = taken.length + length as u64 > max_bytes;
    if over_budget && taken.length > 0 {
        records.byte_budget_reached = true;
        return true;
    }
    if whole {
        taken.kept.push(Kept::Whole { start, length });
    } else if let Some(slice) = batch.slice(to_usize(skip), to_usize(take)) {
        let mut bytes = Vec::with_capacity(length);
        bytes.extend_from_slice(&slice.header);
        bytes.extend_from_slice(slice.frames);
        taken.kept.push(Kept::Sliced(bytes));
    }
    taken.length += length as u64;
    let taken_count = u32::try_from(take).unwrap_or(u32::MAX);
    records.messages_count += taken_count;
    *cursor = base + skip + take;
    records.last_offset = Some(*cursor - 1);
    records.byte_budget_reached |= over_budget;
    records.messages_count >= count || over_budget
}

fn sliced_length(batch: &Batch<'_>, skip: u64, take: u64) -> usize {
    batch
        .messages()
        .skip(to_usize(skip))
        .take(to_usize(take))
        .map(|message| message.frame_length())
        .sum::<usize>()
        + BATCH_HEADER_SIZE
}

fn to_usize(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod keep_tests {
    use super::{Kept, Records, keep};

    #[test]
    fn a_chunk_taken_whole_becomes_the_read_without_a_copy() {
        let chunk = vec![1, 2, 3, 4, 5];
        let address = chunk.as_ptr();
        let mut records = Records::default();
        let kept = vec![
            Kept::Whole {
                start: 0,
                length: 2,
            },
            Kept::Whole {
                start: 2,
                length: 3,
            },
        ];
        keep(&mut records, chunk, kept);
        assert_eq!(records.bytes, [1, 2, 3, 4, 5]);
        assert_eq!(records.bytes.as_ptr(), address, "the chunk itself, moved");
    }

    #[test]
    fn partial_or_later_chunks_are_copied_piece_by_piece() {
        let mut records = Records::default();
        let kept = vec![
            Kept::Sliced(vec![9, 9]),
            Kept::Whole {
                start: 3,
                length: 2,
            },
        ];
        keep(&mut records, vec![1, 2, 3, 4, 5], kept);
        assert_eq!(records.bytes, [9, 9, 4, 5]);
        let whole = vec![Kept::Whole {
            start: 0,
            length: 2,
        }];
        keep(&mut records, vec![7, 8], whole);
        assert_eq!(
            records.bytes,
            [9, 9, 4, 5, 7, 8],
            "appended to a read under way"
        );
        let mut short = Records::default();
        let head = vec![Kept::Whole {
            start: 0,
            length: 1,
        }];
        keep(&mut short, vec![6, 7], head);
        assert_eq!(short.bytes, [6], "only what was kept");
    }
}

//! The entry point of the `segment_scan` fuzz target (`fuzz/fuzz_targets/`) and its seeded
//! replay test, which runs the committed corpus on every `cargo test`.
//!
//! [`fuzz_scan`] must never panic. It checks the scan's own promises: the valid prefix is
//! tiled exactly by the records it reports, scans clean on its own, and a chunked scan (as
//! recovery runs it) finds the same records.

use proto::batch::{BATCH_HEADER_SIZE, FRAME_HEADER_SIZE, message_checksum, stamp};

use crate::format::scan::{Scan, StopReason, scan, scan_more};

/// Chunk sizes the chunked scan is compared at: smaller than a header, about a record, large.
const CHUNKS: [usize; 3] = [100, 300, 4096];

/// The first 8 bytes are the segment's start offset (little-endian), the rest its `.log`.
/// The log is scanned as it is, then again with every whole record's numbering and
/// checksums fixed, so the checks behind the checksums are reached too.
pub fn fuzz_scan(bytes: &[u8]) {
    let Some((start, log)) = bytes.split_first_chunk::<8>() else {
        return;
    };
    let start = u64::from_le_bytes(*start);
    check_scan(log, start);
    let mut fixed = log.to_vec();
    fix_records(&mut fixed, start);
    check_scan(&fixed, start);
}

fn check_scan(log: &[u8], start: u64) {
    let whole = scan(log, start);
    let valid = usize::try_from(whole.valid_length).unwrap_or(usize::MAX);
    assert!(valid <= log.len(), "the valid prefix lies inside the log");
    assert_eq!(whole.stop == StopReason::End, valid == log.len());
    let mut position = 0_u64;
    let mut offset = start;
    for record in &whole.records {
        assert_eq!(
            u64::from(record.entry.position),
            position,
            "records tile the log"
        );
        let relative = offset
            .checked_sub(start)
            .and_then(|r| u32::try_from(r).ok());
        assert_eq!(
            Some(record.entry.relative_offset),
            relative,
            "offsets are dense"
        );
        position = position.saturating_add(u64::from(record.length));
        offset = offset.saturating_add(u64::from(record.message_count));
    }
    assert_eq!(position, whole.valid_length);
    assert_eq!(offset, whole.next_offset);
    let prefix = scan(log.get(..valid).unwrap_or_default(), start);
    assert_eq!(prefix.stop, StopReason::End, "the valid prefix scans clean");
    assert_eq!(prefix.records, whole.records);
    for chunk in CHUNKS {
        check_chunked(log, &whole, chunk);
    }
}

/// Scans `log` in chunks of `chunk` bytes the way recovery reads a file (`log/open.rs`)
/// and requires the same outcome; only a torn tail's count of available bytes may differ.
fn check_chunked(log: &[u8], whole: &Scan, chunk: usize) {
    let mut chunked = Scan::new(whole.start_offset);
    let mut want = chunk;
    loop {
        let from = usize::try_from(chunked.valid_length).unwrap_or(usize::MAX);
        let Some(rest) = log.get(from..).filter(|rest| !rest.is_empty()) else {
            break;
        };
        scan_more(&mut chunked, rest.get(..want).unwrap_or(rest));
        match chunked.stop {
            StopReason::End => want = chunk,
            StopReason::Torn { needed, .. }
                if needed <= u64::try_from(rest.len()).unwrap_or(u64::MAX) =>
            {
                want = usize::try_from(needed).unwrap_or(usize::MAX).max(chunk);
            }
            _ => break,
        }
    }
    assert_eq!(chunked.records, whole.records, "chunk {chunk}");
    assert_eq!(chunked.valid_length, whole.valid_length, "chunk {chunk}");
    assert_eq!(chunked.next_offset, whole.next_offset, "chunk {chunk}");
    assert!(
        same_stop(&chunked.stop, &whole.stop),
        "chunk {chunk}: {:?} against {:?}",
        chunked.stop,
        whole.stop
    );
}

/// Whether two scans stopped for the same reason at the same place. What a chunk held may
/// show in the details: the bytes a torn record had, the bounds of a refused length.
fn same_stop(chunked: &StopReason, whole: &StopReason) -> bool {
    match (chunked, whole) {
        (StopReason::Torn { .. }, StopReason::Torn { .. }) => true,
        (StopReason::Invalid(chunked), StopReason::Invalid(whole)) => {
            (chunked.field, chunked.offset) == (whole.field, whole.offset)
        }
        _ => chunked == whole,
    }
}

/// Gives every whole record of `log` dense offsets from `start`, frames numbered from 0,
/// a message count matching its frames, and correct checksums.
fn fix_records(log: &mut [u8], start: u64) {
    let mut position = 0_usize;
    let mut next_offset = start;
    while let Some(rest) = log.get_mut(position..) {
        let Some(length) = declared_length(rest) else {
            break;
        };
        let Some(record) = rest.get_mut(..length) else {
            break;
        };
        let count = fix_frames(record);
        if let Some(field) = record.get_mut(48..52) {
            field.copy_from_slice(&count.to_le_bytes());
        }
        // The record is at least a header long, which is all `stamp` needs.
        let _ = stamp(record, next_offset, 0);
        next_offset = next_offset.saturating_add(u64::from(count));
        position = position.saturating_add(length);
    }
}

/// The record length a batch header declares, when it is at least a header.
fn declared_length(record: &[u8]) -> Option<usize> {
    let field = record.get(32..40)?;
    let mut length = [0_u8; 8];
    length.copy_from_slice(field);
    let length = usize::try_from(u64::from_le_bytes(length)).ok()?;
    (length >= BATCH_HEADER_SIZE).then_some(length)
}

/// Numbers the frames that fit and recomputes their checksums; returns how many there are.
fn fix_frames(record: &mut [u8]) -> u32 {
    let mut frames = record.get_mut(BATCH_HEADER_SIZE..).unwrap_or_default();
    let mut index = 0_u32;
    while let Some(header) = frames.get(..FRAME_HEADER_SIZE) {
        let field = |at: usize| {
            let bytes = header.get(at..at + 4).unwrap_or(&[0; 4]);
            usize::try_from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
                .unwrap_or(usize::MAX)
        };
        let length = FRAME_HEADER_SIZE
            .saturating_add(field(32))
            .saturating_add(field(36));
        let Some((frame, rest)) = frames.split_at_mut_checked(length) else {
            break;
        };
        if let Some(delta) = frame.get_mut(24..28) {
            delta.copy_from_slice(&index.to_le_bytes());
        }
        let checksum = message_checksum(frame.get(8..).unwrap_or_default());
        if let Some(slot) = frame.get_mut(..8) {
            slot.copy_from_slice(&checksum.to_le_bytes());
        }
        index = index.saturating_add(1);
        frames = rest;
    }
    index
}

#[cfg(test)]
mod tests;

//! The offset index (8-byte entries) and the time index (12-byte entries), `FORMAT.md` §3–4.
//!
//! Entries are kept in memory as one `Vec<IndexEntry>` per segment; the two files are its
//! serialisations. Lookups are binary searches over that vector.

use alloc::vec::Vec;

/// Bytes of one `.index` entry.
pub const OFFSET_ENTRY_SIZE: usize = 8;
/// Bytes of one `.timeindex` entry.
pub const TIME_ENTRY_SIZE: usize = 12;

/// What both indexes record about one batch record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// `base_offset − segment start`.
    pub relative_offset: u32,
    /// Byte position of the record in the `.log`.
    pub position: u32,
    /// The record's `base_timestamp`.
    pub timestamp: u64,
}

impl IndexEntry {
    pub fn offset_bytes(&self) -> [u8; OFFSET_ENTRY_SIZE] {
        let mut bytes = [0; OFFSET_ENTRY_SIZE];
        bytes[..4].copy_from_slice(&self.relative_offset.to_le_bytes());
        bytes[4..].copy_from_slice(&self.position.to_le_bytes());
        bytes
    }

    pub fn time_bytes(&self) -> [u8; TIME_ENTRY_SIZE] {
        let mut bytes = [0; TIME_ENTRY_SIZE];
        bytes[..4].copy_from_slice(&self.relative_offset.to_le_bytes());
        bytes[4..].copy_from_slice(&self.timestamp.to_le_bytes());
        bytes
    }
}

/// Parses both index files into entries; `None` when either is not a whole number of
/// entries, they disagree on count or relative offsets, or offsets/positions do not increase.
/// The caller rebuilds from the `.log` on `None`.
pub fn parse_indexes(offsets: &[u8], times: &[u8]) -> Option<Vec<IndexEntry>> {
    if !offsets.len().is_multiple_of(OFFSET_ENTRY_SIZE)
        || !times.len().is_multiple_of(TIME_ENTRY_SIZE)
    {
        return None;
    }
    let count = offsets.len() / OFFSET_ENTRY_SIZE;
    if times.len() / TIME_ENTRY_SIZE != count {
        return None;
    }
    let mut entries: Vec<IndexEntry> = Vec::with_capacity(count);
    for (offset, time) in offsets
        .chunks_exact(OFFSET_ENTRY_SIZE)
        .zip(times.chunks_exact(TIME_ENTRY_SIZE))
    {
        let entry = IndexEntry {
            relative_offset: u32::from_le_bytes(offset[..4].try_into().ok()?),
            position: u32::from_le_bytes(offset[4..].try_into().ok()?),
            timestamp: u64::from_le_bytes(time[4..].try_into().ok()?),
        };
        if u32::from_le_bytes(time[..4].try_into().ok()?) != entry.relative_offset {
            return None;
        }
        if let Some(previous) = entries.last()
            && (previous.relative_offset >= entry.relative_offset
                || previous.position >= entry.position
                || previous.timestamp > entry.timestamp)
        {
            return None;
        }
        entries.push(entry);
    }
    Some(entries)
}

/// Serialises entries into the two index files' bytes.
pub fn serialize(entries: &[IndexEntry]) -> (Vec<u8>, Vec<u8>) {
    let mut offsets = Vec::with_capacity(entries.len() * OFFSET_ENTRY_SIZE);
    let mut times = Vec::with_capacity(entries.len() * TIME_ENTRY_SIZE);
    for entry in entries {
        offsets.extend_from_slice(&entry.offset_bytes());
        times.extend_from_slice(&entry.time_bytes());
    }
    (offsets, times)
}

/// The index of the entry whose record may hold `relative_offset`: the last entry at or
/// below it. `None` when the offset precedes the first entry or there are none.
pub fn lookup_offset(entries: &[IndexEntry], relative_offset: u32) -> Option<usize> {
    let after = entries.partition_point(|entry| entry.relative_offset <= relative_offset);
    after.checked_sub(1)
}

/// The index of the first entry with a timestamp at or after `timestamp`.
pub fn lookup_time(entries: &[IndexEntry], timestamp: u64) -> Option<usize> {
    let first = entries.partition_point(|entry| entry.timestamp < timestamp);
    (first < entries.len()).then_some(first)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn entries_strategy() -> impl Strategy<Value = Vec<IndexEntry>> {
        proptest::collection::vec((1..50_u32, 1..5000_u32, 0..3_u64), 0..200).prop_map(|steps| {
            let (mut offset, mut position, mut time) = (0_u32, 0_u32, 1_000_u64);
            steps
                .into_iter()
                .map(|(count, length, delta)| {
                    let entry = IndexEntry {
                        relative_offset: offset,
                        position,
                        timestamp: time,
                    };
                    offset += count;
                    position += length + 256;
                    time += delta;
                    entry
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn offset_lookup_matches_linear_scan(
            entries in entries_strategy(),
            target in 0..12_000_u32,
        ) {
            let linear = entries.iter().rposition(|entry| entry.relative_offset <= target);
            prop_assert_eq!(lookup_offset(&entries, target), linear);
        }

        #[test]
        fn time_lookup_matches_linear_scan(
            entries in entries_strategy(),
            target in 900..1_500_u64,
        ) {
            let linear = entries.iter().position(|entry| entry.timestamp >= target);
            prop_assert_eq!(lookup_time(&entries, target), linear);
        }

        #[test]
        fn files_round_trip(entries in entries_strategy()) {
            let (offsets, times) = serialize(&entries);
            prop_assert_eq!(parse_indexes(&offsets, &times), Some(entries.clone()));
            if !offsets.is_empty() {
                prop_assert_eq!(parse_indexes(&offsets[..offsets.len() - 1], &times), None);
                let short_times = &times[..times.len() - TIME_ENTRY_SIZE];
                prop_assert_eq!(parse_indexes(&offsets, short_times), None);
            }
        }
    }
}

//! The on-disk format of `FORMAT.md`, as plain functions over byte slices: no I/O, no `std`
//! beyond `alloc`, so recovery, tests and fuzzers all call the same code.

use alloc::string::String;

pub mod consumer_offset;
pub mod index;
pub mod scan;
pub mod state;

/// The format version this code writes (`FORMAT.md` §10).
pub const FORMAT_VERSION: u32 = 2;
/// The oldest format version this code reads: version 1 differs only in holding no sealed
/// records, so it is read as it is.
pub const FORMAT_VERSION_MIN: u32 = 1;

/// Largest segment a `u32` index position can address.
pub const SEGMENT_SIZE_MAX: u64 = u32::MAX as u64;

/// The file stem of the segment starting at `start_offset`: 20 zero-padded digits.
pub fn segment_stem(start_offset: u64) -> String {
    alloc::format!("{start_offset:020}")
}

/// The start offset a segment file stem names, if it is one.
pub fn parse_segment_stem(stem: &str) -> Option<u64> {
    (stem.len() == 20 && stem.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// The start offsets of the segments among a directory's file `names` (their `.log` files),
/// ascending.
pub fn segment_starts<S: AsRef<str>>(names: &[S]) -> Vec<u64> {
    let mut starts: Vec<u64> = names
        .iter()
        .filter_map(|name| name.as_ref().strip_suffix(".log"))
        .filter_map(parse_segment_stem)
        .collect();
    starts.sort_unstable();
    starts
}

/// The index files among `names` whose segment has no `.log` in `starts` (as
/// [`segment_starts`] gives them): a deletion cut short (the `.log` goes first) or a removed
/// file.
pub fn indexes_without_log<'n, S: AsRef<str>>(names: &'n [S], starts: &[u64]) -> Vec<&'n str> {
    names
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| {
            let stem = name
                .strip_suffix(".index")
                .or_else(|| name.strip_suffix(".timeindex"));
            stem.and_then(parse_segment_stem)
                .is_some_and(|start| starts.binary_search(&start).is_err())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_round_trip_and_sort() {
        assert_eq!(segment_stem(4096), "00000000000000004096");
        assert_eq!(parse_segment_stem(&segment_stem(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_segment_stem("123"), None);
        assert_eq!(parse_segment_stem("0000000000000000409x"), None);
        assert!(segment_stem(9) < segment_stem(10));
    }
}

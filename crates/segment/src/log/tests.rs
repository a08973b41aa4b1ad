//! Log tests on the in-memory storage: appends and reads, segment rolls, reopen, crashes,
//! torn writes at every byte of the last record, bit flips and index rebuilds.

use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use proto::Dialect;
use proto::batch::{Batch, Integrity, OutgoingMessage, Records as RecordIter, encode_batch};

use super::*;
use crate::format::scan::StopReason;
use crate::storage::Storage;
use crate::storage::memory::{CrashMode, MemoryStorage};

/// Runs a future whose every await completes at once (the memory storage never waits).
pub(super) fn run<T>(future: impl Future<Output = T>) -> T {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut context) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("memory storage futures are always ready"),
    }
}

pub(super) fn directory() -> PathBuf {
    PathBuf::from("/data/streams/0/topics/0/partitions/0")
}

pub(super) fn batch(messages: usize, payload: &[u8]) -> Vec<u8> {
    let outgoing: Vec<_> = (0..messages)
        .map(|index| OutgoingMessage {
            id: index as u128 + 1,
            origin_timestamp: 1_000,
            payload,
            user_headers: &[],
        })
        .collect();
    let mut bytes = Vec::new();
    encode_batch(&outgoing, None, &mut bytes).unwrap();
    bytes
}

pub(super) fn config(segment_size_bytes: u64, durability: Durability) -> LogConfig {
    LogConfig {
        segment_size_bytes,
        durability,
        ..LogConfig::default()
    }
}

pub(super) fn open(
    storage: &MemoryStorage,
    config: LogConfig,
) -> (PartitionLog<MemoryStorage>, RecoveryReport) {
    run(PartitionLog::open(storage.clone(), &directory(), config)).unwrap()
}

pub(super) fn append(log: &mut PartitionLog<MemoryStorage>, bytes: Vec<u8>, now: u64) -> Appended {
    let (result, _) = run(log.append(bytes, now));
    let appended = result.unwrap();
    if appended.needs_sync {
        run(log.sync()).unwrap();
    }
    // As the partition task does after answering.
    run(log.sync_if_due(now));
    appended
}

/// Offsets of every message in a read's records.
pub(super) fn offsets(records: &Records) -> Vec<u64> {
    RecordIter::new(&records.bytes, Dialect::V0_12_2, Integrity::Full, 0)
        .flat_map(|batch| {
            let batch = batch.unwrap();
            let base = batch.header().base_offset.get();
            batch
                .messages()
                .map(move |m| base + u64::from(m.header.offset_delta.get()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn appends_and_reads_across_segments() {
    let storage = MemoryStorage::new();
    let (mut log, report) = open(&storage, config(2_000, Durability::Replicated));
    assert_eq!(report.next_offset, 0);
    for round in 0..20 {
        let appended = append(&mut log, batch(3, b"payload"), 10 + round);
        assert_eq!(appended.base_offset, round * 3);
    }
    assert!(log.segments().count() > 2, "small segments roll");
    assert_eq!(log.next_offset(), 60);
    let all = run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap();
    assert_eq!(offsets(&all), (0..60).collect::<Vec<_>>());
    let middle = run(log.read(ReadStart::Offset(7), 10, u64::MAX)).unwrap();
    assert_eq!(offsets(&middle), (7..17).collect::<Vec<_>>());
    assert_eq!(middle.last_offset, Some(16));
    let last = run(log.read(ReadStart::Last(4), 100, u64::MAX)).unwrap();
    assert_eq!(offsets(&last), (56..60).collect::<Vec<_>>());
    let by_time = run(log.read(ReadStart::Timestamp(15), 3, u64::MAX)).unwrap();
    assert_eq!(offsets(&by_time), vec![15, 16, 17]);
    let beyond = run(log.read(ReadStart::Offset(60), 10, u64::MAX)).unwrap();
    assert_eq!(beyond.messages_count, 0);
}

/// Every stored offset maps to its record's append time, across segments; an offset past
/// the end or removed with its segment has none.
#[test]
fn each_offset_has_its_records_append_time() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(2_000, Durability::Replicated));
    for round in 0..20 {
        append(&mut log, batch(3, b"payload"), 100 + round);
    }
    assert!(log.segments().count() > 2, "small segments roll");
    for offset in 0..60 {
        assert_eq!(
            log.timestamp_of(offset),
            Some(100 + offset / 3),
            "offset {offset}"
        );
    }
    assert_eq!(log.timestamp_of(60), None);
    assert_eq!(log.timestamp_of(u64::MAX), None);
    run(log.delete_oldest_segments(1)).unwrap();
    let first = log.first_offset();
    assert!(first > 0);
    assert_eq!(log.timestamp_of(first - 1), None);
    assert_eq!(log.timestamp_of(first), Some(100 + first / 3));
}

#[test]
fn byte_budget_keeps_the_first_record_whole() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(1 << 20, Durability::Replicated));
    let record = batch(2, &[7; 100]);
    let length = record.len() as u64;
    for _ in 0..5 {
        append(&mut log, record.clone(), 1);
    }
    let small = run(log.read(ReadStart::First, 100, 10)).unwrap();
    assert_eq!(small.messages_count, 2);
    assert!(small.byte_budget_reached);
    let everything = run(log.read(ReadStart::First, 100, u64::MAX)).unwrap();
    assert!(!everything.byte_budget_reached);
    let two = run(log.read(ReadStart::First, 100, 2 * length)).unwrap();
    assert_eq!(two.messages_count, 4);
}

#[test]
fn reopen_after_clean_close_continues_exactly() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(1_500, Durability::Persisted));
    for _ in 0..10 {
        append(&mut log, batch(2, b"x"), 5);
    }
    run(log.close()).unwrap();
    storage.crash(CrashMode::DropUnsynced);
    let (log, report) = open(&storage, config(1_500, Durability::Persisted));
    assert!(report.clean);
    assert!(report.cuts.is_empty());
    assert_eq!(log.next_offset(), 20);
    let all = run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap();
    assert_eq!(offsets(&all), (0..20).collect::<Vec<_>>());
}

#[test]
fn persisted_appends_survive_power_loss_and_offsets_are_not_reused() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(1 << 20, Durability::Persisted));
    for _ in 0..5 {
        append(&mut log, batch(1, b"acked"), 5);
    }
    let (result, _) = run(log.append(batch(1, b"unacked"), 6));
    assert!(result.unwrap().needs_sync);
    storage.crash(CrashMode::DropUnsynced);
    let (mut log, report) = open(&storage, config(1 << 20, Durability::Persisted));
    assert!(!report.clean);
    let all = run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap();
    assert_eq!(offsets(&all), (0..5).collect::<Vec<_>>());
    let next = append(&mut log, batch(1, b"after"), 7).base_offset;
    assert!(
        next > 5,
        "offset 5 may have been handed out before the crash; got {next}"
    );
    let after = run(log.read(ReadStart::Offset(5), 10, u64::MAX)).unwrap();
    assert_eq!(offsets(&after), vec![next]);
}

#[test]
fn replicated_appends_survive_a_process_crash() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(1 << 20, Durability::Replicated));
    for _ in 0..7 {
        append(&mut log, batch(3, b"written"), 5);
    }
    storage.crash(CrashMode::ProcessOnly);
    let (log, report) = open(&storage, config(1 << 20, Durability::Replicated));
    assert!(report.cuts.is_empty());
    assert_eq!(
        log.next_offset(),
        21,
        "a crash within one boot keeps offsets dense"
    );
    assert_eq!(
        offsets(&run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap()).len(),
        21
    );
}

#[test]
fn a_replicated_threshold_sync_waits_for_the_caller_not_the_append() {
    let storage = MemoryStorage::new();
    let mut every_four = config(1 << 20, Durability::Replicated);
    every_four.messages_required_to_save = 4;
    let (mut log, _) = open(&storage, every_four);
    let before = storage.syncs();
    let (first, _) = run(log.append(batch(2, b"one"), 5));
    assert!(!first.unwrap().needs_sync);
    assert!(!log.sync_due(5), "2 of 4 messages");
    let (second, _) = run(log.append(batch(2, b"two"), 6));
    assert!(
        !second.unwrap().needs_sync,
        "Replicated acknowledges without a sync"
    );
    assert_eq!(storage.syncs(), before, "the append itself did not sync");
    assert!(log.sync_due(6));
    run(log.sync_if_due(6));
    assert_eq!(storage.syncs(), before + 1);
    assert!(!log.sync_due(6) && !log.has_unsynced());
    run(log.sync_if_due(6));
    assert_eq!(storage.syncs(), before + 1, "nothing due, nothing synced");
    storage.crash(CrashMode::DropUnsynced);
    let (log, _) = open(&storage, every_four);
    let kept = offsets(&run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap());
    assert_eq!(
        kept,
        [0, 1, 2, 3],
        "the threshold sync made both records durable"
    );
}

#[test]
fn the_message_count_buys_one_sync_per_interval_and_the_size_one_at_once() {
    let storage = MemoryStorage::new();
    let mut gated = config(1 << 20, Durability::Replicated);
    gated.messages_required_to_save = 2;
    gated.size_of_messages_required_to_save = 4096;
    gated.sync_interval_us = 1_000;
    let (mut log, _) = open(&storage, gated);
    let before = storage.syncs();
    run(log.append(batch(2, b"a"), 10)).0.unwrap();
    assert!(
        log.sync_due(10),
        "no sync started yet: the count starts one"
    );
    run(log.sync_if_due(10));
    assert_eq!(storage.syncs(), before + 1);
    run(log.append(batch(2, b"b"), 500)).0.unwrap();
    assert!(log.sync_wanted(), "the count is reached again");
    assert!(!log.sync_due(500), "within the interval of the last start");
    assert!(log.sync_due(1_010), "the interval is over");
    run(log.append(batch(1, &[7; 5000]), 600)).0.unwrap();
    assert!(log.sync_due(600), "the size threshold does not wait");
    run(log.sync_if_due(600));
    assert_eq!(storage.syncs(), before + 2);
    assert!(!log.sync_wanted() && !log.has_unsynced());
}

pub(super) fn log_path(start: u64) -> PathBuf {
    crate::layout::SegmentPaths::new(&directory(), start).log
}

/// A log of three synced records, and the bytes of its `.log`.
fn three_records(storage: &MemoryStorage) -> Vec<u8> {
    let (mut log, _) = open(storage, config(1 << 20, Durability::Persisted));
    for payload in [&b"first"[..], b"second", b"third!"] {
        append(&mut log, batch(2, payload), 9);
    }
    storage.contents(&log_path(0)).unwrap()
}

#[test]
fn torn_writes_at_every_byte_of_the_last_record_cut_exactly_that_record() {
    let reference = MemoryStorage::new();
    let bytes = three_records(&reference);
    let last_start = bytes.len() - batch(2, b"third!").len();
    for cut in last_start..bytes.len() {
        let storage = MemoryStorage::new();
        three_records(&storage);
        storage.replace(&log_path(0), bytes[..cut].to_vec());
        let (log, report) = open(&storage, config(1 << 20, Durability::Persisted));
        let all = run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap();
        assert_eq!(offsets(&all), (0..4).collect::<Vec<_>>(), "cut at {cut}");
        if cut > last_start {
            let reported = &report.cuts[0];
            assert_eq!(
                (reported.position, reported.bytes_removed),
                (last_start as u64, (cut - last_start) as u64)
            );
        } else {
            assert!(report.cuts.is_empty());
        }
        assert_eq!(storage.contents(&log_path(0)).unwrap(), bytes[..last_start]);
    }
}

#[test]
fn bit_flips_in_the_last_record_cut_exactly_that_record() {
    let reference = MemoryStorage::new();
    let bytes = three_records(&reference);
    let last_start = bytes.len() - batch(2, b"third!").len();
    for bit in (last_start * 8..bytes.len() * 8).step_by(7) {
        let storage = MemoryStorage::new();
        three_records(&storage);
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        storage.replace(&log_path(0), flipped);
        let (log, report) = open(&storage, config(1 << 20, Durability::Persisted));
        let all = run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap();
        assert_eq!(offsets(&all), (0..4).collect::<Vec<_>>(), "bit {bit}");
        assert_eq!(report.cuts.len(), 1, "bit {bit}");
        assert!(!matches!(report.cuts[0].reason, StopReason::End));
    }
}

/// Damage to the last record of a partition closed cleanly is not taken for a torn tail:
/// the close synced it, and nothing was appended since, so no crash explains it.
#[test]
fn damage_to_the_last_record_after_a_clean_close_quarantines_and_cuts_nothing() {
    let reference = MemoryStorage::new();
    let bytes = three_records(&reference);
    let last_start = bytes.len() - batch(2, b"third!").len();
    let flip = |bytes: &[u8], bit: usize| {
        let mut flipped = bytes.to_vec();
        flipped[bit / 8] ^= 1 << (bit % 8);
        flipped
    };
    let damaged = [
        flip(&bytes, last_start * 8 + 3),
        flip(&bytes, bytes.len() * 8 - 1),
        bytes[..bytes.len() - 1].to_vec(),
        bytes[..=last_start].to_vec(),
    ];
    for (case, contents) in damaged.into_iter().enumerate() {
        let storage = MemoryStorage::new();
        three_records(&storage);
        let (log, _) = open(&storage, config(1 << 20, Durability::Persisted));
        run(log.close()).unwrap();
        storage.replace(&log_path(0), contents.clone());
        let (mut log, report) = open(&storage, config(1 << 20, Durability::Persisted));
        assert!(report.clean, "case {case}");
        assert!(report.cuts.is_empty(), "case {case}");
        assert_eq!(report.damage.len(), 1, "case {case}");
        assert_eq!(report.damage[0].position, last_start as u64, "case {case}");
        assert_eq!(
            storage.contents(&log_path(0)).unwrap(),
            contents,
            "case {case}"
        );
        let all = run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap();
        assert_eq!(offsets(&all), (0..4).collect::<Vec<_>>(), "case {case}");
        let (refused, _) = run(log.append(batch(1, b"late"), 10));
        assert!(
            matches!(refused, Err(AppendError::Quarantined { .. })),
            "case {case}"
        );
    }
}

/// The same damage after an open that was not closed (a crash) is a torn tail and is cut.
#[test]
fn damage_to_the_last_record_after_a_crash_is_cut_even_after_an_earlier_clean_close() {
    let storage = MemoryStorage::new();
    let bytes = three_records(&storage);
    let last_start = bytes.len() - batch(2, b"third!").len();
    let (log, _) = open(&storage, config(1 << 20, Durability::Persisted));
    run(log.close()).unwrap();
    // Opened again and left without a close: the open marked the partition unclean.
    let (_log, _) = open(&storage, config(1 << 20, Durability::Persisted));
    storage.replace(&log_path(0), bytes[..bytes.len() - 1].to_vec());
    let (_log, report) = open(&storage, config(1 << 20, Durability::Persisted));
    assert!(!report.clean);
    assert!(report.damage.is_empty());
    assert_eq!(report.cuts.len(), 1);
    assert_eq!(storage.contents(&log_path(0)).unwrap(), bytes[..last_start]);
}

#[test]
fn lost_or_stale_indexes_are_rebuilt() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(1_000, Durability::Replicated));
    for _ in 0..12 {
        append(&mut log, batch(2, b"indexed"), 3);
    }
    run(log.close()).unwrap();
    let paths = crate::layout::SegmentPaths::new(&directory(), 0);
    storage.replace(&paths.index, vec![1, 2, 3]);
    storage.replace(&paths.time_index, Vec::new());
    let (log, report) = open(&storage, config(1_000, Durability::Replicated));
    assert!(report.rebuilt_indexes.contains(&0));
    let all = run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap();
    assert_eq!(offsets(&all), (0..24).collect::<Vec<_>>());
}

#[test]
fn retention_deletes_sealed_segments_only() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(1_000, Durability::Replicated));
    for round in 0..12 {
        append(&mut log, batch(2, b"retained"), 100 + round);
    }
    let segments: Vec<_> = log.segments().collect();
    let active = segments.last().unwrap().start_offset;
    assert!(!run(log.delete_segment(active)).unwrap());
    let deleted = run(log.delete_oldest_segments(2)).unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(log.first_offset(), segments[2].start_offset);
    let all = run(log.read(ReadStart::First, 1000, u64::MAX)).unwrap();
    assert_eq!(
        offsets(&all).first().copied(),
        Some(segments[2].start_offset)
    );
    assert!(storage.contents(&log_path(0)).is_none());
}

#[test]
fn persisted_group_commit_shares_one_sync() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(1 << 20, Durability::Persisted));
    let before = storage.syncs();
    for _ in 0..8 {
        let (result, _) = run(log.append(batch(1, b"g"), 1));
        assert!(result.unwrap().needs_sync);
    }
    run(log.sync()).unwrap();
    assert_eq!(storage.syncs() - before, 1);
}

#[test]
fn appends_refuse_misnumbered_frames() {
    let storage = MemoryStorage::new();
    let (mut log, _) = open(&storage, config(1 << 20, Durability::Replicated));
    let mut bytes = batch(2, b"x");
    let second_frame = 256 + 48 + 1;
    bytes[second_frame + 24] = 5;
    let (result, _) = run(log.append(bytes, 1));
    assert!(matches!(
        result,
        Err(AppendError::OffsetDelta { index: 1, found: 5 })
    ));
    assert!(Batch::parse(&batch(1, b"y"), Dialect::V0_12_2, Integrity::Full, 0).is_ok());
}

#[test]
fn chunked_scans_match_a_whole_scan_at_every_chunk_size() {
    let storage = MemoryStorage::new();
    let bytes = three_records(&storage);
    let whole = crate::format::scan::scan(&bytes, 0);
    let path = log_path(0);
    let file = run(storage.open(&path, false)).unwrap();
    for chunk in [
        1,
        7,
        100,
        300,
        400,
        u64::try_from(bytes.len()).unwrap(),
        1 << 20,
    ] {
        let chunked = run(open::scan_file(
            &file,
            &path,
            0,
            u64::try_from(bytes.len()).unwrap(),
            chunk,
        ))
        .unwrap();
        assert_eq!(chunked, whole, "chunk {chunk}");
    }
    for cut in [1, 255, 300, bytes.len() - 1] {
        storage.replace(&path, bytes[..cut].to_vec());
        let file = run(storage.open(&path, false)).unwrap();
        let expected = crate::format::scan::scan(&bytes[..cut], 0);
        let chunked = run(open::scan_file(
            &file,
            &path,
            0,
            u64::try_from(cut).unwrap(),
            100,
        ))
        .unwrap();
        assert_eq!(chunked.valid_length, expected.valid_length, "cut {cut}");
        assert_eq!(chunked.records, expected.records, "cut {cut}");
    }
}

//! The checker on partitions written by the log itself, clean and with planted damage.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use proto::batch::{OutgoingMessage, encode_batch};
use proto::error::DecodeErrorKind;

use super::*;
use crate::format::index::parse_indexes;
use crate::layout::partition_directory;
use crate::log::{Durability, LogConfig, PartitionLog};
use crate::storage::memory::MemoryStorage;

fn run<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("memory storage futures are always ready"),
    }
}

const ROOT: &str = "/data";

fn partition() -> PathBuf {
    partition_directory(Path::new(ROOT), 1, 2, 3)
}

/// A partition of several sealed segments and an active one, closed cleanly.
fn written() -> MemoryStorage {
    let storage = MemoryStorage::new();
    let config = LogConfig {
        segment_size_bytes: 2_000,
        durability: Durability::Persisted,
        ..LogConfig::default()
    };
    let (mut log, _) = run(PartitionLog::open(storage.clone(), &partition(), config)).unwrap();
    for round in 0..20 {
        let message = OutgoingMessage {
            id: round + 1,
            origin_timestamp: 1_000,
            payload: b"a payload of some bytes",
            user_headers: &[],
        };
        let mut bytes = Vec::new();
        encode_batch(&[message, message], None, &mut bytes).unwrap();
        let (appended, _) = run(log.append(bytes, 10 + u64::try_from(round).unwrap()));
        appended.unwrap();
    }
    run(log.close()).unwrap();
    storage
}

fn first_segment() -> SegmentPaths {
    SegmentPaths::new(&partition(), 0)
}

/// Byte positions of the first segment's records, from its index.
fn record_positions(storage: &MemoryStorage) -> Vec<u64> {
    let paths = first_segment();
    let offsets = storage.contents(&paths.index).unwrap();
    let times = storage.contents(&paths.time_index).unwrap();
    let entries = parse_indexes(&offsets, &times).unwrap();
    entries
        .iter()
        .map(|entry| u64::from(entry.position))
        .collect()
}

fn flip(storage: &MemoryStorage, path: &Path, position: u64) {
    let mut bytes = storage.contents(path).unwrap();
    bytes[usize::try_from(position).unwrap()] ^= 0x20;
    storage.replace(path, bytes);
}

#[test]
fn a_clean_partition_has_no_findings() {
    let storage = written();
    let names = run(storage.list_dir(&partition())).unwrap();
    let logs = names
        .iter()
        .filter(|name| Path::new(name).extension().is_some_and(|e| e == "log"))
        .count();
    assert!(logs > 2, "several segments");
    assert_eq!(run(check_partitions(&storage, Path::new(ROOT))), []);
}

#[test]
fn a_flipped_byte_in_a_log_is_reported_at_its_record() {
    let storage = written();
    let positions = record_positions(&storage);
    assert!(positions.len() >= 3);
    let damaged = positions[1];
    // A payload byte: past the 256-byte batch header and the first 48-byte frame header.
    flip(&storage, &first_segment().log, damaged + 256 + 48 + 2);
    let findings = run(check_partitions(&storage, Path::new(ROOT)));
    let log = findings
        .iter()
        .find(|finding| finding.path == first_segment().log)
        .unwrap();
    assert_eq!(log.position, damaged);
    let Problem::Log(StopReason::Invalid(error)) = &log.problem else {
        panic!("{log}");
    };
    assert_eq!(error.kind, DecodeErrorKind::MessageChecksum);
    let text = log.to_string();
    assert!(text.contains("00000000000000000000.log"), "{text}");
    assert!(text.contains(&format!("byte {damaged}")), "{text}");
    // The indexes still list the records the damage made unreadable.
    let index = findings
        .iter()
        .find(|finding| finding.path == first_segment().index)
        .unwrap();
    assert_eq!(
        index.position, 8,
        "the entry of the first unreadable record"
    );
    assert!(matches!(index.problem, Problem::IndexLong { entries, records: 1 } if entries > 1));
}

#[test]
fn damaged_indexes_state_and_offsets_are_reported() {
    let storage = written();
    let paths = first_segment();
    flip(&storage, &paths.index, 8 + 4);
    let time_index = storage.contents(&paths.time_index).unwrap();
    storage.replace(
        &paths.time_index,
        time_index[..time_index.len() - 1].to_vec(),
    );
    flip(&storage, &state_path(&partition()), 20);
    let offset = partition().join("offsets/groups/1.offset");
    run(storage.create_dir_all(offset.parent().unwrap())).unwrap();
    storage.replace(&offset, vec![0; 32]);
    let findings = run(check_partition(&storage, &partition()));
    let problems: Vec<(PathBuf, u64, Problem)> = findings
        .into_iter()
        .map(|finding| (finding.path, finding.position, finding.problem))
        .collect();
    let expected = [
        (
            state_path(&partition()),
            0,
            Problem::State(StateError::Checksum),
        ),
        (paths.index.clone(), 8, Problem::IndexMismatch { entry: 1 }),
        (
            paths.time_index.clone(),
            u64::try_from(time_index.len() - TIME_ENTRY_SIZE).unwrap(),
            Problem::IndexPartialEntry,
        ),
        (offset, 0, Problem::OffsetLost),
    ];
    for finding in &expected {
        assert!(
            problems.contains(finding),
            "{finding:?} not in {problems:?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:?}");
}

#[test]
fn a_missing_index_and_a_torn_log_tail_are_reported() {
    let storage = written();
    let paths = first_segment();
    run(storage.remove_file(&paths.index)).unwrap();
    let log = storage.contents(&paths.log).unwrap();
    storage.replace(&paths.log, log[..log.len() - 10].to_vec());
    let findings = run(check_partition(&storage, &partition()));
    assert!(findings.contains(&Finding {
        path: paths.index.clone(),
        position: 0,
        problem: Problem::IndexMissing,
    }));
    let torn = findings
        .iter()
        .find(|finding| finding.path == paths.log)
        .unwrap();
    assert!(
        matches!(torn.problem, Problem::Log(StopReason::Torn { .. })),
        "{torn}"
    );
}

#[test]
fn the_active_segments_lagging_index_is_no_problem_a_sealed_ones_is() {
    let storage = written();
    let names = run(storage.list_dir(&partition())).unwrap();
    let starts = segment_starts(&names);
    let active = SegmentPaths::new(&partition(), *starts.last().unwrap());
    // After a crash the active segment's entries lag the log, even in a partial entry: its
    // files are written in bulk, and start-up completes them.
    let index = storage.contents(&active.index).unwrap();
    assert!(index.len() >= 16, "the active segment holds two records");
    storage.replace(&active.index, index[..index.len() - 3].to_vec());
    storage.replace(&active.time_index, Vec::new());
    assert_eq!(run(check_partition(&storage, &partition())), []);
    // A disagreeing entry in it is still damage, and a sealed segment must be whole.
    flip(&storage, &active.index, 0);
    let sealed = first_segment();
    let index = storage.contents(&sealed.index).unwrap();
    storage.replace(&sealed.index, index[..index.len() - 8].to_vec());
    let problems: Vec<Problem> = run(check_partition(&storage, &partition()))
        .into_iter()
        .map(|finding| finding.problem)
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        matches!(problems[0], Problem::IndexShort { .. }),
        "{problems:?}"
    );
    assert!(
        matches!(problems[1], Problem::IndexMismatch { entry: 0 }),
        "{problems:?}"
    );
}

#[test]
fn a_sealed_log_that_lost_its_last_records_is_reported_against_the_log() {
    for keep in [2, 0] {
        let storage = written();
        let positions = record_positions(&storage);
        let cut = positions[keep];
        let mut bytes = storage.contents(&first_segment().log).unwrap();
        bytes.truncate(usize::try_from(cut).unwrap());
        storage.replace(&first_segment().log, bytes);
        let findings = run(check_partitions(&storage, Path::new(ROOT)));
        let log = findings
            .iter()
            .find(|finding| finding.path == first_segment().log)
            .unwrap_or_else(|| panic!("kept {keep}: {findings:?}"));
        assert_eq!(log.position, cut);
        let expected = StopReason::RecordsMissing {
            indexed: positions.len() as u64,
            valid: keep as u64,
        };
        assert_eq!(log.problem, Problem::Log(expected), "kept {keep}");
        assert!(log.to_string().contains("lost after the seal"), "{log}");
    }
}

/// A removed `.log` is reported: a sealed one by the indexes it left, the active one after
/// a clean close by `partition.state`, which recorded more offsets than the segments hold.
#[test]
fn removed_logs_are_reported() {
    let storage = written();
    run(storage.remove_file(&first_segment().log)).unwrap();
    let findings = run(check_partition(&storage, &partition()));
    let paths: Vec<&Path> = findings.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(
        paths,
        [
            first_segment().index.as_path(),
            first_segment().time_index.as_path()
        ],
        "{findings:#?}"
    );
    assert!(findings.iter().all(|f| f.problem == Problem::LogMissing));

    let storage = written();
    let names = run(storage.list_dir(&partition())).unwrap();
    let starts = segment_starts(&names);
    let active = SegmentPaths::new(&partition(), *starts.last().unwrap());
    let state = PartitionState::decode(&storage.contents(&state_path(&partition())).unwrap());
    let recorded = state.unwrap().next_offset;
    for path in [&active.log, &active.index, &active.time_index] {
        run(storage.remove_file(path)).unwrap();
    }
    let findings = run(check_partition(&storage, &partition()));
    let found = *starts.last().unwrap();
    let expected = Finding {
        path: state_path(&partition()),
        position: 0,
        problem: Problem::RecordsLost { recorded, found },
    };
    assert_eq!(findings, [expected]);
}

/// What a crash leaves and start-up takes as it is is no problem: an empty offset file (a
/// first store cut short) and the active segment's missing indexes (a roll cut short).
#[test]
fn crash_leftovers_start_up_takes_as_they_are_are_no_findings() {
    let storage = written();
    let offsets = partition().join("offsets").join("consumers");
    run(storage.create_dir_all(&offsets)).unwrap();
    let file = run(storage.open(&offsets.join("7.offset"), true)).unwrap();
    drop(file);
    let names = run(storage.list_dir(&partition())).unwrap();
    let active = SegmentPaths::new(&partition(), *segment_starts(&names).last().unwrap());
    for path in [&active.index, &active.time_index] {
        run(storage.remove_file(path)).unwrap();
    }
    assert_eq!(run(check_partition(&storage, &partition())), []);
}

//! The data-directory checker on the in-memory storage: a clean directory written by the
//! journal and the partition log, then planted damage in each kind of file.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use proto::batch::{OutgoingMessage, encode_batch};
use proto::primitives::OptionsBlock;
use segment::layout::{SegmentPaths, journal_path, partition_directory, snapshot_path};
use segment::log::{Durability, LogConfig, PartitionLog};
use segment::storage::memory::MemoryStorage;

use super::*;
use crate::metadata::replay::{ENTRY_HEADER_BYTES, encode_entry};
use crate::metadata::snapshot::encode_snapshot;
use crate::metadata::{Journal, MetadataOp};

const ROOT: &str = "/data";

fn run<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("memory storage futures are always ready"),
    }
}

fn root() -> &'static Path {
    Path::new(ROOT)
}

fn stream_ops(count: u32) -> Vec<MetadataOp> {
    (0..count)
        .map(|id| MetadataOp::CreateStream {
            id,
            name: format!("stream-{id}"),
            created_at: u64::from(id),
            options: OptionsBlock::default(),
        })
        .collect()
}

/// Three streams, stream 0's topic 0 (one partition) created second.
fn journal_ops() -> Vec<MetadataOp> {
    let mut ops = stream_ops(3);
    let topic = MetadataOp::CreateTopic {
        stream_id: 0,
        id: 0,
        name: "topic".into(),
        created_at: 9,
        partitions_count: 1,
        options: OptionsBlock::default(),
        settings: crate::metadata::TopicSettings::default(),
    };
    ops.insert(1, topic);
    ops
}

/// A data directory with four journal ops and the one partition they hold, of several
/// records.
fn written() -> MemoryStorage {
    let storage = MemoryStorage::new();
    let directory = metadata_directory(root());
    let (mut journal, mut metadata) = run(Journal::open(&storage, &directory)).unwrap();
    for op in journal_ops() {
        metadata.apply(&op).unwrap();
        run(journal.append(&op, &metadata)).unwrap();
    }
    let config = LogConfig {
        durability: Durability::Persisted,
        ..LogConfig::default()
    };
    let partition = partition_directory(root(), 0, 0, 0);
    let (mut log, _) = run(PartitionLog::open(storage.clone(), &partition, config)).unwrap();
    for round in 0..4_u64 {
        let message = OutgoingMessage {
            id: 1,
            origin_timestamp: 5,
            payload: b"hello",
            user_headers: &[],
        };
        let mut bytes = Vec::new();
        encode_batch(&[message], None, &mut bytes).unwrap();
        run(log.append(bytes, 100 + round)).0.unwrap();
    }
    run(log.close()).unwrap();
    storage
}

fn segment_log() -> PathBuf {
    SegmentPaths::new(&partition_directory(root(), 0, 0, 0), 0).log
}

fn flip(storage: &MemoryStorage, path: &Path, position: usize) {
    let mut bytes = storage.contents(path).unwrap();
    bytes[position] ^= 0x01;
    storage.replace(path, bytes);
}

fn check(storage: &MemoryStorage) -> Vec<Finding> {
    run(check_data_directory(storage, root()))
}

#[test]
fn a_clean_directory_has_no_findings() {
    assert_eq!(check(&written()), []);
    assert_eq!(
        check(&MemoryStorage::new()),
        [],
        "an empty directory is clean too"
    );
}

#[test]
fn flipped_bytes_in_the_journal_and_a_segment_are_named_by_file_and_byte() {
    let storage = written();
    let second_entry = encode_entry(&stream_ops(1)[0]).unwrap().len();
    flip(
        &storage,
        &journal_path(root()),
        second_entry + ENTRY_HEADER_BYTES + 2,
    );
    let record = storage.contents(&segment_log()).unwrap().len() / 4;
    flip(&storage, &segment_log(), 2 * record + 300);
    let findings = check(&storage);
    assert_eq!(findings.len(), 4, "{findings:#?}");
    let journal = &findings[0];
    assert_eq!(journal.path, journal_path(root()));
    assert_eq!(journal.position, u64::try_from(second_entry).unwrap());
    assert!(
        matches!(journal.problem, Problem::JournalCorrupt { .. }),
        "{journal}"
    );
    let log = &findings[1];
    assert_eq!(log.path, segment_log());
    assert_eq!(log.position, u64::try_from(2 * record).unwrap());
    assert!(
        matches!(
            log.problem,
            Problem::Partition(segment::check::Problem::Log(_))
        ),
        "{log}"
    );
    let text = log.to_string();
    assert!(
        text.starts_with("/data/streams/0/topics/0/partitions/0/"),
        "{text}"
    );
    assert!(text.contains(&format!("byte {}", 2 * record)), "{text}");
    assert!(log.repair().contains("truncate"));
    // Both indexes still list the records after the damage.
    assert_eq!(findings[2].path.extension().unwrap(), "index");
    assert_eq!(findings[3].path.extension().unwrap(), "timeindex");
}

#[test]
fn a_torn_journal_tail_and_a_bad_snapshot_are_reported() {
    let storage = written();
    let journal = storage.contents(&journal_path(root())).unwrap();
    storage.replace(&journal_path(root()), journal[..journal.len() - 3].to_vec());
    let findings = check(&storage);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert!(matches!(findings[0].problem, Problem::JournalTorn(_)));
    assert!(findings[0].repair().starts_with("none needed"));

    let storage = written();
    let mut snapshot = encode_snapshot(&Metadata::default());
    snapshot[9] = 7;
    storage.replace(&snapshot_path(root()), snapshot);
    let findings = check(&storage);
    assert_eq!(
        findings,
        [Finding {
            path: snapshot_path(root()),
            position: 8,
            problem: Problem::Snapshot(SnapshotError::Version { found: 0x0701 }),
        }]
    );
}

#[test]
fn a_journal_that_does_not_continue_its_snapshot_is_reported() {
    let storage = written();
    let mut metadata = Metadata::default();
    for op in stream_ops(2) {
        metadata.apply(&op).unwrap();
    }
    // A snapshot that claims commit 1 but already holds stream 1: the journal's third op
    // (commit 3, creating stream 1) collides with it.
    metadata.commit = 1;
    storage.replace(&snapshot_path(root()), encode_snapshot(&metadata));
    let findings = check(&storage);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let ops = journal_ops();
    let third_entry = encode_entry(&ops[0]).unwrap().len() + encode_entry(&ops[1]).unwrap().len();
    assert_eq!(findings[0].position, u64::try_from(third_entry).unwrap());
    assert!(matches!(findings[0].problem, Problem::JournalReplay(_)));
}

#[test]
fn a_journal_that_ends_before_its_snapshot_is_reported() {
    let storage = written();
    let mut metadata = Metadata::default();
    for op in stream_ops(3) {
        metadata.apply(&op).unwrap();
    }
    // A compaction at commit 3, then the journal that continued it lost: emptied.
    storage.replace(&snapshot_path(root()), encode_snapshot(&metadata));
    let journal = metadata_directory(root()).join(JOURNAL_FILE);
    storage.replace(&journal, Vec::new());
    let findings = check(&storage);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let expected = Problem::JournalShort {
        end: 0,
        snapshot_commit: 3,
    };
    assert_eq!(findings[0].problem, expected);
    assert!(findings[0].repair().contains("--accept-metadata-loss"));
}

/// A partition directory the metadata does not hold is reported: as a leftover beside
/// metadata with history, as lost metadata beside a journal with none.
#[test]
fn partition_directories_the_metadata_does_not_hold_are_reported() {
    let storage = written();
    let leftover = partition_directory(root(), 1, 0, 0);
    run(storage.create_dir_all(&leftover)).unwrap();
    let findings = check(&storage);
    let expected = Finding {
        path: leftover.clone(),
        position: 0,
        problem: Problem::Orphaned {
            metadata_lost: false,
        },
    };
    assert_eq!(findings, [expected]);
    assert!(findings[0].repair().starts_with("none needed"));

    storage.replace(&journal_path(root()), Vec::new());
    let findings = check(&storage);
    let paths: Vec<&Path> = findings.iter().map(|f| f.path.as_path()).collect();
    let held = partition_directory(root(), 0, 0, 0);
    assert_eq!(paths, [held.as_path(), leftover.as_path()]);
    assert!(findings.iter().all(|finding| finding.problem
        == Problem::Orphaned {
            metadata_lost: true
        }));
}

/// A partition the metadata holds without its directory is reported: its data was removed.
#[test]
fn a_partition_without_its_directory_is_reported() {
    let storage = written();
    let directory = partition_directory(root(), 0, 0, 0);
    run(storage.remove_dir_all(&directory)).unwrap();
    let findings = check(&storage);
    let expected = Finding {
        path: directory,
        position: 0,
        problem: Problem::PartitionMissing,
    };
    assert_eq!(findings, [expected]);
}

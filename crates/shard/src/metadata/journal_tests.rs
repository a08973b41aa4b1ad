//! Tests of the journal and its compaction on the in-memory storage: torn tails against
//! corruption (every byte of the last entry, zero-filled tails, single-byte flips anywhere),
//! and a crash at every step of a compaction.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proto::primitives::{OptionsBlock, Permissions};
use segment::storage::Storage;
use segment::storage::memory::{CrashMode, Faults, MemoryStorage};

use super::journal::JOURNAL_FILE;
use super::replay::{ENTRY_HEADER_BYTES, EntryDamage, encode_base_entry, encode_entry, replay};
use super::snapshot::{SNAPSHOT_FILE, encode_snapshot};
use super::tests::{any_op, ready, sample_ops};
use super::*;

const DIRECTORY: &str = "/data/metadata";

fn journal_path() -> PathBuf {
    Path::new(DIRECTORY).join(JOURNAL_FILE)
}

fn snapshot_path() -> PathBuf {
    Path::new(DIRECTORY).join(SNAPSHOT_FILE)
}

fn open(storage: &MemoryStorage) -> Result<(Journal<MemoryStorage>, Metadata), JournalError> {
    ready(Journal::open(storage, Path::new(DIRECTORY)))
}

/// `count` ops that all apply in order, touching streams, topics, users and tokens.
fn valid_ops(count: u32) -> Vec<MetadataOp> {
    (0..count)
        .map(|index| match index % 4 {
            0 => MetadataOp::CreateStream {
                id: index,
                name: format!("stream-{index}"),
                created_at: u64::from(index),
                options: OptionsBlock::default(),
            },
            1 => MetadataOp::CreateTopic {
                stream_id: index - 1,
                id: 0,
                name: format!("topic-{index}"),
                created_at: u64::from(index),
                partitions_count: 2,
                options: OptionsBlock::default(),
                settings: TopicSettings::default(),
            },
            2 => MetadataOp::CreateUser {
                id: index,
                username: format!("user-{index}"),
                password_hash: format!("hash-{index}"),
                status: UserStatus::Active,
                permissions: Some(Permissions::root()),
                created_at: u64::from(index),
            },
            _ => MetadataOp::CreatePersonalAccessToken {
                user_id: index - 1,
                name: format!("token-{index}"),
                token_hash: format!("{index:064x}"),
                expiry_at: Some(u64::from(index)),
            },
        })
        .collect()
}

fn state_after(ops: &[MetadataOp]) -> Metadata {
    let mut metadata = Metadata::default();
    for op in ops {
        metadata.apply(op).unwrap();
    }
    metadata
}

/// Applies and appends each op, as `Server::commit` does.
fn append_all(journal: &mut Journal<MemoryStorage>, metadata: &mut Metadata, ops: &[MetadataOp]) {
    for op in ops {
        let mut next = metadata.clone();
        next.apply(op).unwrap();
        ready(journal.append(op, &next)).unwrap();
        *metadata = next;
    }
}

fn limits(ops: u64) -> CompactionLimits {
    CompactionLimits {
        ops,
        bytes: u64::MAX,
    }
}

/// The entries of `ops`, concatenated, and where each starts.
fn journal_bytes(ops: &[MetadataOp]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    for op in ops {
        starts.push(bytes.len());
        bytes.extend(encode_entry(op).unwrap());
    }
    (bytes, starts)
}

/// A storage whose journal holds exactly `bytes`.
fn storage_holding(bytes: &[u8]) -> MemoryStorage {
    let storage = MemoryStorage::new();
    drop(open(&storage).unwrap());
    storage.replace(&journal_path(), bytes.to_vec());
    storage
}

#[test]
fn a_flipped_byte_in_a_middle_entry_is_corruption_at_its_position() {
    let ops = sample_ops();
    let (mut bytes, starts) = journal_bytes(&ops);
    bytes[starts[1] + ENTRY_HEADER_BYTES + 3] ^= 0x10;
    let storage = storage_holding(&bytes);
    let error = open(&storage).unwrap_err();
    let JournalError::Corrupt {
        path,
        position,
        reason,
        intact_at,
    } = &error
    else {
        panic!("{error}");
    };
    assert_eq!(path, &journal_path());
    assert_eq!(*position, starts[1] as u64);
    assert_eq!(*intact_at, starts[2] as u64);
    assert!(matches!(reason, EntryDamage::Checksum { .. }));
    let message = error.to_string();
    assert!(message.contains("/data/metadata/journal.wal"), "{message}");
    assert!(
        message.contains(&format!("byte {}", starts[1])),
        "{message}"
    );
    assert_eq!(
        storage.contents(&journal_path()).unwrap(),
        bytes,
        "nothing is cut"
    );
}

#[test]
fn a_damaged_length_in_a_middle_entry_is_corruption() {
    let ops = sample_ops();
    let (bytes, starts) = journal_bytes(&ops);
    for (offset, value) in [(0, 0), (0, 1), (3, 0x40), (2, 0x02), (0, 0xff)] {
        let mut damaged = bytes.clone();
        damaged[starts[1] + offset] = value;
        let error = replay(&damaged, &journal_path()).unwrap_err();
        assert!(
            matches!(error, JournalError::Corrupt { position, .. } if position == starts[1] as u64),
            "length byte {offset} = {value}: {error}"
        );
    }
}

#[test]
fn torn_tails_are_truncated_at_every_byte_of_the_last_entry() {
    let ops = sample_ops();
    let (whole, starts) = journal_bytes(&ops);
    let last_start = starts[2];
    for cut in last_start..whole.len() {
        let storage = storage_holding(&whole[..cut]);
        let (mut journal, metadata) = open(&storage).unwrap();
        assert_eq!(metadata, state_after(&ops[..2]), "cut at {cut}");
        assert_eq!(storage.contents(&journal_path()).unwrap().len(), last_start);
        let after = state_after(&ops);
        ready(journal.append(&ops[2], &after)).unwrap();
        let (_, reopened) = open(&storage).unwrap();
        assert_eq!(reopened, after, "cut at {cut}");
    }
}

#[test]
fn a_zero_filled_tail_is_torn() {
    let ops = sample_ops();
    let (whole, starts) = journal_bytes(&ops);
    for zeros in [1, 11, 12, 13, 100, 4096] {
        let mut bytes = whole.clone();
        bytes.resize(whole.len() + zeros, 0);
        let storage = storage_holding(&bytes);
        let (_, metadata) = open(&storage).unwrap();
        assert_eq!(metadata, state_after(&ops), "{zeros} zeros");
        assert_eq!(storage.contents(&journal_path()).unwrap(), whole);
    }
    // The last entry's body only partly written over a zero-extended file.
    let mut bytes = whole.clone();
    bytes[starts[2] + ENTRY_HEADER_BYTES..].fill(0);
    bytes.resize(whole.len() + 512, 0);
    let storage = storage_holding(&bytes);
    let (_, metadata) = open(&storage).unwrap();
    assert_eq!(metadata, state_after(&ops[..2]));
    assert_eq!(storage.contents(&journal_path()).unwrap().len(), starts[2]);
}

#[test]
fn an_entry_that_checks_out_but_does_not_decode_is_an_error() {
    let body = [9_u8, 1, 2, 3];
    let mut entry = u32::try_from(body.len()).unwrap().to_le_bytes().to_vec();
    entry.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&body).to_le_bytes());
    entry.extend_from_slice(&body);
    let error = replay(&entry, &journal_path()).unwrap_err();
    assert!(matches!(
        error,
        JournalError::Undecodable { position: 0, .. }
    ));
    // A base record anywhere but first is not an op either.
    let mut misplaced = encode_entry(&sample_ops()[0]).unwrap();
    misplaced.extend(encode_base_entry(3));
    let error = replay(&misplaced, &journal_path()).unwrap_err();
    assert!(matches!(error, JournalError::Undecodable { .. }), "{error}");
}

/// A refused op must not come back at the next start: an entry whose sync failed is cut
/// (the cut synced), so neither the running server nor a restarted one applies it, and the
/// journal goes on once the disk does.
#[test]
fn a_failed_sync_cuts_the_refused_entry() {
    let storage = MemoryStorage::new();
    let (mut journal, mut metadata) = open(&storage).unwrap();
    let ops = valid_ops(3);
    append_all(&mut journal, &mut metadata, &ops[..1]);
    let length = journal.length_bytes();
    storage.set_faults(Faults {
        sync_errors: 1,
        ..Faults::default()
    });
    let mut after = metadata.clone();
    after.apply(&ops[1]).unwrap();
    assert!(matches!(
        ready(journal.append(&ops[1], &after)),
        Err(JournalError::Io { .. })
    ));
    assert_eq!(journal.length_bytes(), length);
    assert_eq!(
        storage.contents(&journal_path()).unwrap().len() as u64,
        length
    );
    // The journal goes on: the op succeeds once the disk does.
    append_all(&mut journal, &mut metadata, &ops[1..2]);
    storage.crash(CrashMode::DropUnsynced);
    let (_journal, rebuilt) = open(&storage).unwrap();
    assert_eq!(rebuilt, state_after(&ops[..2]), "each op once");
    // A refused op that is not retried is not there after a restart.
    let (mut journal, metadata) = open(&storage).unwrap();
    storage.set_faults(Faults {
        sync_errors: 1,
        ..Faults::default()
    });
    let mut after = metadata.clone();
    after.apply(&ops[2]).unwrap();
    assert!(ready(journal.append(&ops[2], &after)).is_err());
    storage.crash(CrashMode::ProcessOnly);
    let (_journal, rebuilt) = open(&storage).unwrap();
    assert_eq!(rebuilt, state_after(&ops[..2]), "the refused op is gone");
}

#[test]
fn a_failed_sync_whose_cut_fails_too_closes_the_journal() {
    let storage = MemoryStorage::new();
    let (mut journal, metadata) = open(&storage).unwrap();
    storage.set_faults(Faults {
        sync_errors: 2,
        ..Faults::default()
    });
    let op = &sample_ops()[0];
    let mut after = metadata.clone();
    after.apply(op).unwrap();
    assert!(ready(journal.append(op, &after)).is_err());
    assert!(matches!(
        ready(journal.append(op, &after)),
        Err(JournalError::Failed { .. })
    ));
}

#[test]
fn an_append_refused_by_a_full_disk_leaves_the_journal_open() {
    let storage = MemoryStorage::new();
    let (mut journal, mut metadata) = open(&storage).unwrap();
    let ops = valid_ops(3);
    append_all(&mut journal, &mut metadata, &ops[..1]);
    let length = journal.length_bytes();
    // Room for part of the entry only: a short write.
    storage.set_capacity(Some(storage.used_bytes() + 5));
    let mut after = metadata.clone();
    after.apply(&ops[1]).unwrap();
    let refused = ready(journal.append(&ops[1], &after)).unwrap_err();
    let JournalError::Io { source, .. } = &refused else {
        panic!("{refused}");
    };
    assert_eq!(source.raw_os_error(), Some(28), "{refused}");
    assert_eq!(journal.length_bytes(), length);
    let stored = storage.contents(&journal_path()).unwrap();
    assert_eq!(
        stored.len() as u64,
        length,
        "the part that was written is cut"
    );
    // Still full: refused again, cleanly.
    assert!(matches!(
        ready(journal.append(&ops[1], &after)),
        Err(JournalError::Io { .. })
    ));
    storage.set_capacity(None);
    append_all(&mut journal, &mut metadata, &ops[1..]);
    for mode in [CrashMode::ProcessOnly, CrashMode::DropUnsynced] {
        storage.crash(mode);
        let (_journal, rebuilt) = open(&storage).unwrap();
        assert_eq!(rebuilt, state_after(&ops), "each op once, {mode:?}");
    }
}

#[test]
fn a_failed_cut_after_a_refused_write_closes_the_journal() {
    let storage = MemoryStorage::new();
    let (mut journal, metadata) = open(&storage).unwrap();
    storage.set_faults(Faults {
        write_errors: 1,
        sync_errors: 1,
        ..Faults::default()
    });
    let op = &sample_ops()[0];
    let mut after = metadata.clone();
    after.apply(op).unwrap();
    assert!(matches!(
        ready(journal.append(op, &after)),
        Err(JournalError::Io { .. })
    ));
    assert!(matches!(
        ready(journal.append(op, &after)),
        Err(JournalError::Failed { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_single_flipped_byte_is_corruption_or_drops_only_the_last_op(
        ops in proptest::collection::vec(any_op(), 2..6),
        pick in any::<proptest::sample::Index>(),
        flip in 1_u8..=255,
    ) {
        let (mut bytes, starts) = journal_bytes(&ops);
        let index = pick.index(bytes.len());
        bytes[index] ^= flip;
        let entry = starts.iter().rposition(|start| *start <= index).unwrap();
        let last = ops.len() - 1;
        match replay(&bytes, &journal_path()) {
            Ok(replayed) => {
                prop_assert_eq!(entry, last, "only the last entry may be cut");
                let kept: Vec<MetadataOp> =
                    replayed.entries.into_iter().map(|entry| entry.op).collect();
                prop_assert_eq!(&kept[..], &ops[..last]);
                prop_assert_eq!(replayed.valid_length, starts[last] as u64);
            }
            Err(JournalError::Corrupt { position, .. }) => {
                prop_assert_eq!(position, starts[entry] as u64);
            }
            Err(other) => prop_assert!(false, "unexpected error: {}", other),
        }
    }

    #[test]
    fn the_journal_rebuilds_the_same_state_through_crashes_and_compactions(
        ops in proptest::collection::vec(any_op(), 0..30),
        compact_after in 1_u64..6,
    ) {
        let storage = MemoryStorage::new();
        let (journal, mut metadata) = open(&storage).unwrap();
        let mut journal = journal.with_compaction_limits(limits(compact_after));
        prop_assert_eq!(&metadata, &Metadata::default());
        for op in &ops {
            let mut next = metadata.clone();
            if next.apply(op).is_ok() {
                ready(journal.append(op, &next)).unwrap();
                metadata = next;
            }
        }
        storage.crash(CrashMode::DropUnsynced);
        let (_journal, rebuilt) = open(&storage).unwrap();
        prop_assert_eq!(rebuilt, metadata);
    }
}

#[test]
fn compaction_writes_a_snapshot_and_starts_a_new_journal() {
    let storage = MemoryStorage::new();
    let (journal, mut metadata) = open(&storage).unwrap();
    let mut journal = journal.with_compaction_limits(limits(4));
    let ops = valid_ops(11);
    append_all(&mut journal, &mut metadata, &ops[..5]);
    assert_eq!(journal.base(), 5, "the fifth op passed the limit of four");
    let base_entry = encode_base_entry(5);
    assert_eq!(storage.contents(&journal_path()).unwrap(), base_entry);
    assert_eq!(
        storage.contents(&snapshot_path()).unwrap(),
        encode_snapshot(&state_after(&ops[..5]))
    );
    append_all(&mut journal, &mut metadata, &ops[5..]);
    assert_eq!(journal.base(), 10);
    storage.crash(CrashMode::DropUnsynced);
    let (journal, reopened) = open(&storage).unwrap();
    assert_eq!(reopened, state_after(&ops));
    assert_eq!(journal.base(), 10);
}

/// Compacts at the fourth of four ops with every change after the first `allowed` failing,
/// crashes with `mode`, reopens, and checks the state and that appending still works.
fn crash_during_compaction(allowed: u64, mode: CrashMode) -> bool {
    let ops = valid_ops(5);
    let storage = MemoryStorage::new();
    let (journal, mut metadata) = open(&storage).unwrap();
    let mut journal = journal.with_compaction_limits(limits(3));
    append_all(&mut journal, &mut metadata, &ops[..3]);
    storage.fail_after(Some(allowed));
    let mut after = metadata.clone();
    after.apply(&ops[3]).unwrap();
    let acknowledged = ready(journal.append(&ops[3], &after)).is_ok();
    let finished = journal.base() == 4;
    storage.fail_after(None);
    storage.crash(mode);
    let (mut reopened, mut state) = open(&storage).unwrap();
    let label = format!("{allowed} changes allowed, {mode:?}");
    if acknowledged {
        assert_eq!(state, state_after(&ops[..4]), "{label}");
    } else if state != state_after(&ops[..3]) {
        // An unacknowledged op may survive (a process crash keeps what was written).
        assert_eq!(state, state_after(&ops[..4]), "{label}");
    }
    assert!(reopened.base() <= state.commit, "{label}");
    let applied = usize::try_from(state.commit).unwrap();
    append_all(&mut reopened, &mut state, &ops[applied..=applied]);
    storage.crash(CrashMode::DropUnsynced);
    let (_, last) = open(&storage).unwrap();
    assert_eq!(last, state_after(&ops[..=applied]), "{label}");
    finished
}

#[test]
fn a_crash_at_every_step_of_a_compaction_recovers_exactly() {
    for mode in [
        CrashMode::DropUnsynced,
        CrashMode::ProcessOnly,
        CrashMode::TornAt(7),
    ] {
        let mut allowed = 0;
        while !crash_during_compaction(allowed, mode) {
            allowed += 1;
            assert!(allowed < 100, "the compaction never finished");
        }
        assert!(allowed > 8, "the crash points cover every step");
    }
}

#[test]
fn a_journal_left_behind_a_new_snapshot_is_skipped_and_replaced() {
    let ops = valid_ops(6);
    let (bytes, _) = journal_bytes(&ops[..4]);
    let storage = storage_holding(&bytes);
    storage.replace(&snapshot_path(), encode_snapshot(&state_after(&ops[..4])));
    let (mut journal, mut metadata) = open(&storage).unwrap();
    assert_eq!(metadata, state_after(&ops[..4]), "no op applied twice");
    assert_eq!(journal.base(), 4);
    append_all(&mut journal, &mut metadata, &ops[4..]);
    storage.crash(CrashMode::DropUnsynced);
    assert_eq!(open(&storage).unwrap().1, state_after(&ops));
    // Ops appended to the old journal after the snapshot are kept, and compacted away.
    let (bytes, _) = journal_bytes(&ops);
    let storage = storage_holding(&bytes);
    storage.replace(&snapshot_path(), encode_snapshot(&state_after(&ops[..4])));
    let (journal, metadata) = open(&storage).unwrap();
    assert_eq!(metadata, state_after(&ops));
    assert_eq!(journal.base(), 6);
}

#[test]
fn a_journal_beyond_its_snapshot_is_a_gap() {
    let mut bytes = encode_base_entry(4);
    bytes.extend(encode_entry(&valid_ops(5)[4]).unwrap());
    let storage = storage_holding(&bytes);
    let error = open(&storage).unwrap_err();
    assert!(
        matches!(
            error,
            JournalError::Gap {
                base: 4,
                snapshot_commit: 0,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_corrupt_snapshot_is_an_error_naming_the_file() {
    let storage = MemoryStorage::new();
    drop(open(&storage).unwrap());
    let mut snapshot = encode_snapshot(&state_after(&valid_ops(8)));
    let middle = snapshot.len() / 2;
    snapshot[middle] ^= 4;
    storage.replace(&snapshot_path(), snapshot);
    let error = open(&storage).unwrap_err();
    assert!(matches!(error, JournalError::Snapshot { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("/data/metadata/snapshot.bin"), "{message}");
    assert!(message.contains("at byte 24"), "{message}");
}

#[test]
fn leftovers_of_an_interrupted_compaction_are_removed() {
    let storage = MemoryStorage::new();
    drop(open(&storage).unwrap());
    for name in ["snapshot.bin.tmp", "journal.wal.tmp"] {
        storage.replace(&Path::new(DIRECTORY).join(name), b"partial".to_vec());
    }
    drop(open(&storage).unwrap());
    for name in ["snapshot.bin.tmp", "journal.wal.tmp"] {
        assert_eq!(storage.contents(&Path::new(DIRECTORY).join(name)), None);
    }
}

#[test]
fn a_compaction_that_fails_before_its_renames_is_retried_later() {
    let storage = MemoryStorage::new();
    let (journal, mut metadata) = open(&storage).unwrap();
    let mut journal = journal.with_compaction_limits(limits(2));
    let ops = valid_ops(8);
    append_all(&mut journal, &mut metadata, &ops[..2]);
    // The op's write and sync succeed; creating the snapshot's temporary file fails.
    storage.fail_after(Some(2));
    let mut after = metadata.clone();
    after.apply(&ops[2]).unwrap();
    ready(journal.append(&ops[2], &after)).unwrap();
    metadata = after;
    storage.fail_after(None);
    assert_eq!(journal.base(), 0, "no compaction happened");
    append_all(&mut journal, &mut metadata, &ops[3..4]);
    assert_eq!(journal.base(), 0, "the retry waits for more ops");
    append_all(&mut journal, &mut metadata, &ops[4..]);
    assert!(journal.base() > 0, "compacted on a later op");
    storage.crash(CrashMode::DropUnsynced);
    assert_eq!(open(&storage).unwrap().1, state_after(&ops));
}

#[test]
fn compaction_on_disk_replaces_files_owner_only() {
    use std::os::unix::fs::PermissionsExt;

    use segment::storage::compio::CompioStorage;

    let root = std::env::temp_dir().join(format!(
        "shard-journal-tests-{}-{}",
        std::process::id(),
        line!()
    ));
    let directory = root.join("metadata");
    let ops = valid_ops(10);
    let runtime = compio::runtime::Runtime::new().unwrap();
    let reopened = runtime.block_on(async {
        let storage = CompioStorage::new();
        let (journal, mut metadata) = Journal::open(&storage, &directory).await.unwrap();
        let mut journal = journal.with_compaction_limits(limits(3));
        for op in &ops {
            let mut next = metadata.clone();
            next.apply(op).unwrap();
            journal.append(op, &next).await.unwrap();
            metadata = next;
        }
        assert_eq!(journal.base(), 8);
        drop(journal);
        Journal::open(&storage, &directory).await.unwrap().1
    });
    assert_eq!(reopened, state_after(&ops));
    let mode = |path: PathBuf| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(directory.join(JOURNAL_FILE)), 0o600);
    assert_eq!(mode(directory.join(SNAPSHOT_FILE)), 0o600);
    assert_eq!(mode(directory.clone()), 0o700);
    let mut names: Vec<_> = std::fs::read_dir(&directory)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["journal.wal", "snapshot.bin"],
        "no temporary file left"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A journal that lost its start after a compaction (emptied, removed, overwritten from its
/// first byte) ends before the snapshot's commit: the ops after the snapshot went with it,
/// and starting from the snapshot would silently undo them (a deleted user back). Open
/// refuses it; with the operator's acceptance it goes on from the snapshot and writes a
/// journal that continues it.
#[test]
fn a_journal_that_lost_its_start_after_a_compaction_is_refused_unless_accepted() {
    let edits: [(&str, Option<Vec<u8>>); 3] = [
        ("emptied", Some(Vec::new())),
        ("overwritten", Some(vec![0xA5; 4096])),
        ("removed", None),
    ];
    for (name, replacement) in edits {
        let storage = MemoryStorage::new();
        let (journal, mut metadata) = open(&storage).unwrap();
        let mut journal = journal.with_compaction_limits(limits(4));
        let ops = valid_ops(8);
        append_all(&mut journal, &mut metadata, &ops);
        assert_eq!(journal.base(), 5);
        drop(journal);
        match replacement {
            Some(bytes) => storage.replace(&journal_path(), bytes),
            None => ready(storage.remove_file(&journal_path())).unwrap(),
        }
        let refused = open(&storage).unwrap_err();
        assert!(
            matches!(
                refused,
                JournalError::Short {
                    end: 0,
                    snapshot_commit: 5,
                    ..
                }
            ),
            "{name}: {refused}"
        );
        assert!(refused.to_string().contains("--accept-metadata-loss"));
        let accepted = ready(Journal::open_with(&storage, Path::new(DIRECTORY), true));
        let (journal, state) = accepted.unwrap();
        assert_eq!(
            state,
            state_after(&ops[..5]),
            "{name}: the snapshot's state"
        );
        assert_eq!(journal.base(), 5);
        drop(journal);
        let (_, reopened) = open(&storage).unwrap();
        assert_eq!(
            reopened,
            state_after(&ops[..5]),
            "{name}: opens plainly again"
        );
    }
}

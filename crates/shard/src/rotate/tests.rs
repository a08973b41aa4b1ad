//! Key rotation over memory storage: every record and credential moves to the new key, and
//! a run stopped after any number of file operations, followed by a power loss, is finished
//! by a rerun with the same keys.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proto::primitives::{ConsumerKind, Partitioning, PollingStrategy};
use segment::storage::Storage;
use segment::storage::memory::{CrashMode, MemoryStorage};

use super::{CHECK_FILE, MARKER_FILE, RotateError, plan, rotate};
use crate::at_rest::RecordKey;
use crate::at_rest::credentials::CredentialSeal;
use crate::data::DataPlane;
use crate::data::tests::{batch, metadata, plane, poll_selector, request, runtime, send_request};
use crate::metadata::journal::JOURNAL_FILE;
use crate::metadata::replay::{encode_base_entry, encode_entry};
use crate::metadata::snapshot::{SNAPSHOT_FILE, decode_snapshot, encode_snapshot};
use crate::metadata::{Metadata, MetadataOp, PersonalAccessToken, User, UserStatus};

const ROOT: &str = "/data";
const OLD: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const NEW: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
const PASSWORD_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2g";

fn key(byte: u8) -> Arc<RecordKey> {
    Arc::new(seal::MasterKey::new([byte; 32]))
}

fn seal_of(byte: u8) -> CredentialSeal {
    CredentialSeal::new(Some(key(byte)))
}

fn token_digest(index: u8) -> String {
    format!("{index:02x}").repeat(32)
}

/// Two partitions whose topic rolls a segment every few records.
fn data_metadata() -> Metadata {
    let mut meta = metadata(2, &[]);
    for stream in meta.streams.values_mut() {
        for topic in stream.topics.values_mut() {
            topic.settings.segment_size_bytes = 700;
        }
    }
    meta
}

/// The state the snapshot holds: the data's metadata and root, sealed under key 1.
fn snapshot_state() -> Metadata {
    let mut meta = data_metadata();
    let seal = seal_of(1);
    let token = PersonalAccessToken {
        name: "first".into(),
        token_hash: seal.protect(token_digest(1)),
        expiry_at: None,
    };
    let root = User {
        id: 0,
        username: "iggy".into(),
        password_hash: seal.protect(PASSWORD_HASH.into()),
        status: UserStatus::Active,
        permissions: None,
        created_at: 0,
        tokens: [("first".to_owned(), token)].into(),
    };
    meta.users.insert(0, root);
    meta
}

/// Builds the data directory (all of it durable): a plain record from before encryption,
/// then sealed ones under key 1 over several segments of two partitions; a snapshot and a
/// journal op holding credentials sealed under key 1; key 1's check file. Returns what a
/// poll of each partition reads.
async fn fixture(storage: &MemoryStorage) -> Vec<Vec<u8>> {
    let meta = data_metadata();
    let plain = plane(storage);
    plain.open_all(&meta).await.unwrap();
    send(&plain, &meta, 0, false).await;
    plain.close().await.unwrap();
    let sealed = plane(storage).with_record_key(Some(key(1)));
    sealed.open_all(&meta).await.unwrap();
    for round in 0..6 {
        send(&sealed, &meta, round % 2, true).await;
    }
    let expected = poll_both(&sealed, &meta).await;
    sealed.close().await.unwrap();

    let state = snapshot_state();
    let metadata_directory = Path::new(ROOT).join("metadata");
    storage.replace(
        &metadata_directory.join(SNAPSHOT_FILE),
        encode_snapshot(&state),
    );
    let op = MetadataOp::CreatePersonalAccessToken {
        user_id: 0,
        name: "second".into(),
        token_hash: seal_of(1).protect(token_digest(2)),
        expiry_at: None,
    };
    let mut journal = encode_base_entry(state.commit);
    journal.extend(encode_entry(&op).unwrap());
    storage.replace(&metadata_directory.join(JOURNAL_FILE), journal);
    let check = seal::KeyCheck::of(&seal::MasterKey::new([1; 32])).encode();
    storage.replace(&Path::new(ROOT).join(CHECK_FILE), check.to_vec());
    make_durable(storage, Path::new(ROOT)).await;
    expected
}

async fn send(plane: &DataPlane<MemoryStorage>, meta: &Metadata, partition: u32, seal: bool) {
    let bytes = batch(3, None);
    let request = send_request(&bytes, Partitioning::PartitionId(partition));
    let plan = plane.plan_send(meta, &request, 0).unwrap();
    let mut buffer = bytes.clone().into();
    if seal {
        buffer = plane.seal_send(buffer).unwrap();
    }
    plane.send(&plan, buffer, 1).await.unwrap();
}

/// Every record of both partitions, as a poll from offset 0 serves them.
async fn poll_both(plane: &DataPlane<MemoryStorage>, meta: &Metadata) -> Vec<Vec<u8>> {
    let mut polled = Vec::new();
    for partition in 0..2 {
        let mut selector = poll_selector(ConsumerKind::Consumer, Some(partition), 1000);
        selector.strategy = PollingStrategy::offset(0);
        selector.auto_commit = false;
        let plan = plane.plan_poll(meta, &request(&selector, 1)).unwrap();
        polled.push(plane.poll(&plan).await.unwrap().records.bytes);
    }
    polled
}

async fn make_durable(storage: &MemoryStorage, directory: &Path) {
    for name in storage.list_dir(directory).await.unwrap() {
        let path = directory.join(name);
        match storage.contents(&path) {
            Some(bytes) => storage.replace(&path, bytes),
            None => Box::pin(make_durable(storage, &path)).await,
        }
    }
}

/// What a server with `key` reads after the rotation; `Err` when a poll is refused.
async fn read_with(storage: &MemoryStorage, key: Option<Arc<RecordKey>>) -> Option<Vec<Vec<u8>>> {
    let meta = data_metadata();
    let plane = plane(storage).with_record_key(key);
    plane.open_all(&meta).await.unwrap();
    let mut polled = Vec::new();
    for partition in 0..2 {
        let mut selector = poll_selector(ConsumerKind::Consumer, Some(partition), 1000);
        selector.strategy = PollingStrategy::offset(0);
        selector.auto_commit = false;
        let plan = plane.plan_poll(&meta, &request(&selector, 1)).unwrap();
        match plane.poll(&plan).await {
            Ok(read) => polled.push(read.records.bytes),
            Err(_) => return None,
        }
    }
    plane.close().await.unwrap();
    Some(polled)
}

/// The rotation to key 2 is complete: data and credentials open under it only.
async fn assert_rotated(storage: &MemoryStorage, expected: &[Vec<u8>]) {
    let root = PathBuf::from(ROOT);
    assert!(!storage.exists(&root.join(MARKER_FILE)).await);
    let check = storage.contents(&root.join(CHECK_FILE)).unwrap();
    let new = seal::MasterKey::new([2; 32]);
    assert_eq!(seal::KeyCheck::decode(&check).unwrap().verify(&new), Ok(()));
    assert_eq!(
        read_with(storage, Some(key(2))).await.as_deref(),
        Some(expected)
    );
    assert_eq!(read_with(storage, Some(key(1))).await, None);
    assert_eq!(read_with(storage, None).await, None);
    let metadata = root.join("metadata");
    let snapshot = storage.contents(&metadata.join(SNAPSHOT_FILE)).unwrap();
    let state = decode_snapshot(&snapshot).unwrap();
    let journal = storage.contents(&metadata.join(JOURNAL_FILE)).unwrap();
    assert_eq!(
        journal,
        encode_base_entry(state.commit),
        "ops folded into the snapshot"
    );
    let root_user = &state.users[&0];
    let (new, old) = (seal_of(2), seal_of(1));
    assert_eq!(new.reveal(&root_user.password_hash).unwrap(), PASSWORD_HASH);
    assert!(old.reveal(&root_user.password_hash).is_err());
    let tokens: Vec<_> = root_user
        .tokens
        .values()
        .map(|t| t.token_hash.clone())
        .collect();
    assert_eq!(tokens.len(), 2);
    for (index, stored) in (1..).zip(&tokens) {
        assert!(new.stored_forms(token_digest(index)).matches(stored));
    }
}

#[test]
fn a_rotation_moves_every_record_and_credential_to_the_new_key() {
    runtime().block_on(async {
        let storage = MemoryStorage::new();
        let expected = fixture(&storage).await;
        let root = Path::new(ROOT);
        let rotation = plan(&storage, root, Some(OLD), Some(NEW)).await.unwrap();
        let rotated = rotate(&storage, root, &rotation).await.unwrap();
        assert!(rotated.segments >= 4, "{rotated:?}");
        assert_eq!((rotated.records, rotated.credentials), (7, 3));
        assert_rotated(&storage, &expected).await;
        // Done: the new key is in place, and the old one no longer matches.
        let third = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";
        assert!(matches!(
            plan(&storage, root, Some(OLD), Some(third)).await,
            Err(RotateError::OldKey(_))
        ));
        assert!(matches!(
            plan(&storage, root, Some(NEW), Some(NEW)).await,
            Err(RotateError::SameKey)
        ));
        assert!(matches!(
            plan(&storage, root, None, Some(OLD)).await,
            Err(RotateError::OldKeyMissing(_))
        ));
        // And back to plain: what a server without a key reads.
        let rotation = plan(&storage, root, Some(NEW), None).await.unwrap();
        rotate(&storage, root, &rotation).await.unwrap();
        assert_eq!(
            read_with(&storage, None).await.as_deref(),
            Some(&expected[..])
        );
        assert!(!storage.exists(&root.join(CHECK_FILE)).await);
        assert!(matches!(
            plan(&storage, root, Some(NEW), Some(OLD)).await,
            Err(RotateError::NotEncrypted(_))
        ));
    });
}

#[test]
fn a_rotation_stopped_anywhere_and_rerun_finishes() {
    runtime().block_on(async {
        let root = Path::new(ROOT);
        let mut stops = 0;
        for operations in 0.. {
            let storage = MemoryStorage::new();
            let expected = fixture(&storage).await;
            storage.fail_after(Some(operations));
            let rotation = plan(&storage, root, Some(OLD), Some(NEW)).await.unwrap();
            let first = rotate(&storage, root, &rotation).await;
            storage.fail_after(None);
            if first.is_ok() {
                assert_rotated(&storage, &expected).await;
                break;
            }
            stops += 1;
            storage.crash(CrashMode::DropUnsynced);
            // A rerun with another new key is refused once the marker is durable.
            let other = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";
            if storage.exists(&root.join(MARKER_FILE)).await {
                assert!(matches!(
                    plan(&storage, root, Some(OLD), Some(other)).await,
                    Err(RotateError::OtherRotation(_))
                ));
            }
            match plan(&storage, root, Some(OLD), Some(NEW)).await {
                Ok(rotation) => {
                    rotate(&storage, root, &rotation).await.unwrap();
                }
                // Stopped at the last directory sync, after the marker was removed: the
                // rotation was complete, and a rerun says so.
                Err(RotateError::SameKey) => {}
                Err(other) => panic!("after {operations} operations: {other}"),
            }
            assert_rotated(&storage, &expected).await;
            assert!(operations < 2_000, "the rotation never completes");
        }
        assert!(stops > 50, "only {stops} stopping points");
    });
}

#[test]
fn a_damaged_log_stops_the_rotation_before_the_key_changes() {
    runtime().block_on(async {
        let storage = MemoryStorage::new();
        fixture(&storage).await;
        let root = Path::new(ROOT);
        let partition = segment::layout::partition_directory(root, 0, 0, 1);
        let names = storage.list_dir(&partition).await.unwrap();
        let first = segment::format::segment_starts(&names)[0];
        let log = segment::layout::SegmentPaths::new(&partition, first).log;
        let mut bytes = storage.contents(&log).unwrap();
        bytes[100] ^= 0x40;
        storage.replace(&log, bytes);
        let rotation = plan(&storage, root, Some(OLD), Some(NEW)).await.unwrap();
        let stopped = rotate(&storage, root, &rotation).await;
        assert!(
            matches!(stopped, Err(RotateError::Damaged { .. })),
            "{stopped:?}"
        );
        // The marker stays (the server refuses to start) and the check still names the old
        // key, so the rotation is rerun with it once the log is repaired.
        assert!(storage.exists(&root.join(MARKER_FILE)).await);
        assert!(plan(&storage, root, Some(OLD), Some(NEW)).await.is_ok());
    });
}

/// The active segment of partition 0: its log's path.
async fn active_log(storage: &MemoryStorage) -> PathBuf {
    let partition = segment::layout::partition_directory(Path::new(ROOT), 0, 0, 0);
    let names = storage.list_dir(&partition).await.unwrap();
    let last = *segment::format::segment_starts(&names).last().unwrap();
    segment::layout::SegmentPaths::new(&partition, last).log
}

#[test]
fn a_damaged_tail_of_the_active_segment_is_cut_as_start_up_would() {
    runtime().block_on(async {
        let storage = MemoryStorage::new();
        let expected = fixture(&storage).await;
        let log = active_log(&storage).await;
        // A power loss that extended the file with zeros.
        let mut bytes = storage.contents(&log).unwrap();
        bytes.extend_from_slice(&[0; 300]);
        storage.replace(&log, bytes);
        let root = Path::new(ROOT);
        let rotation = plan(&storage, root, Some(OLD), Some(NEW)).await.unwrap();
        let rotated = rotate(&storage, root, &rotation).await.unwrap();
        assert_eq!(rotated.torn_bytes, 300);
        assert_rotated(&storage, &expected).await;
    });
}

#[test]
fn damage_with_intact_records_after_it_stops_the_rotation_rather_than_drop_them() {
    runtime().block_on(async {
        let storage = MemoryStorage::new();
        fixture(&storage).await;
        let log = active_log(&storage).await;
        // The active segment's first record claims a length past the end of the file (a
        // torn-looking stop) while its second record is intact after it.
        let mut bytes = storage.contents(&log).unwrap();
        let first_length = u64::from_le_bytes(bytes[32..40].try_into().unwrap());
        let size = u64::try_from(bytes.len()).unwrap();
        assert!(first_length < size, "the segment holds two records");
        let claimed = size + 100;
        bytes[32..40].copy_from_slice(&claimed.to_le_bytes());
        storage.replace(&log, bytes);
        let root = Path::new(ROOT);
        let rotation = plan(&storage, root, Some(OLD), Some(NEW)).await.unwrap();
        let stopped = rotate(&storage, root, &rotation).await;
        assert!(
            matches!(stopped, Err(RotateError::Damaged { .. })),
            "{stopped:?}"
        );
    });
}

//! Writer tests on a compio runtime: group commit with concurrent appenders on real files
//! (fdatasyncs counted by a wrapping storage) and on memory storage, `Replicated` appends,
//! a failed group sync poisoning the writer, and requests after a close.

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use compio_buf::{IoBuf, IoBufMut};
use proto::batch::{OutgoingMessage, encode_batch};

use super::*;
use crate::log::{Durability, LogConfig};
use crate::storage::compio::{CompioFile, CompioStorage};
use crate::storage::memory::{Faults, MemoryStorage};
use crate::storage::{BufResult, StorageFile};

const APPENDERS: usize = 8;
const APPENDS_PER_APPENDER: usize = 25;
const MESSAGES_PER_BATCH: usize = 3;

#[test]
fn concurrent_persisted_appenders_share_fdatasyncs_on_files() {
    let directory = TempDir::new();
    let syncs = Rc::new(Cell::new(0));
    let storage = CountingStorage {
        inner: CompioStorage::new(),
        syncs: Rc::clone(&syncs),
    };
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = persisted();
        let (log, _) = PartitionLog::open(storage.clone(), &directory.0, config)
            .await
            .unwrap();
        let before = syncs.get();
        let handle = PartitionWriter::spawn(log);
        let acknowledged = append_concurrently(&handle).await;
        let rounds = syncs.get() - before;
        handle.close().await.unwrap();
        check_dense(&acknowledged);
        let appends = acknowledged.len() as u64;
        assert!(rounds >= 1);
        assert!(
            rounds * 2 <= appends,
            "{rounds} fdatasyncs for {appends} appends"
        );

        let (log, report) = PartitionLog::open(storage, &directory.0, config)
            .await
            .unwrap();
        assert_eq!(report.next_offset, appends * MESSAGES_PER_BATCH as u64);
        assert_eq!(log.next_offset(), appends * MESSAGES_PER_BATCH as u64);
    });
}

#[test]
fn concurrent_persisted_appenders_share_fdatasyncs_in_memory() {
    let storage = MemoryStorage::new();
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (log, _) = PartitionLog::open(storage.clone(), &directory(), persisted())
            .await
            .unwrap();
        let before = storage.syncs();
        let handle = PartitionWriter::spawn(log);
        let acknowledged = append_concurrently(&handle).await;
        let rounds = storage.syncs() - before;
        check_dense(&acknowledged);
        // Memory futures never wait, so a round holds a request from every appender waiting
        // (one per appender on compio's FIFO executor).
        let appends = acknowledged.len() as u64;
        assert!(
            rounds * 4 <= appends,
            "{rounds} fdatasyncs for {appends} appends"
        );
        handle.close().await.unwrap();
    });
}

#[test]
fn replicated_appends_are_acknowledged_without_a_sync_each() {
    let storage = MemoryStorage::new();
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = LogConfig::default();
        assert_eq!(config.durability, Durability::Replicated);
        let (log, _) = PartitionLog::open(storage.clone(), &directory(), config)
            .await
            .unwrap();
        let before = storage.syncs();
        let handle = PartitionWriter::spawn(log);
        for index in 0..10_u64 {
            let appended = handle.append(batch(), 1_000 + index).await.unwrap();
            assert_eq!(appended.base_offset, index * MESSAGES_PER_BATCH as u64);
            assert!(!appended.needs_sync);
        }
        assert_eq!(storage.syncs(), before);
        handle.close().await.unwrap();
        assert!(storage.syncs() > before);
    });
}

#[test]
fn a_failed_group_sync_poisons_the_writer() {
    let storage = MemoryStorage::new();
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (log, _) = PartitionLog::open(storage.clone(), &directory(), persisted())
            .await
            .unwrap();
        let handle = PartitionWriter::spawn(log);
        handle.append(batch(), 1_000).await.unwrap();
        storage.set_faults(Faults {
            sync_errors: 1,
            ..Faults::default()
        });
        let failed = handle.append(batch(), 2_000).await;
        assert!(matches!(failed, Err(WriterError::Sync(_))), "{failed:?}");
        let refused = handle.append(batch(), 3_000).await;
        assert!(
            matches!(refused, Err(WriterError::Poisoned(_))),
            "{refused:?}"
        );
        let closed = handle.close().await;
        assert!(
            matches!(closed, Err(WriterError::Poisoned(_))),
            "{closed:?}"
        );
    });
}

#[test]
fn invalid_batches_fail_alone_and_requests_after_close_fail() {
    let storage = MemoryStorage::new();
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (log, _) = PartitionLog::open(storage.clone(), &directory(), persisted())
            .await
            .unwrap();
        let handle = PartitionWriter::spawn(log);
        let invalid = handle.append(vec![0_u8; 7], 1_000).await;
        assert!(
            matches!(invalid, Err(WriterError::Append(_))),
            "{invalid:?}"
        );
        let appended = handle.append(batch(), 1_000).await.unwrap();
        assert_eq!(appended.base_offset, 0);
        assert!(!appended.needs_sync);

        let other = handle.clone();
        handle.close().await.unwrap();
        let (late, buffer) = other.append_returning(batch(), 2_000).await;
        assert!(matches!(late, Err(WriterError::Closed)), "{late:?}");
        assert!(buffer.is_some());
    });
}

/// Runs [`APPENDERS`] tasks of [`APPENDS_PER_APPENDER`] appends each; returns every
/// acknowledgement.
async fn append_concurrently(handle: &WriterHandle<Vec<u8>>) -> Vec<Appended> {
    let tasks: Vec<_> = (0..APPENDERS)
        .map(|appender| {
            let handle = handle.clone();
            compio::runtime::spawn(async move {
                let mut acknowledged = Vec::new();
                let mut buffer = batch();
                for index in 0..APPENDS_PER_APPENDER {
                    let now_us = (appender * APPENDS_PER_APPENDER + index) as u64;
                    let (result, returned) = handle.append_returning(buffer, now_us).await;
                    acknowledged.push(result.unwrap());
                    // A stamped record is appended again as is: offsets are restamped.
                    buffer = returned.unwrap();
                }
                acknowledged
            })
        })
        .collect();
    let mut acknowledged = Vec::new();
    for task in tasks {
        acknowledged.extend(task.await.unwrap());
    }
    assert_eq!(acknowledged.len(), APPENDERS * APPENDS_PER_APPENDER);
    acknowledged
}

/// Offsets are unique and dense from 0, and every acknowledgement had its sync.
fn check_dense(acknowledged: &[Appended]) {
    let mut sorted = acknowledged.to_vec();
    sorted.sort_by_key(|appended| appended.base_offset);
    let mut next_offset = 0;
    for appended in &sorted {
        assert_eq!(appended.base_offset, next_offset);
        assert_eq!(appended.message_count as usize, MESSAGES_PER_BATCH);
        assert!(!appended.needs_sync);
        next_offset += u64::from(appended.message_count);
    }
}

fn persisted() -> LogConfig {
    LogConfig {
        durability: Durability::Persisted,
        ..LogConfig::default()
    }
}

fn directory() -> PathBuf {
    PathBuf::from("/data/streams/0/topics/0/partitions/0")
}

fn batch() -> Vec<u8> {
    let outgoing: Vec<_> = (0..MESSAGES_PER_BATCH)
        .map(|index| OutgoingMessage {
            id: index as u128 + 1,
            origin_timestamp: 1_000,
            payload: b"group commit",
            user_headers: &[],
        })
        .collect();
    let mut bytes = Vec::new();
    encode_batch(&outgoing, None, &mut bytes).unwrap();
    bytes
}

/// The compio storage, counting `sync_data` calls on its files.
#[derive(Clone)]
struct CountingStorage {
    inner: CompioStorage,
    syncs: Rc<Cell<u64>>,
}

struct CountingFile {
    inner: CompioFile,
    syncs: Rc<Cell<u64>>,
}

impl Storage for CountingStorage {
    type File = CountingFile;

    async fn open(&self, path: &Path, create: bool) -> io::Result<CountingFile> {
        Ok(CountingFile {
            inner: self.inner.open(path, create).await?,
            syncs: Rc::clone(&self.syncs),
        })
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path).await
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(path).await
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path).await
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path).await
    }

    async fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path).await
    }
}

impl StorageFile for CountingFile {
    async fn read_at<B: IoBufMut>(&self, buffer: B, position: u64) -> BufResult<usize, B> {
        self.inner.read_at(buffer, position).await
    }

    async fn write_all_at<B: IoBuf>(&mut self, buffer: B, position: u64) -> BufResult<(), B> {
        self.inner.write_all_at(buffer, position).await
    }

    async fn sync_data(&self) -> io::Result<()> {
        self.syncs.set(self.syncs.get() + 1);
        self.inner.sync_data().await
    }

    async fn size(&self) -> io::Result<u64> {
        self.inner.size().await
    }

    async fn set_len(&self, length: u64) -> io::Result<()> {
        self.inner.set_len(length).await
    }
}

/// A fresh directory under `std::env::temp_dir()`, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "segment-writer-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover directory under the temp dir harms nobody.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

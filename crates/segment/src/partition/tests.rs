//! Partition task tests on a compio runtime: group commit with concurrent appenders on real
//! files (fdatasyncs counted by a wrapping storage) and on memory storage, `Replicated`
//! appends, a failed group sync poisoning the task, reads after appends, offsets, purge,
//! producer dedupe, segment deletion, jobs queued behind or sent after a close, a full disk
//! refusing an append that is then retried, and a quarantined partition.

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use compio_buf::{IoBuf, IoBufMut};
use proto::batch::{OutgoingMessage, encode_batch};

use super::*;
use crate::storage::compio::{CompioFile, CompioStorage};
use crate::storage::memory::{CrashMode, Faults, MemoryStorage};
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
        gate: Rc::default(),
    };
    runtime().block_on(async {
        let spec = spec(&directory.0, Durability::Persisted);
        let handle = PartitionHandle::open(storage.clone(), spec.clone(), || {})
            .await
            .unwrap();
        let before = syncs.get();
        let acknowledged = append_concurrently(&handle).await;
        let rounds = syncs.get() - before;
        handle.close(false).await.unwrap();
        check_dense(&acknowledged);
        let appends = acknowledged.len() as u64;
        assert!(rounds >= 1);
        assert!(
            rounds * 2 <= appends,
            "{rounds} fdatasyncs for {appends} appends"
        );

        let (log, report) = PartitionLog::open(storage, &directory.0, spec.log)
            .await
            .unwrap();
        assert_eq!(report.next_offset, appends * MESSAGES_PER_BATCH as u64);
        assert_eq!(log.next_offset(), appends * MESSAGES_PER_BATCH as u64);
    });
}

#[test]
fn concurrent_persisted_appenders_share_fdatasyncs_in_memory() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let changes = Rc::new(Cell::new(0_u32));
        let counted = Rc::clone(&changes);
        let on_change = move || counted.set(counted.get() + 1);
        let spec = spec(&directory(), Durability::Persisted);
        let handle = PartitionHandle::open(storage.clone(), spec, on_change)
            .await
            .unwrap();
        let before = storage.syncs();
        let acknowledged = append_concurrently(&handle).await;
        let rounds = storage.syncs() - before;
        check_dense(&acknowledged);
        // Memory futures never wait, so a round holds a job from every appender waiting
        // (one per appender on compio's FIFO executor).
        let appends = acknowledged.len() as u64;
        assert!(
            rounds * 4 <= appends,
            "{rounds} fdatasyncs for {appends} appends"
        );
        // One change per round: parked readers are woken once per sync, not per append.
        assert_eq!(u64::from(changes.get()), rounds);
        handle.close(false).await.unwrap();
    });
}

#[test]
fn replicated_appends_are_acknowledged_without_a_sync_each() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let spec = spec(&directory(), Durability::Replicated);
        let handle = PartitionHandle::open(storage.clone(), spec, || {})
            .await
            .unwrap();
        let before = storage.syncs();
        for index in 0..10_u64 {
            let appended = handle.append(batch(MESSAGES_PER_BATCH, None), 1_000 + index, None);
            let appended = appended.await.unwrap();
            assert_eq!(appended.base_offset, index * MESSAGES_PER_BATCH as u64);
        }
        assert_eq!(storage.syncs(), before);
        handle.close(false).await.unwrap();
        assert!(storage.syncs() > before);
    });
}

/// A `Replicated` partition whose threshold asks for a sync every `messages` messages.
fn syncing_every(messages: u32) -> PartitionSpec {
    let mut spec = spec(&directory(), Durability::Replicated);
    spec.log.messages_required_to_save = messages;
    spec
}

#[test]
fn replicated_threshold_syncs_run_beside_the_appends_and_reads() {
    let memory = MemoryStorage::new();
    let syncs = Rc::new(Cell::new(0));
    let storage = CountingStorage {
        inner: memory.clone(),
        syncs: Rc::clone(&syncs),
        gate: Rc::default(),
    };
    runtime().block_on(async {
        let handle = PartitionHandle::open(storage.clone(), syncing_every(6), || {})
            .await
            .unwrap();
        let before = syncs.get();
        storage.gate.set_shut(true);
        // The second append reaches the threshold; its sync hangs behind the gate, yet it
        // and the appends after it are answered.
        for index in 0..4_u64 {
            let appended = handle.append(batch(3, None), 1_000 + index, None).await;
            assert_eq!(appended.unwrap().base_offset, index * 3);
        }
        assert_eq!(syncs.get(), before, "the sync still waits");
        // Reads, offset writes and lookups are answered while it hangs.
        let reading = handle.clone();
        let reader = compio::runtime::spawn(async move {
            let records = reading.read(ReadStart::First, 100, u64::MAX).await?;
            reading.store_offset(OffsetOwner::Consumer(1), 5).await?;
            let segments = reading.segments().await?;
            Ok::<_, PartitionError>((records.messages_count, segments.len()))
        });
        compio::runtime::time::sleep(std::time::Duration::from_millis(5)).await;
        assert!(reader.is_finished(), "the read does not wait for the sync");
        assert_eq!(reader.await.unwrap().unwrap(), (12, 1));
        assert_eq!(syncs.get(), before, "the sync still waits");
        // A segment deletion changes files the sync flushes: it waits for it.
        let deleting = handle.clone();
        let deleter =
            compio::runtime::spawn(async move { deleting.delete_oldest_segments(1).await });
        compio::runtime::time::sleep(std::time::Duration::from_millis(5)).await;
        assert!(!deleter.is_finished(), "the deletion waits for the sync");
        storage.gate.set_shut(false);
        assert_eq!(
            deleter.await.unwrap().unwrap(),
            0,
            "the active segment stays"
        );
        assert!(syncs.get() > before);
        memory.crash(CrashMode::DropUnsynced);
    });
    runtime().block_on(async {
        let handle = PartitionHandle::open(memory.clone(), syncing_every(6), || {})
            .await
            .unwrap();
        let records = handle.read(ReadStart::First, 100, u64::MAX).await.unwrap();
        assert!(
            records.messages_count >= 6,
            "what the threshold sync covered survives: {}",
            records.messages_count
        );
    });
}

/// The message count waits out the interval; the owner's tick then starts the sync that
/// no append came to start, and what it covered survives a power loss.
#[test]
fn a_tick_starts_the_threshold_sync_that_waited_for_its_interval() {
    let storage = MemoryStorage::new();
    let mut spec = syncing_every(3);
    spec.log.sync_interval_us = 1_000_000;
    runtime().block_on(async {
        let handle = PartitionHandle::open(storage.clone(), spec.clone(), || {})
            .await
            .unwrap();
        let before = storage.syncs();
        // The first threshold syncs at once (no sync started yet) ...
        handle.append(batch(3, None), 10, None).await.unwrap();
        let first = wait_for_syncs(&storage, before + 1).await;
        // ... the next one within the interval waits, however long the task idles.
        handle.append(batch(3, None), 20, None).await.unwrap();
        compio::runtime::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(storage.syncs(), first, "the count waits for the interval");
        handle.tick(500_000);
        compio::runtime::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(
            storage.syncs(),
            first,
            "a tick inside the interval starts nothing"
        );
        handle.tick(1_000_010);
        wait_for_syncs(&storage, first + 1).await;
        storage.crash(CrashMode::DropUnsynced);
    });
    runtime().block_on(async {
        let handle = PartitionHandle::open(storage.clone(), spec, || {})
            .await
            .unwrap();
        let records = handle.read(ReadStart::First, 100, u64::MAX).await.unwrap();
        assert_eq!(
            records.messages_count, 6,
            "the ticked sync covered both appends"
        );
    });
}

/// Thresholds crossed while a sync ran still get theirs when a segment deletion, not an
/// append, is what settles it: the owner's ticks must keep coming.
#[test]
fn a_sync_settled_by_a_deletion_leaves_the_next_one_to_the_ticks() {
    let memory = MemoryStorage::new();
    let storage = CountingStorage {
        inner: memory.clone(),
        syncs: Rc::default(),
        gate: Rc::default(),
    };
    let mut spec = syncing_every(3);
    spec.log.sync_interval_us = 1_000_000;
    runtime().block_on(async {
        let handle = PartitionHandle::open(storage.clone(), spec, || {})
            .await
            .unwrap();
        storage.gate.set_shut(true);
        // The first threshold starts a sync, which hangs; the second is crossed beside it.
        handle.append(batch(3, None), 10, None).await.unwrap();
        handle.append(batch(3, None), 20, None).await.unwrap();
        let deleting = handle.clone();
        let deleter =
            compio::runtime::spawn(async move { deleting.delete_oldest_segments(1).await });
        compio::runtime::time::sleep(std::time::Duration::from_millis(5)).await;
        storage.gate.set_shut(false);
        deleter.await.unwrap().unwrap();
        let settled = memory.syncs();
        handle.tick(1_000_020);
        wait_for_syncs(&memory, settled + 1).await;
    });
}

/// Waits (a bounded while) until `storage` counted at least `count` syncs; returns the count.
async fn wait_for_syncs(storage: &MemoryStorage, count: u64) -> u64 {
    for _ in 0..200 {
        if storage.syncs() >= count {
            return storage.syncs();
        }
        compio::runtime::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("{} syncs, {count} expected", storage.syncs());
}

#[test]
fn a_failed_threshold_sync_poisons_the_partition_but_keeps_its_acknowledgements() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let handle = PartitionHandle::open(storage.clone(), syncing_every(2), || {})
            .await
            .unwrap();
        storage.set_faults(Faults {
            sync_errors: 1,
            ..Faults::default()
        });
        let acknowledged = handle.append(batch(2, None), 1_000, None).await;
        assert!(acknowledged.is_ok(), "reached the kernel: {acknowledged:?}");
        let refused = handle.append(batch(1, None), 2_000, None).await;
        assert!(
            matches!(
                refused,
                Err(PartitionError::Append(AppendError::Poisoned { .. }))
            ),
            "{refused:?}"
        );
        assert!(handle.stats().quarantined);
    });
}

#[test]
fn a_failed_group_sync_poisons_the_partition() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let spec = spec(&directory(), Durability::Persisted);
        let handle = PartitionHandle::open(storage.clone(), spec, || {})
            .await
            .unwrap();
        handle.append(batch(1, None), 1_000, None).await.unwrap();
        storage.set_faults(Faults {
            sync_errors: 1,
            ..Faults::default()
        });
        let failed = handle.append(batch(1, None), 2_000, None).await;
        assert!(matches!(failed, Err(PartitionError::Sync(_))), "{failed:?}");
        let refused = handle.append(batch(1, None), 3_000, None).await;
        assert!(
            matches!(refused, Err(PartitionError::Poisoned(_))),
            "{refused:?}"
        );
        let closed = handle.close(false).await;
        assert!(
            matches!(closed, Err(PartitionError::Poisoned(_))),
            "{closed:?}"
        );
    });
}

/// A batch in a pool block (a request body read on another shard) is stamped and written
/// where it lies: the task hands back the very block, and the record reads back as that
/// block's stamped bytes. The block is made on another thread, as a connection's shard
/// would, and comes home to its pool when dropped here.
#[test]
fn a_pooled_batch_is_written_from_its_own_block() {
    let storage = MemoryStorage::new();
    let record = batch(3, None);
    let (sent, address) = std::thread::spawn(move || {
        let pool = pool::Pool::new(pool::PoolConfig::default()).unwrap();
        let mut body = pool.acquire(record.len() + 16).unwrap();
        body.extend_from_slice(b"metadata");
        body.extend_from_slice(&record);
        body.extend_from_slice(b"trailing");
        let sent = body.into_send(8..8 + record.len());
        let address = sent.as_ptr() as usize;
        (sent, address)
    })
    .join()
    .unwrap();
    runtime().block_on(async {
        let spec = spec(&directory(), Durability::Replicated);
        let handle = PartitionHandle::open(storage.clone(), spec, || {})
            .await
            .unwrap();
        let (result, returned) = handle.append_returning(sent.into(), 1_000, None).await;
        assert_eq!(result.unwrap().messages_count, 3);
        let Some(AppendBuffer::Pooled(returned)) = returned else {
            panic!("the pooled block came back as another kind of buffer");
        };
        assert_eq!(returned.as_ptr() as usize, address, "no copy was appended");
        let records = handle.read(ReadStart::First, 3, 1 << 20).await.unwrap();
        assert_eq!(records.messages_count, 3);
        // The record as read is the batch as sent, stamped (its header differs) and whole.
        assert_eq!(records.bytes.len(), returned.len());
        assert_eq!(&records.bytes[..], &returned[..]);
        drop(returned);
        handle.close(false).await.unwrap();
    });
}

/// A job another shard's thread sends as the task stops taking jobs is answered `Closed`.
/// The task's channel outlives the task while any handle does, so a job queued after its
/// last receive stayed there unanswered, and its caller (a deferred poll whose topic was
/// deleted, in a probe under load) waited forever. Here the job is sent while the close
/// tells its change to the owner, after the close's own drain of the queue.
#[test]
fn a_job_sent_from_another_thread_as_the_task_stops_is_answered() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let closing = Arc::new(AtomicBool::new(false));
    let (go, go_received) = std::sync::mpsc::channel::<()>();
    let (sent, sent_received) = std::sync::mpsc::channel::<()>();
    let waited = std::time::Duration::from_secs(5);
    let on_change = {
        let closing = Arc::clone(&closing);
        move || {
            if closing.load(Ordering::SeqCst) {
                let _ = go.send(());
                let _ = sent_received.recv_timeout(waited);
            }
        }
    };
    runtime().block_on(async {
        let spec = spec(&directory(), Durability::Replicated);
        let handle = PartitionHandle::open(MemoryStorage::new(), spec, on_change)
            .await
            .unwrap();
        let remote = handle.clone();
        let reader = std::thread::spawn(move || {
            go_received.recv().unwrap();
            runtime().block_on(async move {
                let mut read = std::pin::pin!(remote.read(ReadStart::First, 1, u64::MAX));
                // One poll queues the job; then the task may go on stopping.
                poll_fn(|context| {
                    let _ = read.as_mut().poll(context);
                    Poll::Ready(())
                })
                .await;
                sent.send(()).unwrap();
                compio::time::timeout(waited, read).await
            })
        });
        closing.store(true, Ordering::SeqCst);
        handle.close(false).await.unwrap();
        let read = reader.join().unwrap();
        let read = read.expect("the job sent as the task stopped is answered");
        assert!(matches!(read, Err(PartitionError::Closed)), "{read:?}");
    });
}

#[test]
fn invalid_batches_fail_alone_and_jobs_after_a_close_fail() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let spec = spec(&directory(), Durability::Persisted);
        let handle = PartitionHandle::open(storage.clone(), spec, || {})
            .await
            .unwrap();
        let invalid = handle.append(vec![0_u8; 7], 1_000, None).await;
        assert!(
            matches!(invalid, Err(PartitionError::Append(_))),
            "{invalid:?}"
        );
        let appended = handle.append(batch(1, None), 1_000, None).await.unwrap();
        assert_eq!(appended.base_offset, 0);

        // Sent in this order on compio's FIFO executor: the append waits behind the close.
        let closing = handle.clone();
        let close = compio::runtime::spawn(async move { closing.close(false).await });
        let queued = handle.clone();
        let behind =
            compio::runtime::spawn(async move { queued.append(batch(1, None), 2_000, None).await });
        close.await.unwrap().unwrap();
        let behind = behind.await.unwrap();
        assert!(matches!(behind, Err(PartitionError::Closed)), "{behind:?}");

        let (late, buffer) = handle
            .append_returning(batch(1, None).into(), 3_000, None)
            .await;
        assert!(matches!(late, Err(PartitionError::Closed)), "{late:?}");
        assert!(buffer.is_some());
        assert!(matches!(
            handle.read(ReadStart::First, 1, 1 << 20).await,
            Err(PartitionError::Closed)
        ));
    });
}

#[test]
fn concurrent_persisted_appends_are_dense_and_share_syncs() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let directory = Path::new("/data/p0");
        let handle = PartitionHandle::open(
            storage.clone(),
            spec(directory, Durability::Persisted),
            || {},
        )
        .await
        .unwrap();
        let before = storage.syncs();
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let handle = handle.clone();
                compio::runtime::spawn(async move { handle.append(batch(2, None), 1, None).await })
            })
            .collect();
        let mut offsets = Vec::new();
        for task in tasks {
            offsets.push(task.await.unwrap().unwrap().base_offset);
        }
        offsets.sort_unstable();
        assert_eq!(
            offsets,
            (0..16).map(|index| index * 2).collect::<Vec<u64>>()
        );
        let syncs = storage.syncs() - before;
        assert!(syncs < 16, "{syncs} syncs for 16 appends");
        let stats = handle.stats();
        assert_eq!((stats.messages_count, stats.current_offset), (32, 31));
        let records = handle.read(ReadStart::Offset(5), 4, 1 << 20).await.unwrap();
        assert_eq!(records.messages_count, 4);
        assert_eq!(records.last_offset, Some(8));
        handle.close(false).await.unwrap();
        assert!(matches!(
            handle.read(ReadStart::First, 1, 1 << 20).await,
            Err(PartitionError::Closed)
        ));
    });
}

#[test]
fn offsets_purge_and_reopen_on_files() {
    let root = TempDir::new();
    runtime().block_on(async {
        let directory = root.0.join("p");
        let storage = CompioStorage::new();
        let handle = PartitionHandle::open(storage, spec(&directory, Durability::Persisted), || {})
            .await
            .unwrap();
        handle.append(batch(3, None), 1, None).await.unwrap();
        handle
            .store_offset(OffsetOwner::Consumer(1), 2)
            .await
            .unwrap();
        assert_eq!(handle.stored_offset(OffsetOwner::Consumer(1)), Some(2));
        handle.close(false).await.unwrap();

        let handle = PartitionHandle::open(storage, spec(&directory, Durability::Persisted), || {})
            .await
            .unwrap();
        assert_eq!(handle.stored_offset(OffsetOwner::Consumer(1)), Some(2));
        assert_eq!(handle.stats().messages_count, 3);
        handle.purge().await.unwrap();
        let stats = handle.stats();
        assert_eq!(
            (stats.messages_count, stats.next_offset, stats.size_bytes),
            (0, 0, 0)
        );
        assert_eq!(handle.stored_offsets(), vec![]);
        let appended = handle.append(batch(1, None), 2, None).await.unwrap();
        assert_eq!(appended.base_offset, 0);
        assert!(
            !handle
                .delete_offset(OffsetOwner::Consumer(1))
                .await
                .unwrap()
        );
        handle.close(true).await.unwrap();
        assert!(!directory.exists());
    });
}

#[test]
fn producer_retransmission_is_confirmed_once() {
    runtime().block_on(async {
        let handle = PartitionHandle::open(
            MemoryStorage::new(),
            spec(Path::new("/p"), Durability::Replicated),
            || {},
        )
        .await
        .unwrap();
        let producer = Producer {
            producer_id: 1 << 20,
            epoch: 0,
            base_sequence: 0,
        };
        let first = handle
            .append(batch(2, Some(producer)), 1, Some((producer, 2)))
            .await
            .unwrap();
        let again = handle
            .append(batch(2, Some(producer)), 1, Some((producer, 2)))
            .await
            .unwrap();
        assert_eq!(again.base_offset, first.base_offset);
        assert!(again.duplicate && !first.duplicate);
        assert_eq!(handle.stats().messages_count, 2);
        let unknown = Producer {
            base_sequence: 9,
            producer_id: 5,
            epoch: 0,
        };
        let refused = handle.append(batch(1, None), 1, Some((unknown, 1))).await;
        assert!(matches!(
            refused,
            Err(PartitionError::Producer(ProducerRefusal::Unknown))
        ));
    });
}

/// Runs [`APPENDERS`] tasks of [`APPENDS_PER_APPENDER`] appends each, every one reusing
/// its buffer; returns every acknowledgement.
async fn append_concurrently(handle: &PartitionHandle) -> Vec<AppendOutcome> {
    let tasks: Vec<_> = (0..APPENDERS)
        .map(|appender| {
            let handle = handle.clone();
            compio::runtime::spawn(async move {
                let mut acknowledged = Vec::new();
                let mut buffer = batch(MESSAGES_PER_BATCH, None);
                for index in 0..APPENDS_PER_APPENDER {
                    let now_us = (appender * APPENDS_PER_APPENDER + index) as u64;
                    let (result, returned) =
                        handle.append_returning(buffer.into(), now_us, None).await;
                    acknowledged.push(result.unwrap());
                    // A stamped record is appended again as is: offsets are restamped.
                    buffer = returned.and_then(AppendBuffer::into_heap).unwrap();
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

/// Offsets are unique and dense from 0.
fn check_dense(acknowledged: &[AppendOutcome]) {
    let mut sorted = acknowledged.to_vec();
    sorted.sort_by_key(|appended| appended.base_offset);
    let mut next_offset = 0;
    for appended in &sorted {
        assert_eq!(appended.base_offset, next_offset);
        assert_eq!(appended.messages_count as usize, MESSAGES_PER_BATCH);
        assert!(!appended.duplicate);
        next_offset += u64::from(appended.messages_count);
    }
}

/// A batch of `count` messages as a producer sends it.
fn batch(count: usize, producer: Option<Producer>) -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = (0..count).map(|index| vec![b'm'; index + 1]).collect();
    let messages: Vec<OutgoingMessage<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(index, payload)| OutgoingMessage {
            id: u128::try_from(index).unwrap() + 1,
            origin_timestamp: 1_700_000_000_000_000,
            payload,
            user_headers: &[],
        })
        .collect();
    let mut bytes = Vec::new();
    encode_batch(&messages, producer, &mut bytes).unwrap();
    bytes
}

fn spec(directory: &Path, durability: Durability) -> PartitionSpec {
    PartitionSpec {
        directory: directory.to_path_buf(),
        log: LogConfig {
            durability,
            ..LogConfig::default()
        },
        offsets_durability: durability,
    }
}

fn directory() -> PathBuf {
    PathBuf::from("/data/streams/0/topics/0/partitions/0")
}

fn runtime() -> compio::runtime::Runtime {
    compio::runtime::Runtime::new().unwrap()
}

/// A storage (compio's unless told) counting `sync_data` calls on its files, whose syncs
/// wait while its gate is shut.
#[derive(Clone)]
struct CountingStorage<S = CompioStorage> {
    inner: S,
    syncs: Rc<Cell<u64>>,
    gate: Rc<SyncGate>,
}

struct CountingFile<F = CompioFile> {
    inner: F,
    syncs: Rc<Cell<u64>>,
    gate: Rc<SyncGate>,
}

/// Holds every `sync_data` of a [`CountingStorage`] while shut.
#[derive(Default)]
struct SyncGate {
    shut: Cell<bool>,
    waiting: std::cell::RefCell<Vec<std::task::Waker>>,
}

impl SyncGate {
    fn set_shut(&self, shut: bool) {
        self.shut.set(shut);
        if !shut {
            self.waiting
                .take()
                .into_iter()
                .for_each(std::task::Waker::wake);
        }
    }

    async fn passed(&self) {
        poll_fn(|context| {
            if self.shut.get() {
                self.waiting.borrow_mut().push(context.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
    }
}

impl<S: Storage> Storage for CountingStorage<S> {
    fn boot_id(&self) -> Option<[u8; 16]> {
        self.inner.boot_id()
    }

    fn space(&self, path: &Path) -> Option<crate::storage::Space> {
        self.inner.space(path)
    }

    type File = CountingFile<S::File>;

    async fn open(&self, path: &Path, create: bool) -> io::Result<Self::File> {
        Ok(CountingFile {
            inner: self.inner.open(path, create).await?,
            syncs: Rc::clone(&self.syncs),
            gate: Rc::clone(&self.gate),
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

    async fn open_private(&self, path: &Path) -> io::Result<Self::File> {
        Ok(CountingFile {
            inner: self.inner.open_private(path).await?,
            syncs: Rc::clone(&self.syncs),
            gate: Rc::clone(&self.gate),
        })
    }

    async fn create_dir_all_private(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all_private(path).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to).await
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

impl<F: StorageFile> StorageFile for CountingFile<F> {
    async fn read_at<B: IoBufMut>(&self, buffer: B, position: u64) -> BufResult<usize, B> {
        self.inner.read_at(buffer, position).await
    }

    async fn write_all_at<B: IoBuf>(&mut self, buffer: B, position: u64) -> BufResult<(), B> {
        self.inner.write_all_at(buffer, position).await
    }

    fn duplicate(&self) -> io::Result<Self> {
        Ok(Self {
            inner: self.inner.duplicate()?,
            syncs: Rc::clone(&self.syncs),
            gate: Rc::clone(&self.gate),
        })
    }

    async fn sync_data(&self) -> io::Result<()> {
        self.gate.passed().await;
        self.syncs.set(self.syncs.get() + 1);
        self.inner.sync_data().await
    }

    async fn size(&self) -> io::Result<u64> {
        self.inner.size().await
    }

    async fn set_len(&self, length: u64) -> io::Result<()> {
        self.inner.set_len(length).await
    }

    async fn preallocate(&self, position: u64, length: u64) -> io::Result<()> {
        self.inner.preallocate(position, length).await
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
            "segment-partition-{}-{nanos}-{}",
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

#[test]
fn delete_segments_keeps_the_active_one_and_updates_the_stats() {
    runtime().block_on(async {
        let mut spec = spec(&directory(), Durability::Replicated);
        spec.log.segment_size_bytes = 1_000;
        let handle = PartitionHandle::open(MemoryStorage::new(), spec, || {})
            .await
            .unwrap();
        for round in 0..12 {
            handle.append(batch(20, None), round, None).await.unwrap();
        }
        let before = handle.stats();
        assert!(before.segments_count > 3, "{before:?}");
        assert_eq!(handle.delete_oldest_segments(2).await.unwrap(), 2);
        let after = handle.stats();
        assert_eq!(after.segments_count, before.segments_count - 2);
        assert!(after.messages_count < before.messages_count);
        assert_eq!(after.next_offset, before.next_offset);
        let all = usize::MAX;
        let left = handle.delete_oldest_segments(all).await.unwrap();
        assert_eq!(left, usize::try_from(after.segments_count).unwrap() - 1);
        assert_eq!(handle.stats().segments_count, 1);
        handle.close(true).await.unwrap();
    });
}

#[test]
fn a_full_disk_refuses_an_append_and_the_same_batch_then_takes_its_offset() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let spec = spec(&directory(), Durability::Persisted);
        let handle = PartitionHandle::open(storage.clone(), spec.clone(), || {})
            .await
            .unwrap();
        for _ in 0..3 {
            handle.append(batch(2, None), 1_000, None).await.unwrap();
        }
        storage.set_capacity(Some(storage.used_bytes() + 10));
        let before = handle.stats();
        let full = handle.append(batch(2, None), 2_000, None).await;
        let no_space = matches!(&full, Err(PartitionError::Append(AppendError::Io { source, .. }))
            if source.raw_os_error() == Some(28));
        assert!(no_space, "{full:?}");
        assert_eq!(handle.stats(), before, "nothing acknowledged");
        let read = handle.read(ReadStart::First, 100, 1 << 20).await.unwrap();
        assert_eq!(read.messages_count, 6, "reads go on");
        storage.set_capacity(None);
        let retried = handle.append(batch(2, None), 3_000, None).await.unwrap();
        assert_eq!(retried.base_offset, 6);
        let read = handle.read(ReadStart::First, 100, 1 << 20).await.unwrap();
        assert_eq!((read.messages_count, read.last_offset), (8, Some(7)));
        handle.close(false).await.unwrap();
        storage.crash(CrashMode::DropUnsynced);
        let (log, _) = PartitionLog::open(storage, &directory(), spec.log)
            .await
            .unwrap();
        assert_eq!(log.next_offset(), 8, "each message once, none lost");
    });
}

#[test]
fn a_quarantined_partition_reads_refuses_appends_and_a_purge_starts_it_afresh() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let spec = spec(&directory(), Durability::Persisted);
        let handle = PartitionHandle::open(storage.clone(), spec.clone(), || {})
            .await
            .unwrap();
        for _ in 0..3 {
            handle.append(batch(2, None), 1_000, None).await.unwrap();
        }
        handle.close(false).await.unwrap();
        let log = crate::layout::SegmentPaths::new(&directory(), 0).log;
        let mut bytes = storage.contents(&log).unwrap();
        let record = batch(2, None).len();
        bytes[record + 256 + 48] ^= 0x04;
        storage.replace(&log, bytes);

        let handle = PartitionHandle::open(storage.clone(), spec.clone(), || {})
            .await
            .unwrap();
        assert!(handle.stats().quarantined);
        let refused = handle.append(batch(2, None), 2_000, None).await;
        assert!(
            matches!(
                refused,
                Err(PartitionError::Append(AppendError::Quarantined { .. }))
            ),
            "{refused:?}"
        );
        let read = handle.read(ReadStart::First, 100, 1 << 20).await.unwrap();
        assert_eq!(read.messages_count, 2, "up to the damage");
        handle.purge().await.unwrap();
        assert!(!handle.stats().quarantined);
        let fresh = handle.append(batch(2, None), 3_000, None).await.unwrap();
        assert_eq!(fresh.base_offset, 0, "a purge starts the offsets over");
        handle.close(false).await.unwrap();
    });
}

/// A purge cut short at any step (the disk refusing every change from there on, as a crash
/// would stop it) leaves the partition whole or empty when it opens again, its stored
/// offsets with it: never some of its old records, which a removal file by file could leave
/// behind to be served again, nor its records without their offsets.
#[test]
fn a_purge_cut_short_at_any_step_leaves_all_or_nothing() {
    for allowed in 0..24 {
        let storage = MemoryStorage::new();
        runtime().block_on(async {
            let mut spec = spec(&directory(), Durability::Persisted);
            // A segment per record: four segments' files to remove.
            spec.log.segment_size_bytes = 1;
            let handle = PartitionHandle::open(storage.clone(), spec.clone(), || {})
                .await
                .unwrap();
            for _ in 0..4 {
                handle.append(batch(2, None), 1_000, None).await.unwrap();
            }
            let owner = OffsetOwner::Consumer(1);
            handle.store_offset(owner, 5).await.unwrap();
            storage.fail_after(Some(allowed));
            let purged = handle.purge().await;
            storage.fail_after(None);
            drop(handle);
            let handle = PartitionHandle::open(storage.clone(), spec, || {})
                .await
                .unwrap();
            let read = handle.read(ReadStart::First, 100, 1 << 20).await.unwrap();
            assert!(
                read.messages_count == 0 || read.messages_count == 8,
                "after {allowed} changes ({purged:?}): {} messages",
                read.messages_count
            );
            if purged.is_ok() {
                assert_eq!(read.messages_count, 0, "after {allowed}: purged");
            }
            // The stored offset goes with the messages, or stays with them.
            let stored = handle.stored_offset(owner);
            let expected = (read.messages_count == 8).then_some(5);
            assert_eq!(stored, expected, "after {allowed}: the stored offset");
            let aside = PathBuf::from("/data/streams/0/topics/0/partitions/0.purging");
            assert!(!storage.exists(&aside).await, "after {allowed}: left aside");
        });
    }
}

/// The shard's identity file survives a purge (the partition keeps its identity), and an
/// earlier purge's leftover (a crash after its rename) does not stop the next one.
#[test]
fn a_purge_keeps_the_identity_file_and_clears_an_earlier_purges_leftover() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let spec = spec(&directory(), Durability::Persisted);
        let handle = PartitionHandle::open(storage.clone(), spec.clone(), || {})
            .await
            .unwrap();
        handle.append(batch(2, None), 1_000, None).await.unwrap();
        let identity = directory().join(crate::layout::IDENTITY_FILE);
        let mut file = storage.open(&identity, true).await.unwrap();
        let (written, _) = file.write_all_at(b"who".to_vec(), 0).await;
        written.unwrap();
        drop(file);
        handle.purge().await.unwrap();
        assert_eq!(storage.contents(&identity).unwrap(), b"who");
        // A leftover from an earlier purge: the next purge clears it and moves aside.
        let stuck = PathBuf::from("/data/streams/0/topics/0/partitions/0.purging");
        storage.create_dir_all(&stuck).await.unwrap();
        handle.append(batch(2, None), 2_000, None).await.unwrap();
        handle.purge().await.unwrap();
        let read = handle.read(ReadStart::First, 100, 1 << 20).await.unwrap();
        assert_eq!(read.messages_count, 0);
        handle.close(false).await.unwrap();
        let reopened = PartitionHandle::open(storage.clone(), spec, || {}).await;
        assert!(reopened.is_ok());
    });
}

//! Partition task tests on a compio runtime over memory storage and real files: group commit,
//! reads after appends, offsets, purge, producer dedupe and close.

use std::path::Path;

use proto::batch::{OutgoingMessage, encode_batch};
use segment::storage::compio::CompioStorage;
use segment::storage::memory::MemoryStorage;

use super::*;

/// A batch of `count` messages as a producer sends it.
pub(crate) fn batch(count: usize, producer: Option<Producer>) -> Vec<u8> {
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

fn runtime() -> compio::runtime::Runtime {
    compio::runtime::Runtime::new().unwrap()
}

#[test]
fn concurrent_persisted_appends_are_dense_and_share_syncs() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let directory = Path::new("/data/p0");
        let handle = PartitionHandle::open(storage.clone(), spec(directory, Durability::Persisted))
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
    let root = tempdir();
    runtime().block_on(async {
        let directory = root.join("p");
        let storage = CompioStorage::new();
        let handle = PartitionHandle::open(storage, spec(&directory, Durability::Persisted))
            .await
            .unwrap();
        handle.append(batch(3, None), 1, None).await.unwrap();
        handle
            .store_offset(OffsetOwner::Consumer(1), 2)
            .await
            .unwrap();
        assert_eq!(handle.stored_offset(OffsetOwner::Consumer(1)), Some(2));
        handle.close(false).await.unwrap();

        let handle = PartitionHandle::open(storage, spec(&directory, Durability::Persisted))
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
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn producer_retransmission_is_confirmed_once() {
    runtime().block_on(async {
        let handle = PartitionHandle::open(
            MemoryStorage::new(),
            spec(Path::new("/p"), Durability::Replicated),
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
            Err(PartitionError::Producer(ErrorCode::ProducerUnknown))
        ));
    });
}

/// A fresh directory under the system temp directory.
pub(crate) fn tempdir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "shard-data-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&path).unwrap();
    path
}

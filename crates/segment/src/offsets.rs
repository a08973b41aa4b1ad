//! Stored consumer offsets of one partition (`FORMAT.md` §6): one two-slot file per consumer
//! and per consumer group, loaded at open and kept open for cheap stores.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::format::consumer_offset::{OffsetSlot, newest_slot};
use crate::layout::offset_path;
use crate::log::Durability;
use crate::storage::{Storage, StorageFile, read_all};

/// Whose offset: an individual consumer or a consumer group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OffsetOwner {
    Consumer(u32),
    Group(u32),
}

impl OffsetOwner {
    fn path(self, partition: &Path) -> PathBuf {
        match self {
            Self::Consumer(id) => offset_path(partition, false, id),
            Self::Group(id) => offset_path(partition, true, id),
        }
    }
}

/// A stored-offset operation failed.
#[derive(Debug, thiserror::Error)]
#[error("{operation} {path}")]
pub struct OffsetError {
    pub operation: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

struct Stored<F> {
    slot: OffsetSlot,
    file: F,
}

/// The offsets of one partition.
pub struct ConsumerOffsets<S: Storage> {
    storage: S,
    partition: PathBuf,
    stored: BTreeMap<OffsetOwner, Stored<S::File>>,
}

impl<S: Storage> ConsumerOffsets<S> {
    /// Loads every stored offset of the partition in `partition`.
    pub async fn load(storage: S, partition: &Path) -> Result<Self, OffsetError> {
        let mut offsets = Self {
            storage,
            partition: partition.to_path_buf(),
            stored: BTreeMap::new(),
        };
        for (group, kind) in [(false, "consumers"), (true, "groups")] {
            let directory = partition.join("offsets").join(kind);
            if !offsets.storage.exists(&directory).await {
                continue;
            }
            let names = offsets
                .storage
                .list_dir(&directory)
                .await
                .map_err(error("list", &directory))?;
            for id in names
                .iter()
                .filter_map(|name| name.strip_suffix(".offset")?.parse::<u32>().ok())
            {
                let owner = if group {
                    OffsetOwner::Group(id)
                } else {
                    OffsetOwner::Consumer(id)
                };
                offsets.load_one(owner).await?;
            }
        }
        Ok(offsets)
    }

    async fn load_one(&mut self, owner: OffsetOwner) -> Result<(), OffsetError> {
        let path = owner.path(&self.partition);
        let file = self
            .storage
            .open(&path, false)
            .await
            .map_err(error("open", &path))?;
        let bytes = read_all(&file).await.map_err(error("read", &path))?;
        if let Some(slot) = newest_slot(&bytes) {
            self.stored.insert(owner, Stored { slot, file });
        }
        Ok(())
    }

    pub fn get(&self, owner: OffsetOwner) -> Option<u64> {
        self.stored.get(&owner).map(|stored| stored.slot.offset)
    }

    /// Every stored offset, for listings and tests.
    pub fn iter(&self) -> impl Iterator<Item = (OffsetOwner, u64)> + '_ {
        self.stored
            .iter()
            .map(|(owner, stored)| (*owner, stored.slot.offset))
    }

    /// Stores `offset` for `owner`; under `Persisted` it is fsynced before this returns.
    pub async fn store(
        &mut self,
        owner: OffsetOwner,
        offset: u64,
        durability: Durability,
    ) -> Result<(), OffsetError> {
        let path = owner.path(&self.partition);
        if !self.stored.contains_key(&owner) {
            let directory = path.parent().unwrap_or(&self.partition).to_path_buf();
            self.storage
                .create_dir_all(&directory)
                .await
                .map_err(error("create", &directory))?;
            let file = self
                .storage
                .open(&path, true)
                .await
                .map_err(error("create", &path))?;
            self.storage
                .sync_dir(&directory)
                .await
                .map_err(error("sync", &directory))?;
            let first = OffsetSlot {
                sequence: u32::MAX,
                offset: 0,
            };
            self.stored.insert(owner, Stored { slot: first, file });
        }
        let Some(stored) = self.stored.get_mut(&owner) else {
            return Ok(());
        };
        let slot = stored.slot.next(offset);
        let (result, _) = stored
            .file
            .write_all_at(slot.encode().to_vec(), slot.position())
            .await;
        result.map_err(error("write", &path))?;
        if durability == Durability::Persisted {
            stored
                .file
                .sync_data()
                .await
                .map_err(error("sync", &path))?;
        }
        stored.slot = slot;
        Ok(())
    }

    /// Deletes `owner`'s offset; returns whether there was one.
    pub async fn delete(&mut self, owner: OffsetOwner) -> Result<bool, OffsetError> {
        if self.stored.remove(&owner).is_none() {
            return Ok(false);
        }
        let path = owner.path(&self.partition);
        self.storage
            .remove_file(&path)
            .await
            .map_err(error("remove", &path))?;
        Ok(true)
    }

    /// Deletes every stored offset of the partition.
    pub async fn clear(&mut self) -> Result<(), OffsetError> {
        let owners: Vec<OffsetOwner> = self.stored.keys().copied().collect();
        for owner in owners {
            self.delete(owner).await?;
        }
        Ok(())
    }
}

fn error<'p>(
    operation: &'static str,
    path: &'p Path,
) -> impl FnOnce(io::Error) -> OffsetError + 'p {
    move |source| OffsetError {
        operation,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::storage::memory::{CrashMode, MemoryStorage};

    fn run<T>(future: impl Future<Output = T>) -> T {
        let mut future = pin!(future);
        match future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(value) => value,
            Poll::Pending => panic!("memory storage futures are always ready"),
        }
    }

    #[test]
    fn store_reload_delete_and_survive_crashes() {
        let storage = MemoryStorage::new();
        let partition = Path::new("/data/p");
        let mut offsets = run(ConsumerOffsets::load(storage.clone(), partition)).unwrap();
        for offset in 0..5 {
            run(offsets.store(OffsetOwner::Consumer(7), offset, Durability::Persisted)).unwrap();
        }
        run(offsets.store(OffsetOwner::Group(1), 42, Durability::Persisted)).unwrap();
        run(offsets.store(OffsetOwner::Group(1), 43, Durability::Replicated)).unwrap();
        storage.crash(CrashMode::DropUnsynced);
        let mut offsets = run(ConsumerOffsets::load(storage.clone(), partition)).unwrap();
        assert_eq!(offsets.get(OffsetOwner::Consumer(7)), Some(4));
        assert_eq!(offsets.get(OffsetOwner::Group(1)), Some(42));
        assert!(run(offsets.delete(OffsetOwner::Consumer(7))).unwrap());
        assert!(!run(offsets.delete(OffsetOwner::Consumer(7))).unwrap());
        let offsets = run(ConsumerOffsets::load(storage, partition)).unwrap();
        assert_eq!(
            offsets.iter().collect::<Vec<_>>(),
            vec![(OffsetOwner::Group(1), 42)]
        );
    }
}

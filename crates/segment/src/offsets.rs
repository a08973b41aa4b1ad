//! Stored consumer offsets of one partition (`FORMAT.md` §6): one two-slot file per consumer
//! and per consumer group, loaded at open.
//!
//! Consumer ids are any u32 a client names, so both what is kept and what is open are
//! bounded: at most [`OFFSETS_MAX`] owners per partition (a store for one more is refused), and
//! at most [`OPEN_FILES_MAX`] files open per partition — the most recently stored-to stay open
//! for cheap stores, others are reopened when next stored.

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

/// Owners (consumers and groups) whose offsets one partition keeps.
pub const OFFSETS_MAX: usize = 10_000;
/// Offset files one partition keeps open.
pub const OPEN_FILES_MAX: usize = 8;

struct Stored<F> {
    slot: OffsetSlot,
    /// Open while among the partition's most recently stored-to.
    file: Option<F>,
    /// When it was last stored to, in stores of this partition (for closing the stalest).
    used: u64,
}

/// The offsets of one partition.
pub struct ConsumerOffsets<S: Storage> {
    storage: S,
    partition: PathBuf,
    stored: BTreeMap<OffsetOwner, Stored<S::File>>,
    /// Stores so far: the clock of [`Stored::used`].
    stores: u64,
}

impl<S: Storage> ConsumerOffsets<S> {
    /// Loads every stored offset of the partition in `partition`.
    pub async fn load(storage: S, partition: &Path) -> Result<Self, OffsetError> {
        let mut offsets = Self {
            storage,
            partition: partition.to_path_buf(),
            stored: BTreeMap::new(),
            stores: 0,
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
        let Some(slot) = newest_slot(&bytes) else {
            // Empty: created, then the first store failed or the process died before it.
            // Anything else is damage: the owner starts again as one that never stored.
            if !bytes.is_empty() {
                log::warn!(
                    "offset file {} ({} bytes) holds no intact offset: {owner:?} has none \
                     stored until it stores one again",
                    path.display(),
                    bytes.len()
                );
            }
            return Ok(());
        };
        // Closed again: files are opened when stored to.
        let stored = Stored {
            slot,
            file: None,
            used: 0,
        };
        self.stored.insert(owner, stored);
        Ok(())
    }

    /// Whether storing for `owner` would keep more owners than [`OFFSETS_MAX`].
    pub fn is_full_for(&self, owner: OffsetOwner) -> bool {
        !self.stored.contains_key(&owner) && self.stored.len() >= OFFSETS_MAX
    }

    /// Offset files open now.
    pub fn open_files(&self) -> usize {
        self.stored
            .values()
            .filter(|stored| stored.file.is_some())
            .count()
    }

    /// Makes room for one more open file: closes the least recently stored-to one.
    fn close_stalest(&mut self) {
        if self.open_files() < OPEN_FILES_MAX {
            return;
        }
        let stalest = self
            .stored
            .values_mut()
            .filter(|stored| stored.file.is_some())
            .min_by_key(|stored| stored.used);
        if let Some(stored) = stalest {
            stored.file = None;
        }
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
        self.stores += 1;
        let reopen = self
            .stored
            .get(&owner)
            .is_some_and(|stored| stored.file.is_none());
        if reopen {
            self.close_stalest();
            let file = self
                .storage
                .open(&path, false)
                .await
                .map_err(error("open", &path))?;
            if let Some(stored) = self.stored.get_mut(&owner) {
                stored.file = Some(file);
            }
        }
        if !self.stored.contains_key(&owner) {
            self.close_stalest();
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
            let stored = Stored {
                slot: first,
                file: Some(file),
                used: 0,
            };
            self.stored.insert(owner, stored);
        }
        let now = self.stores;
        let Some(stored) = self.stored.get_mut(&owner) else {
            return Ok(());
        };
        stored.used = now;
        let Some(file) = stored.file.as_mut() else {
            unreachable!("the owner's file was opened above");
        };
        let slot = stored.slot.next(offset);
        let (result, _) = file
            .write_all_at(slot.encode().to_vec(), slot.position())
            .await;
        result.map_err(error("write", &path))?;
        if durability == Durability::Persisted {
            file.sync_data().await.map_err(error("sync", &path))?;
        }
        stored.slot = slot;
        debug_assert!(self.open_files() <= OPEN_FILES_MAX);
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

    #[test]
    fn open_files_and_owners_are_bounded_and_reopened_files_keep_their_slots() {
        let storage = MemoryStorage::new();
        let partition = Path::new("/data/p");
        let mut offsets = run(ConsumerOffsets::load(storage.clone(), partition)).unwrap();
        for round in 0..3_u64 {
            for id in 0..40 {
                let owner = OffsetOwner::Consumer(id);
                run(offsets.store(owner, round * 100 + u64::from(id), Durability::Persisted))
                    .unwrap();
                assert!(offsets.open_files() <= OPEN_FILES_MAX);
            }
        }
        storage.crash(CrashMode::DropUnsynced);
        let reloaded = run(ConsumerOffsets::load(storage.clone(), partition)).unwrap();
        assert_eq!(reloaded.open_files(), 0, "loading opens nothing for good");
        for id in 0..40 {
            assert_eq!(
                reloaded.get(OffsetOwner::Consumer(id)),
                Some(200 + u64::from(id))
            );
        }
        assert!(!reloaded.is_full_for(OffsetOwner::Consumer(99)));
        let mut full = ConsumerOffsets {
            storage,
            partition: partition.to_path_buf(),
            stored: BTreeMap::new(),
            stores: 0,
        };
        for id in 0..u32::try_from(OFFSETS_MAX).unwrap() {
            let stored = Stored {
                slot: OffsetSlot {
                    sequence: 0,
                    offset: 0,
                },
                file: None,
                used: 0,
            };
            full.stored.insert(OffsetOwner::Consumer(id), stored);
        }
        assert!(full.is_full_for(OffsetOwner::Group(1)));
        assert!(!full.is_full_for(OffsetOwner::Consumer(5)));
    }
}

//! Which partition a directory holds. A partition's directory is named by its stream, topic
//! and partition ids, and ids are reused: a stream deleted while its directory could not be
//! removed (a full or failing disk, a crash between the delete's commit and the removal), or
//! a metadata journal lost while the data stayed, leaves a directory that a new partition
//! with the same ids would open as its own, serving the old messages under the new stream's
//! name and permissions. So every partition directory records, in `partition.id`, the
//! incarnation and creation time of the partition it was made for; a directory made for
//! another one is moved aside to `<system.path>/orphaned/` (never deleted: it may be the only
//! copy of data whose metadata was lost) before the partition is created afresh. A purge
//! carries the file over to the fresh directory.
//!
//! `partition.id` is 32 bytes: magic `IGPI`, version (u32, 1), incarnation (u64), created at
//! (u64, µs), then the xxh3-64 of the 24 bytes before it. A directory without the file,
//! for a partition the metadata held at start, was made by an earlier build (or a crash came
//! between its creation and the file's, or a purge's rename and the file's return): it is
//! adopted; for a partition created since, it is a leftover that lost its file in a removal
//! cut short, and is moved aside. One whose file is damaged is adopted: moving a live
//! partition's data aside for a flipped byte would hide acknowledged messages.

use std::io;
use std::path::{Path, PathBuf};

use segment::storage::{Storage, StorageFile, read_all};

use super::PartitionKey;
use xxhash_rust::xxh3::xxh3_64;

use segment::layout::IDENTITY_FILE as FILE;
const MAGIC: [u8; 4] = *b"IGPI";
const VERSION: u32 = 1;
const SIZE: usize = 32;

/// The partition a directory was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) incarnation: u64,
    pub(crate) created_at: u64,
}

impl Identity {
    pub(crate) fn encode(self) -> [u8; SIZE] {
        let mut bytes = [0u8; SIZE];
        bytes[0..4].copy_from_slice(&MAGIC);
        bytes[4..8].copy_from_slice(&VERSION.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.incarnation.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.created_at.to_le_bytes());
        let checksum = xxh3_64(&bytes[..24]);
        bytes[24..].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    /// Total: `None` for anything but an intact record of version 1.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; SIZE] = bytes.try_into().ok()?;
        let word = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(word)
        };
        let version = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let intact = bytes[..4] == MAGIC && word(24) == xxh3_64(&bytes[..24]);
        (intact && version == VERSION).then(|| Self {
            incarnation: word(8),
            created_at: word(16),
        })
    }
}

/// What [`claim`] found in the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claimed {
    /// The directory was made for this partition (or adopted: see the module docs).
    Own,
    /// No directory: made now.
    Made,
    /// The directory held another partition; it was moved to the path given, and a new one
    /// made.
    MovedAside(PathBuf),
}

/// Makes `directory` the directory of the partition `identity`, before the partition is
/// opened in it (see the module docs); `orphans` is where a directory made for another
/// partition goes. `adopt_bare`: a directory without `partition.id` is this partition's (it
/// was in the metadata at start, and the directory may be an earlier build's); otherwise
/// such a directory is a leftover (a removal that failed after taking the file) and is
/// moved aside too.
pub(crate) async fn claim<S: Storage>(
    storage: &S,
    (key, directory): (PartitionKey, &Path),
    identity: Identity,
    orphans: &Path,
    adopt_bare: bool,
) -> io::Result<Claimed> {
    if !storage.exists(directory).await {
        make(storage, directory, identity).await?;
        return Ok(Claimed::Made);
    }
    let bare = !storage.exists(&directory.join(FILE)).await;
    let found = read(storage, directory).await?;
    // A damaged file (`found` none, not bare) is adopted: see the module docs.
    let foreign = if bare {
        !adopt_bare
    } else {
        found.is_some_and(|found| found != identity)
    };
    if foreign {
        let aside = set_aside(storage, (key, directory), orphans).await?;
        make(storage, directory, identity).await?;
        return Ok(Claimed::MovedAside(aside));
    }
    if found != Some(identity) {
        write(storage, directory, identity).await?;
    }
    Ok(Claimed::Own)
}

/// The identity recorded in `directory` (`None`: no file, or a damaged one).
async fn read<S: Storage>(storage: &S, directory: &Path) -> io::Result<Option<Identity>> {
    let path = directory.join(FILE);
    if !storage.exists(&path).await {
        return Ok(None);
    }
    let file = storage.open(&path, false).await?;
    Ok(Identity::decode(&read_all(&file).await?))
}

/// Moves the partition directory `directory` under `orphans` (made if needed), durably;
/// returns where it went.
pub(crate) async fn set_aside<S: Storage>(
    storage: &S,
    (key, directory): (PartitionKey, &Path),
    orphans: &Path,
) -> io::Result<PathBuf> {
    let found = read(storage, directory).await?;
    let aside = orphan_path(storage, key, orphans, found).await;
    storage.create_dir_all(orphans).await?;
    if let Some(root) = orphans.parent() {
        storage.sync_dir(root).await?;
    }
    storage.rename(directory, &aside).await?;
    storage.sync_dir(orphans).await?;
    if let Some(parent) = directory.parent() {
        storage.sync_dir(parent).await?;
    }
    Ok(aside)
}

/// A free name under `orphans` for the directory of partition `key`, made for `found`:
/// `S-T-P-incarnation-I` (`S-T-P` when it records none), numbered if taken.
async fn orphan_path<S: Storage>(
    storage: &S,
    key: PartitionKey,
    orphans: &Path,
    found: Option<Identity>,
) -> PathBuf {
    let mut name = format!("{}-{}-{}", key.stream_id, key.topic_id, key.partition_id);
    if let Some(found) = found {
        name = format!("{name}-incarnation-{}", found.incarnation);
    }
    let mut path = orphans.join(&name);
    let mut count = 1u32;
    while storage.exists(&path).await {
        count = count.saturating_add(1);
        path = orphans.join(format!("{name}-{count}"));
    }
    path
}

/// Creates `directory` with its identity, durably (the file, the directory, its parent).
async fn make<S: Storage>(storage: &S, directory: &Path, identity: Identity) -> io::Result<()> {
    storage.create_dir_all(directory).await?;
    write(storage, directory, identity).await?;
    if let Some(parent) = directory.parent() {
        storage.sync_dir(parent).await?;
    }
    Ok(())
}

/// Writes `partition.id` whole, durably (a new file, synced, renamed over the old).
async fn write<S: Storage>(storage: &S, directory: &Path, identity: Identity) -> io::Result<()> {
    let new = directory.join("partition.id.new");
    let mut file = storage.open(&new, true).await?;
    file.set_len(0).await?;
    let bytes = identity.encode().to_vec();
    let (written, _) = file.write_all_at(bytes, 0).await;
    written?;
    file.sync_data().await?;
    drop(file);
    storage.rename(&new, &directory.join(FILE)).await?;
    storage.sync_dir(directory).await
}

#[cfg(test)]
mod tests {
    use super::{Identity, SIZE};

    #[test]
    fn identities_round_trip_and_any_other_bytes_decode_to_none() {
        let identity = Identity {
            incarnation: 7,
            created_at: 1_700_000_000_000_000,
        };
        let bytes = identity.encode();
        assert_eq!(Identity::decode(&bytes), Some(identity));
        for at in 0..SIZE {
            let mut flipped = bytes;
            flipped[at] ^= 0x10;
            assert_eq!(Identity::decode(&flipped), None, "byte {at} flipped");
        }
        assert_eq!(Identity::decode(&bytes[..SIZE - 1]), None);
        assert_eq!(Identity::decode(&[]), None);
    }
}

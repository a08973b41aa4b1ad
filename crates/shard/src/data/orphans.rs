//! Partition directories the metadata does not hold, found at start: left by a delete whose
//! removal failed or was cut short by a crash, or by metadata that was lost. They are moved
//! to `<system.path>/orphaned/` (see `identity.rs`), never deleted and never served; a
//! metadata journal with no history at all beside such data means the metadata was lost,
//! and the start is refused unless the operator accepts that loss.

use std::io;
use std::path::{Path, PathBuf};

use segment::layout::streams_directory;
use segment::storage::Storage;

use super::identity::set_aside;
use super::{ORPHANS, PartitionKey};
use crate::metadata::Metadata;

/// Why the start stops over orphaned partition directories.
#[derive(Debug, thiserror::Error)]
pub enum OrphanError {
    #[error(
        "the metadata holds no change at all, yet {count} partition directories hold data \
         (first: {first}): the metadata journal was lost; restore metadata/ from a backup, \
         or start once with --accept-metadata-loss to begin with empty metadata, the data \
         moved to {orphans}"
    )]
    MetadataLost {
        count: usize,
        first: PathBuf,
        orphans: PathBuf,
    },
    #[error("move the orphaned partition directory {path} aside")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The partition directories under `root` that `metadata` does not hold, in path order,
/// with the partition each is named for.
pub async fn find<S: Storage>(
    storage: &S,
    root: &Path,
    metadata: &Metadata,
) -> Vec<(PartitionKey, PathBuf)> {
    let mut found = Vec::new();
    let streams = streams_directory(root);
    for (stream_id, stream) in numbered(storage, &streams).await {
        let topics = stream.join("topics");
        for (topic_id, topic) in numbered(storage, &topics).await {
            let partitions = topic.join("partitions");
            for (partition_id, partition) in numbered(storage, &partitions).await {
                let held = metadata
                    .streams
                    .get(&stream_id)
                    .and_then(|stream| stream.topics.get(&topic_id))
                    .is_some_and(|topic| topic.partitions.contains_key(&partition_id));
                if !held {
                    let key = PartitionKey {
                        stream_id,
                        topic_id,
                        partition_id,
                    };
                    found.push((key, partition));
                }
            }
        }
    }
    found
}

/// The entries of `directory` named by a number, with their paths (none if it is missing).
async fn numbered<S: Storage>(storage: &S, directory: &Path) -> Vec<(u32, PathBuf)> {
    let names = storage.list_dir(directory).await.unwrap_or_default();
    names
        .into_iter()
        .filter_map(|name| Some((name.parse().ok()?, directory.join(name))))
        .collect()
}

/// Moves every partition directory `metadata` does not hold to `<root>/orphaned/` (start-up,
/// before any partition opens); refuses when the metadata has no history at all (see the
/// module docs) unless `accept_loss`. Returns how many moved.
pub async fn set_aside_all<S: Storage>(
    storage: &S,
    root: &Path,
    metadata: &Metadata,
    accept_loss: bool,
) -> Result<usize, OrphanError> {
    let found = find(storage, root, metadata).await;
    let orphans = root.join(ORPHANS);
    if let Some(first) = found.first()
        && metadata.commit == 0
        && !accept_loss
    {
        return Err(OrphanError::MetadataLost {
            count: found.len(),
            first: first.1.clone(),
            orphans,
        });
    }
    for (key, directory) in &found {
        let aside = set_aside(storage, (*key, directory), &orphans)
            .await
            .map_err(|source| OrphanError::Io {
                path: directory.clone(),
                source,
            })?;
        log::warn!(
            "{}: a partition directory the metadata does not hold (a delete that did not \
             finish, or lost metadata); moved to {}",
            directory.display(),
            aside.display()
        );
    }
    Ok(found.len())
}

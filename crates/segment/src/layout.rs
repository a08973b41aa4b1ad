//! Where things live in the data directory (`FORMAT.md` §1).

use std::path::{Path, PathBuf};

use crate::format::segment_stem;

/// The file in a partition directory naming the partition it was made for: written by the
/// shard (`crates/shard/src/data/identity.rs`), opaque here, carried over by a purge.
pub const IDENTITY_FILE: &str = "partition.id";

/// The directory of one partition.
pub fn partition_directory(
    root: &Path,
    stream_id: u32,
    topic_id: u32,
    partition_id: u32,
) -> PathBuf {
    streams_directory(root)
        .join(stream_id.to_string())
        .join("topics")
        .join(topic_id.to_string())
        .join("partitions")
        .join(partition_id.to_string())
}

/// The directory of the metadata journal and snapshot (owned by crates/shard).
pub fn metadata_directory(root: &Path) -> PathBuf {
    root.join("metadata")
}

/// The metadata journal.
pub fn journal_path(root: &Path) -> PathBuf {
    metadata_directory(root).join("journal.wal")
}

/// The metadata snapshot the journal continues.
pub fn snapshot_path(root: &Path) -> PathBuf {
    metadata_directory(root).join("snapshot.bin")
}

/// The directory holding every stream's topics and partitions.
pub fn streams_directory(root: &Path) -> PathBuf {
    root.join("streams")
}

/// The effective configuration written at start-up.
pub fn runtime_config_path(root: &Path) -> PathBuf {
    root.join("runtime").join("current_config.toml")
}

/// The three files of the segment starting at `start_offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentPaths {
    pub log: PathBuf,
    pub index: PathBuf,
    pub time_index: PathBuf,
}

impl SegmentPaths {
    pub fn new(partition: &Path, start_offset: u64) -> Self {
        let stem = segment_stem(start_offset);
        Self {
            log: partition.join(format!("{stem}.log")),
            index: partition.join(format!("{stem}.index")),
            time_index: partition.join(format!("{stem}.timeindex")),
        }
    }
}

/// The partition's state file.
pub fn state_path(partition: &Path) -> PathBuf {
    partition.join("partition.state")
}

/// The stored-offset file of consumer `id` (`group` selects consumer groups).
pub fn offset_path(partition: &Path, group: bool, id: u32) -> PathBuf {
    let kind = if group { "groups" } else { "consumers" };
    partition
        .join("offsets")
        .join(kind)
        .join(format!("{id}.offset"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let partition = partition_directory(Path::new("/data"), 1, 2, 3);
        assert_eq!(
            partition,
            Path::new("/data/streams/1/topics/2/partitions/3")
        );
        let segment = SegmentPaths::new(&partition, 4096);
        assert!(segment.log.ends_with("00000000000000004096.log"));
        assert!(offset_path(&partition, true, 7).ends_with("offsets/groups/7.offset"));
    }
}

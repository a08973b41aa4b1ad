//! `iggy encryption rotate`: the offline re-encryption of a stopped server's data directory
//! under a new key (or, from plain data, under a first key; or back to plain). Every record
//! of every segment is opened with the old key and sealed under the new one with a fresh
//! salt, the segment's indexes are written from the new positions, and every stored
//! credential is re-sealed into a new metadata snapshot ([`crate::metadata::rekey`]).
//!
//! # Crash safety
//!
//! The run first writes `encryption.rotating` (the new key's check value) and removes it
//! last, after `encryption.check` names the new key. While it exists the server refuses to
//! start, and the run can only be continued with the same new key. Each file is replaced
//! whole (written to `.tmp`, synced, renamed, the directory synced), and each record opens
//! with either key, so a rerun after a crash anywhere finishes the job: files already moved
//! are moved again, and indexes are always rewritten from the log they index.
//!
//! A cluster node's directory (`cluster/`) is refused: its replica log holds sealed records
//! and ops too, and a node rotated alone would disagree with its peers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use segment::format::scan::StopReason;
use segment::format::segment_starts;
use segment::layout::{SegmentPaths, metadata_directory, streams_directory};
use segment::storage::{Storage, StorageFile, read_all};

use crate::at_rest::credentials::CredentialSeal;
use crate::at_rest::{KeyFailure, RecordKey, unlock};
use crate::metadata::journal::JOURNAL_FILE;
use crate::metadata::rekey::{RekeyError, rekey};
use crate::metadata::snapshot::SNAPSHOT_FILE;

#[cfg(test)]
#[cfg(feature = "encryption")]
mod tests;

/// The file of the key's check value, beside the data.
pub const CHECK_FILE: &str = "encryption.check";
/// The file that marks an unfinished rotation; it holds the new key's check value.
pub const MARKER_FILE: &str = "encryption.rotating";
/// What the marker holds for a rotation back to plain data.
const TO_PLAIN_MARKER: &[u8] = b"plain";
/// Bytes of a segment read at a time.
const CHUNK_BYTES: u64 = 8 << 20;

/// The keys of a rotation, already checked: `old` against `encryption.check`.
#[derive(Debug)]
pub struct Rotation {
    pub old: Option<Arc<RecordKey>>,
    pub new: Option<Arc<RecordKey>>,
    /// The new key's check value, stored as `encryption.check` at the end (`None`: the data
    /// ends plain and the check file is removed).
    pub new_check: Option<Vec<u8>>,
}

/// What a rotation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rotated {
    pub segments: u64,
    pub records: u64,
    pub credentials: usize,
    /// Bytes of torn tails dropped from active segments (the server would cut them too).
    pub torn_bytes: u64,
}

/// Why a rotation stopped. Rerun it (with the same new key) once the cause is fixed.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is a cluster node's data directory; rotating one node alone is not supported")]
    Cluster(PathBuf),
    #[error("{0}: an unfinished rotation to another key; run it again with that new key")]
    OtherRotation(PathBuf),
    #[error("metadata: {0}")]
    Metadata(#[from] RekeyError),
    #[error("{path}: byte {position}: {reason}")]
    Record {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    #[error("{path}: byte {position}: the log is damaged ({stop:?}); run `iggy check` first")]
    Damaged {
        path: PathBuf,
        position: u64,
        stop: StopReason,
    },
    #[error("{0}: the segment would outgrow its index once sealed")]
    TooLarge(PathBuf),
    #[error("the old key: {0}")]
    OldKey(KeyFailure),
    #[error("the new key: {0}")]
    NewKey(KeyFailure),
    #[error("{0} holds encrypted data: give the key it was written with as the old key")]
    OldKeyMissing(PathBuf),
    #[error("{0} holds no encrypted data: give no old key")]
    NotEncrypted(PathBuf),
    #[error("the new key is the key the data is encrypted with already")]
    SameKey,
    #[error("neither an old nor a new key: nothing to do")]
    NoKeys,
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> RotateError {
    let path = path.to_path_buf();
    move |source| RotateError::Io {
        action,
        path,
        source,
    }
}

/// Checks the keys of a rotation of `root` (base64 texts, Iggy's form) against its check
/// file: `old` must be the key the data is encrypted with (none for plain data), `new` the
/// key to move to (none: back to plain). A rerun of an interrupted rotation is accepted with
/// the same new key, even after the check file already names it.
pub async fn plan<S: Storage>(
    storage: &S,
    root: &Path,
    old: Option<&str>,
    new: Option<&str>,
) -> Result<Rotation, RotateError> {
    let stored = read_optional(storage, &root.join(CHECK_FILE)).await?;
    let marker = read_optional(storage, &root.join(MARKER_FILE)).await?;
    let (new, new_check) = match new {
        Some(text) => {
            let (key, check) = unlock(text, None).map_err(RotateError::NewKey)?;
            (Some(Arc::new(key)), check)
        }
        None => (None, None),
    };
    let expected_marker = new_check.as_deref().unwrap_or(TO_PLAIN_MARKER);
    if marker
        .as_deref()
        .is_some_and(|marker| marker != expected_marker)
    {
        return Err(RotateError::OtherRotation(root.join(MARKER_FILE)));
    }
    // An interrupted run that already stored the new key's check (or removed the check, on
    // the way to plain data): only the marker is left to remove.
    let finished = marker.is_some() && stored == new_check;
    if !finished && stored.is_some() && stored == new_check {
        return Err(RotateError::SameKey);
    }
    let old = match (old, stored.as_deref()) {
        (Some(text), _) if finished => Some(unlock(text, None).map_err(RotateError::OldKey)?.0),
        (Some(text), Some(stored)) => {
            Some(unlock(text, Some(stored)).map_err(RotateError::OldKey)?.0)
        }
        (Some(_), None) => return Err(RotateError::NotEncrypted(root.to_path_buf())),
        (None, Some(_)) if !finished => {
            return Err(RotateError::OldKeyMissing(root.to_path_buf()));
        }
        (None, _) => None,
    };
    if old.is_none() && new.is_none() {
        return Err(RotateError::NoKeys);
    }
    Ok(Rotation {
        old: old.map(Arc::new),
        new,
        new_check,
    })
}

async fn read_optional<S: Storage>(
    storage: &S,
    path: &Path,
) -> Result<Option<Vec<u8>>, RotateError> {
    if !storage.exists(path).await {
        return Ok(None);
    }
    read_file(storage, path).await.map(Some)
}

/// Runs (or continues) `rotation` over the data directory `root`.
pub async fn rotate<S: Storage>(
    storage: &S,
    root: &Path,
    rotation: &Rotation,
) -> Result<Rotated, RotateError> {
    if storage.exists(&root.join("cluster")).await {
        return Err(RotateError::Cluster(root.to_path_buf()));
    }
    let marker = root.join(MARKER_FILE);
    let expected_marker = rotation.new_check.as_deref().unwrap_or(TO_PLAIN_MARKER);
    if storage.exists(&marker).await {
        if read_file(storage, &marker).await? != expected_marker {
            return Err(RotateError::OtherRotation(marker));
        }
    } else {
        replace_file(storage, &marker, expected_marker).await?;
    }
    let mut rotated = Rotated {
        credentials: rotate_metadata(storage, root, rotation).await?,
        ..Rotated::default()
    };
    for partition in partitions(storage, root).await? {
        rotate_partition(storage, &partition, rotation, &mut rotated).await?;
    }
    let check = root.join(CHECK_FILE);
    match &rotation.new_check {
        Some(bytes) => replace_file(storage, &check, bytes).await?,
        None if storage.exists(&check).await => {
            storage
                .remove_file(&check)
                .await
                .map_err(io_error("remove", &check))?;
        }
        None => {}
    }
    storage
        .remove_file(&marker)
        .await
        .map_err(io_error("remove", &marker))?;
    storage
        .sync_dir(root)
        .await
        .map_err(io_error("sync", root))?;
    Ok(rotated)
}

/// Re-seals the credentials into a new snapshot and a journal of only a base record.
async fn rotate_metadata<S: Storage>(
    storage: &S,
    root: &Path,
    rotation: &Rotation,
) -> Result<usize, RotateError> {
    let directory = metadata_directory(root);
    let (snapshot_path, journal_path) =
        (directory.join(SNAPSHOT_FILE), directory.join(JOURNAL_FILE));
    let snapshot = read_optional(storage, &snapshot_path).await?;
    let journal = match read_optional(storage, &journal_path).await? {
        Some(journal) => journal,
        None if snapshot.is_none() => return Ok(0),
        None => Vec::new(),
    };
    let old = CredentialSeal::new(rotation.old.clone());
    let new = CredentialSeal::new(rotation.new.clone());
    let snapshot = snapshot
        .as_deref()
        .map(|bytes| (bytes, snapshot_path.as_path()));
    let rekeyed = rekey(snapshot, (&journal, &journal_path), &old, &new)?;
    // The order a compaction uses: a crash between the two leaves the new snapshot and the
    // old journal, whose ops are all at or below the snapshot's commit and are skipped.
    replace_file(storage, &snapshot_path, &rekeyed.snapshot).await?;
    replace_file(storage, &journal_path, &rekeyed.journal).await?;
    Ok(rekeyed.credentials)
}

/// Every partition directory: `streams/*/topics/*/partitions/*`.
async fn partitions<S: Storage>(storage: &S, root: &Path) -> Result<Vec<PathBuf>, RotateError> {
    let mut level = vec![streams_directory(root)];
    for child in ["topics", "partitions", ""] {
        let mut next = Vec::new();
        for directory in level {
            for id in numbered(storage, &directory).await? {
                let found = directory.join(id.to_string());
                next.push(if child.is_empty() {
                    found
                } else {
                    found.join(child)
                });
            }
        }
        level = next;
    }
    Ok(level)
}

async fn numbered<S: Storage>(storage: &S, directory: &Path) -> Result<Vec<u32>, RotateError> {
    if !storage.exists(directory).await {
        return Ok(Vec::new());
    }
    let names = storage
        .list_dir(directory)
        .await
        .map_err(io_error("list", directory))?;
    let mut ids: Vec<u32> = names.iter().filter_map(|name| name.parse().ok()).collect();
    ids.sort_unstable();
    Ok(ids)
}

async fn rotate_partition<S: Storage>(
    storage: &S,
    directory: &Path,
    rotation: &Rotation,
    rotated: &mut Rotated,
) -> Result<(), RotateError> {
    let names = storage
        .list_dir(directory)
        .await
        .map_err(io_error("list", directory))?;
    let starts = segment_starts(&names);
    let last = starts.last().copied();
    for start in starts {
        let paths = SegmentPaths::new(directory, start);
        let active = Some(start) == last;
        segment_log::rotate_segment(storage, &paths, start, active, rotation, rotated).await?;
        rotated.segments += 1;
    }
    Ok(())
}

mod segment_log;

async fn read_file<S: Storage>(storage: &S, path: &Path) -> Result<Vec<u8>, RotateError> {
    let file = storage
        .open(path, false)
        .await
        .map_err(io_error("open", path))?;
    read_all(&file).await.map_err(io_error("read", path))
}

/// `path` replaced whole by `bytes`: written to `<path>.tmp`, synced, renamed over `path`,
/// the directory synced.
async fn replace_file<S: Storage>(
    storage: &S,
    path: &Path,
    bytes: &[u8],
) -> Result<(), RotateError> {
    let temporary = temporary(path);
    let mut file = create_empty(storage, &temporary).await?;
    let (result, _) = file.write_all_at(bytes.to_vec(), 0).await;
    result.map_err(io_error("write", &temporary))?;
    file.sync_data()
        .await
        .map_err(io_error("sync", &temporary))?;
    drop(file);
    rename_synced(storage, &temporary, path).await
}

fn temporary(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// A new empty file at `path` (a leftover of an interrupted run removed first).
async fn create_empty<S: Storage>(storage: &S, path: &Path) -> Result<S::File, RotateError> {
    if storage.exists(path).await {
        storage
            .remove_file(path)
            .await
            .map_err(io_error("remove", path))?;
    }
    storage
        .open_private(path)
        .await
        .map_err(io_error("create", path))
}

async fn rename_synced<S: Storage>(storage: &S, from: &Path, to: &Path) -> Result<(), RotateError> {
    storage
        .rename(from, to)
        .await
        .map_err(io_error("rename", from))?;
    let directory = to.parent().unwrap_or(to);
    storage
        .sync_dir(directory)
        .await
        .map_err(io_error("sync", directory))
}

//! The metadata journal, `metadata/journal.wal`: every committed [`MetadataOp`] in order,
//! replayed at start-up to rebuild [`Metadata`](super::Metadata).
//!
//! # Format
//!
//! The file is a sequence of entries and nothing else (no file header):
//!
//! ```text
//! [length:u32 LE][checksum:u64 LE][op bytes: length bytes]
//! ```
//!
//! - `length` counts the op bytes only, `1..=ENTRY_LENGTH_MAX`.
//! - `checksum` is XXH3-64 (seed 0) of the op bytes.
//! - The op bytes are `op_codec.rs`'s versioned encoding (`[version:u8][tag:u8][fields]`).
//!
//! # Recovery
//!
//! An entry is appended with one write followed by `fdatasync`; an op is acknowledged only
//! after that sync. A crash can therefore leave at most a torn last entry. [`Journal::open`]
//! decodes entries from the start until the first one that is short, has a length out of
//! range, or fails its checksum; it truncates the file there (and syncs), so the next append
//! starts from a clean tail. An entry whose checksum holds but whose op does not decode is
//! not a torn write but a foreign or newer format: open refuses it instead of dropping data.
//!
//! After a failed write or sync the journal refuses further appends (the file's state is
//! unknown, and a retried `fsync` can report success over lost pages).

use std::io;
use std::path::{Path, PathBuf};

use segment::storage::{Storage, StorageFile, read_all};
use xxhash_rust::xxh3::xxh3_64;

use super::op::MetadataOp;
use super::op_codec::{decode_op, encode_op};

/// Bytes of an entry's header: length and checksum.
pub const ENTRY_HEADER_BYTES: usize = 12;
/// Largest op an entry may hold (far above any real op; bounds replay allocations).
pub const ENTRY_LENGTH_MAX: usize = 64 << 20;

/// Why the journal could not be opened or appended to.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("entry at byte {position} of {path} passes its checksum but does not decode")]
    Undecodable {
        path: PathBuf,
        position: u64,
        #[source]
        source: proto::DecodeError,
    },
    #[error("op of {length} bytes exceeds the journal's entry limit")]
    EntryTooLarge { length: usize },
    #[error("an earlier write or sync of {path} failed; the journal is closed")]
    Failed { path: PathBuf },
}

/// The open journal: appends at the end of the valid entries.
#[derive(Debug)]
pub struct Journal<S: Storage> {
    file: S::File,
    path: PathBuf,
    length_bytes: u64,
    failed: bool,
}

impl<S: Storage> Journal<S> {
    /// Opens (creating it and its directory if needed) the journal at `path`, returns it
    /// with every op it holds, oldest first, after truncating a torn tail.
    pub async fn open(storage: &S, path: &Path) -> Result<(Self, Vec<MetadataOp>), JournalError> {
        let io_error = |action| {
            let path = path.to_path_buf();
            move |source| JournalError::Io {
                action,
                path,
                source,
            }
        };
        let created = !storage.exists(path).await;
        if created && let Some(directory) = path.parent() {
            storage
                .create_dir_all(directory)
                .await
                .map_err(io_error("create the directory of"))?;
        }
        let file = storage.open(path, true).await.map_err(io_error("open"))?;
        if created && let Some(directory) = path.parent() {
            storage
                .sync_dir(directory)
                .await
                .map_err(io_error("sync the directory of"))?;
        }
        let bytes = read_all(&file).await.map_err(io_error("read"))?;
        let (ops, valid_bytes) = replay(&bytes, path)?;
        let length_bytes = u64::try_from(valid_bytes).unwrap_or(u64::MAX);
        if valid_bytes < bytes.len() {
            file.set_len(length_bytes)
                .await
                .map_err(io_error("truncate"))?;
            file.sync_data().await.map_err(io_error("sync"))?;
        }
        let journal = Self {
            file,
            path: path.to_path_buf(),
            length_bytes,
            failed: false,
        };
        Ok((journal, ops))
    }

    /// Appends `op` and syncs it: once this returns `Ok`, the op survives a crash.
    pub async fn append(&mut self, op: &MetadataOp) -> Result<(), JournalError> {
        if self.failed {
            return Err(JournalError::Failed {
                path: self.path.clone(),
            });
        }
        let entry = encode_entry(op)?;
        let entry_bytes = u64::try_from(entry.len()).unwrap_or(u64::MAX);
        let (written, _entry) = self.file.write_all_at(entry, self.length_bytes).await;
        let synced = match written {
            Ok(()) => self.file.sync_data().await,
            Err(error) => Err(error),
        };
        if let Err(source) = synced {
            self.failed = true;
            return Err(JournalError::Io {
                action: "append to",
                path: self.path.clone(),
                source,
            });
        }
        self.length_bytes = self.length_bytes.saturating_add(entry_bytes);
        Ok(())
    }

    /// Bytes of valid entries in the file.
    pub fn length_bytes(&self) -> u64 {
        self.length_bytes
    }
}

/// One entry's bytes: header and op.
pub fn encode_entry(op: &MetadataOp) -> Result<Vec<u8>, JournalError> {
    let body = encode_op(op);
    if body.len() > ENTRY_LENGTH_MAX {
        return Err(JournalError::EntryTooLarge { length: body.len() });
    }
    let length = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut entry = Vec::with_capacity(body.len().saturating_add(ENTRY_HEADER_BYTES));
    entry.extend_from_slice(&length.to_le_bytes());
    entry.extend_from_slice(&xxh3_64(&body).to_le_bytes());
    entry.extend_from_slice(&body);
    Ok(entry)
}

/// Decodes entries from the start of `bytes`: the ops and the byte length of the valid
/// prefix. Stops quietly at a torn or corrupt entry; a checksummed entry that does not
/// decode is an error.
pub fn replay(bytes: &[u8], path: &Path) -> Result<(Vec<MetadataOp>, usize), JournalError> {
    let mut ops = Vec::new();
    let mut position = 0_usize;
    while let Some((body, next)) = scan_entry(bytes, position) {
        let op = decode_op(body).map_err(|source| JournalError::Undecodable {
            path: path.to_path_buf(),
            position: u64::try_from(position).unwrap_or(u64::MAX),
            source,
        })?;
        ops.push(op);
        position = next;
    }
    Ok((ops, position))
}

/// The op bytes of the entry at `position` and where the next entry starts, or `None` if
/// the entry is missing, torn or corrupt.
fn scan_entry(bytes: &[u8], position: usize) -> Option<(&[u8], usize)> {
    let header_end = position.checked_add(ENTRY_HEADER_BYTES)?;
    let header = bytes.get(position..header_end)?;
    let (length, checksum) = header.split_at(4);
    let length = usize::try_from(u32::from_le_bytes(length.try_into().ok()?)).ok()?;
    let checksum = u64::from_le_bytes(checksum.try_into().ok()?);
    if !(1..=ENTRY_LENGTH_MAX).contains(&length) {
        return None;
    }
    let end = header_end.checked_add(length)?;
    let body = bytes.get(header_end..end)?;
    (xxh3_64(body) == checksum).then_some((body, end))
}

//! One segment: its three files, its index entries in memory, and its bounds.

use std::path::Path;

use crate::format::index::{IndexEntry, OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE, serialize};
use crate::layout::SegmentPaths;
use crate::storage::{Storage, StorageFile};

use super::error::{AppendError, io_error};

/// A segment of the log. The active (last) one is appended to; sealed ones only read.
#[derive(Debug)]
pub(crate) struct Segment<F> {
    pub(crate) start_offset: u64,
    pub(crate) paths: SegmentPaths,
    pub(crate) log: F,
    /// Open only while the segment is active; sealed segments keep their entries in memory.
    pub(crate) indexes: Option<(F, F)>,
    pub(crate) entries: Vec<IndexEntry>,
    /// `entries[..written_entries]` are in the index files; the rest wait in memory for
    /// [`Self::write_entries`]. Reads use the entries in memory, and recovery rebuilds the
    /// active segment's indexes from its scan, so an entry only has to reach its file
    /// before the seal (see `FORMAT.md` §9).
    pub(crate) written_entries: usize,
    /// Bytes of valid records in the `.log`.
    pub(crate) size_bytes: u64,
    /// The offset after the last record (the start offset when empty).
    pub(crate) next_offset: u64,
    /// `base_timestamp` of the newest record (0 when empty).
    pub(crate) last_timestamp: u64,
}

/// What callers may know about a segment (stats, retention, `DELETE_SEGMENTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    pub start_offset: u64,
    /// The offset after its last record.
    pub next_offset: u64,
    pub size_bytes: u64,
    /// Newest `base_timestamp` in it, µs (0 when empty).
    pub last_timestamp: u64,
    pub sealed: bool,
}

impl<F: StorageFile> Segment<F> {
    /// Creates the three empty files of a new segment.
    pub(crate) async fn create<S: Storage<File = F>>(
        storage: &S,
        partition: &Path,
        start_offset: u64,
    ) -> Result<Self, AppendError> {
        let paths = SegmentPaths::new(partition, start_offset);
        let log = create_file(storage, &paths.log).await?;
        let index = create_file(storage, &paths.index).await?;
        let time_index = create_file(storage, &paths.time_index).await?;
        Ok(Self {
            start_offset,
            paths,
            log,
            indexes: Some((index, time_index)),
            entries: Vec::new(),
            written_entries: 0,
            size_bytes: 0,
            next_offset: start_offset,
            last_timestamp: 0,
        })
    }

    pub(crate) fn info(&self) -> SegmentInfo {
        SegmentInfo {
            start_offset: self.start_offset,
            next_offset: self.next_offset,
            size_bytes: self.size_bytes,
            last_timestamp: self.last_timestamp,
            sealed: self.indexes.is_none(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the entries not yet in the index files, one write per file. A failure (a
    /// full disk) leaves them waiting, for the next call to write again from the same
    /// place.
    pub(crate) async fn write_entries(&mut self) -> Result<(), AppendError> {
        let start = self.written_entries;
        let Some((index, time_index)) = &mut self.indexes else {
            return Ok(());
        };
        let Some(waiting) = self
            .entries
            .get(start..)
            .filter(|waiting| !waiting.is_empty())
        else {
            return Ok(());
        };
        let (offsets, times) = serialize(waiting);
        let (result, _) = index
            .write_all_at(offsets, (start * OFFSET_ENTRY_SIZE) as u64)
            .await;
        result.map_err(io_error("write", &self.paths.index, append_io))?;
        let (result, _) = time_index
            .write_all_at(times, (start * TIME_ENTRY_SIZE) as u64)
            .await;
        result.map_err(io_error("write", &self.paths.time_index, append_io))?;
        self.written_entries = self.entries.len();
        Ok(())
    }

    /// Entries waiting for [`Self::write_entries`].
    pub(crate) fn waiting_entries(&self) -> usize {
        self.entries.len() - self.written_entries
    }

    /// Cuts the log to its valid records (bytes a failed write left behind go).
    pub(crate) async fn trim(&self) -> Result<(), AppendError> {
        self.log.set_len(self.size_bytes).await.map_err(io_error(
            "truncate",
            &self.paths.log,
            append_io,
        ))
    }

    /// Makes the log, then both indexes, durable; closes the indexes (a sealed segment is
    /// never written again). Every failure is a failed fdatasync: callers write the
    /// waiting entries first ([`Self::write_entries`]).
    pub(crate) async fn seal(&mut self) -> Result<(), AppendError> {
        self.log
            .sync_data()
            .await
            .map_err(io_error("sync", &self.paths.log, append_io))?;
        if let Some((index, time_index)) = self.indexes.take() {
            index
                .sync_data()
                .await
                .map_err(io_error("sync", &self.paths.index, append_io))?;
            time_index.sync_data().await.map_err(io_error(
                "sync",
                &self.paths.time_index,
                append_io,
            ))?;
        }
        Ok(())
    }

    /// Rewrites both index files from the entries in memory (after a rebuild).
    pub(crate) async fn rewrite_indexes<S: Storage<File = F>>(
        &mut self,
        storage: &S,
    ) -> Result<(), AppendError> {
        let (offsets, times) = serialize(&self.entries);
        for (path, bytes) in [
            (&self.paths.index, offsets),
            (&self.paths.time_index, times),
        ] {
            let mut file = storage
                .open(path, true)
                .await
                .map_err(io_error("open", path, append_io))?;
            file.set_len(0)
                .await
                .map_err(io_error("truncate", path, append_io))?;
            let (result, _) = file.write_all_at(bytes, 0).await;
            result.map_err(io_error("write", path, append_io))?;
            file.sync_data()
                .await
                .map_err(io_error("sync", path, append_io))?;
        }
        Ok(())
    }
}

pub(crate) fn append_io(
    operation: &'static str,
    path: std::path::PathBuf,
    source: std::io::Error,
) -> AppendError {
    AppendError::Io {
        operation,
        path,
        source,
    }
}

async fn create_file<S: Storage>(storage: &S, path: &Path) -> Result<S::File, AppendError> {
    storage
        .open(path, true)
        .await
        .map_err(io_error("create", path, append_io))
}

//! A replica's durable state in `<system.path>/cluster/`: `log.vsr`, its entries as
//! `vsr::journal` records, and `superblock.vsr`, its view. The layout and the decoders are
//! `vsr::journal`'s; this module owns the files.
//!
//! Appends go through compio (`io_uring`); the rare rewrites — truncating the log where a new
//! view's log replaces its tail, replacing the superblock — are blocking calls, each one
//! followed by the syncs that make it durable before the replica is told.

use std::io;
use std::path::{Path, PathBuf};

use compio::BufResult;
use compio::fs::File;
use compio::io::{AsyncReadAtExt, AsyncWriteAtExt};
use vsr::journal::{Superblock, encode_record, record_size, scan, scan_from};
use vsr::{Entry, Op};

const LOG_FILE: &str = "log.vsr";
const SUPERBLOCK_FILE: &str = "superblock.vsr";
const SUPERBLOCK_NEW: &str = "superblock.vsr.new";

/// The open log and where each entry ends in it.
pub(crate) struct Wal {
    directory: PathBuf,
    log: File,
    /// `ends[i]`: the byte offset after the entry of op `i + 1`.
    ends: Vec<u64>,
}

/// What the directory held at start.
pub(crate) struct Opened {
    pub(crate) wal: Wal,
    /// `None`: no superblock yet (a node that never ran in this cluster).
    pub(crate) superblock: Option<Superblock>,
    pub(crate) log: Vec<Entry>,
}

impl Wal {
    /// Opens (creating) `directory`, reads the superblock and the log, and cuts a torn tail.
    pub(crate) async fn open(directory: &Path) -> io::Result<Opened> {
        std::fs::create_dir_all(directory)?;
        let superblock = match std::fs::read(directory.join(SUPERBLOCK_FILE)) {
            Ok(bytes) => Some(Superblock::decode(&bytes).map_err(|error| {
                io::Error::new(io::ErrorKind::InvalidData, format!("superblock: {error}"))
            })?),
            Err(error) if error.kind() == io::ErrorKind::NotFound => None,
            Err(error) => return Err(error),
        };
        let path = directory.join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(error),
        };
        let (log, used) = scan(&bytes);
        let mut ends = Vec::with_capacity(log.len());
        let mut end = 0u64;
        for entry in &log {
            end += record_size(entry);
            ends.push(end);
        }
        debug_assert_eq!(end, used as u64);
        let file = compio::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .open(&path)
            .await?;
        if bytes.len() > used {
            log::warn!(
                "cluster log: cut a torn tail of {} bytes after op {}",
                bytes.len() - used,
                log.len()
            );
            file.set_len(used as u64).await?;
            file.sync_all().await?;
        }
        let wal = Self {
            directory: directory.to_owned(),
            log: file,
            ends,
        };
        Ok(Opened {
            wal,
            superblock,
            log,
        })
    }

    /// The entries of ops `op_min..=op_max` read back from the log (a replica asks for ops its
    /// state machine dropped from memory). An op beyond the log, or a record that does not
    /// decode as the op expected, is an error: the log was written and synced before.
    pub(crate) async fn read(&self, op_min: Op, op_max: Op) -> io::Result<Vec<Entry>> {
        let index = |op: Op| {
            usize::try_from(op)
                .ok()
                .filter(|&i| i >= 1 && i <= self.ends.len())
        };
        let (Some(first), Some(last)) = (index(op_min), index(op_max)) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("ops {op_min}..={op_max} are not all in the log"),
            ));
        };
        let start = if first == 1 { 0 } else { self.ends[first - 2] };
        let end = self.ends[last - 1];
        let length = usize::try_from(end - start).unwrap_or(usize::MAX);
        let buffer = Vec::with_capacity(length);
        let BufResult(read, buffer) = self.log.read_exact_at(buffer, start).await;
        read?;
        let (entries, used) = scan_from(&buffer, op_min);
        if used != length || entries.len() != last + 1 - first {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("ops {op_min}..={op_max} of the log do not decode"),
            ));
        }
        Ok(entries)
    }

    /// Replaces the superblock: a new file, synced, renamed over the old, the directory
    /// synced.
    pub(crate) fn persist(&self, superblock: &Superblock) -> io::Result<()> {
        let new = self.directory.join(SUPERBLOCK_NEW);
        {
            let file = std::fs::File::create(&new)?;
            io::Write::write_all(&mut &file, &superblock.encode())?;
            file.sync_all()?;
        }
        std::fs::rename(&new, self.directory.join(SUPERBLOCK_FILE))?;
        std::fs::File::open(&self.directory)?.sync_all()
    }

    /// Drops every entry from `op_min` on, appends `entries` (ops `op_min`…), and syncs
    /// when `sync` (or when the tail was cut: a cut must be durable before the entries
    /// after it count).
    pub(crate) async fn write(
        &mut self,
        op_min: Op,
        entries: &[Entry],
        sync: bool,
    ) -> io::Result<()> {
        let keep = usize::try_from(op_min.saturating_sub(1)).unwrap_or(usize::MAX);
        let mut cut = false;
        if keep < self.ends.len() {
            self.ends.truncate(keep);
            let end = self.ends.last().copied().unwrap_or(0);
            self.log.set_len(end).await?;
            cut = true;
        }
        assert_eq!(
            keep,
            self.ends.len(),
            "a write starts at the end of the log or inside it"
        );
        let mut bytes = Vec::new();
        for entry in entries {
            encode_record(entry, &mut bytes);
        }
        let start = self.ends.last().copied().unwrap_or(0);
        let mut end = start;
        for entry in entries {
            end += record_size(entry);
            self.ends.push(end);
        }
        if !bytes.is_empty() {
            let BufResult(written, _) = self.log.write_all_at(bytes, start).await;
            written?;
        }
        if sync || cut {
            self.log.sync_data().await?;
        }
        Ok(())
    }
}

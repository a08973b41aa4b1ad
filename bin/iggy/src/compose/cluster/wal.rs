//! A replica's durable state in `<system.path>/cluster/`: `log.vsr`, its entries as
//! `vsr::journal` records, and `superblock.vsr`, its view. The layout and the decoders are
//! `vsr::journal`'s; this module owns the files.
//!
//! Appends go through compio (`io_uring`); the rare rewrites — truncating the log where a new
//! view's log replaces its tail, replacing the superblock — are blocking calls, each one
//! followed by the syncs that make it durable before the replica is told.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use compio::BufResult;
use compio::fs::File;
use compio::io::{AsyncReadAtExt, AsyncWriteAtExt};
use vsr::journal::{
    RECORD_FIXED, RECORD_MAGIC, Superblock, declared_record_size, encode_record, intact_prefix,
    record_at, record_size, scan_from,
};
use vsr::{Entry, Op};

const LOG_FILE: &str = "log.vsr";
const SUPERBLOCK_FILE: &str = "superblock.vsr";
const SUPERBLOCK_NEW: &str = "superblock.vsr.new";
/// Bytes read at a time when the log is read back at start.
const READ_CHUNK: usize = 8 << 20;

/// The open log and where each entry ends in it.
pub(crate) struct Wal {
    directory: PathBuf,
    log: File,
    /// `ends[i]`: the byte offset after the entry of op `i + 1`.
    ends: Vec<u64>,
}

/// The superblock of `directory` (`None`: none yet, a node that never ran in this cluster).
/// Bytes that are not an intact superblock (a wrong size or magic, a checksum mismatch)
/// are `InvalidData`: damage. An intact one of another version, or with a field this build
/// does not know, is `Unsupported`: another build's, which must not be taken for damage
/// (recovering would discard the log).
pub(crate) fn superblock(directory: &Path) -> io::Result<Option<Superblock>> {
    use vsr::journal::SuperblockError;
    std::fs::create_dir_all(directory)?;
    match std::fs::read(directory.join(SUPERBLOCK_FILE)) {
        Ok(bytes) => Superblock::decode(&bytes).map(Some).map_err(|error| {
            let kind = match error {
                SuperblockError::Version(_) | SuperblockError::Field => io::ErrorKind::Unsupported,
                SuperblockError::Size(_) | SuperblockError::Magic | SuperblockError::Checksum => {
                    io::ErrorKind::InvalidData
                }
            };
            io::Error::new(kind, format!("superblock: {error}"))
        }),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Replaces the superblock of `directory`: a new file, synced, renamed over the old, the
/// directory synced.
pub(crate) fn persist_superblock(directory: &Path, superblock: &Superblock) -> io::Result<()> {
    let new = directory.join(SUPERBLOCK_NEW);
    {
        let file = std::fs::File::create(&new)?;
        io::Write::write_all(&mut &file, &superblock.encode())?;
        file.sync_all()?;
    }
    std::fs::rename(&new, directory.join(SUPERBLOCK_FILE))?;
    std::fs::File::open(directory)?.sync_all()
}

/// Where a log's intact records stop short of an intact record of a later op: bytes flipped
/// or lost inside the log, not a crash's torn tail. Entries this replica acknowledged may be
/// gone, so it must not take part in decisions as if it still held them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Damage {
    /// The first op whose record is not intact.
    pub(crate) op: Op,
    /// Where its record starts in the log.
    pub(crate) offset: u64,
}

/// Reads the log of `directory` once and tells damage from a torn tail: `Some` when the
/// intact records stop where an intact record of a later op still follows, `None` when they
/// run to the end or to bytes no later record follows (the tail a crash tore, cut at start).
/// A record declaring more than `record_max` bytes is not one. Memory: a read chunk and one
/// record. A flipped byte in the last record cannot be told from a torn tail this way.
pub(crate) fn find_damage(directory: &Path, record_max: u64) -> io::Result<Option<Damage>> {
    use std::os::unix::fs::FileExt;
    let mut file = match std::fs::File::open(directory.join(LOG_FILE)) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let length = file.metadata()?.len();
    let (mut pending, mut start, mut next_op) = (Vec::new(), 0u64, 1u64);
    loop {
        let filled = pending.len();
        pending.resize(filled + READ_CHUNK, 0);
        let read = file.read(&mut pending[filled..])?;
        pending.truncate(filled + read);
        let (count, used) = intact_prefix(&pending, next_op);
        next_op += count;
        start += used as u64;
        pending.drain(..used);
        // Reading on only helps a record that is still arriving whole and may be one.
        let arriving = declared_record_size(&pending).is_some_and(|size| {
            size <= record_max
                && size > pending.len() as u64
                && size <= length.saturating_sub(start)
        });
        if read == 0 || !(pending.len() < RECORD_FIXED || arriving) {
            break;
        }
    }
    if pending.is_empty() {
        return Ok(None);
    }
    drop(pending);
    // The records stop at `start`: look for an intact record of a later op after it.
    let mut window = vec![0u8; READ_CHUNK];
    let mut at = start + 1;
    while at < length {
        let read = file.read_at(&mut window, at)?;
        if read == 0 {
            break;
        }
        for index in memchr_magic(&window[..read]) {
            let candidate = at + index as u64;
            let mut fixed = [0u8; RECORD_FIXED];
            if file.read_exact_at(&mut fixed, candidate).is_err() {
                continue;
            }
            let Some(size) = declared_record_size(&fixed)
                .filter(|size| *size <= record_max && *size <= length.saturating_sub(candidate))
            else {
                continue;
            };
            let mut record = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)];
            file.read_exact_at(&mut record, candidate)?;
            if record_at(&record).is_some_and(|op| op >= next_op) {
                return Ok(Some(Damage {
                    op: next_op,
                    offset: start,
                }));
            }
        }
        // The next window overlaps this one by the magic's length less one, so a magic
        // across the boundary is found.
        at += (read as u64).saturating_sub(3).max(1);
    }
    Ok(None)
}

/// The positions in `bytes` where a record's magic starts.
fn memchr_magic(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .windows(4)
        .enumerate()
        .filter(|(_, window)| *window == RECORD_MAGIC)
        .map(|(index, _)| index)
}

/// Bytes in the log file of `directory` (0 when there is none).
pub(crate) fn log_size(directory: &Path) -> io::Result<u64> {
    match std::fs::metadata(directory.join(LOG_FILE)) {
        Ok(metadata) => Ok(metadata.len()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(error) => Err(error),
    }
}

/// Empties the log of `directory` (synced; made empty if there is none): a damaged log is
/// rebuilt from the other replicas.
pub(crate) fn discard_log(directory: &Path) -> io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(directory.join(LOG_FILE))?;
    file.set_len(0)?;
    file.sync_all()
}

/// The log of a directory read back at start, a chunk at a time: its intact records in op
/// order ([`LogReader::next`]), then the open [`Wal`] with a torn tail cut
/// ([`LogReader::finish`]). Memory holds one chunk's records, whatever the log's size.
pub(crate) struct LogReader {
    directory: PathBuf,
    file: Option<std::fs::File>,
    /// Bytes read and not yet decoded (a record split across chunks, or a torn tail).
    pending: Vec<u8>,
    ready: VecDeque<Entry>,
    ends: Vec<u64>,
    next_op: Op,
    eof: bool,
}

impl LogReader {
    pub(crate) fn open(directory: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(directory)?;
        let file = match std::fs::File::open(directory.join(LOG_FILE)) {
            Ok(file) => Some(file),
            Err(error) if error.kind() == io::ErrorKind::NotFound => None,
            Err(error) => return Err(error),
        };
        Ok(Self {
            directory: directory.to_owned(),
            eof: file.is_none(),
            file,
            pending: Vec::new(),
            ready: VecDeque::new(),
            ends: Vec::new(),
            next_op: 1,
        })
    }

    /// The next intact record's entry, in op order; `None` at the end of them.
    pub(crate) fn next(&mut self) -> io::Result<Option<Entry>> {
        loop {
            if let Some(entry) = self.ready.pop_front() {
                return Ok(Some(entry));
            }
            let Some(file) = self.file.as_mut().filter(|_| !self.eof) else {
                return Ok(None);
            };
            let start = self.pending.len();
            self.pending.resize(start + READ_CHUNK, 0);
            let read = file.read(&mut self.pending[start..])?;
            self.pending.truncate(start + read);
            self.eof = read == 0;
            let (entries, used) = scan_from(&self.pending, self.next_op);
            let mut end = self.ends.last().copied().unwrap_or(0);
            for entry in entries {
                end += record_size(&entry);
                self.ends.push(end);
                self.next_op += 1;
                self.ready.push_back(entry);
            }
            self.pending.drain(..used);
        }
    }

    /// The log open for appends; bytes after the last intact record (a torn tail) are cut
    /// and the cut synced.
    pub(crate) async fn finish(mut self) -> io::Result<Wal> {
        while self.next()?.is_some() {}
        let path = self.directory.join(LOG_FILE);
        let file = compio::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .open(&path)
            .await?;
        let used = self.ends.last().copied().unwrap_or(0);
        if !self.pending.is_empty() {
            log::warn!(
                "cluster log: cut a torn tail of {} bytes after op {}",
                self.pending.len(),
                self.ends.len()
            );
            file.set_len(used).await?;
            file.sync_all().await?;
        }
        Ok(Wal {
            directory: self.directory,
            log: file,
            ends: self.ends,
        })
    }
}

impl Wal {
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
        persist_superblock(&self.directory, superblock)
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use vsr::journal::encode_record;
    use vsr::{Entry, ROOT_CHECKSUM};

    use super::{Damage, LOG_FILE, LogReader, READ_CHUNK, find_damage};

    /// Ops 1… with bodies of `sizes`, and each record's end in the log.
    fn records(sizes: &[usize]) -> (Vec<Entry>, Vec<u8>, Vec<usize>) {
        let mut entries: Vec<Entry> = Vec::new();
        let (mut bytes, mut ends) = (Vec::new(), Vec::new());
        for (index, size) in sizes.iter().enumerate() {
            let op = u64::try_from(index).unwrap() + 1;
            let parent = entries.last().map_or(ROOT_CHECKSUM, |entry| entry.checksum);
            let body: Arc<[u8]> = vec![u8::try_from(index % 200).unwrap(); *size].into();
            let entry = Entry::new(op, 0, 1, op, parent, body);
            encode_record(&entry, &mut bytes);
            ends.push(bytes.len());
            entries.push(entry);
        }
        (entries, bytes, ends)
    }

    /// A flipped byte (or a flipped body length) in any record but the last, with intact
    /// records after it, is damage at that record's op; a log that is whole, torn in its
    /// last record or followed by garbage is not, nor is a flip in the last record, which a
    /// torn append looks like.
    #[test]
    fn damage_inside_the_log_is_told_from_a_torn_tail() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join(LOG_FILE);
        let (_, bytes, ends) = records(&[100, READ_CHUNK + 5000, 3000, 40]);
        let damage_of = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            find_damage(directory.path(), 64 << 20).unwrap()
        };
        assert_eq!(damage_of(&bytes), None, "whole");
        assert_eq!(
            damage_of(&bytes[..ends[3] - 7]),
            None,
            "torn in its last record"
        );
        let mut garbage = bytes.clone();
        garbage.extend_from_slice(b"VSRL and then the crash");
        assert_eq!(damage_of(&garbage), None, "garbage after the last record");
        for (record, at) in [
            (0, 30),
            (0, 150),
            (1, ends[0] + 80),
            (1, ends[0] + 5000),
            (2, ends[1] + 100),
        ] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x20;
            let offset = if record == 0 { 0 } else { ends[record - 1] };
            let expected = Damage {
                op: u64::try_from(record).unwrap() + 1,
                offset: u64::try_from(offset).unwrap(),
            };
            assert_eq!(damage_of(&flipped), Some(expected), "flip at {at}");
        }
        // Record 2's body length (the four bytes before its body) made huge.
        let mut lengthened = bytes.clone();
        let length_at = ends[0] + vsr::journal::RECORD_FIXED - 1;
        lengthened[length_at] = 0x7f;
        assert_eq!(
            damage_of(&lengthened),
            Some(Damage {
                op: 2,
                offset: u64::try_from(ends[0]).unwrap()
            })
        );
        let mut last = bytes.clone();
        last[ends[2] + 10] ^= 0x20;
        assert_eq!(damage_of(&last), None, "a flip in the last record");
    }

    /// Three records, one larger than a read chunk (so records span chunks), then a torn
    /// tail: all three come back in order, the tail is cut, and reads find each op.
    #[test]
    fn a_log_read_back_in_chunks_gives_every_record_and_cuts_a_torn_tail() {
        let directory = tempfile::tempdir().unwrap();
        let sizes = [100, READ_CHUNK + READ_CHUNK / 2, 3000];
        let mut entries: Vec<Entry> = Vec::new();
        for (index, size) in sizes.into_iter().enumerate() {
            let op = u64::try_from(index).unwrap() + 1;
            let parent = entries.last().map_or(ROOT_CHECKSUM, |entry| entry.checksum);
            let body: Arc<[u8]> = vec![u8::try_from(index).unwrap(); size].into();
            entries.push(Entry::new(op, 0, 1, op, parent, body));
        }
        let mut bytes = Vec::new();
        for entry in &entries {
            encode_record(entry, &mut bytes);
        }
        let intact = bytes.len();
        bytes.extend_from_slice(b"VSRL and then the crash");
        std::fs::write(directory.path().join(LOG_FILE), &bytes).unwrap();
        compio::runtime::Runtime::new().unwrap().block_on(async {
            let mut reader = LogReader::open(directory.path()).unwrap();
            let mut read = Vec::new();
            while let Some(entry) = reader.next().unwrap() {
                read.push(entry);
            }
            assert_eq!(read, entries);
            let wal = reader.finish().await.unwrap();
            let length = std::fs::metadata(directory.path().join(LOG_FILE))
                .unwrap()
                .len();
            assert_eq!(
                length,
                u64::try_from(intact).unwrap(),
                "the torn tail is cut"
            );
            assert_eq!(wal.read(2, 3).await.unwrap(), entries[1..].to_vec());
            assert!(wal.read(3, 4).await.is_err(), "op 4 is not in the log");
        });
    }
}

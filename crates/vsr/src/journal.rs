//! The bytes a replica keeps on disk: its log as a sequence of entry records, and a
//! superblock holding its durable view. Pure encoders and total decoders; the caller owns
//! the files.
//!
//! A log record is the magic `VSRL` (4 bytes) followed by the entry as a message body carries
//! it (`wire`: op, view, client, request, parent, checksum, body length, body). Records follow
//! each other with no padding, ops 1, 2, 3 … in order. [`scan`] keeps the longest prefix of
//! intact, consecutive records: a torn or flipped tail (a crash mid-append) is cut off there,
//! and the replica state machine keeps only a hash chain of it anyway. A record that is not
//! intact with an intact record of a later op after it is damage, not a tail: the caller
//! finds such records with [`declared_record_size`] and [`record_at`] (the binary then
//! rebuilds the log from the other replicas rather than cut it).
//!
//! The superblock is 64 bytes: magic `VSRS`, version (u32, 1), cluster (u128), replica (u8),
//! recovering (u8), 2 reserved bytes, view (u32), log view (u32), 20 reserved bytes, then the
//! xxh3-128 checksum of the 48 bytes before it. It is replaced whole (write a new file, sync,
//! rename, sync the directory), so a crash leaves the old one or the new one.

use alloc::vec::Vec;

use xxhash_rust::xxh3::xxh3_128;

use crate::wire::{EntryRef, put_entry, read_entry_ref};
use crate::{Entry, Op, ReplicaId, View};

/// The first bytes of every log record.
pub const RECORD_MAGIC: [u8; 4] = *b"VSRL";
const SUPERBLOCK_MAGIC: [u8; 4] = *b"VSRS";
const SUPERBLOCK_VERSION: u32 = 1;
/// Bytes in a superblock.
pub const SUPERBLOCK_SIZE: usize = 64;
const SUPERBLOCK_SUMMED: usize = SUPERBLOCK_SIZE - 16;

/// Bytes of a record before its body: the magic, op, view, client, request, parent,
/// checksum and body length.
pub const RECORD_FIXED: usize = 4 + 8 + 4 + 16 + 8 + 16 + 16 + 4;

/// Bytes the record of `entry` takes: the magic, the entry's fixed fields, its body.
pub fn record_size(entry: &Entry) -> u64 {
    u64::try_from(RECORD_FIXED + entry.body.len()).unwrap_or(u64::MAX)
}

/// The size the record starting at `bytes[0]` declares (its fixed part and body length):
/// what to read before [`record_at`] can tell whether it is intact. `None` without the magic
/// and the whole fixed part there.
pub fn declared_record_size(bytes: &[u8]) -> Option<u64> {
    if !bytes.starts_with(&RECORD_MAGIC) {
        return None;
    }
    let length: [u8; 4] = bytes.get(RECORD_FIXED - 4..RECORD_FIXED)?.try_into().ok()?;
    let body = u64::from(u32::from_le_bytes(length));
    Some(body + RECORD_FIXED as u64)
}

/// The op of the intact record at the start of `bytes`, if one starts there.
pub fn record_at(bytes: &[u8]) -> Option<Op> {
    let (entry, _) = read_entry_ref(bytes.strip_prefix(&RECORD_MAGIC)?)?;
    entry.is_intact().then_some(entry.op)
}

/// Appends the record of `entry` to `out`.
pub fn encode_record(entry: &Entry, out: &mut Vec<u8>) {
    out.extend_from_slice(&RECORD_MAGIC);
    put_entry(out, entry);
}

/// The intact records at the start of `bytes`, in op order from 1, and how many bytes they
/// take (where the next append goes; anything after is a torn tail to truncate).
pub fn scan(bytes: &[u8]) -> (Vec<Entry>, usize) {
    scan_from(bytes, 1)
}

/// As [`scan`], for bytes that start at the record of op `first` (a range read back).
pub fn scan_from(bytes: &[u8], first: Op) -> (Vec<Entry>, usize) {
    let mut entries: Vec<Entry> = Vec::new();
    let used = walk_intact(bytes, first, |entry| entries.push(entry.to_entry()));
    (entries, used)
}

/// How many intact, consecutive records from op `first` start `bytes`, and the bytes they
/// take: [`scan_from`] without copying a body (a check of a log read back, not a replay).
pub fn intact_prefix(bytes: &[u8], first: Op) -> (u64, usize) {
    let mut count = 0u64;
    let used = walk_intact(bytes, first, |_| count += 1);
    (count, used)
}

/// Calls `each` on the intact, consecutive records from op `first` at the start of `bytes`;
/// returns the bytes they take.
fn walk_intact(bytes: &[u8], first: Op, mut each: impl FnMut(&EntryRef<'_>)) -> usize {
    let mut used = 0;
    let mut expected_op = first;
    let mut rest = bytes;
    while let Some(after_magic) = rest.strip_prefix(&RECORD_MAGIC) {
        let Some((entry, after)) = read_entry_ref(after_magic) else {
            break;
        };
        if entry.op != expected_op || !entry.is_intact() {
            break;
        }
        used += rest.len() - after.len();
        each(&entry);
        expected_op = expected_op.saturating_add(1);
        rest = after;
    }
    used
}

/// What the superblock holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    pub cluster: u128,
    pub replica: ReplicaId,
    pub view: View,
    pub log_view: View,
    pub recovering: bool,
}

/// Why superblock bytes cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SuperblockError {
    #[error("a superblock is {SUPERBLOCK_SIZE} bytes, not {0}")]
    Size(usize),
    #[error("not a superblock (magic)")]
    Magic,
    #[error("superblock version {0} is not 1")]
    Version(u32),
    #[error("superblock checksum mismatch")]
    Checksum,
    #[error("superblock field out of range")]
    Field,
}

impl Superblock {
    pub fn encode(&self) -> [u8; SUPERBLOCK_SIZE] {
        let mut bytes = [0u8; SUPERBLOCK_SIZE];
        bytes[0..4].copy_from_slice(&SUPERBLOCK_MAGIC);
        bytes[4..8].copy_from_slice(&SUPERBLOCK_VERSION.to_le_bytes());
        bytes[8..24].copy_from_slice(&self.cluster.to_le_bytes());
        bytes[24] = self.replica;
        bytes[25] = u8::from(self.recovering);
        bytes[28..32].copy_from_slice(&self.view.to_le_bytes());
        bytes[32..36].copy_from_slice(&self.log_view.to_le_bytes());
        let checksum = xxh3_128(&bytes[..SUPERBLOCK_SUMMED]);
        bytes[SUPERBLOCK_SUMMED..].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    /// Total: any bytes give a superblock or an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, SuperblockError> {
        let bytes: &[u8; SUPERBLOCK_SIZE] = bytes
            .try_into()
            .map_err(|_size| SuperblockError::Size(bytes.len()))?;
        let (summed, checksum) = bytes.split_at(SUPERBLOCK_SUMMED);
        let field = |range: core::ops::Range<usize>| &summed[range];
        let u32_at = |at: usize| {
            let mut word = [0u8; 4];
            word.copy_from_slice(field(at..at + 4));
            u32::from_le_bytes(word)
        };
        if field(0..4) != SUPERBLOCK_MAGIC {
            return Err(SuperblockError::Magic);
        }
        let mut sum = [0u8; 16];
        sum.copy_from_slice(checksum);
        if u128::from_le_bytes(sum) != xxh3_128(summed) {
            return Err(SuperblockError::Checksum);
        }
        let version = u32_at(4);
        if version != SUPERBLOCK_VERSION {
            return Err(SuperblockError::Version(version));
        }
        let mut cluster = [0u8; 16];
        cluster.copy_from_slice(field(8..24));
        let recovering = match summed[25] {
            0 => false,
            1 => true,
            _ => return Err(SuperblockError::Field),
        };
        let (view, log_view) = (u32_at(28), u32_at(32));
        let reserved_zero = summed[26..28].iter().chain(&summed[36..]).all(|b| *b == 0);
        if log_view > view || !reserved_zero {
            return Err(SuperblockError::Field);
        }
        Ok(Self {
            cluster: u128::from_le_bytes(cluster),
            replica: summed[24],
            view,
            log_view,
            recovering,
        })
    }
}

/// Fuzz entry point: both decoders on arbitrary bytes (never a panic).
pub fn fuzz_decode(bytes: &[u8]) {
    let (entries, used) = scan(bytes);
    assert!(used <= bytes.len());
    assert!(entries.iter().all(Entry::is_intact));
    let _ = Superblock::decode(bytes);
}

//! The journal's bytes as plain functions, no I/O: encoding entries, [`replay`] (which tells
//! a torn tail from corruption) and [`recover`] (snapshot plus journal into [`Metadata`]).
//! `journal.rs` documents the format; start-up, `iggy check` and the fuzzers share this code.

use std::path::Path;

use proto::DecodeError;
use proto::codec::{Reader, usize_to_u64};
use xxhash_rust::xxh3::xxh3_64;

use super::journal::JournalError;
use super::model::Metadata;
use super::op::MetadataOp;
use super::op_codec::{OP_VERSION, decode_op, encode_op};

/// Bytes of an entry's header: length and checksum.
pub const ENTRY_HEADER_BYTES: usize = 12;
/// Largest body an entry may hold (far above any real op; bounds replay allocations).
pub const ENTRY_LENGTH_MAX: usize = 64 << 20;
/// The first byte of a base record's body; op bodies start with their version, 1 and up.
pub const BASE_VERSION: u8 = 0;
/// Bytes of a base record's body: version and commit.
const BASE_BODY_BYTES: usize = 9;

/// What is wrong with the entry at some position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EntryDamage {
    #[error("a {available}-byte fragment of an entry header")]
    Fragment { available: usize },
    #[error("length {length} outside 1..={ENTRY_LENGTH_MAX}")]
    Length { length: u32 },
    #[error("length {length} runs past the end of the file ({available} bytes follow the header)")]
    Overrun { length: u32, available: usize },
    #[error("checksum mismatch (stored {stored:#018x}, computed {computed:#018x})")]
    Checksum { stored: u64, computed: u64 },
}

/// One op read from the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Byte position of the entry in the file.
    pub position: u64,
    pub op: MetadataOp,
}

/// What [`replay`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// The commit the journal continues: its base record's, or 0 without one.
    pub base: u64,
    /// The ops, oldest first; the op at index `i` made commit `base + i + 1`.
    pub entries: Vec<Entry>,
    /// Bytes of the intact entries; a torn tail follows when the file is longer.
    pub valid_length: u64,
    /// What ended the intact entries before the end of the file: a torn last append.
    pub torn: Option<EntryDamage>,
}

/// One entry's bytes: header and `body`.
pub fn encode_entry_body(body: &[u8]) -> Result<Vec<u8>, JournalError> {
    if body.len() > ENTRY_LENGTH_MAX {
        return Err(JournalError::EntryTooLarge { length: body.len() });
    }
    // ENTRY_LENGTH_MAX fits a u32, checked just above.
    let length = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut entry = Vec::with_capacity(body.len().saturating_add(ENTRY_HEADER_BYTES));
    entry.extend_from_slice(&length.to_le_bytes());
    entry.extend_from_slice(&xxh3_64(body).to_le_bytes());
    entry.extend_from_slice(body);
    Ok(entry)
}

/// The entry of one op.
pub fn encode_entry(op: &MetadataOp) -> Result<Vec<u8>, JournalError> {
    encode_entry_body(&encode_op(op))
}

/// The base record that opens a journal continuing `commit`.
pub fn encode_base_entry(commit: u64) -> Vec<u8> {
    let mut body = Vec::with_capacity(BASE_BODY_BYTES);
    body.push(BASE_VERSION);
    body.extend_from_slice(&commit.to_le_bytes());
    // Nine bytes are far below ENTRY_LENGTH_MAX.
    encode_entry_body(&body).unwrap_or_default()
}

/// Decodes a journal's bytes. An entry that is damaged ends the replay there: it is a torn
/// last append when no intact entry starts anywhere after it (the tail is reported in
/// [`Replay::torn`]), and corruption otherwise, because an intact entry after the damage
/// proves the damage is not at the tail and cutting there would drop acknowledged ops. An
/// intact entry whose op does not decode is an error too: a foreign or newer format.
pub fn replay(bytes: &[u8], path: &Path) -> Result<Replay, JournalError> {
    let mut replay = Replay {
        base: 0,
        entries: Vec::new(),
        valid_length: 0,
        torn: None,
    };
    let mut position = 0_usize;
    while position < bytes.len() {
        match read_entry(bytes, position) {
            Ok((body, end)) => {
                replay_body(&mut replay, body, position, path)?;
                position = end;
            }
            Err(damage) => {
                if let Some(intact) = find_intact_entry(bytes, position.saturating_add(1)) {
                    return Err(JournalError::Corrupt {
                        path: path.to_path_buf(),
                        position: usize_to_u64(position),
                        reason: damage,
                        intact_at: usize_to_u64(intact),
                    });
                }
                replay.torn = Some(damage);
                break;
            }
        }
    }
    replay.valid_length = usize_to_u64(position);
    Ok(replay)
}

/// The state `snapshot` and the journal's ops after it add up to. Ops at or below the
/// snapshot's commit are already in it: they are left over from a compaction that wrote
/// the snapshot and was interrupted before it replaced the journal.
pub fn recover(snapshot: Metadata, replay: &Replay, path: &Path) -> Result<Metadata, JournalError> {
    let snapshot_commit = snapshot.commit;
    if replay.base > snapshot_commit {
        return Err(JournalError::Gap {
            path: path.to_path_buf(),
            base: replay.base,
            snapshot_commit,
        });
    }
    let mut metadata = snapshot;
    let mut commit = replay.base;
    for entry in &replay.entries {
        commit = commit.saturating_add(1);
        if commit <= snapshot_commit {
            continue;
        }
        metadata
            .apply(&entry.op)
            .map_err(|source| JournalError::Replay {
                path: path.to_path_buf(),
                position: entry.position,
                source,
            })?;
        // Each applied op advances the commit by one from the snapshot's, and the first
        // applied op is the one right after it.
        assert_eq!(metadata.commit, commit, "replay commit numbering");
    }
    Ok(metadata)
}

/// Refuses a journal that ends before the snapshot's commit ([`JournalError::Short`]): it
/// lost its start, since a compaction's old journal always ends at the snapshot's commit and
/// its new one starts there (`journal.rs`, "Compaction").
pub fn reaches_snapshot(
    replay: &Replay,
    snapshot_commit: u64,
    path: &Path,
) -> Result<(), JournalError> {
    let ops = u64::try_from(replay.entries.len()).unwrap_or(u64::MAX);
    let end = replay.base.saturating_add(ops);
    if end < snapshot_commit {
        return Err(JournalError::Short {
            path: path.to_path_buf(),
            end,
            snapshot_commit,
        });
    }
    Ok(())
}

/// Adds the intact entry `body` at `position` to `replay`: the base record may only open
/// the file; anything else must be an op.
fn replay_body(
    replay: &mut Replay,
    body: &[u8],
    position: usize,
    path: &Path,
) -> Result<(), JournalError> {
    let undecodable = |source| JournalError::Undecodable {
        path: path.to_path_buf(),
        position: usize_to_u64(position),
        source,
    };
    if position == 0 && body.first() == Some(&BASE_VERSION) {
        replay.base = decode_base(body).map_err(undecodable)?;
        return Ok(());
    }
    let op = decode_op(body).map_err(undecodable)?;
    let position = usize_to_u64(position);
    replay.entries.push(Entry { position, op });
    Ok(())
}

fn decode_base(body: &[u8]) -> Result<u64, DecodeError> {
    let mut reader = Reader::new(body, proto::Dialect::V0_12_2);
    reader.u8("base.version")?;
    let commit = reader.u64("base.commit")?;
    reader.finish("base")?;
    Ok(commit)
}

/// The body of the entry at `position` and where the next one starts, or what is wrong.
fn read_entry(bytes: &[u8], position: usize) -> Result<(&[u8], usize), EntryDamage> {
    let rest = bytes.get(position..).unwrap_or_default();
    let (header, after) =
        rest.split_first_chunk::<ENTRY_HEADER_BYTES>()
            .ok_or(EntryDamage::Fragment {
                available: rest.len(),
            })?;
    let (mut length, mut stored) = ([0_u8; 4], [0_u8; 8]);
    length.copy_from_slice(&header[..4]);
    stored.copy_from_slice(&header[4..]);
    let (length, stored) = (u32::from_le_bytes(length), u64::from_le_bytes(stored));
    let body_length = usize::try_from(length).unwrap_or(usize::MAX);
    if !(1..=ENTRY_LENGTH_MAX).contains(&body_length) {
        return Err(EntryDamage::Length { length });
    }
    let body = after.get(..body_length).ok_or(EntryDamage::Overrun {
        length,
        available: after.len(),
    })?;
    let computed = xxh3_64(body);
    if computed != stored {
        return Err(EntryDamage::Checksum { stored, computed });
    }
    let end = position
        .saturating_add(ENTRY_HEADER_BYTES)
        .saturating_add(body_length);
    Ok((body, end))
}

/// The first position at or after `from` where an intact entry starts. Only bodies that
/// open with a known version byte are hashed, which keeps the search over a long damaged
/// tail cheap.
fn find_intact_entry(bytes: &[u8], from: usize) -> Option<usize> {
    let last_start = bytes
        .len()
        .checked_sub(ENTRY_HEADER_BYTES.saturating_add(1))?;
    (from..=last_start).find(|&position| {
        let version = bytes.get(position.saturating_add(ENTRY_HEADER_BYTES));
        matches!(version, Some(&BASE_VERSION | &OP_VERSION)) && read_entry(bytes, position).is_ok()
    })
}

//! `metadata/snapshot.bin`: the whole [`Metadata`] at one commit. Compaction writes it so
//! that start-up loads it and replays only the journal ops after it (see `journal.rs` for
//! when it is written and how a crash is survived).
//!
//! # Format
//!
//! ```text
//! 0   [u8; 8]  magic      "IGGYMETA"
//! 8   u32      version    SNAPSHOT_VERSION (1)
//! 12  u32      reserved   zero
//! 16  u64      length     bytes of the body, which must end the file
//! 24  u64      checksum   XXH3-64 (seed 0) of bytes 0..24 followed by the body
//! 32  body
//! ```
//!
//! The body uses `op_codec.rs`'s encodings (little-endian fixed-width integers, strings
//! `[length:u32][UTF-8]`, `Option<T>` as `[present:u8][T]`, options blocks, permissions, topic
//! settings and user status exactly as in an op):
//!
//! ```text
//! body      = commit:u64 count:u32 stream* count:u32 user*
//! stream    = id:u32 name created_at:u64 options count:u32 topic*
//! topic     = id:u32 name created_at:u64 options settings next_group_id:u32
//!             count:u32 partition* count:u32 group*
//! partition = id:u32 created_at:u64 incarnation:u64
//! group     = id:u32 name created_at:u64
//! user      = id:u32 username password_hash status:u8 permissions:Option created_at:u64
//!             count:u32 token*
//! token     = name token_hash expiry_at:Option<u64>
//! ```
//!
//! Every list is in ascending key order (ids; token names) without repeats, so an encoding
//! is canonical and a decoded map holds exactly the entries written. Decoding is total: any
//! bytes give a [`Metadata`] or a [`SnapshotError`] that says where the file is bad. Counts
//! drive loops, never allocations, so a huge count costs nothing but a short-input error.
//! A new field means a new version; old versions stay decodable.

use std::collections::BTreeMap;

use proto::codec::{Reader, Writer, len_u32, usize_to_u64};
use proto::primitives::OptionsBlock;
use proto::{DecodeError, DecodeErrorKind, Dialect};
use xxhash_rust::xxh3::Xxh3Default;

use super::model::{ConsumerGroup, Metadata, Partition, PersonalAccessToken, Stream, Topic, User};
use super::op_codec::{
    decode_permissions, decode_settings, encode_permissions, encode_settings, optional,
    read_optional, read_status, read_text, status_byte, text,
};

/// The snapshot's file name in the metadata directory.
pub const SNAPSHOT_FILE: &str = "snapshot.bin";
/// The first bytes of every snapshot.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"IGGYMETA";
/// The format version this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;
/// Bytes before the body.
pub const SNAPSHOT_HEADER_BYTES: usize = 32;

/// The dialect the embedded options blocks and permissions are encoded in.
const DIALECT: Dialect = Dialect::V0_12_2;

/// Why a snapshot file does not hold a snapshot; [`Self::position`] is the byte it fails at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("{length} bytes are shorter than the {SNAPSHOT_HEADER_BYTES}-byte header")]
    Truncated { length: usize },
    #[error("bad magic: not a metadata snapshot")]
    Magic,
    #[error("version {found} is not {SNAPSHOT_VERSION}")]
    Version { found: u32 },
    #[error("reserved header bytes are not zero")]
    Reserved,
    #[error("the header declares a {declared}-byte body but {actual} bytes follow it")]
    Length { declared: u64, actual: u64 },
    #[error("checksum mismatch (stored {stored:#018x}, computed {computed:#018x})")]
    Checksum { stored: u64, computed: u64 },
    #[error("bad body at byte {position}")]
    Body {
        position: u64,
        #[source]
        source: DecodeError,
    },
}

impl SnapshotError {
    /// The byte of the file the error is about.
    pub fn position(&self) -> u64 {
        match self {
            Self::Truncated { .. } | Self::Magic => 0,
            Self::Version { .. } => 8,
            Self::Reserved => 12,
            Self::Length { .. } => 16,
            Self::Checksum { .. } => 24,
            Self::Body { position, .. } => *position,
        }
    }
}

/// The snapshot file's bytes for `metadata`.
pub fn encode_snapshot(metadata: &Metadata) -> Vec<u8> {
    let mut body = Vec::new();
    encode_body(metadata, &mut Writer::new(&mut body, DIALECT));
    let file = frame(&body);
    debug_assert_eq!(decode_snapshot(&file).as_ref(), Ok(metadata));
    file
}

/// A snapshot file holding `body` under a valid header (the fuzzers frame arbitrary bodies
/// with it to reach the body decoder).
pub(crate) fn frame(body: &[u8]) -> Vec<u8> {
    let mut file = Vec::with_capacity(SNAPSHOT_HEADER_BYTES.saturating_add(body.len()));
    file.extend_from_slice(&SNAPSHOT_MAGIC);
    file.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    file.extend_from_slice(&0_u32.to_le_bytes());
    file.extend_from_slice(&usize_to_u64(body.len()).to_le_bytes());
    let checksum = checksum(&file, body);
    file.extend_from_slice(&checksum.to_le_bytes());
    file.extend_from_slice(body);
    file
}

/// Decodes a whole snapshot file.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Metadata, SnapshotError> {
    let body = check_header(bytes)?;
    let mut reader = Reader::new(body, DIALECT);
    decode_body(&mut reader).map_err(|source| SnapshotError::Body {
        position: usize_to_u64(SNAPSHOT_HEADER_BYTES.saturating_add(source.offset)),
        source,
    })
}

/// Validates the header and checksum; returns the body.
fn check_header(bytes: &[u8]) -> Result<&[u8], SnapshotError> {
    let truncated = SnapshotError::Truncated {
        length: bytes.len(),
    };
    let (header, body) = bytes
        .split_first_chunk::<SNAPSHOT_HEADER_BYTES>()
        .ok_or(truncated)?;
    if header[..8] != SNAPSHOT_MAGIC {
        return Err(SnapshotError::Magic);
    }
    let version = u32::from_le_bytes(header_field(header, 8));
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotError::Version { found: version });
    }
    if header_field::<4>(header, 12) != [0; 4] {
        return Err(SnapshotError::Reserved);
    }
    let declared = u64::from_le_bytes(header_field(header, 16));
    let actual = usize_to_u64(body.len());
    if declared != actual {
        return Err(SnapshotError::Length { declared, actual });
    }
    let stored = u64::from_le_bytes(header_field(header, 24));
    let computed = checksum(&header[..24], body);
    if stored != computed {
        return Err(SnapshotError::Checksum { stored, computed });
    }
    Ok(body)
}

/// The `N` header bytes at `offset`; the callers' offsets are constants inside the header.
fn header_field<const N: usize>(header: &[u8; SNAPSHOT_HEADER_BYTES], offset: usize) -> [u8; N] {
    let mut field = [0_u8; N];
    field.copy_from_slice(&header[offset..offset + N]);
    field
}

/// XXH3-64 of the header's first 24 bytes followed by the body.
fn checksum(header: &[u8], body: &[u8]) -> u64 {
    let mut hasher = Xxh3Default::new();
    hasher.update(header.get(..24).unwrap_or(header));
    hasher.update(body);
    hasher.digest()
}

fn encode_body(metadata: &Metadata, w: &mut Writer<'_>) {
    w.u64(metadata.commit);
    encode_list(w, metadata.streams.values(), encode_stream);
    encode_list(w, metadata.users.values(), encode_user);
}

fn decode_body(r: &mut Reader<'_>) -> Result<Metadata, DecodeError> {
    let commit = r.u64("snapshot.commit")?;
    let streams = decode_map(r, "snapshot.streams", decode_stream, |s| s.id)?;
    let users = decode_map(r, "snapshot.users", decode_user, |u| u.id)?;
    r.finish("snapshot")?;
    Ok(Metadata {
        streams,
        users,
        commit,
    })
}

fn encode_stream(w: &mut Writer<'_>, stream: &Stream) {
    w.u32(stream.id);
    text(w, &stream.name);
    w.u64(stream.created_at);
    stream.options.encode_prefixed(w);
    encode_list(w, stream.topics.values(), encode_topic);
}

fn decode_stream(r: &mut Reader<'_>) -> Result<Stream, DecodeError> {
    Ok(Stream {
        id: r.u32("stream.id")?,
        name: read_text(r)?,
        created_at: r.u64("stream.created_at")?,
        options: OptionsBlock::decode_prefixed(r)?,
        topics: decode_map(r, "stream.topics", decode_topic, |t| t.id)?,
    })
}

fn encode_topic(w: &mut Writer<'_>, topic: &Topic) {
    w.u32(topic.id);
    text(w, &topic.name);
    w.u64(topic.created_at);
    topic.options.encode_prefixed(w);
    encode_settings(&topic.settings, w);
    w.u32(topic.next_group_id);
    encode_list(w, topic.partitions.values(), |w, partition| {
        w.u32(partition.id);
        w.u64(partition.created_at);
        w.u64(partition.incarnation);
    });
    encode_list(w, topic.groups.values(), |w, group| {
        w.u32(group.id);
        text(w, &group.name);
        w.u64(group.created_at);
    });
}

fn decode_topic(r: &mut Reader<'_>) -> Result<Topic, DecodeError> {
    Ok(Topic {
        id: r.u32("topic.id")?,
        name: read_text(r)?,
        created_at: r.u64("topic.created_at")?,
        options: OptionsBlock::decode_prefixed(r)?,
        settings: decode_settings(r)?,
        next_group_id: r.u32("topic.next_group_id")?,
        partitions: decode_map(r, "topic.partitions", decode_partition, |p| p.id)?,
        groups: decode_map(r, "topic.groups", decode_group, |g| g.id)?,
    })
}

fn decode_partition(r: &mut Reader<'_>) -> Result<Partition, DecodeError> {
    Ok(Partition {
        id: r.u32("partition.id")?,
        created_at: r.u64("partition.created_at")?,
        incarnation: r.u64("partition.incarnation")?,
    })
}

fn decode_group(r: &mut Reader<'_>) -> Result<ConsumerGroup, DecodeError> {
    Ok(ConsumerGroup {
        id: r.u32("group.id")?,
        name: read_text(r)?,
        created_at: r.u64("group.created_at")?,
    })
}

fn encode_user(w: &mut Writer<'_>, user: &User) {
    w.u32(user.id);
    text(w, &user.username);
    text(w, &user.password_hash);
    w.u8(status_byte(user.status));
    optional(w, user.permissions.as_ref(), encode_permissions);
    w.u64(user.created_at);
    encode_list(w, user.tokens.values(), |w, token| {
        text(w, &token.name);
        text(w, &token.token_hash);
        optional(w, token.expiry_at.as_ref(), |w, expiry| w.u64(*expiry));
    });
}

fn decode_user(r: &mut Reader<'_>) -> Result<User, DecodeError> {
    Ok(User {
        id: r.u32("user.id")?,
        username: read_text(r)?,
        password_hash: read_text(r)?,
        status: read_status(r)?,
        permissions: read_optional(r, decode_permissions)?,
        created_at: r.u64("user.created_at")?,
        tokens: decode_map(r, "user.tokens", decode_token, |t| t.name.clone())?,
    })
}

fn decode_token(r: &mut Reader<'_>) -> Result<PersonalAccessToken, DecodeError> {
    Ok(PersonalAccessToken {
        name: read_text(r)?,
        token_hash: read_text(r)?,
        expiry_at: read_optional(r, |r| r.u64("token.expiry_at"))?,
    })
}

/// `[count:u32]` then each item; a map never holds more than `u32::MAX` entries because
/// ids are `u32` and token names are limited by the requests that create them.
fn encode_list<'t, T: 't>(
    w: &mut Writer<'_>,
    items: impl ExactSizeIterator<Item = &'t T>,
    encode: impl Fn(&mut Writer<'_>, &T),
) {
    w.u32(len_u32(items.len()));
    for item in items {
        encode(w, item);
    }
}

/// Reads `[count:u32]` items into a map keyed by `key`, refusing keys that do not ascend
/// strictly (a repeat would silently drop an entry; disorder is not canonical).
fn decode_map<'a, K: Ord, V>(
    r: &mut Reader<'a>,
    field: &'static str,
    decode: impl Fn(&mut Reader<'a>) -> Result<V, DecodeError>,
    key: impl Fn(&V) -> K,
) -> Result<BTreeMap<K, V>, DecodeError> {
    let count = r.u32(field)?;
    let mut map = BTreeMap::new();
    for _ in 0..count {
        let offset = r.offset();
        let value = decode(r)?;
        let key = key(&value);
        if map.last_key_value().is_some_and(|(last, _)| *last >= key) {
            return Err(DecodeError::new(field, offset, DecodeErrorKind::Duplicate));
        }
        map.insert(key, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use proto::primitives::{Permissions, TlvEntry};

    use super::*;
    use crate::metadata::{TopicSettings, UserStatus};

    /// A state with one of everything the snapshot holds, options and tokens included.
    fn sample() -> Metadata {
        let mut options = OptionsBlock::default();
        options.set("segment_size", TlvEntry::uint64(1 << 20));
        let partition = Partition {
            id: 0,
            created_at: 11,
            incarnation: 2,
        };
        let group = ConsumerGroup {
            id: 3,
            name: "readers".into(),
            created_at: 12,
        };
        let topic = Topic {
            id: 1,
            name: "eu".into(),
            created_at: 10,
            options: options.clone(),
            settings: TopicSettings {
                message_expiry_us: Some(5),
                ..TopicSettings::default()
            },
            partitions: BTreeMap::from([(0, partition), (1, Partition { id: 1, ..partition })]),
            groups: BTreeMap::from([(3, group)]),
            next_group_id: 4,
        };
        let stream = Stream {
            id: 7,
            name: "orders".into(),
            created_at: 9,
            options,
            topics: BTreeMap::from([(1, topic)]),
        };
        let token = PersonalAccessToken {
            name: "ci".into(),
            token_hash: "ab".repeat(32),
            expiry_at: Some(99),
        };
        let user = User {
            id: 0,
            username: "iggy".into(),
            password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
            status: UserStatus::Active,
            permissions: Some(Permissions::root()),
            created_at: 1,
            tokens: BTreeMap::from([("ci".to_owned(), token)]),
        };
        let inactive = User {
            id: 4,
            username: "old".into(),
            status: UserStatus::Inactive,
            permissions: None,
            tokens: BTreeMap::new(),
            ..user.clone()
        };
        Metadata {
            streams: BTreeMap::from([(7, stream)]),
            users: BTreeMap::from([(0, user), (4, inactive)]),
            commit: 42,
        }
    }

    #[test]
    fn round_trips() {
        for metadata in [Metadata::default(), sample()] {
            let bytes = encode_snapshot(&metadata);
            assert_eq!(decode_snapshot(&bytes), Ok(metadata));
        }
    }

    #[test]
    fn every_header_field_is_checked() {
        let bytes = encode_snapshot(&sample());
        let damaged = |position: usize, value: u8| {
            let mut copy = bytes.clone();
            copy[position] = value;
            decode_snapshot(&copy).unwrap_err()
        };
        assert_eq!(damaged(0, b'X'), SnapshotError::Magic);
        assert_eq!(damaged(8, 2), SnapshotError::Version { found: 2 });
        assert_eq!(damaged(13, 1), SnapshotError::Reserved);
        assert!(matches!(damaged(16, 0), SnapshotError::Length { .. }));
        assert!(matches!(damaged(24, 0), SnapshotError::Checksum { .. }));
        let last = bytes.len() - 1;
        let flipped = damaged(last, bytes[last] ^ 1);
        assert!(
            matches!(flipped, SnapshotError::Checksum { .. }),
            "{flipped}"
        );
        assert_eq!(flipped.position(), 24);
        assert_eq!(
            decode_snapshot(&bytes[..31]),
            Err(SnapshotError::Truncated { length: 31 })
        );
        let extra = [bytes.as_slice(), &[0]].concat();
        assert!(matches!(
            decode_snapshot(&extra),
            Err(SnapshotError::Length { .. })
        ));
    }

    #[test]
    fn repeated_or_unordered_keys_are_refused_with_their_position() {
        let bytes = encode_snapshot(&sample());
        let body = &bytes[SNAPSHOT_HEADER_BYTES..];
        // Users 0 and 4 follow the streams; rewrite user 4's id as 0.
        let user_ids: Vec<usize> = body
            .windows(4)
            .enumerate()
            .filter(|(_, window)| *window == 4_u32.to_le_bytes())
            .map(|(index, _)| index)
            .collect();
        let last = *user_ids.last().unwrap();
        let mut repeated = body.to_vec();
        repeated[last] = 0;
        let error = decode_snapshot(&frame(&repeated)).unwrap_err();
        let SnapshotError::Body { position, source } = &error else {
            panic!("{error}");
        };
        assert_eq!(source.kind, DecodeErrorKind::Duplicate);
        assert_eq!(*position, (SNAPSHOT_HEADER_BYTES + last) as u64);
    }

    #[test]
    fn a_huge_count_is_a_short_input_not_an_allocation() {
        let mut body = 0_u64.to_le_bytes().to_vec();
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        let error = decode_snapshot(&frame(&body)).unwrap_err();
        let SnapshotError::Body { source, .. } = error else {
            panic!("{error}");
        };
        assert!(matches!(source.kind, DecodeErrorKind::UnexpectedEnd { .. }));
    }
}

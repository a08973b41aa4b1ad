//! Replica messages on the wire: a 256-byte header in the family of PROTOCOL.md §1.2–§1.3
//! (the common 128-byte prefix, then a command-specific 128 bytes) and a body.
//!
//! The decoder is total: any bytes give a [`Message`] or a [`WireError`], never a panic, and
//! nothing is allocated beyond what the frame's own length covers. Both checksums are
//! verified (xxh3-128: `checksum` over header bytes 16..256, `checksum_body` over the body),
//! reserved bytes must be zero, and every entry a body carries must be intact.
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 16 | `checksum` |
//! | 16 | 16 | `checksum_body` |
//! | 32 | 16 | `cluster` |
//! | 48 | 4 | `size` (header and body) |
//! | 52 | 4 | `view` |
//! | 56 | 4 | `release` (0) |
//! | 60 | 1 | `command` ([`Command`]) |
//! | 61 | 1 | `replica` (the sender) |
//! | 62 | 66 | reserved |
//! | 128 | 128 | per command, below; the rest reserved |
//!
//! Per command, at offsets from 128 (every other byte reserved):
//!
//! | command | fields (u128: client, parent, checksum; u32: views, count; else u64) | body |
//! | --- | --- | --- |
//! | `Request` (5) | client @0, request @16 | the payload |
//! | `Prepare` (6) | op @0, commit @8, client @16, request @32, parent @40, sum @56, view @72 | ¹ |
//! | `PrepareOk` (7) | op @0 | — |
//! | `Commit` (9) | commit @0 | — |
//! | `StartViewChange` (10), `RequestStartView` (17) | — | — |
//! | `DoViewChange` (11) | log view @0, commit @8, count @16, head @24 | entries ² |
//! | `StartView` (12) | commit @8, count @16, head @24 | entries ² |
//! | `RequestPrepares` (18) | op min @0, op max @8 | — |
//! | `Recovery` (200) | nonce @0 | — |
//! | `RecoveryResponse` (201) | nonce @0, state? (u8) @8, commit @16, count @24, head @32 | ² |
//!
//! ¹ The entry's payload; its other fields are in the header (`sum` is its checksum).
//! ² A [`Suffix`]: the entries of ops `commit + 1 ..` in order; `head` (u128) is the checksum
//! of the entry at `commit`.
//!
//! An entry in a body: op u64, view u32, client u128, request u64, parent u128, checksum
//! u128, body length u32, then its body.

use alloc::sync::Arc;
use alloc::vec::Vec;

use xxhash_rust::xxh3::xxh3_128;

use crate::{Command, Entry, Message, Op, REPLICAS_MAX, Suffix};

/// Bytes in every header.
pub const HEADER_SIZE: usize = 256;
/// Bytes of an entry in a body before its payload.
const ENTRY_FIXED: usize = 8 + 4 + 16 + 8 + 16 + 16 + 4;

/// Why bytes are not a replica message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("frame truncated: {needed} bytes needed, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("frame size field {declared} differs from the {actual} bytes given")]
    Size { declared: usize, actual: usize },
    #[error("header checksum mismatch")]
    Checksum,
    #[error("body checksum mismatch")]
    BodyChecksum,
    #[error("command {0} is not a replica message")]
    Command(u8),
    #[error("replica {0} outside any cluster")]
    Replica(u8),
    #[error("release must be 0")]
    Release,
    #[error("reserved byte {0} is not zero")]
    Reserved(usize),
    #[error("entry {0} of the body is corrupt or out of place")]
    Entry(usize),
    #[error("{0} bytes left after the last entry")]
    Trailing(usize),
}

/// The frame of `message` for cluster `cluster`.
pub fn encode(message: &Message, cluster: u128) -> Vec<u8> {
    let mut header = [0u8; HEADER_SIZE];
    let mut body = Vec::new();
    let (view, replica) = encode_specific(message, &mut header, &mut body);
    put(&mut header, 32, &cluster.to_le_bytes());
    let size = u32::try_from(HEADER_SIZE.saturating_add(body.len())).unwrap_or(u32::MAX);
    put(&mut header, 48, &size.to_le_bytes());
    put(&mut header, 52, &view.to_le_bytes());
    put(&mut header, 60, &[command_byte(message.command()), replica]);
    put(&mut header, 16, &xxh3_128(&body).to_le_bytes());
    let checksum = xxh3_128(header.get(16..).unwrap_or_default());
    put(&mut header, 0, &checksum.to_le_bytes());
    let mut frame = Vec::with_capacity(HEADER_SIZE.saturating_add(body.len()));
    frame.extend_from_slice(&header);
    frame.extend_from_slice(&body);
    frame
}

// A fieldless `repr(u8)` enum converts to its discriminant losslessly.
#[allow(clippy::as_conversions)]
fn command_byte(command: Command) -> u8 {
    command as u8
}

fn put(header: &mut [u8; HEADER_SIZE], offset: usize, bytes: &[u8]) {
    let end = offset.saturating_add(bytes.len());
    if let Some(slot) = header.get_mut(offset..end) {
        slot.copy_from_slice(bytes);
    }
}

pub(crate) fn put_entry(body: &mut Vec<u8>, entry: &Entry) {
    body.extend_from_slice(&entry.op.to_le_bytes());
    body.extend_from_slice(&entry.view.to_le_bytes());
    body.extend_from_slice(&entry.client.to_le_bytes());
    body.extend_from_slice(&entry.request.to_le_bytes());
    body.extend_from_slice(&entry.parent.to_le_bytes());
    body.extend_from_slice(&entry.checksum.to_le_bytes());
    let length = u32::try_from(entry.body.len()).unwrap_or(u32::MAX);
    body.extend_from_slice(&length.to_le_bytes());
    body.extend_from_slice(&entry.body);
}

/// A suffix's commit, count and head at `at`, `at + 8` and `at + 16`; its entries in the body.
fn put_suffix(header: &mut [u8; HEADER_SIZE], at: usize, body: &mut Vec<u8>, log: &Suffix) {
    let count = u32::try_from(log.entries.len()).unwrap_or(u32::MAX);
    put(header, at, &log.commit.to_le_bytes());
    put(header, at + 8, &count.to_le_bytes());
    put(header, at + 16, &log.head.to_le_bytes());
    for entry in &log.entries {
        put_entry(body, entry);
    }
}

/// Writes the command-specific part; returns the header's view and replica.
fn encode_specific(message: &Message, h: &mut [u8; HEADER_SIZE], body: &mut Vec<u8>) -> (u32, u8) {
    match message {
        Message::Request {
            client,
            request,
            body: payload,
        } => {
            put(h, 128, &client.to_le_bytes());
            put(h, 144, &request.to_le_bytes());
            body.extend_from_slice(payload);
            (0, 0)
        }
        Message::Prepare {
            view,
            replica,
            commit,
            entry,
        } => {
            put(h, 128, &entry.op.to_le_bytes());
            put(h, 136, &commit.to_le_bytes());
            put(h, 144, &entry.client.to_le_bytes());
            put(h, 160, &entry.request.to_le_bytes());
            put(h, 168, &entry.parent.to_le_bytes());
            put(h, 184, &entry.checksum.to_le_bytes());
            put(h, 200, &entry.view.to_le_bytes());
            body.extend_from_slice(&entry.body);
            (*view, *replica)
        }
        Message::PrepareOk {
            view,
            replica,
            op: value,
        }
        | Message::Commit {
            view,
            replica,
            commit: value,
        } => {
            put(h, 128, &value.to_le_bytes());
            (*view, *replica)
        }
        Message::RequestPrepares {
            view,
            replica,
            op_min,
            op_max,
        } => {
            put(h, 128, &op_min.to_le_bytes());
            put(h, 136, &op_max.to_le_bytes());
            (*view, *replica)
        }
        _ => encode_view_change(message, h, body),
    }
}

/// The view-change and recovery messages' part of [`encode_specific`].
fn encode_view_change(
    message: &Message,
    h: &mut [u8; HEADER_SIZE],
    body: &mut Vec<u8>,
) -> (u32, u8) {
    match message {
        Message::DoViewChange {
            view,
            replica,
            log_view,
            log,
        } => {
            put(h, 128, &log_view.to_le_bytes());
            put_suffix(h, 136, body, log);
            (*view, *replica)
        }
        Message::StartView { view, replica, log } => {
            put_suffix(h, 136, body, log);
            (*view, *replica)
        }
        Message::Recovery { replica, nonce } => {
            put(h, 128, &nonce.to_le_bytes());
            (0, *replica)
        }
        Message::RecoveryResponse {
            view,
            replica,
            nonce,
            primary_state,
        } => {
            put(h, 128, &nonce.to_le_bytes());
            if let Some(log) = primary_state {
                put(h, 136, &[1]);
                put_suffix(h, 144, body, log);
            }
            (*view, *replica)
        }
        Message::StartViewChange { view, replica }
        | Message::RequestStartView { view, replica } => (*view, *replica),
        Message::Request { .. }
        | Message::Prepare { .. }
        | Message::PrepareOk { .. }
        | Message::Commit { .. }
        | Message::RequestPrepares { .. } => (0, 0),
    }
}

/// The header and body of a frame whose length, size field and checksums are right.
struct Frame<'a> {
    header: &'a [u8; HEADER_SIZE],
    body: &'a [u8],
}

impl Frame<'_> {
    fn bytes<const N: usize>(&self, offset: usize) -> [u8; N] {
        let end = offset.saturating_add(N);
        // Offsets are constants below 256 - N; a miss reads zeros rather than panicking.
        self.header
            .get(offset..end)
            .and_then(|b| b.try_into().ok())
            .unwrap_or([0; N])
    }

    fn u8(&self, offset: usize) -> u8 {
        self.bytes::<1>(offset)[0]
    }

    fn u32(&self, offset: usize) -> u32 {
        u32::from_le_bytes(self.bytes(offset))
    }

    fn u64(&self, offset: usize) -> u64 {
        u64::from_le_bytes(self.bytes(offset))
    }

    fn u128(&self, offset: usize) -> u128 {
        u128::from_le_bytes(self.bytes(offset))
    }

    /// Every byte of 62..256 outside `used` (offset, length) pairs must be zero.
    fn reserved_zero(&self, used: &[(usize, usize)]) -> Result<(), WireError> {
        for (offset, byte) in self.header.iter().enumerate().skip(62) {
            let in_use = used
                .iter()
                .any(|&(start, length)| offset >= start && offset < start.saturating_add(length));
            if *byte != 0 && !in_use {
                return Err(WireError::Reserved(offset));
            }
        }
        Ok(())
    }

    fn empty_body(&self) -> Result<(), WireError> {
        if self.body.is_empty() {
            Ok(())
        } else {
            Err(WireError::Trailing(self.body.len()))
        }
    }

    /// The suffix whose commit, count and head are at `at`, `at + 8`, `at + 16`.
    fn suffix(&self, at: usize) -> Result<Suffix, WireError> {
        let commit = self.u64(at);
        Ok(Suffix {
            commit,
            head: self.u128(at + 16),
            entries: self.entries(at + 8, commit.saturating_add(1))?,
        })
    }

    /// The body's entries, `count_at` giving their count; ops `first ..` in order.
    fn entries(&self, count_at: usize, first: Op) -> Result<Vec<Entry>, WireError> {
        let count = usize::try_from(self.u32(count_at)).unwrap_or(usize::MAX);
        // Each entry takes at least ENTRY_FIXED bytes: no count beyond what the body holds
        // is allocated for.
        if count > self.body.len() / ENTRY_FIXED {
            return Err(WireError::Entry(self.body.len() / ENTRY_FIXED));
        }
        let mut log = Vec::with_capacity(count);
        let mut rest = self.body;
        for index in 0..count {
            let (entry, after) = read_entry(rest).ok_or(WireError::Entry(index))?;
            let expected = u64::try_from(index).map_or(0, |index| index.saturating_add(first));
            if !entry.is_intact() || entry.op != expected {
                return Err(WireError::Entry(index));
            }
            log.push(entry);
            rest = after;
        }
        if rest.is_empty() {
            Ok(log)
        } else {
            Err(WireError::Trailing(rest.len()))
        }
    }
}

fn split<const N: usize>(bytes: &[u8]) -> Option<([u8; N], &[u8])> {
    let (head, rest) = bytes.split_at_checked(N)?;
    Some((head.try_into().ok()?, rest))
}

/// An entry's fields with its body still in the bytes it was read from.
pub(crate) struct EntryRef<'a> {
    pub(crate) op: u64,
    pub(crate) view: u32,
    pub(crate) client: u128,
    pub(crate) request: u64,
    pub(crate) parent: u128,
    pub(crate) checksum: u128,
    pub(crate) body: &'a [u8],
}

impl EntryRef<'_> {
    /// Whether the stored checksum matches the fields ([`Entry::is_intact`], no copy).
    pub(crate) fn is_intact(&self) -> bool {
        self.checksum
            == Entry::compute(
                self.op,
                self.view,
                self.client,
                self.request,
                self.parent,
                self.body,
            )
    }

    pub(crate) fn to_entry(&self) -> Entry {
        Entry {
            op: self.op,
            view: self.view,
            client: self.client,
            request: self.request,
            parent: self.parent,
            checksum: self.checksum,
            body: Arc::from(self.body),
        }
    }
}

pub(crate) fn read_entry_ref(bytes: &[u8]) -> Option<(EntryRef<'_>, &[u8])> {
    let (op, bytes) = split::<8>(bytes)?;
    let (view, bytes) = split::<4>(bytes)?;
    let (client, bytes) = split::<16>(bytes)?;
    let (request, bytes) = split::<8>(bytes)?;
    let (parent, bytes) = split::<16>(bytes)?;
    let (checksum, bytes) = split::<16>(bytes)?;
    let (length, bytes) = split::<4>(bytes)?;
    let length = usize::try_from(u32::from_le_bytes(length)).ok()?;
    let (body, rest) = bytes.split_at_checked(length)?;
    let entry = EntryRef {
        op: u64::from_le_bytes(op),
        view: u32::from_le_bytes(view),
        client: u128::from_le_bytes(client),
        request: u64::from_le_bytes(request),
        parent: u128::from_le_bytes(parent),
        checksum: u128::from_le_bytes(checksum),
        body,
    };
    Some((entry, rest))
}

pub(crate) fn read_entry(bytes: &[u8]) -> Option<(Entry, &[u8])> {
    let (entry, rest) = read_entry_ref(bytes)?;
    Some((entry.to_entry(), rest))
}

/// The message in `frame` (exactly one frame), and the cluster it names.
pub fn decode(frame: &[u8]) -> Result<(Message, u128), WireError> {
    let (header, body) = frame
        .split_at_checked(HEADER_SIZE)
        .ok_or(WireError::Truncated {
            needed: HEADER_SIZE,
            available: frame.len(),
        })?;
    let header: &[u8; HEADER_SIZE] =
        header
            .try_into()
            .map_err(|_e: core::array::TryFromSliceError| WireError::Truncated {
                needed: HEADER_SIZE,
                available: frame.len(),
            })?;
    let frame_view = Frame { header, body };
    let declared = usize::try_from(frame_view.u32(48)).unwrap_or(usize::MAX);
    if declared != frame.len() {
        return Err(WireError::Size {
            declared,
            actual: frame.len(),
        });
    }
    if frame_view.u128(0) != xxh3_128(header.get(16..).unwrap_or_default()) {
        return Err(WireError::Checksum);
    }
    if frame_view.u128(16) != xxh3_128(body) {
        return Err(WireError::BodyChecksum);
    }
    if frame_view.u32(56) != 0 {
        return Err(WireError::Release);
    }
    let replica = frame_view.u8(61);
    if usize::from(replica) >= REPLICAS_MAX {
        return Err(WireError::Replica(replica));
    }
    let message = decode_specific(&frame_view, frame_view.u8(60), frame_view.u32(52), replica)?;
    Ok((message, frame_view.u128(32)))
}

fn decode_specific(
    f: &Frame<'_>,
    command: u8,
    view: u32,
    replica: u8,
) -> Result<Message, WireError> {
    let message = match command {
        5 if view == 0 && replica == 0 => {
            f.reserved_zero(&[(128, 16), (144, 8)])?;
            Message::Request {
                client: f.u128(128),
                request: f.u64(144),
                body: Arc::from(f.body),
            }
        }
        6 => {
            f.reserved_zero(&[(128, 76)])?;
            let entry = Entry {
                op: f.u64(128),
                view: f.u32(200),
                client: f.u128(144),
                request: f.u64(160),
                parent: f.u128(168),
                checksum: f.u128(184),
                body: Arc::from(f.body),
            };
            if !entry.is_intact() {
                return Err(WireError::Entry(0));
            }
            Message::Prepare {
                view,
                replica,
                commit: f.u64(136),
                entry,
            }
        }
        7 | 9 => {
            f.reserved_zero(&[(128, 8)])?;
            f.empty_body()?;
            if command == 7 {
                Message::PrepareOk {
                    view,
                    replica,
                    op: f.u64(128),
                }
            } else {
                Message::Commit {
                    view,
                    replica,
                    commit: f.u64(128),
                }
            }
        }
        18 => {
            f.reserved_zero(&[(128, 16)])?;
            f.empty_body()?;
            Message::RequestPrepares {
                view,
                replica,
                op_min: f.u64(128),
                op_max: f.u64(136),
            }
        }
        other => return decode_view_change(f, other, view, replica),
    };
    Ok(message)
}

/// The view-change and recovery messages' part of [`decode_specific`].
fn decode_view_change(
    f: &Frame<'_>,
    command: u8,
    view: u32,
    replica: u8,
) -> Result<Message, WireError> {
    let message = match command {
        10 | 17 => {
            f.reserved_zero(&[])?;
            f.empty_body()?;
            if command == 10 {
                Message::StartViewChange { view, replica }
            } else {
                Message::RequestStartView { view, replica }
            }
        }
        11 => {
            f.reserved_zero(&[(128, 4), (136, 8), (144, 4), (152, 16)])?;
            Message::DoViewChange {
                view,
                replica,
                log_view: f.u32(128),
                log: f.suffix(136)?,
            }
        }
        12 => {
            f.reserved_zero(&[(136, 8), (144, 4), (152, 16)])?;
            Message::StartView {
                view,
                replica,
                log: f.suffix(136)?,
            }
        }
        200 if view == 0 => {
            f.reserved_zero(&[(128, 8)])?;
            f.empty_body()?;
            Message::Recovery {
                replica,
                nonce: f.u64(128),
            }
        }
        201 => decode_recovery_response(f, view, replica)?,
        other => return Err(WireError::Command(other)),
    };
    Ok(message)
}

fn decode_recovery_response(f: &Frame<'_>, view: u32, replica: u8) -> Result<Message, WireError> {
    let primary_state = match f.u8(136) {
        0 => {
            f.reserved_zero(&[(128, 8)])?;
            f.empty_body()?;
            None
        }
        1 => {
            f.reserved_zero(&[(128, 9), (144, 8), (152, 4), (160, 16)])?;
            Some(f.suffix(144)?)
        }
        _ => return Err(WireError::Reserved(136)),
    };
    Ok(Message::RecoveryResponse {
        view,
        replica,
        nonce: f.u64(128),
        primary_state,
    })
}

/// The fuzz target's checks (`fuzz/fuzz_targets/vsr_wire.rs`), shared with the seeded replay
/// test: decoding never panics, and whatever decodes encodes back to the same bytes.
#[doc(hidden)]
pub fn fuzz_decode(bytes: &[u8]) {
    if let Ok((message, cluster)) = decode(bytes) {
        assert_eq!(
            encode(&message, cluster),
            bytes,
            "a decoded frame encodes back unchanged"
        );
    }
}

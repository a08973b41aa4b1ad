//! Zero-copy views of a batch: the header, the frames and the iterator over messages.

use zerocopy::little_endian::{U16, U32, U64, U128};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::checksum::{batch_checksum, message_checksum};
use super::seal::{SEAL_OVERHEAD, SEAL_SALT_SIZE, SEALED_PAYLOAD_LENGTH_MAX, SealSection};
use super::{BATCH_HEADER_SIZE, FRAME_HEADER_SIZE, PAYLOAD_LENGTH_MAX};
use crate::codec::{check_length, usize_from_u32, usize_to_u64};
use crate::dialect::Dialect;
use crate::error::{DecodeError, DecodeErrorKind, Subject};
use crate::primitives::tlv::validate_user_headers;

/// The batch header as laid out on the wire and on disk.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct BatchHeader {
    /// Not interpreted by clients.
    pub partition_id: U64,
    /// Offset of the first frame; stamped by the server.
    pub base_offset: U64,
    /// Append time in µs; stamped by the server, every message's `timestamp`.
    pub base_timestamp: U64,
    /// The smallest origin timestamp of the messages.
    pub origin_timestamp: U64,
    /// 256 + frame bytes.
    pub batch_length: U64,
    pub batch_checksum: U64,
    pub message_count: U32,
    /// 1 when the idempotent-producer section is present (0.12.2 only).
    pub producer_flag: u8,
    pub producer_padding: [u8; 3],
    pub producer_id: U64,
    pub epoch: U16,
    pub epoch_padding: [u8; 2],
    pub base_sequence: U32,
    pub reserved: [u8; 184],
}

const _: () = assert!(size_of::<BatchHeader>() == BATCH_HEADER_SIZE);
const _: () = assert!(core::mem::offset_of!(BatchHeader, message_count) == 48);
const _: () = assert!(core::mem::offset_of!(BatchHeader, producer_id) == 56);
const _: () = assert!(core::mem::offset_of!(BatchHeader, base_sequence) == 68);
const _: () = assert!(core::mem::offset_of!(BatchHeader, reserved) == 72);

/// The 48-byte header of one message frame.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FrameHeader {
    /// XXH3-64 of the frame after these 8 bytes.
    pub checksum: U64,
    pub id: U128,
    pub offset_delta: U32,
    pub timestamp_delta: U32,
    pub user_headers_length: U32,
    pub payload_length: U32,
    pub reserved: U64,
}

const _: () = assert!(size_of::<FrameHeader>() == FRAME_HEADER_SIZE);

/// The idempotent-producer section (§5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Producer {
    #[cfg_attr(test, proptest(strategy = "0..=Producer::ID_MAX"))]
    pub producer_id: u64,
    #[cfg_attr(test, proptest(strategy = "0..=Producer::EPOCH_MAX"))]
    pub epoch: u16,
    #[cfg_attr(test, proptest(strategy = "0..=Producer::SEQUENCE_MAX"))]
    pub base_sequence: u32,
}

impl Producer {
    pub const ID_MAX: u64 = (1 << 63) - 1;
    pub const EPOCH_MAX: u16 = (1 << 15) - 1;
    pub const SEQUENCE_MAX: u32 = (1 << 31) - 1;
}

/// How much of a batch to verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integrity {
    /// Layout, bounds, user headers and both checksums: what a server runs on a send and on
    /// every read from disk.
    Full,
    /// Layout and bounds only, as the SDK walks polled data.
    LayoutOnly,
}

/// Where a batch comes from, which decides what its reserved bytes may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A client's (a send, a poll reply): every reserved byte zero.
    Wire,
    /// A server's store: the record may be sealed ([`super::seal`]).
    Stored,
}

/// A validated batch borrowed from its buffer.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    header: &'a BatchHeader,
    bytes: &'a [u8],
    /// The record's seal salt, when it is a sealed stored record.
    salt: Option<[u8; SEAL_SALT_SIZE]>,
}

impl<'a> Batch<'a> {
    /// Validates `bytes` as exactly one batch (its `batch_length` must equal `bytes.len()`).
    /// `base_offset` is where `bytes` starts in the caller's buffer, for error offsets.
    pub fn parse(
        bytes: &'a [u8],
        dialect: Dialect,
        integrity: Integrity,
        base_offset: usize,
    ) -> Result<Self, DecodeError> {
        Self::parse_from(bytes, (dialect, Source::Wire), integrity, base_offset)
    }

    /// [`Batch::parse`] for a record read from a server's store, which may be sealed.
    pub fn parse_stored(
        bytes: &'a [u8],
        dialect: Dialect,
        integrity: Integrity,
        base_offset: usize,
    ) -> Result<Self, DecodeError> {
        Self::parse_from(bytes, (dialect, Source::Stored), integrity, base_offset)
    }

    fn parse_from(
        bytes: &'a [u8],
        (dialect, source): (Dialect, Source),
        integrity: Integrity,
        base_offset: usize,
    ) -> Result<Self, DecodeError> {
        let (header_bytes, _frames) = bytes
            .split_at_checked(BATCH_HEADER_SIZE)
            .ok_or(short_header(bytes, base_offset))?;
        let header = BatchHeader::ref_from_bytes(header_bytes)
            .map_err(|_size| invalid("batch.header", base_offset, 0))?;
        let declared = header.batch_length.get();
        if declared != usize_to_u64(bytes.len()) {
            return Err(DecodeError::new(
                "batch.batch_length",
                base_offset.saturating_add(32),
                DecodeErrorKind::CountMismatch {
                    declared,
                    actual: usize_to_u64(bytes.len()),
                },
            ));
        }
        let salt = validate_header(header, (dialect, source), base_offset)?;
        let batch = Self {
            header,
            bytes,
            salt,
        };
        batch.validate_frames(integrity, base_offset)?;
        if integrity == Integrity::Full
            && batch_checksum(header, batch.frames()) != header.batch_checksum.get()
        {
            return Err(DecodeError::new(
                "batch.batch_checksum",
                base_offset.saturating_add(40),
                DecodeErrorKind::BatchChecksum,
            ));
        }
        Ok(batch)
    }

    /// Splits the first batch off `bytes` using its `batch_length`, validates it and returns
    /// it with the rest: the walk over poll-reply records and over a segment file.
    pub fn parse_prefix(
        bytes: &'a [u8],
        dialect: Dialect,
        integrity: Integrity,
        base_offset: usize,
    ) -> Result<(Self, &'a [u8]), DecodeError> {
        Self::parse_prefix_from(bytes, (dialect, Source::Wire), integrity, base_offset)
    }

    /// [`Batch::parse_prefix`] for records read from a server's store, which may be sealed.
    pub fn parse_prefix_stored(
        bytes: &'a [u8],
        dialect: Dialect,
        integrity: Integrity,
        base_offset: usize,
    ) -> Result<(Self, &'a [u8]), DecodeError> {
        Self::parse_prefix_from(bytes, (dialect, Source::Stored), integrity, base_offset)
    }

    fn parse_prefix_from(
        bytes: &'a [u8],
        context: (Dialect, Source),
        integrity: Integrity,
        base_offset: usize,
    ) -> Result<(Self, &'a [u8]), DecodeError> {
        let length = declared_length(bytes, base_offset)?;
        let (batch, rest) = bytes.split_at_checked(length).ok_or(
            DecodeError::new(
                "batch.batch_length",
                base_offset.saturating_add(32),
                DecodeErrorKind::UnexpectedEnd {
                    needed: length,
                    available: bytes.len(),
                },
            )
            .about(Subject::BatchFrame),
        )?;
        Ok((
            Self::parse_from(batch, context, integrity, base_offset)?,
            rest,
        ))
    }

    pub fn header(&self) -> &'a BatchHeader {
        self.header
    }

    /// The whole batch, header included, exactly as stored.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The frame bytes after the header.
    pub fn frames(&self) -> &'a [u8] {
        self.bytes.get(BATCH_HEADER_SIZE..).unwrap_or_default()
    }

    pub fn message_count(&self) -> u32 {
        self.header.message_count.get()
    }

    /// The seal salt of a sealed stored record; `None` for a plain one.
    pub fn seal_salt(&self) -> Option<[u8; SEAL_SALT_SIZE]> {
        self.salt
    }

    pub fn producer(&self) -> Option<Producer> {
        (self.header.producer_flag == 1).then(|| Producer {
            producer_id: self.header.producer_id.get(),
            epoch: self.header.epoch.get(),
            base_sequence: self.header.base_sequence.get(),
        })
    }

    /// The messages in frame order.
    pub fn messages(&self) -> Messages<'a> {
        Messages {
            frames: self.frames(),
        }
    }

    fn validate_frames(&self, integrity: Integrity, base_offset: usize) -> Result<(), DecodeError> {
        let mut frames = self.frames();
        let mut offset = base_offset.saturating_add(BATCH_HEADER_SIZE);
        let mut count = 0_u64;
        while !frames.is_empty() {
            let sealed = self.salt.is_some();
            let (length, _message) = validate_frame(frames, (integrity, sealed), offset)?;
            frames = frames.get(length..).unwrap_or_default();
            offset = offset.saturating_add(length);
            count = count.saturating_add(1);
        }
        let declared = u64::from(self.message_count());
        if declared != count || count == 0 {
            return Err(DecodeError::new(
                "batch.message_count",
                base_offset.saturating_add(48),
                DecodeErrorKind::CountMismatch {
                    declared,
                    actual: count,
                },
            ));
        }
        Ok(())
    }
}

/// One message of a validated batch.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub header: &'a FrameHeader,
    pub payload: &'a [u8],
    pub user_headers: &'a [u8],
}

impl Message<'_> {
    /// Bytes the frame occupies.
    pub fn frame_length(&self) -> usize {
        FRAME_HEADER_SIZE
            .saturating_add(self.payload.len())
            .saturating_add(self.user_headers.len())
    }
}

/// Iterator over the messages of a validated batch.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    frames: &'a [u8],
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let (message, length) = split_frame(self.frames)?;
        self.frames = self.frames.get(length..).unwrap_or_default();
        Some(message)
    }
}

/// Iterator over back-to-back batch records (a poll reply body or a segment), validating each.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    bytes: &'a [u8],
    offset: usize,
    context: (Dialect, Source),
    integrity: Integrity,
}

impl<'a> Records<'a> {
    pub fn new(
        bytes: &'a [u8],
        dialect: Dialect,
        integrity: Integrity,
        base_offset: usize,
    ) -> Self {
        Self {
            bytes,
            offset: base_offset,
            context: (dialect, Source::Wire),
            integrity,
        }
    }

    /// Records read from a server's store, which may be sealed.
    pub fn stored(bytes: &'a [u8], dialect: Dialect, integrity: Integrity) -> Self {
        Self {
            bytes,
            offset: 0,
            context: (dialect, Source::Stored),
            integrity,
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Batch<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.bytes.is_empty() {
            return None;
        }
        match Batch::parse_prefix_from(self.bytes, self.context, self.integrity, self.offset) {
            Ok((batch, rest)) => {
                self.bytes = rest;
                self.offset = self.offset.saturating_add(batch.as_bytes().len());
                Some(Ok(batch))
            }
            Err(error) => {
                self.bytes = &[];
                Some(Err(error))
            }
        }
    }
}

/// Splits one frame off `frames` without validating it; `None` if it does not fit.
fn split_frame(frames: &[u8]) -> Option<(Message<'_>, usize)> {
    let (header, rest) = FrameHeader::ref_from_prefix(frames).ok()?;
    let payload_length = usize_from_u32(header.payload_length.get());
    let headers_length = usize_from_u32(header.user_headers_length.get());
    let payload = rest.get(..payload_length)?;
    let user_headers = rest.get(payload_length..payload_length.checked_add(headers_length)?)?;
    let length = FRAME_HEADER_SIZE
        .checked_add(payload_length)?
        .checked_add(headers_length)?;
    Some((
        Message {
            header,
            payload,
            user_headers,
        },
        length,
    ))
}

/// Validates the frame at the start of `frames`; returns its length.
fn validate_frame(
    frames: &[u8],
    (integrity, sealed): (Integrity, bool),
    offset: usize,
) -> Result<(usize, Message<'_>), DecodeError> {
    let header = FrameHeader::ref_from_prefix(frames)
        .map(|(header, _)| header)
        .map_err(|_size| {
            DecodeError::new(
                "frame.header",
                offset,
                DecodeErrorKind::UnexpectedEnd {
                    needed: FRAME_HEADER_SIZE,
                    available: frames.len(),
                },
            )
        })?;
    let (payload_length, headers_length) = check_frame_lengths(header, sealed, offset)?;
    if header.reserved.get() != 0 {
        return Err(DecodeError::new(
            "frame.reserved",
            offset.saturating_add(40),
            DecodeErrorKind::NonZeroReserved,
        ));
    }
    let (message, length) = split_frame(frames).ok_or(DecodeError::new(
        "frame.payload",
        offset.saturating_add(FRAME_HEADER_SIZE),
        DecodeErrorKind::UnexpectedEnd {
            needed: usize::try_from(payload_length.saturating_add(headers_length))
                .unwrap_or(usize::MAX),
            available: frames.len().saturating_sub(FRAME_HEADER_SIZE),
        },
    ))?;
    if integrity == Integrity::Full {
        let headers_offset = offset
            .saturating_add(FRAME_HEADER_SIZE)
            .saturating_add(message.payload.len());
        validate_user_headers(message.user_headers, headers_offset)?;
        let covered = frames.get(8..length).unwrap_or_default();
        if message_checksum(covered) != header.checksum.get() {
            return Err(DecodeError::new(
                "frame.checksum",
                offset,
                DecodeErrorKind::MessageChecksum,
            ));
        }
    }
    Ok((length, message))
}

/// The frame's payload and user-headers lengths, each within its bounds (a sealed frame's
/// body is one block holding at least a 1-byte payload, and no user headers beside it).
fn check_frame_lengths(
    header: &FrameHeader,
    sealed: bool,
    offset: usize,
) -> Result<(u64, u64), DecodeError> {
    let payload_length = u64::from(header.payload_length.get());
    let (payload_min, payload_max, headers_max) = if sealed {
        (SEAL_OVERHEAD + 1, SEALED_PAYLOAD_LENGTH_MAX, 0)
    } else {
        (1, PAYLOAD_LENGTH_MAX, super::USER_HEADERS_LENGTH_MAX)
    };
    check_length(
        payload_length,
        payload_min,
        payload_max,
        "frame.payload_length",
        offset.saturating_add(36),
    )
    .map_err(|error| error.about(Subject::PayloadLength))?;
    let headers_length = u64::from(header.user_headers_length.get());
    check_length(
        headers_length,
        0,
        headers_max,
        "frame.user_headers_length",
        offset.saturating_add(32),
    )
    .map_err(|error| error.about(Subject::UserHeadersLength))?;
    Ok((payload_length, headers_length))
}

/// `bytes` are too few for a batch header: where a torn segment tail shows.
fn short_header(bytes: &[u8], base_offset: usize) -> DecodeError {
    DecodeError::new(
        "batch.header",
        base_offset,
        DecodeErrorKind::UnexpectedEnd {
            needed: BATCH_HEADER_SIZE,
            available: bytes.len(),
        },
    )
    .about(Subject::BatchFrame)
}

/// `batch_length` as a `usize` bounded by `256..=`[`super::RECORD_SIZE_MAX`]-ish limits of the
/// caller's buffer; refuses anything below the header size.
fn declared_length(bytes: &[u8], base_offset: usize) -> Result<usize, DecodeError> {
    let header = BatchHeader::ref_from_prefix(bytes)
        .map(|(header, _)| header)
        .map_err(|_size| short_header(bytes, base_offset))?;
    check_length(
        header.batch_length.get(),
        BATCH_HEADER_SIZE,
        bytes.len(),
        "batch.batch_length",
        base_offset.saturating_add(32),
    )
    .map_err(|error| error.about(Subject::BatchFrame))
}

/// Checks the header's fixed fields; returns the seal salt of a sealed stored record.
fn validate_header(
    header: &BatchHeader,
    (dialect, source): (Dialect, Source),
    base_offset: usize,
) -> Result<Option<[u8; SEAL_SALT_SIZE]>, DecodeError> {
    let salt = match (SealSection::of(header), source) {
        (SealSection::Plain, _) => None,
        (SealSection::Sealed(salt), Source::Stored) => Some(salt),
        (SealSection::Sealed(_) | SealSection::Invalid, _) => {
            return Err(reserved("batch.reserved", base_offset.saturating_add(72)));
        }
    };
    validate_producer_section(header, dialect, base_offset)?;
    Ok(salt)
}

fn validate_producer_section(
    header: &BatchHeader,
    dialect: Dialect,
    base_offset: usize,
) -> Result<(), DecodeError> {
    let producer_bytes_zero = header.producer_padding == [0; 3]
        && header.producer_id.get() == 0
        && header.epoch.get() == 0
        && header.epoch_padding == [0; 2]
        && header.base_sequence.get() == 0;
    match (header.producer_flag, dialect) {
        (0, _) if producer_bytes_zero => Ok(()),
        (0, _) => Err(reserved("batch.producer", base_offset.saturating_add(52))),
        (1, Dialect::V0_12_2) => validate_producer(header, base_offset),
        (flag, _) => Err(invalid(
            "batch.producer_flag",
            base_offset.saturating_add(52),
            u64::from(flag),
        )),
    }
}

fn validate_producer(header: &BatchHeader, base_offset: usize) -> Result<(), DecodeError> {
    if header.producer_padding != [0; 3] || header.epoch_padding != [0; 2] {
        return Err(reserved(
            "batch.producer_padding",
            base_offset.saturating_add(53),
        ));
    }
    if header.producer_id.get() > Producer::ID_MAX {
        return Err(invalid(
            "batch.producer_id",
            base_offset.saturating_add(56),
            header.producer_id.get(),
        ));
    }
    if header.epoch.get() > Producer::EPOCH_MAX {
        return Err(invalid(
            "batch.epoch",
            base_offset.saturating_add(64),
            u64::from(header.epoch.get()),
        ));
    }
    if header.base_sequence.get() > Producer::SEQUENCE_MAX {
        let value = u64::from(header.base_sequence.get());
        return Err(invalid(
            "batch.base_sequence",
            base_offset.saturating_add(68),
            value,
        ));
    }
    Ok(())
}

fn invalid(field: &'static str, offset: usize, value: u64) -> DecodeError {
    DecodeError::new(field, offset, DecodeErrorKind::InvalidValue { value })
}

fn reserved(field: &'static str, offset: usize) -> DecodeError {
    DecodeError::new(field, offset, DecodeErrorKind::NonZeroReserved)
}

//! Sealing a plain batch record into its stored form and opening it back, byte for byte.

use proto::batch::seal::{
    SEAL_LENGTH_PREFIX_SIZE, SEAL_OVERHEAD, SEAL_SALT_SIZE, SEAL_TAG_SIZE, SealSection,
    records_sealed,
};
use proto::batch::{
    BATCH_HEADER_SIZE, Batch, BatchHeader, FRAME_HEADER_SIZE, FrameHeader, Integrity, Message,
    Records, batch_checksum, message_checksum,
};
use proto::{DecodeError, Dialect};
use ring::aead::{Aad, LessSafeKey, Nonce};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, IntoBytes};

use crate::key::MasterKey;

/// The frame-header bytes bound to each sealed block as associated data: the id and both
/// deltas, so a block cannot be moved to another frame unnoticed.
const BOUND_FIELDS: core::ops::Range<usize> = 8..32;

/// Why a record could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("not a plain batch record: {0}")]
    Layout(DecodeError),
    #[error("frame {index} has offset delta {found}; a stored record numbers its frames")]
    OffsetDelta { index: u32, found: u32 },
    #[error("the sealed record would not fit its length fields")]
    TooLarge,
}

/// Why stored records could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("stored records do not parse: {0}")]
    Layout(DecodeError),
    #[error("a record is sealed but no encryption key is configured")]
    NoKey,
    #[error(
        "frame {index} of the record at offset {base_offset} fails authentication \
         (another key, or damage)"
    )]
    Authentication { base_offset: u64, index: u32 },
    #[error("frame {index} of the record at offset {base_offset} opens to a bad length")]
    Length { base_offset: u64, index: u32 },
}

/// Seals `record`, one plain batch record (a client's, stamped or not), with `salt`, which
/// must be fresh random bytes: the record's key is derived from it.
pub fn seal_record(
    key: &MasterKey,
    record: &[u8],
    salt: [u8; SEAL_SALT_SIZE],
) -> Result<Vec<u8>, SealError> {
    let batch = Batch::parse(record, Dialect::V0_12_2, Integrity::LayoutOnly, 0)
        .map_err(SealError::Layout)?;
    let count = usize::try_from(batch.message_count()).map_err(|_size| SealError::TooLarge)?;
    let grown = count
        .checked_mul(SEAL_OVERHEAD)
        .and_then(|growth| growth.checked_add(record.len()))
        .ok_or(SealError::TooLarge)?;
    let cipher = key.record_cipher(&salt);
    let mut out = Vec::with_capacity(grown);
    out.extend_from_slice(&record[..BATCH_HEADER_SIZE]);
    for (index, message) in (0_u32..).zip(batch.messages()) {
        let found = message.header.offset_delta.get();
        if found != index {
            return Err(SealError::OffsetDelta { index, found });
        }
        seal_frame(&cipher, &message, &mut out)?;
    }
    let length = u64::try_from(out.len()).map_err(|_size| SealError::TooLarge)?;
    finish_header(&mut out, SealSection::Sealed(salt), length);
    Ok(out)
}

/// Appends `message` sealed: its header with the block as payload and no user headers,
/// then `[user_headers_length] ‖ payload ‖ user headers` encrypted, then the tag.
fn seal_frame(
    cipher: &LessSafeKey,
    message: &Message<'_>,
    out: &mut Vec<u8>,
) -> Result<(), SealError> {
    let start = out.len();
    let headers_length = message.header.user_headers_length;
    let block = SEAL_OVERHEAD + message.payload.len() + message.user_headers.len();
    let mut header = message.header.clone();
    header.payload_length = U32::new(u32::try_from(block).map_err(|_size| SealError::TooLarge)?);
    header.user_headers_length = U32::new(0);
    header.reserved = U64::new(0);
    out.extend_from_slice(header.as_bytes());
    let body = out.len();
    out.extend_from_slice(headers_length.as_bytes());
    out.extend_from_slice(message.payload);
    out.extend_from_slice(message.user_headers);
    let nonce = nonce(message.header.offset_delta.get());
    let bound = &header.as_bytes()[BOUND_FIELDS];
    let tag = cipher
        .seal_in_place_separate_tag(nonce, Aad::from(bound), &mut out[body..])
        // Only inputs over GCM's 64 GiB per message fail; a frame is at most 64 MB.
        .map_err(|_error| SealError::TooLarge)?;
    out.extend_from_slice(tag.as_ref());
    let checksum = message_checksum(&out[start + 8..]);
    out[start..start + 8].copy_from_slice(&checksum.to_le_bytes());
    Ok(())
}

/// Opens every record of `stored` (records back to back, as a read returns them): `None`
/// when none is sealed (the bytes are served as they are), else the plain records.
pub fn open_records(key: Option<&MasterKey>, stored: &[u8]) -> Result<Option<Vec<u8>>, OpenError> {
    if !records_sealed(stored) {
        return Ok(None);
    }
    let key = key.ok_or(OpenError::NoKey)?;
    let mut out = Vec::with_capacity(stored.len());
    for batch in Records::stored(stored, Dialect::V0_12_2, Integrity::LayoutOnly) {
        open_record(key, &batch.map_err(OpenError::Layout)?, &mut out)?;
    }
    Ok(Some(out))
}

/// Appends `batch`, a stored record, to `out` in its plain form: the record as the client
/// sent it, stamped; a plain record is copied as it is.
pub fn open_record(key: &MasterKey, batch: &Batch<'_>, out: &mut Vec<u8>) -> Result<(), OpenError> {
    let Some(salt) = batch.seal_salt() else {
        out.extend_from_slice(batch.as_bytes());
        return Ok(());
    };
    let cipher = key.record_cipher(&salt);
    let base_offset = batch.header().base_offset.get();
    let start = out.len();
    out.extend_from_slice(&batch.as_bytes()[..BATCH_HEADER_SIZE]);
    for (index, message) in (0_u32..).zip(batch.messages()) {
        open_frame(&cipher, &message, out).map_err(|fault| match fault {
            FrameFault::Authentication => OpenError::Authentication { base_offset, index },
            FrameFault::Length => OpenError::Length { base_offset, index },
        })?;
    }
    let length = u64::try_from(out.len() - start).unwrap_or(u64::MAX);
    finish_header(&mut out[start..], SealSection::Plain, length);
    Ok(())
}

/// Appends the plain frame of the sealed `message`. The block is decrypted where the
/// frame's user-headers length ends up in the last four header bytes, so the payload and
/// the user headers land in place without a second copy.
fn open_frame(
    cipher: &LessSafeKey,
    message: &Message<'_>,
    out: &mut Vec<u8>,
) -> Result<(), FrameFault> {
    // Ciphertext and tag are copied together and opened in place; the tag is cut after.
    let block = message.payload;
    let ciphertext = block
        .len()
        .checked_sub(SEAL_TAG_SIZE)
        .and_then(|length| block.get(..length))
        .ok_or(FrameFault::Length)?;
    let start = out.len();
    let body = start + FRAME_HEADER_SIZE - SEAL_LENGTH_PREFIX_SIZE;
    out.resize(body, 0);
    out.extend_from_slice(block);
    let nonce = nonce(message.header.offset_delta.get());
    let bound = &message.header.as_bytes()[BOUND_FIELDS];
    cipher
        .open_in_place(nonce, Aad::from(bound), &mut out[body..])
        .map_err(|_error| FrameFault::Authentication)?;
    out.truncate(out.len() - SEAL_TAG_SIZE);
    let mut prefix = [0_u8; SEAL_LENGTH_PREFIX_SIZE];
    prefix.copy_from_slice(&out[body..body + SEAL_LENGTH_PREFIX_SIZE]);
    let headers_length = u32::from_le_bytes(prefix);
    let contents = ciphertext.len() - SEAL_LENGTH_PREFIX_SIZE;
    let payload_length = usize::try_from(headers_length)
        .ok()
        .and_then(|headers| contents.checked_sub(headers))
        .filter(|&payload| payload >= 1)
        .ok_or(FrameFault::Length)?;
    let mut header = message.header.clone();
    header.user_headers_length = U32::new(headers_length);
    header.payload_length =
        U32::new(u32::try_from(payload_length).map_err(|_size| FrameFault::Length)?);
    header.reserved = U64::new(0);
    out[start..start + FRAME_HEADER_SIZE].copy_from_slice(header.as_bytes());
    let checksum = message_checksum(&out[start + 8..]);
    out[start..start + 8].copy_from_slice(&checksum.to_le_bytes());
    Ok(())
}

/// What went wrong with one sealed frame.
enum FrameFault {
    Authentication,
    Length,
}

/// Rewrites the header at the start of `record` (its frames follow) for what it now is:
/// its seal section, length and batch checksum.
fn finish_header(record: &mut [u8], section: SealSection, length: u64) {
    let (header, frames) = record.split_at_mut(BATCH_HEADER_SIZE);
    // The first BATCH_HEADER_SIZE bytes were copied from a parsed header: the cast holds.
    let Ok(header) = BatchHeader::mut_from_bytes(header) else {
        unreachable!("a batch header is {BATCH_HEADER_SIZE} unaligned bytes")
    };
    section.write(header);
    header.batch_length = U64::new(length);
    header.batch_checksum = U64::new(batch_checksum(header, frames));
}

/// Frame `offset_delta`'s nonce under its record's key: unique, since a record's frames
/// are numbered 0, 1, 2, … and each record has a key of its own.
fn nonce(offset_delta: u32) -> Nonce {
    let mut bytes = [0_u8; 12];
    bytes[..4].copy_from_slice(&offset_delta.to_le_bytes());
    Nonce::assume_unique_for_key(bytes)
}

/// The size of the frame header type, asserted against the constant the layout uses.
const _: () = assert!(size_of::<FrameHeader>() == FRAME_HEADER_SIZE);

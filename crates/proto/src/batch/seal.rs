//! The layout of a sealed (encrypted at rest) batch record, as a server stores it. The
//! cryptography lives in the server; this module only knows where things are, so that the
//! stored-record parser ([`super::Batch::parse_stored`]) accepts sealed records and nothing
//! else, and so that a client can never send one (the wire parser keeps every reserved
//! byte zero).
//!
//! A sealed record is an ordinary record of §5.2 with two differences:
//! - its header's reserved area starts with the seal section: [`SEAL_MAGIC`], the version
//!   byte, three zero bytes and the record's [`SEAL_SALT_SIZE`]-byte salt; the rest of the
//!   reserved area stays zero;
//! - each frame's body is one sealed block: the ciphertext of `[user_headers_length u32 LE]
//!   ‖ payload ‖ user headers` followed by the tag; the frame declares it as its payload
//!   (`payload_length` = 4 + P + H + 16) and no user headers.
//!
//! Frame ids, offset and timestamp deltas stay in the clear (the server indexes by them),
//! and each frame's checksum covers the stored frame, so recovery and reads verify a
//! sealed segment without the key.

use zerocopy::FromBytes;

use super::BATCH_HEADER_SIZE;
use super::view::BatchHeader;
use super::{PAYLOAD_LENGTH_MAX, RECORD_SIZE_MAX, USER_HEADERS_LENGTH_MAX};

/// The first bytes of a sealed record's reserved area.
pub const SEAL_MAGIC: [u8; 4] = *b"SEAL";
/// The seal format this build writes and reads.
pub const SEAL_VERSION: u8 = 1;
/// Random bytes per record from which the record's key is derived.
pub const SEAL_SALT_SIZE: usize = 16;
/// The AEAD tag after each frame's ciphertext.
pub const SEAL_TAG_SIZE: usize = 16;
/// The sealed user-headers length in front of the payload.
pub const SEAL_LENGTH_PREFIX_SIZE: usize = 4;
/// Bytes a frame grows by when sealed.
pub const SEAL_OVERHEAD: usize = SEAL_LENGTH_PREFIX_SIZE + SEAL_TAG_SIZE;
/// The largest sealed body: a maximal payload and user headers, sealed.
pub const SEALED_PAYLOAD_LENGTH_MAX: usize =
    PAYLOAD_LENGTH_MAX + USER_HEADERS_LENGTH_MAX + SEAL_OVERHEAD;
/// The largest stored record holding one message, sealed or not.
pub const STORED_RECORD_SIZE_MAX: usize = RECORD_SIZE_MAX + SEAL_OVERHEAD;

/// Where the salt sits in the reserved area.
const SALT_AT: usize = 8;

/// What a stored header's reserved area says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealSection {
    /// All zero: a plain record.
    Plain,
    /// A well-formed seal section with this salt.
    Sealed([u8; SEAL_SALT_SIZE]),
    /// Anything else: not a record this server wrote.
    Invalid,
}

impl SealSection {
    /// Reads the reserved area of `header`.
    pub fn of(header: &BatchHeader) -> Self {
        let reserved = &header.reserved;
        if reserved.iter().all(|&byte| byte == 0) {
            return Self::Plain;
        }
        let (head, rest) = reserved.split_at(SALT_AT);
        let (salt, tail) = rest.split_at(SEAL_SALT_SIZE);
        let expected_head = [
            SEAL_MAGIC[0],
            SEAL_MAGIC[1],
            SEAL_MAGIC[2],
            SEAL_MAGIC[3],
            SEAL_VERSION,
            0,
            0,
            0,
        ];
        if head != expected_head || tail.iter().any(|&byte| byte != 0) {
            return Self::Invalid;
        }
        let mut bytes = [0_u8; SEAL_SALT_SIZE];
        bytes.copy_from_slice(salt);
        Self::Sealed(bytes)
    }

    /// Writes this section into `header`'s reserved area (all of it: what is not the
    /// section is zeroed).
    pub fn write(self, header: &mut BatchHeader) {
        header.reserved = [0; 184];
        if let Self::Sealed(salt) = self {
            let reserved = &mut header.reserved;
            reserved[..4].copy_from_slice(&SEAL_MAGIC);
            reserved[4] = SEAL_VERSION;
            reserved[SALT_AT..SALT_AT + SEAL_SALT_SIZE].copy_from_slice(&salt);
        }
    }
}

/// Whether any record of `stored` (records back to back) carries a seal section, or a
/// reserved area that is neither plain nor sealed: a walk over the record headers only, for
/// a server that must not hand such records to a client as they are.
pub fn records_sealed(mut stored: &[u8]) -> bool {
    while let Ok((header, _)) = BatchHeader::ref_from_prefix(stored) {
        if SealSection::of(header) != SealSection::Plain {
            return true;
        }
        let length = usize::try_from(header.batch_length.get()).unwrap_or(usize::MAX);
        match stored.get(length.max(BATCH_HEADER_SIZE)..) {
            Some(rest) => stored = rest,
            None => return false,
        }
    }
    false
}

//! The key-check file: what tells a start with the wrong key (or none) from one with the
//! right key before a single record is read. 48 bytes: a magic, the master key's check
//! value (a keyed hash, which reveals nothing of the key) and an XXH3 of both.

use xxhash_rust::xxh3::xxh3_64;

use crate::key::MasterKey;

const MAGIC: [u8; 8] = *b"IGGYKCV1";
const FILE_SIZE: usize = 48;

/// Why a key-check file was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("the key-check file is damaged (its length, magic or checksum is wrong)")]
    Damaged,
    #[error("the configured key is not the key the data was encrypted with")]
    WrongKey,
}

/// The stored identity of a master key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyCheck {
    value: [u8; 32],
}

impl KeyCheck {
    pub fn of(key: &MasterKey) -> Self {
        Self {
            value: key.check_value(),
        }
    }

    pub fn encode(&self) -> [u8; FILE_SIZE] {
        let mut bytes = [0_u8; FILE_SIZE];
        bytes[..8].copy_from_slice(&MAGIC);
        bytes[8..40].copy_from_slice(&self.value);
        let checksum = xxh3_64(&bytes[..40]);
        bytes[40..].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CheckError> {
        let bytes: &[u8; FILE_SIZE] = bytes.try_into().map_err(|_length| CheckError::Damaged)?;
        let mut checksum = [0_u8; 8];
        checksum.copy_from_slice(&bytes[40..]);
        if bytes[..8] != MAGIC || xxh3_64(&bytes[..40]) != u64::from_le_bytes(checksum) {
            return Err(CheckError::Damaged);
        }
        let mut value = [0_u8; 32];
        value.copy_from_slice(&bytes[8..40]);
        Ok(Self { value })
    }

    /// Whether `key` is the key this check was made of.
    pub fn verify(&self, key: &MasterKey) -> Result<(), CheckError> {
        if Self::of(key) == *self {
            Ok(())
        } else {
            Err(CheckError::WrongKey)
        }
    }
}

//! Encryption at rest on the data path (`[system.encryption]`, crate `seal`): a send's record
//! is sealed on the shard that received it, before it is replicated or appended, and records
//! read for a client are opened on the shard that answers. A build without the
//! `encryption` feature has no key type to hold (an empty enum), and refuses to serve a
//! sealed record rather than hand ciphertext to a client.

use segment::log::Records;
use segment::partition::AppendBuffer;

#[cfg(feature = "encryption")]
use crate::refusal::Invalid;
use crate::refusal::Refusal;

/// The server's master key.
#[cfg(feature = "encryption")]
pub type RecordKey = seal::MasterKey;

/// The server's master key: none can exist in a build without `encryption`.
#[cfg(not(feature = "encryption"))]
#[derive(Debug)]
pub enum RecordKey {}

/// Why records read from a partition could not be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenFailure {
    #[error("a record is sealed but this server has no encryption key")]
    NoKey,
    #[error("{0}")]
    Unopenable(String),
}

/// Seals `batch`, a send's plain record; a fresh random salt gives it a key of its own.
#[cfg(feature = "encryption")]
pub(crate) fn seal(key: &RecordKey, batch: &[u8]) -> Result<AppendBuffer, Refusal> {
    let mut salt = [0_u8; proto::batch::seal::SEAL_SALT_SIZE];
    getrandom::fill(&mut salt).map_err(|_error| Refusal::Internal)?;
    match seal::seal_record(key, batch, salt) {
        Ok(sealed) => Ok(AppendBuffer::Heap(sealed)),
        Err(seal::SealError::TooLarge) => Err(Refusal::Invalid(Invalid::PayloadLength)),
        // The send path validated the record; only a record that is not numbered 0, 1, …
        // reaches here, which the append would refuse alike.
        Err(seal::SealError::Layout(_) | seal::SealError::OffsetDelta { .. }) => {
            Err(Refusal::Malformed)
        }
    }
}

#[cfg(not(feature = "encryption"))]
pub(crate) fn seal(key: &RecordKey, _batch: &[u8]) -> Result<AppendBuffer, Refusal> {
    match *key {}
}

/// Replaces sealed records in `records` by their plain form; leaves plain ones untouched
/// (no copy when nothing read was sealed).
pub(crate) fn open(key: Option<&RecordKey>, records: &mut Records) -> Result<(), OpenFailure> {
    if !proto::batch::seal::records_sealed(&records.bytes) {
        return Ok(());
    }
    let Some(key) = key else {
        return Err(OpenFailure::NoKey);
    };
    open_with(key, records)
}

#[cfg(feature = "encryption")]
fn open_with(key: &RecordKey, records: &mut Records) -> Result<(), OpenFailure> {
    match seal::open_records(Some(key), &records.bytes) {
        Ok(Some(plain)) => records.bytes = plain,
        Ok(None) => {}
        Err(error) => return Err(OpenFailure::Unopenable(error.to_string())),
    }
    Ok(())
}

#[cfg(not(feature = "encryption"))]
fn open_with(key: &RecordKey, _records: &mut Records) -> Result<(), OpenFailure> {
    match *key {}
}

/// Why the configured at-rest key cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFailure {
    #[error("[system.encryption] is enabled but this binary was built without `encryption`")]
    NotBuilt,
    #[error("system.encryption.key: {0}")]
    Invalid(String),
    #[error("system.encryption.key is not the key the data was encrypted with")]
    WrongKey,
    #[error("the key-check file is damaged")]
    CheckDamaged,
}

/// Parses `text` (Iggy's form: base64 of 32 bytes) and checks it against `stored`, the
/// key-check file's bytes; returns the key and, when nothing was stored, the check bytes to
/// store before any record is sealed.
#[cfg(feature = "encryption")]
pub fn unlock(
    text: &str,
    stored: Option<&[u8]>,
) -> Result<(RecordKey, Option<Vec<u8>>), KeyFailure> {
    let key = seal::MasterKey::from_base64(text)
        .map_err(|error| KeyFailure::Invalid(error.to_string()))?;
    let Some(stored) = stored else {
        let check = seal::KeyCheck::of(&key).encode().to_vec();
        return Ok((key, Some(check)));
    };
    match seal::KeyCheck::decode(stored).and_then(|check| check.verify(&key)) {
        Ok(()) => Ok((key, None)),
        Err(seal::CheckError::WrongKey) => Err(KeyFailure::WrongKey),
        Err(seal::CheckError::Damaged) => Err(KeyFailure::CheckDamaged),
    }
}

#[cfg(not(feature = "encryption"))]
pub fn unlock(
    _text: &str,
    _stored: Option<&[u8]>,
) -> Result<(RecordKey, Option<Vec<u8>>), KeyFailure> {
    Err(KeyFailure::NotBuilt)
}

//! Encryption at rest (`[system.encryption]`, crate `seal`). On the data path a send's
//! record is sealed on the shard that received it, before it is replicated or appended, and
//! records read for a client are opened on the shard that answers; stored credentials are
//! sealed too ([`credentials`]), and the offline rotation (`crate::rotate`) moves both to a
//! new key. A build without the `encryption` feature has no key type to hold (an empty
//! enum), and refuses to serve a sealed record rather than hand ciphertext to a client.

pub mod credentials;

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
    match key {
        // `seal::open_records` makes the one walk over the record headers itself.
        Some(key) => open_with(key, records),
        None if proto::batch::seal::records_sealed(&records.bytes) => Err(OpenFailure::NoKey),
        None => Ok(()),
    }
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

/// `stored`, one record as a segment holds it, moved to the key `new` (plain when `None`)
/// for the offline rotation (`crate::rotate`): opened with `old`, or with `new` when it was
/// already moved by an interrupted run; sealed under a fresh random salt.
#[cfg(feature = "encryption")]
pub(crate) fn reseal(
    old: Option<&RecordKey>,
    new: Option<&RecordKey>,
    stored: &[u8],
) -> Result<Vec<u8>, String> {
    let mut salt = [0_u8; proto::batch::seal::SEAL_SALT_SIZE];
    getrandom::fill(&mut salt).map_err(|error| format!("the random source failed: {error}"))?;
    seal::reseal_record(old, new, stored, salt).map_err(|error| error.to_string())
}

/// Without `encryption` no key exists: a plain record stays as it is, a sealed one cannot
/// be opened.
#[cfg(not(feature = "encryption"))]
pub(crate) fn reseal(
    _old: Option<&RecordKey>,
    _new: Option<&RecordKey>,
    stored: &[u8],
) -> Result<Vec<u8>, String> {
    if proto::batch::seal::records_sealed(stored) {
        return Err(OpenFailure::NoKey.to_string());
    }
    Ok(stored.to_vec())
}

/// The key's fingerprint, which cluster nodes compare at their handshake (zeros without a
/// key): nodes under different keys refuse each other.
pub fn fingerprint(key: Option<&RecordKey>) -> [u8; 32] {
    match key {
        Some(key) => fingerprint_of(key),
        None => [0; 32],
    }
}

#[cfg(feature = "encryption")]
fn fingerprint_of(key: &RecordKey) -> [u8; 32] {
    key.fingerprint()
}

#[cfg(not(feature = "encryption"))]
fn fingerprint_of(key: &RecordKey) -> [u8; 32] {
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

#[cfg(test)]
#[cfg(feature = "encryption")]
mod tests {
    use proto::batch::{OutgoingMessage, encode_batch, stamp};

    use super::*;

    fn plain() -> Vec<u8> {
        let messages: Vec<OutgoingMessage<'_>> = [&b"first secret"[..], b"second secret"]
            .into_iter()
            .zip(1_u128..)
            .map(|(payload, id)| OutgoingMessage {
                id,
                origin_timestamp: 1_700_000_000_000_000,
                payload,
                user_headers: &[],
            })
            .collect();
        let mut out = Vec::new();
        encode_batch(&messages, None, &mut out).unwrap();
        out
    }

    /// What a partition stores for `plain` under `key`: sealed, then stamped.
    fn stored(key: &RecordKey) -> Records {
        let AppendBuffer::Heap(mut bytes) = seal(key, &plain()).unwrap() else {
            unreachable!("sealing makes a new buffer")
        };
        stamp(&mut bytes, 10, 1_700_000_000_000_001).unwrap();
        Records {
            bytes,
            messages_count: 2,
            ..Records::default()
        }
    }

    #[test]
    fn reads_open_with_the_key_and_never_serve_ciphertext_without_it() {
        let key = RecordKey::new([3; 32]);
        let mut expected = plain();
        stamp(&mut expected, 10, 1_700_000_000_000_001).unwrap();
        let mut records = stored(&key);
        assert!(
            !records
                .bytes
                .windows(12)
                .any(|window| window == b"first secret")
        );
        open(Some(&key), &mut records).unwrap();
        assert_eq!(records.bytes, expected);

        let mut records = stored(&key);
        assert_eq!(open(None, &mut records), Err(OpenFailure::NoKey));
        let other = RecordKey::new([4; 32]);
        assert!(matches!(
            open(Some(&other), &mut records),
            Err(OpenFailure::Unopenable(_))
        ));
        // Plain records (written before encryption was on) are served as they are.
        let mut records = Records {
            bytes: expected.clone(),
            ..Records::default()
        };
        open(Some(&key), &mut records).unwrap();
        assert_eq!(records.bytes, expected);
    }

    #[test]
    fn a_key_unlocks_only_the_data_it_wrote() {
        let text = "q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=";
        let (_, check) = unlock(text, None).unwrap();
        let check = check.expect("a first start stores the check");
        assert!(unlock(text, Some(&check)).unwrap().1.is_none());
        let other = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        assert_eq!(
            unlock(other, Some(&check)).err(),
            Some(KeyFailure::WrongKey)
        );
        assert_eq!(
            unlock(text, Some(&check[1..])).err(),
            Some(KeyFailure::CheckDamaged)
        );
        assert!(matches!(unlock("short", None), Err(KeyFailure::Invalid(_))));
    }
}

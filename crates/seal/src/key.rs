//! The master key: 32 bytes given as base64 (Iggy's `[system.encryption] key`), never
//! printed, and the per-record keys derived from it.

use base64::Engine;
use proto::batch::seal::SEAL_SALT_SIZE;
use ring::aead::{AES_256_GCM, LessSafeKey, UnboundKey};

/// Bytes in a key: AES-256.
pub const KEY_SIZE: usize = 32;

/// Domain separation of the two things derived from the master key.
const RECORD_KEY_CONTEXT: &[u8] = b"iggy at-rest record key v1";
const CHECK_CONTEXT: &[u8] = b"iggy at-rest key check v1";
const FINGERPRINT_CONTEXT: &[u8] = b"iggy at-rest key fingerprint v1";
const SECRET_KEY_CONTEXT: &[u8] = b"iggy at-rest secret key v1";
const SECRET_NONCE_CONTEXT: &[u8] = b"iggy at-rest secret nonce v1";

/// Why a configured key was refused. The messages never contain the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the key is empty; give 32 random bytes as base64 (e.g. `openssl rand -base64 32`)")]
    Empty,
    #[error("the key is not valid base64")]
    Base64,
    #[error("the key decodes to {0} bytes; AES-256 needs exactly 32")]
    Length(usize),
}

/// The server's master key.
#[derive(Clone)]
pub struct MasterKey {
    bytes: [u8; KEY_SIZE],
}

impl MasterKey {
    pub fn new(bytes: [u8; KEY_SIZE]) -> Self {
        Self { bytes }
    }

    /// Parses Iggy's form: standard base64 of exactly 32 bytes.
    pub fn from_base64(text: &str) -> Result<Self, KeyError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(KeyError::Empty);
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_error| KeyError::Base64)?;
        let bytes: [u8; KEY_SIZE] = decoded
            .as_slice()
            .try_into()
            .map_err(|_length| KeyError::Length(decoded.len()))?;
        Ok(Self::new(bytes))
    }

    /// The cipher of the record salted with `salt`.
    pub(crate) fn record_cipher(&self, salt: &[u8; SEAL_SALT_SIZE]) -> LessSafeKey {
        let mut hasher = blake3::Hasher::new_keyed(&self.bytes);
        hasher.update(RECORD_KEY_CONTEXT);
        hasher.update(salt);
        let key = hasher.finalize();
        // A 32-byte key is what AES-256-GCM takes: `new` fails only on another length.
        let Ok(key) = UnboundKey::new(&AES_256_GCM, key.as_bytes()) else {
            unreachable!("BLAKE3 gives 32 bytes, AES-256's key length")
        };
        // "Less safe" only in that the caller must never repeat a nonce under the key: each
        // record's key is its own and its nonces are its frames' distinct indexes.
        LessSafeKey::new(key)
    }

    /// The cipher of sealed secrets and the key of their synthetic nonces
    /// ([`crate::secret`]), both derived for secrets alone.
    pub(crate) fn secret_ciphers(&self) -> (LessSafeKey, [u8; 32]) {
        let key = blake3::keyed_hash(&self.bytes, SECRET_KEY_CONTEXT);
        let nonce_key = blake3::keyed_hash(&self.bytes, SECRET_NONCE_CONTEXT);
        // As in `record_cipher`: 32 bytes is AES-256's key length.
        let Ok(key) = UnboundKey::new(&AES_256_GCM, key.as_bytes()) else {
            unreachable!("BLAKE3 gives 32 bytes, AES-256's key length")
        };
        // A nonce recurs only with its own plain value (`crate::secret`).
        (LessSafeKey::new(key), *nonce_key.as_bytes())
    }

    /// What replicas compare at their handshake to find they share the key: a keyed hash
    /// of a constant, which reveals nothing of the key (and differs from the check value).
    pub fn fingerprint(&self) -> [u8; 32] {
        *blake3::keyed_hash(&self.bytes, FINGERPRINT_CONTEXT).as_bytes()
    }

    /// A value that identifies the key without revealing it (a keyed hash of a constant):
    /// stored beside the data, compared at start.
    pub(crate) fn check_value(&self) -> [u8; 32] {
        *blake3::keyed_hash(&self.bytes, CHECK_CONTEXT).as_bytes()
    }
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("MasterKey(<redacted>)")
    }
}

impl Drop for MasterKey {
    fn drop(&mut self) {
        // Best effort: the key should not outlive its holder in freed memory.
        self.bytes = [0; KEY_SIZE];
        std::hint::black_box(&self.bytes);
    }
}

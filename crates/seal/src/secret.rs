//! Sealing the credentials the metadata stores (argon2 password hashes, personal access
//! token digests), so the journal, the snapshot and the replica log hold no value an
//! attacker with the data directory could attack offline.
//!
//! A sealed secret is a string, so it takes the place of the plain value everywhere the
//! metadata carries one (ops, snapshot, replication) with no format change:
//! `$iggy-sealed$v1$` followed by unpadded URL-safe base64 of `nonce(12) ‖ ciphertext ‖
//! tag(16)`, AES-256-GCM under a key derived from the master key for secrets alone.
//!
//! Sealing is deterministic: the nonce is a keyed BLAKE3 hash of the plain value (a
//! synthetic IV, as in AES-GCM-SIV). So equal values seal equally under one key, which lets
//! a token digest be looked up by equality of its sealed form, and a nonce recurs only with
//! its own plain value, when GCM gives the same ciphertext and reveals nothing new (two
//! different values share a nonce with probability 2^-96 per pair). Opening checks the
//! nonce too, so a value cannot be paired with another value's nonce.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, NONCE_LEN, Nonce};

use crate::key::MasterKey;

/// What every sealed secret starts with; no argon2 PHC string or hex digest does.
pub const SEALED_SECRET_PREFIX: &str = "$iggy-sealed$v1$";

/// Bytes of the GCM tag.
const TAG_SIZE: usize = 16;

/// Why a stored secret could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("a sealed secret is not valid base64 or too short")]
    Layout,
    #[error("a sealed secret fails authentication (another key, or damage)")]
    Authentication,
}

/// Whether `stored` is a sealed secret (rather than a plain value from before encryption
/// was turned on).
pub fn is_sealed_secret(stored: &str) -> bool {
    stored.starts_with(SEALED_SECRET_PREFIX)
}

/// The sealed form of `plain` under `key`: the same for the same value and key.
pub fn seal_secret(key: &MasterKey, plain: &str) -> String {
    let (cipher, nonce_key) = key.secret_ciphers();
    let nonce = synthetic_nonce(&nonce_key, plain.as_bytes());
    let mut sealed = Vec::with_capacity(NONCE_LEN + plain.len() + TAG_SIZE);
    sealed.extend_from_slice(&nonce);
    sealed.extend_from_slice(plain.as_bytes());
    // GCM refuses only inputs above 2^36 bytes; a credential is far below.
    let Ok(tag) = cipher.seal_in_place_separate_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(SEALED_SECRET_PREFIX.as_bytes()),
        &mut sealed[NONCE_LEN..],
    ) else {
        unreachable!("a credential is far below GCM's input limit")
    };
    sealed.extend_from_slice(tag.as_ref());
    let mut text = String::with_capacity(SEALED_SECRET_PREFIX.len() + sealed.len() * 4 / 3 + 4);
    text.push_str(SEALED_SECRET_PREFIX);
    URL_SAFE_NO_PAD.encode_string(&sealed, &mut text);
    text
}

/// The plain value of `stored`, a sealed secret; `None` when `stored` is not sealed.
pub fn open_secret(key: &MasterKey, stored: &str) -> Option<Result<String, SecretError>> {
    let encoded = stored.strip_prefix(SEALED_SECRET_PREFIX)?;
    Some(open_encoded(key, encoded))
}

fn open_encoded(key: &MasterKey, encoded: &str) -> Result<String, SecretError> {
    let mut sealed = URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|_error| SecretError::Layout)?;
    if sealed.len() < NONCE_LEN + TAG_SIZE {
        return Err(SecretError::Layout);
    }
    let (cipher, nonce_key) = key.secret_ciphers();
    let mut nonce = [0_u8; NONCE_LEN];
    nonce.copy_from_slice(&sealed[..NONCE_LEN]);
    let plain = cipher
        .open_in_place(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(SEALED_SECRET_PREFIX.as_bytes()),
            &mut sealed[NONCE_LEN..],
        )
        .map_err(|_unspecified| SecretError::Authentication)?;
    if synthetic_nonce(&nonce_key, plain) != nonce {
        return Err(SecretError::Authentication);
    }
    String::from_utf8(plain.to_vec()).map_err(|_error| SecretError::Layout)
}

fn synthetic_nonce(nonce_key: &[u8; 32], plain: &[u8]) -> [u8; NONCE_LEN] {
    let hash = blake3::keyed_hash(nonce_key, plain);
    let mut nonce = [0_u8; NONCE_LEN];
    nonce.copy_from_slice(&hash.as_bytes()[..NONCE_LEN]);
    nonce
}

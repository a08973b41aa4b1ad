//! Credentials: argon2id password hashes (PHC strings) and the SHA-256 digests personal
//! access tokens are stored and looked up by. Clear text never outlives the call.

use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Argon2, PasswordHash};
use sha2::{Digest, Sha256};

/// Hashing a password failed (the salt source or the argon2 parameters).
#[derive(Debug, thiserror::Error)]
#[error("hash a password with argon2id")]
pub struct HashError(#[source] argon2::password_hash::Error);

/// Whether `clear` matches the PHC string `phc`. A malformed PHC string matches nothing.
pub fn verify_password(phc: &str, clear: &str) -> bool {
    Argon2::default()
        .verify_password(clear.as_bytes(), phc)
        .is_ok()
}

/// An argon2id PHC string for `clear`, with a fresh random salt.
pub fn hash_password(clear: &str) -> Result<String, HashError> {
    let hash: PasswordHash = Argon2::default()
        .hash_password(clear.as_bytes())
        .map_err(HashError)?;
    Ok(hash.to_string())
}

/// The lowercase hex SHA-256 of a clear personal access token: what tokens are stored and
/// looked up by.
pub fn token_hash(clear: &str) -> String {
    let digest = Sha256::digest(clear.as_bytes());
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::{hash_password, token_hash, verify_password};

    #[test]
    fn password_round_trip() {
        let phc = hash_password("iggy").unwrap();
        assert!(phc.starts_with("$argon2id$"));
        assert!(verify_password(&phc, "iggy"));
        assert!(!verify_password(&phc, "iggz"));
        assert!(!verify_password("not a phc string", "iggy"));
    }

    #[test]
    fn token_digest_is_sha256_hex() {
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

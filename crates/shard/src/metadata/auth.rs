//! Credentials: argon2id password hashes (PHC strings), personal access tokens (50 random
//! bytes, base64url; only their SHA-256 hex is stored), and the login checks over
//! [`Metadata`].
//!
//! Hashing and minting draw randomness, so they run before an op is built: the op carries
//! the finished hash and `apply` stays deterministic.

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::model::{Metadata, User, UserStatus};
use crate::at_rest::credentials::CredentialSeal;
use crate::refusal::{Login, Refusal};

/// Random bytes in a minted token.
pub const TOKEN_BYTES: usize = 50;
/// Random bytes in a password salt.
const SALT_BYTES: usize = 16;

/// Hashing or randomness failed: the operation cannot go ahead.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("the system random source failed")]
    Random(#[source] getrandom::Error),
    #[error("argon2 hashing failed")]
    Hash(#[source] argon2::password_hash::Error),
}

/// An argon2id PHC string of `password` with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, CredentialError> {
    let mut salt = [0_u8; SALT_BYTES];
    getrandom::fill(&mut salt).map_err(CredentialError::Random)?;
    let hash = Argon2::default()
        .hash_password_with_salt(password.as_bytes(), &salt)
        .map_err(CredentialError::Hash)?;
    Ok(hash.to_string())
}

/// An argon2id hash of a random password, made once with the same parameters as real ones:
/// checking a login for an unknown user against it costs what a wrong password costs, so
/// the answer time does not tell which user names exist.
pub fn dummy_password_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| {
        let mut password = [0_u8; 24];
        // A failed random source still leaves a hash of the right cost; nobody knows it.
        let _ = getrandom::fill(&mut password);
        let password = URL_SAFE_NO_PAD.encode(password);
        hash_password(&password).unwrap_or_else(|_| {
            // Only the random salt can fail here; a fixed salt keeps the cost the same.
            Argon2::default()
                .hash_password_with_salt(password.as_bytes(), b"dummy-login-salt")
                .map(|hash| hash.to_string())
                .unwrap_or_default()
        })
    })
}

/// Whether `password` matches the stored PHC string (a malformed hash matches nothing).
pub fn verify_password(password: &str, password_hash: &str) -> bool {
    Argon2::default()
        .verify_password(password.as_bytes(), password_hash)
        .is_ok()
}

/// A minted token: the clear text (returned to the client once) and the hash to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintedToken {
    pub token: String,
    pub token_hash: String,
}

/// Mints a personal access token.
pub fn mint_token() -> Result<MintedToken, CredentialError> {
    let mut bytes = [0_u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(CredentialError::Random)?;
    let token = URL_SAFE_NO_PAD.encode(bytes);
    let token_hash = token_hash(&token);
    Ok(MintedToken { token, token_hash })
}

/// The SHA-256 of a clear token (what a session keeps of the token it logged in with).
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The lowercase hex SHA-256 of a clear token: what is stored and looked up.
pub fn token_hash(token: &str) -> String {
    digest_hex(&token_digest(token))
}

/// The lowercase hex form of a token digest, as [`PersonalAccessToken::token_hash`] holds it.
///
/// [`PersonalAccessToken::token_hash`]: super::model::PersonalAccessToken::token_hash
pub fn digest_hex(digest: &[u8; 32]) -> String {
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(hex_digit(byte >> 4));
        hex.push(hex_digit(byte & 0x0f));
    }
    hex
}

fn hex_digit(nibble: u8) -> char {
    char::from_digit(u32::from(nibble), 16).unwrap_or('0')
}

impl Metadata {
    /// Password login: the user's id, or `42 InvalidCredentials` (unknown user or wrong
    /// password, indistinguishable: an unknown user is checked against a dummy hash),
    /// `47 UserInactive`. A hash sealed under another key matches nothing. The server runs
    /// the check on its hashing threads instead.
    pub fn authenticate(
        &self,
        username: &str,
        password: &str,
        seal: &CredentialSeal,
    ) -> Result<u32, Refusal> {
        let Some(user) = self.user_by_name(username) else {
            verify_password(password, dummy_password_hash());
            return Err(Refusal::Login(Login::Credentials));
        };
        let hash = seal.reveal(&user.password_hash);
        if !hash.is_ok_and(|hash| verify_password(password, &hash)) {
            return Err(Refusal::Login(Login::Credentials));
        }
        active(user)
    }

    /// The id of user `user_id` if it exists and is active: `42` or `47` otherwise.
    pub fn active_user(&self, user_id: u32) -> Result<u32, Refusal> {
        let user = self
            .users
            .get(&user_id)
            .ok_or(Refusal::Login(Login::Credentials))?;
        active(user)
    }

    /// Token login at `now_micros`: the owner's id, or `53 InvalidPersonalAccessToken`,
    /// `54 PersonalAccessTokenExpired`, `47 UserInactive`. The token's digest is looked up
    /// in the forms `seal` stores it in.
    pub fn authenticate_token(
        &self,
        token: &str,
        now_micros: u64,
        seal: &CredentialSeal,
    ) -> Result<u32, Refusal> {
        let hash = seal.stored_forms(token_hash(token));
        let (user, found) = self
            .users
            .values()
            .find_map(|user| {
                let found = user.tokens.values().find(|t| hash.matches(&t.token_hash))?;
                Some((user, found))
            })
            .ok_or(Refusal::Login(Login::Token))?;
        if found.expiry_at.is_some_and(|expiry| expiry <= now_micros) {
            return Err(Refusal::Login(Login::TokenExpired));
        }
        active(user)
    }
}

/// Why a live session may no longer act, checked on every request: its user was deleted
/// (or the id now names someone else's account, which cannot happen while deletes end their
/// sessions), deactivated, or the token it logged in with was deleted or expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityLost {
    UserGone,
    UserInactive,
    TokenRevoked,
}

impl Metadata {
    /// Whether a session of `user_id` (logged in with the token of digest `token`, if any,
    /// stored in the forms `seal` gives) may still act at `now_micros`.
    pub fn session_identity(
        &self,
        user_id: u32,
        token: Option<&[u8; 32]>,
        now_micros: u64,
        seal: &CredentialSeal,
    ) -> Result<(), IdentityLost> {
        let user = self.users.get(&user_id).ok_or(IdentityLost::UserGone)?;
        if user.status == UserStatus::Inactive {
            return Err(IdentityLost::UserInactive);
        }
        let Some(digest) = token else {
            return Ok(());
        };
        let hash = seal.stored_forms(digest_hex(digest));
        let valid = user.tokens.values().any(|token| {
            hash.matches(&token.token_hash)
                && token.expiry_at.is_none_or(|expiry| expiry > now_micros)
        });
        if valid {
            Ok(())
        } else {
            Err(IdentityLost::TokenRevoked)
        }
    }
}

fn active(user: &User) -> Result<u32, Refusal> {
    match user.status {
        UserStatus::Active => Ok(user.id),
        UserStatus::Inactive => Err(Refusal::Login(Login::UserInactive)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_hashes_verify_and_are_salted() {
        let first = hash_password("secret").unwrap();
        let second = hash_password("secret").unwrap();
        assert!(first.starts_with("$argon2id$"));
        assert_ne!(first, second);
        assert!(verify_password("secret", &first));
        assert!(!verify_password("Secret", &first));
        assert!(!verify_password("secret", "not a phc string"));
    }

    #[test]
    fn tokens_are_random_and_hashed_as_sha256_hex() {
        let token = mint_token().unwrap();
        assert_eq!(token.token.len(), 67);
        assert_ne!(token.token, mint_token().unwrap().token);
        assert_eq!(token.token_hash, token_hash(&token.token));
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

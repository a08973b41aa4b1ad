//! Credentials sealed at rest: with `[system.encryption]` on, a password hash or token
//! digest is sealed (`seal::seal_secret`) before it goes into an op, so the journal, the
//! snapshot and the replica log only ever hold the sealed form. The metadata state keeps
//! what was stored; a login opens a password hash to check it, and finds a token by the
//! sealed form of its digest (sealing is deterministic under one key).
//!
//! Values stored before encryption was turned on stay valid as they are; the offline
//! re-encryption (`iggy encryption rotate`) seals them.

use std::borrow::Cow;
use std::sync::Arc;

use crate::at_rest::RecordKey;

/// How this server stores credentials: sealed under the at-rest key, or as they are.
#[derive(Debug, Clone, Default)]
pub struct CredentialSeal {
    key: Option<Arc<RecordKey>>,
}

/// A stored credential could not be opened: sealed without a key here, or under another
/// key, or damaged. It matches nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a stored credential is sealed and cannot be opened with this server's key")]
pub struct CredentialSealed;

impl CredentialSeal {
    pub fn new(key: Option<Arc<RecordKey>>) -> Self {
        Self { key }
    }

    /// Whether credentials are sealed before they are stored.
    pub fn seals(&self) -> bool {
        self.key.is_some()
    }

    /// The form of `plain` to store. A value already sealed is stored as it is: sealing
    /// twice would make a hash no login can open.
    pub fn protect(&self, plain: String) -> String {
        match &self.key {
            Some(key) if !is_sealed(&plain) => protect_with(key, &plain),
            _ => plain,
        }
    }

    /// The plain value of `stored`: a sealed value opened, a plain one as it is.
    pub fn reveal<'a>(&self, stored: &'a str) -> Result<Cow<'a, str>, CredentialSealed> {
        if !is_sealed(stored) {
            return Ok(Cow::Borrowed(stored));
        }
        match &self.key {
            Some(key) => reveal_with(key, stored).map(Cow::Owned),
            None => Err(CredentialSealed),
        }
    }

    /// What a stored value of `plain` may look like: plain (stored before encryption was
    /// on) or sealed under this server's key.
    pub fn stored_forms(&self, plain: String) -> StoredForms {
        let sealed = self.key.as_ref().map(|key| protect_with(key, &plain));
        StoredForms { plain, sealed }
    }
}

/// The forms a stored credential of one plain value may take ([`CredentialSeal::stored_forms`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredForms {
    plain: String,
    sealed: Option<String>,
}

impl StoredForms {
    /// The forms of a value stored without a seal.
    pub fn plain(plain: String) -> Self {
        Self {
            plain,
            sealed: None,
        }
    }

    /// Whether `stored` holds this value.
    pub fn matches(&self, stored: &str) -> bool {
        stored == self.plain || self.sealed.as_deref() == Some(stored)
    }
}

#[cfg(feature = "encryption")]
fn is_sealed(stored: &str) -> bool {
    seal::is_sealed_secret(stored)
}

/// Without `encryption` the prefix is still recognised, so a sealed value is refused,
/// never taken for a plain hash.
#[cfg(not(feature = "encryption"))]
fn is_sealed(stored: &str) -> bool {
    stored.starts_with("$iggy-sealed$")
}

#[cfg(feature = "encryption")]
fn protect_with(key: &RecordKey, plain: &str) -> String {
    seal::seal_secret(key, plain)
}

#[cfg(not(feature = "encryption"))]
fn protect_with(key: &RecordKey, _plain: &str) -> String {
    match *key {}
}

#[cfg(feature = "encryption")]
fn reveal_with(key: &RecordKey, stored: &str) -> Result<String, CredentialSealed> {
    match seal::open_secret(key, stored) {
        Some(Ok(plain)) => Ok(plain),
        Some(Err(_)) | None => Err(CredentialSealed),
    }
}

#[cfg(not(feature = "encryption"))]
fn reveal_with(key: &RecordKey, _stored: &str) -> Result<String, CredentialSealed> {
    match *key {}
}

#[cfg(test)]
#[cfg(feature = "encryption")]
mod tests {
    use std::sync::Arc;

    use super::{CredentialSeal, CredentialSealed, StoredForms};

    fn sealing(byte: u8) -> CredentialSeal {
        CredentialSeal::new(Some(Arc::new(seal::MasterKey::new([byte; 32]))))
    }

    #[test]
    fn sealed_credentials_open_only_under_their_key() {
        let (seal, other, plain) = (sealing(1), sealing(2), CredentialSeal::default());
        let hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_owned();
        let stored = seal.protect(hash.clone());
        assert!(!stored.contains("argon2") && stored != hash);
        assert_eq!(seal.reveal(&stored).unwrap(), hash);
        assert_eq!(other.reveal(&stored), Err(CredentialSealed));
        assert_eq!(plain.reveal(&stored), Err(CredentialSealed));
        // Values stored before encryption was on stay readable.
        assert_eq!(seal.reveal(&hash).unwrap(), hash);
        assert_eq!(plain.protect(hash.clone()), hash);
        assert_eq!(seal.protect(stored.clone()), stored, "never sealed twice");
    }

    #[test]
    fn token_digests_match_in_either_stored_form() {
        let seal = sealing(1);
        let digest = "ab".repeat(32);
        let forms = seal.stored_forms(digest.clone());
        assert!(forms.matches(&seal.protect(digest.clone())));
        assert!(forms.matches(&digest));
        assert!(!forms.matches(&sealing(2).protect(digest.clone())));
        assert!(!forms.matches(&"cd".repeat(32)));
        assert!(!StoredForms::plain(digest.clone()).matches(&seal.protect(digest)));
    }
}

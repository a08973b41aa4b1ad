//! Passwords this process has already verified against a stored hash, so a client that logs
//! in again with the same credentials (every connection of a producer pool, a reconnect
//! storm after a restart, the CLI run in a loop) skips argon2's ~30 ms of CPU and 19 MiB of
//! fresh memory.
//!
//! An entry is a keyed BLAKE3 digest of the stored PHC string and the clear password, under
//! a key drawn at start that never leaves memory: no password or digest is written anywhere,
//! and one is only ever matched by the exact password against the exact hash it was checked
//! with. Changing a password stores a new hash, which no old entry names, so an entry needs no
//! expiry to go stale safely. Only successes are kept: a wrong password is always checked by
//! argon2, so guessing costs what it did, and a hit answers sooner only a login that succeeds
//! anyway. The set is bounded ([`CAPACITY`]); the oldest entry goes first.
//!
//! What it trades: a process whose memory is read can be searched for a password with a
//! fast hash (given the key, also in memory) instead of argon2 — by someone who could as well
//! read the clear passwords of the logins passing through it.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Entries kept; 32 bytes each, twice (the queue and the set).
pub const CAPACITY: usize = 1024;

type Digest = [u8; 32];

/// The verified (password, stored hash) pairs, as keyed digests.
pub struct VerifiedPasswords {
    /// `None`: the random source failed at start, and nothing is remembered.
    key: Option<[u8; 32]>,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    /// Oldest first.
    order: VecDeque<Digest>,
    present: HashSet<Digest>,
}

impl VerifiedPasswords {
    /// An empty set under a fresh random key.
    pub fn new() -> Self {
        let mut key = [0_u8; 32];
        let key = getrandom::fill(&mut key).ok().map(|()| key);
        Self {
            key,
            entries: Mutex::new(Entries::default()),
        }
    }

    /// Whether `password` was verified against `password_hash` before.
    pub fn contains(&self, password: &str, password_hash: &str) -> bool {
        let Some(digest) = self.digest(password, password_hash) else {
            return false;
        };
        self.lock().present.contains(&digest)
    }

    /// Remembers that `password` matches `password_hash`; the caller has just verified it.
    pub fn insert(&self, password: &str, password_hash: &str) {
        let Some(digest) = self.digest(password, password_hash) else {
            return;
        };
        let mut entries = self.lock();
        if !entries.present.insert(digest) {
            return;
        }
        entries.order.push_back(digest);
        if entries.order.len() > CAPACITY
            && let Some(oldest) = entries.order.pop_front()
        {
            entries.present.remove(&oldest);
        }
        debug_assert_eq!(entries.order.len(), entries.present.len());
    }

    fn digest(&self, password: &str, password_hash: &str) -> Option<Digest> {
        let key = self.key.as_ref()?;
        let mut hasher = blake3::Hasher::new_keyed(key);
        // Length-prefixed, so no two (hash, password) pairs feed the same bytes.
        hasher.update(&(password_hash.len() as u64).to_le_bytes());
        hasher.update(password_hash.as_bytes());
        hasher.update(password.as_bytes());
        Some(*hasher.finalize().as_bytes())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding the lock cannot leave the entries inconsistent in a way
        // that matters: at worst a digest is in one collection and not the other.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for VerifiedPasswords {
    /// The number of entries only: neither the key nor a digest is printed.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("VerifiedPasswords")
            .field("entries", &self.lock().order.len())
            .finish_non_exhaustive()
    }
}

impl Default for VerifiedPasswords {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::{CAPACITY, VerifiedPasswords};

    #[test]
    fn matches_only_the_same_password_against_the_same_hash() {
        let verified = VerifiedPasswords::new();
        assert!(!verified.contains("secret", "$argon2id$one"));
        verified.insert("secret", "$argon2id$one");
        assert!(verified.contains("secret", "$argon2id$one"));
        assert!(!verified.contains("Secret", "$argon2id$one"));
        assert!(!verified.contains("secret", "$argon2id$two"));
        // The length prefix keeps the boundary: "ab" + "c" is not "a" + "bc".
        verified.insert("c", "ab");
        assert!(!verified.contains("bc", "a"));
    }

    #[test]
    fn keeps_at_most_capacity_entries_dropping_the_oldest() {
        let verified = VerifiedPasswords::new();
        for index in 0..=CAPACITY {
            verified.insert(&index.to_string(), "hash");
        }
        assert!(!verified.contains("0", "hash"));
        assert!(verified.contains("1", "hash"));
        assert!(verified.contains(&CAPACITY.to_string(), "hash"));
        let entries = verified.lock();
        assert_eq!(entries.order.len(), CAPACITY);
        assert_eq!(entries.present.len(), CAPACITY);
    }

    #[test]
    fn debug_shows_neither_key_nor_digests() {
        let verified = VerifiedPasswords::new();
        verified.insert("secret", "hash");
        assert_eq!(
            format!("{verified:?}"),
            "VerifiedPasswords { entries: 1, .. }"
        );
    }

    #[test]
    fn two_processes_digest_differently() {
        let (one, two) = (VerifiedPasswords::new(), VerifiedPasswords::new());
        assert_ne!(one.digest("secret", "hash"), two.digest("secret", "hash"));
    }
}

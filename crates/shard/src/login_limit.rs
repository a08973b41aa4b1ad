//! Failed-login rate limiting, per client address and per user name from that address, with
//! exponential backoff (sans-IO: time comes in as an argument).
//!
//! The user key is the (address, user name) pair, not the name alone: a name-wide block would
//! let anyone lock a user (root included) out from everywhere with one wrong password per
//! backoff. Once a key has failed, each further attempt counts as failed before its password
//! is checked (a success clears it), so after a first failure a burst of parallel guesses
//! cannot slip past the check while the first ones are still being hashed; parallel logins
//! from an address with no failure (a pool of clients behind one address) are not held up.
//!
//! The first `failures_free` failures of a key cost nothing; each further one blocks the key
//! for `backoff × 2^(extra failures − 1)`, capped at `backoff_max`. A blocked login is refused
//! like a wrong password, before any hashing, so a guessing client costs the server nothing
//! while it is blocked. A success clears both keys; a key with no failure for `backoff_max`
//! (and past its block) starts over. The table holds at most [`KEYS_MAX`] keys.

use std::collections::HashMap;
use std::net::IpAddr;

/// Keys the limiter remembers at most; beyond it the stalest are forgotten.
pub const KEYS_MAX: usize = 65_536;

/// The limiter's settings (`[login]` in the server config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginLimits {
    /// Failures of one key allowed before backoff starts; 0 turns limiting off.
    pub failures_free: u32,
    pub backoff_us: u64,
    pub backoff_max_us: u64,
}

impl Default for LoginLimits {
    fn default() -> Self {
        Self {
            failures_free: 5,
            backoff_us: 1_000_000,
            backoff_max_us: 60_000_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Address(IpAddr),
    User(IpAddr, String),
}

#[derive(Debug, Clone, Copy, Default)]
struct Failures {
    count: u32,
    blocked_until_us: u64,
    last_us: u64,
}

/// The failure counts of recent logins.
#[derive(Debug, Default)]
pub struct LoginLimiter {
    limits: LoginLimits,
    keys: HashMap<Key, Failures>,
}

impl LoginLimiter {
    pub fn new(limits: LoginLimits) -> Self {
        Self {
            limits,
            keys: HashMap::new(),
        }
    }

    /// `Err(until_us)` while the address or the user name is blocked at `now_us`.
    pub fn check(&self, address: IpAddr, username: &str, now_us: u64) -> Result<(), u64> {
        if self.limits.failures_free == 0 {
            return Ok(());
        }
        let blocked = [
            Key::Address(address),
            Key::User(address, username.to_owned()),
        ]
        .iter()
        .filter_map(|key| self.keys.get(key))
        .map(|failures| failures.blocked_until_us)
        .max()
        .unwrap_or(0);
        if blocked > now_us {
            Err(blocked)
        } else {
            Ok(())
        }
    }

    /// A login from `address` as `username` failed at `now_us`.
    pub fn failed(&mut self, address: IpAddr, username: &str, now_us: u64) {
        if self.limits.failures_free == 0 {
            return;
        }
        if self.keys.len() >= KEYS_MAX {
            self.forget_stale(now_us);
        }
        let limits = self.limits;
        for key in [
            Key::Address(address),
            Key::User(address, username.to_owned()),
        ] {
            let failures = self.keys.entry(key).or_default();
            // Quiet for `backoff_max` since its last failure and past its block: start over.
            let quiet_since = failures.last_us.max(failures.blocked_until_us);
            if failures.count > 0 && now_us.saturating_sub(quiet_since) > limits.backoff_max_us {
                *failures = Failures::default();
            }
            failures.count = failures.count.saturating_add(1);
            failures.last_us = now_us;
            if let Some(extra) = failures.count.checked_sub(limits.failures_free)
                && extra > 0
            {
                let doublings = (extra - 1).min(32);
                let backoff = limits
                    .backoff_us
                    .saturating_mul(1_u64 << doublings)
                    .min(limits.backoff_max_us);
                failures.blocked_until_us = now_us.saturating_add(backoff);
            }
        }
    }

    /// Whether the address, or the user name from it, has failures on record.
    pub fn has_failures(&self, address: IpAddr, username: &str) -> bool {
        [
            Key::Address(address),
            Key::User(address, username.to_owned()),
        ]
        .iter()
        .any(|key| {
            self.keys
                .get(key)
                .is_some_and(|failures| failures.count > 0)
        })
    }

    /// A login from `address` as `username` succeeded: both keys start afresh.
    pub fn succeeded(&mut self, address: IpAddr, username: &str) {
        self.keys.remove(&Key::Address(address));
        self.keys.remove(&Key::User(address, username.to_owned()));
    }

    /// Drops keys no longer blocked and quiet for `backoff_max`; if that frees too little,
    /// the half least recently failed.
    fn forget_stale(&mut self, now_us: u64) {
        let quiet_max = self.limits.backoff_max_us;
        self.keys.retain(|_, failures| {
            failures.blocked_until_us > now_us
                || now_us.saturating_sub(failures.last_us) <= quiet_max
        });
        if self.keys.len() >= KEYS_MAX {
            let mut ages: Vec<u64> = self
                .keys
                .values()
                .map(|failures| failures.last_us)
                .collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            self.keys.retain(|_, failures| failures.last_us > cut);
        }
        assert!(self.keys.len() < KEYS_MAX, "forgetting frees room");
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::{KEYS_MAX, LoginLimiter, LoginLimits};

    const LIMITS: LoginLimits = LoginLimits {
        failures_free: 3,
        backoff_us: 1_000,
        backoff_max_us: 8_000,
    };

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn free_failures_then_doubling_backoff_capped() {
        let mut limiter = LoginLimiter::new(LIMITS);
        assert!(!limiter.has_failures(ip(1), "alice"));
        for now in 0..3 {
            assert_eq!(limiter.check(ip(1), "alice", now), Ok(()));
            limiter.failed(ip(1), "alice", now);
        }
        assert_eq!(limiter.check(ip(1), "alice", 3), Ok(()));
        assert!(limiter.has_failures(ip(1), "alice") && limiter.has_failures(ip(1), "bob"));
        assert!(!limiter.has_failures(ip(2), "alice"));
        limiter.failed(ip(1), "alice", 10);
        assert_eq!(limiter.check(ip(1), "alice", 11), Err(1_010));
        // The address is blocked for every name; another address may still log in as alice
        // (a name-wide block would let anyone lock a user out).
        assert_eq!(limiter.check(ip(1), "bob", 11), Err(1_010));
        assert_eq!(limiter.check(ip(2), "alice", 11), Ok(()));
        limiter.failed(ip(1), "alice", 1_010);
        assert_eq!(limiter.check(ip(1), "alice", 1_011), Err(3_010));
        for now in [3_010, 5_010, 7_010, 9_010] {
            limiter.failed(ip(1), "alice", now);
        }
        assert_eq!(limiter.check(ip(1), "alice", 9_011), Err(17_010));
    }

    #[test]
    fn counts_hold_at_wall_clock_times() {
        let mut limiter = LoginLimiter::new(LIMITS);
        let epoch = 1_790_000_000_000_000_u64;
        for step in 0..4 {
            limiter.failed(ip(1), "dave", epoch + step);
        }
        assert_eq!(
            limiter.check(ip(1), "dave", epoch + 4),
            Err(epoch + 3 + 1_000)
        );
    }

    #[test]
    fn success_clears_and_quiet_keys_are_forgotten() {
        let mut limiter = LoginLimiter::new(LIMITS);
        for now in 0..5 {
            limiter.failed(ip(1), "alice", now);
        }
        assert!(limiter.check(ip(1), "alice", 5).is_err());
        limiter.succeeded(ip(1), "alice");
        assert_eq!(limiter.check(ip(1), "alice", 5), Ok(()));
        for now in 0..5 {
            limiter.failed(ip(3), "carol", now);
        }
        // Long after the block ended, a failure counts as the first again.
        limiter.failed(ip(3), "carol", 100_000);
        assert_eq!(limiter.check(ip(3), "carol", 100_001), Ok(()));
    }

    #[test]
    fn off_when_no_failure_is_free_and_the_table_stays_bounded() {
        let mut off = LoginLimiter::new(LoginLimits {
            failures_free: 0,
            ..LIMITS
        });
        for now in 0..100 {
            off.failed(ip(1), "alice", now);
        }
        assert_eq!(off.check(ip(1), "alice", 100), Ok(()));
        let mut limiter = LoginLimiter::new(LIMITS);
        for index in 0..(KEYS_MAX as u64) {
            limiter.failed(ip(1), &format!("user{index}"), index);
        }
        assert!(limiter.len() < KEYS_MAX + 2);
    }
}

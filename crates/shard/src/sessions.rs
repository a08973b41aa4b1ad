//! The session table: which logical client (VSR client id) holds which session number, for
//! which user, proven by which bind secret (PROTOCOL.md §1.7, §2.3, §2.5).
//!
//! Session numbers come from one counter that only grows and stays below 2^43 (they are the
//! high part of idempotent-producer ids). A retried Register of the same client id with the
//! same bind secret and user gets the session it already has.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use proto::commands::session::BindSecret;

/// Live sessions by VSR client id: the sequencer writes, every shard reads (`is_live`, bind).
pub type SessionView = papaya::HashMap<u128, SessionEntry>;

/// One live session as every shard sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionEntry {
    pub session: u64,
    pub user_id: u32,
    /// The digest of the personal access token the session logged in with, if any.
    pub token: Option<TokenDigest>,
}

/// The user of each live session, by session number: shared by all shards.
pub type SessionOwners = papaya::HashMap<u64, u32>;

/// Session numbers are below this: `producer_id = session << 20 | index` must fit in u64
/// with room to spare, and the SDK checks the bound.
pub const SESSION_LIMIT: u64 = 1 << 43;

/// How long a session outlives its last connection, so a client that lost its link can
/// `BIND_SESSION` back; after it, the session ends as if the client had logged out (the SDK's
/// `shutdown()` closes without a logout, and every new client id registers a new session).
pub const DETACHED_GRACE_US: u64 = 60_000_000;

/// One live session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRecord {
    pub session: u64,
    pub user_id: u32,
    pub bind_secret: BindSecret,
    /// The SHA-256 of the personal access token the session logged in with: the session
    /// lasts only while that token exists and has not expired.
    pub token: Option<TokenDigest>,
}

/// The SHA-256 digest of a clear personal access token.
pub type TokenDigest = [u8; 32];

/// Why a Register cannot be given a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The client id already holds a session under another secret or user.
    #[error("client id already registered with another bind secret or user")]
    Conflict,
    /// Every session number below 2^43 has been handed out.
    #[error("session numbers exhausted")]
    Exhausted,
    /// [`SESSIONS_MAX`] sessions are live, or [`SESSIONS_PER_USER_MAX`] of this user's; one
    /// must end (logout, expiry) first.
    #[error("too many live sessions")]
    Full,
}

/// Live sessions of one user at most: no user can take the whole table (a token makes logins
/// cheap), so the others can still log in.
pub const SESSIONS_PER_USER_MAX: usize = 10_000;

/// Live sessions at most. Each holds a little memory and, through its client id, consumer
/// group memberships; a detached one ends after [`DETACHED_GRACE_US`].
pub const SESSIONS_MAX: usize = 100_000;

/// Every live session, by client id. Only the leader shard changes its table; every change
/// is published to the shared [`SessionView`], which [`Sessions::is_live`] reads, so a shard
/// without the table still knows which sessions are live.
#[derive(Debug)]
pub struct Sessions {
    /// The number the next new session gets.
    next: u64,
    by_client: HashMap<u128, SessionRecord>,
    view: Arc<SessionView>,
    /// Live sessions' users by session number, for every shard.
    owners: Arc<SessionOwners>,
    /// Live sessions per user.
    per_user: HashMap<u32, usize>,
    /// Since when (µs) each session has had no connection bound to it.
    detached_since: HashMap<u128, u64>,
}

impl Sessions {
    /// A table whose first session is `first` (at least 1). Seeding it from the start-up
    /// time in milliseconds keeps numbers unique across restarts while no journal records
    /// them.
    pub fn new(first: u64) -> Self {
        Self::publishing(first, Arc::default())
    }

    /// A table publishing its sessions to `view`, shared with the other shards.
    pub fn publishing(first: u64, view: Arc<SessionView>) -> Self {
        Self {
            next: first.clamp(1, SESSION_LIMIT - 1),
            by_client: HashMap::new(),
            view,
            owners: Arc::default(),
            per_user: HashMap::new(),
            detached_since: HashMap::new(),
        }
    }

    /// The same table, also publishing each live session's user by session number to
    /// `owners` (idempotent-producer ids carry the session number that minted them).
    pub fn with_owners(mut self, owners: Arc<SessionOwners>) -> Self {
        self.owners = owners;
        self
    }

    /// The session for a Register of `client_id` as `user_id`: the existing one for a retry,
    /// else a new one.
    pub fn register(
        &mut self,
        client_id: u128,
        user_id: u32,
        bind_secret: BindSecret,
        token: Option<TokenDigest>,
    ) -> Result<SessionRecord, RegisterError> {
        self.register_numbered(client_id, None, user_id, bind_secret, token)
    }

    /// As [`Self::register`], a new session numbered `number` instead of the next number
    /// (cluster mode: the replicated op's number, the same on every node).
    pub fn register_numbered(
        &mut self,
        client_id: u128,
        number: Option<u64>,
        user_id: u32,
        bind_secret: BindSecret,
        token: Option<TokenDigest>,
    ) -> Result<SessionRecord, RegisterError> {
        if let Some(record) = self.by_client.get(&client_id) {
            let same = record.bind_secret == bind_secret
                && record.user_id == user_id
                && record.token == token;
            return if same {
                Ok(*record)
            } else {
                Err(RegisterError::Conflict)
            };
        }
        let session = number.unwrap_or(self.next);
        if session >= SESSION_LIMIT || session == 0 {
            return Err(RegisterError::Exhausted);
        }
        if self.by_client.len() >= SESSIONS_MAX {
            return Err(RegisterError::Full);
        }
        let of_user = self.per_user.get(&user_id).copied().unwrap_or(0);
        if of_user >= SESSIONS_PER_USER_MAX {
            return Err(RegisterError::Full);
        }
        self.per_user.insert(user_id, of_user + 1);
        let record = SessionRecord {
            session,
            user_id,
            bind_secret,
            token,
        };
        if number.is_none() {
            self.next += 1;
        }
        self.by_client.insert(client_id, record);
        let entry = SessionEntry {
            session: record.session,
            user_id,
            token,
        };
        self.view.pin().insert(client_id, entry);
        self.owners.pin().insert(record.session, user_id);
        Ok(record)
    }

    /// The session `client_id` may re-attach to with `bind_secret`; `session` 0 asks for
    /// whichever it holds.
    pub fn bind(
        &self,
        client_id: u128,
        session: u64,
        bind_secret: &BindSecret,
    ) -> Option<SessionRecord> {
        let record = self.by_client.get(&client_id)?;
        let matches =
            record.bind_secret == *bind_secret && (session == 0 || session == record.session);
        matches.then_some(*record)
    }

    /// Ends the session of `client_id` (logout); a no-op if it holds none.
    pub fn end(&mut self, client_id: u128) -> Option<SessionRecord> {
        self.detached_since.remove(&client_id);
        self.view.pin().remove(&client_id);
        let ended = self.by_client.remove(&client_id);
        if let Some(record) = &ended {
            self.owners.pin().remove(&record.session);
            if let Some(count) = self.per_user.get_mut(&record.user_id) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.per_user.remove(&record.user_id);
                }
            }
        }
        ended
    }

    /// Ends every session `ended` picks (its user was deleted or deactivated, its token
    /// revoked); returns their client ids.
    pub fn end_where(&mut self, ended: impl Fn(u128, &SessionRecord) -> bool) -> Vec<u128> {
        let picked: Vec<u128> = self
            .by_client
            .iter()
            .filter(|(client_id, record)| ended(**client_id, record))
            .map(|(client_id, _)| *client_id)
            .collect();
        for client_id in &picked {
            self.end(*client_id);
        }
        picked
    }

    /// Whether `client_id` still holds `session`: a connection bound to a session that was
    /// ended elsewhere (a logout on another link, expiry) must not act on it.
    pub fn is_live(&self, client_id: u128, session: u64) -> bool {
        self.live(client_id, session).is_some()
    }

    /// The live session `session` of `client_id`, as every shard sees it.
    pub fn live(&self, client_id: u128, session: u64) -> Option<SessionEntry> {
        self.view
            .pin()
            .get(&client_id)
            .filter(|entry| entry.session == session)
            .copied()
    }

    /// Ends the sessions no connection in `attached` has been bound to for longer than
    /// [`DETACHED_GRACE_US`] at `now_us`; returns their client ids.
    pub fn expire(&mut self, now_us: u64, attached: &HashSet<u128>) -> Vec<u128> {
        let mut expired = Vec::new();
        for client_id in self.by_client.keys() {
            if attached.contains(client_id) {
                self.detached_since.remove(client_id);
                continue;
            }
            let since = *self.detached_since.entry(*client_id).or_insert(now_us);
            if now_us.saturating_sub(since) > DETACHED_GRACE_US {
                expired.push(*client_id);
            }
        }
        for client_id in &expired {
            self.end(*client_id);
        }
        expired
    }

    pub fn len(&self) -> usize {
        self.by_client.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proto::commands::session::BindSecret;

    use super::{DETACHED_GRACE_US, RegisterError, SESSION_LIMIT, Sessions};

    #[test]
    fn retry_keeps_session_and_new_client_gets_next() {
        let mut sessions = Sessions::new(5);
        let secret = BindSecret([7; 32]);
        let first = sessions.register(1, 0, secret, None).unwrap();
        assert_eq!(first.session, 5);
        assert_eq!(sessions.register(1, 0, secret, None).unwrap(), first);
        assert_eq!(sessions.register(2, 0, secret, None).unwrap().session, 6);
        assert_eq!(
            sessions.register(1, 0, BindSecret([8; 32]), None),
            Err(RegisterError::Conflict)
        );
        assert_eq!(
            sessions.register(1, 3, secret, None),
            Err(RegisterError::Conflict)
        );
    }

    #[test]
    fn bind_needs_secret_and_matching_session() {
        let mut sessions = Sessions::new(1);
        let secret = BindSecret([1; 32]);
        let record = sessions.register(9, 4, secret, None).unwrap();
        assert_eq!(sessions.bind(9, 0, &secret), Some(record));
        assert_eq!(sessions.bind(9, record.session, &secret), Some(record));
        assert_eq!(sessions.bind(9, record.session + 1, &secret), None);
        assert_eq!(sessions.bind(9, 0, &BindSecret([2; 32])), None);
        assert_eq!(sessions.end(9), Some(record));
        assert_eq!(sessions.bind(9, 0, &secret), None);
    }

    #[test]
    fn detached_sessions_expire_after_the_grace_and_attached_ones_never() {
        let mut sessions = Sessions::new(1);
        let secret = BindSecret([3; 32]);
        let kept = sessions.register(1, 0, secret, None).unwrap();
        let dropped = sessions.register(2, 0, secret, None).unwrap();
        let attached: HashSet<u128> = [1].into_iter().collect();
        assert!(sessions.expire(0, &attached).is_empty());
        assert!(sessions.expire(DETACHED_GRACE_US, &attached).is_empty());
        assert_eq!(sessions.expire(DETACHED_GRACE_US + 1, &attached), vec![2]);
        assert!(sessions.is_live(1, kept.session));
        assert!(!sessions.is_live(2, dropped.session));
        assert!(
            sessions
                .expire(10 * DETACHED_GRACE_US, &attached)
                .is_empty()
        );
        assert!(!sessions.is_live(1, kept.session + 1));
    }

    #[test]
    fn numbers_stay_below_the_limit() {
        let mut sessions = Sessions::new(u64::MAX);
        let secret = BindSecret::default();
        assert_eq!(
            sessions.register(1, 0, secret, None).unwrap().session,
            SESSION_LIMIT - 1
        );
        assert_eq!(
            sessions.register(2, 0, secret, None),
            Err(RegisterError::Exhausted)
        );
    }

    #[test]
    fn one_user_cannot_take_every_session() {
        let mut sessions = Sessions::new(1);
        let secret = BindSecret([4; 32]);
        for client in 0..super::SESSIONS_PER_USER_MAX {
            sessions
                .register(client as u128 + 1, 7, secret, None)
                .unwrap();
        }
        let over = sessions.register(u128::MAX, 7, secret, None);
        assert_eq!(over, Err(RegisterError::Full));
        assert!(
            sessions.register(u128::MAX, 8, secret, None).is_ok(),
            "others still can"
        );
        sessions.end(1);
        assert!(
            sessions.register(u128::MAX - 1, 7, secret, None).is_ok(),
            "after one ends"
        );
    }
}

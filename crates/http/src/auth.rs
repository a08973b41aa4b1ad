//! Credentials of the API: access tokens (JWT) this server issued, and personal access
//! tokens presented as bearer credentials, each mapped to the binary session behind it.
//!
//! A JWT is accepted when its signature, times, issuer and audience verify *and* its id
//! (`jti`) still names a live session here: logout, refresh (which retires the old token),
//! the end of the session in the core (a deleted or deactivated user) and a restart of the
//! server all revoke it. A personal access token is checked by the core at its first use
//! (`LOGIN_REGISTER_WITH_PAT`) and its session kept for the next requests until the core ends
//! it (the token deleted or expired), or until it has gone unused for a token's lifetime (the
//! next request with it simply logs in again).
//!
//! Sessions held here are bounded twice, so that no one user can lock the others out: in all
//! (`[http] max_sessions`) and per user (`[http] max_sessions_per_user`: a login past it
//! retires that user's oldest token). A sweep at most once a second drops the sessions of
//! expired tokens, the ones the core ended and idle bearers; a login that still finds the
//! store full evicts the least recently used bearer session (re-made at its next use), and is
//! refused (503) only when every session left stands for a live token.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;

use proto::status::ErrorCode;
use ring::digest;
use transport::ConnectionHandler;

use crate::error::ApiError;
use crate::jwt::{Jwt, JwtError};
use crate::session::{Bound, Login};

/// A token this server issued and the session it stands for.
struct Issued<H: ConnectionHandler> {
    bound: Rc<Bound<H>>,
    expiry_s: u64,
}

/// The session of a personal access token used as a bearer.
struct Bearer<H: ConnectionHandler> {
    bound: Rc<Bound<H>>,
    last_used_s: Cell<u64>,
}

/// How many sessions the store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Tokens and bearer sessions in all.
    pub total: usize,
    /// Tokens of one user; a login past it retires the user's oldest token.
    pub per_user: usize,
}

/// A token handed to a client: the JWT and its expiry in unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessToken {
    pub token: String,
    pub expiry_s: u64,
}

/// The credential store of one HTTP listener.
pub struct Credentials<H: ConnectionHandler> {
    jwt: Jwt,
    issued: RefCell<HashMap<String, Issued<H>>>,
    /// Sessions of personal access tokens used as bearers, by SHA-256 of the token.
    bearers: RefCell<HashMap<[u8; 32], Bearer<H>>>,
    limits: SessionLimits,
    /// When the last sweep ran (unix seconds).
    swept_s: Cell<u64>,
}

impl<H: ConnectionHandler> std::fmt::Debug for Credentials<H> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Credentials")
            .field("issued", &self.issued.borrow().len())
            .field("bearers", &self.bearers.borrow().len())
            .finish_non_exhaustive()
    }
}

impl<H: ConnectionHandler> Credentials<H> {
    pub fn new(jwt: Jwt, limits: SessionLimits) -> Self {
        Self {
            jwt,
            issued: RefCell::default(),
            bearers: RefCell::default(),
            limits,
            swept_s: Cell::new(0),
        }
    }

    /// Logs in with `login` and issues a token for the new session.
    pub async fn login(
        &self,
        handler: &Rc<H>,
        peer: SocketAddr,
        login: Login<'_>,
        now_s: u64,
    ) -> Result<(u32, AccessToken), ApiError> {
        self.make_room(now_s)?;
        let bound = Rc::new(Bound::login(handler, peer, login).await?);
        let user_id = bound.user_id;
        self.retire_oldest_of(user_id);
        Ok((user_id, self.issue(bound, now_s)?))
    }

    /// A new token for the session of `token`, which is retired.
    pub fn refresh(&self, token: &str, now_s: u64) -> Result<(u32, AccessToken), ApiError> {
        let (jti, bound) = self.verified(token, now_s)?;
        self.issued.borrow_mut().remove(&jti);
        let user_id = bound.user_id;
        Ok((user_id, self.issue(bound, now_s)?))
    }

    /// The session a request's `Authorization` header stands for.
    pub async fn session(
        &self,
        handler: &Rc<H>,
        peer: SocketAddr,
        authorization: Option<&str>,
        now_s: u64,
    ) -> Result<Rc<Bound<H>>, ApiError> {
        let credential = bearer(authorization)?;
        if now_s != self.swept_s.get() {
            self.sweep(now_s);
        }
        if credential.split('.').count() == 3 {
            return self.verified(credential, now_s).map(|(_, bound)| bound);
        }
        let key = token_key(credential);
        let known = self.bearers.borrow().get(&key).map(|held| {
            held.last_used_s.set(now_s);
            Rc::clone(&held.bound)
        });
        if let Some(bound) = known {
            if !bound.has_ended() {
                return Ok(bound);
            }
            self.bearers.borrow_mut().remove(&key);
        }
        self.make_room(now_s)?;
        let bound = Bound::login(handler, peer, Login::Token(credential))
            .await
            .map_err(|error| match error {
                // Refusals of the credential itself; others (a full session table) pass.
                ApiError::Code(code) if credential_refusal(code) => {
                    ApiError::Unauthenticated("invalid personal access token")
                }
                other => other,
            })?;
        let bound = Rc::new(bound);
        let held = Bearer {
            bound: Rc::clone(&bound),
            last_used_s: Cell::new(now_s),
        };
        self.bearers.borrow_mut().insert(key, held);
        Ok(bound)
    }

    /// Whether `authorization` names a credential this store holds (a live token or a
    /// bearer seen before), without logging anything in: what a large body needs.
    pub fn known(&self, authorization: Option<&str>, now_s: u64) -> bool {
        let Ok(credential) = bearer(authorization) else {
            return false;
        };
        match self.jwt.verify(credential, now_s) {
            Ok(claims) => self.issued.borrow().contains_key(&claims.jti),
            Err(_) => self.bearers.borrow().contains_key(&token_key(credential)),
        }
    }

    /// Forgets the credential of a logout: the token, or the bearer's session.
    pub fn revoke(&self, authorization: Option<&str>, now_s: u64) {
        let Ok(credential) = bearer(authorization) else {
            return;
        };
        if let Ok(claims) = self.jwt.verify(credential, now_s) {
            self.issued.borrow_mut().remove(&claims.jti);
        } else {
            self.bearers.borrow_mut().remove(&token_key(credential));
        }
    }

    fn verified(&self, token: &str, now_s: u64) -> Result<(String, Rc<Bound<H>>), ApiError> {
        let claims = self.jwt.verify(token, now_s).map_err(|error| {
            ApiError::Unauthenticated(match error {
                JwtError::Expired => "the access token has expired",
                _ => "invalid access token",
            })
        })?;
        let live = self
            .issued
            .borrow()
            .get(&claims.jti)
            .map(|issued| Rc::clone(&issued.bound));
        match live {
            Some(bound) if !bound.has_ended() && Some(bound.user_id) == claims.user_id() => {
                Ok((claims.jti, bound))
            }
            Some(_) => {
                self.issued.borrow_mut().remove(&claims.jti);
                Err(ApiError::Unauthenticated("the session has ended"))
            }
            None => Err(ApiError::Unauthenticated("the access token was revoked")),
        }
    }

    fn issue(&self, bound: Rc<Bound<H>>, now_s: u64) -> Result<AccessToken, ApiError> {
        let jti = random_jti()?;
        let (token, claims) = self.jwt.issue(bound.user_id, jti.clone(), now_s);
        let expiry_s = claims.exp;
        self.issued
            .borrow_mut()
            .insert(jti, Issued { bound, expiry_s });
        Ok(AccessToken { token, expiry_s })
    }

    /// Drops the sessions of expired tokens, the ones the core ended and bearers unused for a
    /// token's lifetime.
    fn sweep(&self, now_s: u64) {
        self.swept_s.set(now_s);
        self.issued
            .borrow_mut()
            .retain(|_, issued| issued.expiry_s > now_s && !issued.bound.has_ended());
        let idle_s = self.jwt.lifetime_s();
        self.bearers.borrow_mut().retain(|_, held| {
            !held.bound.has_ended() && now_s.saturating_sub(held.last_used_s.get()) < idle_s
        });
    }

    /// Makes room for one more session (at every login: a login costs a password hash, far
    /// more than this walk): sweeps, then evicts the least recently used bearer session if
    /// the store is still full; refuses (transiently) when only live tokens are left.
    fn make_room(&self, now_s: u64) -> Result<(), ApiError> {
        self.sweep(now_s);
        if self.len() >= self.limits.total {
            let mut bearers = self.bearers.borrow_mut();
            let coldest = bearers
                .iter()
                .min_by_key(|(_, held)| held.last_used_s.get())
                .map(|(key, _)| *key);
            if let Some(key) = coldest {
                bearers.remove(&key);
            }
        }
        if self.len() < self.limits.total {
            return Ok(());
        }
        log::warn!("http: {} sessions held; login refused", self.len());
        Err(ApiError::Code(ErrorCode::TransientNotAccepted.as_u32()))
    }

    /// Retires the oldest tokens of `user_id` until one more fits under the per-user limit.
    fn retire_oldest_of(&self, user_id: u32) {
        let mut issued = self.issued.borrow_mut();
        let mut held: Vec<(u64, String)> = issued
            .iter()
            .filter(|(_, each)| each.bound.user_id == user_id)
            .map(|(jti, each)| (each.expiry_s, jti.clone()))
            .collect();
        let excess = (held.len() + 1).saturating_sub(self.limits.per_user.max(1));
        if excess == 0 {
            return;
        }
        held.sort_unstable();
        for (_, jti) in held.into_iter().take(excess) {
            issued.remove(&jti);
        }
        log::info!("http: user {user_id} at its session limit; {excess} oldest token(s) retired");
    }

    fn len(&self) -> usize {
        self.issued.borrow().len() + self.bearers.borrow().len()
    }
}

/// Whether `code` refuses the credential presented (as opposed to the server's state).
fn credential_refusal(code: u32) -> bool {
    [
        ErrorCode::Unauthenticated,
        ErrorCode::InvalidCredentials,
        ErrorCode::InvalidPersonalAccessToken,
        ErrorCode::UserInactive,
        ErrorCode::InvalidFormat,
    ]
    .iter()
    .any(|refused| refused.as_u32() == code)
}

/// The credential of a `Bearer` authorization.
pub(crate) fn bearer(authorization: Option<&str>) -> Result<&str, ApiError> {
    let value = authorization.ok_or(ApiError::Code(ErrorCode::AccessTokenMissing.as_u32()))?;
    let (scheme, credential) = value.split_once(' ').unwrap_or((value, ""));
    let credential = credential.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || credential.is_empty() {
        return Err(ApiError::Code(ErrorCode::InvalidAccessToken.as_u32()));
    }
    Ok(credential)
}

fn token_key(token: &str) -> [u8; 32] {
    let digest = digest::digest(&digest::SHA256, token.as_bytes());
    let mut key = [0_u8; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

fn random_jti() -> Result<String, ApiError> {
    let mut bytes = [0_u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| ApiError::Internal(error.to_string()))?;
    Ok(crate::values::hex(&bytes))
}

#[cfg(test)]
#[path = "auth_tests.rs"]
pub(crate) mod tests;

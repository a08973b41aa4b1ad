//! Credentials of the API: access tokens (JWT) this server issued, and personal access
//! tokens presented as bearer credentials, each mapped to the binary session behind it.
//!
//! A JWT is accepted when its signature, times, issuer and audience verify *and* its id
//! (`jti`) still names a live session here: logout, refresh (which retires the old token),
//! the end of the session in the core (a deleted or deactivated user) and a restart of the
//! server all revoke it. A personal access token is checked by the core at its first use
//! (`LOGIN_REGISTER_WITH_PAT`) and its session kept for the next requests until the core ends
//! it (the token deleted or expired). Sessions held here are bounded (`[http] max_sessions`);
//! those of expired tokens are dropped at each login.

use std::cell::RefCell;
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
    bearers: RefCell<HashMap<[u8; 32], Rc<Bound<H>>>>,
    sessions_max: usize,
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
    pub fn new(jwt: Jwt, sessions_max: usize) -> Self {
        Self {
            jwt,
            issued: RefCell::default(),
            bearers: RefCell::default(),
            sessions_max,
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
        if credential.split('.').count() == 3 {
            return self.verified(credential, now_s).map(|(_, bound)| bound);
        }
        let key = token_key(credential);
        let known = self.bearers.borrow().get(&key).cloned();
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
        self.bearers.borrow_mut().insert(key, Rc::clone(&bound));
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

    /// Drops the sessions of expired tokens and the sessions the core ended (at every login:
    /// a login costs a password hash, far more than this walk), then refuses (transiently)
    /// if the store is still full.
    fn make_room(&self, now_s: u64) -> Result<(), ApiError> {
        self.issued
            .borrow_mut()
            .retain(|_, issued| issued.expiry_s > now_s && !issued.bound.has_ended());
        self.bearers
            .borrow_mut()
            .retain(|_, bound| !bound.has_ended());
        if self.len() < self.sessions_max {
            return Ok(());
        }
        log::warn!("http: {} sessions held; login refused", self.len());
        Err(ApiError::Code(ErrorCode::TransientNotAccepted.as_u32()))
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
fn bearer(authorization: Option<&str>) -> Result<&str, ApiError> {
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

//! Personal access token requests: `CREATE_PERSONAL_ACCESS_TOKEN` (42) and
//! `DELETE_PERSONAL_ACCESS_TOKEN` (43), always on the calling user's own tokens.

use proto::commands::tokens::{CreatePersonalAccessToken, DeletePersonalAccessToken};

use crate::metadata::{MetadataOp, User};
use crate::refusal::{Invalid, Limit, Missing, Refusal, Taken};

/// Tokens one user may hold (`max_tokens_per_user`, reference default).
pub const TOKENS_PER_USER_MAX: usize = 100;
/// Token name length bounds in bytes (`50 InvalidPersonalAccessTokenName`).
pub const TOKEN_NAME_LENGTH: core::ops::RangeInclusive<usize> = 3..=30;

/// `CREATE_PERSONAL_ACCESS_TOKEN` for `actor`: `50`, `51` name taken, `52` limit, `56`
/// expiry. `token_hash` is the stored hash of a freshly minted token.
pub fn create_token(
    actor: &User,
    request: &CreatePersonalAccessToken,
    now_micros: u64,
    token_hash: String,
) -> Result<MetadataOp, Refusal> {
    let name = request.name.as_str();
    if !TOKEN_NAME_LENGTH.contains(&name.len()) {
        return Err(Refusal::Invalid(Invalid::TokenName));
    }
    if actor.tokens.contains_key(name) {
        return Err(Refusal::Taken(Taken::TokenName));
    }
    if actor.tokens.len() >= TOKENS_PER_USER_MAX {
        return Err(Refusal::Limit(Limit::Tokens));
    }
    Ok(MetadataOp::CreatePersonalAccessToken {
        user_id: actor.id,
        name: String::from(name),
        token_hash,
        expiry_at: token_expiry_at(request.expiry, now_micros)?,
    })
}

/// The absolute expiry of a token created at `now_micros` with the request's relative
/// `expiry`: 0 (server default) and `u64::MAX` mean never (`None`); a time that does not
/// fit is refused with `56`.
pub fn token_expiry_at(expiry: u64, now_micros: u64) -> Result<Option<u64>, Refusal> {
    match expiry {
        CreatePersonalAccessToken::EXPIRY_SERVER_DEFAULT
        | CreatePersonalAccessToken::EXPIRY_NEVER => Ok(None),
        relative => now_micros
            .checked_add(relative)
            .map(Some)
            .ok_or(Refusal::Invalid(Invalid::TokenExpiry)),
    }
}

/// `DELETE_PERSONAL_ACCESS_TOKEN` for `actor`: `20` unknown name.
pub fn delete_token(
    actor: &User,
    request: &DeletePersonalAccessToken,
) -> Result<MetadataOp, Refusal> {
    let name = request.name.as_str();
    if !actor.tokens.contains_key(name) {
        return Err(Refusal::Missing(Missing::Resource));
    }
    Ok(MetadataOp::DeletePersonalAccessToken {
        user_id: actor.id,
        name: String::from(name),
    })
}

//! The personal access token family (PROTOCOL.md §4.3): `GET_PERSONAL_ACCESS_TOKENS` (41),
//! `CREATE_PERSONAL_ACCESS_TOKEN` (42) and `DELETE_PERSONAL_ACCESS_TOKEN` (43), always on
//! the calling user's own tokens. A token is minted before validation (validation takes
//! its hash); the clear text is answered once and never stored.

use proto::commands::Request;
use proto::commands::session::Secret;
use proto::commands::tokens::{CreatePersonalAccessToken, RawPersonalAccessToken};
use proto::header::RequestHeader;

use super::commit::Call;
use crate::connection::Connection;
use crate::metadata::auth::mint_token;
use crate::metadata::{Metadata, MetadataOp, User, responses, validate};
use crate::outcome::Outcome;
use crate::refusal::Refusal;
use crate::server::Server;

pub(crate) async fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let call = Call::of(header, connection);
    match request {
        Request::GetPersonalAccessTokens(_) => {
            let listed = call.actor(&server.metadata.borrow()).map(responses::tokens);
            match listed {
                Ok(tokens) => call.answer(server, tokens),
                Err(refusal) => call.reject(server, refusal),
            }
        }
        Request::CreatePersonalAccessToken(create) => create_token(server, call, &create).await,
        Request::DeletePersonalAccessToken(delete) => {
            call.commit_checked(server, |_metadata, actor| {
                validate::delete_token(actor, &delete)
            })
            .await
        }
        _ => call.reject(server, Refusal::Malformed),
    }
}

/// `CREATE_PERSONAL_ACCESS_TOKEN` (42): mints, commits the hash, answers the clear token.
async fn create_token(server: &Server, call: Call, create: &CreatePersonalAccessToken) -> Outcome {
    let minted = match mint_token() {
        Ok(mut minted) => {
            minted.token_hash = server.credentials.protect(minted.token_hash);
            minted
        }
        Err(error) => {
            log::error!("minting a token failed: {error}");
            return call.reject(server, Refusal::Internal);
        }
    };
    let check = |_: &Metadata, actor: &User| {
        validate::create_token(actor, create, server.now_us(), minted.token_hash.clone())
    };
    // A base64url token of 50 bytes is 67 ASCII bytes: always a valid secret.
    let token = Secret::new(minted.token.clone());
    let minted_hash = minted.token_hash.clone();
    call.commit(server, check, move |_, _, op| {
        // Only the token this attempt minted can be answered: a retry's first attempt
        // committed another, whose clear text is gone.
        let MetadataOp::CreatePersonalAccessToken { token_hash, .. } = op else {
            return None;
        };
        if *token_hash != minted_hash {
            return None;
        }
        token.map(|token| RawPersonalAccessToken { token })
    })
    .await
}

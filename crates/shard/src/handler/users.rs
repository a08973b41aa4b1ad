//! The user family (PROTOCOL.md §4.2, §12.2): `GET_USER` (31), `GET_USERS` (32),
//! `CREATE_USER` (33), `DELETE_USER` (34), the 0.11.0 `UPDATE_USER` (35),
//! `UPDATE_PERMISSIONS` (36) and `CHANGE_PASSWORD` (37). Reading users needs a global
//! permission, so it is checked before the target is looked up.
//!
//! Passwords are hashed (argon2id) inside validation, after every other check passed.

use proto::commands::Request;
use proto::header::RequestHeader;

use super::commit::Call;
use crate::connection::Connection;
use crate::metadata::permissions::{can_read_users, require};
use crate::metadata::{Metadata, MetadataOp, User, responses, validate};
use crate::outcome::Outcome;
use crate::refusal::Refusal;
use crate::server::Server;
use proto::commands::Empty;
use proto::commands::users::ChangePassword;

pub(crate) async fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let call = Call::of(header, connection);
    match request {
        request @ (Request::GetUser(_) | Request::GetUsers(_)) => read(server, call, &request),
        Request::CreateUser(create) => {
            let checked = call.validate(server, |metadata, actor| {
                validate::create_user(metadata, actor, &create, server.now_us(), unhashed)
            });
            let hashed = match checked {
                Ok(_) => hash(server, create.password.expose()).await,
                Err(refusal) => Err(refusal),
            };
            let hashed = match hashed {
                Ok(hashed) => hashed,
                Err(refusal) => return call.reject(server, refusal),
            };
            // Validated again: the metadata may have changed while the hash was made.
            let check = |metadata: &Metadata, actor: &User| {
                let hashed = || Ok(hashed.clone());
                validate::create_user(metadata, actor, &create, server.now_us(), |_| hashed())
            };
            call.commit(server, check, |metadata, _, op| {
                let MetadataOp::CreateUser { id, .. } = op else {
                    return None;
                };
                metadata.users.get(id).map(responses::user_details)
            })
            .await
        }
        Request::DeleteUser(delete) => {
            call.commit_checked(server, |metadata, actor| {
                validate::delete_user(metadata, actor, &delete)
            })
            .await
        }
        Request::UpdateUser(update) => {
            call.commit_checked(server, |metadata, actor| {
                validate::update_user_legacy(metadata, actor, &update)
            })
            .await
        }
        Request::UpdatePermissions(update) => {
            call.commit_checked(server, |metadata, actor| {
                validate::update_permissions(metadata, actor, &update)
            })
            .await
        }
        Request::ChangePassword(change) => {
            let changer = connection.session.map(|bound| bound.client_id);
            change_password(server, call, &change, changer).await
        }
        _ => call.reject(server, Refusal::Malformed),
    }
}

/// `GET_USER` (31) and `GET_USERS` (32).
fn read(server: &Server, call: Call, request: &Request<'_>) -> Outcome {
    match request {
        Request::GetUser(get) => {
            let metadata = server.metadata.borrow();
            let found = call.actor(&metadata).and_then(|actor| {
                require(can_read_users(actor))?;
                // An unknown user is the empty "not found" body.
                Ok(metadata
                    .user(&get.user_id)
                    .ok()
                    .map(responses::user_details))
            });
            match found {
                Ok(details) => call.answer(server, details),
                Err(refusal) => call.reject(server, refusal),
            }
        }
        Request::GetUsers(_) => {
            let metadata = server.metadata.borrow();
            let listed = call.actor(&metadata).and_then(|actor| {
                require(can_read_users(actor))?;
                Ok(responses::users(&metadata))
            });
            match listed {
                Ok(users) => call.answer(server, users),
                Err(refusal) => call.reject(server, refusal),
            }
        }
        _ => call.reject(server, Refusal::Malformed),
    }
}

/// `CHANGE_PASSWORD` (37): every check but the passwords first, then the current password
/// is checked and the new one hashed on the hashing threads, then validated for real. Once
/// committed, the user's sessions opened with the old password end; the changer's stays.
async fn change_password(
    server: &Server,
    call: Call,
    change: &ChangePassword,
    changer: Option<u128>,
) -> Outcome {
    if let Some((_, commit)) = server.committed_change(call.origin) {
        // A retry whose first attempt changed the password: the old one no longer matches.
        let empty = crate::outcome::Body::Value(Box::new(Empty));
        return super::commit::committed_reply(server, call.operation, empty, commit);
    }
    let stored = call.validate(server, |metadata, actor| {
        validate::change_password(metadata, actor, change, |_| true, unhashed)?;
        Ok(metadata.user(&change.user_id)?.password_hash.clone())
    });
    let stored = match stored {
        Ok(stored) => stored,
        Err(refusal) => return call.reject(server, refusal),
    };
    let current = change.current_password.expose().to_owned();
    let matches = match server.credentials.reveal(&stored) {
        Ok(opened) => {
            server
                .node
                .hasher
                .verify(current, opened.into_owned())
                .await
        }
        Err(_sealed) => false,
    };
    let hashed = if matches {
        hash(server, change.new_password.expose()).await
    } else {
        Ok(String::new())
    };
    let hashed = match hashed {
        Ok(hashed) => hashed,
        Err(refusal) => return call.reject(server, refusal),
    };
    let check = |metadata: &Metadata| {
        let actor = call.actor(metadata)?;
        // The stored hash must be the one the current password was checked against.
        let current_matches = |now_stored: &str| matches && now_stored == stored;
        let hashed = |_: &str| Ok(hashed.clone());
        validate::change_password(metadata, actor, change, current_matches, hashed)
    };
    let (op, commit) = match server.commit_validated(call.origin, check).await {
        Ok(committed) => committed,
        Err(refusal) => return call.reject(server, refusal),
    };
    let MetadataOp::ChangePassword { id: user_id, .. } = op else {
        // `validate::change_password` builds nothing else.
        return call.reject(server, Refusal::Internal);
    };
    server.end_sessions_of(user_id, changer);
    let empty = crate::outcome::Body::Value(Box::new(Empty));
    super::commit::committed_reply(server, call.operation, empty, commit)
}

/// A stand-in for the hash in a first validation, which only decides whether hashing is
/// worth its cost; its op is never committed. A `Result` because that is the hash
/// function's shape.
#[allow(clippy::unnecessary_wraps)]
fn unhashed(_password: &str) -> Result<String, Refusal> {
    Ok(String::new())
}

/// An argon2id hash of `password`, made on the hashing threads; a failing random source or
/// hasher refuses the request with the generic `1 Error`.
async fn hash(server: &Server, password: &str) -> Result<String, Refusal> {
    let hashed = server.node.hasher.hash(password.to_owned()).await;
    hashed
        .map(|hashed| server.credentials.protect(hashed))
        .map_err(|error| {
            log::error!("password hashing failed: {error}");
            Refusal::Internal
        })
}

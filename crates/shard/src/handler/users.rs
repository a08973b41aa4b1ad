//! The user family (PROTOCOL.md §4.2, §12.2): `GET_USER` (31), `GET_USERS` (32),
//! `CREATE_USER` (33), `DELETE_USER` (34), the 0.11.0 `UPDATE_USER` (35),
//! `UPDATE_PERMISSIONS` (36) and `CHANGE_PASSWORD` (37). Reading users needs a global
//! permission, so it is checked before the target is looked up.
//!
//! Passwords are hashed (argon2id) inside validation, after every other check passed.

use proto::ErrorCode;
use proto::commands::Request;
use proto::header::RequestHeader;

use super::commit::Call;
use crate::connection::Connection;
use crate::metadata::auth::hash_password;
use crate::metadata::permissions::{can_read_users, require};
use crate::metadata::{MetadataOp, responses, validate};
use crate::outcome::Outcome;
use crate::server::{Server, now_us};

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
            let op = {
                let metadata = server.metadata.borrow();
                call.actor(&metadata).and_then(|actor| {
                    validate::create_user(&metadata, actor, &create, now_us(), hash)
                })
            };
            let id = match &op {
                Ok(MetadataOp::CreateUser { id, .. }) => *id,
                _ => 0,
            };
            call.commit(server, op, |metadata, _| {
                metadata.users.get(&id).map(responses::user_details)
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
            call.commit_checked(server, |metadata, actor| {
                validate::change_password(metadata, actor, &change, hash)
            })
            .await
        }
        _ => call.reject(server, ErrorCode::InvalidCommand),
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
                Ok(details) => call.answer(server, &details),
                Err(code) => call.reject(server, code),
            }
        }
        Request::GetUsers(_) => {
            let metadata = server.metadata.borrow();
            let listed = call.actor(&metadata).and_then(|actor| {
                require(can_read_users(actor))?;
                Ok(responses::users(&metadata))
            });
            match listed {
                Ok(users) => call.answer(server, &users),
                Err(code) => call.reject(server, code),
            }
        }
        _ => call.reject(server, ErrorCode::InvalidCommand),
    }
}

/// An argon2id hash of `password`; a failing random source or hasher refuses the request
/// with the generic `1 Error`.
fn hash(password: &str) -> Result<String, ErrorCode> {
    hash_password(password).map_err(|error| {
        log::error!("password hashing failed: {error}");
        ErrorCode::Error
    })
}

//! User requests: `CREATE_USER` (33), `DELETE_USER` (34), 0.11.0 `UPDATE_USER` (35),
//! `UPDATE_PERMISSIONS` (36), `CHANGE_PASSWORD` (37), and the root user at first boot.
//!
//! Passwords are hashed by the caller's `hash` function, after every other check passed:
//! hashing is slow and random, so it never runs for a request that will be refused.

use proto::codec::WireName;
use proto::commands::legacy::UpdateUser;
use proto::commands::users::{
    ChangePassword, CreateUser, DeleteUser, UpdatePermissions, UserStatus as WireStatus,
};
use proto::primitives::Permissions;

use crate::metadata::options::check_user_create_options;
use crate::metadata::permissions::{ROOT_USER_ID, can_change_password, can_manage_users, require};
use crate::metadata::resolve::lowest_free_id;
use crate::metadata::{Metadata, MetadataOp, User, UserStatus};
use crate::refusal::{Invalid, Limit, Login, Protected, Refusal, Taken, TopicOption};

/// Username length bounds in bytes (`43 InvalidUsername`).
pub const USERNAME_LENGTH: core::ops::RangeInclusive<usize> = 3..=50;
/// Password length bounds in bytes (`44 InvalidPassword`).
pub const PASSWORD_LENGTH: core::ops::RangeInclusive<usize> = 3..=100;

/// `CREATE_USER`: `41`, `43`, `44`, `46` name taken, `4041` any option key.
pub fn create_user(
    metadata: &Metadata,
    actor: &User,
    request: &CreateUser,
    now_micros: u64,
    hash: impl FnOnce(&str) -> Result<String, Refusal>,
) -> Result<MetadataOp, Refusal> {
    require(can_manage_users(actor))?;
    check_username(metadata, request.username.as_str(), None)?;
    check_password(request.password.expose())?;
    check_user_create_options(&request.options)?;
    let id = lowest_free_id(metadata.users.keys().copied()).ok_or(Refusal::Limit(Limit::Users))?;
    Ok(MetadataOp::CreateUser {
        id,
        username: String::from(request.username.as_str()),
        password_hash: hash(request.password.expose())?,
        status: UserStatus::from(request.status),
        permissions: request.permissions.clone(),
        created_at: now_micros,
    })
}

/// The root user of a fresh server: id 0, every permission.
pub fn root_user(username: &str, password_hash: String, now_micros: u64) -> MetadataOp {
    MetadataOp::CreateUser {
        id: ROOT_USER_ID,
        username: String::from(username),
        password_hash,
        status: UserStatus::Active,
        permissions: Some(Permissions::root()),
        created_at: now_micros,
    }
}

/// `DELETE_USER`: `41`, `20`, `48` the root user.
pub fn delete_user(
    metadata: &Metadata,
    actor: &User,
    request: &DeleteUser,
) -> Result<MetadataOp, Refusal> {
    require(can_manage_users(actor))?;
    let user = metadata.user(&request.user_id)?;
    if user.id == ROOT_USER_ID {
        return Err(Refusal::Protected(Protected::DeleteUser));
    }
    Ok(MetadataOp::DeleteUser { id: user.id })
}

/// `UPDATE_PERMISSIONS`: `41`, `20`, `49` the root user.
pub fn update_permissions(
    metadata: &Metadata,
    actor: &User,
    request: &UpdatePermissions,
) -> Result<MetadataOp, Refusal> {
    require(can_manage_users(actor))?;
    let user = metadata.user(&request.user_id)?;
    if user.id == ROOT_USER_ID {
        return Err(Refusal::Protected(Protected::ChangePermissions));
    }
    Ok(MetadataOp::UpdatePermissions {
        id: user.id,
        permissions: request.permissions.clone(),
    })
}

/// `CHANGE_PASSWORD`: `20`, `41` (another user without `manage_users`), `44` bad new
/// password, `42` wrong current password.
///
/// `current_matches(stored_hash)` says whether the request's current password matches the
/// user's stored hash: the server checks it on its hashing threads beforehand.
pub fn change_password(
    metadata: &Metadata,
    actor: &User,
    request: &ChangePassword,
    current_matches: impl FnOnce(&str) -> bool,
    hash: impl FnOnce(&str) -> Result<String, Refusal>,
) -> Result<MetadataOp, Refusal> {
    let user = metadata.user(&request.user_id)?;
    require(can_change_password(actor, user.id))?;
    check_password(request.new_password.expose())?;
    if !current_matches(&user.password_hash) {
        return Err(Refusal::Login(Login::Credentials));
    }
    Ok(MetadataOp::ChangePassword {
        id: user.id,
        password_hash: hash(request.new_password.expose())?,
    })
}

/// 0.11.0 `UPDATE_USER`: `41`, `20`, `4108` root, `43`/`46` username, `45` status byte,
/// `4041` any option key.
pub fn update_user_legacy(
    metadata: &Metadata,
    actor: &User,
    request: &UpdateUser,
) -> Result<MetadataOp, Refusal> {
    require(can_manage_users(actor))?;
    let user = metadata.user(&request.user_id)?;
    if !request.options.is_empty() {
        return Err(Refusal::TopicOption(TopicOption::UnsupportedKey));
    }
    let status = match request.status {
        None => None,
        Some(byte) => Some(WireStatus::from_u8(byte).ok_or(Refusal::Invalid(Invalid::UserStatus))?),
    };
    let username = request.username.as_ref().map(WireName::as_str);
    update_user_op(metadata, user, username, status.map(UserStatus::from))
}

/// A checked rename and/or status change of `user`.
pub(super) fn update_user_op(
    metadata: &Metadata,
    user: &User,
    username: Option<&str>,
    status: Option<UserStatus>,
) -> Result<MetadataOp, Refusal> {
    if user.id == ROOT_USER_ID && (username.is_some() || status.is_some()) {
        return Err(Refusal::Protected(Protected::RootUser));
    }
    if let Some(username) = username {
        check_username(metadata, username, Some(user.id))?;
    }
    Ok(MetadataOp::UpdateUser {
        id: user.id,
        username: username.map(String::from),
        status,
    })
}

fn check_username(metadata: &Metadata, username: &str, except: Option<u32>) -> Result<(), Refusal> {
    if !USERNAME_LENGTH.contains(&username.len()) {
        return Err(Refusal::Invalid(Invalid::Username));
    }
    let taken = metadata
        .users
        .values()
        .any(|user| user.username == username && Some(user.id) != except);
    if taken {
        return Err(Refusal::Taken(Taken::User));
    }
    Ok(())
}

fn check_password(password: &str) -> Result<(), Refusal> {
    if PASSWORD_LENGTH.contains(&password.len()) {
        Ok(())
    } else {
        Err(Refusal::Invalid(Invalid::Password))
    }
}

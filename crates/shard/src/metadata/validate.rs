//! Validation: a decoded request plus the current [`Metadata`](super::Metadata) and the
//! calling [`User`](super::User) become a [`MetadataOp`](super::MetadataOp) to commit, or
//! the [`Refusal`](crate::refusal::Refusal) the client gets (PROTOCOL.md §4.2, §4.3, §4.6–§4.9,
//! §7). Nothing here mutates state; every value an op needs (ids, times, hashes) is chosen
//! here, so applying it is deterministic.
//!
//! Order of checks: an unknown parent first (`1009`/`2010`), then permissions (`41`), then
//! the request's own rules; global-permission commands check `41` first.

mod streams;
mod tokens;
mod topics;
mod update;
mod users;

#[cfg(test)]
mod tests;

pub use streams::{STREAMS_MAX, create_stream, delete_stream, update_stream_legacy};
pub use tokens::{
    TOKEN_NAME_LENGTH, TOKENS_PER_USER_MAX, create_token, delete_token, token_expiry_at,
};
pub use topics::{
    PARTITIONS_PER_REQUEST_MAX, create_consumer_group, create_partitions, create_topic,
    delete_consumer_group, delete_partitions, delete_topic, update_topic_legacy,
};
pub use update::update_resource;
pub use users::{
    PASSWORD_LENGTH, USERNAME_LENGTH, change_password, create_user, delete_user, root_user,
    update_permissions, update_user_legacy,
};

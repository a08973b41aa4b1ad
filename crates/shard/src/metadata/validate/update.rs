//! `UPDATE_RESOURCE` (16): a patch of one topic, stream or user (PROTOCOL.md §4.1, §7.4).
//! Topics take `name`, `message_expiry`, `max_topic_size` and resets of the latter two;
//! streams take `name`; users take `username` and `status` (`active`/`inactive`).

use proto::commands::system::{OptionScope, ResourceTarget, UpdateResource};

use super::streams::rename_stream;
use super::topics::update_topic_op;
use super::users::update_user_op;
use crate::metadata::options::{check_update_keys, patch_topic_options, update_name};
use crate::metadata::permissions::require;
use crate::metadata::permissions::{can_manage_stream, can_manage_topic, can_manage_users};
use crate::metadata::{Metadata, MetadataOp, TopicSettings, User, UserStatus};
use crate::refusal::{Refusal, TopicOption};

/// Turns a patch into the op that applies it; see the module doc for the keys.
pub fn update_resource(
    metadata: &Metadata,
    actor: &User,
    request: &UpdateResource,
    defaults: &TopicSettings,
) -> Result<MetadataOp, Refusal> {
    let reset = request.reset.as_slice();
    match &request.target {
        ResourceTarget::Topic {
            stream_id,
            topic_id,
        } => {
            let (stream, topic) = metadata.topic(stream_id, topic_id)?;
            require(can_manage_topic(actor, stream.id, topic.id))?;
            let patch = patch_topic_options(
                &topic.options,
                &topic.settings,
                &request.options,
                reset,
                defaults,
                topic.partitions_count(),
            )?;
            update_topic_op(stream, topic, patch)
        }
        ResourceTarget::Stream { stream_id } => {
            let stream = metadata.stream(stream_id)?;
            require(can_manage_stream(actor, stream.id))?;
            check_update_keys(OptionScope::Stream, &request.options, reset)?;
            let name = request.options.get("name").map(update_name).transpose()?;
            match name {
                Some(name) => rename_stream(metadata, stream.id, &name),
                None => Err(Refusal::Malformed),
            }
        }
        ResourceTarget::User { user_id } => {
            require(can_manage_users(actor))?;
            let user = metadata.user(user_id)?;
            check_update_keys(OptionScope::User, &request.options, reset)?;
            let username = request
                .options
                .get("username")
                .map(update_name)
                .transpose()?;
            let status = request.options.get("status").map(user_status).transpose()?;
            update_user_op(metadata, user, username.as_deref(), status)
        }
    }
}

fn user_status(value: &proto::primitives::TlvEntry) -> Result<UserStatus, Refusal> {
    match value.as_str() {
        Some("active") => Ok(UserStatus::Active),
        Some("inactive") => Ok(UserStatus::Inactive),
        _ => Err(Refusal::TopicOption(TopicOption::InvalidValue)),
    }
}

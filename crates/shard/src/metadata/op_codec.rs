//! The binary encoding of a [`MetadataOp`] inside a journal entry (see `journal.rs`).
//!
//! `[version:u8 = 1][tag:u8][fields]`, little-endian, fields in declaration order:
//! integers fixed-width; strings `[length:u32][UTF-8]` (at most 1 MiB); `Option<T>`
//! `[present:u8 0/1][T if 1]`; options blocks `[length:u32][TLV]` as in responses;
//! permissions `[present:u8][length:u32][block]` (PROTOCOL.md §3.7); user status 1 active,
//! 2 inactive; durability 0 replicated, 1 persisted; booleans 0/1. A new field or variant
//! means a new version byte; old versions stay decodable.

use proto::codec::{LONG_TEXT_LENGTH_MAX, Reader, Writer, decode_exact, encode_to_vec};
use proto::commands::users::PERMISSIONS_LENGTH_MAX;
use proto::error::DecodeErrorKind;
use proto::primitives::{OptionsBlock, Permissions};
use proto::{Codec, DecodeError, Dialect};
use segment::log::Durability;

use super::model::{TopicSettings, UserStatus};
use super::op::MetadataOp;

/// The encoding version this build writes.
pub const OP_VERSION: u8 = 1;

/// Tags, one per variant; never reused.
mod tag {
    pub(super) const CREATE_STREAM: u8 = 1;
    pub(super) const UPDATE_STREAM: u8 = 2;
    pub(super) const DELETE_STREAM: u8 = 3;
    pub(super) const CREATE_TOPIC: u8 = 4;
    pub(super) const UPDATE_TOPIC: u8 = 5;
    pub(super) const DELETE_TOPIC: u8 = 6;
    pub(super) const CREATE_PARTITIONS: u8 = 7;
    pub(super) const DELETE_PARTITIONS: u8 = 8;
    pub(super) const CREATE_CONSUMER_GROUP: u8 = 9;
    pub(super) const DELETE_CONSUMER_GROUP: u8 = 10;
    pub(super) const CREATE_USER: u8 = 11;
    pub(super) const UPDATE_USER: u8 = 12;
    pub(super) const DELETE_USER: u8 = 13;
    pub(super) const CHANGE_PASSWORD: u8 = 14;
    pub(super) const UPDATE_PERMISSIONS: u8 = 15;
    pub(super) const CREATE_TOKEN: u8 = 16;
    pub(super) const DELETE_TOKEN: u8 = 17;
}

/// Encodes `op` at the current version.
pub fn encode_op(op: &MetadataOp) -> Vec<u8> {
    encode_to_vec(&VersionedOp(op.clone()), Dialect::V0_12_2)
}

/// Decodes one op that spans all of `bytes`.
pub fn decode_op(bytes: &[u8]) -> Result<MetadataOp, DecodeError> {
    decode_exact::<VersionedOp>(bytes, Dialect::V0_12_2).map(|versioned| versioned.0)
}

struct VersionedOp(MetadataOp);

impl Codec<'_> for VersionedOp {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(OP_VERSION);
        encode_body(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        match reader.u8("op.version")? {
            OP_VERSION => decode_body(reader).map(Self),
            version => Err(invalid("op.version", offset, version)),
        }
    }
}

fn encode_body(op: &MetadataOp, w: &mut Writer<'_>) {
    match op {
        MetadataOp::CreateStream {
            id,
            name,
            created_at,
            options,
        } => {
            w.u8(tag::CREATE_STREAM);
            w.u32(*id);
            text(w, name);
            w.u64(*created_at);
            options.encode_prefixed(w);
        }
        MetadataOp::UpdateStream { id, name, options } => {
            w.u8(tag::UPDATE_STREAM);
            w.u32(*id);
            optional(w, name.as_deref(), text);
            optional(w, options.as_ref(), |w, o| o.encode_prefixed(w));
        }
        MetadataOp::DeleteStream { id } => {
            w.u8(tag::DELETE_STREAM);
            w.u32(*id);
        }
        MetadataOp::CreateTopic { .. }
        | MetadataOp::UpdateTopic { .. }
        | MetadataOp::DeleteTopic { .. } => encode_topic_op(op, w),
        MetadataOp::CreatePartitions { .. }
        | MetadataOp::DeletePartitions { .. }
        | MetadataOp::CreateConsumerGroup { .. }
        | MetadataOp::DeleteConsumerGroup { .. } => encode_topic_child_op(op, w),
        MetadataOp::CreateUser { .. }
        | MetadataOp::UpdateUser { .. }
        | MetadataOp::DeleteUser { .. }
        | MetadataOp::ChangePassword { .. }
        | MetadataOp::UpdatePermissions { .. }
        | MetadataOp::CreatePersonalAccessToken { .. }
        | MetadataOp::DeletePersonalAccessToken { .. } => encode_user_op(op, w),
    }
}

fn encode_topic_op(op: &MetadataOp, w: &mut Writer<'_>) {
    match op {
        MetadataOp::CreateTopic {
            stream_id,
            id,
            name,
            created_at,
            partitions_count,
            options,
            settings,
        } => {
            w.u8(tag::CREATE_TOPIC);
            w.u32(*stream_id);
            w.u32(*id);
            text(w, name);
            w.u64(*created_at);
            w.u32(*partitions_count);
            options.encode_prefixed(w);
            encode_settings(settings, w);
        }
        MetadataOp::UpdateTopic {
            stream_id,
            id,
            name,
            options,
            settings,
        } => {
            w.u8(tag::UPDATE_TOPIC);
            w.u32(*stream_id);
            w.u32(*id);
            optional(w, name.as_deref(), text);
            optional(w, options.as_ref(), |w, o| o.encode_prefixed(w));
            optional(w, settings.as_ref(), |w, s| encode_settings(s, w));
        }
        MetadataOp::DeleteTopic { stream_id, id } => {
            w.u8(tag::DELETE_TOPIC);
            w.u32(*stream_id);
            w.u32(*id);
        }
        _ => {}
    }
}

fn encode_topic_child_op(op: &MetadataOp, w: &mut Writer<'_>) {
    match op {
        MetadataOp::CreatePartitions {
            stream_id,
            topic_id,
            count,
            created_at,
        } => {
            w.u8(tag::CREATE_PARTITIONS);
            w.u32(*stream_id);
            w.u32(*topic_id);
            w.u32(*count);
            w.u64(*created_at);
        }
        MetadataOp::DeletePartitions {
            stream_id,
            topic_id,
            count,
        } => {
            w.u8(tag::DELETE_PARTITIONS);
            w.u32(*stream_id);
            w.u32(*topic_id);
            w.u32(*count);
        }
        MetadataOp::CreateConsumerGroup {
            stream_id,
            topic_id,
            id,
            name,
            created_at,
        } => {
            w.u8(tag::CREATE_CONSUMER_GROUP);
            w.u32(*stream_id);
            w.u32(*topic_id);
            w.u32(*id);
            text(w, name);
            w.u64(*created_at);
        }
        MetadataOp::DeleteConsumerGroup {
            stream_id,
            topic_id,
            id,
        } => {
            w.u8(tag::DELETE_CONSUMER_GROUP);
            w.u32(*stream_id);
            w.u32(*topic_id);
            w.u32(*id);
        }
        _ => {}
    }
}

fn encode_user_op(op: &MetadataOp, w: &mut Writer<'_>) {
    match op {
        MetadataOp::CreateUser {
            id,
            username,
            password_hash,
            status,
            permissions,
            created_at,
        } => {
            w.u8(tag::CREATE_USER);
            w.u32(*id);
            text(w, username);
            text(w, password_hash);
            w.u8(status_byte(*status));
            optional(w, permissions.as_ref(), encode_permissions);
            w.u64(*created_at);
        }
        MetadataOp::UpdateUser {
            id,
            username,
            status,
        } => {
            w.u8(tag::UPDATE_USER);
            w.u32(*id);
            optional(w, username.as_deref(), text);
            optional(w, status.as_ref(), |w, s| w.u8(status_byte(*s)));
        }
        MetadataOp::DeleteUser { id } => {
            w.u8(tag::DELETE_USER);
            w.u32(*id);
        }
        MetadataOp::ChangePassword { id, password_hash } => {
            w.u8(tag::CHANGE_PASSWORD);
            w.u32(*id);
            text(w, password_hash);
        }
        MetadataOp::UpdatePermissions { id, permissions } => {
            w.u8(tag::UPDATE_PERMISSIONS);
            w.u32(*id);
            optional(w, permissions.as_ref(), encode_permissions);
        }
        MetadataOp::CreatePersonalAccessToken {
            user_id,
            name,
            token_hash,
            expiry_at,
        } => {
            w.u8(tag::CREATE_TOKEN);
            w.u32(*user_id);
            text(w, name);
            text(w, token_hash);
            optional(w, expiry_at.as_ref(), |w, e| w.u64(*e));
        }
        MetadataOp::DeletePersonalAccessToken { user_id, name } => {
            w.u8(tag::DELETE_TOKEN);
            w.u32(*user_id);
            text(w, name);
        }
        _ => {}
    }
}

fn decode_body(r: &mut Reader<'_>) -> Result<MetadataOp, DecodeError> {
    let offset = r.offset();
    Ok(match r.u8("op.tag")? {
        tag::CREATE_STREAM => MetadataOp::CreateStream {
            id: r.u32("stream.id")?,
            name: read_text(r)?,
            created_at: r.u64("stream.created_at")?,
            options: OptionsBlock::decode_prefixed(r)?,
        },
        tag::UPDATE_STREAM => MetadataOp::UpdateStream {
            id: r.u32("stream.id")?,
            name: read_optional(r, read_text)?,
            options: read_optional(r, OptionsBlock::decode_prefixed)?,
        },
        tag::DELETE_STREAM => MetadataOp::DeleteStream {
            id: r.u32("stream.id")?,
        },
        tag::CREATE_TOPIC => MetadataOp::CreateTopic {
            stream_id: r.u32("topic.stream_id")?,
            id: r.u32("topic.id")?,
            name: read_text(r)?,
            created_at: r.u64("topic.created_at")?,
            partitions_count: r.u32("topic.partitions_count")?,
            options: OptionsBlock::decode_prefixed(r)?,
            settings: decode_settings(r)?,
        },
        tag::UPDATE_TOPIC => MetadataOp::UpdateTopic {
            stream_id: r.u32("topic.stream_id")?,
            id: r.u32("topic.id")?,
            name: read_optional(r, read_text)?,
            options: read_optional(r, OptionsBlock::decode_prefixed)?,
            settings: read_optional(r, decode_settings)?,
        },
        tag::DELETE_TOPIC => MetadataOp::DeleteTopic {
            stream_id: r.u32("topic.stream_id")?,
            id: r.u32("topic.id")?,
        },
        other => decode_child_body(r, other, offset)?,
    })
}

fn decode_child_body(
    r: &mut Reader<'_>,
    tag: u8,
    offset: usize,
) -> Result<MetadataOp, DecodeError> {
    Ok(match tag {
        tag::CREATE_PARTITIONS => MetadataOp::CreatePartitions {
            stream_id: r.u32("partitions.stream_id")?,
            topic_id: r.u32("partitions.topic_id")?,
            count: r.u32("partitions.count")?,
            created_at: r.u64("partitions.created_at")?,
        },
        tag::DELETE_PARTITIONS => MetadataOp::DeletePartitions {
            stream_id: r.u32("partitions.stream_id")?,
            topic_id: r.u32("partitions.topic_id")?,
            count: r.u32("partitions.count")?,
        },
        tag::CREATE_CONSUMER_GROUP => MetadataOp::CreateConsumerGroup {
            stream_id: r.u32("group.stream_id")?,
            topic_id: r.u32("group.topic_id")?,
            id: r.u32("group.id")?,
            name: read_text(r)?,
            created_at: r.u64("group.created_at")?,
        },
        tag::DELETE_CONSUMER_GROUP => MetadataOp::DeleteConsumerGroup {
            stream_id: r.u32("group.stream_id")?,
            topic_id: r.u32("group.topic_id")?,
            id: r.u32("group.id")?,
        },
        other => decode_user_body(r, other, offset)?,
    })
}

fn decode_user_body(r: &mut Reader<'_>, tag: u8, offset: usize) -> Result<MetadataOp, DecodeError> {
    Ok(match tag {
        tag::CREATE_USER => MetadataOp::CreateUser {
            id: r.u32("user.id")?,
            username: read_text(r)?,
            password_hash: read_text(r)?,
            status: read_status(r)?,
            permissions: read_optional(r, decode_permissions)?,
            created_at: r.u64("user.created_at")?,
        },
        tag::UPDATE_USER => MetadataOp::UpdateUser {
            id: r.u32("user.id")?,
            username: read_optional(r, read_text)?,
            status: read_optional(r, read_status)?,
        },
        tag::DELETE_USER => MetadataOp::DeleteUser {
            id: r.u32("user.id")?,
        },
        tag::CHANGE_PASSWORD => MetadataOp::ChangePassword {
            id: r.u32("user.id")?,
            password_hash: read_text(r)?,
        },
        tag::UPDATE_PERMISSIONS => MetadataOp::UpdatePermissions {
            id: r.u32("user.id")?,
            permissions: read_optional(r, decode_permissions)?,
        },
        tag::CREATE_TOKEN => MetadataOp::CreatePersonalAccessToken {
            user_id: r.u32("token.user_id")?,
            name: read_text(r)?,
            token_hash: read_text(r)?,
            expiry_at: read_optional(r, |r| r.u64("token.expiry_at"))?,
        },
        tag::DELETE_TOKEN => MetadataOp::DeletePersonalAccessToken {
            user_id: r.u32("token.user_id")?,
            name: read_text(r)?,
        },
        other => return Err(invalid("op.tag", offset, other)),
    })
}

pub(super) fn encode_settings(settings: &TopicSettings, w: &mut Writer<'_>) {
    optional(w, settings.message_expiry_us.as_ref(), |w, v| w.u64(*v));
    optional(w, settings.max_topic_size_bytes.as_ref(), |w, v| w.u64(*v));
    w.u64(settings.segment_size_bytes);
    w.u8(durability_byte(settings.durability));
    w.u8(durability_byte(settings.consumer_offset_durability));
    w.u32(settings.messages_required_to_save);
    w.u64(settings.size_of_messages_required_to_save);
    w.bool(settings.compression_gzip);
    w.u32(settings.replication_factor);
    w.bool(settings.preallocate_segments);
    w.bool(settings.partitions_fixed);
}

pub(super) fn decode_settings(r: &mut Reader<'_>) -> Result<TopicSettings, DecodeError> {
    Ok(TopicSettings {
        message_expiry_us: read_optional(r, |r| r.u64("settings.message_expiry"))?,
        max_topic_size_bytes: read_optional(r, |r| r.u64("settings.max_topic_size"))?,
        segment_size_bytes: r.u64("settings.segment_size")?,
        durability: read_durability(r)?,
        consumer_offset_durability: read_durability(r)?,
        messages_required_to_save: r.u32("settings.messages_required_to_save")?,
        size_of_messages_required_to_save: r.u64("settings.size_of_messages_required")?,
        compression_gzip: r.bool("settings.compression_gzip")?,
        replication_factor: r.u32("settings.replication_factor")?,
        preallocate_segments: r.bool("settings.preallocate_segments")?,
        partitions_fixed: r.bool("settings.partitions_fixed")?,
    })
}

pub(super) fn encode_permissions(w: &mut Writer<'_>, permissions: &Permissions) {
    let block = encode_to_vec(permissions, w.dialect());
    w.bytes_u32(&block);
}

pub(super) fn decode_permissions(r: &mut Reader<'_>) -> Result<Permissions, DecodeError> {
    let length = r.length_u32(0, PERMISSIONS_LENGTH_MAX, "permissions.length")?;
    let mut block = r.sub(length, "permissions")?;
    let permissions = Permissions::decode(&mut block)?;
    block.finish("permissions")?;
    Ok(permissions)
}

pub(super) fn text(w: &mut Writer<'_>, value: &str) {
    w.bytes_u32(value.as_bytes());
}

pub(super) fn read_text(r: &mut Reader<'_>) -> Result<String, DecodeError> {
    r.text_u32(LONG_TEXT_LENGTH_MAX, "op.text")
        .map(String::from)
}

pub(super) fn optional<T: ?Sized>(
    w: &mut Writer<'_>,
    value: Option<&T>,
    encode: impl Fn(&mut Writer<'_>, &T),
) {
    w.bool(value.is_some());
    if let Some(value) = value {
        encode(w, value);
    }
}

pub(super) fn read_optional<'a, T>(
    r: &mut Reader<'a>,
    decode: impl Fn(&mut Reader<'a>) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    if r.bool("op.present")? {
        decode(r).map(Some)
    } else {
        Ok(None)
    }
}

pub(super) fn status_byte(status: UserStatus) -> u8 {
    match status {
        UserStatus::Active => 1,
        UserStatus::Inactive => 2,
    }
}

pub(super) fn read_status(r: &mut Reader<'_>) -> Result<UserStatus, DecodeError> {
    let offset = r.offset();
    match r.u8("user.status")? {
        1 => Ok(UserStatus::Active),
        2 => Ok(UserStatus::Inactive),
        other => Err(invalid("user.status", offset, other)),
    }
}

fn durability_byte(durability: Durability) -> u8 {
    match durability {
        Durability::Replicated => 0,
        Durability::Persisted => 1,
    }
}

fn read_durability(r: &mut Reader<'_>) -> Result<Durability, DecodeError> {
    let offset = r.offset();
    match r.u8("settings.durability")? {
        0 => Ok(Durability::Replicated),
        1 => Ok(Durability::Persisted),
        other => Err(invalid("settings.durability", offset, other)),
    }
}

fn invalid(field: &'static str, offset: usize, value: u8) -> DecodeError {
    DecodeError::new(
        field,
        offset,
        DecodeErrorKind::InvalidValue {
            value: u64::from(value),
        },
    )
}

//! The metadata entities and the state that holds them.

use std::collections::BTreeMap;

use proto::primitives::{OptionsBlock, Permissions};
use segment::log::Durability;

/// Everything the server knows about, besides messages and sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub streams: BTreeMap<u32, Stream>,
    pub users: BTreeMap<u32, User>,
    /// The metadata commit number clients see (`commit`, `metadata_op`), and the source of
    /// partition incarnations: operations applied so far, or in cluster mode the replica-log
    /// op of the last change applied (`Metadata::apply_at`).
    pub commit: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    pub id: u32,
    pub name: String,
    pub created_at: u64,
    /// Option keys the client set (returned as the explicit block).
    pub options: OptionsBlock,
    pub topics: BTreeMap<u32, Topic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub id: u32,
    pub name: String,
    pub created_at: u64,
    /// Option keys the client set (returned as the explicit block).
    pub options: OptionsBlock,
    pub settings: TopicSettings,
    pub partitions: BTreeMap<u32, Partition>,
    pub groups: BTreeMap<u32, ConsumerGroup>,
    /// Group ids are never reused within a topic.
    pub next_group_id: u32,
}

/// A topic's effective settings, resolved from its options and the server's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicSettings {
    /// `None` = never expire.
    pub message_expiry_us: Option<u64>,
    /// `None` = unlimited.
    pub max_topic_size_bytes: Option<u64>,
    pub segment_size_bytes: u64,
    pub durability: Durability,
    pub consumer_offset_durability: Durability,
    pub messages_required_to_save: u32,
    pub size_of_messages_required_to_save: u64,
    /// `none` (false) or `gzip` (true): stored and reported, never applied.
    pub compression_gzip: bool,
    pub replication_factor: u32,
    pub preallocate_segments: bool,
    /// `partition_resize_policy = fixed`.
    pub partitions_fixed: bool,
}

impl Default for TopicSettings {
    fn default() -> Self {
        Self {
            message_expiry_us: None,
            max_topic_size_bytes: None,
            segment_size_bytes: 1 << 30,
            durability: Durability::Replicated,
            consumer_offset_durability: Durability::Replicated,
            messages_required_to_save: 1024,
            size_of_messages_required_to_save: 1 << 20,
            compression_gzip: false,
            replication_factor: 1,
            preallocate_segments: false,
            partitions_fixed: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub id: u32,
    pub created_at: u64,
    /// Non-zero; the metadata commit that created it (§2.9 of PROTOCOL.md).
    pub incarnation: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    pub id: u32,
    pub name: String,
    pub created_at: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserStatus {
    Active,
    Inactive,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: u32,
    pub username: String,
    /// A PHC string (argon2id), sealed under the at-rest key when encryption is on
    /// (`crate::at_rest::credentials`); never leaves the server.
    pub password_hash: String,
    pub status: UserStatus,
    pub permissions: Option<Permissions>,
    pub created_at: u64,
    pub tokens: BTreeMap<String, PersonalAccessToken>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonalAccessToken {
    pub name: String,
    /// Hex SHA-256 of the clear token, sealed under the at-rest key when encryption is on
    /// (`crate::at_rest::credentials`); tokens are looked up by it.
    pub token_hash: String,
    /// µs since the epoch; `None` = never expires.
    pub expiry_at: Option<u64>,
}

impl From<proto::commands::users::UserStatus> for UserStatus {
    fn from(status: proto::commands::users::UserStatus) -> Self {
        match status {
            proto::commands::users::UserStatus::Active => Self::Active,
            proto::commands::users::UserStatus::Inactive => Self::Inactive,
        }
    }
}

impl From<UserStatus> for proto::commands::users::UserStatus {
    fn from(status: UserStatus) -> Self {
        match status {
            UserStatus::Active => Self::Active,
            UserStatus::Inactive => Self::Inactive,
        }
    }
}

//! The operations that change metadata. Each carries every value it needs, decided before it
//! is logged (ids, creation times, hashes), so applying it is deterministic.

use proto::primitives::{OptionsBlock, Permissions};

use super::model::{TopicSettings, UserStatus};

/// One metadata change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataOp {
    CreateStream {
        id: u32,
        name: String,
        created_at: u64,
        options: OptionsBlock,
    },
    /// Rename and/or replace the explicit options.
    UpdateStream {
        id: u32,
        name: Option<String>,
        options: Option<OptionsBlock>,
    },
    DeleteStream {
        id: u32,
    },
    CreateTopic {
        stream_id: u32,
        id: u32,
        name: String,
        created_at: u64,
        partitions_count: u32,
        options: OptionsBlock,
        settings: TopicSettings,
    },
    UpdateTopic {
        stream_id: u32,
        id: u32,
        name: Option<String>,
        options: Option<OptionsBlock>,
        settings: Option<TopicSettings>,
    },
    DeleteTopic {
        stream_id: u32,
        id: u32,
    },
    CreatePartitions {
        stream_id: u32,
        topic_id: u32,
        count: u32,
        created_at: u64,
    },
    DeletePartitions {
        stream_id: u32,
        topic_id: u32,
        count: u32,
    },
    CreateConsumerGroup {
        stream_id: u32,
        topic_id: u32,
        id: u32,
        name: String,
        created_at: u64,
    },
    DeleteConsumerGroup {
        stream_id: u32,
        topic_id: u32,
        id: u32,
    },
    CreateUser {
        id: u32,
        username: String,
        password_hash: String,
        status: UserStatus,
        permissions: Option<Permissions>,
        created_at: u64,
    },
    UpdateUser {
        id: u32,
        username: Option<String>,
        status: Option<UserStatus>,
    },
    DeleteUser {
        id: u32,
    },
    ChangePassword {
        id: u32,
        password_hash: String,
    },
    UpdatePermissions {
        id: u32,
        permissions: Option<Permissions>,
    },
    CreatePersonalAccessToken {
        user_id: u32,
        name: String,
        token_hash: String,
        expiry_at: Option<u64>,
    },
    DeletePersonalAccessToken {
        user_id: u32,
        name: String,
    },
}

impl MetadataOp {
    /// The op's name, for log lines: ops carry password and token hashes, which never go to
    /// a log, so ops are logged by name only.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CreateStream { .. } => "CreateStream",
            Self::UpdateStream { .. } => "UpdateStream",
            Self::DeleteStream { .. } => "DeleteStream",
            Self::CreateTopic { .. } => "CreateTopic",
            Self::UpdateTopic { .. } => "UpdateTopic",
            Self::DeleteTopic { .. } => "DeleteTopic",
            Self::CreatePartitions { .. } => "CreatePartitions",
            Self::DeletePartitions { .. } => "DeletePartitions",
            Self::CreateConsumerGroup { .. } => "CreateConsumerGroup",
            Self::DeleteConsumerGroup { .. } => "DeleteConsumerGroup",
            Self::CreateUser { .. } => "CreateUser",
            Self::UpdateUser { .. } => "UpdateUser",
            Self::DeleteUser { .. } => "DeleteUser",
            Self::ChangePassword { .. } => "ChangePassword",
            Self::UpdatePermissions { .. } => "UpdatePermissions",
            Self::CreatePersonalAccessToken { .. } => "CreatePersonalAccessToken",
            Self::DeletePersonalAccessToken { .. } => "DeletePersonalAccessToken",
        }
    }

    /// Whether applying the op can take away a live session's identity: its user deleted or
    /// deactivated, or the token it logged in with deleted.
    pub fn may_revoke_identity(&self) -> bool {
        matches!(
            self,
            Self::DeleteUser { .. }
                | Self::UpdateUser {
                    status: Some(UserStatus::Inactive),
                    ..
                }
                | Self::DeletePersonalAccessToken { .. }
        )
    }
}

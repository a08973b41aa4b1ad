//! The `operation` byte of request and reply headers (PROTOCOL.md §1.8, §12.1).

use crate::dialect::Dialect;

/// Every operation value either dialect can put in a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Operation {
    Register = 1,
    NonReplicated = 2,
    Logout = 3,
    CreateTopicWithAssignments = 64,
    CreatePartitionsWithAssignments = 65,
    RemoveConsumerGroupMember = 66,
    CompleteConsumerGroupRevocation = 67,
    TruncatePartition = 68,
    FinalizeSession = 70,
    CompleteLifecycle = 71,
    UpdateStreamResolved = 72,
    UpdateTopicResolved = 73,
    UpdateUserResolved = 74,
    RewrapStreamKeys = 75,
    CreateStream = 128,
    UpdateStream = 129,
    DeleteStream = 130,
    PurgeStream = 131,
    CreateTopic = 132,
    UpdateTopic = 133,
    DeleteTopic = 134,
    PurgeTopic = 135,
    CreatePartitions = 136,
    DeletePartitions = 137,
    DeleteSegments = 138,
    CreateConsumerGroup = 139,
    DeleteConsumerGroup = 140,
    CreateUser = 141,
    UpdateUser = 142,
    DeleteUser = 143,
    ChangePassword = 144,
    UpdatePermissions = 145,
    CreatePersonalAccessToken = 146,
    DeletePersonalAccessToken = 147,
    JoinConsumerGroup = 148,
    LeaveConsumerGroup = 149,
    UpdateResource = 150,
    SendMessages = 160,
    StoreConsumerOffset = 161,
    DeleteConsumerOffset = 162,
    RetireSession = 166,
    InstallConsumerGroupOwner = 167,
    TransitionPartitionHistory = 168,
    RetireConsumerGroupOwners = 169,
}

impl Operation {
    /// Every operation, for exhaustive tests.
    pub const ALL: [Self; 44] = [
        Self::Register,
        Self::NonReplicated,
        Self::Logout,
        Self::CreateTopicWithAssignments,
        Self::CreatePartitionsWithAssignments,
        Self::RemoveConsumerGroupMember,
        Self::CompleteConsumerGroupRevocation,
        Self::TruncatePartition,
        Self::FinalizeSession,
        Self::CompleteLifecycle,
        Self::UpdateStreamResolved,
        Self::UpdateTopicResolved,
        Self::UpdateUserResolved,
        Self::RewrapStreamKeys,
        Self::CreateStream,
        Self::UpdateStream,
        Self::DeleteStream,
        Self::PurgeStream,
        Self::CreateTopic,
        Self::UpdateTopic,
        Self::DeleteTopic,
        Self::PurgeTopic,
        Self::CreatePartitions,
        Self::DeletePartitions,
        Self::DeleteSegments,
        Self::CreateConsumerGroup,
        Self::DeleteConsumerGroup,
        Self::CreateUser,
        Self::UpdateUser,
        Self::DeleteUser,
        Self::ChangePassword,
        Self::UpdatePermissions,
        Self::CreatePersonalAccessToken,
        Self::DeletePersonalAccessToken,
        Self::JoinConsumerGroup,
        Self::LeaveConsumerGroup,
        Self::UpdateResource,
        Self::SendMessages,
        Self::StoreConsumerOffset,
        Self::DeleteConsumerOffset,
        Self::RetireSession,
        Self::InstallConsumerGroupOwner,
        Self::TransitionPartitionHistory,
        Self::RetireConsumerGroupOwners,
    ];

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|operation| operation.as_u8() == value)
    }

    // A fieldless `repr(u8)` enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// Whether the dialect's header decoder knows this value: 0.12.2 retired the old
    /// update/purge operations, 0.11.0 never had 70–75, 150 or 163–169.
    pub const fn is_valid_in(self, dialect: Dialect) -> bool {
        let value = self.as_u8();
        match dialect {
            Dialect::V0_12_2 => !matches!(value, 129 | 131 | 133 | 135 | 142),
            Dialect::V0_11_0 => matches!(value, 1..=3 | 64..=68 | 128..=149 | 160..=162),
        }
    }

    /// Whether a reply with this operation starts with a result section (§1.9, §12.1).
    /// `Register` is result-framed only when its body is non-empty; callers check that.
    pub const fn is_result_framed(self) -> bool {
        matches!(
            self.as_u8(),
            1 | 64..=68 | 70..=75 | 128..=137 | 139..=150 | 161 | 162
        )
    }

    /// Partition-plane operations carry the partition context and do not move the client's
    /// metadata watermark.
    pub const fn is_partition_plane(self) -> bool {
        matches!(
            self,
            Self::SendMessages | Self::StoreConsumerOffset | Self::DeleteConsumerOffset
        )
    }
}

//! Command codes and how they travel in the header (PROTOCOL.md §1.8, §4.0, §12.2).
//!
//! Codes with an operation of their own are implied by the header's `operation` byte; every
//! other code travels at header offset 196 under `NonReplicated`.

use crate::dialect::Dialect;
use crate::header::Operation;

/// Every command code either dialect defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum CommandCode {
    Ping = 1,
    GetStats = 10,
    GetSnapshotFile = 11,
    GetClusterMetadata = 12,
    DescribeOptions = 13,
    AttachConsumerSession = 14,
    BindSession = 15,
    UpdateResource = 16,
    GetMetadataChanges = 17,
    GetMe = 20,
    GetClient = 21,
    GetClients = 22,
    GetUser = 31,
    GetUsers = 32,
    CreateUser = 33,
    DeleteUser = 34,
    UpdateUser = 35,
    UpdatePermissions = 36,
    ChangePassword = 37,
    LoginUser = 38,
    LogoutUser = 39,
    LoginRegister = 40,
    GetPersonalAccessTokens = 41,
    CreatePersonalAccessToken = 42,
    DeletePersonalAccessToken = 43,
    LoginWithPersonalAccessToken = 44,
    LoginRegisterWithPat = 45,
    PollMessages = 100,
    SendMessages = 101,
    FlushUnsavedBuffer = 102,
    GetPollRouting = 103,
    PollMessagesOnPrimary = 104,
    GetPartitionRoute = 105,
    PollMessagesDeferred = 106,
    CancelDeferredRequest = 108,
    FetchMessages = 109,
    GetConsumerOffset = 120,
    StoreConsumerOffset = 121,
    DeleteConsumerOffset = 122,
    GetConsumerOffsetRouting = 123,
    GetStream = 200,
    GetStreams = 201,
    CreateStream = 202,
    DeleteStream = 203,
    UpdateStream = 204,
    PurgeStream = 205,
    GetTopic = 300,
    GetTopics = 301,
    CreateTopic = 302,
    DeleteTopic = 303,
    UpdateTopic = 304,
    PurgeTopic = 305,
    CreatePartitions = 402,
    DeletePartitions = 403,
    DeleteSegments = 503,
    GetConsumerGroup = 600,
    GetConsumerGroups = 601,
    CreateConsumerGroup = 602,
    DeleteConsumerGroup = 603,
    JoinConsumerGroup = 604,
    LeaveConsumerGroup = 605,
    SyncConsumerGroup = 606,
}

use CommandCode as C;
use Operation as O;

/// `(code, operation it travels with)`; `NonReplicated` codes sit at header offset 196.
const TABLE: [(CommandCode, Operation); 62] = [
    (C::Ping, O::NonReplicated),
    (C::GetStats, O::NonReplicated),
    (C::GetSnapshotFile, O::NonReplicated),
    (C::GetClusterMetadata, O::NonReplicated),
    (C::DescribeOptions, O::NonReplicated),
    (C::AttachConsumerSession, O::NonReplicated),
    (C::BindSession, O::NonReplicated),
    (C::UpdateResource, O::UpdateResource),
    (C::GetMetadataChanges, O::NonReplicated),
    (C::GetMe, O::NonReplicated),
    (C::GetClient, O::NonReplicated),
    (C::GetClients, O::NonReplicated),
    (C::GetUser, O::NonReplicated),
    (C::GetUsers, O::NonReplicated),
    (C::CreateUser, O::CreateUser),
    (C::DeleteUser, O::DeleteUser),
    (C::UpdateUser, O::UpdateUser),
    (C::UpdatePermissions, O::UpdatePermissions),
    (C::ChangePassword, O::ChangePassword),
    (C::LoginUser, O::NonReplicated),
    (C::LogoutUser, O::Logout),
    (C::LoginRegister, O::Register),
    (C::GetPersonalAccessTokens, O::NonReplicated),
    (C::CreatePersonalAccessToken, O::CreatePersonalAccessToken),
    (C::DeletePersonalAccessToken, O::DeletePersonalAccessToken),
    (C::LoginWithPersonalAccessToken, O::NonReplicated),
    (C::LoginRegisterWithPat, O::Register),
    (C::PollMessages, O::NonReplicated),
    (C::SendMessages, O::SendMessages),
    (C::FlushUnsavedBuffer, O::NonReplicated),
    (C::GetPollRouting, O::NonReplicated),
    (C::PollMessagesOnPrimary, O::NonReplicated),
    (C::GetPartitionRoute, O::NonReplicated),
    (C::PollMessagesDeferred, O::NonReplicated),
    (C::CancelDeferredRequest, O::NonReplicated),
    (C::FetchMessages, O::NonReplicated),
    (C::GetConsumerOffset, O::NonReplicated),
    (C::StoreConsumerOffset, O::StoreConsumerOffset),
    (C::DeleteConsumerOffset, O::DeleteConsumerOffset),
    (C::GetConsumerOffsetRouting, O::NonReplicated),
    (C::GetStream, O::NonReplicated),
    (C::GetStreams, O::NonReplicated),
    (C::CreateStream, O::CreateStream),
    (C::DeleteStream, O::DeleteStream),
    (C::UpdateStream, O::UpdateStream),
    (C::PurgeStream, O::PurgeStream),
    (C::GetTopic, O::NonReplicated),
    (C::GetTopics, O::NonReplicated),
    (C::CreateTopic, O::CreateTopic),
    (C::DeleteTopic, O::DeleteTopic),
    (C::UpdateTopic, O::UpdateTopic),
    (C::PurgeTopic, O::PurgeTopic),
    (C::CreatePartitions, O::CreatePartitions),
    (C::DeletePartitions, O::DeletePartitions),
    (C::DeleteSegments, O::DeleteSegments),
    (C::GetConsumerGroup, O::NonReplicated),
    (C::GetConsumerGroups, O::NonReplicated),
    (C::CreateConsumerGroup, O::CreateConsumerGroup),
    (C::DeleteConsumerGroup, O::DeleteConsumerGroup),
    (C::JoinConsumerGroup, O::JoinConsumerGroup),
    (C::LeaveConsumerGroup, O::LeaveConsumerGroup),
    (C::SyncConsumerGroup, O::NonReplicated),
];

impl CommandCode {
    pub fn from_u32(code: u32) -> Option<Self> {
        TABLE
            .iter()
            .find(|entry| entry.0.as_u32() == code)
            .map(|entry| entry.0)
    }

    // A fieldless `repr(u32)` enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u32(self) -> u32 {
        self as u32
    }

    /// The header operation this code travels with.
    pub fn operation(self) -> Operation {
        TABLE
            .iter()
            .find(|entry| entry.0 == self)
            .map_or(O::NonReplicated, |entry| entry.1)
    }

    /// Whether clients of `dialect` may send this code (§4.0 and §12.2). The legacy logins
    /// 38 and 44 are defined but never served; they are "known" so the server can answer
    /// them with `MalformedLogin`.
    pub const fn is_known_in(self, dialect: Dialect) -> bool {
        match dialect {
            Dialect::V0_12_2 => !matches!(
                self,
                C::AttachConsumerSession
                    | C::UpdateUser
                    | C::FlushUnsavedBuffer
                    | C::GetPollRouting
                    | C::PollMessagesOnPrimary
                    | C::GetConsumerOffsetRouting
                    | C::UpdateStream
                    | C::PurgeStream
                    | C::UpdateTopic
                    | C::PurgeTopic
            ),
            Dialect::V0_11_0 => !matches!(
                self,
                C::BindSession
                    | C::UpdateResource
                    | C::GetMetadataChanges
                    | C::GetPartitionRoute
                    | C::PollMessagesDeferred
                    | C::CancelDeferredRequest
                    | C::FetchMessages
            ),
        }
    }

    /// How many codes exist: [`Self::index`] is below it.
    pub const COUNT: usize = TABLE.len();

    /// A dense number for the code, `0..COUNT`, for tables indexed by command (metrics).
    pub fn index(self) -> usize {
        // Every variant has its row (`indexes_are_dense_and_distinct`): the fallback is
        // never taken.
        TABLE.iter().position(|entry| entry.0 == self).unwrap_or(0)
    }

    /// Every code, for exhaustive tests.
    pub fn all() -> impl Iterator<Item = Self> {
        TABLE.iter().map(|entry| entry.0)
    }
}

/// The code a request header carries: the explicit one for `NonReplicated`, otherwise the
/// one its operation implies. `Register` is ambiguous between 40 and 45; the login body's
/// decoder resolves it, so this returns 40 and callers check the body.
pub fn code_for_request(operation: Operation, non_replicated_code: u32) -> Option<u32> {
    if operation == O::NonReplicated {
        return Some(non_replicated_code);
    }
    TABLE
        .iter()
        .find(|entry| entry.1 == operation)
        .map(|entry| entry.0.as_u32())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_dense_and_distinct() {
        let indexes = CommandCode::all().map(CommandCode::index);
        assert!(indexes.eq(0..CommandCode::COUNT));
    }

    #[test]
    fn every_replicated_code_round_trips_through_its_operation() {
        for code in CommandCode::all() {
            let operation = code.operation();
            if operation == O::NonReplicated || code == C::LoginRegisterWithPat {
                continue;
            }
            assert_eq!(
                code_for_request(operation, 0),
                Some(code.as_u32()),
                "{code:?}"
            );
        }
        assert_eq!(code_for_request(O::NonReplicated, 201), Some(201));
    }

    #[test]
    fn operations_of_known_codes_are_valid_in_their_dialects() {
        for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
            for code in CommandCode::all().filter(|code| code.is_known_in(dialect)) {
                assert!(
                    code.operation().is_valid_in(dialect),
                    "{code:?} {dialect:?}"
                );
            }
        }
    }
}

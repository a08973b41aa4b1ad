//! Which shard answers a request (see the [`crate::node`] docs).
//!
//! The leader (shard 0) alone changes metadata, sessions and consumer groups, so it answers
//! every request that does or that reads group membership. The data path stays on the shard
//! the connection lives on: sends, polls and fetches of plain consumers, offsets, and reads of
//! metadata, which every shard's replica answers.

use proto::codes::CommandCode;
use proto::commands::Request;
use proto::header::{Operation, RequestHeader};
use proto::primitives::ConsumerKind;

use super::Server;
use crate::connection::Connection;

/// Where a request is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    Here,
    Leader,
}

pub(super) fn route(
    server: &Server,
    connection: &Connection,
    header: &RequestHeader,
    body: &[u8],
) -> Route {
    if server.place().is_leader() {
        return Route::Here;
    }
    if header.operation() == Some(Operation::Register) {
        return Route::Leader;
    }
    let Some(code) = header.code().and_then(CommandCode::from_u32) else {
        // Refused the same everywhere.
        return Route::Here;
    };
    if leader_only(code) || polls_a_group(code, body, connection) {
        Route::Leader
    } else {
        Route::Here
    }
}

/// The codes that change metadata, sessions or groups, or read group membership.
fn leader_only(code: CommandCode) -> bool {
    use CommandCode as C;
    matches!(
        code,
        C::BindSession
            | C::LoginUser
            | C::LogoutUser
            | C::LoginRegister
            | C::LoginWithPersonalAccessToken
            | C::LoginRegisterWithPat
            | C::GetMe
            | C::GetClient
            | C::GetClients
            | C::UpdateResource
            | C::CreateStream
            | C::DeleteStream
            | C::UpdateStream
            | C::PurgeStream
            | C::CreateTopic
            | C::DeleteTopic
            | C::UpdateTopic
            | C::PurgeTopic
            | C::CreatePartitions
            | C::DeletePartitions
            | C::DeleteSegments
            | C::CreateUser
            | C::DeleteUser
            | C::UpdateUser
            | C::UpdatePermissions
            | C::ChangePassword
            | C::CreatePersonalAccessToken
            | C::DeletePersonalAccessToken
            | C::GetConsumerGroup
            | C::GetConsumerGroups
            | C::CreateConsumerGroup
            | C::DeleteConsumerGroup
            | C::JoinConsumerGroup
            | C::LeaveConsumerGroup
            | C::SyncConsumerGroup
    )
}

/// A poll or fetch as a consumer-group member: the leader checks the member owns the
/// partition. A body that does not decode is refused where it is.
fn polls_a_group(code: CommandCode, body: &[u8], connection: &Connection) -> bool {
    use CommandCode as C;
    if !matches!(
        code,
        C::PollMessages | C::PollMessagesDeferred | C::FetchMessages
    ) {
        return false;
    }
    let kind = match Request::decode(code, body, connection.dialect) {
        Ok(Request::PollMessages(selector)) => selector.consumer.kind,
        Ok(Request::PollMessagesDeferred(deferred)) => deferred.selector.consumer.kind,
        Ok(Request::FetchMessages(fetch)) => fetch.consumer.kind,
        _ => return false,
    };
    kind == ConsumerKind::ConsumerGroup
}

//! Which shard answers a request (see the [`crate::node`] docs).
//!
//! The leader (the metadata sequencer) alone changes metadata, sessions and consumer groups,
//! so it answers every request that does or that reads group membership. The data path stays
//! on the shard the connection lives on: sends, polls and fetches of plain consumers,
//! offsets, and reads of metadata, which every shard's replica answers.

use proto::codes::CommandCode;
use proto::commands::Request;
use proto::primitives::ConsumerKind;

/// Whether a shard other than the leader must forward the decoded `request` to the leader.
/// Everything before decoding (header, session, authentication checks) answers the same on
/// every shard, so only decoded requests are routed; logins go to the leader undecoded.
pub(super) fn needs_leader(request: &Request<'_>) -> bool {
    leader_only(request.code()) || polls_a_group(request)
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
/// partition.
fn polls_a_group(request: &Request<'_>) -> bool {
    let kind = match request {
        Request::PollMessages(selector) => selector.consumer.kind,
        Request::PollMessagesDeferred(deferred) => deferred.selector.consumer.kind,
        Request::FetchMessages(fetch) => fetch.consumer.kind,
        _ => return false,
    };
    kind == ConsumerKind::ConsumerGroup
}

//! Which shard answers a request (see the [`crate::node`] docs).
//!
//! The leader (the metadata sequencer) alone changes metadata, sessions and consumer groups,
//! so it answers every request that does or that reads group membership. The data path stays
//! on the shard the connection lives on: sends, polls and fetches (a group member's are
//! checked against the groups' published views, [`crate::data::leases`]), offsets, and reads
//! of metadata, which every shard's replica answers.

use proto::codes::CommandCode;
use proto::commands::Request;

/// Whether a shard other than the leader must forward the decoded `request` to the leader.
/// Everything before decoding (header, session, authentication checks) answers the same on
/// every shard, so only decoded requests are routed; logins go to the leader undecoded.
pub(super) fn needs_leader(request: &Request<'_>) -> bool {
    leader_only(request.code())
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

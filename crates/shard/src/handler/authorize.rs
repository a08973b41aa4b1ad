//! The authorization table (PROTOCOL.md §7.5): every command code maps to one [`Action`],
//! and [`authorize`] checks that action for the calling user before any family handler runs.
//!
//! The table is one exhaustive `match`, so a new code cannot be added without a row. Codes §7.5
//! omits follow their equivalent: updates as UPDATE, purges as DELETE, the 0.11.0 flush as a
//! send, route lookups as send-or-poll. A target that does not resolve is not refused here:
//! the handler answers it with its not-found code, as the reference server does.
//! `tests/authorize_tests.rs` walks every code against a model written separately.

use proto::codes::CommandCode;
use proto::commands::Request;
use proto::commands::system::ResourceTarget;
use proto::primitives::Identifier;

use crate::metadata::permissions as allow;
use crate::metadata::{Metadata, User};
use crate::refusal::Refusal;

/// What a command asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Any logged-in user: session, ping, roster, own tokens, options, own details.
    AnyUser,
    ReadServer,
    ReadUsers,
    ManageUsers,
    /// Own password always; another's with `manage_users`.
    ChangePassword,
    ListStreams,
    ReadStream,
    CreateStream,
    ManageStream,
    ReadTopics,
    ReadTopic,
    UseGroups,
    CreateTopic,
    ManageTopic,
    Poll,
    Send,
    Route,
    /// `UPDATE_RESOURCE`: manage the topic, stream or users, by the request's scope.
    UpdateByScope,
}

/// The table: the action of every command code.
pub fn action(code: CommandCode) -> Action {
    use Action as A;
    use CommandCode as C;
    match code {
        C::Ping
        | C::GetClusterMetadata
        | C::DescribeOptions
        | C::GetMe
        | C::BindSession
        | C::LoginUser
        | C::LogoutUser
        | C::LoginRegister
        | C::LoginWithPersonalAccessToken
        | C::LoginRegisterWithPat
        | C::GetPersonalAccessTokens
        | C::CreatePersonalAccessToken
        | C::DeletePersonalAccessToken
        | C::CancelDeferredRequest
        | C::GetMetadataChanges
        | C::AttachConsumerSession
        | C::GetPollRouting
        | C::PollMessagesOnPrimary
        | C::GetConsumerOffsetRouting => A::AnyUser,
        C::GetStats | C::GetClient | C::GetClients | C::GetSnapshotFile => A::ReadServer,
        C::GetUser | C::GetUsers => A::ReadUsers,
        C::CreateUser | C::DeleteUser | C::UpdateUser | C::UpdatePermissions => A::ManageUsers,
        C::ChangePassword => A::ChangePassword,
        C::GetStreams => A::ListStreams,
        C::GetStream => A::ReadStream,
        C::CreateStream => A::CreateStream,
        C::DeleteStream | C::UpdateStream | C::PurgeStream => A::ManageStream,
        C::GetTopics => A::ReadTopics,
        C::GetTopic => A::ReadTopic,
        C::GetConsumerGroup
        | C::GetConsumerGroups
        | C::CreateConsumerGroup
        | C::DeleteConsumerGroup
        | C::JoinConsumerGroup
        | C::LeaveConsumerGroup
        | C::SyncConsumerGroup => A::UseGroups,
        C::CreateTopic => A::CreateTopic,
        C::DeleteTopic
        | C::UpdateTopic
        | C::PurgeTopic
        | C::CreatePartitions
        | C::DeletePartitions
        | C::DeleteSegments => A::ManageTopic,
        C::PollMessages
        | C::PollMessagesDeferred
        | C::FetchMessages
        | C::GetConsumerOffset
        | C::StoreConsumerOffset
        | C::DeleteConsumerOffset => A::Poll,
        C::SendMessages | C::FlushUnsavedBuffer => A::Send,
        C::GetPartitionRoute => A::Route,
        C::UpdateResource => A::UpdateByScope,
    }
}

/// What a request names, for the actions that are checked per stream or topic.
#[derive(Debug, Clone, Copy)]
enum Target<'r> {
    Nothing,
    Stream(&'r Identifier),
    Topic(&'r Identifier, &'r Identifier),
    User(&'r Identifier),
}

fn target<'r>(request: &'r Request<'_>) -> Target<'r> {
    use Request as R;
    match request {
        R::GetStream(r) => Target::Stream(&r.stream_id),
        R::DeleteStream(r) => Target::Stream(&r.stream_id),
        R::UpdateStream(r) => Target::Stream(&r.stream_id),
        R::PurgeStream(r) => Target::Stream(&r.stream_id),
        R::GetTopics(r) => Target::Stream(&r.stream_id),
        R::CreateTopic(r) => Target::Stream(&r.stream_id),
        R::GetTopic(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::DeleteTopic(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::UpdateTopic(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::PurgeTopic(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::CreatePartitions(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::DeletePartitions(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::DeleteSegments(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::GetConsumerGroup(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::GetConsumerGroups(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::CreateConsumerGroup(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::DeleteConsumerGroup(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::JoinConsumerGroup(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::LeaveConsumerGroup(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::SyncConsumerGroup(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::PollMessages(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::PollMessagesDeferred(r) => Target::Topic(&r.selector.stream_id, &r.selector.topic_id),
        R::FetchMessages(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::GetConsumerOffset(r) => Target::Topic(&r.selector.stream_id, &r.selector.topic_id),
        R::StoreConsumerOffset(r) => Target::Topic(&r.selector.stream_id, &r.selector.topic_id),
        R::DeleteConsumerOffset(r) => Target::Topic(&r.selector.stream_id, &r.selector.topic_id),
        R::SendMessages(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::FlushUnsavedBuffer(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::GetPartitionRoute(r) => Target::Topic(&r.stream_id, &r.topic_id),
        R::ChangePassword(r) => Target::User(&r.user_id),
        R::UpdateResource(r) => match &r.target {
            ResourceTarget::Topic {
                stream_id,
                topic_id,
            } => Target::Topic(stream_id, topic_id),
            ResourceTarget::Stream { stream_id } => Target::Stream(stream_id),
            ResourceTarget::User { user_id } => Target::User(user_id),
        },
        _ => Target::Nothing,
    }
}

/// The ids a request's target resolved to; `None` where it names no such level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resolved {
    pub stream_id: Option<u32>,
    pub topic_id: Option<u32>,
    pub user_id: Option<u32>,
}

/// `Ok` when `user` may send `request`, else `41 Unauthorized`. A stream, topic or user the
/// request names that does not exist passes: the handler answers it with its not-found code.
pub fn authorize(metadata: &Metadata, user: &User, request: &Request<'_>) -> Result<(), Refusal> {
    let resolved = match target(request) {
        Target::Nothing => Some(Resolved::default()),
        Target::Stream(stream) => metadata.stream(stream).ok().map(|stream| Resolved {
            stream_id: Some(stream.id),
            ..Resolved::default()
        }),
        Target::Topic(stream, topic) => {
            metadata
                .topic(stream, topic)
                .ok()
                .map(|(stream, topic)| Resolved {
                    stream_id: Some(stream.id),
                    topic_id: Some(topic.id),
                    user_id: None,
                })
        }
        Target::User(id) => metadata.user(id).ok().map(|target| Resolved {
            user_id: Some(target.id),
            ..Resolved::default()
        }),
    };
    let Some(resolved) = resolved else {
        return Ok(());
    };
    allow::require(allowed(action(request.code()), user, resolved))
}

/// Whether `user` may do `action` on the resolved target: the rules of §7.5 over the
/// permission helpers.
pub fn allowed(action: Action, user: &User, target: Resolved) -> bool {
    let (stream, topic) = (target.stream_id, target.topic_id);
    match (action, stream, topic) {
        (Action::AnyUser, _, _) => true,
        (Action::ReadServer, _, _) => allow::can_read_server(user),
        (Action::ReadUsers, _, _) => allow::can_read_users(user),
        (Action::ManageUsers, _, _) | (Action::UpdateByScope, None, None) => {
            allow::can_manage_users(user)
        }
        (Action::ChangePassword, _, _) => match target.user_id {
            Some(target_user) => allow::can_change_password(user, target_user),
            None => allow::can_manage_users(user),
        },
        (Action::ListStreams, _, _) => allow::can_list_streams(user),
        (Action::CreateStream, _, _) => allow::can_create_stream(user),
        (Action::ReadStream, Some(stream), _) => allow::can_read_stream(user, stream),
        (Action::ManageStream | Action::UpdateByScope, Some(stream), None) => {
            allow::can_manage_stream(user, stream)
        }
        (Action::ReadTopics, Some(stream), _) => allow::can_read_topics(user, stream),
        (Action::CreateTopic, Some(stream), _) => allow::can_create_topic(user, stream),
        (Action::ReadTopic, Some(stream), Some(topic)) => {
            allow::can_read_topic(user, stream, topic)
        }
        (Action::UseGroups, Some(stream), Some(topic)) => {
            allow::can_use_groups(user, stream, topic)
        }
        (Action::ManageTopic | Action::UpdateByScope, Some(stream), Some(topic)) => {
            allow::can_manage_topic(user, stream, topic)
        }
        (Action::Poll, Some(stream), Some(topic)) => allow::can_poll(user, stream, topic),
        (Action::Send, Some(stream), Some(topic)) => allow::can_send(user, stream, topic),
        (Action::Route, Some(stream), Some(topic)) => allow::can_route(user, stream, topic),
        // The action needs a target level the request did not name: the table and
        // `target` disagree. Refused, so a gap fails closed.
        (action, ..) => {
            debug_assert!(
                false,
                "authorize: {action:?} without its target: {target:?}"
            );
            log::error!("authorize: no rule for {action:?} with {target:?}; refused");
            false
        }
    }
}

#[cfg(test)]
#[path = "authorize_tests.rs"]
mod tests;

//! Request handling: the pipeline every request takes ([`Server::handle`](crate::Server::handle),
//! in `pipeline.rs`: header, session and authentication checks, decoding, routing to the
//! sequencer), the messages from other shards (`inbound.rs`), and one file per command family.
//!
//! Each family module exposes `handle(server, connection, header, request) -> Outcome` for
//! every code it owns. A family not wired yet answers `InvalidCommand` (3), as for an unknown
//! code.

pub mod authorize;
mod commit;
pub(crate) mod groups;
mod inbound;
pub(crate) mod messages;
pub(crate) mod offsets;
pub(crate) mod partitions;
pub(crate) mod pipeline;
mod route;
pub(crate) mod routing;
pub mod scrape;
pub(crate) mod session;
pub(crate) mod streams;
pub(crate) mod system;
pub(crate) mod tokens;
pub(crate) mod topics;
pub(crate) mod update_resource;
pub(crate) mod users;

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
#[cfg(feature = "encryption")]
mod credential_seal_tests;
#[cfg(test)]
mod metadata_tests;
#[cfg(test)]
mod race_tests;

use proto::codes::CommandCode;
use proto::commands::Request;
use proto::header::RequestHeader;

use crate::connection::Connection;
use crate::outcome::Outcome;
use crate::refusal::Refusal;
use crate::server::Server;

/// The command families, one handler module each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Session,
    System,
    /// `UPDATE_RESOURCE`: patches a stream, topic or user by scope.
    UpdateResource,
    Streams,
    Topics,
    Partitions,
    Users,
    Tokens,
    Messages,
    Offsets,
    Groups,
    /// Codes only a clustered 0.11.0 server answered: refused.
    Clustered,
}

impl Family {
    pub(crate) fn of(code: CommandCode) -> Self {
        use CommandCode as C;
        match code {
            C::BindSession
            | C::LoginUser
            | C::LogoutUser
            | C::LoginRegister
            | C::LoginWithPersonalAccessToken
            | C::LoginRegisterWithPat => Self::Session,
            C::Ping
            | C::GetStats
            | C::GetSnapshotFile
            | C::GetClusterMetadata
            | C::DescribeOptions
            | C::GetMetadataChanges
            | C::GetMe
            | C::GetClient
            | C::GetClients
            | C::GetPartitionRoute
            | C::CancelDeferredRequest => Self::System,
            C::UpdateResource => Self::UpdateResource,
            C::GetStream
            | C::GetStreams
            | C::CreateStream
            | C::DeleteStream
            | C::UpdateStream
            | C::PurgeStream => Self::Streams,
            C::GetTopic
            | C::GetTopics
            | C::CreateTopic
            | C::DeleteTopic
            | C::UpdateTopic
            | C::PurgeTopic => Self::Topics,
            C::CreatePartitions | C::DeletePartitions | C::DeleteSegments => Self::Partitions,
            C::GetUser
            | C::GetUsers
            | C::CreateUser
            | C::DeleteUser
            | C::UpdateUser
            | C::UpdatePermissions
            | C::ChangePassword => Self::Users,
            C::GetPersonalAccessTokens
            | C::CreatePersonalAccessToken
            | C::DeletePersonalAccessToken => Self::Tokens,
            C::PollMessages
            | C::SendMessages
            | C::FlushUnsavedBuffer
            | C::PollMessagesDeferred
            | C::FetchMessages => Self::Messages,
            C::GetConsumerOffset | C::StoreConsumerOffset | C::DeleteConsumerOffset => {
                Self::Offsets
            }
            C::GetConsumerGroup
            | C::GetConsumerGroups
            | C::CreateConsumerGroup
            | C::DeleteConsumerGroup
            | C::JoinConsumerGroup
            | C::LeaveConsumerGroup
            | C::SyncConsumerGroup => Self::Groups,
            C::AttachConsumerSession
            | C::GetPollRouting
            | C::PollMessagesOnPrimary
            | C::GetConsumerOffsetRouting => Self::Clustered,
        }
    }
}

/// Hands a decoded request of an authenticated connection to its family.
pub(crate) async fn dispatch(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let family = Family::of(request.code());
    if let Err(refusal) = authorize_caller(server, connection, &request) {
        log::info!(
            "client {}: {:?} refused: {refusal:?}",
            connection.client_number,
            request.code()
        );
        let commit = server.commit_number();
        let operation = operation_of(header);
        return match family {
            // These families answer refusals in the header status, as their handlers do.
            Family::Messages | Family::Offsets | Family::Groups => {
                Outcome::refused(operation, refusal, commit)
            }
            _ => Outcome::rejected(operation, refusal, commit),
        };
    }
    // One arm per family, so wiring a family in is a one-line change.
    #[allow(clippy::match_same_arms)]
    match family {
        Family::Session => session::handle(server, connection, header, request),
        Family::System => system::handle(server, connection, header, request),
        Family::UpdateResource => {
            update_resource::handle(server, connection, header, request).await
        }
        Family::Streams => streams::handle(server, connection, header, request).await,
        Family::Topics => topics::handle(server, connection, header, request).await,
        Family::Partitions => partitions::handle(server, connection, header, request).await,
        Family::Users => users::handle(server, connection, header, request).await,
        Family::Tokens => tokens::handle(server, connection, header, request).await,
        Family::Messages => messages::handle(server, connection, header, request).await,
        Family::Offsets => offsets::handle(server, connection, header, request).await,
        Family::Groups => groups::handle(server, connection, header, request).await,
        Family::Clustered => routing::handle(server, connection, header, request).await,
    }
}

/// A `SEND_MESSAGES` authorized, checked and planned before dispatch, so the pipeline can
/// append it with the body it owns; `None` for every other request. A refusal is answered
/// in the header status, as the message family answers.
pub(crate) fn prepare_send(
    server: &Server,
    connection: &Connection,
    header: &RequestHeader,
    request: &Request<'_>,
    body: &[u8],
) -> Option<Result<messages::PreparedSend, Outcome>> {
    let Request::SendMessages(send) = request else {
        return None;
    };
    let prepared = authorize_caller(server, connection, request)
        .and_then(|()| messages::prepare_send(server, connection, header, send, body));
    Some(prepared.map_err(|refusal| {
        log::info!(
            "client {}: SendMessages refused: {refusal:?}",
            connection.client_number
        );
        Outcome::refused(operation_of(header), refusal, server.commit_number())
    }))
}

/// The authorization table's verdict for the connection's user (PROTOCOL.md §7.5); a
/// connection whose user is gone acts as nobody (`40 Unauthenticated`).
fn authorize_caller(
    server: &Server,
    connection: &Connection,
    request: &Request<'_>,
) -> Result<(), Refusal> {
    if authorize::action(request.code()) == authorize::Action::AnyUser {
        // Includes what an unauthenticated connection may send (PING, BIND_SESSION).
        return Ok(());
    }
    let metadata = server.metadata.borrow();
    let user = connection
        .user_id()
        .and_then(|id| metadata.users.get(&id))
        .ok_or(Refusal::Unauthenticated)?;
    authorize::authorize(&metadata, user, request)
}

/// The header's operation, which parsing has validated.
pub(crate) fn operation_of(header: &RequestHeader) -> proto::header::Operation {
    header
        .operation()
        .expect("RequestHeader::parse accepts known operations only")
}

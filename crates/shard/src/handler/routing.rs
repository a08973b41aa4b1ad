//! The 0.11.0 routing family (PROTOCOL.md §12.2), sent only by clients of a multi-node
//! roster (Python `apache-iggy` 0.9.0 in cluster mode): `GET_POLL_ROUTING` (103),
//! `GET_CONSUMER_OFFSET_ROUTING` (123), `ATTACH_CONSUMER_SESSION` (14) and
//! `POLL_MESSAGES_ON_PRIMARY` (104).
//!
//! Such a client keeps group membership on its first connection (the coordinator) and
//! moves auto-commit polls and offset writes to a data connection on the partition's
//! primary: it asks the coordinator for a route (the coordinator's session and the
//! primary's roster entry), opens and logs in a data connection there, attaches it to the
//! coordinator's session, then polls (104) or writes offsets (121, 122) on it. Every
//! partition's primary is the cluster's, and a data connection attached to a session acts
//! as that session's client in consumer groups ([`consumer_client`]). A node that names no
//! primary (between views, recovering) answers `58`, which the client retries.

use proto::commands::legacy::{AttachConsumerSession, ConsumerRouting, LegacyClusterNode};
use proto::commands::{Empty, Request};
use proto::header::RequestHeader;
use proto::primitives::{Consumer, ConsumerKind};

use super::{messages, operation_of};
use crate::connection::Connection;
use crate::outcome::Outcome;
use crate::refusal::Refusal;
use crate::server::Server;

pub(crate) async fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let operation = operation_of(header);
    let commit = server.commit_number();
    let answered = match request {
        Request::AttachConsumerSession(attach) => attach_session(server, connection, &attach)
            .map(|()| Outcome::value(operation, Empty, commit)),
        Request::GetPollRouting(_) | Request::GetConsumerOffsetRouting(_) => {
            consumer_routing(server, connection, header)
                .map(|routing| Outcome::value(operation, routing, commit))
        }
        Request::PollMessagesOnPrimary(poll) => {
            let poll = Request::PollMessages(poll.selector);
            return messages::handle(server, connection, header, poll).await;
        }
        _ => Err(Refusal::Malformed),
    };
    answered.unwrap_or_else(|refusal| Outcome::refused(operation, refusal, commit))
}

/// The route of a poll or offset write: this connection's session, to attach a data
/// connection to, and the primary to open it on.
fn consumer_routing(
    server: &Server,
    connection: &Connection,
    header: &RequestHeader,
) -> Result<ConsumerRouting, Refusal> {
    let bound = connection.session.ok_or(Refusal::Unauthenticated)?;
    Ok(ConsumerRouting {
        client: header.client.get(),
        session: bound.session,
        metadata_watermark: server.commit_number(),
        primary: primary_node(server)?,
    })
}

/// The roster entry of the node that serves partitions now: this one outside cluster mode,
/// the primary of the current view in it (`58` between views).
fn primary_node(server: &Server) -> Result<LegacyClusterNode, Refusal> {
    let metadata = super::system::cluster_metadata(server);
    let primary = match server.replication() {
        None => metadata.nodes.into_iter().next(),
        Some(replication) if replication.status.is_normal() => {
            let primary = replication.status.primary();
            metadata
                .nodes
                .into_iter()
                .find(|node| node.replica_id == primary)
        }
        Some(_) => None,
    };
    let node = primary.ok_or(Refusal::NotAccepted)?;
    Ok(LegacyClusterNode {
        name: node.name,
        ip: node.ip,
        tcp_port: node.tcp_port,
        quic_port: node.quic_port,
        http_port: node.http_port,
        websocket_port: node.websocket_port,
        role: node.role.as_u8(),
        status: node.status.as_u8(),
    })
}

/// Attaches `connection` to the live session `attach` names, which must be its own user's:
/// a session of another user would lend its group identity. A session no longer live (its
/// client reconnected, logged out) answers `58`, so the client asks for a route again.
fn attach_session(
    server: &Server,
    connection: &mut Connection,
    attach: &AttachConsumerSession,
) -> Result<(), Refusal> {
    let user_id = connection.user_id().ok_or(Refusal::Unauthenticated)?;
    let live = server.sessions.borrow().live(attach.client, attach.session);
    let entry = live.ok_or(Refusal::NotAccepted)?;
    if entry.user_id != user_id {
        return Err(Refusal::Forbidden);
    }
    connection.consumer_session = Some((attach.client, attach.session));
    Ok(())
}

/// The client a poll or offset write of `consumer` on `connection` acts as: for a consumer
/// group, the session the connection was attached to, while that is live and its user's;
/// otherwise (no attachment, or another kind of consumer) the request's own client.
pub(crate) fn consumer_client(
    server: &Server,
    connection: &Connection,
    header: &RequestHeader,
    consumer: Option<&Consumer>,
) -> Result<u128, Refusal> {
    let group = consumer.is_some_and(|consumer| consumer.kind == ConsumerKind::ConsumerGroup);
    let Some((client, session)) = connection.consumer_session.filter(|_| group) else {
        return Ok(header.client.get());
    };
    let live = server.sessions.borrow().live(client, session);
    match live {
        Some(entry) if Some(entry.user_id) == connection.user_id() => Ok(client),
        // Ended, or another user logged in on this connection since: attach again.
        _ => Err(Refusal::NotAccepted),
    }
}

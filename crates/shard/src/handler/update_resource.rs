//! `UPDATE_RESOURCE` (16, PROTOCOL.md §4.1, §7.4): the 0.12.2 patch of a topic (scope 1),
//! stream (scope 2) or user (scope 3) by option keys, answered with operation 150 and a
//! result section only.

use proto::commands::Request;
use proto::header::RequestHeader;

use super::commit::Call;
use crate::connection::Connection;
use crate::metadata::validate;
use crate::outcome::Outcome;
use crate::refusal::Refusal;
use crate::server::Server;

pub(crate) async fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let call = Call::of(header, connection);
    let Request::UpdateResource(update) = request else {
        return call.reject(server, Refusal::Malformed);
    };
    let defaults = server.topic_defaults();
    call.commit_checked(server, |metadata, actor| {
        validate::update_resource(metadata, actor, &update, &defaults)
    })
    .await
}

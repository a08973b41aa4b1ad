//! The stream family (PROTOCOL.md §4.6, §12.2): `GET_STREAM` (200), `GET_STREAMS` (201),
//! `CREATE_STREAM` (202), `DELETE_STREAM` (203), and the 0.11.0 `UPDATE_STREAM` (204) and
//! `PURGE_STREAM` (205). Writes are validated by [`crate::metadata::validate`] and committed;
//! a purge is data-plane only (messages and stored offsets go, the stream stays).

use proto::commands::Empty;
use proto::commands::Request;
use proto::commands::legacy::PurgeStream;
use proto::header::RequestHeader;

use super::commit::{Call, DataFigures};
use crate::cluster::ReplicatedOp;
use crate::connection::Connection;
use crate::metadata::permissions::{can_list_streams, can_manage_stream, can_read_stream, require};
use crate::metadata::{Metadata, MetadataOp, User, responses, validate};
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
    let figures = DataFigures::of(server);
    match request {
        Request::GetStream(get) => {
            let metadata = server.metadata.borrow();
            let found = call.actor(&metadata).and_then(|actor| {
                let Ok(stream) = metadata.stream(&get.stream_id) else {
                    return Ok(None);
                };
                require(can_read_stream(actor, stream.id))?;
                Ok(Some(responses::stream_details(stream, &figures)))
            });
            match found {
                Ok(details) => call.answer(server, details),
                Err(refusal) => call.reject(server, refusal),
            }
        }
        Request::GetStreams(_) => {
            let metadata = server.metadata.borrow();
            let listed = call.actor(&metadata).and_then(|actor| {
                require(can_list_streams(actor))?;
                Ok(responses::streams(&metadata, &figures, |_| true))
            });
            match listed {
                Ok(streams) => call.answer(server, streams),
                Err(refusal) => call.reject(server, refusal),
            }
        }
        Request::CreateStream(create) => {
            let check = |metadata: &Metadata, actor: &User| {
                validate::create_stream(metadata, actor, &create, server.now_us())
            };
            call.commit(server, check, |metadata, figures, op| {
                let MetadataOp::CreateStream { id, .. } = op else {
                    return None;
                };
                let stream = metadata.streams.get(id)?;
                Some(responses::stream_details(stream, figures))
            })
            .await
        }
        Request::DeleteStream(delete) => {
            call.commit_checked(server, |metadata, actor| {
                validate::delete_stream(metadata, actor, &delete)
            })
            .await
        }
        Request::UpdateStream(update) => {
            call.commit_checked(server, |metadata, actor| {
                validate::update_stream_legacy(metadata, actor, &update)
            })
            .await
        }
        Request::PurgeStream(purge) => purge_stream(server, call, &purge).await,
        _ => call.reject(server, Refusal::Malformed),
    }
}

/// `PURGE_STREAM` (205): every message and stored offset of the stream's partitions.
async fn purge_stream(server: &Server, call: Call, purge: &PurgeStream) -> Outcome {
    let stream_id = {
        let metadata = server.metadata.borrow();
        let target = call.actor(&metadata).and_then(|actor| {
            let stream = metadata.stream(&purge.stream_id)?;
            require(can_manage_stream(actor, stream.id))?;
            Ok(stream.id)
        });
        match target {
            Ok(stream_id) => stream_id,
            Err(refusal) => return call.reject(server, refusal),
        }
    };
    if let Some(replication) = server.replication() {
        let op = ReplicatedOp::Purge {
            stream_id,
            topic_id: None,
            origin: call.origin,
        };
        return call.truncate(server, replication, &op).await;
    }
    match server.data.purge(stream_id, None).await {
        Ok(()) => call.answer(server, Empty),
        Err(error) => {
            log::error!("purge of stream {stream_id} failed: {error}");
            call.reject(server, error.refusal())
        }
    }
}

//! The topic family (PROTOCOL.md §4.7, §12.2): `GET_TOPIC` (300), `GET_TOPICS` (301),
//! `CREATE_TOPIC` (302), `DELETE_TOPIC` (303), and the 0.11.0 `UPDATE_TOPIC` (304) and
//! `PURGE_TOPIC` (305). A purge is data-plane only: messages and stored offsets go, the
//! topic, its partitions and groups stay.

use proto::commands::Empty;
use proto::commands::Request;
use proto::commands::legacy::PurgeTopic;
use proto::commands::topics::Topics;
use proto::header::RequestHeader;

use super::commit::{Call, DataFigures};
use crate::cluster::ReplicatedOp;
use crate::connection::Connection;
use crate::metadata::permissions::{can_manage_topic, can_read_topic, can_read_topics, require};
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
    let defaults = server.topic_defaults();
    match request {
        request @ (Request::GetTopic(_) | Request::GetTopics(_)) => read(server, call, &request),
        Request::CreateTopic(create) => {
            let check = |metadata: &Metadata, actor: &User| {
                validate::create_topic(metadata, actor, &create, server.now_us(), &defaults)
            };
            call.commit(server, check, |metadata, figures, op| {
                let MetadataOp::CreateTopic { stream_id, id, .. } = op else {
                    return None;
                };
                let topic = metadata.streams.get(stream_id)?.topics.get(id)?;
                let commit = metadata.commit;
                Some(responses::topic_details(*stream_id, topic, figures, commit))
            })
            .await
        }
        Request::DeleteTopic(delete) => {
            call.commit_checked(server, |metadata, actor| {
                validate::delete_topic(metadata, actor, &delete)
            })
            .await
        }
        Request::UpdateTopic(update) => {
            call.commit_checked(server, |metadata, actor| {
                validate::update_topic_legacy(metadata, actor, &update, &defaults)
            })
            .await
        }
        Request::PurgeTopic(purge) => purge_topic(server, call, &purge).await,
        _ => call.reject(server, Refusal::Malformed),
    }
}

/// `GET_TOPIC` (300) and `GET_TOPICS` (301).
fn read(server: &Server, call: Call, request: &Request<'_>) -> Outcome {
    match request {
        Request::GetTopic(get) => {
            let metadata = server.metadata.borrow();
            let found = call.actor(&metadata).and_then(|actor| {
                // An unknown stream or topic is the empty "not found" body.
                let Ok((stream, topic)) = metadata.topic(&get.stream_id, &get.topic_id) else {
                    return Ok(None);
                };
                require(can_read_topic(actor, stream.id, topic.id))?;
                let commit = metadata.commit;
                Ok(Some(responses::topic_details(
                    stream.id,
                    topic,
                    &DataFigures::of(server),
                    commit,
                )))
            });
            match found {
                Ok(details) => call.answer(server, details),
                Err(refusal) => call.reject(server, refusal),
            }
        }
        Request::GetTopics(list) => {
            let metadata = server.metadata.borrow();
            let listed = call.actor(&metadata).and_then(|actor| {
                // An unknown stream lists no topics, as the reference answers.
                let Ok(stream) = metadata.stream(&list.stream_id) else {
                    return Ok(Topics(Vec::new()));
                };
                require(can_read_topics(actor, stream.id))?;
                Ok(responses::topics(stream, &DataFigures::of(server)))
            });
            match listed {
                Ok(topics) => call.answer(server, topics),
                Err(refusal) => call.reject(server, refusal),
            }
        }
        _ => call.reject(server, Refusal::Malformed),
    }
}

/// `PURGE_TOPIC` (305): every message and stored offset of the topic's partitions.
async fn purge_topic(server: &Server, call: Call, purge: &PurgeTopic) -> Outcome {
    let (stream_id, topic_id) = {
        let metadata = server.metadata.borrow();
        let target = call.actor(&metadata).and_then(|actor| {
            let (stream, topic) = metadata.topic(&purge.stream_id, &purge.topic_id)?;
            require(can_manage_topic(actor, stream.id, topic.id))?;
            Ok((stream.id, topic.id))
        });
        match target {
            Ok(ids) => ids,
            Err(refusal) => return call.reject(server, refusal),
        }
    };
    if let Some(replication) = server.replication() {
        let op = ReplicatedOp::Purge {
            stream_id,
            topic_id: Some(topic_id),
            origin: call.origin,
        };
        return call.truncate(server, replication, &op).await;
    }
    match server.data.purge(stream_id, Some(topic_id)).await {
        Ok(()) => call.answer(server, Empty),
        Err(error) => {
            log::error!("purge of topic {stream_id}/{topic_id} failed: {error}");
            call.reject(server, error.refusal())
        }
    }
}

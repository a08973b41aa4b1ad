//! The partition family (PROTOCOL.md §4.8): `CREATE_PARTITIONS` (402) and
//! `DELETE_PARTITIONS` (403) are metadata ops (the data plane opens or removes the
//! partitions as it follows the commit); `DELETE_SEGMENTS` (503) truncates one partition's
//! log head on the data plane and is answered with operation 138: an empty body on success,
//! the header `status` on refusal (it is not result-framed).

use proto::commands::Empty;
use proto::commands::Request;
use proto::commands::partitions::DeleteSegments;
use proto::header::RequestHeader;

use super::commit::Call;
use crate::cluster::ReplicatedOp;
use crate::connection::Connection;
use crate::data::PartitionKey;
use crate::metadata::permissions::{can_manage_topic, require};
use crate::metadata::validate;
use crate::outcome::Outcome;
use crate::refusal::{Missing, Refusal};
use crate::server::Server;

pub(crate) async fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let call = Call::of(header, connection);
    match request {
        Request::CreatePartitions(create) => {
            call.commit_checked(server, |metadata, actor| {
                validate::create_partitions(metadata, actor, &create, server.now_us())
            })
            .await
        }
        Request::DeletePartitions(delete) => {
            call.commit_checked(server, |metadata, actor| {
                validate::delete_partitions(metadata, actor, &delete)
            })
            .await
        }
        Request::DeleteSegments(delete) => delete_segments(server, call, &delete).await,
        _ => call.reject(server, Refusal::Malformed),
    }
}

/// `DELETE_SEGMENTS` (503): `1009`, `2010`, `41`, `3007` unknown partition; a count of 0
/// deletes nothing.
async fn delete_segments(server: &Server, call: Call, delete: &DeleteSegments) -> Outcome {
    let key = {
        let metadata = server.metadata.borrow();
        let target = call.actor(&metadata).and_then(|actor| {
            let (stream, topic) = metadata.topic(&delete.stream_id, &delete.topic_id)?;
            require(can_manage_topic(actor, stream.id, topic.id))?;
            if !topic.partitions.contains_key(&delete.partition_id) {
                return Err(Refusal::Missing(Missing::Partition));
            }
            Ok(PartitionKey {
                stream_id: stream.id,
                topic_id: topic.id,
                partition_id: delete.partition_id,
            })
        });
        match target {
            Ok(key) => key,
            Err(refusal) => return call.reject(server, refusal),
        }
    };
    if let Some(replication) = server.replication() {
        let below = match server.data.segments_cut(key, delete.segments_count).await {
            Ok(Some(below)) => below,
            // No sealed segment would go: nothing to replicate.
            Ok(None) => return call.answer(server, Empty),
            Err(error) => return call.reject(server, error.refusal()),
        };
        let op = ReplicatedOp::DeleteSegments {
            key,
            below,
            origin: call.origin,
        };
        return call.truncate(server, replication, &op).await;
    }
    match server
        .data
        .delete_segments(key, delete.segments_count)
        .await
    {
        Ok(Some(_)) => call.answer(server, Empty),
        Ok(None) => call.reject(server, Refusal::Missing(Missing::Partition)),
        Err(error) => {
            log::error!("deleting segments of {key:?} failed: {error}");
            call.reject(server, error.refusal())
        }
    }
}

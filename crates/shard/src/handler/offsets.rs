//! The consumer-offset family: `GET_CONSUMER_OFFSET` (120), `STORE_CONSUMER_OFFSET` (121) and
//! `DELETE_CONSUMER_OFFSET` (122), over [`crate::data::DataPlane`]. Partition-plane refusals
//! travel in the header status (empty body), which the SDK accepts for 121/122 (§4.5).

use proto::commands::offsets::OffsetSelector;
use proto::commands::{Empty, Request};
use proto::header::{Operation, RequestHeader};

use super::messages::check_topic_access;
use crate::connection::Connection;
use crate::metadata::permissions::can_poll;
use crate::outcome::Outcome;
use crate::refusal::{Missing, Refusal};
use crate::server::Server;

pub(crate) async fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let operation = header.operation().unwrap_or(Operation::NonReplicated);
    let commit = server.metadata.borrow().commit;
    let selector = match &request {
        Request::GetConsumerOffset(get) => Some(&get.selector),
        Request::StoreConsumerOffset(store) => Some(&store.selector),
        Request::DeleteConsumerOffset(delete) => Some(&delete.selector),
        _ => None,
    };
    if let Some(selector) = selector {
        let (stream, topic) = (&selector.stream_id, &selector.topic_id);
        if let Err(refusal) = check_topic_access(server, connection, stream, topic, can_poll) {
            return Outcome::refused(operation, refusal, commit);
        }
    }
    match request {
        Request::GetConsumerOffset(get) => {
            let found = server
                .data
                .get_offset(&server.metadata.borrow(), &get.selector);
            match found {
                Ok(Some(offset)) => Outcome::value(operation, offset, commit),
                Ok(None) => Outcome::empty(operation, commit),
                Err(refusal) => Outcome::refused(operation, refusal, commit),
            }
        }
        Request::StoreConsumerOffset(store) => {
            let consumer = Some(&store.selector.consumer);
            let writer = match super::routing::consumer_client(server, connection, header, consumer)
            {
                Ok(client_id) => (client_id, operation, commit),
                Err(refusal) => return Outcome::refused(operation, refusal, commit),
            };
            store_offset(server, &store.selector, store.offset, writer).await
        }
        Request::DeleteConsumerOffset(delete) => {
            let consumer = Some(&delete.selector.consumer);
            let writer = match super::routing::consumer_client(server, connection, header, consumer)
            {
                Ok(client_id) => (client_id, operation, commit),
                Err(refusal) => return Outcome::refused(operation, refusal, commit),
            };
            delete_offset(server, &delete.selector, writer).await
        }
        _ => Outcome::refused(operation, Refusal::Malformed, commit),
    }
}

/// The writing client's SDK id (a data connection attached to a session writes as its
/// client, `routing`), and the operation and commit its answer carries.
type Writer = (u128, Operation, u64);

/// `STORE_CONSUMER_OFFSET` (121); replicated first in cluster mode.
async fn store_offset(
    server: &Server,
    selector: &OffsetSelector,
    offset: u64,
    (client_id, operation, commit): Writer,
) -> Outcome {
    let plan = {
        let metadata = server.metadata.borrow();
        server
            .data
            .plan_store_offset(&metadata, selector, offset)
            .and_then(|plan| {
                server
                    .data
                    .check_offset_writer(selector, &plan, client_id)?;
                Ok(plan)
            })
    };
    let plan = match plan {
        Ok(plan) => plan,
        Err(refusal) => return Outcome::refused(operation, refusal, commit),
    };
    let stored = match server.replication() {
        Some(replication) => {
            let op = crate::cluster::ReplicatedOp::StoreOffset {
                key: plan.key,
                owner: plan.owner,
                offset,
                forward_only: false,
            };
            let synced = offsets_synced(server, plan.key);
            match replication.submit(&op, synced).await {
                Ok(crate::cluster::Applied::Offset(_, op)) => Ok(op),
                Ok(_) => Err(Refusal::Internal),
                Err(refusal) => Err(refusal),
            }
        }
        None => (server.data.store_offset(&plan, offset).await)
            .map(|()| 0)
            .map_err(|error| error.refusal()),
    };
    // The committed-result marker lets a client whose first attempt's answer was lost (its
    // node killed) trust the retry's answer at once (§1.5); without it the SDK holds the
    // session's lane until its 30 s budget ends, stalling every other call of the session.
    match stored {
        Ok(op) => Outcome::value(operation, Empty, commit).committed(op),
        Err(refusal) => Outcome::refused(operation, refusal, commit),
    }
}

/// `DELETE_CONSUMER_OFFSET` (122); replicated first in cluster mode.
async fn delete_offset(
    server: &Server,
    selector: &OffsetSelector,
    (client_id, operation, commit): Writer,
) -> Outcome {
    let plan = {
        let metadata = server.metadata.borrow();
        server
            .data
            .plan_delete_offset(&metadata, selector)
            .and_then(|plan| {
                server
                    .data
                    .check_offset_writer(selector, &plan, client_id)?;
                Ok(plan)
            })
    };
    let plan = match plan {
        Ok(plan) => plan,
        Err(refusal) => return Outcome::refused(operation, refusal, commit),
    };
    let deleted = match server.replication() {
        Some(replication) => {
            let op = crate::cluster::ReplicatedOp::DeleteOffset {
                key: plan.key,
                owner: plan.owner,
            };
            let synced = offsets_synced(server, plan.key);
            match replication.submit(&op, synced).await {
                Ok(crate::cluster::Applied::Offset(deleted, op)) => Ok((deleted, op)),
                Ok(_) => Err(Refusal::Internal),
                Err(refusal) => Err(refusal),
            }
        }
        None => (server.data.delete_offset(&plan).await)
            .map(|deleted| (deleted, 0))
            .map_err(|error| error.refusal()),
    };
    match deleted {
        Ok((true, op)) => Outcome::value(operation, Empty, commit).committed(op),
        Ok((false, _)) => {
            Outcome::refused(operation, Refusal::Missing(Missing::ConsumerOffset), commit)
        }
        Err(refusal) => Outcome::refused(operation, refusal, commit),
    }
}

/// Cluster mode: whether the topic's `consumer_offset_durability` is `persisted`, so the
/// quorum syncs the offset change before it is acknowledged.
pub(crate) fn offsets_synced(server: &Server, key: crate::data::PartitionKey) -> bool {
    let metadata = server.metadata.borrow();
    let topic = metadata.topic_by_ids(key.stream_id, key.topic_id);
    topic.is_some_and(|topic| {
        topic.settings.consumer_offset_durability == segment::log::Durability::Persisted
    })
}

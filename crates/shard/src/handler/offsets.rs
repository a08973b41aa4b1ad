//! The consumer-offset family: `GET_CONSUMER_OFFSET` (120), `STORE_CONSUMER_OFFSET` (121) and
//! `DELETE_CONSUMER_OFFSET` (122), over [`crate::data::DataPlane`]. Partition-plane refusals
//! travel in the header status (empty body), which the SDK accepts for 121/122 (§4.5).

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
            let plan = {
                let metadata = server.metadata.borrow();
                server
                    .data
                    .plan_store_offset(&metadata, &store.selector, store.offset)
            };
            let plan = match plan {
                Ok(plan) => plan,
                Err(refusal) => return Outcome::refused(operation, refusal, commit),
            };
            match server.data.store_offset(&plan, store.offset).await {
                Ok(()) => Outcome::value(operation, Empty, commit),
                Err(error) => Outcome::refused(operation, error.refusal(), commit),
            }
        }
        Request::DeleteConsumerOffset(delete) => {
            let plan = {
                let metadata = server.metadata.borrow();
                server.data.plan_delete_offset(&metadata, &delete.selector)
            };
            let plan = match plan {
                Ok(plan) => plan,
                Err(refusal) => return Outcome::refused(operation, refusal, commit),
            };
            match server.data.delete_offset(&plan).await {
                Ok(true) => Outcome::value(operation, Empty, commit),
                Ok(false) => {
                    Outcome::refused(operation, Refusal::Missing(Missing::ConsumerOffset), commit)
                }
                Err(error) => Outcome::refused(operation, error.refusal(), commit),
            }
        }
        _ => Outcome::refused(operation, Refusal::Malformed, commit),
    }
}

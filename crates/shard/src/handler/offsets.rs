//! The consumer-offset family: `GET_CONSUMER_OFFSET` (120), `STORE_CONSUMER_OFFSET` (121) and
//! `DELETE_CONSUMER_OFFSET` (122), over [`crate::data::DataPlane`]. Partition-plane refusals
//! travel in the header status (empty body), which the SDK accepts for 121/122 (§4.5).

use proto::ErrorCode;
use proto::codec::{Writer, encode_to_vec};
use proto::commands::Request;
use proto::header::{Operation, RequestHeader};
use proto::result::ResultSection;

use super::messages::check_topic_access;
use crate::connection::Connection;
use crate::metadata::permissions::can_poll;
use crate::outcome::Outcome;
use crate::server::Server;

pub(crate) async fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let operation = header.operation().unwrap_or(Operation::NonReplicated);
    let commit = server.metadata.borrow().commit;
    let dialect = connection.dialect;
    let selector = match &request {
        Request::GetConsumerOffset(get) => Some(&get.selector),
        Request::StoreConsumerOffset(store) => Some(&store.selector),
        Request::DeleteConsumerOffset(delete) => Some(&delete.selector),
        _ => None,
    };
    if let Some(selector) = selector {
        let (stream, topic) = (&selector.stream_id, &selector.topic_id);
        if let Err(code) = check_topic_access(server, connection, stream, topic, can_poll) {
            return Outcome::refused(operation, code, commit);
        }
    }
    match request {
        Request::GetConsumerOffset(get) => {
            let found = server
                .data
                .get_offset(&server.metadata.borrow(), &get.selector);
            match found {
                Ok(Some(offset)) => Outcome::ok(operation, encode_to_vec(&offset, dialect), commit),
                Ok(None) => Outcome::ok(operation, Vec::new(), commit),
                Err(code) => Outcome::refused(operation, code, commit),
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
                Err(code) => return Outcome::refused(operation, code, commit),
            };
            match server.data.store_offset(&plan, store.offset).await {
                Ok(()) => Outcome::ok(operation, result_ok(dialect), commit),
                Err(error) => Outcome::refused(operation, error.code(), commit),
            }
        }
        Request::DeleteConsumerOffset(delete) => {
            let plan = {
                let metadata = server.metadata.borrow();
                server.data.plan_delete_offset(&metadata, &delete.selector)
            };
            let plan = match plan {
                Ok(plan) => plan,
                Err(code) => return Outcome::refused(operation, code, commit),
            };
            match server.data.delete_offset(&plan).await {
                Ok(true) => Outcome::ok(operation, result_ok(dialect), commit),
                Ok(false) => Outcome::refused(operation, ErrorCode::ConsumerOffsetNotFound, commit),
                Err(error) => Outcome::refused(operation, error.code(), commit),
            }
        }
        _ => Outcome::refused(operation, ErrorCode::InvalidCommand, commit),
    }
}

/// A result section saying success, with no payload.
fn result_ok(dialect: proto::Dialect) -> Vec<u8> {
    let mut body = Vec::new();
    let mut writer = Writer::new(&mut body, dialect);
    ResultSection::Ok.encode(&mut writer);
    body
}

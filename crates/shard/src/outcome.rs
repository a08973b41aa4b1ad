//! What handling a request produces: a reply, an eviction, or nothing (a cancel).

use proto::ErrorCode;
use proto::header::{EvictionReason, Operation};

/// The answer to one request; the transport turns it into a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Reply(Reply),
    /// End the session on this connection with an eviction frame.
    Evict(EvictionReason),
    /// Send nothing (`CANCEL_DEFERRED_REQUEST`).
    Silent,
}

/// A reply: the header fields that vary per command, and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Echo of the request's operation, or its resolved form.
    pub operation: Operation,
    /// 0, or an error code with an empty body.
    pub status: u32,
    /// The body, result section included where the operation is result-framed.
    pub body: Vec<u8>,
    /// The metadata commit number to report (`commit`).
    pub commit: u64,
}

impl Outcome {
    /// A successful reply whose body is already encoded.
    pub fn ok(operation: Operation, body: Vec<u8>, commit: u64) -> Self {
        Self::Reply(Reply {
            operation,
            status: 0,
            body,
            commit,
        })
    }

    /// A refusal through the header `status` (empty body); the code is mapped to one the
    /// client's dialect knows by the transport.
    pub fn refused(operation: Operation, code: ErrorCode, commit: u64) -> Self {
        Self::Reply(Reply {
            operation,
            status: code.as_u32(),
            body: Vec::new(),
            commit,
        })
    }
}

//! What handling a request produces: a reply, an eviction, or nothing (a cancel).

use proto::header::{EvictionReason, Operation};
use proto::result::ResultSection;
use proto::{Codec, Dialect, ErrorCode, Writer};

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
    /// Sent after `body` from its own buffer: a poll's records, moved from the read that
    /// produced them instead of copied behind the head.
    pub tail: Vec<u8>,
    /// The metadata commit number to report (`commit`).
    pub commit: u64,
}

impl Outcome {
    /// A successful reply whose body is already encoded.
    pub fn ok(operation: Operation, body: Vec<u8>, commit: u64) -> Self {
        Self::ok_with_tail(operation, body, Vec::new(), commit)
    }

    /// A successful reply whose body is `body` followed by `tail`.
    pub fn ok_with_tail(operation: Operation, body: Vec<u8>, tail: Vec<u8>, commit: u64) -> Self {
        Self::Reply(Reply {
            operation,
            status: 0,
            body,
            tail,
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
            tail: Vec::new(),
            commit,
        })
    }
}

impl Outcome {
    /// A successful reply carrying `payload`, behind a success result section when the
    /// operation is result-framed (§1.9), encoded for `dialect`.
    pub fn payload<'a, T: Codec<'a>>(
        operation: Operation,
        payload: &T,
        dialect: Dialect,
        commit: u64,
    ) -> Self {
        let mut body = Vec::new();
        let mut writer = Writer::new(&mut body, dialect);
        if operation.is_result_framed() {
            ResultSection::Ok.encode(&mut writer);
        }
        payload.encode(&mut writer);
        Self::ok(operation, body, commit)
    }

    /// A refusal in the channel the operation uses: a one-entry result section for
    /// result-framed operations, the header `status` otherwise; the code is one `dialect`
    /// knows.
    pub fn rejected(operation: Operation, code: ErrorCode, dialect: Dialect, commit: u64) -> Self {
        let code = code.for_dialect(dialect);
        if !operation.is_result_framed() {
            return Self::refused(operation, code, commit);
        }
        let mut body = Vec::new();
        ResultSection::Refused(code.as_u32()).encode(&mut Writer::new(&mut body, dialect));
        Self::ok(operation, body, commit)
    }
}

#[cfg(test)]
mod tests {
    use proto::commands::Empty;
    use proto::header::Operation;
    use proto::{Dialect, ErrorCode};

    use super::Outcome;

    #[test]
    fn result_framed_payload_and_refusal() {
        let ok = Outcome::payload(Operation::CreateStream, &Empty, Dialect::V0_12_2, 4);
        assert_eq!(ok, Outcome::ok(Operation::CreateStream, vec![0; 4], 4));
        let refused = Outcome::rejected(
            Operation::CreateStream,
            ErrorCode::StreamIdNotFound,
            Dialect::V0_12_2,
            4,
        );
        let mut body = vec![1, 0, 0, 0, 0, 0, 0, 0];
        body.extend_from_slice(&1009u32.to_le_bytes());
        assert_eq!(refused, Outcome::ok(Operation::CreateStream, body, 4));
        let read = Outcome::rejected(
            Operation::NonReplicated,
            ErrorCode::FeatureUnavailable,
            Dialect::V0_12_2,
            4,
        );
        assert_eq!(
            read,
            Outcome::refused(Operation::NonReplicated, ErrorCode::FeatureUnavailable, 4)
        );
    }
}

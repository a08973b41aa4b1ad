//! What handling a request produces: a reply, an eviction, or nothing (a cancel).
//!
//! A reply carries its body as a typed value ([`Body`]); it becomes bytes in one place,
//! [`Reply::encode_body`], which the transport edge calls with the connection's dialect (the
//! HTTP API will be a second encoder of the same values). Polls and fetches are the exception:
//! their records are moved from the read into the frame, so their head is encoded with them
//! ([`Body::Encoded`]).

use std::fmt::Debug;

use proto::header::{EvictionReason, Operation};
use proto::result::ResultSection;
use proto::{Codec, Dialect, Writer};

use crate::refusal::Refusal;

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
    /// A refusal sent as the header `status`, with an empty body; `None` for success.
    pub status: Option<Refusal>,
    pub body: Body,
    /// Sent after the body from its own buffer: a poll's records, moved from the read that
    /// produced them instead of copied behind the head.
    pub tail: Vec<u8>,
    /// The metadata commit number to report (`commit`).
    pub commit: u64,
    /// Cluster mode: the op of a committed partition operation, for the committed-result
    /// marker (§1.5: the client then trusts a resent request's answer at once); 0: none.
    pub committed_op: u64,
}

/// A reply's body, kept typed until the edge encodes it.
#[derive(Debug, Clone)]
pub enum Body {
    /// Nothing at all: a read that found nothing, a refusal in the header `status`.
    Empty,
    /// A value, behind a success result section where the operation is result-framed (§1.9).
    Value(Box<dyn ReplyValue>),
    /// A refusal in the result section of a result-framed operation, mapped at the edge to a
    /// code the client's dialect knows.
    Refused(Refusal),
    /// Bytes encoded with the records they precede (poll and fetch replies).
    Encoded(Vec<u8>),
}

/// A typed reply value the edge can encode.
pub trait ReplyValue: Debug + Send {
    /// The value in the binary protocol, for `writer`'s dialect.
    fn encode_binary(&self, writer: &mut Writer<'_>);
    fn clone_box(&self) -> Box<dyn ReplyValue>;
}

impl<T> ReplyValue for T
where
    T: for<'a> Codec<'a> + Clone + Debug + Send + 'static,
{
    fn encode_binary(&self, writer: &mut Writer<'_>) {
        self.encode(writer);
    }

    fn clone_box(&self) -> Box<dyn ReplyValue> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn ReplyValue> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl Body {
    /// The body in the binary protocol for `dialect`, framed as `operation` requires.
    pub fn encode(&self, operation: Operation, dialect: Dialect) -> Vec<u8> {
        let mut body = Vec::new();
        let mut writer = Writer::new(&mut body, dialect);
        match self {
            Self::Empty => {}
            Self::Value(value) => {
                if operation.is_result_framed() {
                    ResultSection::Ok.encode(&mut writer);
                }
                value.encode_binary(&mut writer);
            }
            Self::Refused(refusal) => {
                let code = refusal.code().for_dialect(dialect);
                ResultSection::Refused(code.as_u32()).encode(&mut writer);
            }
            Self::Encoded(bytes) => body.extend_from_slice(bytes),
        }
        body
    }
}

/// Bodies are equal when they encode the same (in the 0.12.2 dialect, unframed).
impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        let encode = |body: &Self| body.encode(Operation::NonReplicated, Dialect::V0_12_2);
        match (self, other) {
            (Self::Empty, Self::Empty) => true,
            (Self::Refused(a), Self::Refused(b)) => a == b,
            (Self::Value(_) | Self::Encoded(_), Self::Value(_) | Self::Encoded(_)) => {
                encode(self) == encode(other)
            }
            _ => false,
        }
    }
}

impl Eq for Body {}

impl Reply {
    /// The header `status`: 0, or the refusal's wire code (the transport maps it further
    /// for an older client's dialect).
    pub fn status_code(&self) -> u32 {
        self.status.map_or(0, |refusal| refusal.code().as_u32())
    }

    /// The body as the client receives it (the edge's one binary encoder).
    pub fn encode_body(&self, dialect: Dialect) -> Vec<u8> {
        self.body.encode(self.operation, dialect)
    }
}

impl Outcome {
    /// The same outcome, marked as the reply of the committed op `op` (a success only).
    #[must_use]
    pub fn committed(mut self, op: u64) -> Self {
        if let Self::Reply(reply) = &mut self
            && reply.status.is_none()
        {
            reply.committed_op = op;
        }
        self
    }

    /// A successful reply carrying `value` (behind a success result section where the
    /// operation is result-framed).
    pub fn value(operation: Operation, value: impl ReplyValue + 'static, commit: u64) -> Self {
        Self::reply(operation, Body::Value(Box::new(value)), Vec::new(), commit)
    }

    /// A successful reply with `body`.
    pub fn with_body(operation: Operation, body: Body, commit: u64) -> Self {
        Self::reply(operation, body, Vec::new(), commit)
    }

    /// A successful reply with no body at all.
    pub fn empty(operation: Operation, commit: u64) -> Self {
        Self::reply(operation, Body::Empty, Vec::new(), commit)
    }

    /// A successful reply whose head is already encoded, followed by `tail` (polls, fetches).
    pub fn encoded(operation: Operation, head: Vec<u8>, tail: Vec<u8>, commit: u64) -> Self {
        Self::reply(operation, Body::Encoded(head), tail, commit)
    }

    fn reply(operation: Operation, body: Body, tail: Vec<u8>, commit: u64) -> Self {
        Self::Reply(Reply {
            operation,
            status: None,
            body,
            tail,
            commit,
            committed_op: 0,
        })
    }

    /// A refusal through the header `status` (empty body); the edge encodes it as a code
    /// the client's dialect knows.
    pub fn refused(operation: Operation, refusal: Refusal, commit: u64) -> Self {
        Self::Reply(Reply {
            operation,
            status: Some(refusal),
            body: Body::Empty,
            tail: Vec::new(),
            commit,
            committed_op: 0,
        })
    }

    /// A refusal in the channel the operation uses: a one-entry result section for
    /// result-framed operations, the header `status` otherwise.
    pub fn rejected(operation: Operation, refusal: Refusal, commit: u64) -> Self {
        if operation.is_result_framed() {
            Self::reply(operation, Body::Refused(refusal), Vec::new(), commit)
        } else {
            Self::refused(operation, refusal, commit)
        }
    }
}

#[cfg(test)]
mod tests {
    use proto::Dialect;
    use proto::commands::Empty;
    use proto::header::Operation;

    use super::{Body, Outcome};
    use crate::refusal::{Missing, Refusal, Unavailable};

    fn body(outcome: &Outcome, dialect: Dialect) -> Vec<u8> {
        match outcome {
            Outcome::Reply(reply) => reply.encode_body(dialect),
            other => panic!("not a reply: {other:?}"),
        }
    }

    #[test]
    fn result_framed_payload_and_refusal() {
        let ok = Outcome::value(Operation::CreateStream, Empty, 4);
        assert_eq!(body(&ok, Dialect::V0_12_2), vec![0; 4]);
        let refused = Outcome::rejected(
            Operation::CreateStream,
            Refusal::Missing(Missing::Stream),
            4,
        );
        let mut expected = vec![1, 0, 0, 0, 0, 0, 0, 0];
        expected.extend_from_slice(&1009u32.to_le_bytes());
        assert_eq!(body(&refused, Dialect::V0_12_2), expected);
        let read = Outcome::rejected(
            Operation::NonReplicated,
            Refusal::Unavailable(Unavailable::Feature),
            4,
        );
        assert_eq!(
            read,
            Outcome::refused(
                Operation::NonReplicated,
                Refusal::Unavailable(Unavailable::Feature),
                4
            )
        );
        let unframed = Outcome::value(Operation::NonReplicated, Empty, 4);
        assert!(body(&unframed, Dialect::V0_12_2).is_empty());
        assert_ne!(Body::Empty, Body::Refused(Refusal::Internal));
    }
}

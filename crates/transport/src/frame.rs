//! What a handler answers, and the frame bytes each answer becomes (PROTOCOL.md §1.5, §1.6).
//!
//! Pure functions of the request header and the answer, so every transport writes the same
//! bytes and the encoding is tested without sockets.

use proto::header::RequestHeader;
use proto::header::{
    Command, EvictionHeader, EvictionReason, FramePrefix, HEADER_SIZE, Operation, ReplyHeader,
    frame_prefix,
};
use proto::{Dialect, ErrorCode};
use zerocopy::{FromBytes, IntoBytes};

use crate::BadFrame;

/// A message refused as a frame: the header (or zeros) to address the eviction to, what is
/// wrong, and the detail for the log.
pub type Refused = (Box<[u8; HEADER_SIZE]>, BadFrame, String);

/// Checks that `bytes`, a whole message of a message-framed transport (a WebSocket message,
/// a QUIC stream), is exactly one request frame of at most `size_max` bytes; returns its
/// header.
pub fn check_whole(bytes: &[u8], size_max: u32) -> Result<Box<[u8; HEADER_SIZE]>, Refused> {
    let mut header = Box::new([0_u8; HEADER_SIZE]);
    let Some(head) = bytes.get(..HEADER_SIZE) else {
        let error = format!("a {}-byte message holds no header", bytes.len());
        return Err((header, BadFrame::Size, error));
    };
    header.copy_from_slice(head);
    let prefix = match request_prefix(&header[..], size_max) {
        Ok(prefix) => prefix,
        Err((kind, error)) => return Err((header, kind, error.to_string())),
    };
    if prefix.body_length() + HEADER_SIZE != bytes.len() {
        let error = format!(
            "header size {} in a {}-byte message",
            prefix.body_length() + HEADER_SIZE,
            bytes.len()
        );
        return Err((header, BadFrame::Size, error));
    }
    Ok(header)
}

/// The size and command of the request frame whose header is `header`, checked before a
/// body byte is read: a size outside `256..=size_max` or a command other than Request is
/// refused with what is wrong (every transport's frame reader asks this).
pub fn request_prefix(
    header: &[u8],
    size_max: u32,
) -> Result<FramePrefix, (BadFrame, proto::DecodeError)> {
    match frame_prefix(header, size_max) {
        Ok(prefix) if prefix.command == Command::Request => Ok(prefix),
        Ok(prefix) => Err((BadFrame::Command, command_error(prefix.command))),
        Err(error) if error.subject == proto::Subject::Command => Err((BadFrame::Command, error)),
        Err(error) => Err((BadFrame::Size, error)),
    }
}

fn command_error(command: Command) -> proto::DecodeError {
    let value = u64::from(command.as_u8());
    let kind = proto::DecodeErrorKind::InvalidValue { value };
    proto::DecodeError::new("header.command", proto::header::COMMAND_OFFSET, kind)
        .about(proto::Subject::Command)
}

/// The answer to one request frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A reply frame: the header echoes the request, `status` 0 or an error code whose body is
    /// empty; `committed_op` non-zero sets the committed-result marker (0.12.2 clients).
    Reply {
        committed_op: u64,
        operation: Operation,
        status: u32,
        commit: u64,
        body: Vec<u8>,
        /// Sent after `body`, from its own buffer (a poll's records, moved from the read that
        /// produced them): the frame is written with one vectored write, not copied together.
        tail: Vec<u8>,
    },
    /// An eviction frame; the connection is closed after it.
    Evict(EvictionReason),
    /// No frame at all (a cancel of a deferred request).
    Silent,
}

/// One frame to write: `head` (the header and the body), then `tail` (often empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
}

impl Frame {
    /// The frame as one buffer (for tests, and transports that cannot write vectored).
    pub fn into_bytes(self) -> Vec<u8> {
        let Self { mut head, tail } = self;
        head.extend_from_slice(&tail);
        head
    }
}

/// The frame to send for `answer` to the request whose header is `request`, or `None` for a
/// silent answer. Status codes the dialect's clients do not know are mapped to ones they do.
pub fn encode(request: &[u8; HEADER_SIZE], answer: Answer, dialect: Dialect) -> Option<Frame> {
    match answer {
        Answer::Reply {
            committed_op,
            operation,
            status,
            commit,
            body,
            tail,
        } => {
            let mut frame = reply(request, (operation, status, commit), body, tail, dialect);
            if committed_op != 0 && status == 0 && dialect == Dialect::V0_12_2 {
                mark_committed(&mut frame.head, committed_op);
            }
            Some(frame)
        }
        Answer::Evict(reason) => Some(Frame {
            head: eviction(request, reason),
            tail: Vec::new(),
        }),
        Answer::Silent => None,
    }
}

/// An eviction frame for the client named in `request` (which may be an unvalidated header).
pub fn eviction(request: &[u8; HEADER_SIZE], reason: EvictionReason) -> Vec<u8> {
    eviction_of(client(request), reason)
}

/// An eviction frame for `client` that answers no request: the server ended the session.
pub fn eviction_of(client: u128, reason: EvictionReason) -> Vec<u8> {
    EvictionHeader::new(client, reason).as_bytes().to_vec()
}

/// The client id `request` names (an unvalidated header).
pub fn client(request: &[u8; HEADER_SIZE]) -> u128 {
    view(request).client.get()
}

/// A reply frame; `fields` are the header's operation, status and commit.
fn reply(
    request: &[u8; HEADER_SIZE],
    (operation, status, commit): (Operation, u32, u64),
    body: Vec<u8>,
    tail: Vec<u8>,
    dialect: Dialect,
) -> Frame {
    let status = match ErrorCode::from_u32(status) {
        Some(code) if status != 0 => code.for_dialect(dialect).as_u32(),
        _ => status,
    };
    // A refusal carries no body (§1.5 `status`).
    let (body, tail) = if status == 0 {
        (body, tail)
    } else {
        (Vec::new(), Vec::new())
    };
    let length = body.len().saturating_add(tail.len());
    let header = ReplyHeader::for_request(view(request), operation, status, commit, length);
    let mut head = Vec::with_capacity(HEADER_SIZE.saturating_add(body.len()));
    head.extend_from_slice(header.as_bytes());
    head.extend_from_slice(&body);
    Frame { head, tail }
}

/// Sets the committed-result marker (§1.5 byte 220) of a success reply for the committed op
/// `op`: `op` and `commit` both name it, so the client trusts the answer to a resent request.
fn mark_committed(head: &mut [u8], op: u64) {
    if let Some(header) = head.get_mut(..HEADER_SIZE)
        && let Ok(header) = ReplyHeader::mut_from_bytes(header)
    {
        header.op = zerocopy::little_endian::U64::new(op);
        header.commit = zerocopy::little_endian::U64::new(op);
        header.reserved[0] = 1;
    }
}

/// The request header fields, read in place without validation: replies echo them as sent.
fn view(request: &[u8; HEADER_SIZE]) -> &RequestHeader {
    RequestHeader::ref_from_bytes(request).expect("a request header is exactly 256 bytes")
}

#[cfg(test)]
mod tests {
    use proto::header::{EvictionHeader, EvictionReason, Operation, ReplyHeader, RequestHeader};
    use proto::{Dialect, ErrorCode};
    use zerocopy::IntoBytes;

    use super::{Answer, encode};

    fn request(client: u128, request: u64) -> [u8; 256] {
        let mut header = RequestHeader::new(client, Operation::NonReplicated, 0);
        header.request = request.into();
        header.as_bytes().try_into().unwrap()
    }

    #[test]
    fn reply_echoes_request_and_commit() {
        let answer = Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: 0,
            commit: 3,
            body: vec![1, 2],
            tail: vec![3],
        };
        let frame = encode(&request(7, 5), answer, Dialect::V0_12_2).unwrap();
        assert_eq!(frame.tail, [3], "the tail is not copied");
        let frame = frame.into_bytes();
        let header = ReplyHeader::parse(&frame).unwrap();
        assert_eq!(header.request.get(), 5);
        assert_eq!(header.client.get(), 7);
        assert_eq!(header.commit.get(), 3);
        assert_eq!(header.body_length(), 3);
        assert_eq!(&frame[256..], &[1, 2, 3]);
    }

    #[test]
    fn refusal_drops_body_and_maps_code_for_old_clients() {
        let code = ErrorCode::all()
            .find(|code| code.is_only_in_0_12_2())
            .unwrap();
        let answer = Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: code.as_u32(),
            commit: 0,
            body: vec![9],
            tail: vec![10],
        };
        let frame = encode(&request(7, 1), answer, Dialect::V0_11_0)
            .unwrap()
            .into_bytes();
        let header = ReplyHeader::parse(&frame).unwrap();
        assert_eq!(frame.len(), 256);
        assert_eq!(
            header.status.get(),
            code.for_dialect(Dialect::V0_11_0).as_u32()
        );
    }

    #[test]
    fn eviction_and_silence() {
        let answer = Answer::Evict(EvictionReason::NoSession);
        let frame = encode(&request(9, 0), answer, Dialect::V0_12_2)
            .unwrap()
            .into_bytes();
        let header = EvictionHeader::parse(&frame).unwrap();
        assert_eq!(header.reason(), Some(EvictionReason::NoSession));
        assert_eq!(header.client.get(), 9);
        assert_eq!(
            encode(&request(9, 0), Answer::Silent, Dialect::V0_12_2),
            None
        );
    }
}

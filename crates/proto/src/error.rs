//! The one decode error of the crate: what went wrong, in which field, at which offset.
//!
//! The offset is relative to the start of the buffer handed to the outermost decoder (a
//! frame body, a header, a stored batch), so a log line points at the exact byte.

use crate::status::ErrorCode;

/// A decoder refused its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{kind} in `{field}` at byte {offset}")]
pub struct DecodeError {
    /// The wire field being decoded, e.g. `"create_topic.name"`: for logs only; what a
    /// refusal means to the server is its [`Subject`].
    pub field: &'static str,
    /// Byte offset of that field in the decoded buffer.
    pub offset: usize,
    pub kind: DecodeErrorKind,
    pub subject: Subject,
}

/// The fields whose refusal the server answers differently from any other refusal of the
/// same kind: a typed tag, so no decision is made on the `field` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Subject {
    /// A field whose refusal is answered by its kind alone.
    #[default]
    Other,
    /// The frame's command byte: an unknown command, not a bad size (§1.2).
    Command,
    /// A request header's operation (eviction `InvalidRequestOperation`).
    Operation,
    /// A request header's session number.
    SessionNumber,
    /// A request header's request number.
    RequestNumber,
    /// A message's payload length (`4025` when empty, `4022` when too big).
    PayloadLength,
    /// A message's user-headers length (`4017` when too big).
    UserHeadersLength,
    /// A stored batch's header or its declared length: where a torn segment tail shows.
    BatchFrame,
}

/// Why a field was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    #[error("needed {needed} bytes, {available} available")]
    UnexpectedEnd { needed: usize, available: usize },
    #[error("{count} bytes left over")]
    TrailingBytes { count: usize },
    #[error("invalid value {value}")]
    InvalidValue { value: u64 },
    #[error("length {length} outside {min}..={max}")]
    InvalidLength { length: u64, min: u64, max: u64 },
    #[error("invalid UTF-8")]
    InvalidUtf8,
    #[error("reserved bytes are not zero")]
    NonZeroReserved,
    #[error("duplicate entry")]
    Duplicate,
    #[error("message checksum mismatch")]
    MessageChecksum,
    #[error("batch checksum mismatch")]
    BatchChecksum,
    #[error("count {declared} does not match the {actual} found")]
    CountMismatch { declared: u64, actual: u64 },
    #[error("unknown command code {code}")]
    UnknownCommand { code: u32 },
}

impl DecodeError {
    pub const fn new(field: &'static str, offset: usize, kind: DecodeErrorKind) -> Self {
        Self {
            field,
            offset,
            kind,
            subject: Subject::Other,
        }
    }

    /// The same refusal, tagged as being about `subject`.
    #[must_use]
    pub const fn about(mut self, subject: Subject) -> Self {
        self.subject = subject;
        self
    }

    /// The Iggy status code a server answers this refusal with (PROTOCOL.md §5.5, §6).
    pub fn status(&self) -> ErrorCode {
        match (self.kind, self.subject) {
            (DecodeErrorKind::InvalidLength { length: 0, .. }, Subject::PayloadLength) => {
                ErrorCode::InvalidMessagePayloadLength
            }
            (DecodeErrorKind::InvalidLength { .. }, Subject::PayloadLength) => {
                ErrorCode::TooBigMessagePayload
            }
            (DecodeErrorKind::InvalidLength { .. }, Subject::UserHeadersLength) => {
                ErrorCode::TooBigUserHeaders
            }
            _ => self.status_of_kind(),
        }
    }

    const fn status_of_kind(&self) -> ErrorCode {
        match self.kind {
            DecodeErrorKind::MessageChecksum => ErrorCode::InvalidMessageChecksum,
            DecodeErrorKind::BatchChecksum => ErrorCode::InvalidBatchChecksum,
            DecodeErrorKind::CountMismatch { .. } => ErrorCode::InvalidMessagesCount,
            DecodeErrorKind::NonZeroReserved => ErrorCode::InvalidReservedField,
            _ => ErrorCode::InvalidCommand,
        }
    }
}

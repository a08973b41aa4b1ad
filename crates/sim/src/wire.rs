//! Frames as an SDK of dialect 0.12.2 builds them (PROTOCOL.md §1.7), and what the server's
//! outcomes say to such a client: the simulated clients speak the real protocol, so a run
//! drives the same decoding, dispatch and encoding as a connection does.

use proto::Dialect;
use proto::codec::{Codec, Reader, WireName, Writer, encode_to_vec};
use proto::codes::CommandCode;
use proto::commands::session::{BindSecret, LoginRegister, Secret};
use proto::commands::{Reply, ReplyOutcome};
use proto::dialect::VersionPrefix;
use proto::header::{EvictionReason, HEADER_SIZE, Operation, PartitionContext, RequestHeader};
use proto::result::ResultSection;
use shard::Outcome;
use zerocopy::IntoBytes;
use zerocopy::little_endian::U128;

pub const DIALECT: Dialect = Dialect::V0_12_2;

/// One request as it goes to [`shard::Server::handle`].
#[derive(Debug, Clone)]
pub struct Frame {
    pub code: CommandCode,
    pub request: u64,
    pub header: [u8; HEADER_SIZE],
    pub body: Vec<u8>,
}

/// What a request came to, as a client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Accepted: the payload (after the result section where there is one).
    Ok(Vec<u8>),
    Refused(u32),
    Evicted(EvictionReason),
    Silent,
}

/// A client's numbering: its id, session and request counter (§1.7).
#[derive(Debug, Clone, Copy)]
pub struct Numbering {
    pub client_id: u128,
    pub session: u64,
    pub request: u64,
}

impl Numbering {
    pub fn new(client_id: u128) -> Self {
        Self {
            client_id,
            session: 0,
            request: 0,
        }
    }

    /// `LOGIN_REGISTER` as `username`; a new login restarts the request numbering.
    pub fn login(&mut self, username: &str, password: &str) -> Frame {
        let secret = self.client_id.to_le_bytes().repeat(2);
        let body = LoginRegister {
            version: VersionPrefix::rust_sdk(DIALECT),
            // Two copies of the 16-byte id make the 32-byte secret.
            bind_secret: BindSecret(secret.try_into().unwrap_or([1; 32])),
            username: name(username),
            password: Secret::new(password).expect("the simulator's password is valid"),
            context: String::new(),
        };
        let body = encode_to_vec(&body, DIALECT);
        let mut header = RequestHeader::new(self.client_id, Operation::Register, body.len());
        header.request_checksum = U128::new(self.client_id.rotate_left(17) | 1);
        self.session = 0;
        self.request = 0;
        Frame {
            code: CommandCode::LoginRegister,
            request: 0,
            header: to_array(header.as_bytes()),
            body,
        }
    }

    /// A bound request of `code` carrying `body`.
    pub fn call(&mut self, code: CommandCode, body: Vec<u8>, context: PartitionContext) -> Frame {
        self.request += 1;
        let numbers = (self.session, self.request);
        let header = RequestHeader::bound(self.client_id, code, body.len(), numbers, context);
        Frame {
            code,
            request: self.request,
            header: to_array(header.as_bytes()),
            body,
        }
    }

    /// Encodes `value` and calls `code` with it.
    pub fn encode<'a, T: Codec<'a>>(&mut self, code: CommandCode, value: &T) -> Frame {
        self.call(
            code,
            encode_to_vec(value, DIALECT),
            PartitionContext::default(),
        )
    }
}

/// A valid wire name (the simulator's names are short and ASCII).
pub fn name(text: &str) -> WireName {
    WireName::new(text).expect("the simulator's names are valid")
}

fn to_array(bytes: &[u8]) -> [u8; HEADER_SIZE] {
    let mut header = [0; HEADER_SIZE];
    header.copy_from_slice(bytes);
    header
}

/// What `outcome`, the server's answer to a request, tells the client.
pub fn answer(outcome: Outcome) -> Answer {
    let reply = match outcome {
        Outcome::Reply(reply) => reply,
        Outcome::Evict(reason) => return Answer::Evicted(reason),
        Outcome::Silent => return Answer::Silent,
    };
    if let Some(refusal) = reply.status {
        return Answer::Refused(refusal.code().as_u32());
    }
    let mut body = reply.encode_body(DIALECT);
    body.extend_from_slice(&reply.tail);
    let framed = reply.operation.is_result_framed()
        && !(reply.operation == Operation::Register && body.is_empty());
    if !framed {
        return Answer::Ok(body);
    }
    let mut reader = Reader::new(&body, DIALECT);
    match ResultSection::decode(&mut reader) {
        Ok(ResultSection::Ok) => {
            let start = reader.offset();
            Answer::Ok(body.get(start..).unwrap_or_default().to_vec())
        }
        Ok(ResultSection::Refused(code)) => Answer::Refused(code),
        Err(_) => Answer::Refused(u32::MAX),
    }
}

/// The session a `LOGIN_REGISTER` payload hands out.
pub fn login_session(frame: &Frame, payload: &[u8]) -> Option<u64> {
    let mut framed = Vec::new();
    ResultSection::Ok.encode(&mut Writer::new(&mut framed, DIALECT));
    framed.extend_from_slice(payload);
    let decoded = Reply::decode_body(frame.code, Operation::Register, &framed, DIALECT).ok()?;
    match decoded {
        ReplyOutcome::Ok(Reply::LoginRegister(reply)) => Some(reply.session),
        _ => None,
    }
}

//! The binary session behind an HTTP credential.
//!
//! HTTP has no connection-scoped login, so each credential (a JWT, or a personal access token
//! used as a bearer) owns one connection of the shard's handler, logged in once with
//! `LOGIN_REGISTER` (or its PAT form) under a random client id, exactly as a binary client
//! does. Every request with that credential becomes a request frame of that session, so the
//! permission checks, limits and revocation rules of the binary protocol apply unchanged: a
//! deleted user, a deleted token or a logout ends the session, and the next request with the
//! credential is refused.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;

use proto::Dialect;
use proto::codec::{Codec, Reader, WireName, decode_exact, encode_to_vec};
use proto::codes::CommandCode;
use proto::commands::session::{
    BindSecret, LoginRegister, LoginRegisterWithPat, LoginReply, Secret,
};
use proto::dialect::VersionPrefix;
use proto::header::{HEADER_SIZE, Operation, PartitionContext, RequestHeader};
use proto::result::ResultSection;
use transport::{Answer, ConnectionHandler};
use zerocopy::IntoBytes;

use crate::error::ApiError;

/// The dialect every HTTP session speaks: the one whose typed replies this edge reads.
const DIALECT: Dialect = Dialect::V0_12_2;

/// Credentials for a new session.
#[derive(Debug)]
pub enum Login<'a> {
    Password {
        username: &'a str,
        password: &'a str,
    },
    Token(&'a str),
}

/// One logged-in connection of the handler; closed when the last request using it ends.
pub struct Bound<H: ConnectionHandler> {
    handler: Rc<H>,
    /// `Some` until dropped.
    connection: Option<H::Connection>,
    client: u128,
    session: u64,
    pub user_id: u32,
    /// Request numbers of the session, from 1 (the login is request 0).
    next_request: Cell<u64>,
    /// Set when the core ended the session: the credential is dead.
    ended: Cell<bool>,
}

impl<H: ConnectionHandler> std::fmt::Debug for Bound<H> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Bound")
            .field("client", &self.client)
            .field("session", &self.session)
            .field("user_id", &self.user_id)
            .finish_non_exhaustive()
    }
}

impl<H: ConnectionHandler> Drop for Bound<H> {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            self.handler.close(connection);
        }
    }
}

impl<H: ConnectionHandler> Bound<H> {
    /// Opens a handler connection for `peer` and logs it in; a refused login is the error
    /// the binary protocol gives (bad credentials: `42`, a bad token: `53`).
    pub async fn login(
        handler: &Rc<H>,
        peer: SocketAddr,
        login: Login<'_>,
    ) -> Result<Self, ApiError> {
        let client = random_client_id()?;
        let body = login_body(client, &login)?;
        let connection = handler.open(peer);
        let mut bound = Self {
            handler: Rc::clone(handler),
            connection: Some(connection),
            client,
            session: 0,
            user_id: 0,
            next_request: Cell::new(1),
            ended: Cell::new(false),
        };
        let mut header = RequestHeader::new(client, Operation::Register, body.len());
        header.request_checksum = client.rotate_left(17).into();
        let payload = bound.exchange(header, &body).await?;
        let reply: LoginReply = decode(&payload)?;
        bound.session = reply.session;
        bound.user_id = reply.user_id;
        Ok(bound)
    }

    /// Whether the core ended this session (the credential no longer works).
    pub fn has_ended(&self) -> bool {
        self.ended.get()
    }

    /// Sends request `code` with `body` and returns the reply payload (after its result
    /// section, where the operation has one). An empty payload is a read that found nothing.
    pub async fn call(&self, code: CommandCode, body: &[u8]) -> Result<Vec<u8>, ApiError> {
        let request = self.next_request.get();
        self.next_request.set(request.wrapping_add(1));
        let header = RequestHeader::bound(
            self.client,
            code,
            body.len(),
            (self.session, request),
            PartitionContext::default(),
        );
        self.exchange(header, body).await
    }

    /// As [`Self::call`] with a typed request and reply.
    pub async fn request<T>(
        &self,
        code: CommandCode,
        request: &impl for<'a> Codec<'a>,
    ) -> Result<T, ApiError>
    where
        T: for<'a> Codec<'a>,
    {
        let payload = self.call(code, &encode_to_vec(request, DIALECT)).await?;
        decode(&payload)
    }

    async fn exchange(&self, header: RequestHeader, body: &[u8]) -> Result<Vec<u8>, ApiError> {
        let operation = header
            .operation()
            .expect("the header was built from a known operation");
        let mut raw = [0_u8; HEADER_SIZE];
        raw.copy_from_slice(header.as_bytes());
        let connection = self
            .connection
            .as_ref()
            .expect("the connection is present until drop");
        match self.handler.handle(connection, &raw, body).await {
            Answer::Reply {
                status: 0,
                mut body,
                tail,
                ..
            } => {
                body.extend_from_slice(&tail);
                payload(operation, body)
            }
            Answer::Reply { status, .. } => Err(ApiError::Code(status)),
            Answer::Evict(reason) => {
                self.ended.set(true);
                Err(ApiError::Code(reason.client_error().as_u32()))
            }
            Answer::Silent => Err(ApiError::Internal("no answer".into())),
        }
    }
}

/// The payload of a successful reply: the result section read off where the operation has
/// one (a refusal there is the error).
fn payload(operation: Operation, mut body: Vec<u8>) -> Result<Vec<u8>, ApiError> {
    if !operation.is_result_framed() || body.is_empty() {
        return Ok(body);
    }
    let mut reader = Reader::new(&body, DIALECT);
    match ResultSection::decode(&mut reader) {
        Ok(ResultSection::Ok) => {
            let start = body.len() - reader.remaining();
            Ok(body.split_off(start))
        }
        Ok(ResultSection::Refused(code)) => Err(ApiError::Code(code)),
        Err(error) => Err(ApiError::Internal(format!("result section: {error}"))),
    }
}

/// Decodes a reply payload the core produced; failing is a bug on this side.
pub fn decode<T: for<'a> Codec<'a>>(payload: &[u8]) -> Result<T, ApiError> {
    decode_exact(payload, DIALECT).map_err(|error| ApiError::Internal(format!("reply: {error}")))
}

/// Encodes a request body in the sessions' dialect.
pub fn encode(request: &impl for<'a> Codec<'a>) -> Vec<u8> {
    encode_to_vec(request, DIALECT)
}

fn login_body(client: u128, login: &Login<'_>) -> Result<Vec<u8>, ApiError> {
    let version = VersionPrefix::rust_sdk(DIALECT);
    let mut secret = [0_u8; 32];
    secret[..16].copy_from_slice(&client.to_le_bytes());
    getrandom::fill(&mut secret[16..]).map_err(|error| ApiError::Internal(error.to_string()))?;
    let bind_secret = BindSecret(secret);
    let credentials = || ApiError::Code(proto::status::ErrorCode::InvalidCredentials.as_u32());
    let body = match login {
        Login::Password { username, password } => encode(&LoginRegister {
            version,
            bind_secret,
            username: WireName::new(*username).ok_or_else(credentials)?,
            password: Secret::new(*password).ok_or_else(credentials)?,
            context: String::new(),
        }),
        Login::Token(token) => {
            let invalid =
                || ApiError::Code(proto::status::ErrorCode::InvalidPersonalAccessToken.as_u32());
            encode(&LoginRegisterWithPat {
                version,
                bind_secret,
                token: Secret::new(*token).ok_or_else(invalid)?,
                context: String::new(),
            })
        }
    };
    Ok(body)
}

fn random_client_id() -> Result<u128, ApiError> {
    let mut bytes = [0_u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| ApiError::Internal(error.to_string()))?;
    Ok(u128::from_le_bytes(bytes) | 1)
}

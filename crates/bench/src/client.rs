//! A blocking client of the binary protocol over one TCP connection, built on `proto`'s
//! codecs: login (`LOGIN_REGISTER`, then the roster), the control-plane calls the scenarios
//! need, routes, and the two data-plane calls, sends and polls. It speaks either dialect
//! (PROTOCOL.md §12): 0.12.2, what this server's own SDK speaks, or 0.11.0, the only one Apache
//! Iggy 0.9.0-edge servers accept, so one bench measures both servers; [`Client::negotiate`]
//! tries 0.12.2 and falls back to 0.11.0 when the server refuses its login format.
//!
//! Invariants: one request is in flight at a time, so every reply must echo the number of
//! the request just sent; the request counter starts at 1 after login and grows by one per
//! bound request (PROTOCOL.md §1.7; in 0.11.0 a non-replicated request repeats the current
//! number instead, §12.1). A send frame is encoded once and only its request number and
//! partition context are patched per send, so the client adds no copy to the data path.

use std::io;
use std::net::SocketAddr;

use crate::link::{Link, Transport};
use proto::Dialect;
use proto::codec::{Codec, WireName, Writer, decode_exact, encode_to_vec};
use proto::codes::CommandCode;
use proto::commands::groups::{
    ConsumerGroupAssignment, CreateConsumerGroup, JoinConsumerGroup, SyncConsumerGroup,
};
use proto::commands::messages::{GetPartitionRoute, PartitionRoute, PolledMessages};
use proto::commands::poll_selector::PollSelector;
use proto::commands::session::{BindSecret, LoginRegister, LoginRegisterWithPat, Secret};
use proto::commands::streams::{CreateStream, DeleteStream};
use proto::commands::tokens::{CreatePersonalAccessToken, DeletePersonalAccessToken};
use proto::commands::topics::CreateTopic;
use proto::commands::{Reply, ReplyOutcome};
use proto::dialect::VersionPrefix;
use proto::header::{
    Command, EvictionHeader, FRAME_SIZE_MAX_DEFAULT, Operation, PartitionContext, ReplyHeader,
    RequestHeader, frame_prefix,
};
use proto::primitives::{Identifier, OptionsBlock, Partitioning, TlvEntry};
use xxhash_rust::xxh3::xxh3_64;
use zerocopy::IntoBytes;
use zerocopy::little_endian::{U64, U128};

/// Login refusals that mean "not my dialect": an 0.9.0-edge server reads a 0.12.2 login body
/// (its 32-byte bind secret) as `4 InvalidFormat`; a version outside its gate is `7`.
const STATUS_NOT_MY_DIALECT: [u32; 2] = [4, 7];
/// `ConsumerGroupPartitionNotOwned`: the group rebalanced; the member syncs and goes on.
pub const STATUS_NOT_OWNED: u32 = 5009;
/// Bytes of every frame header.
const HEADER_SIZE: usize = 256;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {address}")]
    Connect {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("socket i/o")]
    Io(#[from] io::Error),
    #[error("malformed reply")]
    Decode(#[from] proto::DecodeError),
    #[error("{code:?}: the server refused it with error code {status}")]
    Refused { code: CommandCode, status: u32 },
    #[error("the server evicted the session (reason {reason})")]
    Evicted { reason: u8 },
    #[error("{code:?}: reply to request {got}, expected {expected}")]
    RequestMismatch {
        code: CommandCode,
        expected: u64,
        got: u64,
    },
    #[error("{0:?}: the reply has an unexpected shape")]
    UnexpectedReply(CommandCode),
    #[error("`{0}` is not a valid name")]
    Name(String),
}

/// Topic durability (the `durability` option of §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledged after the append (a single node has no quorum to wait for).
    Replicated,
    /// Acknowledged after fsync.
    Persisted,
}

impl Durability {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Replicated => "replicated",
            Self::Persisted => "persisted",
        }
    }
}

/// One logged-in connection.
// `client_id` is the protocol's name for the header field.
#[allow(clippy::struct_field_names)]
pub struct Client {
    link: Link,
    dialect: Dialect,
    client_id: u128,
    session: u64,
    request: u64,
    /// The last reply's body.
    body: Vec<u8>,
}

/// A `SEND_MESSAGES` frame encoded once and re-sent with a fresh request number.
pub struct SendFrame {
    bytes: Vec<u8>,
}

/// Who logs in, and where.
#[derive(Debug, Clone)]
pub struct Login<'a> {
    pub address: SocketAddr,
    /// The transport `address` serves.
    pub transport: Transport,
    pub username: &'a str,
    pub password: &'a str,
}

/// What a connection logs in with: a password costs the server a deliberately slow hash, a
/// personal access token a SHA-256, so thousands of idle connections log in with a token.
#[derive(Debug, Clone, Copy)]
enum Credentials<'a> {
    Password {
        username: &'a str,
        password: &'a str,
    },
    Token(&'a str),
}

impl Client {
    /// Connects in `dialect`, logs in and reads the roster, as an SDK does before its first
    /// partition call (§2.1).
    pub fn connect(
        login: &Login<'_>,
        dialect: Dialect,
        client_id: u128,
    ) -> Result<Self, ClientError> {
        let credentials = Credentials::Password {
            username: login.username,
            password: login.password,
        };
        Self::open(
            login.transport,
            login.address,
            credentials,
            dialect,
            client_id,
        )
    }

    /// Connects in `dialect` and logs in with a personal access token.
    pub fn connect_with_token(
        address: SocketAddr,
        token: &str,
        dialect: Dialect,
        client_id: u128,
    ) -> Result<Self, ClientError> {
        let token = Credentials::Token(token);
        Self::open(Transport::Tcp, address, token, dialect, client_id)
    }

    fn open(
        transport: Transport,
        address: SocketAddr,
        credentials: Credentials<'_>,
        dialect: Dialect,
        client_id: u128,
    ) -> Result<Self, ClientError> {
        assert_ne!(client_id, 0, "the protocol forbids client id 0");
        let link = Link::connect(transport, address)
            .map_err(|source| ClientError::Connect { address, source })?;
        let mut client = Self {
            link,
            dialect,
            client_id,
            session: 0,
            request: 0,
            body: Vec::new(),
        };
        client.login(credentials)?;
        client.call(
            CommandCode::GetClusterMetadata,
            &[],
            PartitionContext::default(),
        )?;
        Ok(client)
    }

    /// Connects in 0.12.2, or in 0.11.0 when the server refuses the 0.12.2 login as a format
    /// or version it does not speak (an Apache Iggy 0.9.0-edge server).
    pub fn negotiate(login: &Login<'_>, client_id: u128) -> Result<Self, ClientError> {
        match Self::connect(login, Dialect::V0_12_2, client_id) {
            Err(ClientError::Refused {
                code: CommandCode::LoginRegister,
                status,
            }) if STATUS_NOT_MY_DIALECT.contains(&status) => {
                Self::connect(login, Dialect::V0_11_0, client_id)
            }
            other => other,
        }
    }

    /// The dialect this connection speaks.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn login(&mut self, credentials: Credentials<'_>) -> Result<(), ClientError> {
        let version = VersionPrefix::rust_sdk(self.dialect);
        let bind_secret = BindSecret(
            self.client_id
                .to_le_bytes()
                .repeat(2)
                .try_into()
                .expect("two 16-byte halves make the 32-byte secret"),
        );
        let secret = |value: &str, what: &str| {
            Secret::new(value).ok_or_else(|| ClientError::Name(what.to_owned()))
        };
        let body = match credentials {
            Credentials::Password { username, password } => {
                let body = LoginRegister {
                    version,
                    bind_secret,
                    username: wire_name(username)?,
                    password: secret(password, "password")?,
                    context: String::new(),
                };
                encode_to_vec(&body, self.dialect)
            }
            Credentials::Token(token) => {
                let body = LoginRegisterWithPat {
                    version,
                    bind_secret,
                    token: secret(token, "token")?,
                    context: String::new(),
                };
                encode_to_vec(&body, self.dialect)
            }
        };
        let mut header = RequestHeader::new(self.client_id, Operation::Register, body.len());
        header.request_checksum = match self.dialect {
            // 0.11.0 identifies a replicated request by the hash of its body (§12.1).
            Dialect::V0_11_0 => U128::new(u128::from(xxh3_64(&body))),
            Dialect::V0_12_2 => U128::new(self.client_id.rotate_left(17) | 1),
        };
        self.exchange(CommandCode::LoginRegister, header.as_bytes(), &body, 0)?;
        let outcome = Reply::decode_body(
            CommandCode::LoginRegister,
            Operation::Register,
            &self.body,
            self.dialect,
        )?;
        match outcome {
            ReplyOutcome::Ok(Reply::LoginRegister(reply)) => {
                self.session = reply.session;
                Ok(())
            }
            ReplyOutcome::Refused(status) => Err(ClientError::Refused {
                code: CommandCode::LoginRegister,
                status,
            }),
            ReplyOutcome::Ok(_) => Err(ClientError::UnexpectedReply(CommandCode::LoginRegister)),
        }
    }

    /// Creates a stream named `name` and returns its id.
    pub fn create_stream(&mut self, name: &str) -> Result<u32, ClientError> {
        let body = CreateStream {
            name: wire_name(name)?,
            options: OptionsBlock::default(),
        };
        match self.control(CommandCode::CreateStream, &body)? {
            Reply::CreateStream(details) => Ok(details.stream.id),
            _ => Err(ClientError::UnexpectedReply(CommandCode::CreateStream)),
        }
    }

    /// Creates a topic with `partitions` partitions and the given durability.
    pub fn create_topic(
        &mut self,
        stream_id: u32,
        name: &str,
        partitions: u32,
        durability: Durability,
    ) -> Result<u32, ClientError> {
        let mut options = OptionsBlock::default();
        // Replicated is every server's default; an 0.9.0-edge server refuses the key itself
        // (`4041`), so a 0.11.0 client names it only to ask for something else.
        if self.dialect == Dialect::V0_12_2 || durability != Durability::Replicated {
            let value = TlvEntry::string(durability.as_str()).expect("a short ASCII value fits");
            options.set("durability", value);
        }
        let body = CreateTopic {
            stream_id: Identifier::Numeric(stream_id),
            partitions_count: partitions,
            name: wire_name(name)?,
            options,
        };
        match self.control(CommandCode::CreateTopic, &body)? {
            Reply::CreateTopic(details) => Ok(details.topic.id),
            _ => Err(ClientError::UnexpectedReply(CommandCode::CreateTopic)),
        }
    }

    /// Creates a personal access token named `name` that never expires; returns its secret.
    pub fn create_token(&mut self, name: &str) -> Result<String, ClientError> {
        let body = CreatePersonalAccessToken {
            name: wire_name(name)?,
            expiry: CreatePersonalAccessToken::EXPIRY_NEVER,
        };
        match self.control(CommandCode::CreatePersonalAccessToken, &body)? {
            Reply::CreatePersonalAccessToken(raw) => Ok(raw.token.expose().to_owned()),
            _ => Err(ClientError::UnexpectedReply(
                CommandCode::CreatePersonalAccessToken,
            )),
        }
    }

    pub fn delete_token(&mut self, name: &str) -> Result<(), ClientError> {
        let body = DeletePersonalAccessToken {
            name: wire_name(name)?,
        };
        self.control(CommandCode::DeletePersonalAccessToken, &body)
            .map(drop)
    }

    /// The server process's resident memory in bytes, from `GET_STATS`.
    pub fn server_memory(&mut self) -> Result<u64, ClientError> {
        match self.control(CommandCode::GetStats, &proto::commands::empty::Empty)? {
            Reply::GetStats(stats) => Ok(stats.memory_usage),
            _ => Err(ClientError::UnexpectedReply(CommandCode::GetStats)),
        }
    }

    /// Messages the server holds, from `GET_STATS`.
    pub fn server_messages(&mut self) -> Result<u64, ClientError> {
        match self.control(CommandCode::GetStats, &proto::commands::empty::Empty)? {
            Reply::GetStats(stats) => Ok(stats.messages_count),
            _ => Err(ClientError::UnexpectedReply(CommandCode::GetStats)),
        }
    }

    pub fn delete_stream(&mut self, stream_id: u32) -> Result<(), ClientError> {
        let body = DeleteStream {
            stream_id: Identifier::Numeric(stream_id),
        };
        self.control(CommandCode::DeleteStream, &body).map(drop)
    }

    /// Creates a consumer group and returns its id.
    pub fn create_group(&mut self, stream_id: u32, topic_id: u32) -> Result<u32, ClientError> {
        let body = CreateConsumerGroup {
            stream_id: Identifier::Numeric(stream_id),
            topic_id: Identifier::Numeric(topic_id),
            name: wire_name("bench-group")?,
        };
        match self.control(CommandCode::CreateConsumerGroup, &body)? {
            Reply::CreateConsumerGroup(details) => Ok(details.group.id),
            _ => Err(ClientError::UnexpectedReply(
                CommandCode::CreateConsumerGroup,
            )),
        }
    }

    /// Joins the group, then asks for this member's assignment.
    pub fn join_group(
        &mut self,
        stream_id: u32,
        topic_id: u32,
        group_id: u32,
    ) -> Result<ConsumerGroupAssignment, ClientError> {
        let join = JoinConsumerGroup {
            stream_id: Identifier::Numeric(stream_id),
            topic_id: Identifier::Numeric(topic_id),
            group_id: Identifier::Numeric(group_id),
        };
        self.control(CommandCode::JoinConsumerGroup, &join)?;
        let sync = SyncConsumerGroup {
            stream_id: join.stream_id,
            topic_id: join.topic_id,
            group_id: join.group_id,
        };
        match self.control(CommandCode::SyncConsumerGroup, &sync)? {
            Reply::SyncConsumerGroup(Some(assignment)) => Ok(assignment),
            _ => Err(ClientError::UnexpectedReply(CommandCode::SyncConsumerGroup)),
        }
    }

    /// The incarnation of a partition, from its route, for every data-plane header (§2.9);
    /// 0 in 0.11.0, which has neither routes nor a partition context (§12.1).
    pub fn incarnation(
        &mut self,
        stream_id: u32,
        topic_id: u32,
        partition_id: u32,
    ) -> Result<u64, ClientError> {
        match self.dialect {
            Dialect::V0_11_0 => Ok(0),
            Dialect::V0_12_2 => self
                .route(stream_id, topic_id, partition_id)
                .map(|route| route.incarnation),
        }
    }

    fn route(
        &mut self,
        stream_id: u32,
        topic_id: u32,
        partition_id: u32,
    ) -> Result<PartitionRoute, ClientError> {
        let body = GetPartitionRoute {
            stream_id: Identifier::Numeric(stream_id),
            topic_id: Identifier::Numeric(topic_id),
            partition_id,
        };
        match self.control(CommandCode::GetPartitionRoute, &body)? {
            Reply::GetPartitionRoute(route) => Ok(route),
            _ => Err(ClientError::UnexpectedReply(CommandCode::GetPartitionRoute)),
        }
    }

    /// Encodes a send of `batch` (one encoded batch record) to an explicit partition.
    pub fn send_frame(
        &self,
        stream_id: u32,
        topic_id: u32,
        partition_id: u32,
        batch: &[u8],
        messages: u32,
    ) -> SendFrame {
        let mut body = Vec::with_capacity(batch.len().saturating_add(64));
        let mut writer = Writer::new(&mut body, self.dialect);
        writer.u32(0);
        Identifier::Numeric(stream_id).encode(&mut writer);
        Identifier::Numeric(topic_id).encode(&mut writer);
        Partitioning::PartitionId(partition_id).encode(&mut writer);
        writer.u32(messages);
        let metadata_length = u32::try_from(writer.len() - 4).expect("metadata is < 40 bytes");
        writer.patch_u32(0, metadata_length);
        writer.bytes(batch);
        let header = RequestHeader::new(self.client_id, Operation::SendMessages, body.len());
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(&body);
        SendFrame { bytes }
    }

    /// Sends a prepared frame to the partition of `incarnation` and waits for the ack.
    pub fn send(&mut self, frame: &mut SendFrame, incarnation: u64) -> Result<(), ClientError> {
        self.request += 1;
        let header = frame.header_mut();
        header.session = U64::new(self.session);
        header.request = U64::new(self.request);
        header.partition_incarnation = U64::new(incarnation);
        let (head, body) = frame.bytes.split_at(HEADER_SIZE);
        self.link.write_frame(head, body)?;
        self.read_reply(CommandCode::SendMessages, self.request)
    }

    /// Polls up to `selector.count` messages; returns how many came back.
    pub fn poll(
        &mut self,
        selector: &PollSelector,
        context: PartitionContext,
    ) -> Result<u32, ClientError> {
        let body = encode_to_vec(selector, self.dialect);
        self.call(CommandCode::PollMessages, &body, context)?;
        let polled: PolledMessages<'_> = decode_exact(&self.body, self.dialect)?;
        if polled.partition_id == PolledMessages::RESYNC_PARTITION {
            // 0.11.0 tells a group member its assignment is stale this way; 0.12.2 with 5009.
            return Err(ClientError::Refused {
                code: CommandCode::PollMessages,
                status: STATUS_NOT_OWNED,
            });
        }
        Ok(polled.messages_count)
    }

    /// Sends one request of `code` with the encoded `body` and returns its refusal code: the
    /// header status, or the result section's code for a result-framed reply; 0 when the
    /// server accepted it. For tests that probe what a server allows.
    pub fn status_of(&mut self, code: CommandCode, body: &[u8]) -> Result<u32, ClientError> {
        match self.call(code, body, PartitionContext::default()) {
            Ok(operation) if operation.is_result_framed() => {
                let outcome = Reply::decode_body(code, operation, &self.body, self.dialect);
                match outcome {
                    Ok(ReplyOutcome::Refused(status)) => Ok(status),
                    Ok(ReplyOutcome::Ok(_)) | Err(_) => Ok(0),
                }
            }
            Ok(_) => Ok(0),
            Err(ClientError::Refused { status, .. }) => Ok(status),
            Err(error) => Err(error),
        }
    }

    /// The refusal code of a send of `frame` (0 when it was appended).
    pub fn send_status(&mut self, frame: &mut SendFrame) -> Result<u32, ClientError> {
        match self.send(frame, 0) {
            Ok(()) => Ok(0),
            Err(ClientError::Refused { status, .. }) => Ok(status),
            Err(error) => Err(error),
        }
    }

    /// Encodes `body`, calls, and decodes the reply as the SDK does.
    fn control<'a, T: Codec<'a>>(
        &mut self,
        code: CommandCode,
        body: &T,
    ) -> Result<Reply<'_>, ClientError> {
        let body = encode_to_vec(body, self.dialect);
        let operation = self.call(code, &body, PartitionContext::default())?;
        match Reply::decode_body(code, operation, &self.body, self.dialect)? {
            ReplyOutcome::Ok(reply) => Ok(reply),
            ReplyOutcome::Refused(status) => Err(ClientError::Refused { code, status }),
        }
    }

    /// One bound request: header per §1.7 (§12.1 in 0.11.0), then the reply into
    /// `self.body`.
    fn call(
        &mut self,
        code: CommandCode,
        body: &[u8],
        context: PartitionContext,
    ) -> Result<Operation, ClientError> {
        let operation = code.operation();
        let legacy = self.dialect == Dialect::V0_11_0;
        // 0.11.0: a non-replicated request repeats the current number.
        if !(legacy && operation == Operation::NonReplicated) {
            self.request += 1;
        }
        let numbers = (self.session, self.request);
        let context = if legacy {
            PartitionContext::default()
        } else {
            context
        };
        let mut header = RequestHeader::bound(self.client_id, code, body.len(), numbers, context);
        if legacy && operation != Operation::NonReplicated && !operation.is_partition_plane() {
            header.request_checksum = U128::new(u128::from(xxh3_64(body)));
        }
        let request = self.request;
        self.exchange(code, header.as_bytes(), body, request)?;
        Ok(operation)
    }

    fn exchange(
        &mut self,
        code: CommandCode,
        header: &[u8],
        body: &[u8],
        request: u64,
    ) -> Result<(), ClientError> {
        self.link.write_frame(header, body)?;
        self.read_reply(code, request)
    }

    /// Reads one frame; an eviction or a non-zero status is an error.
    fn read_reply(&mut self, code: CommandCode, request: u64) -> Result<(), ClientError> {
        let mut head = [0u8; HEADER_SIZE];
        let size_of = |head: &[u8; HEADER_SIZE]| {
            let prefix = frame_prefix(head, FRAME_SIZE_MAX_DEFAULT).map_err(io::Error::other)?;
            Ok(prefix.body_length())
        };
        self.link.read_frame(&mut head, &mut self.body, size_of)?;
        let prefix = frame_prefix(&head, FRAME_SIZE_MAX_DEFAULT)?;
        if prefix.command == Command::Eviction {
            let eviction = EvictionHeader::parse(&head)?;
            return Err(ClientError::Evicted {
                reason: eviction.reason().map_or(u8::MAX, |reason| reason as u8),
            });
        }
        let reply = ReplyHeader::parse(&head)?;
        if reply.request.get() != request {
            return Err(ClientError::RequestMismatch {
                code,
                expected: request,
                got: reply.request.get(),
            });
        }
        match reply.status.get() {
            0 => Ok(()),
            status => Err(ClientError::Refused { code, status }),
        }
    }
}

impl SendFrame {
    /// Frame bytes, header included: what a send puts on the wire.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn header_mut(&mut self) -> &mut RequestHeader {
        use zerocopy::FromBytes;
        let (header, _body) = RequestHeader::mut_from_prefix(&mut self.bytes)
            .expect("a send frame starts with the 256-byte header it was built with");
        header
    }
}

fn wire_name(name: &str) -> Result<WireName, ClientError> {
    WireName::new(name).ok_or_else(|| ClientError::Name(name.to_owned()))
}

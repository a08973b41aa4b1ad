//! One request type and one reply type per command code, so a server decodes any frame body
//! with one call and a client decodes any reply the same way.
//!
//! The two enums are generated from one table by a small macro: the table is the only place
//! that pairs a code with its body types, and writing the three matches by hand would repeat
//! it three times.

use crate::codec::{Codec, Reader, Writer, decode_exact};
use crate::codes::CommandCode;
use crate::dialect::Dialect;
use crate::error::{DecodeError, DecodeErrorKind};
use crate::header::Operation;
use crate::result::ResultSection;

use super::Empty;
use super::groups::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroups, CreateConsumerGroup,
    DeleteConsumerGroup, GetConsumerGroup, GetConsumerGroups, JoinConsumerGroup,
    LeaveConsumerGroup, SyncConsumerGroup,
};
use super::legacy::{
    AttachConsumerSession, ConsumerRouting, FlushUnsavedBuffer, GetConsumerOffsetRouting,
    GetPollRouting, PollMessagesOnPrimary, PurgeStream, PurgeTopic, UpdateStream, UpdateTopic,
    UpdateUser,
};
use super::messages::{
    FetchMessages, FetchedMessages, GetPartitionRoute, PartitionRoute, PollMessagesDeferred,
    PolledMessages, SendConfirmations, SendMessages,
};
use super::offsets::{
    ConsumerOffset, DeleteConsumerOffset, GetConsumerOffset, StoreConsumerOffset,
};
use super::partitions::{CreatePartitions, DeletePartitions, DeleteSegments};
use super::poll_selector::PollSelector;
use super::session::{
    BindSession, LoginRegister, LoginRegisterWithPat, LoginReply, LoginUser,
    LoginWithPersonalAccessToken, UserIdentity,
};
use super::streams::{CreateStream, DeleteStream, GetStream, StreamDetails, Streams};
use super::system::{
    ClientDetails, Clients, ClusterMetadata, DescribeOptions, GetClient, MetadataChanges,
    MetadataChangesRequest, OptionDescriptors, SnapshotFile, SnapshotRequest, Stats,
    UpdateResource,
};
use super::tokens::{
    CreatePersonalAccessToken, DeletePersonalAccessToken, PersonalAccessTokens,
    RawPersonalAccessToken,
};
use super::topics::{CreateTopic, DeleteTopic, GetTopic, GetTopics, TopicDetails, Topics};
use super::users::{
    ChangePassword, CreateUser, DeleteUser, GetUser, UpdatePermissions, UserDetails, Users,
};

/// An empty body decodes as `None`: the protocol's "not found" (`GET_STREAM`, `GET_USER`, …).
impl<'a, T: Codec<'a>> Codec<'a> for Option<T> {
    fn encode(&self, writer: &mut Writer<'_>) {
        if let Some(value) = self {
            value.encode(writer);
        }
    }

    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        if reader.is_empty() {
            return Ok(None);
        }
        T::decode(reader).map(Some)
    }
}

macro_rules! command_table {
    ($($variant:ident: $request:ty => $reply:ty,)*) => {
        /// A decoded request body.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request<'a> {
            $($variant($request),)*
        }

        /// A decoded reply payload (after the result section, where there is one).
        #[derive(Debug, Clone, PartialEq)]
        pub enum Reply<'a> {
            $($variant($reply),)*
        }

        impl<'a> Request<'a> {
            /// Decodes the body of a request for `code`; the body must be consumed exactly.
            pub fn decode(
                code: CommandCode,
                body: &'a [u8],
                dialect: Dialect,
            ) -> Result<Self, DecodeError> {
                check_known(code, dialect)?;
                match code {
                    $(CommandCode::$variant => decode_exact(body, dialect).map(Self::$variant),)*
                }
            }

            pub fn code(&self) -> CommandCode {
                match self {
                    $(Self::$variant(_) => CommandCode::$variant,)*
                }
            }

            pub fn encode(&self, writer: &mut Writer<'_>) {
                match self {
                    $(Self::$variant(body) => body.encode(writer),)*
                }
            }
        }

        impl<'a> Reply<'a> {
            /// Decodes the payload of a reply to `code`; the payload must be consumed exactly.
            pub fn decode(
                code: CommandCode,
                payload: &'a [u8],
                dialect: Dialect,
            ) -> Result<Self, DecodeError> {
                check_known(code, dialect)?;
                match code {
                    $(CommandCode::$variant => decode_exact(payload, dialect).map(Self::$variant),)*
                }
            }

            pub fn code(&self) -> CommandCode {
                match self {
                    $(Self::$variant(_) => CommandCode::$variant,)*
                }
            }

            pub fn encode(&self, writer: &mut Writer<'_>) {
                match self {
                    $(Self::$variant(payload) => payload.encode(writer),)*
                }
            }
        }
    };
}

command_table! {
    Ping: Empty => Empty,
    GetStats: Empty => Stats,
    GetSnapshotFile: SnapshotRequest => SnapshotFile,
    GetClusterMetadata: Empty => ClusterMetadata,
    DescribeOptions: DescribeOptions => OptionDescriptors,
    AttachConsumerSession: AttachConsumerSession => Empty,
    BindSession: BindSession => LoginReply,
    UpdateResource: UpdateResource => Empty,
    GetMetadataChanges: MetadataChangesRequest => MetadataChanges,
    GetMe: Empty => ClientDetails,
    GetClient: GetClient => Option<ClientDetails>,
    GetClients: Empty => Clients,
    GetUser: GetUser => Option<UserDetails>,
    GetUsers: Empty => Users,
    CreateUser: CreateUser => UserDetails,
    DeleteUser: DeleteUser => Empty,
    UpdateUser: UpdateUser => Empty,
    UpdatePermissions: UpdatePermissions => Empty,
    ChangePassword: ChangePassword => Empty,
    LoginUser: LoginUser => UserIdentity,
    LogoutUser: Empty => Empty,
    LoginRegister: LoginRegister => LoginReply,
    GetPersonalAccessTokens: Empty => PersonalAccessTokens,
    CreatePersonalAccessToken: CreatePersonalAccessToken => RawPersonalAccessToken,
    DeletePersonalAccessToken: DeletePersonalAccessToken => Empty,
    LoginWithPersonalAccessToken: LoginWithPersonalAccessToken => UserIdentity,
    LoginRegisterWithPat: LoginRegisterWithPat => LoginReply,
    PollMessages: PollSelector => PolledMessages<'a>,
    SendMessages: SendMessages<'a> => SendConfirmations,
    FlushUnsavedBuffer: FlushUnsavedBuffer => Empty,
    GetPollRouting: GetPollRouting => ConsumerRouting,
    PollMessagesOnPrimary: PollMessagesOnPrimary => PolledMessages<'a>,
    GetPartitionRoute: GetPartitionRoute => PartitionRoute,
    PollMessagesDeferred: PollMessagesDeferred => PolledMessages<'a>,
    CancelDeferredRequest: Empty => Empty,
    FetchMessages: FetchMessages => FetchedMessages<'a>,
    GetConsumerOffset: GetConsumerOffset => Option<ConsumerOffset>,
    StoreConsumerOffset: StoreConsumerOffset => Empty,
    DeleteConsumerOffset: DeleteConsumerOffset => Empty,
    GetConsumerOffsetRouting: GetConsumerOffsetRouting => ConsumerRouting,
    GetStream: GetStream => Option<StreamDetails>,
    GetStreams: Empty => Streams,
    CreateStream: CreateStream => StreamDetails,
    DeleteStream: DeleteStream => Empty,
    UpdateStream: UpdateStream => Empty,
    PurgeStream: PurgeStream => Empty,
    GetTopic: GetTopic => Option<TopicDetails>,
    GetTopics: GetTopics => Topics,
    CreateTopic: CreateTopic => TopicDetails,
    DeleteTopic: DeleteTopic => Empty,
    UpdateTopic: UpdateTopic => Empty,
    PurgeTopic: PurgeTopic => Empty,
    CreatePartitions: CreatePartitions => Empty,
    DeletePartitions: DeletePartitions => Empty,
    DeleteSegments: DeleteSegments => Empty,
    GetConsumerGroup: GetConsumerGroup => Option<ConsumerGroupDetails>,
    GetConsumerGroups: GetConsumerGroups => ConsumerGroups,
    CreateConsumerGroup: CreateConsumerGroup => ConsumerGroupDetails,
    DeleteConsumerGroup: DeleteConsumerGroup => Empty,
    JoinConsumerGroup: JoinConsumerGroup => Empty,
    LeaveConsumerGroup: LeaveConsumerGroup => Empty,
    SyncConsumerGroup: SyncConsumerGroup => Option<ConsumerGroupAssignment>,
}

/// Refuses codes the dialect's clients never send.
fn check_known(code: CommandCode, dialect: Dialect) -> Result<(), DecodeError> {
    if code.is_known_in(dialect) {
        Ok(())
    } else {
        let kind = DecodeErrorKind::UnknownCommand {
            code: code.as_u32(),
        };
        Err(DecodeError::new("header.code", 196, kind))
    }
}

/// What a reply body says: a payload, or the refusal of its result section.
// Outcomes are returned and matched at once, never stored in bulk; boxing the payload would
// allocate on every reply.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyOutcome<'a> {
    Ok(Reply<'a>),
    Refused(u32),
}

impl<'a> Reply<'a> {
    /// Decodes a whole reply body for `code` as the SDK does: a result section first when the
    /// header's `operation` is result-framed (Register only when the body is non-empty),
    /// then the payload.
    pub fn decode_body(
        code: CommandCode,
        operation: Operation,
        body: &'a [u8],
        dialect: Dialect,
    ) -> Result<ReplyOutcome<'a>, DecodeError> {
        let framed =
            operation.is_result_framed() && !(operation == Operation::Register && body.is_empty());
        if !framed {
            return Self::decode(code, body, dialect).map(ReplyOutcome::Ok);
        }
        let mut reader = Reader::new(body, dialect);
        match ResultSection::decode(&mut reader)? {
            ResultSection::Refused(code) => Ok(ReplyOutcome::Refused(code)),
            ResultSection::Ok => {
                let offset = reader.offset();
                let payload = reader.rest();
                Self::decode(code, payload, dialect)
                    .map(ReplyOutcome::Ok)
                    .map_err(|mut error| {
                        error.offset = error.offset.saturating_add(offset);
                        error
                    })
            }
        }
    }
}

impl<'a> Request<'a> {
    /// Decodes a `Register` body, which the header does not say is a password login (40) or
    /// a token login (45): the shapes differ after the version prefix (and bind secret), and
    /// a token body read as a password login fails on its zero-length password, so trying the
    /// password shape first is unambiguous.
    pub fn decode_register(body: &'a [u8], dialect: Dialect) -> Result<Self, DecodeError> {
        Self::decode(CommandCode::LoginRegister, body, dialect)
            .or_else(|_password| Self::decode(CommandCode::LoginRegisterWithPat, body, dialect))
    }
}

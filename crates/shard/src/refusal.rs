//! Why the shard refuses a request, in the domain's terms: what is missing, taken, exhausted
//! or invalid, who may not do it, what this server does not offer. Handlers and the
//! metadata and data planes return a [`Refusal`]; [`Refusal::code`] is the one table that
//! turns it into Iggy's wire code (PROTOCOL.md §6), called where a reply is encoded. The
//! grouping is what another encoder needs too: the HTTP API answers `Missing` with 404,
//! `Taken` with 409, and so on, with the same code in its body.

use proto::{DecodeError, ErrorCode};
use segment::producers::ProducerRefusal;

/// A request the shard will not carry out, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The frame names no command this server knows, or its body is not that command's
    /// shape (`3 InvalidCommand`).
    #[error("malformed request")]
    Malformed,
    /// A body the codec refused: its own code (§5.5 for message batches).
    #[error("undecodable request: {0}")]
    Undecodable(DecodeError),
    #[error("{0:?} not found")]
    Missing(Missing),
    #[error("{0:?} already exists")]
    Taken(Taken),
    #[error("limit of {0:?} reached")]
    Limit(Limit),
    #[error("invalid {0:?}")]
    Invalid(Invalid),
    /// No user is logged in on the connection (or its user was deleted).
    #[error("not authenticated")]
    Unauthenticated,
    /// The user lacks the permission the request needs.
    #[error("not permitted")]
    Forbidden,
    #[error("login refused: {0:?}")]
    Login(Login),
    /// A change the server never makes to a protected user.
    #[error("protected: {0:?}")]
    Protected(Protected),
    /// A topic option (§7.4) that cannot be set or changed as asked.
    #[error("topic option: {0:?}")]
    TopicOption(TopicOption),
    #[error("unavailable: {0:?}")]
    Unavailable(Unavailable),
    /// The idempotent-producer check refused a batch (§5.5).
    #[error("producer: {0}")]
    Producer(ProducerRefusal),
    /// A consumer-group partition this member may not be served now (it moved, or is
    /// being handed off).
    #[error("partition not owned by this group member")]
    NotOwned,
    /// A partition that refuses to append (quarantined) or holds a record that fails its
    /// checksums.
    #[error("storage: {0:?}")]
    Storage(StorageFault),
    /// Cluster mode: this node is not the primary, which alone serves partitions
    /// (`89 NotPrimary`; the client looks the route up again).
    #[error("not the primary")]
    NotPrimary,
    /// Cluster mode: the change cannot be taken now (not the primary, or between views, or
    /// its queue is full): `58 TransientNotAccepted`, which the client retries elsewhere.
    #[error("not accepted now")]
    NotAccepted,
    /// Cluster mode: the change was not committed in time and may still be:
    /// `57 TransientNotCommitted`, which the client resends.
    #[error("not committed yet")]
    NotCommitted,
    /// Something failed inside the server (I/O, a gone shard): `1 Error`.
    #[error("internal error")]
    Internal,
    /// The change was validated against metadata that changed before it reached the
    /// sequencer (another client's change committed in between) and no longer applies. Never
    /// answered: the handler validates again against the metadata as it is now
    /// (`Server::commit_validated`), which gives the typed refusal or a change that applies.
    #[error("validated against metadata that changed since")]
    Stale,
}

/// What a request named that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    Stream,
    StreamName,
    Topic,
    TopicName,
    Partition,
    Group,
    GroupMember,
    ConsumerOffset,
    /// A user or a personal access token (`20 ResourceNotFound`).
    Resource,
}

/// What a create or rename would duplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    StreamName,
    TopicName,
    GroupName,
    User,
    TokenName,
}

/// A count the server bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Streams,
    Topics,
    Partitions,
    Groups,
    ConsumerOffsets,
    Users,
    Tokens,
    /// A topic's partition ids ran out (ids are never reused).
    PartitionIds,
}

/// A request field out of its range or form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    TopicSize,
    PartitionsCount,
    Username,
    Password,
    TokenName,
    TokenExpiry,
    UserStatus,
    Offset,
    MessagesCount,
    PayloadLength,
    /// An idempotent producer's batch must name its partition (§5.5).
    ProducerPartitioning,
}

/// Why a login (or a personal-access-token login) fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Login {
    /// Wrong user name or password, or backing off after failures.
    Credentials,
    UserInactive,
    Token,
    TokenExpired,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protected {
    /// The root user's status or permissions.
    RootUser,
    /// The root user, or the caller itself.
    DeleteUser,
    ChangePermissions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicOption {
    UnsupportedKey,
    InvalidValue,
    ReadOnly,
    NotUpdatable,
    NotResettable,
}

/// What this server or build does not offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    Feature,
    /// A request for a history this server does not keep: an older incarnation of a
    /// partition.
    History,
    PartitionResize,
    StreamEncryption,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFault {
    CannotAppend,
    CannotRead,
}

impl Refusal {
    /// The wire code for this refusal: the one table from the domain's reasons to Iggy's
    /// codes. The transport maps it further for an older client's dialect (§6.2).
    pub fn code(self) -> ErrorCode {
        match self {
            Self::Malformed => ErrorCode::InvalidCommand,
            Self::Undecodable(error) => error.status(),
            Self::Missing(missing) => missing_code(missing),
            Self::Taken(taken) => taken_code(taken),
            Self::Limit(limit) => limit_code(limit),
            Self::Invalid(invalid) => invalid_code(invalid),
            Self::Unauthenticated => ErrorCode::Unauthenticated,
            Self::Forbidden => ErrorCode::Unauthorized,
            Self::Login(login) => login_code(login),
            Self::Protected(Protected::RootUser) => ErrorCode::CannotModifyRootUser,
            Self::Protected(Protected::DeleteUser) => ErrorCode::CannotDeleteUser,
            Self::Protected(Protected::ChangePermissions) => ErrorCode::CannotChangePermissions,
            Self::TopicOption(option) => option_code(option),
            Self::Unavailable(unavailable) => unavailable_code(unavailable),
            Self::Producer(ProducerRefusal::Unknown) => ErrorCode::ProducerUnknown,
            Self::Producer(ProducerRefusal::EpochFenced) => ErrorCode::ProducerEpochFenced,
            Self::Producer(ProducerRefusal::OutOfOrder) => ErrorCode::ProducerSequenceOutOfOrder,
            Self::NotOwned => ErrorCode::ConsumerGroupPartitionNotOwned,
            Self::Storage(StorageFault::CannotAppend) => ErrorCode::CannotAppendMessage,
            Self::Storage(StorageFault::CannotRead) => ErrorCode::CannotReadMessage,
            Self::NotPrimary => ErrorCode::NotPrimary,
            Self::NotAccepted => ErrorCode::TransientNotAccepted,
            Self::NotCommitted => ErrorCode::TransientNotCommitted,
            // `Stale` is retried, never answered; were it, it would be an internal failure.
            Self::Internal | Self::Stale => ErrorCode::Error,
        }
    }
}

const fn missing_code(missing: Missing) -> ErrorCode {
    match missing {
        Missing::Stream => ErrorCode::StreamIdNotFound,
        Missing::StreamName => ErrorCode::StreamNameNotFound,
        Missing::Topic => ErrorCode::TopicIdNotFound,
        Missing::TopicName => ErrorCode::TopicNameNotFound,
        Missing::Partition => ErrorCode::PartitionNotFound,
        Missing::Group => ErrorCode::ConsumerGroupIdNotFound,
        Missing::GroupMember => ErrorCode::ConsumerGroupMemberNotFound,
        Missing::ConsumerOffset => ErrorCode::ConsumerOffsetNotFound,
        Missing::Resource => ErrorCode::ResourceNotFound,
    }
}

const fn taken_code(taken: Taken) -> ErrorCode {
    match taken {
        Taken::StreamName => ErrorCode::StreamNameAlreadyExists,
        Taken::TopicName => ErrorCode::TopicNameAlreadyExists,
        Taken::GroupName => ErrorCode::ConsumerGroupNameAlreadyExists,
        Taken::User => ErrorCode::UserAlreadyExists,
        Taken::TokenName => ErrorCode::PersonalAccessTokenAlreadyExists,
    }
}

const fn limit_code(limit: Limit) -> ErrorCode {
    match limit {
        Limit::Streams => ErrorCode::TooManyStreams,
        Limit::Topics => ErrorCode::TooManyTopics,
        Limit::Partitions => ErrorCode::TooManyPartitions,
        Limit::Groups => ErrorCode::TooManyConsumerGroups,
        Limit::ConsumerOffsets => ErrorCode::TooManyConsumerOffsets,
        Limit::Users => ErrorCode::UsersLimitReached,
        Limit::Tokens => ErrorCode::PersonalAccessTokensLimitReached,
        Limit::PartitionIds => ErrorCode::PartitionIdSpaceExhausted,
    }
}

const fn invalid_code(invalid: Invalid) -> ErrorCode {
    match invalid {
        Invalid::TopicSize => ErrorCode::InvalidTopicSize,
        Invalid::PartitionsCount => ErrorCode::InvalidPartitionsCount,
        Invalid::Username => ErrorCode::InvalidUsername,
        Invalid::Password => ErrorCode::InvalidPassword,
        Invalid::TokenName => ErrorCode::InvalidPersonalAccessTokenName,
        Invalid::TokenExpiry => ErrorCode::InvalidPersonalAccessTokenExpiry,
        Invalid::UserStatus => ErrorCode::InvalidUserStatus,
        Invalid::Offset => ErrorCode::InvalidOffset,
        Invalid::MessagesCount => ErrorCode::InvalidMessagesCount,
        Invalid::PayloadLength => ErrorCode::InvalidMessagePayloadLength,
        Invalid::ProducerPartitioning => ErrorCode::ProducerPartitionRequired,
    }
}

const fn login_code(login: Login) -> ErrorCode {
    match login {
        Login::Credentials => ErrorCode::InvalidCredentials,
        Login::UserInactive => ErrorCode::UserInactive,
        Login::Token => ErrorCode::InvalidPersonalAccessToken,
        Login::TokenExpired => ErrorCode::PersonalAccessTokenExpired,
    }
}

const fn option_code(option: TopicOption) -> ErrorCode {
    match option {
        TopicOption::UnsupportedKey => ErrorCode::UnsupportedOptionKey,
        TopicOption::InvalidValue => ErrorCode::InvalidOptionValue,
        TopicOption::ReadOnly => ErrorCode::ReadOnlyOption,
        TopicOption::NotUpdatable => ErrorCode::OptionNotUpdatable,
        TopicOption::NotResettable => ErrorCode::OptionNotResettable,
    }
}

const fn unavailable_code(unavailable: Unavailable) -> ErrorCode {
    match unavailable {
        Unavailable::Feature => ErrorCode::FeatureUnavailable,
        Unavailable::History => ErrorCode::HistoryUnavailable,
        Unavailable::PartitionResize => ErrorCode::PartitionResizeDisabled,
        Unavailable::StreamEncryption => ErrorCode::StreamEncryptionUnavailable,
    }
}

#[cfg(test)]
#[path = "refusal_tests.rs"]
mod tests;

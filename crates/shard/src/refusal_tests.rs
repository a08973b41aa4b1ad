use std::collections::BTreeMap;

use proto::{DecodeError, ErrorCode};
use segment::producers::ProducerRefusal;

use super::*;

/// Every refusal but `Undecodable` (whose code is the codec's). The `match` in
/// [`listed`] has no wildcard, so a new variant fails to compile until it is listed here.
fn every_refusal() -> Vec<Refusal> {
    let mut all = request_refusals();
    all.extend(access_and_service_refusals());
    all
}

/// The refusals about what a request names or asks for.
fn request_refusals() -> Vec<Refusal> {
    use Missing as M;
    let mut all = vec![
        Refusal::Malformed,
        Refusal::Unauthenticated,
        Refusal::Forbidden,
    ];
    all.extend(
        [
            M::Stream,
            M::StreamName,
            M::Topic,
            M::TopicName,
            M::Partition,
        ]
        .map(Refusal::Missing),
    );
    all.extend([M::Group, M::GroupMember, M::ConsumerOffset, M::Resource].map(Refusal::Missing));
    all.extend(
        [
            Taken::StreamName,
            Taken::TopicName,
            Taken::GroupName,
            Taken::User,
            Taken::TokenName,
        ]
        .map(Refusal::Taken),
    );
    all.extend(
        [
            Limit::Streams,
            Limit::Topics,
            Limit::Partitions,
            Limit::Groups,
            Limit::ConsumerOffsets,
        ]
        .map(Refusal::Limit),
    );
    all.extend([Limit::Users, Limit::Tokens, Limit::PartitionIds].map(Refusal::Limit));
    all.extend(
        [
            Invalid::TopicSize,
            Invalid::PartitionsCount,
            Invalid::Username,
            Invalid::Password,
        ]
        .map(Refusal::Invalid),
    );
    all.extend(
        [
            Invalid::TokenName,
            Invalid::TokenExpiry,
            Invalid::UserStatus,
            Invalid::Offset,
        ]
        .map(Refusal::Invalid),
    );
    all.extend(
        [
            Invalid::MessagesCount,
            Invalid::PayloadLength,
            Invalid::ProducerPartitioning,
        ]
        .map(Refusal::Invalid),
    );
    all
}

/// The refusals about who asks and what the server offers.
fn access_and_service_refusals() -> Vec<Refusal> {
    let mut all = Vec::new();
    all.extend(
        [
            Login::Credentials,
            Login::UserInactive,
            Login::Token,
            Login::TokenExpired,
        ]
        .map(Refusal::Login),
    );
    all.extend(
        [
            Protected::RootUser,
            Protected::DeleteUser,
            Protected::ChangePermissions,
        ]
        .map(Refusal::Protected),
    );
    all.extend(
        [
            TopicOption::UnsupportedKey,
            TopicOption::InvalidValue,
            TopicOption::ReadOnly,
            TopicOption::NotUpdatable,
            TopicOption::NotResettable,
        ]
        .map(Refusal::TopicOption),
    );
    all.extend(
        [
            Unavailable::Feature,
            Unavailable::History,
            Unavailable::PartitionResize,
            Unavailable::StreamEncryption,
        ]
        .map(Refusal::Unavailable),
    );
    all.extend(
        [
            ProducerRefusal::Unknown,
            ProducerRefusal::EpochFenced,
            ProducerRefusal::OutOfOrder,
        ]
        .map(Refusal::Producer),
    );
    all.extend([StorageFault::CannotAppend, StorageFault::CannotRead].map(Refusal::Storage));
    all.extend([
        Refusal::NotOwned,
        Refusal::NotPrimary,
        Refusal::NotAccepted,
        Refusal::NotCommitted,
        Refusal::Internal,
    ]);
    all
}

/// Compiles only while every variant is handled: a reminder to list a new one above.
fn listed(refusal: Refusal) -> bool {
    match refusal {
        // `Stale` is never answered: the handler validates again (`commit_validated`).
        Refusal::Undecodable(_) | Refusal::Stale => false,
        Refusal::Malformed
        | Refusal::Missing(_)
        | Refusal::Taken(_)
        | Refusal::Limit(_)
        | Refusal::Invalid(_)
        | Refusal::Unauthenticated
        | Refusal::Forbidden
        | Refusal::Login(_)
        | Refusal::Protected(_)
        | Refusal::TopicOption(_)
        | Refusal::Unavailable(_)
        | Refusal::Producer(_)
        | Refusal::NotOwned
        | Refusal::Storage(_)
        | Refusal::NotPrimary
        | Refusal::NotAccepted
        | Refusal::NotCommitted
        | Refusal::Internal => true,
    }
}

#[test]
fn every_reason_has_its_own_code() {
    let mut seen: BTreeMap<u32, Refusal> = BTreeMap::new();
    for refusal in every_refusal() {
        assert!(listed(refusal));
        let code = refusal.code();
        assert_eq!(ErrorCode::from_u32(code.as_u32()), Some(code));
        if let Some(other) = seen.insert(code.as_u32(), refusal) {
            panic!("{refusal:?} and {other:?} share {code:?}");
        }
    }
    // Only an internal failure is the generic `1 Error`.
    assert_eq!(
        seen.get(&ErrorCode::Error.as_u32()),
        Some(&Refusal::Internal)
    );
    assert_eq!(seen.len(), 62);
}

#[test]
fn an_undecodable_request_answers_with_the_codec_code() {
    use proto::error::{DecodeErrorKind, Subject};
    let checksum = DecodeError::new("batch", 8, DecodeErrorKind::BatchChecksum);
    assert_eq!(
        Refusal::Undecodable(checksum).code(),
        ErrorCode::InvalidBatchChecksum
    );
    let empty = DecodeError::new(
        "payload",
        8,
        DecodeErrorKind::InvalidLength {
            length: 0,
            min: 1,
            max: 10,
        },
    )
    .about(Subject::PayloadLength);
    assert_eq!(
        Refusal::Undecodable(empty).code(),
        ErrorCode::InvalidMessagePayloadLength
    );
    assert!(!listed(Refusal::Undecodable(empty)));
}

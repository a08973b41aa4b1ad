//! Seed bodies for the request and reply fuzz families: one or more valid encodings per
//! command code and dialect, drawn from each type's proptest strategy with a fixed seed, so
//! the mutations in the replay test start from inputs that get past the first checks.

use std::vec::Vec;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::codec::{Codec, encode_to_vec};
use crate::codes::CommandCode as C;
use crate::commands::Empty;
use crate::commands::groups::*;
use crate::commands::legacy::*;
use crate::commands::messages::*;
use crate::commands::offsets::*;
use crate::commands::partitions::*;
use crate::commands::poll_selector::PollSelector;
use crate::commands::session::*;
use crate::commands::streams::*;
use crate::commands::system::*;
use crate::commands::tokens::*;
use crate::commands::topics::*;
use crate::commands::users::*;
use crate::dialect::Dialect;

/// Values drawn per type.
const SAMPLES: usize = 3;

fn runner() -> TestRunner {
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    TestRunner::new_with_rng(Config::default(), rng)
}

/// `SAMPLES` encodings of random `T`s in `dialect`, each tagged with `code`.
fn samples<T>(runner: &mut TestRunner, code: C, dialect: Dialect) -> Vec<(C, Dialect, Vec<u8>)>
where
    T: Arbitrary + for<'a> Codec<'a>,
{
    let strategy = any::<T>();
    (0..SAMPLES)
        .map(|_| {
            let value = strategy
                .new_tree(runner)
                .expect("strategy yields a value")
                .current();
            (code, dialect, encode_to_vec(&value, dialect))
        })
        .collect()
}

// A table: one line per command code.
#[allow(clippy::too_many_lines)]
pub(super) fn request_seeds() -> Vec<(C, Dialect, Vec<u8>)> {
    let mut runner = runner();
    let mut seeds = Vec::new();
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let r = &mut runner;
        for code in [
            C::Ping,
            C::GetStats,
            C::GetClusterMetadata,
            C::GetMe,
            C::GetClients,
            C::GetUsers,
            C::LogoutUser,
            C::GetPersonalAccessTokens,
            C::CancelDeferredRequest,
            C::GetStreams,
        ] {
            seeds.extend(samples::<Empty>(r, code, dialect));
        }
        seeds.extend(samples::<SnapshotRequest>(r, C::GetSnapshotFile, dialect));
        seeds.extend(samples::<DescribeOptions>(r, C::DescribeOptions, dialect));
        seeds.extend(samples::<AttachConsumerSession>(
            r,
            C::AttachConsumerSession,
            dialect,
        ));
        seeds.extend(samples::<BindSession>(r, C::BindSession, dialect));
        seeds.extend(samples::<UpdateResource>(r, C::UpdateResource, dialect));
        seeds.extend(samples::<MetadataChangesRequest>(
            r,
            C::GetMetadataChanges,
            dialect,
        ));
        seeds.extend(samples::<GetClient>(r, C::GetClient, dialect));
        seeds.extend(samples::<GetUser>(r, C::GetUser, dialect));
        seeds.extend(samples::<CreateUser>(r, C::CreateUser, dialect));
        seeds.extend(samples::<DeleteUser>(r, C::DeleteUser, dialect));
        seeds.extend(samples::<UpdateUser>(r, C::UpdateUser, dialect));
        seeds.extend(samples::<UpdatePermissions>(
            r,
            C::UpdatePermissions,
            dialect,
        ));
        seeds.extend(samples::<ChangePassword>(r, C::ChangePassword, dialect));
        seeds.extend(samples::<LoginUser>(r, C::LoginUser, dialect));
        seeds.extend(samples::<LoginRegister>(r, C::LoginRegister, dialect));
        seeds.extend(samples::<CreatePersonalAccessToken>(
            r,
            C::CreatePersonalAccessToken,
            dialect,
        ));
        seeds.extend(samples::<DeletePersonalAccessToken>(
            r,
            C::DeletePersonalAccessToken,
            dialect,
        ));
        seeds.extend(samples::<LoginWithPersonalAccessToken>(
            r,
            C::LoginWithPersonalAccessToken,
            dialect,
        ));
        seeds.extend(samples::<LoginRegisterWithPat>(
            r,
            C::LoginRegisterWithPat,
            dialect,
        ));
        seeds.extend(samples::<PollSelector>(r, C::PollMessages, dialect));
        seeds.extend(samples::<FlushUnsavedBuffer>(
            r,
            C::FlushUnsavedBuffer,
            dialect,
        ));
        seeds.extend(samples::<GetPollRouting>(r, C::GetPollRouting, dialect));
        seeds.extend(samples::<PollMessagesOnPrimary>(
            r,
            C::PollMessagesOnPrimary,
            dialect,
        ));
        seeds.extend(samples::<GetPartitionRoute>(
            r,
            C::GetPartitionRoute,
            dialect,
        ));
        seeds.extend(samples::<GetConsumerOffset>(
            r,
            C::GetConsumerOffset,
            dialect,
        ));
        seeds.extend(samples::<StoreConsumerOffset>(
            r,
            C::StoreConsumerOffset,
            dialect,
        ));
        seeds.extend(samples::<DeleteConsumerOffset>(
            r,
            C::DeleteConsumerOffset,
            dialect,
        ));
        seeds.extend(samples::<GetConsumerOffsetRouting>(
            r,
            C::GetConsumerOffsetRouting,
            dialect,
        ));
        seeds.extend(samples::<GetStream>(r, C::GetStream, dialect));
        seeds.extend(samples::<CreateStream>(r, C::CreateStream, dialect));
        seeds.extend(samples::<DeleteStream>(r, C::DeleteStream, dialect));
        seeds.extend(samples::<UpdateStream>(r, C::UpdateStream, dialect));
        seeds.extend(samples::<PurgeStream>(r, C::PurgeStream, dialect));
        seeds.extend(samples::<GetTopic>(r, C::GetTopic, dialect));
        seeds.extend(samples::<GetTopics>(r, C::GetTopics, dialect));
        seeds.extend(samples::<CreateTopic>(r, C::CreateTopic, dialect));
        seeds.extend(samples::<DeleteTopic>(r, C::DeleteTopic, dialect));
        seeds.extend(samples::<UpdateTopic>(r, C::UpdateTopic, dialect));
        seeds.extend(samples::<PurgeTopic>(r, C::PurgeTopic, dialect));
        seeds.extend(samples::<CreatePartitions>(r, C::CreatePartitions, dialect));
        seeds.extend(samples::<DeletePartitions>(r, C::DeletePartitions, dialect));
        seeds.extend(samples::<DeleteSegments>(r, C::DeleteSegments, dialect));
        seeds.extend(samples::<GetConsumerGroup>(r, C::GetConsumerGroup, dialect));
        seeds.extend(samples::<GetConsumerGroups>(
            r,
            C::GetConsumerGroups,
            dialect,
        ));
        seeds.extend(samples::<CreateConsumerGroup>(
            r,
            C::CreateConsumerGroup,
            dialect,
        ));
        seeds.extend(samples::<DeleteConsumerGroup>(
            r,
            C::DeleteConsumerGroup,
            dialect,
        ));
        seeds.extend(samples::<JoinConsumerGroup>(
            r,
            C::JoinConsumerGroup,
            dialect,
        ));
        seeds.extend(samples::<LeaveConsumerGroup>(
            r,
            C::LeaveConsumerGroup,
            dialect,
        ));
        seeds.extend(samples::<SyncConsumerGroup>(
            r,
            C::SyncConsumerGroup,
            dialect,
        ));
    }
    seeds.extend(long_poll_seeds());
    seeds
}

/// The deferred poll of Appendix A.5 and a two-target fetch: their decoders check timer and
/// size rules that random values rarely satisfy.
fn long_poll_seeds() -> Vec<(C, Dialect, Vec<u8>)> {
    use crate::primitives::{
        Consumer, ConsumerKind, Identifier, OptionalPartition, PollingStrategy,
    };
    let consumer = Consumer {
        kind: ConsumerKind::ConsumerGroup,
        id: Identifier::Numeric(1),
    };
    let selector = PollSelector {
        consumer: consumer.clone(),
        stream_id: Identifier::Numeric(0),
        topic_id: Identifier::name("events").expect("a short name"),
        partition: OptionalPartition(Some(0)),
        strategy: PollingStrategy::next(),
        count: 10,
        auto_commit: true,
    };
    let deferred = PollMessagesDeferred {
        selector,
        wait_us: 1_000_000,
        min_count: 1,
        max_bytes: 1 << 20,
        request_timeout_us: 11_000_000,
    };
    let target = |partition_id| FetchTarget {
        partition_id,
        strategy: PollingStrategy::offset(5),
        max_bytes: 4096,
        incarnation: 2,
        owner_generation: 1,
    };
    let fetch = FetchMessages {
        consumer,
        stream_id: Identifier::Numeric(0),
        topic_id: Identifier::Numeric(1),
        wait_us: 0,
        request_timeout_us: 10_000_000,
        min_count: 1,
        count: 100,
        max_bytes: 1 << 20,
        auto_commit: false,
        targets: std::vec![target(0), target(1)],
    };
    let dialect = Dialect::V0_12_2;
    std::vec![
        (
            C::PollMessagesDeferred,
            dialect,
            encode_to_vec(&deferred, dialect)
        ),
        (C::FetchMessages, dialect, encode_to_vec(&fetch, dialect)),
    ]
}

pub(super) fn reply_seeds() -> Vec<(C, Dialect, Vec<u8>)> {
    let mut runner = runner();
    let mut seeds = Vec::new();
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        let r = &mut runner;
        seeds.extend(samples::<Stats>(r, C::GetStats, dialect));
        seeds.extend(samples::<SnapshotFile>(r, C::GetSnapshotFile, dialect));
        seeds.extend(samples::<ClusterMetadata>(
            r,
            C::GetClusterMetadata,
            dialect,
        ));
        seeds.extend(samples::<OptionDescriptors>(r, C::DescribeOptions, dialect));
        seeds.extend(samples::<LoginReply>(r, C::LoginRegister, dialect));
        seeds.extend(samples::<MetadataChanges>(
            r,
            C::GetMetadataChanges,
            dialect,
        ));
        seeds.extend(samples::<ClientDetails>(r, C::GetMe, dialect));
        seeds.extend(samples::<Clients>(r, C::GetClients, dialect));
        seeds.extend(samples::<UserDetails>(r, C::GetUser, dialect));
        seeds.extend(samples::<Users>(r, C::GetUsers, dialect));
        seeds.extend(samples::<UserIdentity>(r, C::LoginUser, dialect));
        seeds.extend(samples::<PersonalAccessTokens>(
            r,
            C::GetPersonalAccessTokens,
            dialect,
        ));
        seeds.extend(samples::<RawPersonalAccessToken>(
            r,
            C::CreatePersonalAccessToken,
            dialect,
        ));
        seeds.extend(samples::<SendConfirmations>(r, C::SendMessages, dialect));
        seeds.extend(samples::<ConsumerRouting>(r, C::GetPollRouting, dialect));
        seeds.extend(samples::<PartitionRoute>(r, C::GetPartitionRoute, dialect));
        seeds.extend(samples::<ConsumerOffset>(r, C::GetConsumerOffset, dialect));
        seeds.extend(samples::<StreamDetails>(r, C::GetStream, dialect));
        seeds.extend(samples::<Streams>(r, C::GetStreams, dialect));
        seeds.extend(samples::<TopicDetails>(r, C::GetTopic, dialect));
        seeds.extend(samples::<Topics>(r, C::GetTopics, dialect));
        seeds.extend(samples::<ConsumerGroupDetails>(
            r,
            C::GetConsumerGroup,
            dialect,
        ));
        seeds.extend(samples::<ConsumerGroups>(r, C::GetConsumerGroups, dialect));
        seeds.extend(samples::<ConsumerGroupAssignment>(
            r,
            C::SyncConsumerGroup,
            dialect,
        ));
    }
    seeds
}

//! Reply payloads built from [`Metadata`](super::Metadata): streams, topics, partitions,
//! users, personal access tokens and consumer groups (PROTOCOL.md §4.2, §4.3, §4.6, §4.7,
//! §4.9, §12.3).
//!
//! Figures that live in the data plane (sizes, message counts, offsets, segments) come in
//! through [`PartitionStats`]; consumer-group members come from the group runtime as
//! arguments. Every record carries both dialects' fields; the encoder writes the ones its
//! dialect has.

use proto::codec::WireName;
use proto::commands::groups::{
    ConsumerGroupDetails, ConsumerGroupMember, ConsumerGroupResponse, ConsumerGroups,
};
use proto::commands::streams::{StreamDetails, StreamResponse, Streams};
use proto::commands::tokens::{PersonalAccessTokenInfo, PersonalAccessTokens};
use proto::commands::topics::{PartitionResponse, ReplicaIds, TopicDetails, TopicHeader, Topics};
use proto::commands::users::{UserDetails, UserResponse, Users};
use proto::header::PartitionContext;
use proto::primitives::OptionsBlock;

use super::model::{ConsumerGroup, Metadata, Partition, Stream, Topic, User};
use super::options::{stream_derived_options, topic_derived_options};

/// The replica id of this node: every partition's only member.
pub const LOCAL_REPLICA: u8 = 0;

/// What the data plane knows of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionFigures {
    pub segments_count: u32,
    /// The last offset; 0 when empty.
    pub current_offset: u64,
    pub size_bytes: u64,
    pub messages_count: u64,
}

impl Default for PartitionFigures {
    /// An empty partition: one (active) segment, as the reference reports.
    fn default() -> Self {
        Self {
            segments_count: 1,
            current_offset: 0,
            size_bytes: 0,
            messages_count: 0,
        }
    }
}

/// The data plane's figures per `(stream, topic, partition)`.
pub trait PartitionStats {
    fn partition(&self, stream_id: u32, topic_id: u32, partition_id: u32) -> PartitionFigures;

    /// Whether the server seals messages at rest (`encryption_key_source = server`).
    fn encrypts(&self) -> bool {
        false
    }

    /// The nodes holding every partition, and those of them known to hold every committed
    /// change (`members`, `in_sync_members`); a single node holds them alone.
    fn members(&self) -> Members {
        Members::default()
    }
}

/// A partition's `members` and `in_sync_members` (§4.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    pub members: ReplicaIds,
    pub in_sync: ReplicaIds,
}

impl Default for Members {
    fn default() -> Self {
        Self {
            members: ReplicaIds::single(LOCAL_REPLICA),
            in_sync: ReplicaIds::single(LOCAL_REPLICA),
        }
    }
}

impl<F: Fn(u32, u32, u32) -> PartitionFigures> PartitionStats for F {
    fn partition(&self, stream_id: u32, topic_id: u32, partition_id: u32) -> PartitionFigures {
        self(stream_id, topic_id, partition_id)
    }
}

/// Stats of a server with no data plane (tests, empty partitions).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStats;

impl PartitionStats for NoStats {
    fn partition(&self, _stream: u32, _topic: u32, _partition: u32) -> PartitionFigures {
        PartitionFigures::default()
    }
}

/// Sums of a topic's partitions: `(size_bytes, messages_count)`.
fn topic_totals(stream_id: u32, topic: &Topic, stats: &impl PartitionStats) -> (u64, u64) {
    topic.partitions.keys().fold((0, 0), |(size, count), id| {
        let figures = stats.partition(stream_id, topic.id, *id);
        (
            size.saturating_add(figures.size_bytes),
            count.saturating_add(figures.messages_count),
        )
    })
}

/// A stored name as a [`WireName`]; validation only stores 1..=255 bytes, so the fallback
/// is for a foreign journal only.
fn wire_name(name: &str) -> WireName {
    WireName::new(name)
        .or_else(|| WireName::new("?"))
        .expect("a one-byte name is a valid WireName")
}

/// The `StreamResponse` record of `stream`.
pub fn stream_response(stream: &Stream, stats: &impl PartitionStats) -> StreamResponse {
    let (size_bytes, messages_count) = stream
        .topics
        .values()
        .map(|topic| topic_totals(stream.id, topic, stats))
        .fold((0_u64, 0_u64), |(size, count), (s, c)| {
            (size.saturating_add(s), count.saturating_add(c))
        });
    StreamResponse {
        id: stream.id,
        created_at_micros: stream.created_at,
        topics_count: u32::try_from(stream.topics.len()).unwrap_or(u32::MAX),
        size_bytes,
        messages_count,
        name: wire_name(&stream.name),
        options: stream.options.clone(),
        derived_options: stream_derived_options(&stream.options, stats.encrypts()),
    }
}

/// `GET_STREAM` / `CREATE_STREAM` payload: the stream and its topic headers.
pub fn stream_details(stream: &Stream, stats: &impl PartitionStats) -> StreamDetails {
    StreamDetails {
        stream: stream_response(stream, stats),
        topics: stream
            .topics
            .values()
            .map(|topic| topic_header(stream.id, topic, stats))
            .collect(),
    }
}

/// `GET_STREAMS` payload, by id; `visible` filters what the caller may see.
pub fn streams(
    metadata: &Metadata,
    stats: &impl PartitionStats,
    visible: impl Fn(&Stream) -> bool,
) -> Streams {
    Streams(
        metadata
            .streams
            .values()
            .filter(|stream| visible(stream))
            .map(|stream| stream_response(stream, stats))
            .collect(),
    )
}

/// A topic's header: explicit options as set, derived options for the rest, and the
/// 0.11.0 inline fields.
pub fn topic_header(stream_id: u32, topic: &Topic, stats: &impl PartitionStats) -> TopicHeader {
    let (size_bytes, messages_count) = topic_totals(stream_id, topic, stats);
    let settings = &topic.settings;
    TopicHeader {
        id: topic.id,
        created_at_micros: topic.created_at,
        partitions_count: topic.partitions_count(),
        size_bytes,
        messages_count,
        name: wire_name(&topic.name),
        options: topic.options.clone(),
        derived_options: topic_derived_options(&topic.options, settings),
        message_expiry_micros: settings.message_expiry_us.unwrap_or(u64::MAX),
        compression: if settings.compression_gzip { 2 } else { 1 },
        max_topic_size_bytes: settings.max_topic_size_bytes.unwrap_or(u64::MAX),
    }
}

/// One partition record; `commit` is the metadata commit the answer reflects.
pub fn partition_response(
    stream_id: u32,
    topic_id: u32,
    partition: &Partition,
    stats: &impl PartitionStats,
    commit: u64,
) -> PartitionResponse {
    let figures = stats.partition(stream_id, topic_id, partition.id);
    let Members { members, in_sync } = stats.members();
    PartitionResponse {
        id: partition.id,
        created_at_micros: partition.created_at,
        segments_count: figures.segments_count,
        current_offset: figures.current_offset,
        size_bytes: figures.size_bytes,
        messages_count: figures.messages_count,
        context: PartitionContext {
            incarnation: partition.incarnation,
            owner_generation: 0,
            metadata_op: commit,
        },
        members,
        in_sync_members: in_sync,
    }
}

/// `GET_TOPIC` / `CREATE_TOPIC` payload.
pub fn topic_details(
    stream_id: u32,
    topic: &Topic,
    stats: &impl PartitionStats,
    commit: u64,
) -> TopicDetails {
    TopicDetails {
        topic: topic_header(stream_id, topic, stats),
        partitions: topic
            .partitions
            .values()
            .map(|partition| partition_response(stream_id, topic.id, partition, stats, commit))
            .collect(),
    }
}

/// `GET_TOPICS` payload.
pub fn topics(stream: &Stream, stats: &impl PartitionStats) -> Topics {
    Topics(
        stream
            .topics
            .values()
            .map(|topic| topic_header(stream.id, topic, stats))
            .collect(),
    )
}

/// The `UserResponse` record; users have no option keys to report.
pub fn user_response(user: &User) -> UserResponse {
    UserResponse {
        id: user.id,
        created_at: user.created_at,
        status: user.status.into(),
        username: wire_name(&user.username),
        options: OptionsBlock::default(),
        derived_options: OptionsBlock::default(),
    }
}

/// `GET_USER` / `CREATE_USER` payload.
pub fn user_details(user: &User) -> UserDetails {
    UserDetails {
        user: user_response(user),
        permissions: user.permissions.clone(),
    }
}

/// `GET_USERS` payload, by id.
pub fn users(metadata: &Metadata) -> Users {
    Users(metadata.users.values().map(user_response).collect())
}

/// `GET_PERSONAL_ACCESS_TOKENS` payload for `user`, by name; never-expiring tokens report
/// 0.
pub fn tokens(user: &User) -> PersonalAccessTokens {
    PersonalAccessTokens(
        user.tokens
            .values()
            .map(|token| PersonalAccessTokenInfo {
                name: wire_name(&token.name),
                expiry_at: token
                    .expiry_at
                    .unwrap_or(PersonalAccessTokenInfo::NEVER_EXPIRES),
            })
            .collect(),
    )
}

/// One group record with `members_count` from the group runtime.
pub fn group_response(
    topic: &Topic,
    group: &ConsumerGroup,
    members_count: u32,
) -> ConsumerGroupResponse {
    ConsumerGroupResponse {
        id: group.id,
        partitions_count: topic.partitions_count(),
        members_count,
        name: wire_name(&group.name),
    }
}

/// `GET_CONSUMER_GROUP` / `CREATE_CONSUMER_GROUP` payload with the runtime's `members`.
pub fn group_details(
    topic: &Topic,
    group: &ConsumerGroup,
    members: &[ConsumerGroupMember],
) -> ConsumerGroupDetails {
    let members_count = u32::try_from(members.len()).unwrap_or(u32::MAX);
    ConsumerGroupDetails {
        group: group_response(topic, group, members_count),
        members: members.to_vec(),
    }
}

/// `GET_CONSUMER_GROUPS` payload; `members_count` maps a group id to its member count.
pub fn groups(topic: &Topic, members_count: impl Fn(u32) -> u32) -> ConsumerGroups {
    ConsumerGroups(
        topic
            .groups
            .values()
            .map(|group| group_response(topic, group, members_count(group.id)))
            .collect(),
    )
}

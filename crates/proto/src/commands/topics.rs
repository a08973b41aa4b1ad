//! Topic commands (PROTOCOL.md §4.7, §12.3): the `TopicHeader` and `PartitionResponse`
//! records in both dialects, `TopicDetails`, `GET_TOPIC` (300), `GET_TOPICS` (301),
//! `CREATE_TOPIC` (302) and `DELETE_TOPIC` (303).
//!
//! The two dialects lay the topic header out differently: 0.12.2 keeps every setting in the
//! option blocks, 0.11.0 also carries message expiry, compression and maximum size inline.
//! One Rust type holds the union of the fields; each field says which dialect carries it,
//! and the other dialect neither writes nor reads it.

#[cfg(test)]
pub(crate) mod tests;

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, WireName, Writer, check_length, len_u32};
use crate::dialect::Dialect;
use crate::error::DecodeError;
use crate::header::PartitionContext;
use crate::primitives::{Identifier, OptionsBlock};

/// Topics one stream may hold (`MAX_TOPICS`); bounds decoded topic lists.
pub const TOPICS_PER_STREAM_MAX: usize = 4096;
/// Partition ids one topic may use (`MAX_PARTITIONS`); bounds decoded partition lists.
pub const PARTITIONS_PER_TOPIC_MAX: usize = 1_000_000;

/// Smallest encoded `TopicHeader` of either dialect (33 fixed bytes, a 1-byte name and two
/// empty option blocks), used to bound allocations by the bytes left.
pub(crate) const TOPIC_HEADER_LENGTH_MIN: usize = 42;
/// Smallest encoded `PartitionResponse` of either dialect (0.11.0's 40 bytes).
const PARTITION_LENGTH_MIN: usize = 40;

/// A topic's summary, as listed in `GET_STREAM`, `GET_TOPICS` and at the head of
/// `GET_TOPIC`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TopicHeader {
    pub id: u32,
    pub created_at_micros: u64,
    pub partitions_count: u32,
    pub size_bytes: u64,
    pub messages_count: u64,
    pub name: WireName,
    /// The keys the client set at create or update, as stored.
    pub options: OptionsBlock,
    /// Effective values the server resolved for the keys the client did not set.
    pub derived_options: OptionsBlock,
    /// 0.11.0 only (0 = server default, `u64::MAX` = never); 0.12.2 carries it as the
    /// `message_expiry` option instead.
    pub message_expiry_micros: u64,
    /// 0.11.0 only: 1 = none, 2 = gzip, carried as the raw byte so a client sees what the
    /// server stored; 0.12.2 carries it as the `compression_algorithm` option.
    pub compression: u8,
    /// 0.11.0 only (0 = server default, `u64::MAX` = unlimited); 0.12.2 carries it as the
    /// `max_topic_size` option.
    pub max_topic_size_bytes: u64,
}

impl TopicHeader {
    /// Encodes with `partitions_count` in place of the field, so a `TopicDetails` always
    /// announces exactly the records it carries.
    fn encode_counted(&self, writer: &mut Writer<'_>, partitions_count: u32) {
        writer.u32(self.id);
        writer.u64(self.created_at_micros);
        writer.u32(partitions_count);
        if writer.dialect() == Dialect::V0_11_0 {
            writer.u64(self.message_expiry_micros);
            writer.u8(self.compression);
            writer.u64(self.max_topic_size_bytes);
        }
        writer.u64(self.size_bytes);
        writer.u64(self.messages_count);
        self.name.encode(writer);
        self.options.encode_prefixed(writer);
        self.derived_options.encode_prefixed(writer);
    }
}

impl Codec<'_> for TopicHeader {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.encode_counted(writer, self.partitions_count);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let id = reader.u32("topic.id")?;
        let created_at_micros = reader.u64("topic.created_at")?;
        let partitions_count = reader.u32("topic.partitions_count")?;
        let (message_expiry_micros, compression, max_topic_size_bytes) = match reader.dialect() {
            Dialect::V0_11_0 => (
                reader.u64("topic.message_expiry")?,
                reader.u8("topic.compression")?,
                reader.u64("topic.max_topic_size")?,
            ),
            Dialect::V0_12_2 => (0, 0, 0),
        };
        Ok(Self {
            id,
            created_at_micros,
            partitions_count,
            size_bytes: reader.u64("topic.size_bytes")?,
            messages_count: reader.u64("topic.messages_count")?,
            name: WireName::decode(reader)?,
            options: OptionsBlock::decode_prefixed(reader)?,
            derived_options: OptionsBlock::decode_prefixed(reader)?,
            message_expiry_micros,
            compression,
            max_topic_size_bytes,
        })
    }
}

/// Replica ids of a partition's members: `[count:u8][id:u8 × count]`, so at most 255.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ReplicaIds(Vec<u8>);

impl ReplicaIds {
    pub const COUNT_MAX: usize = 255;

    /// `None` when more than 255 ids.
    pub fn new(ids: impl Into<Vec<u8>>) -> Option<Self> {
        let ids = ids.into();
        (ids.len() <= Self::COUNT_MAX).then_some(Self(ids))
    }

    /// The single-node list: just `replica`.
    pub fn single(replica: u8) -> Self {
        Self(alloc::vec![replica])
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }
}

impl Codec<'_> for ReplicaIds {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.bytes_u8(&self.0);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = reader.length_u8(0, Self::COUNT_MAX, "partition.replicas")?;
        reader
            .bytes(count, "partition.replicas")
            .map(|ids| Self(Vec::from(ids)))
    }
}

/// One partition of a `GET_TOPIC` reply: 66 bytes plus member lists in 0.12.2, 40 bytes in
/// 0.11.0.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PartitionResponse {
    pub id: u32,
    pub created_at_micros: u64,
    /// The reference reports at least 1.
    pub segments_count: u32,
    /// The last offset; 0 when the partition is empty.
    pub current_offset: u64,
    pub size_bytes: u64,
    pub messages_count: u64,
    /// 0.12.2 only: lets the client prime its route cache from topic details.
    pub context: PartitionContext,
    /// 0.12.2 only: the replicas holding the partition (single node: `[0]`).
    pub members: ReplicaIds,
    /// 0.12.2 only: the members caught up with the primary (single node: `[0]`).
    pub in_sync_members: ReplicaIds,
}

impl Codec<'_> for PartitionResponse {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.id);
        writer.u64(self.created_at_micros);
        writer.u32(self.segments_count);
        writer.u64(self.current_offset);
        writer.u64(self.size_bytes);
        writer.u64(self.messages_count);
        if writer.dialect() == Dialect::V0_12_2 {
            writer.u64(self.context.incarnation);
            writer.u64(self.context.owner_generation);
            writer.u64(self.context.metadata_op);
            self.members.encode(writer);
            self.in_sync_members.encode(writer);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut partition = Self {
            id: reader.u32("partition.id")?,
            created_at_micros: reader.u64("partition.created_at")?,
            segments_count: reader.u32("partition.segments_count")?,
            current_offset: reader.u64("partition.current_offset")?,
            size_bytes: reader.u64("partition.size_bytes")?,
            messages_count: reader.u64("partition.messages_count")?,
            context: PartitionContext::default(),
            members: ReplicaIds::default(),
            in_sync_members: ReplicaIds::default(),
        };
        if reader.dialect() == Dialect::V0_12_2 {
            partition.context = PartitionContext {
                incarnation: reader.u64("partition.incarnation")?,
                owner_generation: reader.u64("partition.owner_generation")?,
                metadata_op: reader.u64("partition.metadata_op")?,
            };
            partition.members = ReplicaIds::decode(reader)?;
            partition.in_sync_members = ReplicaIds::decode(reader)?;
        }
        Ok(partition)
    }
}

/// `GET_TOPIC` (300) reply and `CREATE_TOPIC` (302) reply payload: the header followed by
/// exactly `partitions_count` partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TopicDetails {
    /// Its `partitions_count` is ignored by the encoder, which writes `partitions.len()`.
    pub topic: TopicHeader,
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(\
                        proptest::prelude::any::<PartitionResponse>(), 0..4)")
    )]
    pub partitions: Vec<PartitionResponse>,
}

impl Codec<'_> for TopicDetails {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.topic
            .encode_counted(writer, len_u32(self.partitions.len()));
        for partition in &self.partitions {
            partition.encode(writer);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let topic = TopicHeader::decode(reader)?;
        let count = check_length(
            u64::from(topic.partitions_count),
            0,
            PARTITIONS_PER_TOPIC_MAX,
            "topic.partitions_count",
            offset,
        )?;
        let partitions = decode_records(reader, count, PARTITION_LENGTH_MIN)?;
        Ok(Self { topic, partitions })
    }
}

/// `GET_TOPIC` (300) request: `[stream_id][topic_id]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetTopic {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
}

impl Codec<'_> for GetTopic {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
        })
    }
}

/// `GET_TOPICS` (301) request: `[stream_id]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetTopics {
    pub stream_id: Identifier,
}

impl Codec<'_> for GetTopics {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Identifier::decode(reader).map(|stream_id| Self { stream_id })
    }
}

/// `GET_TOPICS` (301) reply: `[count:u32]` then the headers. An empty body also decodes as
/// no topics, because the SDK accepts it; the encoder always writes the count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Topics(
    #[cfg_attr(
        test,
        proptest(
            strategy = "proptest::collection::vec(proptest::prelude::any::<TopicHeader>(), 0..4)"
        )
    )]
    pub Vec<TopicHeader>,
);

impl Codec<'_> for Topics {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(len_u32(self.0.len()));
        for topic in &self.0 {
            topic.encode(writer);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        if reader.is_empty() {
            return Ok(Self::default());
        }
        let count = reader.length_u32(0, TOPICS_PER_STREAM_MAX, "topics.count")?;
        decode_records(reader, count, TOPIC_HEADER_LENGTH_MIN).map(Self)
    }
}

/// `CREATE_TOPIC` (302) request: `[stream_id][partitions_count:u32][name][options to end]`.
/// The reply payload is [`TopicDetails`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CreateTopic {
    pub stream_id: Identifier,
    /// Not bounded here: the server answers `2015 TooManyPartitions` above 1000.
    pub partitions_count: u32,
    pub name: WireName,
    pub options: OptionsBlock,
}

impl Codec<'_> for CreateTopic {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        writer.u32(self.partitions_count);
        self.name.encode(writer);
        self.options.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            partitions_count: reader.u32("create_topic.partitions_count")?,
            name: WireName::decode(reader)?,
            options: OptionsBlock::decode(reader)?,
        })
    }
}

/// `DELETE_TOPIC` (303) request: `[stream_id][topic_id]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeleteTopic {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
}

impl Codec<'_> for DeleteTopic {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
        })
    }
}

/// Decodes exactly `count` records, a count the caller has already checked against its
/// maximum. The first allocation is also bounded by the bytes left, at `record_length_min`
/// bytes per record, so a forged count cannot reserve more than the body could hold.
pub(crate) fn decode_records<'a, T: Codec<'a>>(
    reader: &mut Reader<'a>,
    count: usize,
    record_length_min: usize,
) -> Result<Vec<T>, DecodeError> {
    let fitting = reader
        .remaining()
        .checked_div(record_length_min)
        .unwrap_or(0);
    let mut records = Vec::with_capacity(count.min(fitting));
    for _ in 0..count {
        records.push(T::decode(reader)?);
    }
    Ok(records)
}

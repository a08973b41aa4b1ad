//! Consumer group commands (PROTOCOL.md §4.9): the group and member records,
//! `ConsumerGroupDetails`, and `GET_CONSUMER_GROUP` (600) through `SYNC_CONSUMER_GROUP` (606).
//! Same layouts in both dialects (§12.3).

#[cfg(test)]
mod tests;

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, WireName, Writer, check_length, len_u32};
use crate::commands::topics::{PARTITIONS_PER_TOPIC_MAX, decode_records};
use crate::commands::{decode_concatenated, encode_concatenated};
use crate::error::DecodeError;
use crate::primitives::Identifier;

/// Members one group may list. The protocol sets no limit; this bounds decoded lists far
/// above any real group (one member per client session).
pub const MEMBERS_MAX: usize = 1 << 20;

/// Smallest encoded member record: id and an empty partition list.
const MEMBER_LENGTH_MIN: usize = 8;

/// `[id:u32][partitions_count:u32][members_count:u32][name]`: one record of
/// `GET_CONSUMER_GROUPS` and the head of `GET_CONSUMER_GROUP`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ConsumerGroupResponse {
    pub id: u32,
    /// Partitions of the topic, which the group spreads over its members.
    pub partitions_count: u32,
    pub members_count: u32,
    pub name: WireName,
}

impl ConsumerGroupResponse {
    /// Encodes with `members_count` in place of the field, so `ConsumerGroupDetails` always
    /// announces exactly the members it carries.
    fn encode_counted(&self, writer: &mut Writer<'_>, members_count: u32) {
        writer.u32(self.id);
        writer.u32(self.partitions_count);
        writer.u32(members_count);
        self.name.encode(writer);
    }
}

impl Codec<'_> for ConsumerGroupResponse {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.encode_counted(writer, self.members_count);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            id: reader.u32("group.id")?,
            partitions_count: reader.u32("group.partitions_count")?,
            members_count: reader.u32("group.members_count")?,
            name: WireName::decode(reader)?,
        })
    }
}

/// `[member_id:u32][partitions_count:u32][partition_id:u32 × partitions_count]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ConsumerGroupMember {
    /// The member's slot in the group (0-based, lowest free).
    pub id: u32,
    /// The partitions assigned to it; the count on the wire is this list's length.
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(proptest::prelude::any::<u32>(), 0..4)")
    )]
    pub partition_ids: Vec<u32>,
}

impl Codec<'_> for ConsumerGroupMember {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.id);
        encode_partition_ids(&self.partition_ids, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            id: reader.u32("member.id")?,
            partition_ids: decode_partition_ids(reader, "member.partitions_count")?,
        })
    }
}

/// `GET_CONSUMER_GROUP` (600) reply and `CREATE_CONSUMER_GROUP` (602) reply payload: the
/// group followed by exactly `members_count` members.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ConsumerGroupDetails {
    /// Its `members_count` is ignored by the encoder, which writes `members.len()`.
    pub group: ConsumerGroupResponse,
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(\
                        proptest::prelude::any::<ConsumerGroupMember>(), 0..4)")
    )]
    pub members: Vec<ConsumerGroupMember>,
}

impl Codec<'_> for ConsumerGroupDetails {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.group
            .encode_counted(writer, len_u32(self.members.len()));
        for member in &self.members {
            member.encode(writer);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let group = ConsumerGroupResponse::decode(reader)?;
        let count = check_length(
            u64::from(group.members_count),
            0,
            MEMBERS_MAX,
            "group.members_count",
            offset,
        )?;
        let members = decode_records(reader, count, MEMBER_LENGTH_MIN)?;
        Ok(Self { group, members })
    }
}

/// `GET_CONSUMER_GROUPS` (601) reply: concatenated records with no count (empty = none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ConsumerGroups(
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(\
                        proptest::prelude::any::<ConsumerGroupResponse>(), 0..4)")
    )]
    pub Vec<ConsumerGroupResponse>,
);

impl Codec<'_> for ConsumerGroups {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_concatenated(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        decode_concatenated(reader).map(Self)
    }
}

/// `SYNC_CONSUMER_GROUP` (606) reply: `[generation:u64][count:u32][partition_id:u32 ×
/// count]`. An empty reply means the caller is not a member.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ConsumerGroupAssignment {
    /// Bumped on every membership or partition change; the client stamps it as
    /// `owner_generation` into group polls and offset writes.
    pub generation: u64,
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(proptest::prelude::any::<u32>(), 0..4)")
    )]
    pub partition_ids: Vec<u32>,
}

impl Codec<'_> for ConsumerGroupAssignment {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u64(self.generation);
        encode_partition_ids(&self.partition_ids, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            generation: reader.u64("assignment.generation")?,
            partition_ids: decode_partition_ids(reader, "assignment.partitions_count")?,
        })
    }
}

/// `[stream_id][topic_id]`: `GET_CONSUMER_GROUPS` (601) request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetConsumerGroups {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
}

impl Codec<'_> for GetConsumerGroups {
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

/// `CREATE_CONSUMER_GROUP` (602) request: `[stream_id][topic_id][name]`. The reply payload
/// is [`ConsumerGroupDetails`] with no members.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CreateConsumerGroup {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    pub name: WireName,
}

impl Codec<'_> for CreateConsumerGroup {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        self.name.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
            name: WireName::decode(reader)?,
        })
    }
}

/// Defines a request whose body is `[stream_id][topic_id][group_id]`.
macro_rules! group_request {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[cfg_attr(test, derive(proptest_derive::Arbitrary))]
        pub struct $name {
            pub stream_id: Identifier,
            pub topic_id: Identifier,
            pub group_id: Identifier,
        }

        impl Codec<'_> for $name {
            fn encode(&self, writer: &mut Writer<'_>) {
                self.stream_id.encode(writer);
                self.topic_id.encode(writer);
                self.group_id.encode(writer);
            }

            fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(Self {
                    stream_id: Identifier::decode(reader)?,
                    topic_id: Identifier::decode(reader)?,
                    group_id: Identifier::decode(reader)?,
                })
            }
        }
    };
}

group_request!(
    /// `GET_CONSUMER_GROUP` (600) request; "not found" is an empty reply.
    GetConsumerGroup
);
group_request!(
    /// `DELETE_CONSUMER_GROUP` (603) request.
    DeleteConsumerGroup
);
group_request!(
    /// `JOIN_CONSUMER_GROUP` (604) request; membership is keyed by the header's client id.
    JoinConsumerGroup
);
group_request!(
    /// `LEAVE_CONSUMER_GROUP` (605) request.
    LeaveConsumerGroup
);
group_request!(
    /// `SYNC_CONSUMER_GROUP` (606) request: the group consumer's heartbeat; the reply is
    /// [`ConsumerGroupAssignment`].
    SyncConsumerGroup
);

fn encode_partition_ids(partition_ids: &[u32], writer: &mut Writer<'_>) {
    writer.u32(len_u32(partition_ids.len()));
    for partition_id in partition_ids {
        writer.u32(*partition_id);
    }
}

/// `[count:u32][u32 × count]` with the count at most a topic's partitions and the first
/// allocation bounded by the bytes left.
fn decode_partition_ids(
    reader: &mut Reader<'_>,
    field: &'static str,
) -> Result<Vec<u32>, DecodeError> {
    let count = reader.length_u32(0, PARTITIONS_PER_TOPIC_MAX, field)?;
    let mut partition_ids = Vec::with_capacity(count.min(reader.remaining() / 4));
    for _ in 0..count {
        partition_ids.push(reader.u32("partition_id")?);
    }
    Ok(partition_ids)
}

//! `GET_PARTITION_ROUTE` (105): where a partition's reads and writes go (§2.9).

use crate::codec::{Codec, Reader, Writer};
use crate::error::DecodeError;
use crate::primitives::Identifier;

/// `[stream_id][topic_id][partition_id:u32]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetPartitionRoute {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    pub partition_id: u32,
}

impl Codec<'_> for GetPartitionRoute {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        writer.u32(self.partition_id);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
            partition_id: reader.u32("route.partition_id")?,
        })
    }
}

/// The route reply: exactly 25 bytes (the SDK refuses any other length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PartitionRoute {
    /// Non-zero; changes when a partition with the same id is recreated.
    pub incarnation: u64,
    /// The metadata commit the answer reflects.
    pub metadata_op: u64,
    pub view: u32,
    pub partitions_count: u32,
    pub primary_replica: u8,
}

impl Codec<'_> for PartitionRoute {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u64(self.incarnation);
        writer.u64(self.metadata_op);
        writer.u32(self.view);
        writer.u32(self.partitions_count);
        writer.u8(self.primary_replica);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let route = Self {
            incarnation: reader.u64("route.incarnation")?,
            metadata_op: reader.u64("route.metadata_op")?,
            view: reader.u32("route.view")?,
            partitions_count: reader.u32("route.partitions_count")?,
            primary_replica: reader.u8("route.primary_replica")?,
        };
        reader.finish("route")?;
        Ok(route)
    }
}

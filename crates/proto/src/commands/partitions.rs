//! Partition and segment commands (PROTOCOL.md §4.8): `CREATE_PARTITIONS` (402),
//! `DELETE_PARTITIONS` (403) and `DELETE_SEGMENTS` (503). Same layout in both dialects; the
//! replies carry no payload.

use crate::codec::{Codec, Reader, Writer};
use crate::error::DecodeError;
use crate::primitives::Identifier;

/// `CREATE_PARTITIONS` (402) request: `[stream_id][topic_id][partitions_count:u32]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CreatePartitions {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    /// Not bounded here: the server answers `2015 TooManyPartitions` outside 1..=1000.
    pub partitions_count: u32,
}

/// `DELETE_PARTITIONS` (403) request: `[stream_id][topic_id][partitions_count:u32]`; the
/// partitions with the highest ids go.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeletePartitions {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    /// Not bounded here, as for [`CreatePartitions`].
    pub partitions_count: u32,
}

macro_rules! partitions_count_codec {
    ($type:ty, $field:literal) => {
        impl Codec<'_> for $type {
            fn encode(&self, writer: &mut Writer<'_>) {
                self.stream_id.encode(writer);
                self.topic_id.encode(writer);
                writer.u32(self.partitions_count);
            }

            fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(Self {
                    stream_id: Identifier::decode(reader)?,
                    topic_id: Identifier::decode(reader)?,
                    partitions_count: reader.u32($field)?,
                })
            }
        }
    };
}

partitions_count_codec!(CreatePartitions, "create_partitions.partitions_count");
partitions_count_codec!(DeletePartitions, "delete_partitions.partitions_count");

/// `DELETE_SEGMENTS` (503) request:
/// `[stream_id][topic_id][partition_id:u32][segments_count:u32]`; the oldest closed segments
/// go.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeleteSegments {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    pub partition_id: u32,
    pub segments_count: u32,
}

impl Codec<'_> for DeleteSegments {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        writer.u32(self.partition_id);
        writer.u32(self.segments_count);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
            partition_id: reader.u32("delete_segments.partition_id")?,
            segments_count: reader.u32("delete_segments.segments_count")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::codec::decode_exact;
    use crate::commands::topics::tests::{assert_prefixes_refused, assert_round_trip};
    use crate::dialect::Dialect;

    #[test]
    fn goldens() {
        let create = CreatePartitions {
            stream_id: Identifier::Numeric(1),
            topic_id: Identifier::name("t").unwrap(),
            partitions_count: 3,
        };
        let expected = [1, 4, 1, 0, 0, 0, 2, 1, b't', 3, 0, 0, 0];
        for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
            assert_eq!(assert_round_trip(&create, dialect), expected);
            assert_prefixes_refused::<CreatePartitions>(&expected, dialect);
            assert_prefixes_refused::<DeletePartitions>(&expected, dialect);
        }
        let segments = DeleteSegments {
            stream_id: Identifier::Numeric(1),
            topic_id: Identifier::name("t").unwrap(),
            partition_id: 3,
            segments_count: 2,
        };
        let bytes = assert_round_trip(&segments, Dialect::V0_12_2);
        assert_eq!(bytes[9..], [3, 0, 0, 0, 2, 0, 0, 0]);
        assert_prefixes_refused::<DeleteSegments>(&bytes, Dialect::V0_12_2);
        let mut bad_kind = bytes;
        bad_kind[0] = 0;
        assert!(decode_exact::<DeleteSegments>(&bad_kind, Dialect::V0_12_2).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(
            create in any::<CreatePartitions>(),
            delete in any::<DeletePartitions>(),
            segments in any::<DeleteSegments>(),
            dialect in any::<Dialect>(),
        ) {
            assert_round_trip(&create, dialect);
            assert_round_trip(&delete, dialect);
            assert_round_trip(&segments, dialect);
        }
    }
}

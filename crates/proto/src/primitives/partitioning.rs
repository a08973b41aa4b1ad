//! `Partitioning`: how a send picks its partition (§3.3).

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, ShortBytes, Writer};
use crate::error::{DecodeError, DecodeErrorKind};

/// `[kind:u8][length:u8][value]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum Partitioning {
    /// Kind 1: round-robin, chosen by whoever resolves it.
    Balanced,
    /// Kind 2: an explicit partition id (what the SDKs always send).
    PartitionId(u32),
    /// Kind 3: `xxh32(key) % partitions_count`.
    MessagesKey(ShortBytes),
}

impl Partitioning {
    /// The partition for a topic of `partitions_count` partitions; `next_balanced` supplies
    /// the round-robin cursor. `None` when the topic has no partitions.
    pub fn resolve(&self, partitions_count: u32, next_balanced: u32) -> Option<u32> {
        if partitions_count == 0 {
            return None;
        }
        match self {
            Self::Balanced => next_balanced.checked_rem(partitions_count),
            Self::PartitionId(id) => Some(*id),
            Self::MessagesKey(key) => {
                xxhash_rust::xxh32::xxh32(key.as_bytes(), 0).checked_rem(partitions_count)
            }
        }
    }
}

impl Codec<'_> for Partitioning {
    fn encode(&self, writer: &mut Writer<'_>) {
        match self {
            Self::Balanced => writer.bytes(&[1, 0]),
            Self::PartitionId(id) => {
                writer.bytes(&[2, 4]);
                writer.u32(*id);
            }
            Self::MessagesKey(key) => {
                writer.u8(3);
                writer.bytes_u8(key.as_bytes());
            }
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        match reader.u8("partitioning.kind")? {
            1 => {
                reader.length_u8(0, 0, "partitioning.length")?;
                Ok(Self::Balanced)
            }
            2 => {
                reader.length_u8(4, 4, "partitioning.length")?;
                reader
                    .u32("partitioning.partition_id")
                    .map(Self::PartitionId)
            }
            3 => {
                let key = reader.bytes_u8(1, "partitioning.key")?;
                let key = ShortBytes::new(Vec::from(key));
                Ok(Self::MessagesKey(
                    key.expect("bytes_u8 with min 1 yields 1..=255 bytes"),
                ))
            }
            kind => Err(DecodeError::new(
                "partitioning.kind",
                offset,
                DecodeErrorKind::InvalidValue {
                    value: u64::from(kind),
                },
            )),
        }
    }
}

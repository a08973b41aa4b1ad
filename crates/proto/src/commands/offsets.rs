//! Consumer offset commands (PROTOCOL.md §4.5): `GET_CONSUMER_OFFSET` (120) and its reply,
//! `STORE_CONSUMER_OFFSET` (121) and `DELETE_CONSUMER_OFFSET` (122). The layouts are the same
//! in both dialects; only the consumer kinds a dialect accepts differ (§3.2).

use crate::codec::{Codec, Reader, Writer};
use crate::error::DecodeError;
use crate::primitives::{AckLevel, Consumer, Identifier, OptionalPartition};

/// `[consumer][stream_id][topic_id][flag:u8][partition_id:u32]`: whose offset, where. It is
/// the whole `GET_CONSUMER_OFFSET` body and the head of the write requests; the 0.11.0
/// routing code 123 carries it too.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct OffsetSelector {
    pub consumer: Consumer,
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    /// Absent means partition 0 for reads; the SDK always sets it for writes.
    pub partition: OptionalPartition,
}

impl Codec<'_> for OffsetSelector {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.consumer.encode(writer);
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        self.partition.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            consumer: Consumer::decode(reader)?,
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
            partition: OptionalPartition::decode(reader)?,
        })
    }
}

/// `GET_CONSUMER_OFFSET` (120) request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetConsumerOffset {
    pub selector: OffsetSelector,
}

impl Codec<'_> for GetConsumerOffset {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.selector.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        OffsetSelector::decode(reader).map(|selector| Self { selector })
    }
}

/// `GET_CONSUMER_OFFSET` (120) reply, 20 bytes; "no stored offset" is an empty body
/// (`commands::decode_optional`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ConsumerOffset {
    pub partition_id: u32,
    /// The partition head: the offset of its last message.
    pub current_offset: u64,
    /// The offset the consumer stored.
    pub stored_offset: u64,
}

impl ConsumerOffset {
    pub const LENGTH: usize = 20;
}

impl Codec<'_> for ConsumerOffset {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.partition_id);
        writer.u64(self.current_offset);
        writer.u64(self.stored_offset);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            partition_id: reader.u32("consumer_offset.partition_id")?,
            current_offset: reader.u64("consumer_offset.current_offset")?,
            stored_offset: reader.u64("consumer_offset.stored_offset")?,
        })
    }
}

/// `STORE_CONSUMER_OFFSET` (121) request: `[selector][offset:u64][ack:u8]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StoreConsumerOffset {
    pub selector: OffsetSelector,
    pub offset: u64,
    pub ack: AckLevel,
}

impl Codec<'_> for StoreConsumerOffset {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.selector.encode(writer);
        writer.u64(self.offset);
        self.ack.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            selector: OffsetSelector::decode(reader)?,
            offset: reader.u64("store_consumer_offset.offset")?,
            ack: AckLevel::decode(reader)?,
        })
    }
}

/// `DELETE_CONSUMER_OFFSET` (122) request: `[selector][ack:u8]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeleteConsumerOffset {
    pub selector: OffsetSelector,
    pub ack: AckLevel,
}

impl Codec<'_> for DeleteConsumerOffset {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.selector.encode(writer);
        self.ack.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            selector: OffsetSelector::decode(reader)?,
            ack: AckLevel::decode(reader)?,
        })
    }
}

/// The consumer a `dialect` round trip yields: 0.11.0 has no external groups, so tests map
/// them to ordinary groups before comparing.
#[cfg(test)]
pub(crate) fn consumer_normalised_for(
    mut consumer: Consumer,
    dialect: crate::dialect::Dialect,
) -> Consumer {
    use crate::primitives::ConsumerKind;
    if dialect == crate::dialect::Dialect::V0_11_0 && consumer.kind == ConsumerKind::ExternalGroup {
        consumer.kind = ConsumerKind::ConsumerGroup;
    }
    consumer
}

#[cfg(test)]
impl OffsetSelector {
    pub(crate) fn normalised_for(mut self, dialect: crate::dialect::Dialect) -> Self {
        self.consumer = consumer_normalised_for(self.consumer, dialect);
        self
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::codec::{decode_exact, encode_to_vec};
    use crate::dialect::Dialect;
    use crate::primitives::ConsumerKind;

    fn selector() -> OffsetSelector {
        OffsetSelector {
            consumer: Consumer {
                kind: ConsumerKind::ConsumerGroup,
                id: Identifier::name("g").unwrap(),
            },
            stream_id: Identifier::Numeric(1),
            topic_id: Identifier::Numeric(2),
            partition: OptionalPartition(Some(3)),
        }
    }

    #[test]
    fn golden_store() {
        let request = StoreConsumerOffset {
            selector: selector(),
            offset: 9,
            ack: AckLevel::Quorum,
        };
        let expected = [
            2, 2, 1, b'g', 1, 4, 1, 0, 0, 0, 1, 4, 2, 0, 0, 0, 1, 3, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0,
            0, 1,
        ];
        assert_eq!(encode_to_vec(&request, Dialect::V0_11_0), expected);
        for length in 0..expected.len() {
            let truncated = &expected[..length];
            assert!(decode_exact::<StoreConsumerOffset>(truncated, Dialect::V0_12_2).is_err());
        }
        let mut bad_ack = expected;
        bad_ack[29] = 2;
        assert!(decode_exact::<StoreConsumerOffset>(&bad_ack, Dialect::V0_12_2).is_err());
    }

    #[test]
    fn reply_is_twenty_bytes() {
        let reply = ConsumerOffset {
            partition_id: 1,
            current_offset: 2,
            stored_offset: 3,
        };
        let bytes = encode_to_vec(&reply, Dialect::V0_12_2);
        assert_eq!(bytes.len(), ConsumerOffset::LENGTH);
        assert_eq!(&bytes[..5], [1, 0, 0, 0, 2]);
        for length in 0..bytes.len() {
            assert!(decode_exact::<ConsumerOffset>(&bytes[..length], Dialect::V0_12_2).is_err());
        }
    }

    #[test]
    fn absent_partition_flag_is_lenient() {
        let bytes = [
            1, 1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 9, 5, 0, 0, 0,
        ];
        let request = decode_exact::<GetConsumerOffset>(&bytes, Dialect::V0_12_2).unwrap();
        assert_eq!(request.selector.partition, OptionalPartition(None));
    }

    proptest! {
        #[test]
        fn selector_round_trips(value in any::<OffsetSelector>(), dialect in any::<Dialect>()) {
            let value = value.normalised_for(dialect);
            let bytes = encode_to_vec(&value, dialect);
            prop_assert_eq!(decode_exact::<OffsetSelector>(&bytes, dialect).unwrap(), value);
        }

        #[test]
        fn get_round_trips(value in any::<GetConsumerOffset>(), dialect in any::<Dialect>()) {
            let value = GetConsumerOffset { selector: value.selector.normalised_for(dialect) };
            let bytes = encode_to_vec(&value, dialect);
            prop_assert_eq!(decode_exact::<GetConsumerOffset>(&bytes, dialect).unwrap(), value);
        }

        #[test]
        fn reply_round_trips(value in any::<ConsumerOffset>(), dialect in any::<Dialect>()) {
            let bytes = encode_to_vec(&value, dialect);
            prop_assert_eq!(decode_exact::<ConsumerOffset>(&bytes, dialect).unwrap(), value);
        }

        #[test]
        fn store_round_trips(value in any::<StoreConsumerOffset>(), dialect in any::<Dialect>()) {
            let value = StoreConsumerOffset {
                selector: value.selector.normalised_for(dialect),
                ..value
            };
            let bytes = encode_to_vec(&value, dialect);
            prop_assert_eq!(decode_exact::<StoreConsumerOffset>(&bytes, dialect).unwrap(), value);
        }

        #[test]
        fn delete_round_trips(
            value in any::<DeleteConsumerOffset>(),
            dialect in any::<Dialect>(),
        ) {
            let value = DeleteConsumerOffset {
                selector: value.selector.normalised_for(dialect),
                ..value
            };
            let bytes = encode_to_vec(&value, dialect);
            let decoded = decode_exact::<DeleteConsumerOffset>(&bytes, dialect).unwrap();
            prop_assert_eq!(decoded, value);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
                let _ = decode_exact::<StoreConsumerOffset>(&bytes, dialect);
                let _ = decode_exact::<DeleteConsumerOffset>(&bytes, dialect);
                let _ = decode_exact::<GetConsumerOffset>(&bytes, dialect);
            }
        }
    }
}

//! The poll selector (PROTOCOL.md §4.4.1): the common head of `POLL_MESSAGES` (100),
//! `POLL_MESSAGES_DEFERRED` (106) and the 0.11.0 routing codes 103 and 104 (§12.2).
//!
//! It lives in its own module because both the messages codecs and the legacy codecs embed
//! it unchanged.

use crate::codec::{Codec, Reader, Writer};
use crate::error::DecodeError;
use crate::primitives::{Consumer, Identifier, OptionalPartition, PollingStrategy};

/// `[consumer][stream_id][topic_id][flag:u8][partition_id:u32][strategy][count:u32]
/// [auto_commit:u8]`, identical in both dialects.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PollSelector {
    pub consumer: Consumer,
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    /// Absent lets the server pick (a group's assignment, or partition 0).
    pub partition: OptionalPartition,
    pub strategy: PollingStrategy,
    /// The most messages the reply may carry.
    pub count: u32,
    /// Store the offset of the last returned message as the consumer's offset. The wire
    /// treats any non-zero byte as true, so the decoder does too; the encoder writes 0 or 1.
    pub auto_commit: bool,
}

impl Codec<'_> for PollSelector {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.consumer.encode(writer);
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        self.partition.encode(writer);
        self.strategy.encode(writer);
        writer.u32(self.count);
        writer.bool(self.auto_commit);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            consumer: Consumer::decode(reader)?,
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
            partition: OptionalPartition::decode(reader)?,
            strategy: PollingStrategy::decode(reader)?,
            count: reader.u32("poll.count")?,
            auto_commit: reader.u8("poll.auto_commit")? != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::codec::{decode_exact, encode_to_vec};
    use crate::dialect::Dialect;
    use crate::primitives::ConsumerKind;

    impl PollSelector {
        /// The value a `dialect` round trip yields: 0.11.0 has no external groups.
        pub(crate) fn normalised_for(mut self, dialect: Dialect) -> Self {
            self.consumer =
                crate::commands::offsets::consumer_normalised_for(self.consumer, dialect);
            self
        }
    }

    /// Appendix A.5: consumer numeric 1, stream 0, topic 0, partition 0, Next, count 10,
    /// auto-commit.
    const GOLDEN: [u8; 38] = [
        0x01, 0x01, 0x04, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x04,
        0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x01,
    ];

    fn golden_value() -> PollSelector {
        PollSelector {
            consumer: Consumer {
                kind: ConsumerKind::Consumer,
                id: Identifier::Numeric(1),
            },
            stream_id: Identifier::Numeric(0),
            topic_id: Identifier::Numeric(0),
            partition: OptionalPartition(Some(0)),
            strategy: PollingStrategy::next(),
            count: 10,
            auto_commit: true,
        }
    }

    #[test]
    fn golden_a5() {
        for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
            assert_eq!(encode_to_vec(&golden_value(), dialect), GOLDEN);
            assert_eq!(
                decode_exact::<PollSelector>(&GOLDEN, dialect).unwrap(),
                golden_value()
            );
        }
    }

    #[test]
    fn refuses_truncation_and_bad_enums() {
        for length in 0..GOLDEN.len() {
            assert!(decode_exact::<PollSelector>(&GOLDEN[..length], Dialect::V0_12_2).is_err());
        }
        let mut bad_strategy = GOLDEN;
        bad_strategy[24] = 6;
        assert!(decode_exact::<PollSelector>(&bad_strategy, Dialect::V0_12_2).is_err());
        let mut external = GOLDEN;
        external[0] = 3;
        assert!(decode_exact::<PollSelector>(&external, Dialect::V0_12_2).is_ok());
        assert!(decode_exact::<PollSelector>(&external, Dialect::V0_11_0).is_err());
    }

    #[test]
    fn any_non_zero_auto_commit_is_true() {
        let mut bytes = GOLDEN;
        bytes[37] = 7;
        let selector = decode_exact::<PollSelector>(&bytes, Dialect::V0_12_2).unwrap();
        assert!(selector.auto_commit);
    }

    proptest! {
        #[test]
        fn round_trips(value in any::<PollSelector>(), dialect in any::<Dialect>()) {
            let value = value.normalised_for(dialect);
            let bytes = encode_to_vec(&value, dialect);
            prop_assert_eq!(decode_exact::<PollSelector>(&bytes, dialect).unwrap(), value);
        }
    }
}

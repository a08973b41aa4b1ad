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

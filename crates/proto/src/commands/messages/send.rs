//! `SEND_MESSAGES` (101): request body and confirmations (§5.1, §5.6).

use alloc::vec::Vec;

use crate::batch::{Batch, Integrity};
use crate::codec::{Codec, Reader, Writer, check_length, len_u32, usize_from_u32, usize_to_u64};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::primitives::{Identifier, Partitioning};

/// Longest metadata section: two name identifiers, a key partitioning and the count.
const METADATA_LENGTH_MAX: usize = 3 * (2 + 255) + 4;
/// Bytes of one confirmation.
const CONFIRMATION_LENGTH: usize = 20;

/// A decoded send: the routing metadata and the batch, borrowed and fully validated
/// (layout, bounds, user headers and both checksums).
#[derive(Debug, Clone)]
pub struct SendMessages<'a> {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    pub partitioning: Partitioning,
    pub batch: Batch<'a>,
    /// Where the batch starts in the body, so a server can stamp it in place.
    pub batch_offset: usize,
}

impl<'a> Codec<'a> for SendMessages<'a> {
    fn encode(&self, writer: &mut Writer<'_>) {
        let start = writer.len();
        writer.u32(0);
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        self.partitioning.encode(writer);
        writer.u32(self.batch.message_count());
        let metadata_length = writer.len().saturating_sub(start).saturating_sub(4);
        writer.patch_u32(start, len_u32(metadata_length));
        writer.bytes(self.batch.as_bytes());
    }

    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let length = reader.length_u32(0, METADATA_LENGTH_MAX, "send.metadata_length")?;
        let mut metadata = reader.sub(length, "send.metadata")?;
        let stream_id = Identifier::decode(&mut metadata)?;
        let topic_id = Identifier::decode(&mut metadata)?;
        let partitioning = Partitioning::decode(&mut metadata)?;
        let count_offset = metadata.offset();
        let messages_count = metadata.u32("send.messages_count")?;
        metadata.finish("send.metadata")?;
        let batch_offset = reader.offset();
        let batch = Batch::parse(
            reader.rest(),
            reader.dialect(),
            Integrity::Full,
            batch_offset,
        )?;
        if batch.message_count() != messages_count {
            return Err(DecodeError::new(
                "send.messages_count",
                count_offset,
                DecodeErrorKind::CountMismatch {
                    declared: u64::from(messages_count),
                    actual: u64::from(batch.message_count()),
                },
            ));
        }
        Ok(Self {
            stream_id,
            topic_id,
            partitioning,
            batch,
            batch_offset,
        })
    }
}

impl PartialEq for SendMessages<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.stream_id == other.stream_id
            && self.topic_id == other.topic_id
            && self.partitioning == other.partitioning
            && self.batch.as_bytes() == other.batch.as_bytes()
    }
}

/// Where the first message of an appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Confirmation {
    pub stream_id: u32,
    pub topic_id: u32,
    pub partition_id: u32,
    pub base_offset: u64,
}

/// The send reply: `[count:u32]` + 20-byte confirmations; an empty body means "accepted, no
/// confirmation".
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SendConfirmations(
    #[cfg_attr(
        test,
        proptest(
            strategy = "proptest::collection::vec(proptest::prelude::any::<Confirmation>(), 0..4)"
        )
    )]
    pub Vec<Confirmation>,
);

impl Codec<'_> for SendConfirmations {
    fn encode(&self, writer: &mut Writer<'_>) {
        if self.0.is_empty() {
            return;
        }
        writer.u32(len_u32(self.0.len()));
        for confirmation in &self.0 {
            writer.u32(confirmation.stream_id);
            writer.u32(confirmation.topic_id);
            writer.u32(confirmation.partition_id);
            writer.u64(confirmation.base_offset);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        if reader.is_empty() {
            return Ok(Self::default());
        }
        let offset = reader.offset();
        let count = usize_from_u32(reader.u32("send_reply.count")?);
        let max = reader.remaining() / CONFIRMATION_LENGTH;
        check_length(usize_to_u64(count), 1, max, "send_reply.count", offset)?;
        let mut confirmations = Vec::with_capacity(count);
        for _ in 0..count {
            confirmations.push(Confirmation {
                stream_id: reader.u32("confirmation.stream_id")?,
                topic_id: reader.u32("confirmation.topic_id")?,
                partition_id: reader.u32("confirmation.partition_id")?,
                base_offset: reader.u64("confirmation.base_offset")?,
            });
        }
        Ok(Self(confirmations))
    }
}

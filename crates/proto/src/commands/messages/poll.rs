//! `POLL_MESSAGES` (100), `POLL_MESSAGES_DEFERRED` (106) and the poll reply (§4.4.1–§4.4.3).

use crate::batch::{Integrity, Records};
use crate::codec::{Codec, Reader, Writer};
use crate::commands::poll_selector::PollSelector;
use crate::dialect::Dialect;
use crate::error::{DecodeError, DecodeErrorKind};
use crate::header::PartitionContext;

use super::{REQUEST_TIMEOUT_MARGIN_US, REQUEST_TIMEOUT_US_MAX, WAIT_US_MAX};

/// The smallest `max_bytes` a deferred poll or fetch may ask for: a 40-byte head, a batch
/// header and one frame header.
pub const POLL_BYTES_MIN: u32 = 40 + 256 + 48;

/// Bytes of the poll reply head in `dialect`: 0.12.2 adds the 24-byte partition context.
pub const fn poll_head_length(dialect: Dialect) -> usize {
    match dialect {
        Dialect::V0_11_0 => 16,
        Dialect::V0_12_2 => 40,
    }
}

/// A long poll: the selector plus how long and for how much to wait. Decoding enforces the
/// timer and size rules of §4.4.3, so a decoded value is one a server may park.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollMessagesDeferred {
    pub selector: PollSelector,
    pub wait_us: u64,
    pub min_count: u32,
    pub max_bytes: u32,
    pub request_timeout_us: u64,
}

impl Codec<'_> for PollMessagesDeferred {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.selector.encode(writer);
        writer.u64(self.wait_us);
        writer.u32(self.min_count);
        writer.u32(self.max_bytes);
        writer.u64(self.request_timeout_us);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let selector = PollSelector::decode(reader)?;
        let offset = reader.offset();
        let value = Self {
            selector,
            wait_us: reader.u64("deferred.wait_us")?,
            min_count: reader.u32("deferred.min_count")?,
            max_bytes: reader.u32("deferred.max_bytes")?,
            request_timeout_us: reader.u64("deferred.request_timeout_us")?,
        };
        check_timers(value.wait_us, value.request_timeout_us, offset)?;
        check_counts(
            value.min_count,
            value.selector.count,
            value.max_bytes,
            offset,
        )?;
        Ok(value)
    }
}

/// The timer rules shared by 106 and 109: `wait ≤ 10 min`, `0 < timeout ≤ 630 s`, and the
/// timeout leaves a second past the wait.
pub(super) fn check_timers(
    wait_us: u64,
    timeout_us: u64,
    offset: usize,
) -> Result<(), DecodeError> {
    if wait_us > WAIT_US_MAX {
        return Err(invalid("deferred.wait_us", offset, wait_us));
    }
    let floor = if wait_us > 0 {
        wait_us.saturating_add(REQUEST_TIMEOUT_MARGIN_US)
    } else {
        1
    };
    if timeout_us < floor || timeout_us > REQUEST_TIMEOUT_US_MAX {
        return Err(invalid("deferred.request_timeout_us", offset, timeout_us));
    }
    Ok(())
}

/// `1 ≤ min_count ≤ count` and `max_bytes ≥ 344`, shared by 106 and 109.
pub(super) fn check_counts(
    min_count: u32,
    count: u32,
    max_bytes: u32,
    offset: usize,
) -> Result<(), DecodeError> {
    if min_count == 0 || min_count > count {
        return Err(invalid("deferred.min_count", offset, u64::from(min_count)));
    }
    if max_bytes < POLL_BYTES_MIN {
        return Err(invalid("deferred.max_bytes", offset, u64::from(max_bytes)));
    }
    Ok(())
}

fn invalid(field: &'static str, offset: usize, value: u64) -> DecodeError {
    DecodeError::new(field, offset, DecodeErrorKind::InvalidValue { value })
}

/// A poll reply: the head, then zero or more batch records borrowed from the body. Decoding
/// walks the records as the SDK does (layout only) and requires their frames to add up to
/// `messages_count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolledMessages<'a> {
    pub partition_id: u32,
    /// Offset of the partition's last message (0 when empty).
    pub current_offset: u64,
    pub messages_count: u32,
    /// 0.12.2 only; 0.11.0 neither writes nor reads it.
    pub context: PartitionContext,
    pub records: &'a [u8],
}

impl PolledMessages<'_> {
    /// The 0.11.0 "re-sync your group assignment" sentinel partition.
    pub const RESYNC_PARTITION: u32 = u32::MAX;

    /// Writes only the head, for a server that sends the records from their own buffers.
    pub fn encode_head(&self, writer: &mut Writer<'_>) {
        writer.u32(self.partition_id);
        writer.u64(self.current_offset);
        writer.u32(self.messages_count);
        if writer.dialect() == Dialect::V0_12_2 {
            encode_context(self.context, writer);
        }
    }
}

impl<'a> Codec<'a> for PolledMessages<'a> {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.encode_head(writer);
        writer.bytes(self.records);
    }

    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let partition_id = reader.u32("poll.partition_id")?;
        let current_offset = reader.u64("poll.current_offset")?;
        let count_offset = reader.offset();
        let messages_count = reader.u32("poll.messages_count")?;
        let context = match reader.dialect() {
            Dialect::V0_12_2 => decode_context(reader)?,
            Dialect::V0_11_0 => PartitionContext::default(),
        };
        let records_offset = reader.offset();
        let records = reader.rest();
        let frames = count_frames(records, reader.dialect(), records_offset)?;
        if frames != u64::from(messages_count) {
            return Err(DecodeError::new(
                "poll.messages_count",
                count_offset,
                DecodeErrorKind::CountMismatch {
                    declared: u64::from(messages_count),
                    actual: frames,
                },
            ));
        }
        Ok(Self {
            partition_id,
            current_offset,
            messages_count,
            context,
            records,
        })
    }
}

/// Frames in back-to-back records, validated layout-only as the SDK does.
pub(super) fn count_frames(
    records: &[u8],
    dialect: Dialect,
    offset: usize,
) -> Result<u64, DecodeError> {
    Records::new(records, dialect, Integrity::LayoutOnly, offset).try_fold(0_u64, |total, batch| {
        Ok(total.saturating_add(u64::from(batch?.message_count())))
    })
}

pub(super) fn encode_context(context: PartitionContext, writer: &mut Writer<'_>) {
    writer.u64(context.incarnation);
    writer.u64(context.owner_generation);
    writer.u64(context.metadata_op);
}

pub(super) fn decode_context(reader: &mut Reader<'_>) -> Result<PartitionContext, DecodeError> {
    Ok(PartitionContext {
        incarnation: reader.u64("context.incarnation")?,
        owner_generation: reader.u64("context.owner_generation")?,
        metadata_op: reader.u64("context.metadata_op")?,
    })
}

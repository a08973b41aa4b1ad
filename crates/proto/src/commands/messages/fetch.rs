//! `FETCH_MESSAGES` (109): the multi-partition long poll of the 0.12.2 high-level consumer
//! (§4.4.4).

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, Writer, check_length, len_u32, usize_from_u32, usize_to_u64};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::header::PartitionContext;
use crate::primitives::{Consumer, Identifier, PollingKind, PollingStrategy};

use super::poll::{
    POLL_BYTES_MIN, check_counts, check_timers, count_frames, decode_context, encode_context,
};

/// Targets (and reply sections) one fetch may carry.
pub const FETCH_TARGETS_MAX: usize = 1000;
/// Bytes of one target.
const TARGET_LENGTH: usize = 33;
/// Bytes of one reply section entry.
const SECTION_LENGTH: usize = 56;

/// One partition to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct FetchTarget {
    pub partition_id: u32,
    /// Offset or Next only.
    pub strategy: PollingStrategy,
    pub max_bytes: u32,
    pub incarnation: u64,
    pub owner_generation: u64,
}

/// The fetch request. Decoding enforces §4.4.4: timers, counts, `max_bytes ≥ 344`, Offset or
/// Next strategies, per-target bytes within the total, unique partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchMessages {
    pub consumer: Consumer,
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    pub wait_us: u64,
    pub request_timeout_us: u64,
    pub min_count: u32,
    pub count: u32,
    pub max_bytes: u32,
    pub auto_commit: bool,
    pub targets: Vec<FetchTarget>,
}

impl Codec<'_> for FetchMessages {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.consumer.encode(writer);
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        writer.u64(self.wait_us);
        writer.u64(self.request_timeout_us);
        writer.u32(self.min_count);
        writer.u32(self.count);
        writer.u32(self.max_bytes);
        writer.bool(self.auto_commit);
        writer.u32(len_u32(self.targets.len()));
        for target in &self.targets {
            writer.u32(target.partition_id);
            target.strategy.encode(writer);
            writer.u32(target.max_bytes);
            writer.u64(target.incarnation);
            writer.u64(target.owner_generation);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let consumer = Consumer::decode(reader)?;
        let stream_id = Identifier::decode(reader)?;
        let topic_id = Identifier::decode(reader)?;
        let offset = reader.offset();
        let wait_us = reader.u64("fetch.wait_us")?;
        let request_timeout_us = reader.u64("fetch.request_timeout_us")?;
        let min_count = reader.u32("fetch.min_count")?;
        let count = reader.u32("fetch.count")?;
        let max_bytes = reader.u32("fetch.max_bytes")?;
        let auto_commit = reader.u8("fetch.auto_commit")? != 0;
        check_timers(wait_us, request_timeout_us, offset)?;
        check_counts(min_count, count, max_bytes, offset)?;
        let targets = decode_targets(reader, max_bytes)?;
        Ok(Self {
            consumer,
            stream_id,
            topic_id,
            wait_us,
            request_timeout_us,
            min_count,
            count,
            max_bytes,
            auto_commit,
            targets,
        })
    }
}

fn decode_targets(
    reader: &mut Reader<'_>,
    max_bytes: u32,
) -> Result<Vec<FetchTarget>, DecodeError> {
    let max = FETCH_TARGETS_MAX.min(reader.remaining().saturating_sub(4) / TARGET_LENGTH);
    let count = reader.length_u32(1, max.max(1), "fetch.targets_count")?;
    let mut targets: Vec<FetchTarget> = Vec::with_capacity(count);
    for _ in 0..count {
        let offset = reader.offset();
        let target = FetchTarget {
            partition_id: reader.u32("fetch.target.partition_id")?,
            strategy: PollingStrategy::decode(reader)?,
            max_bytes: reader.u32("fetch.target.max_bytes")?,
            incarnation: reader.u64("fetch.target.incarnation")?,
            owner_generation: reader.u64("fetch.target.owner_generation")?,
        };
        if !matches!(
            target.strategy.kind,
            PollingKind::Offset | PollingKind::Next
        ) {
            let value = u64::from(target.strategy.kind.as_u8());
            return Err(invalid("fetch.target.strategy", offset, value));
        }
        if target.max_bytes < POLL_BYTES_MIN || target.max_bytes > max_bytes {
            return Err(invalid(
                "fetch.target.max_bytes",
                offset,
                u64::from(target.max_bytes),
            ));
        }
        if targets
            .iter()
            .any(|t| t.partition_id == target.partition_id)
        {
            return Err(DecodeError::new(
                "fetch.target.partition_id",
                offset,
                DecodeErrorKind::Duplicate,
            ));
        }
        targets.push(target);
    }
    Ok(targets)
}

fn invalid(field: &'static str, offset: usize, value: u64) -> DecodeError {
    DecodeError::new(field, offset, DecodeErrorKind::InvalidValue { value })
}

/// One partition's part of a fetch reply; its records are borrowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSection<'a> {
    pub partition_id: u32,
    /// 0 or an `ErrorCode` for this partition (then there are no records).
    pub status: u32,
    pub current_offset: u64,
    pub messages_count: u32,
    pub context: PartitionContext,
    /// Where the next fetch of this partition should start.
    pub next_offset: u64,
    pub records: &'a [u8],
}

/// The fetch reply: `[count:u32]`, a table of 56-byte sections, then their records in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchedMessages<'a> {
    pub sections: Vec<FetchSection<'a>>,
}

impl FetchedMessages<'_> {
    /// Writes the count and the section table only, for a server that sends the records from
    /// their own buffers right after.
    pub fn encode_table(&self, writer: &mut Writer<'_>) {
        writer.u32(len_u32(self.sections.len()));
        for section in &self.sections {
            writer.u32(section.partition_id);
            writer.u32(section.status);
            writer.u64(section.current_offset);
            writer.u32(section.messages_count);
            encode_context(section.context, writer);
            writer.u64(section.next_offset);
            writer.u32(len_u32(section.records.len()));
        }
    }
}

impl<'a> Codec<'a> for FetchedMessages<'a> {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.encode_table(writer);
        for section in &self.sections {
            writer.bytes(section.records);
        }
    }

    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let max = FETCH_TARGETS_MAX.min(reader.remaining().saturating_sub(4) / SECTION_LENGTH);
        let count = reader.length_u32(0, max, "fetch_reply.sections_count")?;
        let mut table = Vec::with_capacity(count);
        for _ in 0..count {
            table.push(decode_section_entry(reader)?);
        }
        let total = table
            .iter()
            .fold(0_u64, |sum, entry| sum.saturating_add(u64::from(entry.1)));
        let offset = reader.offset();
        check_length(
            total,
            reader.remaining(),
            reader.remaining(),
            "fetch_reply.records",
            offset,
        )?;
        let mut sections = Vec::with_capacity(count);
        for (mut section, records_length) in table {
            let records_offset = reader.offset();
            section.records =
                reader.bytes(usize_from_u32(records_length), "fetch_reply.records")?;
            check_section(&section, reader.dialect(), records_offset)?;
            sections.push(section);
        }
        Ok(Self { sections })
    }
}

fn decode_section_entry<'a>(
    reader: &mut Reader<'_>,
) -> Result<(FetchSection<'a>, u32), DecodeError> {
    let section = FetchSection {
        partition_id: reader.u32("section.partition_id")?,
        status: reader.u32("section.status")?,
        current_offset: reader.u64("section.current_offset")?,
        messages_count: reader.u32("section.messages_count")?,
        context: decode_context(reader)?,
        next_offset: reader.u64("section.next_offset")?,
        records: &[],
    };
    Ok((section, reader.u32("section.records_len")?))
}

fn check_section(
    section: &FetchSection<'_>,
    dialect: crate::Dialect,
    offset: usize,
) -> Result<(), DecodeError> {
    if section.status != 0 && !section.records.is_empty() {
        let length = usize_to_u64(section.records.len());
        return Err(DecodeError::new(
            "section.records_len",
            offset,
            DecodeErrorKind::InvalidLength {
                length,
                min: 0,
                max: 0,
            },
        ));
    }
    let frames = count_frames(section.records, dialect, offset)?;
    if frames != u64::from(section.messages_count) {
        let declared = u64::from(section.messages_count);
        return Err(DecodeError::new(
            "section.messages_count",
            offset,
            DecodeErrorKind::CountMismatch {
                declared,
                actual: frames,
            },
        ));
    }
    Ok(())
}

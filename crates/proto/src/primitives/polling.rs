//! Polling strategy, optional partition id and ack level (§3.4–§3.6).

use crate::codec::{Codec, Reader, Writer};
use crate::error::{DecodeError, DecodeErrorKind};

/// Where a poll starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum PollingKind {
    Offset,
    Timestamp,
    First,
    Last,
    Next,
}

impl PollingKind {
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Offset => 1,
            Self::Timestamp => 2,
            Self::First => 3,
            Self::Last => 4,
            Self::Next => 5,
        }
    }

    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            1 => Some(Self::Offset),
            2 => Some(Self::Timestamp),
            3 => Some(Self::First),
            4 => Some(Self::Last),
            5 => Some(Self::Next),
            _ => None,
        }
    }
}

/// `[kind:u8][value:u64]`, 9 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PollingStrategy {
    pub kind: PollingKind,
    pub value: u64,
}

impl PollingStrategy {
    pub const fn offset(offset: u64) -> Self {
        Self {
            kind: PollingKind::Offset,
            value: offset,
        }
    }

    pub const fn next() -> Self {
        Self {
            kind: PollingKind::Next,
            value: 0,
        }
    }
}

impl Codec<'_> for PollingStrategy {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.kind.as_u8());
        writer.u64(self.value);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let value = reader.u8("strategy.kind")?;
        let kind = PollingKind::from_u8(value).ok_or(DecodeError::new(
            "strategy.kind",
            offset,
            DecodeErrorKind::InvalidValue {
                value: u64::from(value),
            },
        ))?;
        Ok(Self {
            kind,
            value: reader.u64("strategy.value")?,
        })
    }
}

/// `[flag:u8][partition_id:u32]`: any flag other than 1 means absent (§3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct OptionalPartition(pub Option<u32>);

impl Codec<'_> for OptionalPartition {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.bool(self.0.is_some());
        writer.u32(self.0.unwrap_or_default());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let flag = reader.u8("partition.flag")?;
        let id = reader.u32("partition.id")?;
        Ok(Self((flag == 1).then_some(id)))
    }
}

/// Offset-write acknowledgement: 0 = `NoAck`, 1 = `Quorum` (what the SDK sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum AckLevel {
    NoAck,
    Quorum,
}

impl Codec<'_> for AckLevel {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(match self {
            Self::NoAck => 0,
            Self::Quorum => 1,
        });
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        match reader.u8("ack")? {
            0 => Ok(Self::NoAck),
            1 => Ok(Self::Quorum),
            value => Err(DecodeError::new(
                "ack",
                offset,
                DecodeErrorKind::InvalidValue {
                    value: u64::from(value),
                },
            )),
        }
    }
}

//! `Consumer`: who reads, for offsets and group membership (§3.2).

use crate::codec::{Codec, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::{DecodeError, DecodeErrorKind};
use crate::primitives::Identifier;

/// The three consumer kinds; `ExternalGroup` exists only in 0.12.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum ConsumerKind {
    Consumer,
    ConsumerGroup,
    ExternalGroup,
}

impl ConsumerKind {
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Consumer => 1,
            Self::ConsumerGroup => 2,
            Self::ExternalGroup => 3,
        }
    }

    pub const fn from_u8(value: u8, dialect: Dialect) -> Option<Self> {
        match (value, dialect) {
            (1, _) => Some(Self::Consumer),
            (2, _) => Some(Self::ConsumerGroup),
            (3, Dialect::V0_12_2) => Some(Self::ExternalGroup),
            _ => None,
        }
    }
}

/// `[kind:u8][id Identifier]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Consumer {
    pub kind: ConsumerKind,
    pub id: Identifier,
}

impl Codec<'_> for Consumer {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.kind.as_u8());
        self.id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let value = reader.u8("consumer.kind")?;
        let kind = ConsumerKind::from_u8(value, reader.dialect()).ok_or(DecodeError::new(
            "consumer.kind",
            offset,
            DecodeErrorKind::InvalidValue {
                value: u64::from(value),
            },
        ))?;
        Ok(Self {
            kind,
            id: Identifier::decode(reader)?,
        })
    }
}

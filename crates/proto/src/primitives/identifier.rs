//! `Identifier`: a stream, topic, user, consumer or group reference by id or by name (§3.1).

use alloc::string::String;

use crate::codec::{Codec, Reader, WireName, Writer};
use crate::error::{DecodeError, DecodeErrorKind};

/// A reference by numeric id (kind 1) or by name (kind 2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum Identifier {
    Numeric(u32),
    Name(WireName),
}

impl Identifier {
    const KIND_NUMERIC: u8 = 1;
    const KIND_NAME: u8 = 2;

    /// A name reference; `None` unless 1..=255 bytes.
    pub fn name(name: impl Into<String>) -> Option<Self> {
        WireName::new(name).map(Self::Name)
    }

    pub fn as_numeric(&self) -> Option<u32> {
        match self {
            Self::Numeric(id) => Some(*id),
            Self::Name(_) => None,
        }
    }
}

impl From<u32> for Identifier {
    fn from(id: u32) -> Self {
        Self::Numeric(id)
    }
}

impl core::fmt::Display for Identifier {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Numeric(id) => write!(formatter, "{id}"),
            Self::Name(name) => formatter.write_str(name.as_str()),
        }
    }
}

impl Codec<'_> for Identifier {
    fn encode(&self, writer: &mut Writer<'_>) {
        match self {
            Self::Numeric(id) => {
                writer.u8(Self::KIND_NUMERIC);
                writer.u8(4);
                writer.u32(*id);
            }
            Self::Name(name) => {
                writer.u8(Self::KIND_NAME);
                name.encode(writer);
            }
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        match reader.u8("identifier.kind")? {
            Self::KIND_NUMERIC => {
                reader.length_u8(4, 4, "identifier.length")?;
                reader.u32("identifier.id").map(Self::Numeric)
            }
            Self::KIND_NAME => WireName::decode(reader).map(Self::Name),
            kind => Err(DecodeError::new(
                "identifier.kind",
                offset,
                DecodeErrorKind::InvalidValue {
                    value: u64::from(kind),
                },
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_exact, encode_to_vec};
    use crate::dialect::Dialect;

    #[test]
    fn golden() {
        let numeric = encode_to_vec(&Identifier::Numeric(1), Dialect::V0_12_2);
        assert_eq!(numeric, [1, 4, 1, 0, 0, 0]);
        let name = encode_to_vec(&Identifier::name("abc").unwrap(), Dialect::V0_12_2);
        assert_eq!(name, [2, 3, b'a', b'b', b'c']);
    }

    #[test]
    fn refuses_bad_kinds_and_lengths() {
        for bytes in [
            &[0, 4, 1, 0, 0, 0][..],
            &[1, 3, 1, 0, 0],
            &[2, 0],
            &[2, 1, 0xff],
            &[3],
        ] {
            assert!(
                decode_exact::<Identifier>(bytes, Dialect::V0_12_2).is_err(),
                "{bytes:?}"
            );
        }
    }
}

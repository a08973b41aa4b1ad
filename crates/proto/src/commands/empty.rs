//! The empty body of requests and replies that carry nothing (`PING`, `GET_STATS`, …).

use crate::codec::{Codec, Reader, Writer};
use crate::error::DecodeError;

/// A body of zero bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Empty;

impl Codec<'_> for Empty {
    fn encode(&self, _writer: &mut Writer<'_>) {}

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        reader.finish("empty")?;
        Ok(Self)
    }
}

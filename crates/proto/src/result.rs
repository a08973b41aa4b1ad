//! The result section that opens result-framed reply bodies (PROTOCOL.md §1.9).
//!
//! `[count:u32]` then `count` × `[index:u32][result:u32]`; `count = 0` is success and the
//! typed payload follows, otherwise the first entry's result is the refusal.

use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// Entries a section may hold before the decoder refuses it; servers send at most one.
pub const RESULT_ENTRIES_MAX: usize = 1024;

/// The outcome a result section carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultSection {
    /// `count = 0`: the payload follows.
    Ok,
    /// The code of the first entry.
    Refused(u32),
}

impl ResultSection {
    pub fn encode(self, writer: &mut Writer<'_>) {
        match self {
            Self::Ok => writer.u32(0),
            Self::Refused(code) => {
                writer.u32(1);
                writer.u32(0);
                writer.u32(code);
            }
        }
    }

    /// Reads a section; on `Ok` the reader is left at the payload.
    pub fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = reader.length_u32(0, RESULT_ENTRIES_MAX, "result.count")?;
        if count == 0 {
            return Ok(Self::Ok);
        }
        let _index = reader.u32("result.index")?;
        let code = reader.u32("result.code")?;
        let rest = count.saturating_sub(1).saturating_mul(8);
        reader.bytes(rest, "result.entries")?;
        Ok(Self::Refused(code))
    }
}

/// Byte length of a refusal section.
pub const REFUSAL_LENGTH: usize = 12;

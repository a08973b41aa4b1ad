//! `UPDATE_RESOURCE` (16, 0.12.2): a patch of one resource's options — the target, the keys
//! to reset and the options to set.

use alloc::vec::Vec;

use super::options::OptionScope;
use super::wire::decode_enum;
use crate::codec::{Codec, Reader, WireName, Writer, len_u8};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::primitives::{Identifier, OptionsBlock};

/// The resource an `UPDATE_RESOURCE` patch addresses; the variant is the scope byte.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum ResourceTarget {
    Topic {
        stream_id: Identifier,
        topic_id: Identifier,
    },
    Stream {
        stream_id: Identifier,
    },
    User {
        user_id: Identifier,
    },
}

impl ResourceTarget {
    pub const fn scope(&self) -> OptionScope {
        match self {
            Self::Topic { .. } => OptionScope::Topic,
            Self::Stream { .. } => OptionScope::Stream,
            Self::User { .. } => OptionScope::User,
        }
    }
}

impl Codec<'_> for ResourceTarget {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.scope().as_u8());
        match self {
            Self::Topic {
                stream_id,
                topic_id,
            } => {
                stream_id.encode(writer);
                topic_id.encode(writer);
            }
            Self::Stream { stream_id } => stream_id.encode(writer),
            Self::User { user_id } => user_id.encode(writer),
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(
            match decode_enum(reader, "update_resource.scope", OptionScope::from_u8)? {
                OptionScope::Topic => Self::Topic {
                    stream_id: Identifier::decode(reader)?,
                    topic_id: Identifier::decode(reader)?,
                },
                OptionScope::Stream => Self::Stream {
                    stream_id: Identifier::decode(reader)?,
                },
                OptionScope::User => Self::User {
                    user_id: Identifier::decode(reader)?,
                },
            },
        )
    }
}

/// Keys an `UPDATE_RESOURCE` patch restores to their defaults: at most 255, no duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResetKeys(Vec<WireName>);

impl ResetKeys {
    pub const COUNT_MAX: usize = 255;

    /// `None` if there are more than 255 keys or one repeats.
    pub fn new(keys: Vec<WireName>) -> Option<Self> {
        let unique = keys
            .iter()
            .enumerate()
            .all(|(index, key)| !keys.iter().take(index).any(|earlier| earlier == key));
        (keys.len() <= Self::COUNT_MAX && unique).then_some(Self(keys))
    }

    pub fn as_slice(&self) -> &[WireName] {
        &self.0
    }

    pub fn contains(&self, key: &WireName) -> bool {
        self.0.contains(key)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Codec<'_> for ResetKeys {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(len_u8(self.0.len()));
        for key in &self.0 {
            key.encode(writer);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = reader.length_u8(0, Self::COUNT_MAX, "update_resource.reset_count")?;
        let mut keys: Vec<WireName> = Vec::with_capacity(count.min(reader.remaining()));
        for _ in 0..count {
            let offset = reader.offset();
            let key = WireName::decode(reader)?;
            if keys.contains(&key) {
                let kind = DecodeErrorKind::Duplicate;
                return Err(DecodeError::new("update_resource.reset_key", offset, kind));
            }
            keys.push(key);
        }
        Ok(Self(keys))
    }
}

/// `UPDATE_RESOURCE` (16) request (0.12.2): a patch of one resource's options. The reply is a
/// result section with an empty payload. The decoder refuses a key both set and reset and a
/// patch that changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateResource {
    pub target: ResourceTarget,
    pub reset: ResetKeys,
    /// Keys to set; runs to the end of the body.
    pub options: OptionsBlock,
}

impl Codec<'_> for UpdateResource {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.target.encode(writer);
        self.reset.encode(writer);
        self.options.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let target = ResourceTarget::decode(reader)?;
        let reset = ResetKeys::decode(reader)?;
        let options_offset = reader.offset();
        let options = OptionsBlock::decode(reader)?;
        if options.0.iter().any(|(key, _)| reset.contains(key)) {
            let kind = DecodeErrorKind::Duplicate;
            return Err(DecodeError::new(
                "update_resource.options",
                options_offset,
                kind,
            ));
        }
        if reset.is_empty() && options.is_empty() {
            let kind = DecodeErrorKind::InvalidLength {
                length: 0,
                min: 1,
                max: u64::from(u32::MAX),
            };
            return Err(DecodeError::new(
                "update_resource.patch",
                options_offset,
                kind,
            ));
        }
        Ok(Self {
            target,
            reset,
            options,
        })
    }
}

#[cfg(test)]
#[path = "update_resource_tests.rs"]
mod tests;

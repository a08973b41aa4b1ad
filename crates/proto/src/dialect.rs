//! The two protocol dialects and the version prefix every login starts with (PROTOCOL.md §2.2,
//! §12).
//!
//! A connection's dialect is fixed by the packed version its login announces; everything
//! decoded after that on the connection uses it.

use alloc::string::String;

use crate::codec::{Codec, Reader, WireName, Writer};
use crate::error::{DecodeError, DecodeErrorKind};

/// Which client generation a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum Dialect {
    /// Python `apache-iggy` 0.9.0, Rust SDK 0.11.0 and 0.11.0-edge.4: lockstep, no bind
    /// secret, 16-byte poll head, 50-byte topic header.
    V0_11_0,
    /// Rust SDK 0.11.1-edge.9 and CLI 0.14.1-edge.7: pipelined, bind secret, partition
    /// context, `UPDATE_RESOURCE`, deferred polls.
    V0_12_2,
}

impl Dialect {
    /// The version the server announces back in login replies for this dialect.
    pub const fn protocol_version(self) -> ProtocolVersion {
        match self {
            Self::V0_11_0 => ProtocolVersion::V0_11_0,
            Self::V0_12_2 => ProtocolVersion::V0_12_2,
        }
    }

    /// The dialect a client announcing `version` speaks, if the server accepts it. The window
    /// is `0.11.0 <= v < 0.12.0` for the old dialect (§12.1) and exactly 0.12.2 for the new.
    pub const fn for_version(version: ProtocolVersion) -> Option<Self> {
        let packed = version.0;
        if packed == ProtocolVersion::V0_12_2.0 {
            Some(Self::V0_12_2)
        } else if packed >= ProtocolVersion::V0_11_0.0 && packed < ProtocolVersion::V0_12_0.0 {
            Some(Self::V0_11_0)
        } else {
            None
        }
    }
}

/// A packed semantic version: `major << 20 | minor << 10 | patch`, each component < 1024, so
/// integer order is version order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ProtocolVersion(pub u32);

impl ProtocolVersion {
    pub const V0_11_0: Self = Self::pack(0, 11, 0);
    pub const V0_12_0: Self = Self::pack(0, 12, 0);
    pub const V0_12_2: Self = Self::pack(0, 12, 2);
    /// The lowest version any dialect accepts: the low end of the eviction window.
    pub const ACCEPTED_MIN: Self = Self::V0_11_0;
    /// The highest version any dialect accepts: the high end of the eviction window.
    pub const ACCEPTED_MAX: Self = Self::V0_12_2;

    /// Packs a version; components are masked to 10 bits.
    pub const fn pack(major: u32, minor: u32, patch: u32) -> Self {
        Self(((major & 0x3ff) << 20) | ((minor & 0x3ff) << 10) | (patch & 0x3ff))
    }

    pub const fn major(self) -> u32 {
        (self.0 >> 20) & 0x3ff
    }

    pub const fn minor(self) -> u32 {
        (self.0 >> 10) & 0x3ff
    }

    pub const fn patch(self) -> u32 {
        self.0 & 0x3ff
    }

    /// Bits 30..31 must be zero in a well-formed packed version.
    pub const fn is_well_formed(self) -> bool {
        self.0 >> 30 == 0
    }
}

const _: () = assert!(ProtocolVersion::V0_12_2.0 == 0x0000_3002);
const _: () = assert!(ProtocolVersion::V0_11_0.0 == 0x0000_2C00);

/// `ClientVersionInfo`: the prefix of both login bodies and of `BIND_SESSION`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct VersionPrefix {
    pub protocol_version: ProtocolVersion,
    pub sdk_name: WireName,
    pub sdk_version: WireName,
}

impl VersionPrefix {
    /// What Rust SDK 0.11.1-edge.9 sends.
    pub fn rust_sdk(dialect: Dialect) -> Self {
        let sdk_version = match dialect {
            Dialect::V0_11_0 => "0.11.0",
            Dialect::V0_12_2 => "0.11.1-edge.9",
        };
        Self {
            protocol_version: dialect.protocol_version(),
            sdk_name: wire_name("rust-sdk"),
            sdk_version: wire_name(sdk_version),
        }
    }

    /// Reads only the packed version, so a server can pick the dialect before decoding the
    /// rest of a login body.
    pub fn peek_version(body: &[u8]) -> Option<ProtocolVersion> {
        let bytes: [u8; 4] = body.get(..4)?.try_into().ok()?;
        Some(ProtocolVersion(u32::from_le_bytes(bytes)))
    }
}

impl Codec<'_> for VersionPrefix {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.protocol_version.0);
        self.sdk_name.encode(writer);
        self.sdk_version.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let protocol_version = ProtocolVersion(reader.u32("version.protocol_version")?);
        if !protocol_version.is_well_formed() {
            return Err(DecodeError::new(
                "version.protocol_version",
                offset,
                DecodeErrorKind::InvalidValue {
                    value: u64::from(protocol_version.0),
                },
            ));
        }
        let sdk_name = reader.text_u8(1, "version.sdk_name")?;
        let sdk_version = reader.text_u8(1, "version.sdk_version")?;
        Ok(Self {
            protocol_version,
            sdk_name: wire_name(sdk_name),
            sdk_version: wire_name(sdk_version),
        })
    }
}

/// A name the caller knows to be 1..=255 bytes.
fn wire_name(name: &str) -> WireName {
    WireName::new(String::from(name)).expect("a 1..=255 byte name")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows() {
        assert_eq!(
            Dialect::for_version(ProtocolVersion::V0_12_2),
            Some(Dialect::V0_12_2)
        );
        assert_eq!(
            Dialect::for_version(ProtocolVersion::V0_11_0),
            Some(Dialect::V0_11_0)
        );
        assert_eq!(
            Dialect::for_version(ProtocolVersion::pack(0, 11, 7)),
            Some(Dialect::V0_11_0)
        );
        assert_eq!(Dialect::for_version(ProtocolVersion::pack(0, 12, 1)), None);
        assert_eq!(Dialect::for_version(ProtocolVersion::pack(0, 10, 9)), None);
    }
}

//! `GET_SNAPSHOT_FILE` (11): the snapshot request (compression and what to collect) and the
//! archive it returns.

use alloc::vec::Vec;

use super::wire::decode_enum;
#[cfg(test)]
use super::wire::small_vec;
use crate::codec::{Codec, Reader, Writer, len_u8};
use crate::error::DecodeError;

/// Archive compression of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum SnapshotCompression {
    Stored,
    Deflated,
    Bzip2,
    Zstd,
    Lzma,
    Xz,
}

impl SnapshotCompression {
    const ALL: [Self; 6] = [
        Self::Stored,
        Self::Deflated,
        Self::Bzip2,
        Self::Zstd,
        Self::Lzma,
        Self::Xz,
    ];

    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Stored => 1,
            Self::Deflated => 2,
            Self::Bzip2 => 3,
            Self::Zstd => 4,
            Self::Lzma => 5,
            Self::Xz => 6,
        }
    }

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_u8() == value)
    }
}

/// What a snapshot archive collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum SnapshotType {
    FilesystemOverview,
    ProcessList,
    ResourceUsage,
    Test,
    ServerLogs,
    ServerConfig,
    All,
}

impl SnapshotType {
    const ALL: [Self; 7] = [
        Self::FilesystemOverview,
        Self::ProcessList,
        Self::ResourceUsage,
        Self::Test,
        Self::ServerLogs,
        Self::ServerConfig,
        Self::All,
    ];

    pub const fn as_u8(self) -> u8 {
        match self {
            Self::FilesystemOverview => 1,
            Self::ProcessList => 2,
            Self::ResourceUsage => 3,
            Self::Test => 4,
            Self::ServerLogs => 5,
            Self::ServerConfig => 6,
            Self::All => 100,
        }
    }

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_u8() == value)
    }
}

/// `GET_SNAPSHOT_FILE` (11) request: `[compression:u8][types_count:u8][type:u8]*`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SnapshotRequest {
    pub compression: SnapshotCompression,
    /// At most 255 are sent; only seven distinct types exist, so more are repeats.
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub types: Vec<SnapshotType>,
}

impl Codec<'_> for SnapshotRequest {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.compression.as_u8());
        let types = self
            .types
            .get(..usize::from(u8::MAX))
            .unwrap_or(&self.types);
        writer.u8(len_u8(types.len()));
        for kind in types {
            writer.u8(kind.as_u8());
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let compression =
            decode_enum(reader, "snapshot.compression", SnapshotCompression::from_u8)?;
        let count = reader.length_u8(0, usize::from(u8::MAX), "snapshot.types_count")?;
        let mut types = Vec::with_capacity(count.min(reader.remaining()));
        for _ in 0..count {
            types.push(decode_enum(reader, "snapshot.type", SnapshotType::from_u8)?);
        }
        Ok(Self { compression, types })
    }
}

/// `GET_SNAPSHOT_FILE` reply: the raw bytes of a ZIP archive, unframed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SnapshotFile(#[cfg_attr(test, proptest(strategy = "small_vec()"))] pub Vec<u8>);

impl Codec<'_> for SnapshotFile {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.bytes(&self.0);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self(Vec::from(reader.rest())))
    }
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;

//! System commands (PROTOCOL.md §4.1, §12.3): `PING` (1), `GET_STATS` (10),
//! `GET_SNAPSHOT_FILE` (11), `GET_CLUSTER_METADATA` (12), `DESCRIBE_OPTIONS` (13),
//! `UPDATE_RESOURCE` (16), `GET_METADATA_CHANGES` (17), `GET_ME` (20), `GET_CLIENT` (21) and
//! `GET_CLIENTS` (22).
//!
//! `PING`, `GET_STATS`, `GET_CLUSTER_METADATA`, `GET_ME` and `GET_CLIENTS` send an empty request
//! ([`crate::commands::Empty`]); `PING` also replies with one. Every `u32` count is checked
//! against a named maximum and against the bytes left before anything is allocated.

use alloc::string::String;
use alloc::vec::Vec;

use crate::codec::{Codec, Reader, WireName, Writer, check_length, len_u8, len_u32};
use crate::commands::{decode_concatenated, encode_concatenated};
use crate::dialect::Dialect;
use crate::error::{DecodeError, DecodeErrorKind};
use crate::primitives::{HeaderKind, Identifier, OptionsBlock};

/// Bytes of any informational string (host names, addresses, descriptions).
pub const TEXT_LENGTH_MAX: usize = 4096;
/// Cache metric entries a stats reply may carry.
pub const CACHE_METRICS_MAX: usize = 1_000_000;
/// Nodes a roster may list: replica ids are one byte.
pub const CLUSTER_NODES_MAX: usize = 256;
/// Entries a `DESCRIBE_OPTIONS` reply may carry (an options block holds at most 512 keys).
pub const OPTION_DESCRIPTORS_MAX: usize = 1024;
/// Bytes of an option default: one TLV value.
pub const OPTION_DEFAULT_LENGTH_MAX: usize = 255;
/// Consumer groups one client may be listed in.
pub const CLIENT_GROUPS_MAX: usize = 100_000;

const CACHE_METRIC_LENGTH: usize = 32;
const OPEN_FILES_TAIL_LENGTH: usize = 16;

/// `GET_STATS` (10) reply. Field names follow the wire; units are in the docs.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Stats {
    pub process_id: u32,
    /// Percent.
    pub cpu_usage: f32,
    /// Percent.
    pub total_cpu_usage: f32,
    /// Bytes, as are the next two.
    pub memory_usage: u64,
    pub total_memory: u64,
    pub available_memory: u64,
    /// Microseconds.
    pub run_time: u64,
    /// Microseconds since the Unix epoch.
    pub start_time: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub messages_size_bytes: u64,
    pub streams_count: u32,
    pub topics_count: u32,
    pub partitions_count: u32,
    pub segments_count: u32,
    pub messages_count: u64,
    pub clients_count: u32,
    pub consumer_groups_count: u32,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub hostname: String,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub os_name: String,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub os_version: String,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub kernel_version: String,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub iggy_server_version: String,
    /// `major·1 000 000 + minor·1000 + patch`; 0 = unknown.
    pub iggy_server_semver: u32,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub cache_metrics: Vec<CacheMetric>,
    pub threads_count: u32,
    /// Bytes, as is the next.
    pub free_disk_space: u64,
    pub total_disk_space: u64,
    /// 0.12.2 only, like `open_files_limit`: 0.11.0 does not write the tail. Either dialect
    /// decodes a missing tail as 0 and refuses a partial one.
    pub open_files_count: u64,
    pub open_files_limit: u64,
}

/// Page-cache counters of one partition.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CacheMetric {
    pub stream_id: u32,
    pub topic_id: u32,
    pub partition_id: u32,
    pub hits: u64,
    pub misses: u64,
    pub hit_ratio: f32,
}

impl Codec<'_> for CacheMetric {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.stream_id);
        writer.u32(self.topic_id);
        writer.u32(self.partition_id);
        writer.u64(self.hits);
        writer.u64(self.misses);
        writer.f32(self.hit_ratio);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: reader.u32("cache_metric.stream_id")?,
            topic_id: reader.u32("cache_metric.topic_id")?,
            partition_id: reader.u32("cache_metric.partition_id")?,
            hits: reader.u64("cache_metric.hits")?,
            misses: reader.u64("cache_metric.misses")?,
            hit_ratio: reader.f32("cache_metric.hit_ratio")?,
        })
    }
}

impl Codec<'_> for Stats {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.process_id);
        writer.f32(self.cpu_usage);
        writer.f32(self.total_cpu_usage);
        for value in [
            self.memory_usage,
            self.total_memory,
            self.available_memory,
            self.run_time,
            self.start_time,
            self.read_bytes,
            self.written_bytes,
            self.messages_size_bytes,
        ] {
            writer.u64(value);
        }
        for value in [
            self.streams_count,
            self.topics_count,
            self.partitions_count,
            self.segments_count,
        ] {
            writer.u32(value);
        }
        writer.u64(self.messages_count);
        writer.u32(self.clients_count);
        writer.u32(self.consumer_groups_count);
        for text in [
            &self.hostname,
            &self.os_name,
            &self.os_version,
            &self.kernel_version,
            &self.iggy_server_version,
        ] {
            writer.bytes_u32(text.as_bytes());
        }
        writer.u32(self.iggy_server_semver);
        encode_counted(&self.cache_metrics, writer);
        writer.u32(self.threads_count);
        writer.u64(self.free_disk_space);
        writer.u64(self.total_disk_space);
        if writer.dialect() == Dialect::V0_12_2 {
            writer.u64(self.open_files_count);
            writer.u64(self.open_files_limit);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        // Struct fields are evaluated in the order written, which is wire order.
        let mut stats = Self {
            process_id: reader.u32("stats.process_id")?,
            cpu_usage: reader.f32("stats.cpu_usage")?,
            total_cpu_usage: reader.f32("stats.total_cpu_usage")?,
            memory_usage: reader.u64("stats.memory_usage")?,
            total_memory: reader.u64("stats.total_memory")?,
            available_memory: reader.u64("stats.available_memory")?,
            run_time: reader.u64("stats.run_time")?,
            start_time: reader.u64("stats.start_time")?,
            read_bytes: reader.u64("stats.read_bytes")?,
            written_bytes: reader.u64("stats.written_bytes")?,
            messages_size_bytes: reader.u64("stats.messages_size_bytes")?,
            streams_count: reader.u32("stats.streams_count")?,
            topics_count: reader.u32("stats.topics_count")?,
            partitions_count: reader.u32("stats.partitions_count")?,
            segments_count: reader.u32("stats.segments_count")?,
            messages_count: reader.u64("stats.messages_count")?,
            clients_count: reader.u32("stats.clients_count")?,
            consumer_groups_count: reader.u32("stats.consumer_groups_count")?,
            hostname: decode_text(reader, "stats.hostname")?,
            os_name: decode_text(reader, "stats.os_name")?,
            os_version: decode_text(reader, "stats.os_version")?,
            kernel_version: decode_text(reader, "stats.kernel_version")?,
            iggy_server_version: decode_text(reader, "stats.iggy_server_version")?,
            iggy_server_semver: reader.u32("stats.iggy_server_semver")?,
            cache_metrics: decode_counted(
                reader,
                CACHE_METRICS_MAX,
                CACHE_METRIC_LENGTH,
                "stats.cache_metrics_count",
            )?,
            threads_count: reader.u32("stats.threads_count")?,
            free_disk_space: reader.u64("stats.free_disk_space")?,
            total_disk_space: reader.u64("stats.total_disk_space")?,
            open_files_count: 0,
            open_files_limit: 0,
        };
        if !reader.is_empty() {
            let mut tail = reader.sub(OPEN_FILES_TAIL_LENGTH, "stats.open_files")?;
            stats.open_files_count = tail.u64("stats.open_files_count")?;
            stats.open_files_limit = tail.u64("stats.open_files_limit")?;
        }
        Ok(stats)
    }
}

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

/// A node's role in the roster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum NodeRole {
    Leader,
    Follower,
}

impl NodeRole {
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Leader => 0,
            Self::Follower => 1,
        }
    }

    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            0 => Some(Self::Leader),
            1 => Some(Self::Follower),
            _ => None,
        }
    }
}

/// A node's health. The SDK's enum also has 5 "Unknown", which its decoder refuses, so it is
/// not representable here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum NodeStatus {
    Healthy,
    Starting,
    Stopping,
    Unreachable,
    Maintenance,
}

impl NodeStatus {
    const ALL: [Self; 5] = [
        Self::Healthy,
        Self::Starting,
        Self::Stopping,
        Self::Unreachable,
        Self::Maintenance,
    ];

    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Healthy => 0,
            Self::Starting => 1,
            Self::Stopping => 2,
            Self::Unreachable => 3,
            Self::Maintenance => 4,
        }
    }

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_u8() == value)
    }
}

/// One roster entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ClusterNode {
    /// 0.12.2 only: 0.11.0 neither writes nor reads it (decodes as 0).
    pub replica_id: u8,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub name: String,
    /// An IP literal or host name, without a port.
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub ip: String,
    /// 0 = the node does not serve this transport; likewise for the other ports.
    pub tcp_port: u16,
    pub quic_port: u16,
    pub http_port: u16,
    pub websocket_port: u16,
    pub role: NodeRole,
    pub status: NodeStatus,
}

const CLUSTER_NODE_LENGTH_MIN: usize = 18;

impl Codec<'_> for ClusterNode {
    fn encode(&self, writer: &mut Writer<'_>) {
        if writer.dialect() == Dialect::V0_12_2 {
            writer.u8(self.replica_id);
        }
        writer.bytes_u32(self.name.as_bytes());
        writer.bytes_u32(self.ip.as_bytes());
        writer.u16(self.tcp_port);
        writer.u16(self.quic_port);
        writer.u16(self.http_port);
        writer.u16(self.websocket_port);
        writer.u8(self.role.as_u8());
        writer.u8(self.status.as_u8());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let replica_id = match reader.dialect() {
            Dialect::V0_12_2 => reader.u8("node.replica_id")?,
            Dialect::V0_11_0 => 0,
        };
        Ok(Self {
            replica_id,
            name: decode_text(reader, "node.name")?,
            ip: decode_text(reader, "node.ip")?,
            tcp_port: reader.u16("node.tcp_port")?,
            quic_port: reader.u16("node.quic_port")?,
            http_port: reader.u16("node.http_port")?,
            websocket_port: reader.u16("node.websocket_port")?,
            role: decode_enum(reader, "node.role", NodeRole::from_u8)?,
            status: decode_enum(reader, "node.status", NodeStatus::from_u8)?,
        })
    }
}

/// `GET_CLUSTER_METADATA` (12) reply: the roster.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ClusterMetadata {
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub name: String,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub nodes: Vec<ClusterNode>,
}

impl Codec<'_> for ClusterMetadata {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.bytes_u32(self.name.as_bytes());
        encode_counted(&self.nodes, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            name: decode_text(reader, "cluster.name")?,
            nodes: decode_counted(
                reader,
                CLUSTER_NODES_MAX,
                CLUSTER_NODE_LENGTH_MIN,
                "cluster.nodes_count",
            )?,
        })
    }
}

/// Which resource kind an options command addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum OptionScope {
    Topic,
    Stream,
    User,
}

impl OptionScope {
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Topic => 1,
            Self::Stream => 2,
            Self::User => 3,
        }
    }

    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            1 => Some(Self::Topic),
            2 => Some(Self::Stream),
            3 => Some(Self::User),
            _ => None,
        }
    }
}

/// `DESCRIBE_OPTIONS` (13) request: `[scope:u8]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DescribeOptions {
    pub scope: OptionScope,
}

impl Codec<'_> for DescribeOptions {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.scope.as_u8());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let scope = decode_enum(reader, "describe_options.scope", OptionScope::from_u8)?;
        Ok(Self { scope })
    }
}

/// One catalog entry of a `DESCRIBE_OPTIONS` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct OptionDescriptor {
    pub key: WireName,
    /// The key's canonical value kind; the SDK refuses kinds outside 1..=15.
    pub kind: HeaderKind,
    /// 0.12.2 only: a bit set of the `FLAG_*` constants. 0.11.0 neither writes nor reads it
    /// (decodes as 0).
    pub flags: u8,
    /// The default in `kind`'s encoding; empty = no default.
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub default_value: Vec<u8>,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub description: String,
}

impl OptionDescriptor {
    pub const FLAG_UPDATABLE: u8 = 1;
    pub const FLAG_RESETTABLE: u8 = 1 << 1;
    /// Write-only: never echoed back.
    pub const FLAG_SECRET: u8 = 1 << 2;
    /// Server computed.
    pub const FLAG_READ_ONLY: u8 = 1 << 3;
    pub const FLAG_CRITICAL: u8 = 1 << 4;
}

const OPTION_DESCRIPTOR_LENGTH_MIN: usize = 12;

impl Codec<'_> for OptionDescriptor {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.key.encode(writer);
        writer.u8(self.kind.as_u8());
        if writer.dialect() == Dialect::V0_12_2 {
            writer.u8(self.flags);
        }
        writer.bytes_u32(&self.default_value);
        writer.bytes_u32(self.description.as_bytes());
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let key = WireName::decode(reader)?;
        let kind = decode_enum(reader, "option.kind", HeaderKind::from_u8)?;
        let flags = match reader.dialect() {
            Dialect::V0_12_2 => reader.u8("option.flags")?,
            Dialect::V0_11_0 => 0,
        };
        let default_value = reader.bytes_u32(OPTION_DEFAULT_LENGTH_MAX, "option.default")?;
        Ok(Self {
            key,
            kind,
            flags,
            default_value: Vec::from(default_value),
            description: decode_text(reader, "option.description")?,
        })
    }
}

/// `DESCRIBE_OPTIONS` reply: `[count:u32]` then the entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct OptionDescriptors(
    #[cfg_attr(test, proptest(strategy = "small_vec()"))] pub Vec<OptionDescriptor>,
);

impl Codec<'_> for OptionDescriptors {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_counted(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        decode_counted(
            reader,
            OPTION_DESCRIPTORS_MAX,
            OPTION_DESCRIPTOR_LENGTH_MIN,
            "describe_options.count",
        )
        .map(Self)
    }
}

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

/// How a client reaches the server (TLS variants report their base transport).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum Transport {
    Tcp,
    Quic,
    Http,
    WebSocket,
}

impl Transport {
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Tcp => 1,
            Self::Quic => 2,
            Self::Http => 3,
            Self::WebSocket => 4,
        }
    }

    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            1 => Some(Self::Tcp),
            2 => Some(Self::Quic),
            3 => Some(Self::Http),
            4 => Some(Self::WebSocket),
            _ => None,
        }
    }
}

/// `GET_CLIENT` (21) request: `[client_id:u32]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetClient {
    pub client_id: u32,
}

impl Codec<'_> for GetClient {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.client_id);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let client_id = reader.u32("get_client.client_id")?;
        Ok(Self { client_id })
    }
}

/// A consumer group a client belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ClientGroup {
    pub stream_id: u32,
    pub topic_id: u32,
    pub group_id: u32,
}

impl Codec<'_> for ClientGroup {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.stream_id);
        writer.u32(self.topic_id);
        writer.u32(self.group_id);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: reader.u32("client_group.stream_id")?,
            topic_id: reader.u32("client_group.topic_id")?,
            group_id: reader.u32("client_group.group_id")?,
        })
    }
}

/// One `GET_CLIENTS` (22) record: the client without its group entries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ClientInfo {
    pub client_id: u32,
    /// [`ClientInfo::USER_ID_UNAUTHENTICATED`] before login.
    pub user_id: u32,
    pub transport: Transport,
    /// `ip:port` of the peer.
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub address: String,
    pub consumer_groups_count: u32,
}

impl ClientInfo {
    pub const USER_ID_UNAUTHENTICATED: u32 = u32::MAX;
}

impl Codec<'_> for ClientInfo {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_client_head(
            self.client_id,
            self.user_id,
            self.transport,
            &self.address,
            writer,
        );
        writer.u32(self.consumer_groups_count);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            client_id: reader.u32("client.client_id")?,
            user_id: reader.u32("client.user_id")?,
            transport: decode_enum(reader, "client.transport", Transport::from_u8)?,
            address: decode_text(reader, "client.address")?,
            consumer_groups_count: reader.u32("client.consumer_groups_count")?,
        })
    }
}

/// `GET_CLIENT` (21) and `GET_ME` (20) reply: the client with its groups. An empty
/// `GET_CLIENT` body (not found) is `None` at the call site.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ClientDetails {
    pub client_id: u32,
    pub user_id: u32,
    pub transport: Transport,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub address: String,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub consumer_groups: Vec<ClientGroup>,
}

impl Codec<'_> for ClientDetails {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_client_head(
            self.client_id,
            self.user_id,
            self.transport,
            &self.address,
            writer,
        );
        encode_counted(&self.consumer_groups, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            client_id: reader.u32("client.client_id")?,
            user_id: reader.u32("client.user_id")?,
            transport: decode_enum(reader, "client.transport", Transport::from_u8)?,
            address: decode_text(reader, "client.address")?,
            consumer_groups: decode_counted(
                reader,
                CLIENT_GROUPS_MAX,
                12,
                "client.consumer_groups_count",
            )?,
        })
    }
}

/// `GET_CLIENTS` (22) reply: concatenated records, no count prefix; empty = no clients.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Clients(#[cfg_attr(test, proptest(strategy = "small_vec()"))] pub Vec<ClientInfo>);

impl<'a> Codec<'a> for Clients {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_concatenated(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        decode_concatenated(reader).map(Self)
    }
}

/// Bytes of a metadata-change cursor: `[log_id:u128][op:u64][checksum:u128][ordinal:u32]`.
pub const METADATA_CURSOR_LENGTH: usize = 44;
/// Bytes of a page token's `last_key`: a user id and a token name at most.
pub const PAGE_TOKEN_KEY_LENGTH_MAX: usize = 4 + 1 + 255;
/// Records or items one metadata-changes page may carry.
pub const METADATA_ENTRIES_MAX: usize = 100_000;
/// Bytes of one record or item body.
pub const METADATA_BODY_LENGTH_MAX: usize = 1 << 20;
const METADATA_RECORD_LENGTH_MIN: usize = 43;
const METADATA_ITEM_LENGTH_MIN: usize = 5;

/// A position in the metadata log. At `op = 0` checksum and ordinal must be 0 (canonical).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[cfg_attr(test, proptest(filter = "MetadataCursor::is_canonical"))]
pub struct MetadataCursor {
    pub log_id: u128,
    pub op: u64,
    pub checksum: u128,
    pub ordinal: u32,
}

impl MetadataCursor {
    pub const fn is_canonical(&self) -> bool {
        self.op != 0 || (self.checksum == 0 && self.ordinal == 0)
    }
}

impl Codec<'_> for MetadataCursor {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u128(self.log_id);
        writer.u64(self.op);
        writer.u128(self.checksum);
        writer.u32(self.ordinal);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let cursor = Self {
            log_id: reader.u128("cursor.log_id")?,
            op: reader.u64("cursor.op")?,
            checksum: reader.u128("cursor.checksum")?,
            ordinal: reader.u32("cursor.ordinal")?,
        };
        if !cursor.is_canonical() {
            return Err(DecodeError::new(
                "cursor",
                offset,
                DecodeErrorKind::NonZeroReserved,
            ));
        }
        Ok(cursor)
    }
}

/// The resource families of the metadata log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum MetadataGroup {
    Streams = 1,
    Topics = 2,
    Partitions = 3,
    ConsumerGroups = 4,
    ConsumerGroupMembers = 5,
    Users = 6,
    PersonalAccessTokens = 7,
    Sessions = 8,
}

impl MetadataGroup {
    const ALL: [Self; 8] = [
        Self::Streams,
        Self::Topics,
        Self::Partitions,
        Self::ConsumerGroups,
        Self::ConsumerGroupMembers,
        Self::Users,
        Self::PersonalAccessTokens,
        Self::Sessions,
    ];

    // A fieldless enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|group| group.as_u8() == value)
    }

    /// This group's bit in a page token's `groups_mask`.
    pub fn mask_bit(self) -> u8 {
        1_u8.checked_shl(u32::from(self.as_u8().saturating_sub(1)))
            .unwrap_or(0)
    }

    /// Whether `key` has the shape of this group's resource key.
    fn fits_key(self, key: &[u8]) -> bool {
        match self {
            Self::Streams | Self::Users => key.len() == 4,
            Self::Topics | Self::Partitions | Self::Sessions => key.len() == 8,
            Self::ConsumerGroups => key.len() == 12,
            Self::ConsumerGroupMembers => key.len() == 16,
            Self::PersonalAccessTokens => key.get(4..).is_some_and(|name| {
                let mut reader = Reader::new(name, Dialect::V0_12_2);
                WireName::decode(&mut reader).is_ok() && reader.is_empty()
            }),
        }
    }
}

/// Where a `Current` page listing resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageToken {
    pub anchor: MetadataCursor,
    /// Not below `anchor.op`.
    pub required_head: u64,
    /// Contains `group`'s bit.
    pub groups_mask: u8,
    pub group: MetadataGroup,
    /// The last key listed, shaped as `group`'s key.
    pub last_key: Vec<u8>,
}

impl PageToken {
    fn is_valid(&self) -> bool {
        self.groups_mask & self.group.mask_bit() != 0
            && self.required_head >= self.anchor.op
            && self.last_key.len() <= PAGE_TOKEN_KEY_LENGTH_MAX
            && self.group.fits_key(&self.last_key)
    }

    fn encoded_length(&self) -> usize {
        self.last_key
            .len()
            .saturating_add(METADATA_CURSOR_LENGTH + 12)
    }

    /// `[len:u16][token]`, `len = 0` for none.
    fn encode_optional(token: Option<&Self>, writer: &mut Writer<'_>) {
        let Some(token) = token else {
            writer.u16(0);
            return;
        };
        let length = u16::try_from(token.encoded_length());
        writer.u16(length.expect("a valid token spans at most 316 bytes"));
        token.anchor.encode(writer);
        writer.u64(token.required_head);
        writer.u8(token.groups_mask);
        writer.u8(token.group.as_u8());
        writer.u16(u16::try_from(token.last_key.len()).expect("a valid key fits a u16"));
        writer.bytes(&token.last_key);
    }

    fn decode_optional(reader: &mut Reader<'_>) -> Result<Option<Self>, DecodeError> {
        let length = reader.u16("page_token.length")?;
        if length == 0 {
            return Ok(None);
        }
        let offset = reader.offset();
        let mut body = reader.sub(usize::from(length), "page_token")?;
        let anchor = MetadataCursor::decode(&mut body)?;
        let required_head = body.u64("page_token.required_head")?;
        let groups_mask = body.u8("page_token.groups_mask")?;
        let group = decode_enum(&mut body, "page_token.group", MetadataGroup::from_u8)?;
        let key_length = usize::from(body.u16("page_token.key_length")?);
        let last_key = Vec::from(body.bytes(key_length, "page_token.last_key")?);
        body.finish("page_token.trailing")?;
        let token = Self {
            anchor,
            required_head,
            groups_mask,
            group,
            last_key,
        };
        if !token.is_valid() {
            let kind = DecodeErrorKind::InvalidValue {
                value: u64::from(token.group.as_u8()),
            };
            return Err(DecodeError::new("page_token", offset, kind));
        }
        Ok(Some(token))
    }
}

/// Where a `GET_METADATA_CHANGES` read starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataStart {
    Earliest,
    Latest,
    After(MetadataCursor),
    /// State pages; `Some` resumes a listing.
    Current(Option<PageToken>),
}

/// `GET_METADATA_CHANGES` (17) request (0.12.2 only; the layout does not depend on the
/// dialect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataChangesRequest {
    pub start: MetadataStart,
    /// Microseconds since the Unix epoch, as is `until`.
    pub since: Option<u64>,
    pub until: Option<u64>,
    pub limit: u32,
    /// Empty = all groups. At most 255 are sent.
    pub groups: Vec<MetadataGroup>,
}

impl Codec<'_> for MetadataChangesRequest {
    fn encode(&self, writer: &mut Writer<'_>) {
        let (mode, cursor, token) = match &self.start {
            MetadataStart::Earliest => (0, MetadataCursor::default(), None),
            MetadataStart::Latest => (1, MetadataCursor::default(), None),
            MetadataStart::After(cursor) => (2, *cursor, None),
            MetadataStart::Current(token) => (3, MetadataCursor::default(), token.as_ref()),
        };
        writer.u8(mode);
        cursor.encode(writer);
        encode_optional_u64(self.since, writer);
        encode_optional_u64(self.until, writer);
        writer.u32(self.limit);
        let groups = self
            .groups
            .get(..usize::from(u8::MAX))
            .unwrap_or(&self.groups);
        writer.u8(len_u8(groups.len()));
        for group in groups {
            writer.u8(group.as_u8());
        }
        PageToken::encode_optional(token, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mode_offset = reader.offset();
        let mode = reader.u8("metadata_changes.start")?;
        let cursor_offset = reader.offset();
        let cursor = MetadataCursor::decode(reader)?;
        let since = decode_optional_u64(reader, "metadata_changes.since")?;
        let until = decode_optional_u64(reader, "metadata_changes.until")?;
        let limit = reader.u32("metadata_changes.limit")?;
        let count = reader.length_u8(0, usize::from(u8::MAX), "metadata_changes.groups")?;
        let mut groups = Vec::with_capacity(count.min(reader.remaining()));
        for _ in 0..count {
            groups.push(decode_enum(
                reader,
                "metadata_changes.group",
                MetadataGroup::from_u8,
            )?);
        }
        let token_offset = reader.offset();
        let token = PageToken::decode_optional(reader)?;
        if mode != 2 && cursor != MetadataCursor::default() {
            let kind = DecodeErrorKind::NonZeroReserved;
            return Err(DecodeError::new(
                "metadata_changes.cursor",
                cursor_offset,
                kind,
            ));
        }
        if mode != 3 && token.is_some() {
            let kind = DecodeErrorKind::NonZeroReserved;
            return Err(DecodeError::new(
                "metadata_changes.page_token",
                token_offset,
                kind,
            ));
        }
        let start = match mode {
            0 => MetadataStart::Earliest,
            1 => MetadataStart::Latest,
            2 => MetadataStart::After(cursor),
            3 => MetadataStart::Current(token),
            value => {
                let kind = DecodeErrorKind::InvalidValue {
                    value: u64::from(value),
                };
                return Err(DecodeError::new(
                    "metadata_changes.start",
                    mode_offset,
                    kind,
                ));
            }
        };
        Ok(Self {
            start,
            since,
            until,
            limit,
            groups,
        })
    }
}

/// One change of the metadata log; the body layout depends on `kind` and stays opaque here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct MetadataRecord {
    pub op: u64,
    pub ordinal: u32,
    pub checksum: u128,
    /// Microseconds since the Unix epoch.
    pub timestamp: u64,
    pub actor_user_id: Option<u32>,
    /// Raw codes, kept for forward compatibility.
    pub group: u8,
    pub kind: u8,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub body: Vec<u8>,
}

impl Codec<'_> for MetadataRecord {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u64(self.op);
        writer.u32(self.ordinal);
        writer.u128(self.checksum);
        writer.u64(self.timestamp);
        writer.bool(self.actor_user_id.is_some());
        if let Some(actor) = self.actor_user_id {
            writer.u32(actor);
        }
        writer.u8(self.group);
        writer.u8(self.kind);
        writer.bytes_u32(&self.body);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            op: reader.u64("record.op")?,
            ordinal: reader.u32("record.ordinal")?,
            checksum: reader.u128("record.checksum")?,
            timestamp: reader.u64("record.timestamp")?,
            actor_user_id: if reader.bool("record.has_actor")? {
                Some(reader.u32("record.actor_user_id")?)
            } else {
                None
            },
            group: reader.u8("record.group")?,
            kind: reader.u8("record.kind")?,
            body: Vec::from(reader.bytes_u32(METADATA_BODY_LENGTH_MAX, "record.body")?),
        })
    }
}

/// One resource of a `Current` page; the body stays opaque here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct MetadataItem {
    pub group: u8,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub body: Vec<u8>,
}

impl Codec<'_> for MetadataItem {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.group);
        writer.bytes_u32(&self.body);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            group: reader.u8("item.group")?,
            body: Vec::from(reader.bytes_u32(METADATA_BODY_LENGTH_MAX, "item.body")?),
        })
    }
}

/// How a metadata-changes page relates to the requested start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum MetadataChangesStatus {
    Ok = 0,
    Behind = 1,
    Expired = 2,
    Reset = 3,
}

impl MetadataChangesStatus {
    const ALL: [Self; 4] = [Self::Ok, Self::Behind, Self::Expired, Self::Reset];

    // A fieldless enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_u8() == value)
    }
}

/// What a page carries: log records (`Changes`) or state items and a token (`Current`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataPage {
    Changes(Vec<MetadataRecord>),
    Current {
        items: Vec<MetadataItem>,
        token: Option<PageToken>,
    },
}

/// `GET_METADATA_CHANGES` reply. A page holds records or items, never both, by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataChanges {
    pub status: MetadataChangesStatus,
    pub log_id: Option<u128>,
    pub oldest_op: u64,
    pub retained_since: u64,
    pub head_op: u64,
    pub next: Option<MetadataCursor>,
    pub has_more: bool,
    pub page: MetadataPage,
}

impl Codec<'_> for MetadataChanges {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.status.as_u8());
        writer.bool(matches!(self.page, MetadataPage::Current { .. }));
        writer.bool(self.log_id.is_some());
        if let Some(log_id) = self.log_id {
            writer.u128(log_id);
        }
        writer.u64(self.oldest_op);
        writer.u64(self.retained_since);
        writer.u64(self.head_op);
        writer.bool(self.next.is_some());
        if let Some(next) = &self.next {
            next.encode(writer);
        }
        writer.bool(self.has_more);
        let (records, items, token): (&[MetadataRecord], &[MetadataItem], _) = match &self.page {
            MetadataPage::Changes(records) => (records, &[], None),
            MetadataPage::Current { items, token } => (&[], items, token.as_ref()),
        };
        encode_counted(records, writer);
        encode_counted(items, writer);
        PageToken::encode_optional(token, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let status = decode_enum(reader, "metadata.status", MetadataChangesStatus::from_u8)?;
        let current = reader.bool("metadata.phase")?;
        let log_id = if reader.bool("metadata.has_log_id")? {
            Some(reader.u128("metadata.log_id")?)
        } else {
            None
        };
        let oldest_op = reader.u64("metadata.oldest_op")?;
        let retained_since = reader.u64("metadata.retained_since")?;
        let head_op = reader.u64("metadata.head_op")?;
        let next = if reader.bool("metadata.has_next")? {
            Some(MetadataCursor::decode(reader)?)
        } else {
            None
        };
        let has_more = reader.bool("metadata.has_more")?;
        let records_offset = reader.offset();
        let records: Vec<MetadataRecord> = decode_counted(
            reader,
            METADATA_ENTRIES_MAX,
            METADATA_RECORD_LENGTH_MIN,
            "metadata.records_count",
        )?;
        let items_offset = reader.offset();
        let items: Vec<MetadataItem> = decode_counted(
            reader,
            METADATA_ENTRIES_MAX,
            METADATA_ITEM_LENGTH_MIN,
            "metadata.items_count",
        )?;
        let token = PageToken::decode_optional(reader)?;
        let page = match (
            current,
            records.is_empty(),
            items.is_empty() && token.is_none(),
        ) {
            (false, _, true) => MetadataPage::Changes(records),
            (true, true, _) => MetadataPage::Current { items, token },
            (false, _, false) => return Err(mixed_page("metadata.items", items_offset)),
            (true, false, _) => return Err(mixed_page("metadata.records", records_offset)),
        };
        Ok(Self {
            status,
            log_id,
            oldest_op,
            retained_since,
            head_op,
            next,
            has_more,
            page,
        })
    }
}

fn mixed_page(field: &'static str, offset: usize) -> DecodeError {
    let kind = DecodeErrorKind::CountMismatch {
        declared: 0,
        actual: 1,
    };
    DecodeError::new(field, offset, kind)
}

fn encode_optional_u64(value: Option<u64>, writer: &mut Writer<'_>) {
    writer.bool(value.is_some());
    if let Some(value) = value {
        writer.u64(value);
    }
}

fn decode_optional_u64(
    reader: &mut Reader<'_>,
    field: &'static str,
) -> Result<Option<u64>, DecodeError> {
    if reader.bool(field)? {
        reader.u64(field).map(Some)
    } else {
        Ok(None)
    }
}

fn encode_client_head(
    client_id: u32,
    user_id: u32,
    transport: Transport,
    address: &str,
    writer: &mut Writer<'_>,
) {
    writer.u32(client_id);
    writer.u32(user_id);
    writer.u8(transport.as_u8());
    writer.bytes_u32(address.as_bytes());
}

/// `[count:u32]` then the records.
fn encode_counted<'a, T: Codec<'a>>(records: &[T], writer: &mut Writer<'_>) {
    writer.u32(len_u32(records.len()));
    for record in records {
        record.encode(writer);
    }
}

/// `[count:u32]` then the records; the count is bounded by `max` and by how many records of
/// at least `record_length_min` bytes the input still holds, before anything is allocated.
fn decode_counted<'a, T: Codec<'a>>(
    reader: &mut Reader<'a>,
    max: usize,
    record_length_min: usize,
    field: &'static str,
) -> Result<Vec<T>, DecodeError> {
    let offset = reader.offset();
    let count = reader.u32(field)?;
    let fitting = reader
        .remaining()
        .checked_div(record_length_min)
        .unwrap_or(max);
    let count = check_length(u64::from(count), 0, max.min(fitting), field, offset)?;
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        records.push(T::decode(reader)?);
    }
    Ok(records)
}

/// A one-byte enum, refused with its offset when `from_u8` does not know it.
fn decode_enum<T>(
    reader: &mut Reader<'_>,
    field: &'static str,
    from_u8: impl Fn(u8) -> Option<T>,
) -> Result<T, DecodeError> {
    let offset = reader.offset();
    let value = reader.u8(field)?;
    from_u8(value).ok_or(DecodeError::new(
        field,
        offset,
        DecodeErrorKind::InvalidValue {
            value: u64::from(value),
        },
    ))
}

fn decode_text(reader: &mut Reader<'_>, field: &'static str) -> Result<String, DecodeError> {
    reader.text_u32(TEXT_LENGTH_MAX, field).map(String::from)
}

#[cfg(test)]
fn text_strategy() -> impl proptest::strategy::Strategy<Value = String> {
    "\\PC{0,16}"
}

#[cfg(test)]
fn small_vec<T: proptest::arbitrary::Arbitrary>()
-> impl proptest::strategy::Strategy<Value = Vec<T>> {
    proptest::collection::vec(proptest::prelude::any::<T>(), 0..4)
}

#[cfg(test)]
#[path = "system_tests.rs"]
mod tests;

//! `GET_CLUSTER_METADATA` (12): the cluster roster reply, its nodes and their roles and
//! health. The request is empty ([`crate::commands::Empty`]).

use alloc::string::String;
use alloc::vec::Vec;

use super::wire::{decode_counted, decode_enum, decode_text, encode_counted};
#[cfg(test)]
use super::wire::{small_vec, text_strategy};
use crate::codec::{Codec, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::DecodeError;

/// Nodes a roster may list: replica ids are one byte.
pub const CLUSTER_NODES_MAX: usize = 256;

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

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;

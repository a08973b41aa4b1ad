//! System commands (PROTOCOL.md §4.1, §12.3): `PING` (1), `GET_STATS` (10),
//! `GET_SNAPSHOT_FILE` (11), `GET_CLUSTER_METADATA` (12), `DESCRIBE_OPTIONS` (13),
//! `UPDATE_RESOURCE` (16), `GET_METADATA_CHANGES` (17), `GET_ME` (20), `GET_CLIENT` (21) and
//! `GET_CLIENTS` (22).
//!
//! `PING`, `GET_STATS`, `GET_CLUSTER_METADATA`, `GET_ME` and `GET_CLIENTS` send an empty request
//! ([`crate::commands::Empty`]); `PING` also replies with one. Every `u32` count is checked
//! against a named maximum and against the bytes left before anything is allocated.
//!
//! One file per command family; every public item is re-exported here, so its path is
//! `crate::commands::system::X` whichever file defines it.

mod clients;
mod cluster;
mod metadata_changes;
mod metadata_cursor;
mod options;
mod snapshot;
mod stats;
mod update_resource;
mod wire;

#[cfg(test)]
mod tests;

pub use clients::{
    CLIENT_GROUPS_MAX, ClientDetails, ClientGroup, ClientInfo, Clients, GetClient, Transport,
};
pub use cluster::{CLUSTER_NODES_MAX, ClusterMetadata, ClusterNode, NodeRole, NodeStatus};
pub use metadata_changes::{
    METADATA_BODY_LENGTH_MAX, METADATA_ENTRIES_MAX, MetadataChanges, MetadataChangesRequest,
    MetadataChangesStatus, MetadataItem, MetadataPage, MetadataRecord, MetadataStart,
};
pub use metadata_cursor::{
    METADATA_CURSOR_LENGTH, MetadataCursor, MetadataGroup, PAGE_TOKEN_KEY_LENGTH_MAX, PageToken,
};
pub use options::{
    DescribeOptions, OPTION_DEFAULT_LENGTH_MAX, OPTION_DESCRIPTORS_MAX, OptionDescriptor,
    OptionDescriptors, OptionScope,
};
pub use snapshot::{SnapshotCompression, SnapshotFile, SnapshotRequest, SnapshotType};
pub use stats::{CACHE_METRICS_MAX, CacheMetric, Stats};
pub use update_resource::{ResetKeys, ResourceTarget, UpdateResource};
pub use wire::TEXT_LENGTH_MAX;

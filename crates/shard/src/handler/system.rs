//! System commands (PROTOCOL.md §2.8, §2.9, §4.1): `PING`, the one-node roster, partition
//! routes, the caller's and other clients' details, stats and the option catalog (§7.4).
//! Snapshots and the metadata change feed are not offered (`FeatureUnavailable`).

use proto::ErrorCode;
use proto::codec::WireName;
use proto::commands::Empty;
use proto::commands::Request;
use proto::commands::messages::{GetPartitionRoute, PartitionRoute};
use proto::commands::system::{
    ClientDetails, ClientInfo, Clients, ClusterMetadata, ClusterNode, NodeRole, NodeStatus,
    OptionDescriptor, OptionDescriptors, OptionScope, Stats, Transport,
};
use proto::header::{Operation, RequestHeader};
use proto::primitives::{HeaderKind, Identifier};

use super::operation_of;
use crate::connection::{Connection, TransportKind};
use crate::metadata::{Metadata, Stream, Topic};
use crate::outcome::Outcome;
use crate::procfs::ProcessNumbers;
use crate::server::{ClientRecord, SERVER_SEMVER, SERVER_VERSION, Server, now_us};

const NR: Operation = Operation::NonReplicated;

pub(crate) fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let commit = server.commit_number();
    let dialect = connection.dialect;
    match request {
        Request::Ping(_) => Outcome::payload(NR, &Empty, dialect, commit),
        Request::CancelDeferredRequest(_) => {
            // The parked request answers for itself; the cancel gets no reply (§2.11).
            server.cancel_parked(header.client.get(), header.request.get());
            Outcome::Silent
        }
        Request::GetClusterMetadata(_) => {
            Outcome::payload(NR, &cluster_metadata(server), dialect, commit)
        }
        Request::GetPartitionRoute(route) => {
            match partition_route(&server.metadata.borrow(), &route) {
                Ok(route) => Outcome::payload(NR, &route, dialect, commit),
                Err(code) => Outcome::rejected(NR, code, dialect, commit),
            }
        }
        Request::GetMe(_) => {
            let record = client_record(connection);
            let details = client_details(connection.client_number, &record);
            Outcome::payload(NR, &details, dialect, commit)
        }
        Request::GetClient(get) if may_read_servers(server, connection) => {
            let clients = server.clients.borrow();
            let details = clients
                .get(&get.client_id)
                .map(|record| client_details(get.client_id, record));
            Outcome::payload(NR, &details, dialect, commit)
        }
        Request::GetClients(_) if may_read_servers(server, connection) => {
            Outcome::payload(NR, &clients(server), dialect, commit)
        }
        Request::GetStats(_) if may_read_servers(server, connection) => {
            Outcome::payload(NR, &stats(server), dialect, commit)
        }
        Request::GetClient(_) | Request::GetClients(_) | Request::GetStats(_) => {
            Outcome::rejected(NR, ErrorCode::Unauthorized, dialect, commit)
        }
        Request::DescribeOptions(describe) => {
            Outcome::payload(NR, &option_catalog(describe.scope), dialect, commit)
        }
        Request::GetSnapshotFile(_) | Request::GetMetadataChanges(_) => {
            Outcome::rejected(NR, ErrorCode::FeatureUnavailable, dialect, commit)
        }
        _ => Outcome::refused(operation_of(header), ErrorCode::InvalidCommand, commit),
    }
}

/// One node, leader of everything, serving TCP on the bound port.
fn cluster_metadata(server: &Server) -> ClusterMetadata {
    let info = &server.info;
    let node = ClusterNode {
        replica_id: 0,
        name: info.node_name.clone(),
        ip: info.node_ip.clone(),
        tcp_port: info.tcp_port,
        quic_port: 0,
        http_port: 0,
        websocket_port: 0,
        role: NodeRole::Leader,
        status: NodeStatus::Healthy,
    };
    ClusterMetadata {
        name: info.cluster_name.clone(),
        nodes: vec![node],
    }
}

fn partition_route(
    metadata: &Metadata,
    request: &GetPartitionRoute,
) -> Result<PartitionRoute, ErrorCode> {
    let stream = stream(metadata, &request.stream_id).ok_or(ErrorCode::StreamIdNotFound)?;
    let topic = topic(stream, &request.topic_id).ok_or(ErrorCode::TopicIdNotFound)?;
    let partition = topic
        .partitions
        .get(&request.partition_id)
        .ok_or(ErrorCode::PartitionNotFound)?;
    Ok(PartitionRoute {
        incarnation: partition.incarnation,
        metadata_op: metadata.commit,
        view: 0,
        partitions_count: u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX),
        primary_replica: 0,
    })
}

fn stream<'m>(metadata: &'m Metadata, id: &Identifier) -> Option<&'m Stream> {
    match id {
        Identifier::Numeric(id) => metadata.streams.get(id),
        Identifier::Name(name) => metadata.streams.values().find(|s| s.name == name.as_str()),
    }
}

fn topic<'s>(stream: &'s Stream, id: &Identifier) -> Option<&'s Topic> {
    match id {
        Identifier::Numeric(id) => stream.topics.get(id),
        Identifier::Name(name) => stream.topics.values().find(|t| t.name == name.as_str()),
    }
}

/// `GET_CLIENT(S)` and `GET_STATS` need `read_servers` or `manage_servers` (§4.1).
fn may_read_servers(server: &Server, connection: &Connection) -> bool {
    let Some(user_id) = connection.user_id() else {
        return false;
    };
    let metadata = server.metadata.borrow();
    let permissions = metadata
        .users
        .get(&user_id)
        .and_then(|user| user.permissions.as_ref());
    permissions.is_some_and(|p| p.global.read_servers || p.global.manage_servers)
}

fn client_record(connection: &Connection) -> ClientRecord {
    ClientRecord {
        address: connection.address,
        transport: connection.transport,
        user_id: connection.user_id(),
    }
}

fn client_details(client_id: u32, record: &ClientRecord) -> ClientDetails {
    ClientDetails {
        client_id,
        user_id: record
            .user_id
            .unwrap_or(ClientInfo::USER_ID_UNAUTHENTICATED),
        transport: transport(record.transport),
        address: record.address.to_string(),
        consumer_groups: Vec::new(),
    }
}

fn clients(server: &Server) -> Clients {
    let records = server.clients.borrow();
    let infos = records
        .iter()
        .map(|(&client_id, record)| ClientInfo {
            client_id,
            user_id: record
                .user_id
                .unwrap_or(ClientInfo::USER_ID_UNAUTHENTICATED),
            transport: transport(record.transport),
            address: record.address.to_string(),
            consumer_groups_count: 0,
        })
        .collect();
    Clients(infos)
}

fn transport(kind: TransportKind) -> Transport {
    match kind {
        TransportKind::Tcp => Transport::Tcp,
        TransportKind::Quic => Transport::Quic,
        TransportKind::Http => Transport::Http,
        TransportKind::WebSocket => Transport::WebSocket,
    }
}

fn stats(server: &Server) -> Stats {
    let process = ProcessNumbers::read();
    let metadata = server.metadata.borrow();
    let topics = metadata
        .streams
        .values()
        .flat_map(|stream| stream.topics.values());
    let (mut topics_count, mut partitions_count, mut groups_count) = (0usize, 0usize, 0usize);
    for topic in topics {
        topics_count += 1;
        partitions_count += topic.partitions.len();
        groups_count += topic.groups.len();
    }
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let totals = server.data.totals(None, None);
    let now = now_us();
    Stats {
        process_id: std::process::id(),
        cpu_usage: 0.0,
        total_cpu_usage: 0.0,
        memory_usage: process.memory_usage_bytes,
        total_memory: process.total_memory_bytes,
        available_memory: process.available_memory_bytes,
        run_time: now.saturating_sub(server.info.started_at_us),
        start_time: server.info.started_at_us,
        read_bytes: process.read_bytes,
        written_bytes: process.written_bytes,
        messages_size_bytes: totals.size_bytes,
        streams_count: count(metadata.streams.len()),
        topics_count: count(topics_count),
        partitions_count: count(partitions_count),
        segments_count: u32::try_from(totals.segments_count).unwrap_or(u32::MAX),
        messages_count: totals.messages_count,
        clients_count: count(server.clients.borrow().len()),
        consumer_groups_count: count(groups_count),
        hostname: process.hostname,
        os_name: process.os_name,
        os_version: process.os_version,
        kernel_version: process.kernel_version,
        iggy_server_version: SERVER_VERSION.to_owned(),
        iggy_server_semver: SERVER_SEMVER,
        cache_metrics: Vec::new(),
        threads_count: process.threads_count,
        free_disk_space: 0,
        total_disk_space: 0,
        open_files_count: process.open_files_count,
        open_files_limit: process.open_files_limit,
    }
}

/// One row of the option catalog (§7.4).
struct CatalogEntry {
    key: &'static str,
    scope: OptionScope,
    kind: HeaderKind,
    flags: u8,
    default_value: &'static [u8],
    description: &'static str,
}

const UPDATABLE: u8 = OptionDescriptor::FLAG_UPDATABLE;
const RESETTABLE: u8 = OptionDescriptor::FLAG_RESETTABLE;
const SECRET_CRITICAL: u8 = OptionDescriptor::FLAG_SECRET | OptionDescriptor::FLAG_CRITICAL;
const READ_ONLY: u8 = OptionDescriptor::FLAG_READ_ONLY;
const ONE_GIB: [u8; 8] = (1u64 << 30).to_le_bytes();
const ONE_MIB: [u8; 8] = (1u64 << 20).to_le_bytes();
const FIELDS_1024: [u8; 4] = 1024u32.to_le_bytes();
const ONE: [u8; 4] = 1u32.to_le_bytes();
const NEVER: [u8; 8] = u64::MAX.to_le_bytes();

const fn entry(
    key: &'static str,
    scope: OptionScope,
    kind: HeaderKind,
    flags: u8,
    default_value: &'static [u8],
    description: &'static str,
) -> CatalogEntry {
    CatalogEntry {
        key,
        scope,
        kind,
        flags,
        default_value,
        description,
    }
}

use HeaderKind as K;
use OptionScope as S;

const CATALOG: [CatalogEntry; 19] = [
    entry(
        "name",
        S::Stream,
        K::String,
        UPDATABLE,
        b"",
        "the stream's name",
    ),
    entry(
        "encryption_key",
        S::Stream,
        K::Raw,
        SECRET_CRITICAL,
        b"",
        "32-byte stream key",
    ),
    entry(
        "encryption_key_source",
        S::Stream,
        K::String,
        READ_ONLY,
        b"",
        "stream/server/none",
    ),
    entry(
        "encryption_key_fingerprint",
        S::Stream,
        K::String,
        READ_ONLY,
        b"",
        "16 hex chars",
    ),
    entry(
        "encryption_kek_fingerprint",
        S::Stream,
        K::String,
        READ_ONLY,
        b"",
        "KEK prints",
    ),
    entry(
        "name",
        S::Topic,
        K::String,
        UPDATABLE,
        b"",
        "the topic's name",
    ),
    entry(
        "compression_algorithm",
        S::Topic,
        K::String,
        0,
        b"none",
        "none or gzip",
    ),
    entry(
        "message_expiry",
        S::Topic,
        K::Uint64,
        UPDATABLE | RESETTABLE,
        &NEVER,
        "µs; max = never",
    ),
    entry(
        "max_topic_size",
        S::Topic,
        K::Uint64,
        UPDATABLE | RESETTABLE,
        &NEVER,
        "bytes; max = unlimited",
    ),
    entry(
        "segment_size",
        S::Topic,
        K::Uint64,
        0,
        &ONE_GIB,
        "bytes per segment",
    ),
    entry(
        "durability",
        S::Topic,
        K::String,
        0,
        b"replicated",
        "replicated or persisted",
    ),
    entry(
        "consumer_offset_durability",
        S::Topic,
        K::String,
        0,
        b"replicated",
        "for offsets",
    ),
    entry(
        "partition_resize_policy",
        S::Topic,
        K::String,
        0,
        b"mutable",
        "mutable or fixed",
    ),
    entry(
        "messages_required_to_save",
        S::Topic,
        K::Uint32,
        0,
        &FIELDS_1024,
        "messages per save",
    ),
    entry(
        "size_of_messages_required_to_save",
        S::Topic,
        K::Uint64,
        0,
        &ONE_MIB,
        "bytes per save",
    ),
    entry(
        "preallocate_segments",
        S::Topic,
        K::Bool,
        0,
        &[0],
        "preallocate segment files",
    ),
    entry(
        "replication_factor",
        S::Topic,
        K::Uint32,
        0,
        &ONE,
        "copies of each partition",
    ),
    entry(
        "username",
        S::User,
        K::String,
        UPDATABLE,
        b"",
        "3..=50 bytes",
    ),
    entry(
        "status",
        S::User,
        K::String,
        UPDATABLE,
        b"",
        "active or inactive",
    ),
];

/// `DESCRIBE_OPTIONS`: the non-internal keys of `scope`.
fn option_catalog(scope: OptionScope) -> OptionDescriptors {
    let descriptors = CATALOG
        .iter()
        .filter(|entry| entry.scope == scope)
        .map(|entry| OptionDescriptor {
            key: WireName::new(entry.key).expect("catalog keys are 1..=255 bytes"),
            kind: entry.kind,
            flags: entry.flags,
            default_value: entry.default_value.to_vec(),
            description: entry.description.to_owned(),
        })
        .collect();
    OptionDescriptors(descriptors)
}

/// The dialect-independent parts are tested here; the wire layouts are proto's.
#[cfg(test)]
mod tests {
    use proto::commands::system::OptionScope;

    use super::option_catalog;

    #[test]
    fn catalog_scopes() {
        let keys = |scope| -> Vec<String> {
            option_catalog(scope)
                .0
                .iter()
                .map(|d| d.key.as_str().to_owned())
                .collect()
        };
        assert_eq!(keys(OptionScope::User), ["username", "status"]);
        assert_eq!(keys(OptionScope::Stream).len(), 5);
        assert!(keys(OptionScope::Topic).contains(&"message_expiry".to_owned()));
    }
}

//! System commands (PROTOCOL.md §2.8, §2.9, §4.1): `PING`, the one-node roster, partition
//! routes, the caller's and other clients' details, stats and the option catalog (§7.4).
//! Snapshots and the metadata change feed are not offered (`FeatureUnavailable`). The
//! option catalog, name resolution and access rules are the metadata module's.

use std::sync::Arc;

use proto::commands::Empty;
use proto::commands::Request;
use proto::commands::messages::{GetPartitionRoute, PartitionRoute};
use proto::commands::system::{
    ClientDetails, ClientGroup, ClientInfo, Clients, ClusterMetadata, ClusterNode, NodeRole,
    NodeStatus, Stats, Transport,
};
use proto::header::{Operation, RequestHeader};

use super::operation_of;
use crate::connection::{Connection, TransportKind};
use crate::data::GroupKey;
use crate::metadata::{Metadata, options, permissions};
use crate::outcome::Outcome;
use crate::procfs::ProcessNumbers;
use crate::refusal::{Missing, Refusal, Unavailable};
use crate::server::{ClientRecord, SERVER_SEMVER, SERVER_VERSION, Server};

const NR: Operation = Operation::NonReplicated;

pub(crate) fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let commit = server.commit_number();
    match request {
        Request::Ping(_) => Outcome::value(NR, Empty, commit),
        Request::CancelDeferredRequest(_) => {
            // The parked request answers for itself; the cancel gets no reply (§2.11).
            server.cancel_parked(header.client.get(), header.request.get());
            Outcome::Silent
        }
        Request::GetClusterMetadata(_) => Outcome::value(NR, cluster_metadata(server), commit),
        Request::GetPartitionRoute(route) => {
            let user_id = connection.user_id();
            match partition_route(server, &server.metadata.borrow(), user_id, &route) {
                Ok(route) => Outcome::value(NR, route, commit),
                Err(refusal) => Outcome::rejected(NR, refusal, commit),
            }
        }
        Request::GetMe(_) => {
            let record = client_record(connection);
            let details = client_details(server, connection.client_number, &record);
            Outcome::value(NR, details, commit)
        }
        Request::GetClient(get) if may_read_servers(server, connection) => {
            let record = server.node.clients.pin().get(&get.client_id).cloned();
            let details = record.map(|record| client_details(server, get.client_id, &record));
            Outcome::value(NR, details, commit)
        }
        Request::GetClients(_) if may_read_servers(server, connection) => {
            Outcome::value(NR, clients(server), commit)
        }
        Request::GetStats(_) if may_read_servers(server, connection) => {
            Outcome::value(NR, stats(server), commit)
        }
        Request::GetClient(_) | Request::GetClients(_) | Request::GetStats(_) => {
            Outcome::rejected(NR, Refusal::Forbidden, commit)
        }
        Request::DescribeOptions(describe) => {
            let defaults = server.topic_defaults();
            let dialect = connection.dialect;
            let catalog = options::option_descriptors_for(dialect, describe.scope, &defaults);
            Outcome::value(NR, catalog, commit)
        }
        Request::GetSnapshotFile(_) | Request::GetMetadataChanges(_) => {
            Outcome::rejected(NR, Refusal::Unavailable(Unavailable::Feature), commit)
        }
        _ => Outcome::refused(operation_of(header), Refusal::Malformed, commit),
    }
}

/// The roster. Outside cluster mode: this node, leader of everything. In cluster mode the
/// primary of the current view is the leader (of metadata and every partition); a node this
/// one cannot reach is `Unreachable`, one between views or recovering `Starting`.
pub(super) fn cluster_metadata(server: &Server) -> ClusterMetadata {
    let roster = &server.info.roster;
    let status = server.replication().map(|replication| &replication.status);
    let nodes = roster.nodes.iter().map(|node| {
        let (role, health) = match status {
            None => (NodeRole::Leader, NodeStatus::Healthy),
            Some(status) => {
                let role = if status.primary() == node.replica_id {
                    NodeRole::Leader
                } else {
                    NodeRole::Follower
                };
                let health = if node.replica_id == roster.replica_id {
                    if status.is_normal() {
                        NodeStatus::Healthy
                    } else {
                        NodeStatus::Starting
                    }
                } else if status.reaches(node.replica_id) {
                    NodeStatus::Healthy
                } else {
                    NodeStatus::Unreachable
                };
                (role, health)
            }
        };
        // Outside cluster mode the one node serves on the ports its listeners bound.
        let info = &server.info;
        let ports = match status {
            None => [
                info.tcp_port,
                info.quic_port,
                info.websocket_port,
                info.http_port,
            ],
            Some(_) => [
                node.tcp_port,
                node.quic_port,
                node.websocket_port,
                node.http_port,
            ],
        };
        ClusterNode {
            replica_id: node.replica_id,
            name: node.name.clone(),
            ip: node.ip.clone(),
            tcp_port: ports[0],
            quic_port: ports[1],
            websocket_port: ports[2],
            http_port: ports[3],
            role,
            status: health,
        }
    });
    ClusterMetadata {
        name: roster.cluster_name.clone(),
        nodes: nodes.collect(),
    }
}

fn partition_route(
    server: &Server,
    metadata: &Metadata,
    user_id: Option<u32>,
    request: &GetPartitionRoute,
) -> Result<PartitionRoute, Refusal> {
    // The client keeps a route only while its view grows with each new primary (§2.9), so
    // only a node in normal operation names one: between views the primary it would name
    // cannot serve yet, and a refusal there would fence the client off that view.
    let (view, primary_replica) = match server.replication() {
        None => (0, 0),
        Some(replication) if replication.status.is_normal() => {
            (replication.status.view(), replication.status.primary())
        }
        Some(_) => return Err(Refusal::NotAccepted),
    };
    // A node still applying the log may not know the stream yet: its miss is not final,
    // and the SDK takes a miss from the node its roster names Leader as final.
    let lagging = server
        .replication()
        .is_some_and(|replication| !replication.is_caught_up());
    let found = route_target(metadata, user_id, request);
    let (incarnation, partitions_count) = match found {
        Err(Refusal::Missing(_)) if lagging => return Err(Refusal::NotAccepted),
        found => found?,
    };
    Ok(PartitionRoute {
        incarnation,
        metadata_op: metadata.commit,
        view,
        partitions_count,
        primary_replica,
    })
}

/// The routed partition's incarnation and its topic's partition count, if the user may route.
fn route_target(
    metadata: &Metadata,
    user_id: Option<u32>,
    request: &GetPartitionRoute,
) -> Result<(u64, u32), Refusal> {
    let stream = metadata.stream(&request.stream_id)?;
    let topic = stream.topic(&request.topic_id)?;
    let user = user_id
        .and_then(|id| metadata.users.get(&id))
        .ok_or(Refusal::Unauthenticated)?;
    permissions::require(permissions::can_route(user, stream.id, topic.id))?;
    let partition = topic
        .partitions
        .get(&request.partition_id)
        .ok_or(Refusal::Missing(Missing::Partition))?;
    Ok((partition.incarnation, topic.partitions_count()))
}

/// `GET_CLIENT(S)` and `GET_STATS` need `read_servers` or `manage_servers` (§4.1).
fn may_read_servers(server: &Server, connection: &Connection) -> bool {
    let metadata = server.metadata.borrow();
    let user = connection.user_id().and_then(|id| metadata.users.get(&id));
    user.is_some_and(permissions::can_read_server)
}

fn client_record(connection: &Connection) -> ClientRecord {
    ClientRecord {
        address: connection.address,
        transport: connection.transport,
        user_id: connection.user_id(),
        client_id: connection.session.map(|session| session.client_id),
        liveness: Arc::clone(&connection.liveness),
    }
}

fn client_details(server: &Server, client_number: u32, record: &ClientRecord) -> ClientDetails {
    ClientDetails {
        client_id: client_number,
        user_id: record
            .user_id
            .unwrap_or(ClientInfo::USER_ID_UNAUTHENTICATED),
        transport: transport(record.transport),
        address: record.address.to_string(),
        consumer_groups: record
            .client_id
            .map(|client_id| groups_of(server, client_id))
            .unwrap_or_default(),
    }
}

/// The consumer groups `client_id` is a member of.
fn groups_of(server: &Server, client_id: u128) -> Vec<ClientGroup> {
    let metadata = server.metadata.borrow();
    let mut groups = Vec::new();
    for stream in metadata.streams.values() {
        for topic in stream.topics.values() {
            for &group_id in topic.groups.keys() {
                let key = GroupKey {
                    stream_id: stream.id,
                    topic_id: topic.id,
                    group_id,
                };
                if server
                    .data
                    .with_group(key, |group| group.is_member(client_id))
                    == Some(true)
                {
                    groups.push(ClientGroup {
                        stream_id: stream.id,
                        topic_id: topic.id,
                        group_id,
                    });
                }
            }
        }
    }
    groups
}

fn clients(server: &Server) -> Clients {
    let records = server.clients();
    let infos = records
        .iter()
        .map(|(&client_number, record)| {
            let groups = record.client_id.map_or(0, |id| groups_of(server, id).len());
            ClientInfo {
                client_id: client_number,
                user_id: record
                    .user_id
                    .unwrap_or(ClientInfo::USER_ID_UNAUTHENTICATED),
                transport: transport(record.transport),
                address: record.address.to_string(),
                consumer_groups_count: u32::try_from(groups).unwrap_or(u32::MAX),
            }
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
    let now = server.now_us();
    let cpu = server.cpu.read();
    let (free_disk_space, total_disk_space) = crate::cpu::disk_space(server.data.root());
    Stats {
        process_id: std::process::id(),
        cpu_usage: cpu.process_percent,
        total_cpu_usage: cpu.host_percent,
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
        clients_count: count(server.node.clients.len()),
        consumer_groups_count: count(groups_count),
        hostname: process.hostname,
        os_name: process.os_name,
        os_version: process.os_version,
        kernel_version: process.kernel_version,
        iggy_server_version: SERVER_VERSION.to_owned(),
        iggy_server_semver: SERVER_SEMVER,
        cache_metrics: Vec::new(),
        threads_count: process.threads_count,
        free_disk_space,
        total_disk_space,
        open_files_count: process.open_files_count,
        open_files_limit: process.open_files_limit,
    }
}

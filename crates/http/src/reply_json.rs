//! The core's typed replies as the JSON of PROTOCOL.md §9: the HTTP API's encoder of the
//! values the binary protocol encodes in `proto`.
//!
//! Timestamps and durations are µs numbers; byte sizes are plain integers (the SDK's
//! byte-size reader takes numbers as well as its human-readable strings, and a number is
//! exact); payloads and raw header bytes are standard base64.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use proto::Dialect;
use proto::batch::{Integrity, Records};
use proto::commands::groups::{ConsumerGroupDetails, ConsumerGroupResponse};
use proto::commands::messages::{PolledMessages, SendConfirmations};
use proto::commands::offsets::ConsumerOffset;
use proto::commands::streams::{StreamDetails, StreamResponse};
use proto::commands::system::{
    ClientDetails, ClientInfo, ClusterMetadata, NodeRole, NodeStatus, OptionDescriptor,
    OptionDescriptors, Stats, Transport,
};
use proto::commands::tokens::{PersonalAccessTokenInfo, RawPersonalAccessToken};
use proto::commands::topics::{PartitionResponse, TopicDetails, TopicHeader};
use proto::commands::users::{UserDetails, UserResponse, UserStatus};
use proto::header::PartitionContext;
use proto::primitives::{HeaderKind, OptionsBlock, Permissions, TlvEntry, UserHeaders};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::values::{kind_name, text};

/// A byte size.
fn size(bytes: u64) -> Value {
    json!(bytes)
}

/// The options object: explicit entries, then derived ones not already there.
fn options(explicit: &OptionsBlock, derived: &OptionsBlock) -> Value {
    let mut out = Map::new();
    let entries = explicit
        .0
        .iter()
        .map(|entry| (entry, true))
        .chain(derived.0.iter().map(|entry| (entry, false)));
    for ((key, value), explicit) in entries {
        if out.contains_key(key.as_str()) {
            continue;
        }
        let kind = HeaderKind::from_u8(value.kind).map_or("raw", kind_name);
        out.insert(
            key.as_str().to_owned(),
            json!({"value": text(value), "kind": kind, "explicit": explicit}),
        );
    }
    Value::Object(out)
}

fn context(context: PartitionContext) -> Value {
    json!({
        "incarnation": context.incarnation,
        "owner_generation": context.owner_generation,
        "metadata_op": context.metadata_op,
    })
}

pub fn stream(stream: &StreamResponse) -> Value {
    json!({
        "id": stream.id,
        "created_at": stream.created_at_micros,
        "name": stream.name.as_str(),
        "size": size(stream.size_bytes),
        "messages_count": stream.messages_count,
        "topics_count": stream.topics_count,
        "options": options(&stream.options, &stream.derived_options),
    })
}

pub fn stream_details(details: &StreamDetails) -> Value {
    let mut value = stream(&details.stream);
    value["topics"] = details.topics.iter().map(topic).collect();
    value
}

pub fn topic(topic: &TopicHeader) -> Value {
    let option = |key: &str| {
        topic
            .options
            .get(key)
            .or_else(|| topic.derived_options.get(key))
    };
    json!({
        "id": topic.id,
        "created_at": topic.created_at_micros,
        "name": topic.name.as_str(),
        "size": size(topic.size_bytes),
        // Not in §9's shape, whose SDK reads them from `options` and skips these keys: the
        // SDK of Iggy's own 0.9.0-edge tools (its iggy-bench over HTTP) requires them, as
        // numbers (µs, bytes; 0 = the server's default, u64::MAX = never / unlimited) and
        // the algorithm's name.
        "message_expiry": option("message_expiry")
            .and_then(TlvEntry::as_u64)
            .unwrap_or(topic.message_expiry_micros),
        "compression_algorithm": option("compression_algorithm")
            .and_then(compression_name)
            .unwrap_or(if topic.compression == 2 { "gzip" } else { "none" }),
        "max_topic_size": option("max_topic_size")
            .and_then(TlvEntry::as_u64)
            .unwrap_or(topic.max_topic_size_bytes),
        "messages_count": topic.messages_count,
        "partitions_count": topic.partitions_count,
        "options": options(&topic.options, &topic.derived_options),
    })
}

/// The algorithm's name from its option, which a client may have sent as the name or as
/// its code (Uint8 1 = none, 2 = gzip), and which is stored as sent.
fn compression_name(value: &TlvEntry) -> Option<&str> {
    if let Some(name) = value.as_str() {
        return Some(name);
    }
    match (HeaderKind::from_u8(value.kind)?, value.data.as_bytes()) {
        (HeaderKind::Uint8, [1]) => Some("none"),
        (HeaderKind::Uint8, [2]) => Some("gzip"),
        _ => None,
    }
}

pub fn topic_details(details: &TopicDetails) -> Value {
    let mut value = topic(&details.topic);
    value["partitions"] = details.partitions.iter().map(partition).collect();
    value
}

fn partition(partition: &PartitionResponse) -> Value {
    json!({
        "id": partition.id,
        "created_at": partition.created_at_micros,
        "segments_count": partition.segments_count,
        "current_offset": partition.current_offset,
        "size": size(partition.size_bytes),
        "messages_count": partition.messages_count,
        "context": context(partition.context),
        "members": partition.members.as_slice(),
        "in_sync_members": partition.in_sync_members.as_slice(),
    })
}

pub fn group(group: &ConsumerGroupResponse) -> Value {
    json!({
        "id": group.id,
        "name": group.name.as_str(),
        "partitions_count": group.partitions_count,
        "members_count": group.members_count,
    })
}

pub fn group_details(details: &ConsumerGroupDetails) -> Value {
    let mut value = group(&details.group);
    value["members"] = details
        .members
        .iter()
        .map(|member| {
            json!({
                "id": member.id,
                "partitions_count": member.partition_ids.len(),
                "partitions": member.partition_ids,
            })
        })
        .collect();
    value
}

pub fn offset(offset: &ConsumerOffset) -> Value {
    json!({
        "partition_id": offset.partition_id,
        "current_offset": offset.current_offset,
        "stored_offset": offset.stored_offset,
    })
}

fn status(status: UserStatus) -> &'static str {
    match status {
        UserStatus::Active => "active",
        UserStatus::Inactive => "inactive",
    }
}

pub fn user(user: &UserResponse) -> Value {
    json!({
        "id": user.id,
        "created_at": user.created_at,
        "status": status(user.status),
        "username": user.username.as_str(),
        "options": options(&user.options, &user.derived_options),
    })
}

pub fn user_details(details: &UserDetails) -> Value {
    let mut value = user(&details.user);
    value["permissions"] = details
        .permissions
        .as_ref()
        .map_or(Value::Null, permissions);
    value
}

pub fn permissions(permissions: &Permissions) -> Value {
    let global = &permissions.global;
    let streams: Map<String, Value> = permissions
        .streams
        .iter()
        .map(|(id, stream)| {
            let topics: Map<String, Value> = stream
                .topics
                .iter()
                .map(|(id, topic)| {
                    let value = json!({
                        "manage_topic": topic.manage_topic,
                        "read_topic": topic.read_topic,
                        "poll_messages": topic.poll_messages,
                        "send_messages": topic.send_messages,
                    });
                    (id.to_string(), value)
                })
                .collect();
            let value = json!({
                "manage_stream": stream.manage_stream,
                "read_stream": stream.read_stream,
                "manage_topics": stream.manage_topics,
                "read_topics": stream.read_topics,
                "poll_messages": stream.poll_messages,
                "send_messages": stream.send_messages,
                "topics": if topics.is_empty() { Value::Null } else { Value::Object(topics) },
            });
            (id.to_string(), value)
        })
        .collect();
    json!({
        "global": {
            "manage_servers": global.manage_servers,
            "read_servers": global.read_servers,
            "manage_users": global.manage_users,
            "read_users": global.read_users,
            "manage_streams": global.manage_streams,
            "read_streams": global.read_streams,
            "manage_topics": global.manage_topics,
            "read_topics": global.read_topics,
            "poll_messages": global.poll_messages,
            "send_messages": global.send_messages,
        },
        "streams": if streams.is_empty() { Value::Null } else { Value::Object(streams) },
    })
}

pub fn token_info(token: &PersonalAccessTokenInfo) -> Value {
    // 0 is "never expires" on the wire.
    let expiry = (token.expiry_at != 0).then_some(token.expiry_at);
    json!({"name": token.name.as_str(), "expiry_at": expiry})
}

pub fn raw_token(token: &RawPersonalAccessToken) -> Value {
    json!({"token": token.token.expose()})
}

fn transport(transport: Transport) -> &'static str {
    match transport {
        Transport::Tcp => "TCP",
        Transport::Quic => "QUIC",
        Transport::Http => "HTTP",
        Transport::WebSocket => "WebSocket",
    }
}

fn user_id(user_id: u32) -> Value {
    if user_id == ClientInfo::USER_ID_UNAUTHENTICATED {
        Value::Null
    } else {
        json!(user_id)
    }
}

pub fn client(client: &ClientInfo) -> Value {
    json!({
        "client_id": client.client_id,
        "user_id": user_id(client.user_id),
        "address": client.address,
        "transport": transport(client.transport),
        "consumer_groups_count": client.consumer_groups_count,
    })
}

pub fn client_details(client: &ClientDetails) -> Value {
    let groups: Vec<Value> = client
        .consumer_groups
        .iter()
        .map(|group| {
            json!({
                "stream_id": group.stream_id,
                "topic_id": group.topic_id,
                "group_id": group.group_id,
            })
        })
        .collect();
    json!({
        "client_id": client.client_id,
        "user_id": user_id(client.user_id),
        "address": client.address,
        "transport": transport(client.transport),
        "consumer_groups_count": groups.len(),
        "consumer_groups": groups,
    })
}

pub fn stats(stats: &Stats) -> Value {
    let cache: Map<String, Value> = stats
        .cache_metrics
        .iter()
        .map(|metric| {
            let key = format!(
                "{}-{}-{}",
                metric.stream_id, metric.topic_id, metric.partition_id
            );
            let value = json!({
                "hits": metric.hits,
                "misses": metric.misses,
                "hit_ratio": metric.hit_ratio,
            });
            (key, value)
        })
        .collect();
    let semver = (stats.iggy_server_semver != 0).then_some(stats.iggy_server_semver);
    json!({
        "process_id": stats.process_id,
        "cpu_usage": stats.cpu_usage,
        "total_cpu_usage": stats.total_cpu_usage,
        "memory_usage": size(stats.memory_usage),
        "total_memory": size(stats.total_memory),
        "available_memory": size(stats.available_memory),
        "run_time": stats.run_time,
        "start_time": stats.start_time,
        "read_bytes": size(stats.read_bytes),
        "written_bytes": size(stats.written_bytes),
        "messages_size_bytes": size(stats.messages_size_bytes),
        "streams_count": stats.streams_count,
        "topics_count": stats.topics_count,
        "partitions_count": stats.partitions_count,
        "segments_count": stats.segments_count,
        "messages_count": stats.messages_count,
        "clients_count": stats.clients_count,
        "consumer_groups_count": stats.consumer_groups_count,
        "hostname": stats.hostname,
        "os_name": stats.os_name,
        "os_version": stats.os_version,
        "kernel_version": stats.kernel_version,
        "iggy_server_version": stats.iggy_server_version,
        "iggy_server_semver": semver,
        "cache_metrics": cache,
        "threads_count": stats.threads_count,
        "free_disk_space": size(stats.free_disk_space),
        "total_disk_space": size(stats.total_disk_space),
        "open_files_count": stats.open_files_count,
        "open_files_limit": stats.open_files_limit,
    })
}

pub fn cluster(metadata: &ClusterMetadata) -> Value {
    let nodes: Vec<Value> = metadata
        .nodes
        .iter()
        .map(|node| {
            let role = match node.role {
                NodeRole::Leader => "leader",
                NodeRole::Follower => "follower",
            };
            let status = match node.status {
                NodeStatus::Healthy => "healthy",
                NodeStatus::Starting => "starting",
                NodeStatus::Stopping => "stopping",
                NodeStatus::Unreachable => "unreachable",
                NodeStatus::Maintenance => "maintenance",
            };
            json!({
                "replica_id": node.replica_id,
                "name": node.name,
                "ip": node.ip,
                "endpoints": {
                    "tcp": node.tcp_port,
                    "quic": node.quic_port,
                    "http": node.http_port,
                    "websocket": node.websocket_port,
                },
                "role": role,
                "status": status,
            })
        })
        .collect();
    json!({"name": metadata.name, "nodes": nodes})
}

pub fn option_specs(descriptors: &OptionDescriptors) -> Value {
    let flag = |descriptor: &OptionDescriptor, bit: u8| descriptor.flags & bit != 0;
    descriptors
        .0
        .iter()
        .map(|descriptor| {
            json!({
                "key": descriptor.key.as_str(),
                "kind": kind_name(descriptor.kind),
                "updatable": flag(descriptor, OptionDescriptor::FLAG_UPDATABLE),
                "resettable": flag(descriptor, OptionDescriptor::FLAG_RESETTABLE),
                "secret": flag(descriptor, OptionDescriptor::FLAG_SECRET),
                "read_only": flag(descriptor, OptionDescriptor::FLAG_READ_ONLY),
                "critical": flag(descriptor, OptionDescriptor::FLAG_CRITICAL),
                "default_value": descriptor.default_value,
                "description": descriptor.description,
            })
        })
        .collect()
}

pub fn confirmations(confirmations: &SendConfirmations) -> Value {
    let list: Vec<Value> = confirmations
        .0
        .iter()
        .map(|confirmation| {
            json!({
                "stream_id": confirmation.stream_id,
                "topic_id": confirmation.topic_id,
                "partition_id": confirmation.partition_id,
                "base_offset": confirmation.base_offset,
            })
        })
        .collect();
    json!({"confirmations": list})
}

/// The 64-byte header form of a polled message (§5.3). Typed, not a `Value`: the id is a
/// `u128`, which a `Value` cannot hold but the serializer writes as a plain integer.
#[derive(Serialize)]
struct PolledHeader {
    checksum: u64,
    id: u128,
    offset: u64,
    timestamp: u64,
    origin_timestamp: u64,
    user_headers_length: u32,
    payload_length: u32,
    reserved: u64,
}

#[derive(Serialize)]
struct PolledMessage<'m> {
    header: PolledHeader,
    payload: Base64<'m>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_headers: Option<Value>,
}

/// Bytes written as standard base64 straight into the output, without a `String` of their
/// own.
struct Base64<'b>(&'b [u8]);

impl Serialize for Base64<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&base64::display::Base64Display::new(self.0, &STANDARD))
    }
}

#[derive(Serialize)]
struct Polled<'p> {
    context: Value,
    partition_id: u32,
    current_offset: u64,
    count: usize,
    messages: PolledList<'p>,
}

/// The messages of a poll's records, encoded one at a time as they are serialized: a reply
/// holds its records and its JSON, never a copy of every message in between.
struct PolledList<'p>(&'p [u8]);

impl PolledList<'_> {
    fn records(&self) -> Records<'_> {
        Records::new(self.0, Dialect::V0_12_2, Integrity::LayoutOnly, 0)
    }

    fn count(&self) -> Result<usize, ApiError> {
        let mut count = 0_usize;
        for batch in self.records() {
            let batch =
                batch.map_err(|error| ApiError::Internal(format!("polled batch: {error}")))?;
            count = count.saturating_add(batch.messages().count());
        }
        Ok(count)
    }
}

impl Serialize for PolledList<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut list = serializer.serialize_seq(None)?;
        // `count` walked the same records first, so a batch that fails here failed there.
        for batch in self.records() {
            let batch =
                batch.map_err(|error| S::Error::custom(format!("polled batch: {error}")))?;
            let head = batch.header();
            for message in batch.messages() {
                let frame = message.header;
                let user_headers = if message.user_headers.is_empty() {
                    None
                } else {
                    Some(user_headers(message.user_headers).map_err(S::Error::custom)?)
                };
                list.serialize_element(&PolledMessage {
                    header: PolledHeader {
                        checksum: frame.checksum.get(),
                        id: frame.id.get(),
                        offset: head.base_offset.get() + u64::from(frame.offset_delta.get()),
                        timestamp: head.base_timestamp.get(),
                        // Both are the client's: a sum past u64 is shown as its end, not
                        // wrapped into a small time.
                        origin_timestamp: head
                            .origin_timestamp
                            .get()
                            .saturating_add(u64::from(frame.timestamp_delta.get())),
                        user_headers_length: frame.user_headers_length.get(),
                        payload_length: frame.payload_length.get(),
                        reserved: 0,
                    },
                    payload: Base64(message.payload),
                    user_headers,
                })?;
            }
        }
        list.end()
    }
}

/// A poll reply with every message, as JSON bytes.
pub fn polled(polled: &PolledMessages<'_>) -> Result<Vec<u8>, ApiError> {
    let messages = PolledList(polled.records);
    let reply = Polled {
        context: context(polled.context),
        partition_id: polled.partition_id,
        current_offset: polled.current_offset,
        count: messages.count()?,
        messages,
    };
    // Sized for the usual JSON growth of records (base64 payloads, spelled-out headers), so
    // the buffer rarely doubles while it is written.
    let mut json = Vec::with_capacity(polled.records.len().saturating_mul(2).saturating_add(256));
    serde_json::to_writer(&mut json, &reply)
        .map_err(|error| ApiError::Internal(error.to_string()))?;
    Ok(json)
}

fn user_headers(block: &[u8]) -> Result<Value, ApiError> {
    let headers = UserHeaders::decode(block)
        .map_err(|error| ApiError::Internal(format!("user headers: {error}")))?;
    let entry = |entry: &TlvEntry| {
        let kind = HeaderKind::from_u8(entry.kind).map_or("raw", kind_name);
        json!({"kind": kind, "value": STANDARD.encode(entry.data.as_bytes())})
    };
    Ok(headers
        .0
        .iter()
        .map(|(key, value)| json!({"key": entry(key), "value": entry(value)}))
        .collect())
}

#[cfg(test)]
mod tests {
    use proto::codec::WireName;
    use proto::commands::topics::TopicHeader;
    use proto::primitives::{OptionsBlock, TlvEntry};

    use super::topic;

    fn entry(key: &str, value: TlvEntry) -> (WireName, TlvEntry) {
        (WireName::new(key).unwrap(), value)
    }

    #[test]
    fn a_topic_names_expiry_compression_and_size_at_its_top_level_too() {
        let header = TopicHeader {
            id: 3,
            created_at_micros: 7,
            partitions_count: 1,
            size_bytes: 0,
            messages_count: 0,
            name: WireName::new("t").unwrap(),
            options: OptionsBlock(vec![entry("message_expiry", TlvEntry::uint64(60_000_000))]),
            derived_options: OptionsBlock(vec![
                entry("message_expiry", TlvEntry::uint64(u64::MAX)),
                entry("compression_algorithm", TlvEntry::string("gzip").unwrap()),
                entry("max_topic_size", TlvEntry::uint64(u64::MAX)),
            ]),
            message_expiry_micros: 0,
            compression: 0,
            max_topic_size_bytes: 0,
        };
        let json = topic(&header);
        // The explicit value wins over the derived one, as in `options`.
        assert_eq!(json["message_expiry"], 60_000_000_u64);
        assert_eq!(json["compression_algorithm"], "gzip");
        assert_eq!(json["max_topic_size"], u64::MAX);
        assert_eq!(json["options"]["message_expiry"]["value"], "60000000");
        // Sent as its code, the algorithm is still named.
        let mut coded = header;
        coded.options = OptionsBlock(vec![entry(
            "compression_algorithm",
            TlvEntry::new(proto::primitives::HeaderKind::Uint8, &[2]).unwrap(),
        )]);
        assert_eq!(topic(&coded)["compression_algorithm"], "gzip");
    }
}

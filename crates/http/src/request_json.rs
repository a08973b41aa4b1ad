//! JSON request bodies and queries (PROTOCOL.md §8.3–§9) as the binary requests of `proto`.
//!
//! Every body is read into a typed struct first (an unknown field is ignored, a missing or
//! mistyped one is a 400 naming it); the conversions then apply the binary protocol's own
//! bounds (name lengths, payload sizes) through `proto`'s constructors.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use proto::batch::{Batch, Integrity, OutgoingMessage, encode_batch};
use proto::codec::{Codec, ShortBytes, WireName, Writer};
use proto::commands::poll_selector::PollSelector;
use proto::commands::session::Secret;
use proto::primitives::{
    Consumer, ConsumerKind, GlobalPermissions, HeaderKind, Identifier, OptionalPartition,
    Partitioning, Permissions, PollingKind, PollingStrategy, StreamPermissions, TlvEntry,
    TopicPermissions, UserHeaders,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;
use crate::route::{Target, identifier};
use crate::values::kind_of;

/// `body` as a `T`, or a 400 saying what is wrong with it.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| ApiError::invalid(error.to_string(), "body"))
}

pub fn name(text: &str, field: &'static str) -> Result<WireName, ApiError> {
    WireName::new(text)
        .ok_or_else(|| ApiError::invalid(format!("{field} is 1 to 255 bytes"), field))
}

pub fn secret(text: &str, field: &'static str) -> Result<Secret, ApiError> {
    Secret::new(text).ok_or_else(|| ApiError::invalid(format!("{field} is 1 to 255 bytes"), field))
}

#[derive(Debug, Deserialize)]
pub struct LoginBody {
    pub username: String,
    pub password: String,
}

#[derive(Debug, Deserialize)]
pub struct TokenBody {
    pub token: String,
}

#[derive(Debug, Deserialize)]
pub struct NameBody {
    pub name: String,
}

/// A create body with options (`streams`, `topics`, `users`).
#[derive(Debug, Deserialize)]
pub struct CreateStreamBody {
    pub name: String,
    #[serde(default)]
    pub options: Option<BTreeMap<String, Value>>,
}

#[derive(Debug, Deserialize)]
pub struct CreateTopicBody {
    pub name: String,
    pub partitions_count: u32,
    #[serde(default)]
    pub options: Option<BTreeMap<String, Value>>,
}

#[derive(Debug, Deserialize)]
pub struct PartitionsBody {
    pub partitions_count: u32,
}

#[derive(Debug, Deserialize)]
pub struct CreateUserBody {
    pub username: String,
    pub password: String,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub permissions: Option<PermissionsBody>,
    #[serde(default)]
    pub options: Option<BTreeMap<String, Value>>,
}

#[derive(Debug, Deserialize)]
pub struct ChangePasswordBody {
    pub current_password: String,
    pub new_password: String,
}

#[derive(Debug, Deserialize)]
pub struct UpdatePermissionsBody {
    #[serde(default)]
    pub permissions: Option<PermissionsBody>,
}

#[derive(Debug, Deserialize)]
pub struct CreateTokenBody {
    pub name: String,
    #[serde(default)]
    pub expiry: u64,
}

#[derive(Debug, Deserialize)]
pub struct StoreOffsetBody {
    #[serde(default)]
    pub consumer_kind: Option<String>,
    pub consumer_id: Value,
    #[serde(default)]
    pub partition_id: Option<u32>,
    pub offset: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct GlobalBody {
    pub manage_servers: bool,
    pub read_servers: bool,
    pub manage_users: bool,
    pub read_users: bool,
    pub manage_streams: bool,
    pub read_streams: bool,
    pub manage_topics: bool,
    pub read_topics: bool,
    pub poll_messages: bool,
    pub send_messages: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TopicPermissionsBody {
    pub manage_topic: bool,
    pub read_topic: bool,
    pub poll_messages: bool,
    pub send_messages: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamPermissionsBody {
    pub manage_stream: bool,
    pub read_stream: bool,
    pub manage_topics: bool,
    pub read_topics: bool,
    pub poll_messages: bool,
    pub send_messages: bool,
    pub topics: Option<BTreeMap<String, TopicPermissionsBody>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PermissionsBody {
    pub global: GlobalBody,
    pub streams: Option<BTreeMap<String, StreamPermissionsBody>>,
}

fn numeric_key(key: &str) -> Result<u32, ApiError> {
    key.parse().map_err(|_e| {
        ApiError::invalid(
            format!("permission key {key:?} is not an id"),
            "permissions",
        )
    })
}

impl PermissionsBody {
    pub fn into_permissions(self) -> Result<Permissions, ApiError> {
        let g = self.global;
        let global = GlobalPermissions {
            manage_servers: g.manage_servers,
            read_servers: g.read_servers,
            manage_users: g.manage_users,
            read_users: g.read_users,
            manage_streams: g.manage_streams,
            read_streams: g.read_streams,
            manage_topics: g.manage_topics,
            read_topics: g.read_topics,
            poll_messages: g.poll_messages,
            send_messages: g.send_messages,
        };
        let mut streams = BTreeMap::new();
        for (key, stream) in self.streams.unwrap_or_default() {
            let mut topics = BTreeMap::new();
            for (key, topic) in stream.topics.unwrap_or_default() {
                let permissions = TopicPermissions {
                    manage_topic: topic.manage_topic,
                    read_topic: topic.read_topic,
                    poll_messages: topic.poll_messages,
                    send_messages: topic.send_messages,
                };
                topics.insert(numeric_key(&key)?, permissions);
            }
            let permissions = StreamPermissions {
                manage_stream: stream.manage_stream,
                read_stream: stream.read_stream,
                manage_topics: stream.manage_topics,
                read_topics: stream.read_topics,
                poll_messages: stream.poll_messages,
                send_messages: stream.send_messages,
                topics,
            };
            streams.insert(numeric_key(&key)?, permissions);
        }
        Ok(Permissions { global, streams })
    }
}

/// A consumer from its JSON kind and id (the id's string form is an Identifier).
pub fn consumer(kind: Option<&str>, id: &Value) -> Result<Consumer, ApiError> {
    let kind = match kind.unwrap_or("consumer") {
        "consumer" => ConsumerKind::Consumer,
        "consumer_group" => ConsumerKind::ConsumerGroup,
        "external_group" => ConsumerKind::ExternalGroup,
        other => {
            return Err(ApiError::invalid(
                format!("unknown consumer kind {other:?}"),
                "consumer_kind",
            ));
        }
    };
    let id = match id {
        Value::String(text) => identifier(text)?,
        Value::Number(number) => number
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Identifier::Numeric)
            .ok_or_else(|| ApiError::invalid("consumer_id out of range", "consumer_id"))?,
        _ => {
            return Err(ApiError::invalid(
                "consumer_id must be a string",
                "consumer_id",
            ));
        }
    };
    Ok(Consumer { kind, id })
}

fn query_number<T: std::str::FromStr>(
    target: &Target,
    key: &'static str,
) -> Result<Option<T>, ApiError> {
    target
        .query(key)
        .filter(|value| !value.is_empty())
        .map(|value| {
            value
                .parse()
                .map_err(|_e| ApiError::invalid(format!("{key} must be a number"), key))
        })
        .transpose()
}

/// The consumer and partition of an offset route's query.
pub fn offset_query(
    target: &Target,
    consumer_id: Option<&str>,
) -> Result<(Consumer, OptionalPartition), ApiError> {
    let id = consumer_id
        .or_else(|| target.query("consumer_id"))
        .ok_or_else(|| ApiError::invalid("consumer_id is required", "consumer_id"))?;
    let consumer = consumer(target.query("consumer_kind"), &Value::String(id.to_owned()))?;
    let partition = OptionalPartition(query_number(target, "partition_id")?);
    Ok((consumer, partition))
}

/// The deferred-poll parameters of a poll query (§4.4.3); absent ones take the SDK's
/// defaults (no wait, one message, 1 MiB, a 10 s budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deferral {
    pub wait_us: u64,
    pub min_count: u32,
    pub max_bytes: u32,
    pub request_timeout_us: u64,
}

/// A poll query as the selector of a poll.
pub fn poll_query(
    target: &Target,
    stream_id: Identifier,
    topic_id: Identifier,
) -> Result<(PollSelector, Deferral), ApiError> {
    let kind = match target.query("kind").unwrap_or("next") {
        "offset" => PollingKind::Offset,
        "timestamp" => PollingKind::Timestamp,
        "first" => PollingKind::First,
        "last" => PollingKind::Last,
        "next" => PollingKind::Next,
        other => {
            return Err(ApiError::invalid(
                format!("unknown polling kind {other:?}"),
                "kind",
            ));
        }
    };
    let auto_commit = match target.query("auto_commit").unwrap_or("false") {
        "true" => true,
        "false" => false,
        _ => {
            return Err(ApiError::invalid(
                "auto_commit must be true or false",
                "auto_commit",
            ));
        }
    };
    let (consumer, partition) = offset_query(target, None)?;
    let selector = PollSelector {
        consumer,
        stream_id,
        topic_id,
        partition,
        strategy: PollingStrategy {
            kind,
            value: query_number(target, "value")?.unwrap_or(0),
        },
        count: query_number(target, "count")?.unwrap_or(10),
        auto_commit,
    };
    let deferral = Deferral {
        wait_us: query_number(target, "wait_us")?.unwrap_or(0),
        min_count: query_number(target, "min_count")?.unwrap_or(1),
        max_bytes: query_number(target, "max_bytes")?.unwrap_or(1 << 20),
        request_timeout_us: query_number(target, "request_timeout_us")?.unwrap_or(10_000_000),
    };
    Ok((selector, deferral))
}

#[derive(Debug, Deserialize)]
pub struct PartitioningBody {
    pub kind: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Deserialize)]
pub struct HeaderValueBody {
    pub kind: String,
    pub value: String,
}

#[derive(Debug, Deserialize)]
pub struct HeaderBody {
    pub key: HeaderValueBody,
    pub value: HeaderValueBody,
}

#[derive(Debug, Deserialize)]
pub struct MessageBody {
    /// A number, a decimal string or a 32-hex-digit UUID; 0 or absent for "server assigns".
    #[serde(default)]
    pub id: Value,
    pub payload: String,
    /// A list of key/value entries, or base64 of an encoded header block, or null.
    #[serde(default)]
    pub user_headers: Value,
}

#[derive(Debug, Deserialize)]
pub struct SendBody {
    pub partitioning: PartitioningBody,
    pub messages: Vec<MessageBody>,
}

fn base64(text: &str, field: &'static str) -> Result<Vec<u8>, ApiError> {
    STANDARD
        .decode(text)
        .map_err(|_e| ApiError::invalid(format!("{field} is not base64"), field))
}

fn partitioning(body: &PartitioningBody) -> Result<Partitioning, ApiError> {
    let value = base64(&body.value, "partitioning.value")?;
    let bad = || ApiError::invalid("bad partitioning value", "partitioning");
    match body.kind.as_str() {
        "balanced" => Ok(Partitioning::Balanced),
        "partition_id" => {
            let bytes: [u8; 4] = value.as_slice().try_into().map_err(|_e| bad())?;
            Ok(Partitioning::PartitionId(u32::from_le_bytes(bytes)))
        }
        "messages_key" => ShortBytes::new(value)
            .map(Partitioning::MessagesKey)
            .ok_or_else(bad),
        other => Err(ApiError::invalid(
            format!("unknown partitioning {other:?}"),
            "partitioning",
        )),
    }
}

fn header_entry(body: &HeaderValueBody) -> Result<TlvEntry, ApiError> {
    let kind = kind_of(&body.kind).ok_or_else(|| {
        ApiError::invalid(
            format!("unknown header kind {:?}", body.kind),
            "user_headers",
        )
    })?;
    let data = base64(&body.value, "user_headers")?;
    let entry = TlvEntry::new(kind, &data)
        .ok_or_else(|| ApiError::invalid("a header is 1 to 255 bytes", "user_headers"))?;
    let fits = kind.fixed_size().is_none_or(|size| size == data.len()) || kind == HeaderKind::Raw;
    if fits {
        Ok(entry)
    } else {
        Err(ApiError::invalid(
            "a header value does not fit its kind",
            "user_headers",
        ))
    }
}

/// A send body as the binary request body of `SEND_MESSAGES`; ids of 0 get random ones and
/// every message gets `now_us` as its origin timestamp.
pub fn send_request(
    body: &SendBody,
    stream_id: &Identifier,
    topic_id: &Identifier,
    now_us: u64,
) -> Result<Vec<u8>, ApiError> {
    let partitioning = partitioning(&body.partitioning)?;
    let mut payloads = Vec::with_capacity(body.messages.len());
    for message in &body.messages {
        let payload = base64(&message.payload, "payload")?;
        let headers = user_headers(&message.user_headers)?;
        let id = match message_id(&message.id)? {
            0 => random_id()?,
            id => id,
        };
        payloads.push((id, payload, headers));
    }
    let outgoing: Vec<OutgoingMessage<'_>> = payloads
        .iter()
        .map(|(id, payload, headers)| OutgoingMessage {
            id: *id,
            origin_timestamp: now_us,
            payload,
            user_headers: headers,
        })
        .collect();
    let mut batch = Vec::new();
    encode_batch(&outgoing, None, &mut batch)
        .map_err(|error| ApiError::invalid(error.to_string(), "messages"))?;
    let batch = Batch::parse(&batch, proto::Dialect::V0_12_2, Integrity::LayoutOnly, 0)
        .map_err(|error| ApiError::Internal(format!("built batch: {error}")))?;
    let request = proto::commands::messages::SendMessages {
        stream_id: stream_id.clone(),
        topic_id: topic_id.clone(),
        partitioning,
        batch,
        batch_offset: 0,
    };
    let mut out = Vec::new();
    request.encode(&mut Writer::new(&mut out, proto::Dialect::V0_12_2));
    Ok(out)
}

/// The encoded user-headers block of a message (empty for none).
fn user_headers(value: &Value) -> Result<Vec<u8>, ApiError> {
    let mut block = Vec::new();
    match value {
        Value::Null => {}
        Value::String(encoded) => {
            block = base64(encoded, "user_headers")?;
            UserHeaders::decode(&block).map_err(|error| {
                ApiError::invalid(format!("user headers: {error}"), "user_headers")
            })?;
        }
        Value::Array(_) => {
            let list: Vec<HeaderBody> = serde_json::from_value(value.clone())
                .map_err(|error| ApiError::invalid(error.to_string(), "user_headers"))?;
            let pairs = list
                .iter()
                .map(|header| Ok((header_entry(&header.key)?, header_entry(&header.value)?)))
                .collect::<Result<Vec<_>, ApiError>>()?;
            UserHeaders(pairs).encode_into(&mut block);
        }
        _ => {
            return Err(ApiError::invalid(
                "user_headers must be a list",
                "user_headers",
            ));
        }
    }
    Ok(block)
}

/// A message id from a JSON number, a decimal string or a UUID's 32 hex digits.
fn message_id(value: &Value) -> Result<u128, ApiError> {
    let bad = || ApiError::invalid("a message id is a number up to 2^128 - 1", "id");
    match value {
        Value::Null => Ok(0),
        Value::Number(number) => {
            // Up to u64::MAX (what the SDK sends as a number); serde_json reads a larger
            // integer as a float, whose text does not parse here: such ids come as strings.
            number.to_string().parse().map_err(|_e| bad())
        }
        Value::String(text) => {
            let hex: String = text.chars().filter(|c| *c != '-').collect();
            text.parse()
                .or_else(|_e| {
                    if hex.len() == 32 {
                        u128::from_str_radix(&hex, 16)
                    } else {
                        text.parse()
                    }
                })
                .map_err(|_e| bad())
        }
        _ => Err(bad()),
    }
}

fn random_id() -> Result<u128, ApiError> {
    let mut bytes = [0_u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| ApiError::Internal(error.to_string()))?;
    Ok(u128::from_le_bytes(bytes).max(1))
}

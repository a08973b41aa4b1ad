//! `--transport http` and `https`: the bench's requests over the HTTP API (PROTOCOL.md §8).
//!
//! The bench client speaks frames; this link turns each request frame into the HTTP request
//! an HTTP client sends for it (JSON, base64 payloads, a bearer token from the login) and
//! each response back into the reply frame the client reads, so every scenario measures
//! what an HTTP client pays: JSON and base64 both ways, one request and response per call,
//! keep-alive. A poll's messages are decoded from JSON and re-encoded as a batch record, as
//! a client would build its messages. Commands the API does not have (joining a group) fail
//! with an error naming them.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use proto::batch::{OutgoingMessage, encode_batch};
use proto::codec::{Codec, WireName, Writer, decode_exact};
use proto::codes::CommandCode;
use proto::commands::Request;
use proto::commands::groups::{ConsumerGroupDetails, ConsumerGroupResponse};
use proto::commands::messages::{PartitionRoute, PolledMessages};
use proto::commands::poll_selector::PollSelector;
use proto::commands::session::LoginReply;
use proto::commands::streams::{StreamDetails, StreamResponse};
use proto::commands::topics::{TopicDetails, TopicHeader};
use proto::dialect::ProtocolVersion;
use proto::header::{Operation, PartitionContext, ReplyHeader, RequestHeader};
use proto::primitives::{ConsumerKind, Identifier, OptionsBlock, Partitioning, PollingKind};
use proto::result::ResultSection;
use proto::{Dialect, status::ErrorCode};
use serde_json::{Value, json};
use zerocopy::{FromBytes, IntoBytes};

/// A byte stream under HTTP: plain TCP or TLS.
pub(crate) trait Stream: Read + Write + Send {}

impl<S: Read + Write + Send> Stream for S {}

/// One keep-alive HTTP connection and the reply frames made from its responses.
pub(crate) struct HttpLink {
    stream: Box<dyn Stream>,
    host: String,
    token: Option<String>,
    replies: VecDeque<Vec<u8>>,
}

/// A response: status and body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> io::Result<Value> {
        serde_json::from_slice(&self.body).map_err(io::Error::other)
    }

    /// The wire code of an error response (its body's `id`), or 0 for success.
    fn code(&self) -> u32 {
        if (200..300).contains(&self.status) {
            return 0;
        }
        let id = self.json().ok().and_then(|body| body["id"].as_u64());
        id.and_then(|id| u32::try_from(id).ok())
            .unwrap_or(ErrorCode::Error.as_u32())
    }
}

/// A reply: the status and the payload (before any result section).
type Translated = (u32, Vec<u8>);

/// The reply of an error response: its code and no payload.
fn refused(answer: &Answer) -> Option<Translated> {
    let code = answer.code();
    (code != 0).then(|| (code, Vec::new()))
}

fn encoded<'a>(value: &impl Codec<'a>) -> Vec<u8> {
    let mut out = Vec::new();
    value.encode(&mut Writer::new(&mut out, Dialect::V0_12_2));
    out
}

fn segment(identifier: &Identifier) -> String {
    match identifier {
        Identifier::Numeric(id) => id.to_string(),
        Identifier::Name(name) => name
            .as_str()
            .bytes()
            .map(|byte| {
                if byte.is_ascii_alphanumeric() {
                    char::from(byte).to_string()
                } else {
                    format!("%{byte:02X}")
                }
            })
            .collect(),
    }
}

fn name(text: &str) -> io::Result<WireName> {
    WireName::new(text).ok_or_else(|| io::Error::other("a name the protocol cannot carry"))
}

impl HttpLink {
    pub(crate) fn new(stream: Box<dyn Stream>, address: SocketAddr) -> Self {
        Self {
            stream,
            host: address.to_string(),
            token: None,
            replies: VecDeque::new(),
        }
    }

    /// Answers the request frame `head` + `body` over HTTP; its reply frame is queued.
    pub(crate) fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        let header = RequestHeader::read_from_bytes(head)
            .map_err(|_size| io::Error::other("a request header of 256 bytes"))?;
        let operation = header
            .operation()
            .ok_or_else(|| io::Error::other("an unknown operation"))?;
        let code = header
            .code()
            .and_then(CommandCode::from_u32)
            .ok_or_else(|| io::Error::other("an unknown command"))?;
        let (status, payload) = self.translate(code, operation, body)?;
        let mut reply_body = Vec::new();
        if status == 0 && operation.is_result_framed() {
            ResultSection::Ok.encode(&mut Writer::new(&mut reply_body, Dialect::V0_12_2));
        }
        if status == 0 {
            reply_body.extend_from_slice(&payload);
        }
        let reply = ReplyHeader::for_request(&header, operation, status, 0, reply_body.len());
        let mut frame = reply.as_bytes().to_vec();
        frame.extend_from_slice(&reply_body);
        self.replies.push_back(frame);
        Ok(())
    }

    /// The next reply frame.
    pub(crate) fn receive(&mut self) -> io::Result<Vec<u8>> {
        self.replies
            .pop_front()
            .ok_or_else(|| io::Error::other("no request is waiting for its reply"))
    }

    fn translate(
        &mut self,
        code: CommandCode,
        operation: Operation,
        body: &[u8],
    ) -> io::Result<Translated> {
        let dialect = Dialect::V0_12_2;
        let request = if operation == Operation::Register {
            Request::decode_register(body, dialect)
        } else {
            Request::decode(code, body, dialect)
        }
        .map_err(io::Error::other)?;
        match request {
            Request::LoginRegister(login) => {
                let body = json!({
                    "username": login.username.as_str(),
                    "password": login.password.expose(),
                });
                self.login("/users/login", &body)
            }
            Request::LoginRegisterWithPat(login) => {
                let body = json!({"token": login.token.expose()});
                self.login("/personal-access-tokens/login", &body)
            }
            Request::GetClusterMetadata(_) => {
                let answer = self.call("GET", "/cluster/metadata", None)?;
                Ok((answer.code(), Vec::new()))
            }
            Request::CreateStream(create) => self.create_stream(create.name),
            Request::SendMessages(send) => self.send_messages(&send),
            Request::PollMessages(selector) => self.poll(&selector),
            other => self.setup(other),
        }
    }

    /// The requests that set a run up (and tear it down).
    fn setup(&mut self, request: Request<'_>) -> io::Result<Translated> {
        match request {
            Request::CreateTopic(create) => {
                let mut options = serde_json::Map::new();
                for (key, value) in &create.options.0 {
                    if let Some(text) = value.as_str() {
                        options.insert(key.as_str().to_owned(), json!(text));
                    }
                }
                let body = json!({
                    "name": create.name.as_str(),
                    "partitions_count": create.partitions_count,
                    "options": options,
                });
                let path = format!("/streams/{}/topics", segment(&create.stream_id));
                let answer = self.call("POST", &path, Some(&body))?;
                created_topic(&answer, create.name)
            }
            Request::DeleteStream(delete) => {
                let path = format!("/streams/{}", segment(&delete.stream_id));
                Ok((self.call("DELETE", &path, None)?.code(), Vec::new()))
            }
            Request::GetPartitionRoute(route) => {
                let path = format!(
                    "/streams/{}/topics/{}",
                    segment(&route.stream_id),
                    segment(&route.topic_id)
                );
                let answer = self.call("GET", &path, None)?;
                partition_route(&answer, route.partition_id)
            }
            Request::CreateConsumerGroup(create) => {
                let path = format!(
                    "/streams/{}/topics/{}/consumer-groups",
                    segment(&create.stream_id),
                    segment(&create.topic_id)
                );
                let body = json!({"name": create.name.as_str()});
                let answer = self.call("POST", &path, Some(&body))?;
                created_group(&answer, create.name)
            }
            other => Err(io::Error::other(format!(
                "{:?} is not an HTTP operation",
                other.code()
            ))),
        }
    }

    fn login(&mut self, path: &str, body: &Value) -> io::Result<Translated> {
        let answer = self.call("POST", path, Some(body))?;
        if let Some(refused) = refused(&answer) {
            return Ok(refused);
        }
        let identity = answer.json()?;
        let token = identity["access_token"]["token"].as_str();
        self.token = Some(token.unwrap_or_default().to_owned());
        let reply = LoginReply {
            user_id: identity["user_id"]
                .as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .unwrap_or(0),
            session: 1,
            server_protocol_version: ProtocolVersion::V0_12_2,
            server_version: name("http")?,
        };
        Ok((0, encoded(&reply)))
    }

    fn create_stream(&mut self, stream: WireName) -> io::Result<Translated> {
        let answer = self.call("POST", "/streams", Some(&json!({"name": stream.as_str()})))?;
        if let Some(refused) = refused(&answer) {
            return Ok(refused);
        }
        let id = answer.json()?["id"].as_u64().unwrap_or_default();
        let details = StreamDetails {
            stream: StreamResponse {
                id: u32::try_from(id).map_err(io::Error::other)?,
                created_at_micros: 0,
                topics_count: 0,
                size_bytes: 0,
                messages_count: 0,
                name: stream,
                options: OptionsBlock::default(),
                derived_options: OptionsBlock::default(),
            },
            topics: Vec::new(),
        };
        Ok((0, encoded(&details)))
    }

    fn send_messages(
        &mut self,
        send: &proto::commands::messages::SendMessages<'_>,
    ) -> io::Result<Translated> {
        let partitioning = match &send.partitioning {
            Partitioning::PartitionId(id) => {
                json!({"kind": "partition_id", "value": STANDARD.encode(id.to_le_bytes())})
            }
            Partitioning::Balanced => json!({"kind": "balanced", "value": ""}),
            Partitioning::MessagesKey(key) => {
                json!({"kind": "messages_key", "value": STANDARD.encode(key.as_bytes())})
            }
        };
        let messages: Vec<Value> = send
            .batch
            .messages()
            .map(|message| {
                let id = u64::try_from(message.header.id.get()).unwrap_or(0);
                json!({"id": id, "payload": STANDARD.encode(message.payload)})
            })
            .collect();
        let body = json!({"partitioning": partitioning, "messages": messages});
        let path = format!(
            "/streams/{}/topics/{}/messages",
            segment(&send.stream_id),
            segment(&send.topic_id)
        );
        Ok((self.call("POST", &path, Some(&body))?.code(), Vec::new()))
    }

    fn poll(&mut self, selector: &PollSelector) -> io::Result<Translated> {
        let kind = match selector.strategy.kind {
            PollingKind::Offset => "offset",
            PollingKind::Timestamp => "timestamp",
            PollingKind::First => "first",
            PollingKind::Last => "last",
            PollingKind::Next => "next",
        };
        let consumer_kind = match selector.consumer.kind {
            ConsumerKind::Consumer => "consumer",
            ConsumerKind::ConsumerGroup => "consumer_group",
            ConsumerKind::ExternalGroup => "external_group",
        };
        let partition = selector
            .partition
            .0
            .map_or(String::new(), |id| format!("&partition_id={id}"));
        let path = format!(
            "/streams/{}/topics/{}/messages/deferred?consumer_kind={consumer_kind}\
             &consumer_id={}{partition}&kind={kind}&value={}&count={}&auto_commit={}\
             &wait_us=0&min_count=1&max_bytes={}&request_timeout_us=10000000",
            segment(&selector.stream_id),
            segment(&selector.topic_id),
            segment(&selector.consumer.id),
            selector.strategy.value,
            selector.count,
            selector.auto_commit,
            // The binary poll the other transports send has no byte limit.
            u32::MAX,
        );
        let method = if selector.auto_commit { "POST" } else { "GET" };
        let answer = self.call(method, &path, None)?;
        if let Some(refused) = refused(&answer) {
            return Ok(refused);
        }
        polled(&answer.json()?)
    }

    /// One request and its response on the kept-alive connection.
    fn call(&mut self, method: &str, path: &str, body: Option<&Value>) -> io::Result<Answer> {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        if !body.is_empty() {
            request.push_str("Content-Type: application/json\r\n");
        }
        if let Some(token) = &self.token {
            request.push_str("Authorization: Bearer ");
            request.push_str(token);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        request.push_str(&body);
        self.stream.write_all(request.as_bytes())?;
        self.stream.flush()?;
        read_response(&mut self.stream)
    }
}

/// Reads one response with a `Content-Length` body.
fn read_response(stream: &mut dyn Stream) -> io::Result<Answer> {
    let mut head = Vec::with_capacity(512);
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
        if head.len() > 64 * 1024 {
            return Err(io::Error::other("a response head over 64 KiB"));
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    response.parse(&head).map_err(io::Error::other)?;
    let status = response.code.unwrap_or(0);
    let length = response
        .headers
        .iter()
        .find(|header| header.name.eq_ignore_ascii_case("content-length"))
        .and_then(|header| std::str::from_utf8(header.value).ok()?.trim().parse().ok())
        .unwrap_or(0_usize);
    let mut body = vec![0; length];
    stream.read_exact(&mut body)?;
    Ok(Answer { status, body })
}

fn created_topic(answer: &Answer, topic: WireName) -> io::Result<Translated> {
    if let Some(refused) = refused(answer) {
        return Ok(refused);
    }
    let json = answer.json()?;
    let id = json["id"].as_u64().unwrap_or_default();
    let details = TopicDetails {
        topic: TopicHeader {
            id: u32::try_from(id).map_err(io::Error::other)?,
            created_at_micros: 0,
            partitions_count: 0,
            size_bytes: 0,
            messages_count: 0,
            name: topic,
            options: OptionsBlock::default(),
            derived_options: OptionsBlock::default(),
            message_expiry_micros: 0,
            compression: 1,
            max_topic_size_bytes: 0,
        },
        partitions: Vec::new(),
    };
    Ok((0, encoded(&details)))
}

fn partition_route(answer: &Answer, partition_id: u32) -> io::Result<Translated> {
    if let Some(refused) = refused(answer) {
        return Ok(refused);
    }
    let json = answer.json()?;
    let partitions = json["partitions"].as_array().cloned().unwrap_or_default();
    let partition = partitions
        .iter()
        .find(|partition| partition["id"].as_u64() == Some(u64::from(partition_id)));
    let Some(partition) = partition else {
        return Ok((ErrorCode::PartitionNotFound.as_u32(), Vec::new()));
    };
    let route = PartitionRoute {
        incarnation: partition["context"]["incarnation"].as_u64().unwrap_or(1),
        metadata_op: partition["context"]["metadata_op"].as_u64().unwrap_or(0),
        view: 0,
        partitions_count: u32::try_from(partitions.len()).unwrap_or(u32::MAX),
        primary_replica: 0,
    };
    Ok((0, encoded(&route)))
}

fn created_group(answer: &Answer, group: WireName) -> io::Result<Translated> {
    if let Some(refused) = refused(answer) {
        return Ok(refused);
    }
    let json = answer.json()?;
    let number = |key: &str| u32::try_from(json[key].as_u64().unwrap_or_default()).unwrap_or(0);
    let details = ConsumerGroupDetails {
        group: ConsumerGroupResponse {
            id: number("id"),
            partitions_count: number("partitions_count"),
            members_count: 0,
            name: group,
        },
        members: Vec::new(),
    };
    Ok((0, encoded(&details)))
}

/// A poll response as the binary reply: its messages decoded and re-encoded as one record.
fn polled(json: &Value) -> io::Result<Translated> {
    let messages = json["messages"].as_array().cloned().unwrap_or_default();
    let mut payloads = Vec::with_capacity(messages.len());
    for message in &messages {
        let payload = message["payload"].as_str().unwrap_or_default();
        let id = message["header"]["id"].as_u64().map_or(0, u128::from);
        let origin = message["header"]["origin_timestamp"].as_u64().unwrap_or(0);
        payloads.push((
            id,
            origin,
            STANDARD.decode(payload).map_err(io::Error::other)?,
        ));
    }
    let outgoing: Vec<OutgoingMessage<'_>> = payloads
        .iter()
        .map(|(id, origin, payload)| OutgoingMessage {
            id: *id,
            origin_timestamp: *origin,
            payload,
            user_headers: &[],
        })
        .collect();
    let mut records = Vec::new();
    if !outgoing.is_empty() {
        encode_batch(&outgoing, None, &mut records).map_err(io::Error::other)?;
    }
    let number = |key: &str| json[key].as_u64().unwrap_or_default();
    let context = &json["context"];
    let reply = PolledMessages {
        partition_id: u32::try_from(number("partition_id")).unwrap_or(0),
        current_offset: number("current_offset"),
        messages_count: u32::try_from(outgoing.len()).unwrap_or(u32::MAX),
        context: PartitionContext {
            incarnation: context["incarnation"].as_u64().unwrap_or(0),
            owner_generation: context["owner_generation"].as_u64().unwrap_or(0),
            metadata_op: context["metadata_op"].as_u64().unwrap_or(0),
        },
        records: &records,
    };
    // The client decodes what it reads; check here that the frame is one it can.
    let bytes = encoded(&reply);
    decode_exact::<PolledMessages<'_>>(&bytes, Dialect::V0_12_2).map_err(io::Error::other)?;
    Ok((0, bytes))
}

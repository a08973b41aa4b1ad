//! What every test of this project shares: the server fixture (`harness`), clients of the SDK
//! under test logged in as root, and a bound on every test's run time.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

pub use harness::{ROOT_PASSWORD, ROOT_USERNAME, Server};
use iggy::prelude::*;

/// No test of this project may run longer than this.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a test waits for a line to reach the server log.
pub const LOG_WAIT: Duration = Duration::from_secs(10);

/// Runs `body` on a multi-threaded runtime, failing the test when it exceeds [`TEST_TIMEOUT`].
pub fn run<F: Future<Output = ()>>(body: F) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build a tokio runtime");
    runtime.block_on(async {
        tokio::time::timeout(TEST_TIMEOUT, body)
            .await
            .unwrap_or_else(|_| panic!("test exceeded {TEST_TIMEOUT:?}"));
    });
    // The SDK keeps background tasks (heartbeats, reconnects); do not wait for them.
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// A client connected and signed in as root with the password.
pub async fn root_client(server: &Server) -> IggyClient {
    client_with(server, ROOT_USERNAME, ROOT_PASSWORD).await
}

/// A client connected and signed in as `username` with `password`.
pub async fn client_with(server: &Server, username: &str, password: &str) -> IggyClient {
    let connection = format!("iggy://{username}:{password}@{}", server.tcp_address());
    let client = IggyClient::from_connection_string(&connection).expect("connection string");
    client
        .connect()
        .await
        .unwrap_or_else(|error| panic!("connect as {username}: {error}"));
    client
}

/// A connected client that has not signed in.
pub async fn anonymous_client(server: &Server) -> IggyClient {
    let client = IggyClient::builder()
        .with_tcp()
        .with_server_address(server.tcp_address())
        .build()
        .expect("build a TCP client");
    client.connect().await.expect("connect without signing in");
    client
}

pub fn id(name: &str) -> Identifier {
    Identifier::named(name).expect("a valid name")
}

pub fn num(value: u32) -> Identifier {
    Identifier::numeric(value).expect("a valid numeric identifier")
}

/// Creates a stream and a topic of `partitions` partitions, both named, with default options.
pub async fn create_stream_topic(client: &IggyClient, stream: &str, topic: &str, partitions: u32) {
    client
        .create_stream(stream, &StreamCreateOptions::default())
        .await
        .unwrap_or_else(|error| panic!("create stream {stream}: {error}"));
    let options = TopicCreateOptions {
        partitions_count: Some(partitions),
        ..TopicCreateOptions::default()
    };
    client
        .create_topic(&id(stream), topic, &options)
        .await
        .unwrap_or_else(|error| panic!("create topic {topic}: {error}"));
}

/// A message whose payload is `payload-<index>`, with id `index + 1` and two headers.
pub fn message(index: u64) -> IggyMessage {
    let headers = std::collections::BTreeMap::from([
        (
            HeaderKey::from_str("index").expect("key"),
            HeaderValue::from(index),
        ),
        (
            HeaderKey::from_str("kind").expect("key"),
            HeaderValue::from_str("compat").expect("value"),
        ),
    ]);
    IggyMessage::builder()
        .id(u128::from(index) + 1)
        .payload(format!("payload-{index}").into())
        .user_headers(headers)
        .build()
        .expect("a valid message")
}

/// Checks that `message` is the one [`message`] built for `index`, headers included.
pub fn assert_message(message: &IggyMessage, index: u64) {
    assert_eq!(message.header.id, u128::from(index) + 1, "message id");
    assert_eq!(
        message.payload.as_ref(),
        format!("payload-{index}").as_bytes(),
        "payload of message {index}"
    );
    let headers = message
        .user_headers_map()
        .expect("decodable headers")
        .expect("headers present");
    let index_key = HeaderKey::from_str("index").expect("key");
    assert_eq!(
        headers
            .get(&index_key)
            .map(|value| value.as_uint64().expect("u64 header")),
        Some(index),
        "header `index` of message {index}"
    );
    let kind_key = HeaderKey::from_str("kind").expect("key");
    assert_eq!(
        headers
            .get(&kind_key)
            .map(|value| value.as_str().expect("str header").to_owned()),
        Some("compat".to_owned()),
        "header `kind` of message {index}"
    );
}

/// Sends messages `range` to `partition` in batches of `batch`.
pub async fn send_range(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    range: std::ops::Range<u64>,
    batch: usize,
) {
    let indices: Vec<u64> = range.collect();
    for chunk in indices.chunks(batch) {
        let mut messages: Vec<IggyMessage> = chunk.iter().map(|index| message(*index)).collect();
        client
            .send_messages(
                &id(stream),
                &id(topic),
                &Partitioning::partition_id(partition),
                &mut messages,
            )
            .await
            .unwrap_or_else(|error| panic!("send to partition {partition}: {error}"));
    }
}

/// Polls `partition` from offset 0 until `expected` messages arrived (bounded by the test
/// timeout), and returns them.
pub async fn poll_all(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    expected: usize,
) -> Vec<IggyMessage> {
    let consumer = Consumer::new(id("poll-all"));
    let mut messages = Vec::with_capacity(expected);
    let mut attempts = 0;
    while messages.len() < expected {
        let offset = messages.len() as u64;
        let polled = client
            .poll_messages(
                &id(stream),
                &id(topic),
                partition,
                &consumer,
                &PollingStrategy::offset(offset),
                PollOptions::default(),
            )
            .await
            .unwrap_or_else(|error| panic!("poll partition {partition} at {offset}: {error}"));
        if polled.messages.is_empty() {
            attempts += 1;
            assert!(
                attempts < 100,
                "partition {partition} stalled at {offset} of {expected}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        messages.extend(polled.messages);
    }
    messages
}

/// Poll options that commit each message's offset once it is delivered, waiting at most
/// 200 ms for messages.
pub fn auto_commit_on_delivery() -> PollOptions {
    PollOptions {
        commit: CommitPolicy::Auto(AutoCommit {
            interval: None,
            every: Some(CommitEvery::Message),
            after: CommitAfter::Delivery,
        }),
        max_wait: Duration::from_millis(200).into(),
        ..PollOptions::default()
    }
}

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
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// A client connected and signed in as root with the password.
pub async fn root_client(server: &Server) -> IggyClient {
    let connection = format!(
        "iggy://{ROOT_USERNAME}:{ROOT_PASSWORD}@{}",
        server.tcp_address()
    );
    let client = IggyClient::from_connection_string(&connection).expect("connection string");
    client
        .connect()
        .await
        .unwrap_or_else(|error| panic!("connect as root: {error}"));
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

pub async fn create_stream_topic(client: &IggyClient, stream: &str, topic: &str, partitions: u32) {
    client
        .create_stream(stream)
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

/// A message whose payload is `payload-<index>`, with id `index + 1` and one header.
pub fn message(index: u64) -> IggyMessage {
    let headers = std::collections::BTreeMap::from([(
        HeaderKey::from_str("index").expect("key"),
        HeaderValue::from(index),
    )]);
    IggyMessage::builder()
        .id(u128::from(index) + 1)
        .payload(format!("payload-{index}").into())
        .user_headers(headers)
        .build()
        .expect("a valid message")
}

pub fn assert_message(message: &IggyMessage, index: u64) {
    assert_eq!(message.header.id, u128::from(index) + 1, "message id");
    assert_eq!(
        message.payload.as_ref(),
        format!("payload-{index}").as_bytes()
    );
    let headers = message
        .user_headers_map()
        .expect("decodable headers")
        .expect("headers present");
    let key = HeaderKey::from_str("index").expect("key");
    assert_eq!(
        headers
            .get(&key)
            .map(|value| value.as_uint64().expect("u64 header")),
        Some(index),
        "header `index` of message {index}"
    );
}

pub async fn send_range(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    range: std::ops::Range<u64>,
) {
    let mut messages: Vec<IggyMessage> = range.map(message).collect();
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

pub async fn poll(
    client: &IggyClient,
    stream: &str,
    topic: &str,
    partition: u32,
    consumer: &Consumer,
    strategy: PollingStrategy,
    count: u32,
    auto_commit: bool,
) -> PolledMessages {
    client
        .poll_messages(
            &id(stream),
            &id(topic),
            Some(partition),
            consumer,
            &strategy,
            count,
            auto_commit,
        )
        .await
        .unwrap_or_else(|error| panic!("poll {strategy:?}: {error}"))
}

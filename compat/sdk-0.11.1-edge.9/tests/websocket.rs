//! The SDK over WebSocket (`iggy+ws://`): login, streams and topics, send and poll (the
//! roster names the WebSocket port, so the partition plane works), consumer offsets, a
//! consumer group, users; and a junk WebSocket client that is evicted while the SDK's
//! connection keeps working.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "over-ws";
const TOPIC: &str = "events";

async fn websocket_client(server: &Server, username: &str, password: &str) -> IggyClient {
    let connection = format!(
        "iggy+ws://{username}:{password}@{}",
        server.websocket_address()
    );
    let client = IggyClient::from_connection_string(&connection).expect("connection string");
    client
        .connect()
        .await
        .unwrap_or_else(|error| panic!("connect over WebSocket as {username}: {error}"));
    client
}

#[test]
fn the_sdk_works_over_websocket() {
    let server = Server::start();
    run(async {
        let client = websocket_client(&server, ROOT_USERNAME, ROOT_PASSWORD).await;
        client.ping().await.expect("ping");
        let metadata = client.get_cluster_metadata().await.expect("roster");
        let node = &metadata.nodes[0];
        let port: u16 = server.websocket_address().rsplit(':').next().unwrap().parse().unwrap();
        assert_eq!(node.endpoints.websocket, port, "the roster names the bound port");

        create_stream_topic(&client, STREAM, TOPIC, 2).await;
        send_range(&client, STREAM, TOPIC, 0, 0..250, 50).await;
        send_range(&client, STREAM, TOPIC, 1, 0..10, 10).await;
        let polled = poll_all(&client, STREAM, TOPIC, 0, 250).await;
        for (index, message) in polled.iter().enumerate() {
            assert_message(message, index as u64);
        }

        let consumer = Consumer::new(id("ws-consumer"));
        client
            .store_consumer_offset(&consumer, &id(STREAM), &id(TOPIC), Some(0), 99)
            .await
            .expect("store offset");
        let offset = client
            .get_consumer_offset(&consumer, &id(STREAM), &id(TOPIC), Some(0))
            .await
            .expect("get offset")
            .expect("an offset");
        assert_eq!(offset.stored_offset, 99);

        let group = client
            .create_consumer_group(&id(STREAM), &id(TOPIC), "ws-group")
            .await
            .expect("create group");
        client
            .join_consumer_group(&id(STREAM), &id(TOPIC), &num(group.id))
            .await
            .expect("join group");
        let joined = client
            .get_consumer_group(&id(STREAM), &id(TOPIC), &num(group.id))
            .await
            .expect("get group")
            .expect("the group");
        assert_eq!(joined.members_count, 1, "this connection is its member");
        client
            .leave_consumer_group(&id(STREAM), &id(TOPIC), &num(group.id))
            .await
            .expect("leave group");

        client
            .create_user(
                "ws-user",
                "secret-pass",
                UserStatus::Active,
                None,
                &UserCreateOptions::default(),
            )
            .await
            .expect("create user");
        let user = websocket_client(&server, "ws-user", "secret-pass").await;
        assert!(
            user.get_streams().await.is_err(),
            "a user without permissions reads no streams"
        );
        drop(user);

        // A junk WebSocket client: upgraded, then a message that is not a frame.
        let junk = junk_websocket_message(&server.websocket_address());
        assert!(junk, "the junk client was answered and closed");
        client.ping().await.expect("the SDK's connection still works");
        let streams = client.get_streams().await.expect("streams");
        assert_eq!(streams.len(), 1);
    });
}

/// Upgrades a raw TCP connection by hand, sends one masked Binary message of 3 bytes, and
/// says whether the server answered with a Binary message and closed.
fn junk_websocket_message(address: &str) -> bool {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let mut byte = [0; 1];
    while !response.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "upgrade response");
        response.push(byte[0]);
    }
    assert!(response.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&response));
    // FIN + Binary, masked, 3 bytes, mask 0.
    stream
        .write_all(&[0x82, 0x80 | 3, 0, 0, 0, 0, 1, 2, 3])
        .unwrap();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    // A Binary message (the eviction, 256 bytes: 0x82, 126, length) before the close.
    rest.first() == Some(&0x82) && rest.len() > 256
}

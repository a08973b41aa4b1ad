//! The SDK over WebSocket (`iggy+ws://`) and QUIC (`iggy+quic://`, the server's self-signed
//! certificate, which the SDK does not validate by default): login, streams and topics, send
//! and poll (the roster names each transport's port, so the partition plane works), consumer
//! offsets, a consumer group, users; and junk clients that are evicted while the SDK's
//! connection keeps working.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "over-transport";
const TOPIC: &str = "events";

/// A transport of the SDK: its connection-string scheme and the server's address for it.
#[derive(Clone, Copy)]
enum Transport {
    WebSocket,
    Quic,
}

impl Transport {
    fn address(self, server: &Server) -> String {
        match self {
            Self::WebSocket => server.websocket_address(),
            Self::Quic => server.quic_address(),
        }
    }

    fn scheme(self) -> &'static str {
        match self {
            Self::WebSocket => "iggy+ws",
            Self::Quic => "iggy+quic",
        }
    }
}

async fn client(
    server: &Server,
    transport: Transport,
    username: &str,
    password: &str,
) -> IggyClient {
    let connection = format!(
        "{}://{username}:{password}@{}",
        transport.scheme(),
        transport.address(server)
    );
    let client = IggyClient::from_connection_string(&connection).expect("connection string");
    client.connect().await.unwrap_or_else(|error| {
        panic!("connect over {} as {username}: {error}", transport.scheme())
    });
    client
}

#[test]
fn the_sdk_works_over_websocket() {
    let server = Server::start();
    run(flows(&server, Transport::WebSocket));
    // A junk WebSocket client: upgraded, then a message that is not a frame.
    assert!(junk_websocket_message(&server.websocket_address()));
}

#[test]
fn the_sdk_works_over_quic() {
    let server = Server::start();
    run(flows(&server, Transport::Quic));
}

/// Every flow of the file over `transport`, then a check that the SDK's connection outlives a
/// junk client of the same transport.
async fn flows(server: &Server, transport: Transport) {
    {
        let client = client(server, transport, ROOT_USERNAME, ROOT_PASSWORD).await;
        client.ping().await.expect("ping");
        let metadata = client.get_cluster_metadata().await.expect("roster");
        let node = &metadata.nodes[0];
        let port: u16 = transport
            .address(server)
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let advertised = match transport {
            Transport::WebSocket => node.endpoints.websocket,
            Transport::Quic => node.endpoints.quic,
        };
        assert_eq!(advertised, port, "the roster names the bound port");

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
        let user = client_as(server, transport, "ws-user", "secret-pass").await;
        assert!(
            user.get_streams().await.is_err(),
            "a user without permissions reads no streams"
        );
        drop(user);

        client
            .ping()
            .await
            .expect("the SDK's connection still works");
        let streams = client.get_streams().await.expect("streams");
        assert_eq!(streams.len(), 1);
    }
}

async fn client_as(
    server: &Server,
    transport: Transport,
    user: &str,
    password: &str,
) -> IggyClient {
    client(server, transport, user, password).await
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
    assert!(
        response.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&response)
    );
    // FIN + Binary, masked, 3 bytes, mask 0.
    stream
        .write_all(&[0x82, 0x80 | 3, 0, 0, 0, 0, 1, 2, 3])
        .unwrap();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    // A Binary message (the eviction, 256 bytes: 0x82, 126, length) before the close.
    rest.first() == Some(&0x82) && rest.len() > 256
}

//! Load and abuse over loopback: 200 concurrent SDK clients, and raw sockets that send garbage
//! or an absurd frame size while a normal client keeps working and nothing stored changes.

mod common;

use std::time::Duration;

use common::*;
use iggy::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HEADER_BYTES: usize = 256;

#[test]
fn two_hundred_concurrent_sessions() {
    const CLIENTS: u32 = 200;
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        let address = server.tcp_address();
        let mut tasks = Vec::new();
        for index in 0..CLIENTS {
            let connection = format!("iggy://{ROOT_USERNAME}:{ROOT_PASSWORD}@{address}");
            tasks.push(tokio::spawn(async move {
                let client = IggyClient::from_connection_string(&connection).unwrap();
                client
                    .connect()
                    .await
                    .map_err(|error| format!("client {index} connect: {error}"))?;
                client
                    .ping()
                    .await
                    .map_err(|error| format!("client {index} ping: {error}"))?;
                let me = client
                    .get_me()
                    .await
                    .map_err(|error| format!("client {index} me: {error}"))?;
                Ok::<(IggyClient, u32), String>((client, me.client_id))
            }));
        }
        let mut clients = Vec::new();
        for task in tasks {
            clients.push(
                task.await
                    .expect("client task")
                    .unwrap_or_else(|error| panic!("{error}")),
            );
        }
        let mut ids: Vec<u32> = clients.iter().map(|(_, client_id)| *client_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            CLIENTS as usize,
            "every session has its own client id"
        );
        let stats = root.get_stats().await.unwrap();
        assert!(
            stats.clients_count > CLIENTS,
            "{} clients",
            stats.clients_count
        );
        drop(clients);
    });
}

#[test]
fn two_hundred_concurrent_producers_and_consumers() {
    const CLIENTS: u64 = 200;
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        create_stream_topic(&root, "crowd", "t", 4).await;
        let address = server.tcp_address();
        let mut tasks = Vec::new();
        for index in 0..CLIENTS {
            let connection = format!("iggy://{ROOT_USERNAME}:{ROOT_PASSWORD}@{address}");
            tasks.push(tokio::spawn(async move {
                let client = IggyClient::from_connection_string(&connection).unwrap();
                client
                    .connect()
                    .await
                    .map_err(|error| format!("client {index} connect: {error}"))?;
                client
                    .ping()
                    .await
                    .map_err(|error| format!("client {index} ping: {error}"))?;
                let partition = u32::try_from(index % 4).unwrap();
                client
                    .send_messages(
                        &id("crowd"),
                        &id("t"),
                        &Partitioning::partition_id(partition),
                        &mut [message(index)],
                    )
                    .await
                    .map_err(|error| format!("client {index} send: {error}"))?;
                client
                    .poll_messages(
                        &id("crowd"),
                        &id("t"),
                        partition,
                        &Consumer::new(num(u32::try_from(index).unwrap())),
                        &PollingStrategy::first(),
                        PollOptions::default(),
                    )
                    .await
                    .map_err(|error| format!("client {index} poll: {error}"))?;
                Ok::<IggyClient, String>(client)
            }));
        }
        let mut clients = Vec::new();
        for task in tasks {
            clients.push(
                task.await
                    .expect("client task")
                    .unwrap_or_else(|error| panic!("{error}")),
            );
        }
        let stats = root.get_stats().await.unwrap();
        assert!(
            stats.clients_count > u32::try_from(CLIENTS).unwrap(),
            "{} clients",
            stats.clients_count
        );
        assert_eq!(stats.messages_count, CLIENTS);
        drop(clients);
    });
}

/// A request header as the SDK builds it for a non-replicated command before login.
fn request_header(code: u32, body_len: usize) -> Vec<u8> {
    let mut header = vec![0u8; HEADER_BYTES];
    let size = u32::try_from(HEADER_BYTES + body_len).unwrap();
    header[48..52].copy_from_slice(&size.to_le_bytes());
    header[60] = 5; // Request
    header[128..144].copy_from_slice(&0x1234_5678_9abc_def0_u128.to_le_bytes()); // client id
    header[176] = 2; // NonReplicated
    header[196..200].copy_from_slice(&code.to_le_bytes());
    header
}

/// Whether the server ends the connection (EOF, reset or an eviction frame) within 10 s.
async fn ends_within_bound(socket: &mut TcpStream) -> bool {
    let mut buffer = vec![0u8; 4096];
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => return true,
                Ok(count) => {
                    received.extend_from_slice(&buffer[..count]);
                    if received.len() >= HEADER_BYTES && received[60] == 13 {
                        return true; // Eviction
                    }
                }
            }
        }
    });
    read.await.unwrap_or(false)
}

#[test]
fn raw_ping_frame_gets_a_reply() {
    let server = Server::start();
    run(async {
        let mut socket = TcpStream::connect(server.address()).await.unwrap();
        socket.write_all(&request_header(1, 0)).await.unwrap();
        let mut reply = vec![0u8; HEADER_BYTES];
        tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut reply))
            .await
            .expect("a reply within 10 s")
            .expect("a whole reply header");
        assert_eq!(reply[60], 8, "a Reply header");
        assert_eq!(
            u32::from_le_bytes(reply[216..220].try_into().unwrap()),
            0,
            "status OK"
        );
    });
}

fn random_bytes(seed: &mut u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            seed.to_le_bytes()[0]
        })
        .collect()
}

/// Bad frames of every kind; after each, `client` must still be served.
async fn abuse(server: &Server, client: &IggyClient) {
    // An absurd size: the server must not wait for 4 GiB.
    for size in [u32::MAX, 0x7fff_ffff, 64 * 1024 * 1024 + 1] {
        let mut socket = TcpStream::connect(server.address()).await.unwrap();
        let mut header = request_header(1, 0);
        header[48..52].copy_from_slice(&size.to_le_bytes());
        socket.write_all(&header).await.unwrap();
        assert!(
            ends_within_bound(&mut socket).await,
            "size {size:#x} left the connection open"
        );
        client.ping().await.expect("a normal client still works");
    }
    // A size below the header itself.
    let mut socket = TcpStream::connect(server.address()).await.unwrap();
    let mut header = request_header(1, 0);
    header[48..52].copy_from_slice(&17u32.to_le_bytes());
    socket.write_all(&header).await.unwrap();
    assert!(
        ends_within_bound(&mut socket).await,
        "a size below 256 left the connection open"
    );

    // An unknown header kind and an unknown operation.
    for (offset, value) in [(60usize, 99u8), (176, 250)] {
        let mut socket = TcpStream::connect(server.address()).await.unwrap();
        let mut header = request_header(1, 0);
        header[offset] = value;
        socket.write_all(&header).await.unwrap();
        assert!(
            ends_within_bound(&mut socket).await,
            "byte {offset} = {value} was served"
        );
    }

    // Random garbage, many connections, some closed abruptly mid-frame.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..50 {
        let mut socket = TcpStream::connect(server.address()).await.unwrap();
        let garbage = random_bytes(&mut seed, 64 + round * 97);
        let _ = socket.write_all(&garbage).await;
        if round % 2 == 0 {
            drop(socket);
        } else {
            let _ =
                tokio::time::timeout(Duration::from_millis(50), socket.read(&mut [0u8; 64])).await;
        }
    }
    client.ping().await.expect("a normal client still works");
    client.get_me().await.expect("a normal client still works");
    let fresh = root_client(server).await;
    fresh.get_me().await.expect("a new client still signs in");
}

#[test]
fn garbage_and_absurd_sizes_do_not_disturb_other_clients() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        abuse(&server, &client).await;
    });
}

#[test]
fn garbage_leaves_stored_messages_untouched() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, "calm", "t", 1).await;
        send_range(&client, "calm", "t", 0, 0..10, 10).await;
        abuse(&server, &client).await;
        let messages = poll_all(&client, "calm", "t", 0, 10).await;
        for (index, message) in messages.iter().enumerate() {
            assert_message(message, index as u64);
        }
        let topic = client
            .get_topic(&id("calm"), &id("t"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(topic.messages_count, 10, "nothing stored changed");
    });
}

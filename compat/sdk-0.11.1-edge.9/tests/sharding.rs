//! Thread-per-core: the server runs two shards (`system.sharding.cpu_allocation = "2"`); the
//! connections of several clients are handed to both, partitions are owned by both, and every
//! client sees every other client's writes at once, whichever shard serves it.

mod common;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "sharded";
const TOPIC: &str = "events";
const PARTITIONS: u32 = 4;
const CLIENTS: usize = 6;
const PER_CLIENT: u64 = 10;

#[test]
fn clients_on_both_shards_see_each_others_writes() {
    let server = start_two_shards();
    run(async {
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(root_client(&server).await);
        }
        // Metadata written through one connection is there for all the others at once.
        create_stream_topic(&clients[1], STREAM, TOPIC, PARTITIONS).await;
        for (index, client) in clients.iter().enumerate() {
            let topic = client
                .get_topic(&id(STREAM), &id(TOPIC))
                .await
                .expect("get topic")
                .unwrap_or_else(|| panic!("client {index} does not see the topic"));
            assert_eq!(topic.partitions_count, PARTITIONS);
        }
        // Every client writes to every partition.
        for (index, client) in (0u64..).zip(&clients) {
            for partition in 0..PARTITIONS {
                let start = (index * u64::from(PARTITIONS) + u64::from(partition)) * PER_CLIENT;
                send_range(
                    client,
                    STREAM,
                    TOPIC,
                    partition,
                    start..start + PER_CLIENT,
                    5,
                )
                .await;
            }
        }
        // Every client reads everything back, from every partition.
        let per_partition = CLIENTS * PER_CLIENT as usize;
        for client in &clients {
            for partition in 0..PARTITIONS {
                let messages = poll_all(client, STREAM, TOPIC, partition, per_partition).await;
                assert_eq!(messages.len(), per_partition);
                for (offset, message) in (0u64..).zip(&messages) {
                    assert_eq!(message.header.offset, offset);
                }
            }
        }
        // An offset stored through one connection is read through all the others.
        let consumer = Consumer::new(id("auditor"));
        clients[0]
            .store_consumer_offset(&consumer, &id(STREAM), &id(TOPIC), Some(2), 7)
            .await
            .expect("store offset");
        for client in &clients {
            let stored = client
                .get_consumer_offset(&consumer, &id(STREAM), &id(TOPIC), Some(2))
                .await
                .expect("get offset")
                .expect("an offset");
            assert_eq!(stored.stored_offset, 7);
        }
        // Server-wide figures count every shard's partitions and connections.
        let stats = clients[3].get_stats().await.expect("stats");
        let total = CLIENTS as u64 * PER_CLIENT * u64::from(PARTITIONS);
        assert_eq!(stats.messages_count, total);
        assert_eq!(stats.partitions_count, PARTITIONS);
        assert!(stats.clients_count >= CLIENTS as u32, "{stats:?}");
        assert!(stats.total_disk_space > 0, "{stats:?}");
        let listed = clients[4].get_clients().await.expect("clients");
        assert!(listed.len() >= CLIENTS, "{listed:?}");
        // Deleting the stream through another connection removes it for everyone.
        clients[5]
            .delete_stream(&id(STREAM))
            .await
            .expect("delete stream");
        for client in &clients {
            let stream = client.get_stream(&id(STREAM)).await.expect("get stream");
            assert!(stream.is_none());
        }
    });
}

/// A connection whose sends and polls keep reaching partitions of the other shard moves to
/// that shard (the server logs it) between two requests, and nothing is lost or reordered:
/// every message sent before, across and after the move reads back at its offset, and the
/// moved connection goes on serving control requests too.
#[test]
fn connections_move_to_the_shard_of_their_partitions_and_lose_nothing() {
    let server = start_two_shards();
    run(async {
        // Connections go to the shards in turn: with two clients, one is on each shard, so
        // at least one of them works with a partition of the other shard.
        let first = root_client(&server).await;
        let second = root_client(&server).await;
        create_stream_topic(&first, "moving", "events", PARTITIONS).await;
        const PER_PARTITION: u64 = 40;
        for (index, client) in (0u64..).zip([&first, &second]) {
            for partition in 0..PARTITIONS {
                let base = (index * u64::from(PARTITIONS) + u64::from(partition)) * PER_PARTITION;
                send_range(
                    client,
                    "moving",
                    "events",
                    partition,
                    base..base + PER_PARTITION,
                    4,
                )
                .await;
            }
        }
        assert!(
            server.log_shows_within("moves to shard", LOG_WAIT),
            "{}",
            server.log_tail()
        );
        for client in [&first, &second] {
            for partition in 0..PARTITIONS {
                let expected = 2 * PER_PARTITION as usize;
                let messages = poll_all(client, "moving", "events", partition, expected).await;
                assert_eq!(messages.len(), expected);
                for (offset, message) in (0u64..).zip(&messages) {
                    assert_eq!(message.header.offset, offset);
                }
                // The first client's messages, then the second's, each as it sent them.
                for (position, message) in (0u64..).zip(&messages) {
                    let (sender, within) = (position / PER_PARTITION, position % PER_PARTITION);
                    let base =
                        (sender * u64::from(PARTITIONS) + u64::from(partition)) * PER_PARTITION;
                    assert_message(message, base + within);
                }
            }
            let stats = client.get_stats().await.expect("stats after the moves");
            assert_eq!(
                stats.messages_count,
                2 * PER_PARTITION * u64::from(PARTITIONS)
            );
        }
    });
}

/// A server with two shards, once its log says both run.
fn start_two_shards() -> Server {
    let server = Server::start_with_env(&[("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", "2")]);
    assert!(
        server.log_shows_within("2 shard(s)", LOG_WAIT),
        "{}",
        server.log_tail()
    );
    server
}

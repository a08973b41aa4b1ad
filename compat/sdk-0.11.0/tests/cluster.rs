//! The 0.11.0 client (what Python `apache-iggy` 0.9.0 embeds) against three real nodes in
//! cluster mode. With a roster of several nodes it routes a consumer group's auto-commit
//! polls and its offset writes through a data connection on the primary (PROTOCOL.md §12.2:
//! `GET_POLL_ROUTING`, `ATTACH_CONSUMER_SESSION`, `POLL_MESSAGES_ON_PRIMARY`,
//! `GET_CONSUMER_OFFSET_ROUTING`); a server that answers those codes `3` fails every such
//! poll.

mod common;

use std::time::{Duration, Instant};

use common::*;
use harness::Cluster;
use iggy::prelude::*;

const STREAM: &str = "routed";
const TOPIC: &str = "events";
const GROUP: &str = "readers";

/// A client logged in through `address`, retried while the new cluster elects its first
/// primary and commits the root user.
async fn connect(address: &str) -> IggyClient {
    let connection = format!("iggy://{ROOT_USERNAME}:{ROOT_PASSWORD}@{address}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let client = IggyClient::from_connection_string(&connection).expect("a client");
        match client.connect().await {
            Ok(()) => return client,
            Err(error) if Instant::now() < deadline => {
                eprintln!("connect: {error}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("no login through {address} within 30 s: {error}"),
        }
    }
}

/// The TCP address of the node the roster names leader, once one is.
async fn leader_address(client: &IggyClient) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(metadata) = client.get_cluster_metadata().await
            && let Some(leader) = metadata
                .nodes
                .iter()
                .find(|node| node.role == ClusterNodeRole::Leader && node.endpoints.tcp != 0)
        {
            return format!("127.0.0.1:{}", leader.endpoints.tcp);
        }
        assert!(Instant::now() < deadline, "no leader within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The offsets of the group's next (up to 10) messages of partition 0, committed as read.
async fn next_with_auto_commit(client: &IggyClient, group: &Consumer) -> Vec<u64> {
    let strategy = PollingStrategy::next();
    let polled = poll(client, STREAM, TOPIC, 0, group, strategy, 10, true).await;
    polled.messages.iter().map(|m| m.header.offset).collect()
}

#[test]
fn a_group_polls_with_auto_commit_and_stores_offsets_through_the_primary() {
    let cluster = Cluster::start(3, "2s");
    run(async {
        let first = connect(&cluster.nodes[0].tcp_address()).await;
        let client = connect(&leader_address(&first).await).await;
        create_stream_topic(&client, STREAM, TOPIC, 1).await;
        let (stream, topic) = (id(STREAM), id(TOPIC));
        client
            .create_consumer_group(&stream, &topic, GROUP)
            .await
            .expect("create the group");
        client
            .join_consumer_group(&stream, &topic, &id(GROUP))
            .await
            .expect("join the group");
        send_range(&client, STREAM, TOPIC, 0, 0..10).await;
        let group = Consumer::group(id(GROUP));
        // Routed: a route from this connection, a data connection attached to its session.
        let polled = next_with_auto_commit(&client, &group).await;
        assert_eq!(
            polled,
            (0..10).collect::<Vec<u64>>(),
            "the member was served"
        );
        let stored = client
            .get_consumer_offset(&group, &stream, &topic, Some(0))
            .await
            .expect("read the group offset")
            .expect("auto-commit stored it");
        assert_eq!(stored.stored_offset, 9);
        // A routed offset write of the owning member.
        client
            .store_consumer_offset(&group, &stream, &topic, Some(0), 4)
            .await
            .expect("store the group offset");
        let stored = client
            .get_consumer_offset(&group, &stream, &topic, Some(0))
            .await
            .expect("read the group offset")
            .expect("stored");
        assert_eq!(stored.stored_offset, 4);
        assert_eq!(
            next_with_auto_commit(&client, &group).await,
            [5, 6, 7, 8, 9]
        );
    });
}

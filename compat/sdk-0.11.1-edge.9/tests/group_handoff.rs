//! Consumer groups hand partitions off as the reference server does (issue 9, item 6), for
//! both SDK dialects (this file is shared by symlink): a member that joins while the first
//! has never polled gets its share at once, and when one of two members disconnects the other
//! takes every partition and keeps its membership while it stays alive.

mod common;

use std::time::Duration;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "handoff";
const TOPIC: &str = "work";
const GROUP: &str = "workers";
const PARTITIONS: u32 = 4;

/// The members' partition counts, in slot order.
async fn shares(root: &IggyClient) -> Vec<u32> {
    let details = root
        .get_consumer_group(&id(STREAM), &id(TOPIC), &id(GROUP))
        .await
        .expect("get the group")
        .expect("the group exists");
    details
        .members
        .iter()
        .map(|member| member.partitions_count)
        .collect()
}

/// Polls `shares` until `done` holds or 10 s pass; returns the last shares seen.
async fn wait_for_shares(root: &IggyClient, done: impl Fn(&[u32]) -> bool) -> Vec<u32> {
    let mut last = Vec::new();
    for _ in 0..100 {
        last = shares(root).await;
        if done(&last) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

async fn setup(server: &Server) -> IggyClient {
    let root = root_client(server).await;
    create_stream_topic(&root, STREAM, TOPIC, PARTITIONS).await;
    root.create_consumer_group(&id(STREAM), &id(TOPIC), GROUP)
        .await
        .expect("create the group");
    root
}

#[test]
fn a_second_member_gets_partitions_at_once_when_the_first_never_polled() {
    let server = Server::start();
    run(async {
        let root = setup(&server).await;
        let first = root_client(&server).await;
        first
            .join_consumer_group(&id(STREAM), &id(TOPIC), &id(GROUP))
            .await
            .expect("first joins");
        assert_eq!(shares(&root).await, vec![PARTITIONS]);
        let second = root_client(&server).await;
        second
            .join_consumer_group(&id(STREAM), &id(TOPIC), &id(GROUP))
            .await
            .expect("second joins");
        // Nothing was served to the first member, so nothing waits for it to commit.
        let split = shares(&root).await;
        assert_eq!(split, vec![PARTITIONS / 2, PARTITIONS / 2], "split at once");
        drop((first, second));
    });
}

#[test]
fn the_remaining_member_takes_everything_and_stays_when_the_other_disconnects() {
    // Connections of members silent for 1.2 × 8 s are stale; the SDK pings every 5 s.
    let server = Server::start_with_env(&[("IGGY_HEARTBEAT_INTERVAL", "8s")]);
    run(async {
        let root = setup(&server).await;
        let leaving = root_client(&server).await;
        let staying = root_client(&server).await;
        for member in [&leaving, &staying] {
            member
                .join_consumer_group(&id(STREAM), &id(TOPIC), &id(GROUP))
                .await
                .expect("join");
        }
        assert_eq!(shares(&root).await.len(), 2);
        leaving.disconnect().await.expect("disconnect");
        drop(leaving);
        let after = wait_for_shares(&root, |shares| shares == [PARTITIONS]).await;
        assert_eq!(
            after,
            vec![PARTITIONS],
            "the remaining member owns everything"
        );
        // Well past the stale limit (9.6 s) and any group timer: still a member.
        for _ in 0..15 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            staying
                .ping()
                .await
                .expect("the remaining member is served");
        }
        assert_eq!(
            shares(&root).await,
            vec![PARTITIONS],
            "still the only member"
        );
    });
}

//! Consumer groups: create, get, list, join, leave and delete with the low-level client, two
//! high-level members that split the partitions and together read every message exactly once,
//! and the eviction of a member that goes silent.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use iggy::prelude::*;
use tokio::sync::Mutex;

const STREAM: &str = "groups";
const TOPIC: &str = "work";

#[test]
fn groups_create_get_list_join_leave_delete() {
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        create_stream_topic(&root, STREAM, TOPIC, 4).await;
        let (stream, topic) = (id(STREAM), id(TOPIC));

        let group = root
            .create_consumer_group(&stream, &topic, "workers")
            .await
            .expect("create");
        assert_eq!(
            (group.id, group.name.as_str(), group.partitions_count),
            (0, "workers", 4)
        );
        assert_eq!(group.members_count, 0);
        let second = root
            .create_consumer_group(&stream, &topic, "auditors")
            .await
            .expect("create");
        assert_eq!(second.id, 1);
        let duplicate = root.create_consumer_group(&stream, &topic, "workers").await;
        assert!(duplicate.is_err(), "a duplicate group name");

        let names: Vec<String> = root
            .get_consumer_groups(&stream, &topic)
            .await
            .unwrap()
            .into_iter()
            .map(|group| group.name)
            .collect();
        assert_eq!(names, ["workers", "auditors"]);
        assert!(
            root.get_consumer_group(&stream, &topic, &id("missing"))
                .await
                .unwrap()
                .is_none()
        );

        let first = root_client(&server).await;
        first
            .join_consumer_group(&stream, &topic, &id("workers"))
            .await
            .expect("join");
        let details = root
            .get_consumer_group(&stream, &topic, &num(0))
            .await
            .unwrap()
            .expect("group");
        assert_eq!(details.members_count, 1);
        assert_eq!(
            details.members[0].partitions_count, 4,
            "a lone member owns everything"
        );

        let other = root_client(&server).await;
        other
            .join_consumer_group(&stream, &topic, &id("workers"))
            .await
            .expect("join");
        let details = root
            .get_consumer_group(&stream, &topic, &id("workers"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(details.members_count, 2);
        assert_disjoint(&details);

        other
            .leave_consumer_group(&stream, &topic, &id("workers"))
            .await
            .expect("leave");
        let details = root
            .get_consumer_group(&stream, &topic, &id("workers"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(details.members_count, 1);
        let error = other
            .leave_consumer_group(&stream, &topic, &id("workers"))
            .await;
        assert!(error.is_err(), "leaving twice");

        root.delete_consumer_group(&stream, &topic, &id("workers"))
            .await
            .expect("delete");
        assert!(
            root.get_consumer_group(&stream, &topic, &id("workers"))
                .await
                .unwrap()
                .is_none()
        );
        let remaining = root.get_consumer_groups(&stream, &topic).await.unwrap();
        assert_eq!(remaining.len(), 1);
    });
}

#[test]
fn group_membership_ends_with_the_session() {
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        create_stream_topic(&root, STREAM, TOPIC, 2).await;
        let (stream, topic) = (id(STREAM), id(TOPIC));
        root.create_consumer_group(&stream, &topic, "workers")
            .await
            .unwrap();
        let member = root_client(&server).await;
        member
            .join_consumer_group(&stream, &topic, &id("workers"))
            .await
            .unwrap();
        member.logout_user().await.expect("log the member out");
        let mut members = u32::MAX;
        for _ in 0..100 {
            let details = root
                .get_consumer_group(&stream, &topic, &id("workers"))
                .await
                .unwrap()
                .unwrap();
            members = details.members_count;
            if members == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(members, 0, "an ended session leaves its groups");
    });
}

fn assert_disjoint(details: &ConsumerGroupDetails) {
    let mut owners = BTreeMap::new();
    for member in &details.members {
        for partition in &member.partitions {
            assert!(
                owners.insert(*partition, member.id).is_none(),
                "partition {partition} has two owners: {details:?}"
            );
        }
    }
}

type Seen = Arc<Mutex<Vec<(u32, u64, usize)>>>;

fn group_member(client: &IggyClient) -> IggyConsumer {
    let options = PollOptions {
        commit: CommitPolicy::OnRead,
        max_wait: Duration::from_millis(100).into(),
        ..PollOptions::default()
    };
    client
        .consumer_group("workers", STREAM, TOPIC)
        .expect("a consumer group builder")
        .create_consumer_group_if_not_exists()
        .polling_strategy(PollingStrategy::next())
        .poll_options(options)
        .build()
}

fn spawn_reader(
    mut consumer: IggyConsumer,
    member: usize,
    seen: Seen,
    total: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<IggyConsumer> {
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let Ok(next) = tokio::time::timeout(Duration::from_millis(200), consumer.next()).await
            else {
                continue;
            };
            match next {
                Some(Ok(received)) => {
                    let entry = (
                        received.partition_id,
                        received.message.header.offset,
                        member,
                    );
                    seen.lock().await.push(entry);
                    total.fetch_add(1, Ordering::Relaxed);
                }
                Some(Err(error)) => eprintln!("member {member} read error: {error:?}"),
                None => break,
            }
        }
        consumer
    })
}

#[test]
fn two_members_split_partitions_and_read_every_message_once() {
    const PARTITIONS: u32 = 4;
    const MESSAGES: u64 = 400;
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        create_stream_topic(&root, STREAM, TOPIC, PARTITIONS).await;
        let (first_client, second_client) =
            (root_client(&server).await, root_client(&server).await);
        let mut first = group_member(&first_client);
        first.init().await.expect("init the first member");
        let mut second = group_member(&second_client);
        second.init().await.expect("init the second member");

        let seen: Seen = Arc::default();
        let total = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let readers = [
            spawn_reader(first, 0, seen.clone(), total.clone(), stop.clone()),
            spawn_reader(second, 1, seen.clone(), total.clone(), stop.clone()),
        ];

        // Wait until the rebalance settles: two members, each with partitions, none shared.
        let mut settled = None;
        for _ in 0..400 {
            let details = root
                .get_consumer_group(&id(STREAM), &id(TOPIC), &id("workers"))
                .await
                .unwrap()
                .unwrap();
            let owned: u32 = details
                .members
                .iter()
                .map(|member| member.partitions_count)
                .sum();
            if details.members_count == 2
                && owned == PARTITIONS
                && details
                    .members
                    .iter()
                    .all(|member| member.partitions_count > 0)
            {
                settled = Some(details);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let settled = settled.expect("the group settled on two members within 40 s");
        assert_disjoint(&settled);

        for index in 0..MESSAGES {
            let partition = u32::try_from(index % u64::from(PARTITIONS)).unwrap();
            send_range(&root, STREAM, TOPIC, partition, index..index + 1, 1).await;
        }
        for _ in 0..600 {
            if total.load(Ordering::Relaxed) >= MESSAGES as usize {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A little longer, so that a duplicate delivery would show.
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            let mut consumer = reader.await.expect("reader task");
            let _ = consumer.shutdown().await;
        }

        let seen = seen.lock().await;
        let mut unique = BTreeMap::new();
        for (partition, offset, member) in seen.iter() {
            if let Some(previous) = unique.insert((*partition, *offset), *member) {
                panic!("partition {partition} offset {offset} read by {previous} and {member}");
            }
        }
        assert_eq!(unique.len(), MESSAGES as usize, "every message once");
        for member in 0..2 {
            assert!(
                seen.iter().any(|entry| entry.2 == member),
                "member {member} read nothing"
            );
        }
        let per_partition = MESSAGES / u64::from(PARTITIONS);
        for partition in 0..PARTITIONS {
            let offsets: Vec<u64> = unique
                .keys()
                .filter(|key| key.0 == partition)
                .map(|key| key.1)
                .collect();
            assert_eq!(
                offsets,
                (0..per_partition).collect::<Vec<_>>(),
                "partition {partition}"
            );
        }
    });
}

/// A member silent for longer than 1.2 × the server's heartbeat interval gets
/// `Eviction(StaleClient)` (PROTOCOL.md §1.14): it leaves the group, its connection is closed,
/// and the SDK carries on over a new connection.
#[test]
fn a_silent_member_is_evicted_as_a_stale_client() {
    let server = Server::start_with_env(&[("IGGY_HEARTBEAT_INTERVAL", "1s")]);
    run(async {
        // Not a member: idling never evicts it, even past the limit.
        let root = root_client(&server).await;
        create_stream_topic(&root, STREAM, TOPIC, 2).await;
        let (stream, topic, group) = (id(STREAM), id(TOPIC), id("workers"));
        root.create_consumer_group(&stream, &topic, "workers")
            .await
            .unwrap();
        // Its own heartbeat (60 s) is far beyond the server's limit (1.2 s).
        let connection = format!(
            "iggy://{ROOT_USERNAME}:{ROOT_PASSWORD}@{}?heartbeat_interval=60s",
            server.tcp_address()
        );
        let member = IggyClient::from_connection_string(&connection).unwrap();
        member.connect().await.expect("connect the member");
        let first_connection = member.get_me().await.unwrap().client_id;
        member
            .join_consumer_group(&stream, &topic, &group)
            .await
            .unwrap();

        let mut gone = false;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let clients = root.get_clients().await.unwrap();
            gone = clients
                .iter()
                .all(|client| client.client_id != first_connection);
            if gone {
                break;
            }
        }
        assert!(gone, "the silent member's connection was not closed");
        let details = root.get_consumer_group(&stream, &topic, &group).await;
        assert_eq!(details.unwrap().unwrap().members_count, 0);
        assert!(
            server.log_shows_within("evicted", LOG_WAIT),
            "the server logs the eviction\n{}",
            server.log_tail()
        );
        assert!(root.ping().await.is_ok(), "an idle non-member stays");

        let mut again = None;
        for _ in 0..50 {
            if let Ok(me) = member.get_me().await {
                again = Some(me.client_id);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let again = again.expect("the evicted member works again");
        assert_ne!(again, first_connection, "on a new connection");
    });
}

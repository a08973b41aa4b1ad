//! The 0.11.0 dialect (lockstep, one request in flight) with SDK 0.11.0-edge.4: login, streams
//! and topics, send and poll, consumer offsets and consumer groups.

mod common;

use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use iggy::prelude::*;

const STREAM: &str = "legacy";
const TOPIC: &str = "events";

fn offsets(polled: &PolledMessages) -> Vec<u64> {
    polled
        .messages
        .iter()
        .map(|message| message.header.offset)
        .collect()
}

#[test]
fn login_ping_and_me() {
    let server = Server::start();
    run(async {
        let client = anonymous_client(&server).await;
        client.ping().await.expect("ping before login");
        assert!(
            client.get_streams().await.is_err(),
            "nothing but ping before login"
        );
        client
            .login_user(ROOT_USERNAME, ROOT_PASSWORD)
            .await
            .expect("login");
        let me = client.get_me().await.expect("get me");
        assert_eq!(me.user_id, Some(0));
        client.get_stats().await.expect("stats");
        let wrong = anonymous_client(&server).await;
        assert!(wrong.login_user(ROOT_USERNAME, "wrong").await.is_err());
        client.logout_user().await.expect("logout");
    });
}

#[test]
fn streams_and_topics() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        let stream = client.create_stream(STREAM).await.expect("create stream");
        assert_eq!(stream.id, 0);
        assert!(
            client.create_stream(STREAM).await.is_err(),
            "a duplicate stream"
        );
        let options = TopicCreateOptions {
            partitions_count: Some(3),
            ..TopicCreateOptions::default()
        };
        let topic = client
            .create_topic(&id(STREAM), TOPIC, &options)
            .await
            .expect("create topic");
        assert_eq!((topic.id, topic.partitions_count), (0, 3));
        assert_eq!(client.get_streams().await.unwrap().len(), 1);
        assert_eq!(client.get_topics(&id(STREAM)).await.unwrap().len(), 1);
        let details = client
            .get_topic(&num(0), &num(0))
            .await
            .unwrap()
            .expect("topic");
        assert_eq!(details.name, TOPIC);

        client
            .update_stream(&id(STREAM), "renamed", &StreamUpdateOptions::default())
            .await
            .expect("rename stream");
        client
            .update_topic(
                &id("renamed"),
                &id(TOPIC),
                "renamed-topic",
                &TopicUpdateOptions::default(),
            )
            .await
            .expect("rename topic");
        assert!(
            client
                .get_topic(&id("renamed"), &id("renamed-topic"))
                .await
                .unwrap()
                .is_some()
        );
        client
            .create_partitions(&id("renamed"), &id("renamed-topic"), 2)
            .await
            .expect("partitions");
        let details = client
            .get_topic(&id("renamed"), &num(0))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(details.partitions_count, 5);
        client
            .delete_topic(&id("renamed"), &num(0))
            .await
            .expect("delete topic");
        client
            .delete_stream(&id("renamed"))
            .await
            .expect("delete stream");
        assert!(client.get_streams().await.unwrap().is_empty());
    });
}

#[test]
fn send_and_poll_by_every_strategy() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 2).await;
        for start in (0..100).step_by(20) {
            send_range(&client, STREAM, TOPIC, 1, start..start + 20).await;
        }
        let consumer = Consumer::new(id("reader"));
        let all = poll(
            &client,
            STREAM,
            TOPIC,
            1,
            &consumer,
            PollingStrategy::offset(0),
            100,
            false,
        )
        .await;
        assert_eq!(all.messages.len(), 100);
        for (index, message) in all.messages.iter().enumerate() {
            assert_eq!(message.header.offset, index as u64);
            assert_message(message, index as u64);
        }
        let first = poll(
            &client,
            STREAM,
            TOPIC,
            1,
            &consumer,
            PollingStrategy::first(),
            2,
            false,
        )
        .await;
        assert_eq!(offsets(&first), [0, 1]);
        let last = poll(
            &client,
            STREAM,
            TOPIC,
            1,
            &consumer,
            PollingStrategy::last(),
            2,
            false,
        )
        .await;
        assert_eq!(offsets(&last), [98, 99]);
        let stamp = IggyTimestamp::from(all.messages[60].header.timestamp);
        let by_time = poll(
            &client,
            STREAM,
            TOPIC,
            1,
            &consumer,
            PollingStrategy::timestamp(stamp),
            100,
            false,
        )
        .await;
        assert!(by_time.messages.first().expect("messages").header.offset <= 60);
        let next = poll(
            &client,
            STREAM,
            TOPIC,
            1,
            &consumer,
            PollingStrategy::next(),
            30,
            true,
        )
        .await;
        assert_eq!(offsets(&next), (0..30).collect::<Vec<u64>>());
        let next = poll(
            &client,
            STREAM,
            TOPIC,
            1,
            &consumer,
            PollingStrategy::next(),
            30,
            true,
        )
        .await;
        assert_eq!(
            offsets(&next),
            (30..60).collect::<Vec<u64>>(),
            "auto-commit moved the offset"
        );
    });
}

#[test]
fn consumer_offsets() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 1).await;
        send_range(&client, STREAM, TOPIC, 0, 0..10).await;
        let consumer = Consumer::new(id("keeper"));
        let (stream, topic) = (id(STREAM), id(TOPIC));
        assert!(
            client
                .get_consumer_offset(&consumer, &stream, &topic, Some(0))
                .await
                .unwrap()
                .is_none()
        );
        client
            .store_consumer_offset(&consumer, &stream, &topic, Some(0), 6)
            .await
            .expect("store");
        let stored = client
            .get_consumer_offset(&consumer, &stream, &topic, Some(0))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((stored.stored_offset, stored.current_offset), (6, 9));
        let next = poll(
            &client,
            STREAM,
            TOPIC,
            0,
            &consumer,
            PollingStrategy::next(),
            10,
            false,
        )
        .await;
        assert_eq!(offsets(&next), [7, 8, 9]);
        client
            .delete_consumer_offset(&consumer, &stream, &topic, Some(0))
            .await
            .expect("delete");
        assert!(
            client
                .get_consumer_offset(&consumer, &stream, &topic, Some(0))
                .await
                .unwrap()
                .is_none()
        );
    });
}

#[test]
fn consumer_groups() {
    let server = Server::start();
    run(async {
        let root = root_client(&server).await;
        create_stream_topic(&root, STREAM, TOPIC, 3).await;
        let (stream, topic) = (id(STREAM), id(TOPIC));
        let group = root
            .create_consumer_group(&stream, &topic, "workers")
            .await
            .expect("create");
        assert_eq!((group.id, group.partitions_count), (0, 3));
        assert_eq!(
            root.get_consumer_groups(&stream, &topic)
                .await
                .unwrap()
                .len(),
            1
        );
        let member = root_client(&server).await;
        member
            .join_consumer_group(&stream, &topic, &id("workers"))
            .await
            .expect("join");
        let details = root
            .get_consumer_group(&stream, &topic, &id("workers"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(details.members_count, 1);
        member
            .leave_consumer_group(&stream, &topic, &id("workers"))
            .await
            .expect("leave");
        let details = root
            .get_consumer_group(&stream, &topic, &id("workers"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(details.members_count, 0);

        for partition in 0..3 {
            let start = u64::from(partition) * 20;
            send_range(&root, STREAM, TOPIC, partition, start..start + 20).await;
        }
        let mut consumer = root
            .consumer_group("workers", STREAM, TOPIC)
            .unwrap()
            .auto_join_consumer_group()
            .polling_strategy(PollingStrategy::next())
            .auto_commit(AutoCommit::When(AutoCommitWhen::PollingMessages))
            .poll_interval(IggyDuration::from(Duration::from_millis(20)))
            .batch_length(10)
            .build();
        consumer.init().await.expect("init the group consumer");
        let mut ids = Vec::new();
        while ids.len() < 60 {
            let next = tokio::time::timeout(Duration::from_secs(30), consumer.next())
                .await
                .unwrap_or_else(|_| panic!("no message within 30 s after {}", ids.len()));
            let received = next.expect("the stream goes on").expect("a message");
            ids.push(received.message.header.id);
        }
        ids.sort_unstable();
        assert_eq!(ids, (1..=60).collect::<Vec<u128>>(), "every message once");
        root.delete_consumer_group(&stream, &topic, &id("workers"))
            .await
            .expect("delete");
    });
}

#[test]
fn purge_topic_and_stream() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 2).await;
        let options = TopicCreateOptions {
            partitions_count: Some(1),
            ..TopicCreateOptions::default()
        };
        client
            .create_topic(&id(STREAM), "other", &options)
            .await
            .expect("create topic");
        send_range(&client, STREAM, TOPIC, 0, 0..10).await;
        send_range(&client, STREAM, TOPIC, 1, 0..10).await;
        send_range(&client, STREAM, "other", 0, 0..10).await;

        client
            .purge_topic(&id(STREAM), &id(TOPIC))
            .await
            .expect("purge topic");
        let topic = client
            .get_topic(&id(STREAM), &id(TOPIC))
            .await
            .unwrap()
            .expect("topic stays");
        assert_eq!((topic.messages_count, topic.partitions_count), (0, 2));
        let other = client
            .get_topic(&id(STREAM), &id("other"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            other.messages_count, 10,
            "purging one topic leaves the others"
        );
        let consumer = Consumer::new(id("reader"));
        let empty = poll(
            &client,
            STREAM,
            TOPIC,
            0,
            &consumer,
            PollingStrategy::first(),
            10,
            false,
        )
        .await;
        assert!(empty.messages.is_empty());

        client
            .purge_stream(&id(STREAM))
            .await
            .expect("purge stream");
        let other = client
            .get_topic(&id(STREAM), &id("other"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(other.messages_count, 0);
        assert_eq!(
            client.get_topics(&id(STREAM)).await.unwrap().len(),
            2,
            "topics stay"
        );
    });
}

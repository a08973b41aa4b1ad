//! What survives the process: a SIGTERM restart on the same data directory brings back streams,
//! topics, messages with headers, offsets, users, tokens and groups; a SIGKILL during produce to
//! a `durability = persisted` topic loses no message the server acknowledged.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "durable";
const TOPIC: &str = "log";

async fn populate(root: &IggyClient) -> String {
    create_stream_topic(root, STREAM, TOPIC, 3).await;
    root.create_stream("second", &StreamCreateOptions::default())
        .await
        .unwrap();
    for partition in 0..3 {
        send_range(root, STREAM, TOPIC, partition, 0..100, 25).await;
    }
    let (stream, topic) = (id(STREAM), id(TOPIC));
    root.store_consumer_offset(&Consumer::new(id("keeper")), &stream, &topic, Some(1), 41)
        .await
        .unwrap();
    root.create_consumer_group(&stream, &topic, "workers")
        .await
        .unwrap();
    root.create_user(
        "carol",
        "carol-secret",
        UserStatus::Active,
        None,
        &UserCreateOptions::default(),
    )
    .await
    .unwrap();
    let token = root
        .create_personal_access_token("restart-token", PersonalAccessTokenExpiry::NeverExpire)
        .await
        .unwrap();
    token.token
}

async fn check_everything_is_back(server: &Server, token: &str) {
    let root = root_client(server).await;
    let names: Vec<String> = root
        .get_streams()
        .await
        .unwrap()
        .into_iter()
        .map(|stream| stream.name)
        .collect();
    assert_eq!(names, [STREAM, "second"]);
    let (stream, topic) = (id(STREAM), id(TOPIC));
    let details = root
        .get_topic(&stream, &topic)
        .await
        .unwrap()
        .expect("topic is back");
    assert_eq!((details.partitions_count, details.messages_count), (3, 300));
    for partition in 0..3 {
        let messages = poll_all(&root, STREAM, TOPIC, partition, 100).await;
        for (index, message) in messages.iter().enumerate() {
            assert_eq!(message.header.offset, index as u64);
            assert_message(message, index as u64);
        }
    }
    let offset = root
        .get_consumer_offset(&Consumer::new(id("keeper")), &stream, &topic, Some(1))
        .await
        .unwrap()
        .expect("offset is back");
    assert_eq!(offset.stored_offset, 41);
    let group = root
        .get_consumer_group(&stream, &topic, &id("workers"))
        .await
        .unwrap();
    assert_eq!(group.expect("group is back").partitions_count, 3);
    assert!(
        root.get_user(&id("carol")).await.unwrap().is_some(),
        "user is back"
    );
    client_with(server, "carol", "carol-secret")
        .await
        .ping()
        .await
        .expect("carol signs in");
    let tokens = root.get_personal_access_tokens().await.unwrap();
    assert_eq!(tokens.len(), 1);
    let client = anonymous_client(server).await;
    client
        .login_with_personal_access_token(token)
        .await
        .expect("the token still signs in");

    // Appends continue at the next offset.
    send_range(&root, STREAM, TOPIC, 0, 100..110, 10).await;
    let messages = poll_all(&root, STREAM, TOPIC, 0, 110).await;
    assert_message(&messages[109], 109);
    assert_eq!(messages[109].header.offset, 109);
}

#[test]
fn everything_survives_a_sigterm_restart() {
    let mut server = Server::start();
    run(async {
        let token = {
            let root = root_client(&server).await;
            let token = populate(&root).await;
            let _ = root.shutdown().await;
            token
        };
        server.restart();
        check_everything_is_back(&server, &token).await;
    });
    // Twice: a restart also replays what the previous restart wrote.
    server.restart();
    run(async {
        let root = root_client(&server).await;
        let details = root
            .get_topic(&id(STREAM), &id(TOPIC))
            .await
            .unwrap()
            .expect("topic");
        assert_eq!(details.messages_count, 310);
    });
}

#[test]
fn sigkill_during_produce_loses_no_acknowledged_message() {
    sigkill_during_produce(10, 200, Durability::Persisted);
}

/// Batches of 2,500 messages (about 330 kB), under `replicated`: each a write of its own
/// large enough to go through the kernel's worker threads, so a kill lands inside writes of
/// every size. An unacknowledged batch may be cut or kept; none before it may be lost.
#[test]
fn sigkill_during_large_sends_loses_no_acknowledged_message() {
    sigkill_during_produce(2_500, 25_000, Durability::Replicated);
}

/// Three cycles of: a producer sending batches of `batch` messages, killed (SIGKILL) once
/// `before_kill` more were acknowledged; after each restart every acknowledged message is
/// there, in order.
fn sigkill_during_produce(batch: u64, before_kill: u64, durability: Durability) {
    const CYCLES: u64 = 3;
    let mut server = Server::start();
    let mut expected_at_least = 0;
    for cycle in 0..CYCLES {
        let acknowledged = Arc::new(AtomicU64::new(0));
        run(async {
            let root = root_client(&server).await;
            if cycle == 0 {
                root.create_stream(STREAM, &StreamCreateOptions::default())
                    .await
                    .unwrap();
                let options = TopicCreateOptions {
                    partitions_count: Some(1),
                    durability,
                    ..TopicCreateOptions::default()
                };
                root.create_topic(&id(STREAM), TOPIC, &options)
                    .await
                    .unwrap();
            }
            let topic = root
                .get_topic(&id(STREAM), &id(TOPIC))
                .await
                .unwrap()
                .expect("topic");
            let start = topic.messages_count;
            assert!(
                start >= expected_at_least,
                "cycle {cycle}: {start} < {expected_at_least} acknowledged"
            );
            let stored = poll_all(&root, STREAM, TOPIC, 0, usize::try_from(start).unwrap()).await;
            for (index, message) in stored.iter().enumerate() {
                assert_eq!(message.header.offset, index as u64);
                assert_message(message, index as u64);
            }
            acknowledged.store(start, Ordering::SeqCst);

            let producer_client = root_client(&server).await;
            let counter = acknowledged.clone();
            let producer = tokio::spawn(async move {
                let mut next = start;
                loop {
                    let mut messages: Vec<IggyMessage> =
                        (next..next + batch).map(message).collect();
                    let sent = producer_client
                        .send_messages(
                            &id(STREAM),
                            &id(TOPIC),
                            &Partitioning::partition_id(0),
                            &mut messages,
                        )
                        .await;
                    if sent.is_err() {
                        return;
                    }
                    next += batch;
                    counter.store(next, Ordering::SeqCst);
                }
            });
            // Kill once this cycle's producer had some acknowledged, mid-stream.
            while acknowledged.load(Ordering::SeqCst) < start + before_kill {
                assert!(
                    !producer.is_finished(),
                    "the producer stopped before the kill"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            server.kill();
            producer.abort();
        });
        expected_at_least = acknowledged.load(Ordering::SeqCst);
        server.start_again();
    }
    run(async {
        let root = root_client(&server).await;
        let topic = root
            .get_topic(&id(STREAM), &id(TOPIC))
            .await
            .unwrap()
            .expect("topic");
        assert!(topic.messages_count >= expected_at_least);
        let stored = poll_all(
            &root,
            STREAM,
            TOPIC,
            0,
            usize::try_from(expected_at_least).unwrap(),
        )
        .await;
        for (index, message) in stored.iter().enumerate() {
            assert_message(message, index as u64);
        }
    });
}

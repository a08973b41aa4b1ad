//! Sending and polling with headers by every strategy (offset, timestamp, first, last, next),
//! auto-commit on read, and consumer offsets stored, read and deleted.

mod common;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "messages";
const TOPIC: &str = "events";

async fn poll(
    client: &IggyClient,
    partition: u32,
    consumer: &Consumer,
    strategy: PollingStrategy,
    count: u32,
    commit: CommitPolicy,
) -> PolledMessages {
    let options = PollOptions {
        count,
        commit,
        ..PollOptions::default()
    };
    client
        .poll_messages(
            &id(STREAM),
            &id(TOPIC),
            partition,
            consumer,
            &strategy,
            options,
        )
        .await
        .unwrap_or_else(|error| panic!("poll {strategy:?}: {error}"))
}

fn offsets(polled: &PolledMessages) -> Vec<u64> {
    polled
        .messages
        .iter()
        .map(|message| message.header.offset)
        .collect()
}

#[test]
fn send_then_poll_by_offset_first_last_and_timestamp() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 2).await;
        send_range(&client, STREAM, TOPIC, 1, 0..50, 7).await;
        let consumer = Consumer::new(id("reader"));

        let all = poll_all(&client, STREAM, TOPIC, 1, 50).await;
        for (index, message) in all.iter().enumerate() {
            assert_eq!(message.header.offset, index as u64);
            assert_message(message, index as u64);
        }
        assert!(
            all.windows(2)
                .all(|pair| pair[0].header.timestamp <= pair[1].header.timestamp),
            "server timestamps never go back"
        );

        let from_offset = poll(
            &client,
            1,
            &consumer,
            PollingStrategy::offset(20),
            5,
            CommitPolicy::Manual,
        )
        .await;
        assert_eq!(offsets(&from_offset), [20, 21, 22, 23, 24]);
        assert_eq!(from_offset.partition_id, 1);
        assert_eq!(from_offset.current_offset, 49);
        assert_message(&from_offset.messages[0], 20);

        let first = poll(
            &client,
            1,
            &consumer,
            PollingStrategy::first(),
            3,
            CommitPolicy::Manual,
        )
        .await;
        assert_eq!(offsets(&first), [0, 1, 2]);

        let last = poll(
            &client,
            1,
            &consumer,
            PollingStrategy::last(),
            4,
            CommitPolicy::Manual,
        )
        .await;
        assert_eq!(offsets(&last), [46, 47, 48, 49]);

        let timestamp = IggyTimestamp::from(all[30].header.timestamp);
        let by_time = poll(
            &client,
            1,
            &consumer,
            PollingStrategy::timestamp(timestamp),
            1000,
            CommitPolicy::Manual,
        )
        .await;
        let first_offset = by_time
            .messages
            .first()
            .expect("messages at or after the stamp")
            .header
            .offset;
        assert!(
            first_offset <= 30,
            "the first message at or after the stamp is at most 30"
        );
        assert!(
            by_time
                .messages
                .iter()
                .all(|message| message.header.timestamp >= timestamp.as_micros())
        );
        assert_eq!(
            by_time.messages.last().map(|message| message.header.offset),
            Some(49)
        );

        let beyond = poll(
            &client,
            1,
            &consumer,
            PollingStrategy::offset(50),
            10,
            CommitPolicy::Manual,
        )
        .await;
        assert!(
            beyond.messages.is_empty(),
            "a start past the head is empty, not an error"
        );
        let other = poll(
            &client,
            0,
            &consumer,
            PollingStrategy::first(),
            10,
            CommitPolicy::Manual,
        )
        .await;
        assert!(other.messages.is_empty(), "partition 0 got nothing");
    });
}

#[test]
fn poll_next_with_commit_on_read_resumes_after_the_last_read() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 1).await;
        send_range(&client, STREAM, TOPIC, 0, 0..30, 30).await;
        let consumer = Consumer::new(id("next-reader"));

        let mut seen = Vec::new();
        for _ in 0..3 {
            let batch = poll(
                &client,
                0,
                &consumer,
                PollingStrategy::next(),
                10,
                CommitPolicy::OnRead,
            )
            .await;
            assert_eq!(batch.messages.len(), 10);
            seen.extend(offsets(&batch));
        }
        assert_eq!(seen, (0..30).collect::<Vec<u64>>());
        let empty = poll(
            &client,
            0,
            &consumer,
            PollingStrategy::next(),
            10,
            CommitPolicy::OnRead,
        )
        .await;
        assert!(empty.messages.is_empty(), "everything was read");

        let stored = client
            .get_consumer_offset(&consumer, &id(STREAM), &id(TOPIC), Some(0))
            .await
            .expect("get offset")
            .expect("an offset was stored on read");
        assert_eq!((stored.stored_offset, stored.current_offset), (29, 29));

        // A manual poll stores nothing.
        let manual = Consumer::new(id("manual-reader"));
        poll(
            &client,
            0,
            &manual,
            PollingStrategy::next(),
            10,
            CommitPolicy::Manual,
        )
        .await;
        let again = poll(
            &client,
            0,
            &manual,
            PollingStrategy::next(),
            10,
            CommitPolicy::Manual,
        )
        .await;
        assert_eq!(
            again.messages.first().map(|message| message.header.offset),
            Some(0)
        );
    });
}

#[test]
fn consumer_offsets_store_get_delete() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 2).await;
        send_range(&client, STREAM, TOPIC, 0, 0..10, 10).await;
        let (stream, topic) = (id(STREAM), id(TOPIC));
        let named = Consumer::new(id("offset-keeper"));
        let numbered = Consumer::new(num(7));

        assert!(
            client
                .get_consumer_offset(&named, &stream, &topic, Some(0))
                .await
                .unwrap()
                .is_none(),
            "nothing stored yet"
        );
        client
            .store_consumer_offset(&named, &stream, &topic, Some(0), 4)
            .await
            .expect("store");
        client
            .store_consumer_offset(&numbered, &stream, &topic, Some(0), 8)
            .await
            .expect("store");
        let info = client
            .get_consumer_offset(&named, &stream, &topic, Some(0))
            .await
            .unwrap()
            .expect("stored");
        assert_eq!(
            (info.partition_id, info.stored_offset, info.current_offset),
            (0, 4, 9)
        );
        let info = client
            .get_consumer_offset(&numbered, &stream, &topic, Some(0))
            .await
            .unwrap()
            .expect("stored");
        assert_eq!(info.stored_offset, 8);

        let next = poll(
            &client,
            0,
            &named,
            PollingStrategy::next(),
            2,
            CommitPolicy::Manual,
        )
        .await;
        assert_eq!(
            offsets(&next),
            [5, 6],
            "next starts after the stored offset"
        );

        let beyond = client
            .store_consumer_offset(&named, &stream, &topic, Some(0), 10)
            .await;
        assert!(beyond.is_err(), "an offset past the head is refused");
        let empty_partition = client
            .store_consumer_offset(&named, &stream, &topic, Some(1), 0)
            .await;
        assert!(
            empty_partition.is_err(),
            "any offset on an empty partition is refused"
        );

        client
            .delete_consumer_offset(&named, &stream, &topic, Some(0))
            .await
            .expect("delete");
        assert!(
            client
                .get_consumer_offset(&named, &stream, &topic, Some(0))
                .await
                .unwrap()
                .is_none()
        );
        let error = client
            .delete_consumer_offset(&named, &stream, &topic, Some(0))
            .await
            .expect_err("delete twice");
        assert_eq!(error.as_code(), 3021, "ConsumerOffsetNotFound: {error}");
        let restart = poll(
            &client,
            0,
            &named,
            PollingStrategy::next(),
            1,
            CommitPolicy::Manual,
        )
        .await;
        assert_eq!(offsets(&restart), [0], "next starts at 0 without an offset");
    });
}

#[test]
fn balanced_and_keyed_partitioning_reach_every_partition() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 3).await;
        let counts = |topic: TopicDetails| -> Vec<u64> {
            topic
                .partitions
                .iter()
                .map(|partition| partition.messages_count)
                .collect()
        };
        for index in 0..30 {
            client
                .send_messages(
                    &id(STREAM),
                    &id(TOPIC),
                    &Partitioning::balanced(),
                    &mut [message(index)],
                )
                .await
                .expect("balanced send");
        }
        let balanced = counts(
            client
                .get_topic(&id(STREAM), &id(TOPIC))
                .await
                .unwrap()
                .expect("topic"),
        );
        assert_eq!(balanced.iter().sum::<u64>(), 30);
        assert!(
            balanced.iter().all(|count| *count > 0),
            "balanced reaches every partition: {balanced:?}"
        );
        for index in 30..40 {
            let key = Partitioning::messages_key_str("same-key").unwrap();
            client
                .send_messages(&id(STREAM), &id(TOPIC), &key, &mut [message(index)])
                .await
                .expect("keyed send");
        }
        let keyed = counts(
            client
                .get_topic(&id(STREAM), &id(TOPIC))
                .await
                .unwrap()
                .expect("topic"),
        );
        let grown: Vec<u64> = keyed
            .iter()
            .zip(&balanced)
            .map(|(after, before)| after - before)
            .collect();
        let mut sorted = grown.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 0, 10], "one key, one partition: {grown:?}");
    });
}

#[test]
fn large_batches_and_payloads_round_trip() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 1).await;
        let big = IggyMessage::builder()
            .id(1)
            .payload(vec![0xab; 900_000].into())
            .build()
            .unwrap();
        client
            .send_messages(
                &id(STREAM),
                &id(TOPIC),
                &Partitioning::partition_id(0),
                &mut [big],
            )
            .await
            .expect("send a 900 kB message");
        send_range(&client, STREAM, TOPIC, 0, 0..5000, 1000).await;
        let consumer = Consumer::new(id("big"));
        let first = poll(
            &client,
            0,
            &consumer,
            PollingStrategy::offset(0),
            1,
            CommitPolicy::Manual,
        )
        .await;
        assert_eq!(first.messages[0].payload.len(), 900_000);
        assert!(first.messages[0].payload.iter().all(|byte| *byte == 0xab));
        let mut next_offset = 1;
        while next_offset < 5001 {
            let batch = poll(
                &client,
                0,
                &consumer,
                PollingStrategy::offset(next_offset),
                1000,
                CommitPolicy::Manual,
            )
            .await;
            assert!(!batch.messages.is_empty(), "stalled at {next_offset}");
            for message in &batch.messages {
                assert_eq!(message.header.offset, next_offset);
                assert_message(message, next_offset - 1);
                next_offset += 1;
            }
        }
    });
}

#[test]
fn deferred_poll_waits_for_a_message_that_arrives_later() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 1).await;
        let waiter = root_client(&server).await;
        let poll = tokio::spawn(async move {
            let options = PollOptions::wait(std::time::Duration::from_secs(20).into());
            waiter
                .poll_messages(
                    &id(STREAM),
                    &id(TOPIC),
                    0,
                    &Consumer::new(id("waiter")),
                    &PollingStrategy::offset(0),
                    options,
                )
                .await
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        send_range(&client, STREAM, TOPIC, 0, 0..1, 1).await;
        let polled = poll.await.expect("poll task").expect("deferred poll");
        assert_eq!(
            offsets(&polled),
            [0],
            "the parked poll returns the new message"
        );
        assert_message(&polled.messages[0], 0);
    });
}

#[test]
fn delete_segments_truncates_the_oldest_closed_segments() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        client
            .create_stream(STREAM, &StreamCreateOptions::default())
            .await
            .unwrap();
        let options = TopicCreateOptions {
            partitions_count: Some(1),
            segment_size: Some(IggyByteSize::from(1024 * 1024)),
            ..TopicCreateOptions::default()
        };
        client
            .create_topic(&id(STREAM), TOPIC, &options)
            .await
            .expect("1 MiB segments");
        let payload = vec![7u8; 64 * 1024];
        for batch in 0..8 {
            let mut messages: Vec<IggyMessage> = (0..10)
                .map(|index| {
                    IggyMessage::builder()
                        .id(batch * 10 + index + 1)
                        .payload(payload.clone().into())
                        .build()
                        .unwrap()
                })
                .collect();
            client
                .send_messages(
                    &id(STREAM),
                    &id(TOPIC),
                    &Partitioning::partition_id(0),
                    &mut messages,
                )
                .await
                .expect("send 640 KiB");
        }
        let before = client
            .get_topic(&id(STREAM), &id(TOPIC))
            .await
            .unwrap()
            .unwrap();
        let segments = before.partitions[0].segments_count;
        assert!(
            segments >= 3,
            "5 MiB over 1 MiB segments: {segments} segments"
        );
        client
            .delete_segments(&id(STREAM), &id(TOPIC), 0, 1)
            .await
            .expect("delete one segment");
        let after = client
            .get_topic(&id(STREAM), &id(TOPIC))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(after.partitions[0].segments_count, segments - 1);
        assert!(after.partitions[0].messages_count < 80);
        let first = poll(
            &client,
            0,
            &Consumer::new(id("c")),
            PollingStrategy::first(),
            1,
            CommitPolicy::Manual,
        )
        .await;
        assert!(
            first.messages[0].header.offset > 0,
            "the oldest messages are gone"
        );
        assert_eq!(first.current_offset, 79, "the head stays");
    });
}

//! The SDK's high-level API: `IggyProducer` (direct and background, creating its stream and
//! topic) and `IggyConsumer` (standalone and in a group, with auto-commit), as the SDK's README
//! uses them.

mod common;

use std::time::Duration;

use common::*;
use futures_util::StreamExt;
use iggy::prelude::*;

const STREAM: &str = "high-level";
const TOPIC: &str = "events";

/// Reads `count` messages from `consumer`, each within the test's bound.
async fn take(consumer: &mut IggyConsumer, count: usize) -> Vec<ReceivedMessage> {
    let mut received = Vec::with_capacity(count);
    while received.len() < count {
        let next = tokio::time::timeout(Duration::from_secs(30), consumer.next())
            .await
            .unwrap_or_else(|_| panic!("no message within 30 s after {}", received.len()));
        match next {
            Some(Ok(message)) => received.push(message),
            Some(Err(error)) => panic!("read error after {}: {error:?}", received.len()),
            None => panic!("the consumer ended after {}", received.len()),
        }
    }
    received
}

#[test]
fn direct_producer_creates_and_group_consumer_auto_commits() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        let producer = client
            .producer(STREAM, TOPIC)
            .unwrap()
            .direct(DirectConfig::builder().batch_length(100).build())
            .create_stream_if_not_exists()
            .create_topic_if_not_exists(3, IggyExpiry::NeverExpire, MaxTopicSize::ServerDefault)
            .partitioning(Partitioning::balanced())
            .build();
        producer
            .init()
            .await
            .expect("producer init creates the stream and topic");
        let topic = client
            .get_topic(&id(STREAM), &id(TOPIC))
            .await
            .unwrap()
            .expect("created");
        assert_eq!(topic.partitions_count, 3);
        producer
            .send((0..300).map(message).collect())
            .await
            .expect("send");

        let mut consumer = client
            .consumer_group("readers", STREAM, TOPIC)
            .unwrap()
            .create_consumer_group_if_not_exists()
            .polling_strategy(PollingStrategy::next())
            .poll_options(auto_commit_on_delivery())
            .build();
        consumer
            .init()
            .await
            .expect("consumer init creates and joins the group");
        let received = take(&mut consumer, 300).await;
        let mut ids: Vec<u128> = received
            .iter()
            .map(|message| message.message.header.id)
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=300).collect::<Vec<u128>>());
        for message in &received {
            assert_message(
                &message.message,
                u64::try_from(message.message.header.id - 1).unwrap(),
            );
        }
        consumer
            .shutdown()
            .await
            .expect("shutdown stores the last positions");

        let group = Consumer::group(id("readers"));
        let topic = client
            .get_topic(&id(STREAM), &id(TOPIC))
            .await
            .unwrap()
            .expect("topic");
        let mut stored_total = 0;
        for partition in &topic.partitions {
            let stored = client
                .get_consumer_offset(&group, &id(STREAM), &id(TOPIC), Some(partition.id))
                .await
                .expect("get group offset");
            match stored {
                Some(stored) => {
                    assert_eq!(
                        stored.stored_offset, stored.current_offset,
                        "partition {}",
                        partition.id
                    );
                    stored_total += stored.stored_offset + 1;
                }
                None => assert_eq!(
                    partition.messages_count, 0,
                    "partition {} read but not stored",
                    partition.id
                ),
            }
        }
        assert_eq!(stored_total, 300);

        // A new member of the same group resumes after the committed positions.
        producer
            .send((300..310).map(message).collect())
            .await
            .expect("send more");
        let mut resumed = client
            .consumer_group("readers", STREAM, TOPIC)
            .unwrap()
            .polling_strategy(PollingStrategy::next())
            .poll_options(auto_commit_on_delivery())
            .build();
        resumed.init().await.expect("rejoin");
        let received = take(&mut resumed, 10).await;
        let mut ids: Vec<u128> = received
            .iter()
            .map(|message| message.message.header.id)
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, (301..=310).collect::<Vec<u128>>());
        resumed.shutdown().await.expect("shutdown");
    });
}

#[test]
fn background_producer_and_standalone_consumer() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, STREAM, TOPIC, 2).await;
        let producer = client
            .producer(STREAM, TOPIC)
            .unwrap()
            .background(BackgroundConfig::builder().build())
            .partitioning(Partitioning::partition_id(1))
            .build();
        producer.init().await.expect("init");
        for index in 0..500 {
            producer
                .send_one(message(index))
                .await
                .expect("queue a message");
        }
        producer.shutdown().await;

        let mut consumer = client
            .consumer("solo", STREAM, TOPIC)
            .unwrap()
            .partitions([1])
            .polling_strategy(PollingStrategy::offset(0))
            .poll_options(PollOptions {
                max_wait: Duration::from_millis(200).into(),
                ..PollOptions::default()
            })
            .build();
        consumer.init().await.expect("init");
        let received = take(&mut consumer, 500).await;
        for (index, message) in received.iter().enumerate() {
            assert_eq!(message.partition_id, 1);
            assert_eq!(message.message.header.offset, index as u64);
            assert_message(&message.message, index as u64);
        }
        let last = received.last().expect("500 messages").checkpoint();
        consumer.commit(last).await.expect("manual commit");
        let stored = client
            .get_consumer_offset(&Consumer::new(id("solo")), &id(STREAM), &id(TOPIC), Some(1))
            .await
            .unwrap()
            .expect("committed");
        assert_eq!(stored.stored_offset, 499);
        consumer.shutdown().await.expect("shutdown");
    });
}

//! The message cleaner with the SDK (issue 9, item 5): with 1 MiB segments, a 2 s expiry
//! moves the first offset forward within one cleaner interval, and a size cap holds a topic
//! at its cap plus one active segment per partition.

mod common;

use std::time::{Duration, Instant};

use common::*;
use iggy::prelude::*;

const MIB: u64 = 1 << 20;

/// Sends `count` messages of `size` bytes to partition 0 in batches of 100.
async fn fill(client: &IggyClient, stream: &str, topic: &str, count: u64, size: usize) {
    let payload = vec![b'x'; size];
    for start in (0..count).step_by(100) {
        let mut batch: Vec<IggyMessage> = (start..(start + 100).min(count))
            .map(|_| {
                IggyMessage::builder()
                    .payload(payload.clone().into())
                    .build()
                    .unwrap()
            })
            .collect();
        client
            .send_messages(
                &id(stream),
                &id(topic),
                &Partitioning::partition_id(0),
                &mut batch,
            )
            .await
            .expect("send");
    }
}

async fn first_offset(client: &IggyClient, stream: &str, topic: &str) -> Option<u64> {
    let polled = client
        .poll_messages(
            &id(stream),
            &id(topic),
            0,
            &Consumer::new(id("retention")),
            &PollingStrategy::first(),
            PollOptions {
                count: 1,
                ..PollOptions::default()
            },
        )
        .await
        .expect("poll the first message");
    polled.messages.first().map(|message| message.header.offset)
}

async fn create_topic(client: &IggyClient, stream: &str, options: TopicCreateOptions) {
    client
        .create_stream(stream, &StreamCreateOptions::default())
        .await
        .expect("create stream");
    client
        .create_topic(&id(stream), "t", &options)
        .await
        .expect("create topic");
}

#[test]
fn expired_segments_go_within_one_cleaner_interval() {
    let server = Server::start_with_env(&[("IGGY_DATA_MAINTENANCE_MESSAGES_INTERVAL", "1s")]);
    run(async {
        let root = root_client(&server).await;
        let options = TopicCreateOptions {
            partitions_count: Some(1),
            message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(
                Duration::from_secs(2),
            ))),
            segment_size: Some(IggyByteSize::from(MIB)),
            ..TopicCreateOptions::default()
        };
        create_topic(&root, "expiring", options).await;
        // About 3 MiB: three sealed segments and an active one.
        fill(&root, "expiring", "t", 3_000, 1_000).await;
        assert_eq!(first_offset(&root, "expiring", "t").await, Some(0));
        // Every sealed segment's last message was written before `sent`, so all of them
        // expire by `sent` + 2 s and go by the cleaner pass after that. They may go in
        // different passes (a fill that took over a second spreads their expiries), so wait
        // for the last of them rather than the first.
        let sent = Instant::now();
        let mut first = Some(0);
        let mut size = u64::MAX;
        while sent.elapsed() < Duration::from_secs(10) {
            first = first_offset(&root, "expiring", "t").await;
            let topic = root
                .get_topic(&id("expiring"), &id("t"))
                .await
                .unwrap()
                .unwrap();
            size = topic.size.as_bytes_u64();
            if first.is_some_and(|offset| offset > 0) && size < 2 * MIB {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let elapsed = sent.elapsed();
        println!("first offset {first:?}, {size} B after {elapsed:?} (expiry 2 s, cleaner 1 s)");
        assert!(first.is_some_and(|offset| offset > 0), "nothing expired");
        assert!(
            size < 2 * MIB,
            "size {size} B: the expired sealed segments stayed"
        );
        // Expiry (2 s) plus one cleaner interval (1 s), with room for a loaded machine.
        assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
        // The newest messages are still there and the topic takes more.
        fill(&root, "expiring", "t", 10, 1_000).await;
    });
}

#[test]
fn a_size_cap_holds_the_topic_at_the_cap_plus_the_active_segment() {
    let server = Server::start_with_env(&[("IGGY_DATA_MAINTENANCE_MESSAGES_INTERVAL", "500ms")]);
    run(async {
        let root = root_client(&server).await;
        let options = TopicCreateOptions {
            partitions_count: Some(1),
            max_topic_size: Some(MaxTopicSize::Custom(IggyByteSize::from(2 * MIB))),
            segment_size: Some(IggyByteSize::from(MIB)),
            ..TopicCreateOptions::default()
        };
        create_topic(&root, "capped", options).await;
        fill(&root, "capped", "t", 8_000, 1_000).await;
        let mut size = u64::MAX;
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let topic = root
                .get_topic(&id("capped"), &id("t"))
                .await
                .unwrap()
                .unwrap();
            size = topic.size.as_bytes_u64();
            if size <= 3 * MIB {
                break;
            }
        }
        println!("capped topic holds {size} bytes (cap 2 MiB, 1 MiB segments)");
        assert!(size <= 3 * MIB + MIB / 8, "{size} bytes");
        assert!(
            first_offset(&root, "capped", "t")
                .await
                .is_some_and(|offset| offset > 0)
        );
    });
}

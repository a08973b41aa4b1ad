//! Streams, topics and partitions: create, get, list, update and delete, with the 0-based ids
//! the server assigns and the errors the SDK expects for names that clash or do not exist.

mod common;

use common::*;
use iggy::prelude::*;

#[test]
fn streams_create_get_list_update_delete() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        let first = client
            .create_stream("alpha", &StreamCreateOptions::default())
            .await
            .unwrap();
        assert_eq!((first.id, first.name.as_str()), (0, "alpha"));
        let second = client
            .create_stream("beta", &StreamCreateOptions::default())
            .await
            .unwrap();
        assert_eq!(second.id, 1);

        let error = client
            .create_stream("alpha", &StreamCreateOptions::default())
            .await
            .expect_err("a duplicate name");
        assert_eq!(error.as_code(), 1012, "StreamNameAlreadyExists: {error}");

        let by_name = client
            .get_stream(&id("beta"))
            .await
            .unwrap()
            .expect("beta exists");
        let by_id = client
            .get_stream(&num(1))
            .await
            .unwrap()
            .expect("stream 1 exists");
        assert_eq!(by_name.id, by_id.id);
        assert_eq!(by_name.name, "beta");
        assert!(client.get_stream(&id("missing")).await.unwrap().is_none());

        let names: Vec<String> = client
            .get_streams()
            .await
            .unwrap()
            .into_iter()
            .map(|stream| stream.name)
            .collect();
        assert_eq!(names, ["alpha", "beta"]);

        let rename = StreamUpdateOptions {
            name: Some("gamma".into()),
            ..Default::default()
        };
        client
            .update_stream(&id("alpha"), &rename)
            .await
            .expect("rename");
        assert!(client.get_stream(&id("alpha")).await.unwrap().is_none());
        assert_eq!(
            client
                .get_stream(&id("gamma"))
                .await
                .unwrap()
                .expect("renamed")
                .id,
            0
        );

        client.delete_stream(&id("gamma")).await.expect("delete");
        assert!(client.get_stream(&num(0)).await.unwrap().is_none());
        assert!(
            client.delete_stream(&id("gamma")).await.is_err(),
            "delete twice"
        );
        let again = client
            .create_stream("delta", &StreamCreateOptions::default())
            .await
            .unwrap();
        assert_eq!(again.id, 0, "the lowest free stream id is reused");
    });
}

#[test]
fn topics_create_get_list_update_delete() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        client
            .create_stream("orders", &StreamCreateOptions::default())
            .await
            .unwrap();
        let stream = id("orders");
        let options = TopicCreateOptions {
            partitions_count: Some(3),
            message_expiry: Some(IggyExpiry::NeverExpire),
            ..Default::default()
        };
        let topic = client
            .create_topic(&stream, "events", &options)
            .await
            .expect("create");
        assert_eq!((topic.id, topic.partitions_count), (0, 3));
        let ids: Vec<u32> = topic
            .partitions
            .iter()
            .map(|partition| partition.id)
            .collect();
        assert_eq!(ids, [0, 1, 2]);
        let second = client
            .create_topic(&stream, "audit", &TopicCreateOptions::default())
            .await
            .expect("create with defaults");
        assert_eq!((second.id, second.partitions_count), (1, 1));

        let error = client
            .create_topic(&stream, "events", &TopicCreateOptions::default())
            .await
            .expect_err("a duplicate topic");
        assert_eq!(error.as_code(), 2013, "TopicNameAlreadyExists: {error}");

        let details = client
            .get_topic(&stream, &id("events"))
            .await
            .unwrap()
            .expect("exists");
        assert_eq!(details.name, "events");
        assert_eq!(details.partitions.len(), 3);
        assert!(
            client
                .get_topic(&stream, &id("missing"))
                .await
                .unwrap()
                .is_none()
        );
        let names: Vec<String> = client
            .get_topics(&stream)
            .await
            .unwrap()
            .into_iter()
            .map(|topic| topic.name)
            .collect();
        assert_eq!(names, ["events", "audit"]);
        let stream_details = client.get_stream(&stream).await.unwrap().expect("stream");
        assert_eq!(stream_details.topics_count, 2);

        let update = TopicUpdateOptions {
            name: Some("events-v2".into()),
            message_expiry: Some(IggyExpiry::ExpireDuration(IggyDuration::from(
                3_600_000_000,
            ))),
            ..Default::default()
        };
        client
            .update_topic(&stream, &id("events"), &update)
            .await
            .expect("update");
        let updated = client
            .get_topic(&stream, &num(0))
            .await
            .unwrap()
            .expect("topic 0");
        assert_eq!(updated.name, "events-v2");

        client
            .delete_topic(&stream, &id("audit"))
            .await
            .expect("delete");
        assert!(client.get_topic(&stream, &num(1)).await.unwrap().is_none());
        let missing = client
            .create_topic(&id("nope"), "t", &TopicCreateOptions::default())
            .await;
        assert!(missing.is_err(), "a topic in a missing stream");
    });
}

#[test]
fn partitions_create_and_delete() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, "parts", "grow", 2).await;
        let (stream, topic) = (id("parts"), id("grow"));
        client
            .create_partitions(&stream, &topic, 3)
            .await
            .expect("create partitions");
        let details = client
            .get_topic(&stream, &topic)
            .await
            .unwrap()
            .expect("topic");
        assert_eq!(details.partitions_count, 5);
        let ids: Vec<u32> = details
            .partitions
            .iter()
            .map(|partition| partition.id)
            .collect();
        assert_eq!(ids, [0, 1, 2, 3, 4]);

        send_range(&client, "parts", "grow", 4, 0..5, 5).await;
        assert_eq!(poll_all(&client, "parts", "grow", 4, 5).await.len(), 5);

        client
            .delete_partitions(&stream, &topic, 2)
            .await
            .expect("delete partitions");
        let details = client
            .get_topic(&stream, &topic)
            .await
            .unwrap()
            .expect("topic");
        assert_eq!(details.partitions_count, 3);
        let ids: Vec<u32> = details
            .partitions
            .iter()
            .map(|partition| partition.id)
            .collect();
        assert_eq!(ids, [0, 1, 2], "the highest ids go");
        let stats = client.get_stats().await.unwrap();
        assert_eq!(stats.partitions_count, 3);
    });
}

#[test]
fn deleting_a_stream_deletes_its_topics_and_messages() {
    let server = Server::start();
    run(async {
        let client = root_client(&server).await;
        create_stream_topic(&client, "doomed", "t", 1).await;
        send_range(&client, "doomed", "t", 0, 0..20, 20).await;
        client.delete_stream(&id("doomed")).await.expect("delete");
        create_stream_topic(&client, "doomed", "t", 1).await;
        let polled = client
            .poll_messages(
                &id("doomed"),
                &id("t"),
                0,
                &Consumer::new(id("c")),
                &PollingStrategy::offset(0),
                PollOptions::default(),
            )
            .await
            .expect("poll the new topic");
        assert!(polled.messages.is_empty(), "a recreated topic starts empty");
    });
}

//! Three real server processes in cluster mode, driven by the SDK: an idempotent producer and
//! a consumer group keep going while a backup is stopped (SIGSTOP) and resumed and the
//! primary is killed (SIGKILL); each fault must be followed by new acknowledgements within
//! 20 s. Every acknowledged message must then be consumed exactly once, in order per
//! partition, and once the killed node is restarted every node's partition logs must be the
//! same bytes within 30 s.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use futures_util::StreamExt;
use harness::Cluster;
use iggy::prelude::*;

const STREAM: &str = "replicated";
const TOPIC: &str = "events";
const PARTITIONS: u32 = 2;
/// How long backups wait for a silent primary (the minimum Iggy's rules allow).
const HEARTBEAT_TIMEOUT: &str = "2s";
/// How long the nodes may take to agree once all are back.
const CONVERGE_WITHIN: Duration = Duration::from_secs(30);

/// A client logged in through `address`; retried while the new cluster's first primary has
/// not yet committed the root user.
async fn connect(address: &str) -> IggyClient {
    let connection = format!("iggy://{ROOT_USERNAME}:{ROOT_PASSWORD}@{address}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let client = IggyClient::from_connection_string(&connection).expect("a client");
        match client.connect().await {
            Ok(()) => return client,
            Err(error) if Instant::now() < deadline => {
                eprintln!("connect: {error}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("no login through {address} within 20 s: {error}"),
        }
    }
}

/// Waits until the node at `address` names a leader in its roster.
async fn wait_for_leader(client: &IggyClient) -> u8 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(metadata) = client.get_cluster_metadata().await
            && let Some(leader) = metadata
                .nodes
                .iter()
                .find(|node| node.role == ClusterNodeRole::Leader)
        {
            return leader.replica_id;
        }
        assert!(Instant::now() < deadline, "no leader within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn payload(index: u64) -> String {
    format!("message-{index:06}")
}

/// Every partition log file of a node's data directory, by path below it, with its bytes.
fn partition_logs(data: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut logs = BTreeMap::new();
    let mut pending = vec![data.join("streams")];
    while let Some(directory) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&directory) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "log") {
                let relative = path.strip_prefix(data).expect("below the data directory");
                logs.insert(
                    relative.to_owned(),
                    std::fs::read(&path).unwrap_or_default(),
                );
            }
        }
    }
    logs
}

/// A backup stopped and resumed, then the primary killed, while producing and consuming;
/// the killed node is restarted once production ends and must catch up.
#[test]
fn acknowledged_messages_survive_a_killed_primary_and_a_stopped_backup() {
    faults_while_producing(false);
}

/// A primary killed after the cluster holds far more data than one replica frame: the
/// backups elect a new primary, and the SDK's next send and a read of everything go through.
/// View changes carry only the ops after the commit point (`vsr::Suffix`); they once carried
/// the whole log, which no longer fit a frame past the client frame limit (1 MiB here), so no
/// new primary was ever chosen.
#[test]
fn a_primary_killed_after_more_data_than_a_frame_holds_is_replaced() {
    let env = [("IGGY_MESSAGE_BUS_MAX_MESSAGE_SIZE", "1 MiB")];
    let mut cluster = Cluster::start_with(3, HEARTBEAT_TIMEOUT, &env, "");
    failover_reads_everything_back(&mut cluster, 8);
}

/// The failover with encryption at rest on every node (one key): the backups replicate
/// sealed records, the new primary opens them, and no node's data directory (segments,
/// replica log, metadata) holds a message or a password hash in the clear.
#[test]
fn a_cluster_with_encryption_at_rest_fails_over() {
    let env = [
        ("IGGY_SYSTEM_ENCRYPTION_ENABLED", "true"),
        (
            "IGGY_SYSTEM_ENCRYPTION_KEY",
            "q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=",
        ),
    ];
    let mut cluster = Cluster::start_with(3, HEARTBEAT_TIMEOUT, &env, "");
    failover_reads_everything_back(&mut cluster, 2);
    for node in &cluster.nodes {
        let mut pending = vec![node.data_path().to_owned()];
        let mut files = 0;
        while let Some(directory) = pending.pop() {
            for entry in std::fs::read_dir(&directory).expect("list").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                    continue;
                }
                files += 1;
                let bytes = std::fs::read(&path).unwrap_or_default();
                for clear in [&b"message-0000"[..], b"xxxxxxxxxxxxxxxx", b"$argon2"] {
                    let found = bytes.windows(clear.len()).any(|window| window == clear);
                    let clear = String::from_utf8_lossy(clear);
                    assert!(!found, "{} holds {clear}", path.display());
                }
            }
        }
        assert!(
            files > 5,
            "{} holds the node's files",
            node.data_path().display()
        );
    }
}

/// The same failover with the replica bus inside TLS (`[cluster.tls]`, self-signed): the
/// nodes form the cluster, replicate, elect a new primary and serve everything back.
#[test]
fn a_cluster_on_replica_tls_fails_over() {
    let tls = "[cluster.tls]\nenabled = true\nself_signed = true\n";
    let mut cluster = Cluster::start_with(3, HEARTBEAT_TIMEOUT, &[], tls);
    assert!(
        cluster.nodes[1].log_shows_within("cluster.tls: self-signed", LOG_WAIT),
        "the node set up replica TLS"
    );
    failover_reads_everything_back(&mut cluster, 2);
}

/// A client through `address` once view 0's primary (node 0) leads, with the stream and a
/// topic of `options` created.
async fn connected_with_topic(address: &str, options: &TopicCreateOptions) -> IggyClient {
    let client = connect(address).await;
    assert_eq!(wait_for_leader(&client).await, 0);
    client
        .create_stream(STREAM, &StreamCreateOptions::default())
        .await
        .expect("create the stream");
    client
        .create_topic(&Identifier::named(STREAM).unwrap(), TOPIC, options)
        .await
        .expect("create the topic");
    client
}

/// Sends `batches` batches of 50 messages of 10 KB through a backup's session, kills node 0
/// (view 0's primary), then requires a send within 30 s and every message read back.
fn failover_reads_everything_back(cluster: &mut Cluster, batches: u64) {
    let addresses = cluster.tcp_addresses();
    run(async {
        let client = connected_with_topic(&addresses[1], &TopicCreateOptions::default()).await;
        let (stream, topic) = (
            Identifier::named(STREAM).unwrap(),
            Identifier::named(TOPIC).unwrap(),
        );
        let filler = "x".repeat(10_000);
        let mut sent = 0u64;
        // Each batch of 50 messages of 10 KB stays within a 1 MiB frame.
        for _ in 0..batches {
            let mut batch: Vec<IggyMessage> = (sent..sent + 50)
                .map(|index| IggyMessage::from(format!("{}-{filler}", payload(index))))
                .collect();
            client
                .send_messages(&stream, &topic, &Partitioning::partition_id(0), &mut batch)
                .await
                .expect("send before the kill");
            sent += 50;
        }
        cluster.nodes[0].kill();
        let killed_at = Instant::now();
        loop {
            let mut one = vec![IggyMessage::from(payload(sent))];
            let result = client
                .send_messages(&stream, &topic, &Partitioning::partition_id(0), &mut one)
                .await;
            match result {
                Ok(_) => break,
                Err(error) if killed_at.elapsed() < Duration::from_secs(30) => {
                    eprintln!("send after the kill: {error}; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => panic!("no send within 30 s of the kill: {error}"),
            }
        }
        sent += 1;
        eprintln!(
            "a new primary took a send {:?} after the kill",
            killed_at.elapsed()
        );
        let mut read = 0u64;
        loop {
            let polled = client
                .poll_messages(
                    &stream,
                    &topic,
                    0,
                    &Consumer::new(Identifier::named("reader").unwrap()),
                    &PollingStrategy::offset(read),
                    PollOptions::default(),
                )
                .await
                .expect("poll the new primary");
            if polled.messages.is_empty() {
                break;
            }
            for message in &polled.messages {
                let text = std::str::from_utf8(&message.payload).expect("text");
                assert!(
                    text.starts_with(&payload(read)),
                    "offset {read}: {text:.20}"
                );
                read += 1;
            }
        }
        assert_eq!(read, sent, "every acknowledged message is read back");
    });
}

/// The order: the primary killed and restarted while producing, then a backup
/// stopped. The consumer's offset store in flight when the primary dies is retried on the
/// new primary; its answer must carry the committed-result marker, or the SDK holds the
/// session (and so the producer) for its whole 30 s budget.
#[test]
fn acknowledged_messages_survive_a_restarted_primary_mid_run() {
    faults_while_producing(true);
}

fn faults_while_producing(restart_mid_run: bool) {
    let mut cluster = Cluster::start(3, HEARTBEAT_TIMEOUT);
    let addresses = cluster.tcp_addresses();
    let acked: Arc<Mutex<Vec<u64>>> = Arc::default();
    run(async {
        // Bootstrap through a backup: it answers the roster and routes the client on.
        let client = connect(&addresses[1]).await;
        assert_eq!(
            wait_for_leader(&client).await,
            0,
            "view 0's primary is node 0"
        );
        client
            .create_stream(STREAM, &StreamCreateOptions::default())
            .await
            .expect("create the stream");
        // A copy on every node, which is what the cluster keeps anyway.
        let options = TopicCreateOptions {
            partitions_count: Some(PARTITIONS),
            replication_factor: Some(3),
            ..TopicCreateOptions::default()
        };
        client
            .create_topic(&Identifier::named(STREAM).unwrap(), TOPIC, &options)
            .await
            .expect("create the topic");
        let topic = client
            .get_topic(
                &Identifier::named(STREAM).unwrap(),
                &Identifier::named(TOPIC).unwrap(),
            )
            .await
            .expect("get the topic")
            .expect("the topic");
        for partition in &topic.partitions {
            assert_eq!(partition.members, [0, 1, 2], "every node stores it");
            assert!(
                partition.in_sync_members.contains(&0),
                "the primary is in sync"
            );
        }
        let producer = client
            .producer(STREAM, TOPIC)
            .unwrap()
            .direct(DirectConfig::builder().batch_length(5).build())
            .partitioning(Partitioning::balanced())
            .idempotent()
            .build();
        producer.init().await.expect("producer init");
        let sent = Arc::clone(&acked);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let producing = tokio::spawn(async move {
            let mut next = 0u64;
            let mut failures = 0u32;
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                let batch: Vec<u64> = (next..next + 5).collect();
                let messages = batch
                    .iter()
                    .map(|index| IggyMessage::from(payload(*index)))
                    .collect();
                match producer.send(messages).await {
                    Ok(_) => sent.lock().unwrap().extend(&batch),
                    Err(error) => {
                        if failures < 5 || failures.is_multiple_of(50) {
                            eprintln!("send {next}: {error:?}");
                        }
                        failures += 1;
                    }
                }
                next += 5;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            failures
        });
        let mut consumer = client
            .consumer_group("readers", STREAM, TOPIC)
            .unwrap()
            .create_consumer_group_if_not_exists()
            .polling_strategy(PollingStrategy::next())
            .poll_options(PollOptions {
                commit: CommitPolicy::Auto(AutoCommit {
                    interval: None,
                    every: Some(CommitEvery::Message),
                    after: CommitAfter::Delivery,
                }),
                max_wait: Duration::from_millis(200).into(),
                ..PollOptions::default()
            })
            .build();
        consumer.init().await.expect("consumer init");
        // The messages to wait for, once the producer has stopped (empty until then).
        let consumed_until: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let until = Arc::clone(&consumed_until);
        let consuming = tokio::spawn(async move {
            let mut seen: BTreeMap<u32, Vec<(u64, String)>> = BTreeMap::new();
            let mut found = BTreeSet::new();
            loop {
                let wanted = until.lock().unwrap().clone();
                if !wanted.is_empty() && wanted.is_subset(&found) {
                    return seen;
                }
                let next = tokio::time::timeout(Duration::from_secs(1), consumer.next()).await;
                match next {
                    Ok(Some(Ok(received))) => {
                        let text = String::from_utf8_lossy(&received.message.payload).into_owned();
                        let entries = seen.entry(received.partition_id).or_default();
                        entries.push((received.message.header.offset, text.clone()));
                        found.insert(text);
                    }
                    Ok(Some(Err(error))) => eprintln!("consumer: {error}"),
                    Ok(None) => panic!("the consumer ended"),
                    Err(_) => {}
                }
            }
        });
        let pause = |seconds| tokio::time::sleep(Duration::from_secs(seconds));
        let count = || acked.lock().unwrap().len();
        // Waits until more than `before` messages are acknowledged; returns how long it took.
        let probe_address = addresses[1].clone();
        let progress_after = |before: usize, what: &'static str| {
            let count = &count;
            let probe_address = probe_address.clone();
            async move {
                let started = Instant::now();
                while count() <= before {
                    if started.elapsed() >= Duration::from_secs(20) {
                        // Tell a stuck cluster from a stuck client: a fresh client sends one.
                        let fresh = connect(&probe_address).await;
                        let mut one = vec![IggyMessage::from("probe".to_owned())];
                        let stream = Identifier::named(STREAM).unwrap();
                        let topic = Identifier::named(TOPIC).unwrap();
                        let probe = tokio::time::timeout(
                            Duration::from_secs(10),
                            fresh.send_messages(
                                &stream,
                                &topic,
                                &Partitioning::partition_id(0),
                                &mut one,
                            ),
                        )
                        .await;
                        panic!(
                            "nothing acknowledged within 20 s after {what}; \
                             a fresh client's send: {probe:?}"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                eprintln!("{what}: acknowledged again after {:?}", started.elapsed());
            }
        };
        pause(2).await;
        if restart_mid_run {
            cluster.nodes[0].kill();
            progress_after(count(), "the primary was killed").await;
            pause(2).await;
            cluster.nodes[0].start_again();
            pause(4).await;
            progress_after(count(), "the old primary came back").await;
            cluster.nodes[2].pause();
            progress_after(count(), "a backup was stopped").await;
            pause(2).await;
            cluster.nodes[2].resume();
            pause(2).await;
            progress_after(count(), "the backup resumed").await;
        } else {
            cluster.nodes[2].pause();
            progress_after(count(), "a backup was stopped").await;
            pause(2).await;
            cluster.nodes[2].resume();
            pause(2).await;
            progress_after(count(), "the backup resumed").await;
            cluster.nodes[0].kill();
            progress_after(count(), "the primary was killed").await;
            // A metadata change on the same session, once producing resumed, is served by
            // the new primary (its reply marked committed with the op that made it).
            let started = Instant::now();
            let created = tokio::time::timeout(
                Duration::from_secs(10),
                client.create_stream("after-failover", &StreamCreateOptions::default()),
            )
            .await;
            assert!(
                matches!(created, Ok(Ok(_))),
                "create a stream after the failover: {created:?}"
            );
            eprintln!(
                "a stream created after the failover in {:?}",
                started.elapsed()
            );
            pause(2).await;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let failures = producing.await.expect("the producer task");
        let acked = acked.lock().unwrap().clone();
        eprintln!(
            "{} messages acknowledged, {failures} sends failed",
            acked.len()
        );
        assert!(
            acked.len() >= 100,
            "only {} messages acknowledged ({failures} sends failed)",
            acked.len()
        );

        let wanted: BTreeSet<String> = acked.iter().map(|index| payload(*index)).collect();
        consumed_until.lock().unwrap().clone_from(&wanted);
        let seen = tokio::time::timeout(Duration::from_secs(40), consuming)
            .await
            .unwrap_or_else(|_| {
                panic!("the acknowledged messages were not all consumed within 40 s")
            })
            .expect("the consumer task");
        let found = seen
            .values()
            .flatten()
            .filter(|(_, text)| wanted.contains(text))
            .count();
        let consumed: usize = seen.values().map(Vec::len).sum();
        eprintln!("{consumed} messages consumed, {found} of them acknowledged");
        let mut all = BTreeSet::new();
        for (partition, entries) in &seen {
            for pair in entries.windows(2) {
                assert!(
                    pair[0].0 < pair[1].0,
                    "partition {partition} out of order: {pair:?}"
                );
                assert!(
                    pair[0].1 < pair[1].1,
                    "partition {partition} reordered: {pair:?}"
                );
            }
            for (_, text) in entries {
                assert!(all.insert(text.clone()), "{text} consumed twice");
            }
        }
    });

    if !restart_mid_run {
        cluster.nodes[0].start_again();
    }
    partition_logs_converge(&cluster);
}

/// Every node ends with the same partition logs, byte for byte, within [`CONVERGE_WITHIN`].
fn partition_logs_converge(cluster: &Cluster) {
    let deadline = Instant::now() + CONVERGE_WITHIN;
    loop {
        let logs: Vec<_> = cluster
            .nodes
            .iter()
            .map(|node| partition_logs(node.data_path()))
            .collect();
        let agree = logs.windows(2).all(|pair| pair[0] == pair[1]) && !logs[0].is_empty();
        if agree {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes' partition logs still differ after {CONVERGE_WITHIN:?}: {:?}",
            logs.iter()
                .map(|node| node.values().map(Vec::len).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The first message the node `client` is routed to holds, retried through a failover.
async fn first_offset(client: &IggyClient, within: Duration) -> u64 {
    let started = Instant::now();
    loop {
        let polled = client
            .poll_messages(
                &Identifier::named(STREAM).unwrap(),
                &Identifier::named(TOPIC).unwrap(),
                0,
                &Consumer::new(Identifier::named("reader").unwrap()),
                &PollingStrategy::first(),
                PollOptions::default(),
            )
            .await;
        match polled {
            Ok(polled) if !polled.messages.is_empty() => return polled.messages[0].header.offset,
            Ok(_) => panic!("the partition is empty"),
            Err(error) if started.elapsed() < within => {
                eprintln!("poll the first message: {error}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("no poll within {within:?}: {error}"),
        }
    }
}

/// `DELETE_SEGMENTS` at the primary is replicated: once the primary is killed, the new
/// primary's first message is the one the deletion left, and once the killed node is back
/// (rebuilding its partitions from its replica log) every node's partition logs are the same
/// bytes. When only the primary truncated, the backups still held the deleted messages and
/// the restarted node's replay brought them back.
#[test]
fn deleted_segments_stay_deleted_through_a_failover_and_a_restart() {
    let mut cluster = Cluster::start(3, HEARTBEAT_TIMEOUT);
    let addresses = cluster.tcp_addresses();
    run(async {
        let options = TopicCreateOptions {
            partitions_count: Some(1),
            segment_size: Some(IggyByteSize::from(1024 * 1024)),
            ..TopicCreateOptions::default()
        };
        let client = connected_with_topic(&addresses[1], &options).await;
        let (stream, topic) = (
            Identifier::named(STREAM).unwrap(),
            Identifier::named(TOPIC).unwrap(),
        );
        send_batches(&client, 0, 8, 64 * 1024).await;
        let segments = |details: Option<TopicDetails>| {
            details.expect("the topic").partitions[0].segments_count
        };
        let before = segments(client.get_topic(&stream, &topic).await.unwrap());
        assert!(before >= 3, "5 MiB in 1 MiB segments: {before} segments");
        client
            .delete_segments(&stream, &topic, 0, 2)
            .await
            .expect("delete two segments");
        let after = segments(client.get_topic(&stream, &topic).await.unwrap());
        assert_eq!(after, before - 2);
        let first = first_offset(&client, Duration::from_secs(5)).await;
        assert!(first > 0, "the oldest messages are gone");
        cluster.nodes[0].kill();
        let failed_over = first_offset(&client, Duration::from_secs(30)).await;
        assert_eq!(
            failed_over, first,
            "the new primary deleted the same messages"
        );
    });
    cluster.nodes[0].start_again();
    partition_logs_converge(&cluster);
}

/// Three nodes, one topic of one partition holding 200 messages of about 1 KB, every
/// node's partition log the same; and the nodes' client addresses.
fn cluster_with_a_partition_of_200_messages() -> (Cluster, Vec<String>) {
    let cluster = Cluster::start(3, HEARTBEAT_TIMEOUT);
    let addresses = cluster.tcp_addresses();
    run(async {
        let options = TopicCreateOptions {
            partitions_count: Some(1),
            ..TopicCreateOptions::default()
        };
        let client = connected_with_topic(&addresses[1], &options).await;
        send_batches(&client, 0, 20, 1000).await;
    });
    partition_logs_converge(&cluster);
    (cluster, addresses)
}

/// Sends ten more batches through node 0 from message `first`, then waits for every node's
/// partition log to be the same.
fn send_more_and_converge(cluster: &Cluster, addresses: &[String], first: u64) {
    run(async {
        let client = connect(&addresses[0]).await;
        send_batches(&client, first, 10, 1000).await;
    });
    partition_logs_converge(cluster);
}

/// Sends `batches` batches of ten messages of about `size` bytes to partition 0 through
/// `client`, numbered from `first`.
async fn send_batches(client: &IggyClient, first: u64, batches: u64, size: usize) {
    let (stream, topic) = (
        Identifier::named(STREAM).unwrap(),
        Identifier::named(TOPIC).unwrap(),
    );
    let filler = "x".repeat(size);
    for batch in 0..batches {
        let start = first + batch * 10;
        let mut messages: Vec<IggyMessage> = (start..start + 10)
            .map(|index| IggyMessage::from(format!("{}-{filler}", payload(index))))
            .collect();
        client
            .send_messages(
                &stream,
                &topic,
                &Partitioning::partition_id(0),
                &mut messages,
            )
            .await
            .expect("send a batch");
    }
}

/// A byte flipped in the middle of a stopped backup's replica log, as bit rot would: at its
/// restart the node finds intact records after the damaged one, so it does not take the
/// log for a crash's torn tail (cutting it there and voting as if it still held the entries
/// it had acknowledged); it recovers its log from the other two, and ends with the same
/// partition logs as they.
#[test]
fn a_node_whose_replica_log_was_damaged_recovers_it_from_the_others() {
    let (mut cluster, addresses) = cluster_with_a_partition_of_200_messages();
    cluster.nodes[2].kill();
    let log = cluster.nodes[2].data_path().join("cluster").join("log.vsr");
    let mut bytes = std::fs::read(&log).expect("node 2's replica log");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&log, &bytes).expect("flip a byte");
    cluster.nodes[2].start_again();
    assert!(
        cluster.nodes[2].log_shows_within("is damaged at op", Duration::from_secs(10)),
        "node 2 does not report its damaged log\n{}",
        cluster.nodes[2].log_tail()
    );
    send_more_and_converge(&cluster, &addresses, 200);
}

/// A stopped backup's superblock removed, its log kept: the node must not format a new,
/// empty replica beside the log (it would vote as if it had acknowledged nothing, and a
/// view change could lose committed ops); it recovers from the other two. Then both
/// backups restarted with `--recover` on intact data: the flag is ignored, so they come
/// back normal instead of each waiting for the other's recovery. Last, a damaged superblock
/// is recovered the same way.
#[test]
fn a_lost_or_damaged_superblock_recovers_and_recover_on_intact_data_is_ignored() {
    let (mut cluster, addresses) = cluster_with_a_partition_of_200_messages();
    cluster.nodes[2].kill();
    let superblock = cluster.nodes[2]
        .data_path()
        .join("cluster")
        .join("superblock.vsr");
    std::fs::remove_file(&superblock).expect("remove node 2's superblock");
    cluster.nodes[2].start_again();
    assert!(
        cluster.nodes[2].log_shows_within("superblock is missing", Duration::from_secs(10)),
        "node 2 does not report its missing superblock\n{}",
        cluster.nodes[2].log_tail()
    );
    send_more_and_converge(&cluster, &addresses, 200);
    for node in [1, 2] {
        cluster.nodes[node].kill();
    }
    for node in [1, 2] {
        cluster.nodes[node].start_again_with(&["--recover"]);
    }
    for node in [1, 2] {
        assert!(
            cluster.nodes[node].log_shows_within("--recover ignored", Duration::from_secs(10)),
            "node {node} recovers intact data\n{}",
            cluster.nodes[node].log_tail()
        );
    }
    send_more_and_converge(&cluster, &addresses, 300);
    // A flipped byte in a superblock: that node recovers too, rather than refusing to start.
    cluster.nodes[1].kill();
    let superblock = cluster.nodes[1]
        .data_path()
        .join("cluster")
        .join("superblock.vsr");
    let mut bytes = std::fs::read(&superblock).expect("node 1's superblock");
    bytes[30] ^= 0x01;
    std::fs::write(&superblock, &bytes).expect("flip a byte");
    cluster.nodes[1].start_again();
    assert!(
        cluster.nodes[1].log_shows_within("superblock is damaged", Duration::from_secs(10)),
        "node 1 does not report its damaged superblock\n{}",
        cluster.nodes[1].log_tail()
    );
    send_more_and_converge(&cluster, &addresses, 400);
}

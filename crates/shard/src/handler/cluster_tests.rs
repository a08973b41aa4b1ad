//! Cluster mode's answers that steer the SDK's failover, through [`super::dispatch`] with a
//! stand-in for the replica driver that commits every submission at once: what a node
//! between views says, what a backup says, and the committed-result marker on replicated
//! offset changes (without which a retried call whose first answer was lost holds the
//! client's session for the SDK's whole 30 s budget).

use std::rc::Rc;
use std::sync::Arc;

use proto::Dialect;
use proto::codes::CommandCode;
use proto::commands::messages::{GetPartitionRoute, PartitionRoute};
use proto::commands::offsets::{OffsetSelector, StoreConsumerOffset};
use proto::commands::streams::CreateStream;
use proto::primitives::{AckLevel, Consumer, ConsumerKind, Identifier, OptionalPartition};

use super::metadata_tests::{
    call, code, connection, create_topic, decode, fixture, fixture_with, id, info, name,
    numbered_reply_to, reply_to, root_user,
};
use crate::cluster::{Applied, ClusterStatus, LogProgress, ReplicatedOp, entry_body};
use crate::refusal::Refusal;
use crate::server::{Replication, Server};

/// Turns cluster mode on for `server` as replica `replica_id`, with a driver stand-in that
/// applies each submission as the next op; returns the status to publish views through.
fn replicate(server: &Rc<Server>, replica_id: u8) -> Arc<ClusterStatus> {
    replicate_into(server, replica_id, Rc::default())
}

/// [`replicate`], each op also kept in `log` with its number, as a backup would apply it.
fn replicate_into(server: &Rc<Server>, replica_id: u8, log: OpLog) -> Arc<ClusterStatus> {
    let status = Arc::new(ClusterStatus::default());
    let (submissions_tx, submissions) = crossfire::mpsc::bounded_async(8);
    server.set_replication(Replication::new(
        replica_id,
        Arc::clone(&status),
        submissions_tx,
    ));
    let applier = Rc::clone(server);
    compio::runtime::spawn(async move {
        let mut op = 100;
        while let Ok(submission) = submissions.recv().await {
            op += 1;
            let decoded = entry_body(&submission.body).map(|(_, body)| ReplicatedOp::decode(body));
            let Some(Ok(decoded)) = decoded else {
                submission.reply.send(Err(Refusal::Internal));
                continue;
            };
            log.borrow_mut().push((op, decoded.clone()));
            let outcome = applier.apply_replicated(op, decoded).await;
            submission
                .reply
                .send(outcome.expect("the test's disk does not fail"));
        }
    })
    .detach();
    status
}

/// The ops a driver stand-in committed, in order, with their numbers.
type OpLog = Rc<std::cell::RefCell<Vec<(u64, ReplicatedOp)>>>;

fn store_offset(offset: u64) -> StoreConsumerOffset {
    StoreConsumerOffset {
        selector: OffsetSelector {
            consumer: Consumer {
                kind: ConsumerKind::Consumer,
                id: Identifier::Numeric(7),
            },
            stream_id: id("orders"),
            topic_id: id("events"),
            partition: OptionalPartition(Some(0)),
        },
        offset,
        ack: AckLevel::Quorum,
    }
}

fn route_request() -> GetPartitionRoute {
    GetPartitionRoute {
        stream_id: id("orders"),
        topic_id: id("events"),
        partition_id: 0,
    }
}

/// Partition 0 of the topic [`orders`] creates.
const FIRST_PARTITION: crate::data::PartitionKey = crate::data::PartitionKey {
    stream_id: 0,
    topic_id: 0,
    partition_id: 0,
};

const SECOND_PARTITION: crate::data::PartitionKey = crate::data::PartitionKey {
    partition_id: 1,
    ..FIRST_PARTITION
};

/// `stream/topic` with two partitions, created before cluster mode is on.
async fn orders(server: &Server) {
    orders_with_segments(server, None).await;
}

/// [`orders`], its segments of `segment_size` bytes when given.
async fn orders_with_segments(server: &Server, segment_size: Option<u64>) {
    root_user(server).await;
    let mut root = connection(server, 0, Dialect::V0_12_2);
    let stream = CreateStream {
        name: name("orders"),
        options: proto::primitives::OptionsBlock::default(),
    };
    call(server, &mut root, CommandCode::CreateStream, &stream)
        .await
        .unwrap();
    let mut topic = create_topic("orders", "events", 2);
    if let Some(size) = segment_size {
        let size = proto::primitives::TlvEntry::uint64(size);
        topic.options.set("segment_size", size);
    }
    call(server, &mut root, CommandCode::CreateTopic, &topic)
        .await
        .unwrap();
}

#[test]
fn a_replicated_offset_store_is_answered_with_its_committed_op() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let status = replicate(server, 0);
        status.publish(0, 0, true, 0b110, true);
        let key = FIRST_PARTITION;
        let append = ReplicatedOp::Append {
            key,
            now_us: 1,
            producer: None,
            origin: None,
            batch: crate::data::tests::batch(5, None),
        };
        let replication = server.replication().unwrap();
        let appended = replication.submit(&append, false).await;
        assert!(
            matches!(appended, Ok(Applied::Appended(_, 101))),
            "{appended:?}"
        );
        let mut root = connection(server, 0, Dialect::V0_12_2);
        // The same request twice, as after a lost answer: each is marked with the op that
        // committed it, so the SDK can trust the retry's answer at once.
        for expected_op in [102, 103] {
            let code = CommandCode::StoreConsumerOffset;
            let reply = reply_to(server, &mut root, code, &store_offset(3)).await;
            assert_eq!(reply.status, None);
            assert_eq!(reply.committed_op, expected_op);
        }
    });
}

#[test]
fn between_views_routes_and_partition_requests_are_refused_as_transient() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let status = replicate(server, 1);
        let mut root = connection(server, 0, Dialect::V0_12_2);
        let replication = server.replication().unwrap();

        // Replica 1 is the designated primary of view 1, still changing views: a route
        // naming it, or a `89` from it, would fence the SDK off view 1 for good.
        status.publish(1, 1, false, 0b101, false);
        let asked = route_request();
        let route = call(server, &mut root, CommandCode::GetPartitionRoute, &asked).await;
        assert_eq!(route, Err(code(Refusal::NotAccepted)));
        assert_eq!(replication.refusal(true), Some(Refusal::NotAccepted));
        assert_eq!(replication.refusal(false), Some(Refusal::NotAccepted));

        // A backup in normal operation names its primary and sends partition requests there.
        status.publish(3, 0, true, 0b101, true);
        let route = call(server, &mut root, CommandCode::GetPartitionRoute, &asked).await;
        let route: PartitionRoute = decode(&route.unwrap().unwrap(), Dialect::V0_12_2);
        assert_eq!((route.view, route.primary_replica), (3, 0));
        assert_eq!(replication.refusal(true), Some(Refusal::NotPrimary));
        assert_eq!(replication.refusal(false), Some(Refusal::NotAccepted));

        // A stream it does not know is no final answer while it still applies the log.
        let unknown = GetPartitionRoute {
            stream_id: id("later"),
            ..route_request()
        };
        status.publish(3, 0, true, 0b101, false);
        let route = call(server, &mut root, CommandCode::GetPartitionRoute, &unknown).await;
        assert_eq!(route, Err(code(Refusal::NotAccepted)));
        status.publish(3, 0, true, 0b101, true);
        let route = call(server, &mut root, CommandCode::GetPartitionRoute, &unknown).await;
        let missing = Refusal::Missing(crate::refusal::Missing::Stream);
        assert_eq!(route, Err(code(missing)));

        // The primary in normal operation serves them.
        status.publish(4, 1, true, 0b101, true);
        assert_eq!(replication.refusal(true), None);
    });
}

#[test]
fn a_replicated_metadata_change_is_answered_with_its_op_as_commit_and_marker() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let before = server.commit_number();
        let status = replicate(server, 0);
        status.publish(0, 0, true, 0b110, true);
        let mut root = connection(server, 0, Dialect::V0_12_2);
        let stream = CreateStream {
            name: name("audit"),
            options: proto::primitives::OptionsBlock::default(),
        };
        let reply = reply_to(server, &mut root, CommandCode::CreateStream, &stream).await;
        assert_eq!(reply.status, None);
        // The first op the stand-in driver commits is 101: the metadata's commit jumps to it.
        assert!(before < 101);
        assert_eq!((reply.commit, reply.committed_op), (101, 101));
        assert_eq!(server.commit_number(), 101);
    });
}

/// A send retried after a lost answer (the same client id and request number, as the SDK
/// resends it) commits as a new op but is answered with the first attempt's confirmation and
/// op, and appends nothing; another request number appends.
#[test]
fn a_retried_send_is_answered_with_its_first_outcome_and_not_appended_twice() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let status = replicate(server, 0);
        status.publish(0, 0, true, 0b110, true);
        let key = FIRST_PARTITION;
        let send = |request| ReplicatedOp::Append {
            key,
            now_us: 1,
            producer: None,
            origin: crate::retries::Origin::of(0x00C0_FFEE, request),
            batch: crate::data::tests::batch(5, None),
        };
        let replication = server.replication().unwrap();
        let first = replication.submit(&send(9), false).await;
        let retry = replication.submit(&send(9), false).await;
        let next = replication.submit(&send(10), false).await;
        let (Ok(Applied::Appended(first, 101)), Ok(Applied::Appended(retry, 101))) = (first, retry)
        else {
            panic!("the retry answers the first op, 101");
        };
        assert_eq!(first, retry);
        assert_eq!(first.0[0].base_offset, 0);
        let Ok(Applied::Appended(next, 103)) = next else {
            panic!("another request is applied, as op 103");
        };
        assert_eq!(next.0[0].base_offset, 5, "the retry appended nothing");
    });
}

/// A metadata change retried after a lost answer (the same client id and request number) is
/// answered as its first attempt was, with that attempt's op as commit, and not applied
/// again: a create is not "already exists", partitions are not added twice. Another request
/// number is a new change.
#[test]
fn a_retried_metadata_change_is_answered_with_its_first_outcome_and_applied_once() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let status = replicate(server, 0);
        status.publish(0, 0, true, 0b110, true);
        let mut root = connection(server, 0, Dialect::V0_12_2);
        let stream = CreateStream {
            name: name("audit"),
            options: proto::primitives::OptionsBlock::default(),
        };
        let create = CommandCode::CreateStream;
        let first = numbered_reply_to(server, &mut root, create, &stream, 5).await;
        let retry = numbered_reply_to(server, &mut root, create, &stream, 5).await;
        assert_eq!((first.status, retry.status), (None, None));
        assert_eq!((retry.commit, retry.committed_op), (101, 101));
        let dialect = Dialect::V0_12_2;
        assert_eq!(first.encode_body(dialect), retry.encode_body(dialect));
        let again = numbered_reply_to(server, &mut root, create, &stream, 6).await;
        assert!(
            matches!(again.body, crate::outcome::Body::Refused(_)),
            "a new request is refused: the stream exists"
        );

        let partitions = proto::commands::partitions::CreatePartitions {
            stream_id: id("orders"),
            topic_id: id("events"),
            partitions_count: 3,
        };
        let add = CommandCode::CreatePartitions;
        for _ in 0..2 {
            let reply = numbered_reply_to(server, &mut root, add, &partitions, 7).await;
            assert_eq!(reply.status, None);
        }
        let metadata = server.metadata.borrow();
        let topic = metadata
            .stream(&id("orders"))
            .unwrap()
            .topic(&id("events"))
            .unwrap();
        assert_eq!(topic.partitions.len(), 5, "2, and 3 added once");
    });
}

/// A retry that reaches the log beside its first attempt (validated before that applied)
/// commits as a no-op answered with the first attempt's commit, on every node alike.
#[test]
fn a_second_copy_of_a_change_in_the_log_applies_as_nothing() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let status = replicate(server, 0);
        status.publish(0, 0, true, 0b110, true);
        let op = ReplicatedOp::MetadataFrom {
            op: crate::metadata::MetadataOp::CreatePartitions {
                stream_id: 0,
                topic_id: 0,
                count: 1,
                created_at: 1,
            },
            origin: crate::retries::Origin::of(0x00C0_FFEE, 3).unwrap(),
        };
        let replication = server.replication().unwrap();
        let first = replication.submit(&op, true).await;
        let copy = replication.submit(&op, true).await;
        assert_eq!(first, Ok(Applied::Metadata { commit: 101 }));
        assert_eq!(copy, Ok(Applied::Metadata { commit: 101 }));
        let metadata = server.metadata.borrow();
        let topic = metadata
            .stream(&id("orders"))
            .unwrap()
            .topic(&id("events"))
            .unwrap();
        assert_eq!(topic.partitions.len(), 3, "one partition added, once");
    });
}

/// Consumer-group create and delete, committed outside `Call::commit`, answer a retry as
/// their first attempt did: the same group, and a delete that succeeds.
#[test]
fn retried_group_changes_are_answered_with_their_first_outcome() {
    use proto::commands::groups::{CreateConsumerGroup, DeleteConsumerGroup};
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let status = replicate(server, 0);
        status.publish(0, 0, true, 0b110, true);
        let mut root = connection(server, 0, Dialect::V0_12_2);
        let create = CreateConsumerGroup {
            stream_id: id("orders"),
            topic_id: id("events"),
            name: name("readers"),
        };
        let code = CommandCode::CreateConsumerGroup;
        let first = numbered_reply_to(server, &mut root, code, &create, 8).await;
        let retry = numbered_reply_to(server, &mut root, code, &create, 8).await;
        let dialect = Dialect::V0_12_2;
        assert_eq!(first.encode_body(dialect), retry.encode_body(dialect));
        assert_eq!(retry.committed_op, first.committed_op);
        let delete = DeleteConsumerGroup {
            stream_id: id("orders"),
            topic_id: id("events"),
            group_id: id("readers"),
        };
        let code = CommandCode::DeleteConsumerGroup;
        let first = numbered_reply_to(server, &mut root, code, &delete, 9).await;
        let retry = numbered_reply_to(server, &mut root, code, &delete, 9).await;
        assert_eq!(first.encode_body(dialect), retry.encode_body(dialect));
        assert!(
            !matches!(retry.body, crate::outcome::Body::Refused(_)),
            "not \"not found\""
        );
    });
}

/// `orders/events` as [`orders`] makes it, but with 1 MiB segments, so a few sends seal some.
async fn orders_in_small_segments(server: &Server) {
    orders_with_segments(server, Some(1 << 20)).await;
}

/// A batch of ten 100 KiB messages.
fn large_batch() -> Vec<u8> {
    let payload = vec![b'p'; 100 << 10];
    let messages: Vec<proto::batch::OutgoingMessage<'_>> = (1..=10)
        .map(|id| proto::batch::OutgoingMessage {
            id,
            origin_timestamp: 1_700_000_000_000_000,
            payload: &payload,
            user_headers: &[],
        })
        .collect();
    let mut bytes = Vec::new();
    proto::batch::encode_batch(&messages, None, &mut bytes).unwrap();
    bytes
}

/// Replicates `count` appends of [`large_batch`] to `key`.
async fn append_large(replication: &Replication, key: crate::data::PartitionKey, count: usize) {
    for _ in 0..count {
        let append = ReplicatedOp::Append {
            key,
            now_us: 1,
            producer: None,
            origin: None,
            batch: large_batch(),
        };
        let appended = replication.submit(&append, false).await;
        assert!(
            matches!(appended, Ok(Applied::Appended(..))),
            "{appended:?}"
        );
    }
}

/// Applies the ops of `log` after the first `applied` to `backup`, in order; returns how many
/// it now holds.
async fn follow(backup: &Server, log: &OpLog, applied: usize) -> usize {
    let ops: Vec<(u64, ReplicatedOp)> = log.borrow()[applied..].to_vec();
    for (number, op) in ops {
        let applied = backup.apply_replicated(number, op).await;
        assert!(applied.is_ok(), "op {number}: {applied:?}");
    }
    log.borrow().len()
}

/// `DELETE_SEGMENTS` and a purge at the primary are replicated ops, answered with their op
/// as the committed-result marker, and a backup applying the same ops in order ends with the
/// same partitions. Before they were replicated, the primary alone truncated: a failover, or
/// the primary's own restart (which replays its replica log), brought the messages back.
#[test]
fn segment_deletions_and_purges_are_replicated_and_apply_alike_on_a_backup() {
    let (primary_fixture, backup_fixture) = (fixture(), fixture());
    let (primary, backup) = (&primary_fixture.server, &backup_fixture.server);
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders_in_small_segments(primary).await;
        orders_in_small_segments(backup).await;
        let log = OpLog::default();
        let status = replicate_into(primary, 0, Rc::clone(&log));
        status.publish(0, 0, true, 0b110, true);
        let replication = primary.replication().unwrap();
        for key in [FIRST_PARTITION, SECOND_PARTITION] {
            append_large(replication, key, 8).await;
        }
        let mut applied = follow(backup, &log, 0).await;
        let figures = |server: &Server, key| server.data.partition_stats(key).unwrap();
        let before = figures(primary, FIRST_PARTITION);
        assert!(before.segments_count >= 3, "{before:?}");
        assert_eq!(figures(backup, FIRST_PARTITION), before);

        let mut root = connection(primary, 0, Dialect::V0_12_2);
        let delete = proto::commands::partitions::DeleteSegments {
            stream_id: id("orders"),
            topic_id: id("events"),
            partition_id: 0,
            segments_count: 2,
        };
        let reply = reply_to(primary, &mut root, CommandCode::DeleteSegments, &delete).await;
        assert_eq!(reply.status_code(), 0);
        let op = log.borrow().last().map(|(number, _)| *number).unwrap();
        assert!(
            matches!(
                log.borrow().last(),
                Some((_, ReplicatedOp::DeleteSegments { .. }))
            ),
            "the deletion is an op"
        );
        assert_eq!(reply.committed_op, op, "answered with its op's marker");
        let after = figures(primary, FIRST_PARTITION);
        assert_eq!(after.segments_count, before.segments_count - 2);
        assert!(after.first_offset > 0, "{after:?}");
        assert_eq!(after.next_offset, before.next_offset);
        applied = follow(backup, &log, applied).await;
        assert_eq!(
            figures(backup, FIRST_PARTITION),
            after,
            "the backup deleted alike"
        );

        let mut legacy = connection(primary, 0, Dialect::V0_11_0);
        let purge = proto::commands::legacy::PurgeTopic {
            stream_id: id("orders"),
            topic_id: id("events"),
        };
        let purged = call(primary, &mut legacy, CommandCode::PurgeTopic, &purge).await;
        assert_eq!(purged, Ok(None));
        assert!(matches!(
            log.borrow().last(),
            Some((
                _,
                ReplicatedOp::Purge {
                    topic_id: Some(0),
                    ..
                }
            ))
        ));
        follow(backup, &log, applied).await;
        for key in [FIRST_PARTITION, SECOND_PARTITION] {
            let purged = figures(primary, key);
            assert_eq!((purged.messages_count, purged.next_offset), (0, 0));
            assert_eq!(figures(backup, key), purged, "the backup purged alike");
        }
    });
}

/// A committed op that a backup cannot apply for a reason of its own (here an append to a
/// partition whose directory could not be made) is a fault of that node, not a refusal:
/// before, it was dropped like one, and the backup went on voting, and serving once
/// primary, without the messages. A refusal every node shares stays a refusal.
#[test]
fn a_backup_that_cannot_apply_a_committed_op_reports_its_own_fault() {
    let (primary_fixture, backup_fixture) = (fixture(), fixture());
    let (primary, backup) = (&primary_fixture.server, &backup_fixture.server);
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(primary).await;
        orders(backup).await;
        let log = OpLog::default();
        let status = replicate_into(primary, 0, Rc::clone(&log));
        status.publish(0, 0, true, 0b110, true);
        let mut root = connection(primary, 0, Dialect::V0_12_2);
        let topic = create_topic("orders", "late", 1);
        call(primary, &mut root, CommandCode::CreateTopic, &topic)
            .await
            .unwrap();
        // Where the new topic's partitions go on the backup, a file.
        let topics = backup_fixture.root.join("streams").join("0").join("topics");
        std::fs::create_dir_all(&topics).unwrap();
        std::fs::write(topics.join("1"), b"not a directory").unwrap();
        let (number, op) = log.borrow().last().cloned().unwrap();
        // The topic applies (its partition is retried later), but an append to it cannot.
        let created = backup.apply_replicated(number, op).await;
        assert!(
            matches!(created, Ok(Ok(Applied::Metadata { .. }))),
            "{created:?}"
        );
        let late = crate::data::PartitionKey {
            topic_id: 1,
            ..FIRST_PARTITION
        };
        let append = |key| ReplicatedOp::Append {
            key,
            now_us: 1,
            producer: None,
            origin: None,
            batch: crate::data::tests::batch(5, None),
        };
        let fault = backup.apply_replicated(number + 1, append(late)).await;
        assert_eq!(fault.map(drop).unwrap_err().op, number + 1);
        let nowhere = crate::data::PartitionKey {
            topic_id: 9,
            ..FIRST_PARTITION
        };
        let refused = backup.apply_replicated(number + 2, append(nowhere)).await;
        assert!(
            matches!(refused, Ok(Err(Refusal::Missing(_)))),
            "{refused:?}"
        );
        let applied = backup
            .apply_replicated(number + 3, append(FIRST_PARTITION))
            .await;
        assert!(
            matches!(applied, Ok(Ok(Applied::Appended(..)))),
            "{applied:?}"
        );
    });
}

/// `DELETE_SEGMENTS` retried after a lost answer (the same client and request number) is
/// answered with the first attempt's op and deletes nothing more, also when the retry's copy
/// reaches the log beside the first; another request number deletes again.
#[test]
fn a_retried_segment_deletion_deletes_once() {
    let fixture = fixture();
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders_in_small_segments(server).await;
        let status = replicate(server, 0);
        status.publish(0, 0, true, 0b110, true);
        let replication = server.replication().unwrap();
        append_large(replication, FIRST_PARTITION, 10).await;
        let segments = || {
            server
                .data
                .partition_stats(FIRST_PARTITION)
                .unwrap()
                .segments_count
        };
        let before = segments();
        assert!(before >= 4, "{before} segments");
        let mut root = connection(server, 0, Dialect::V0_12_2);
        let delete = proto::commands::partitions::DeleteSegments {
            stream_id: id("orders"),
            topic_id: id("events"),
            partition_id: 0,
            segments_count: 1,
        };
        let code = CommandCode::DeleteSegments;
        let first = numbered_reply_to(server, &mut root, code, &delete, 21).await;
        let retry = numbered_reply_to(server, &mut root, code, &delete, 21).await;
        assert_eq!((first.status_code(), retry.status_code()), (0, 0));
        assert_eq!(retry.committed_op, first.committed_op);
        assert_eq!(segments(), before - 1, "the retry deleted nothing");
        // A copy of the retry that reached the log beside the first applies as nothing.
        let copy = ReplicatedOp::DeleteSegments {
            key: FIRST_PARTITION,
            below: u64::MAX,
            origin: crate::retries::Origin::of(super::metadata_tests::CLIENT, 21),
        };
        let applied = replication.submit(&copy, true).await;
        assert_eq!(applied, Ok(Applied::Truncated(first.committed_op)));
        assert_eq!(segments(), before - 1);
        let next = numbered_reply_to(server, &mut root, code, &delete, 22).await;
        assert_eq!(next.status_code(), 0);
        assert!(next.committed_op > first.committed_op);
        assert_eq!(segments(), before - 2, "a new request deletes again");
    });
}

/// Settings of replica `me` of a three-node cluster, its roster listed as a configuration
/// may list it, not in id order.
fn three_nodes(me: u8) -> crate::server::ServerInfo {
    let nodes = [2, 0, 1]
        .into_iter()
        .map(|replica_id| crate::cluster::RosterNode {
            replica_id,
            name: format!("node-{replica_id}"),
            ip: String::from("127.0.0.1"),
            tcp_port: 8090 + u16::from(replica_id),
            quic_port: 0,
            http_port: 0,
            websocket_port: 0,
        })
        .collect();
    crate::server::ServerInfo {
        roster: crate::cluster::Roster {
            cluster_name: String::from("iggy-cluster"),
            replica_id: me,
            nodes,
        },
        ..info()
    }
}

/// The `members` and `in_sync_members` of the first partition of `orders/events`.
async fn first_partition_members(server: &Server) -> (Vec<u8>, Vec<u8>) {
    use proto::commands::topics::{GetTopic, TopicDetails};
    let mut root = connection(server, 0, Dialect::V0_12_2);
    let get = GetTopic {
        stream_id: id("orders"),
        topic_id: id("events"),
    };
    let payload = call(server, &mut root, CommandCode::GetTopic, &get)
        .await
        .unwrap()
        .unwrap();
    let details: TopicDetails = decode(&payload, Dialect::V0_12_2);
    let partition = &details.partitions[0];
    (
        partition.members.as_slice().to_vec(),
        partition.in_sync_members.as_slice().to_vec(),
    )
}

/// Every partition is on every node, so its members are the roster; in sync are the
/// nodes known to hold every committed op, which only the primary can tell of the others.
#[test]
fn partitions_list_every_node_and_the_primary_tells_which_are_in_sync() {
    let fixture = fixture_with(three_nodes(0));
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let status = replicate(server, 0);
        let progress = LogProgress {
            op: 9,
            commit: 9,
            applied: 9,
        };
        // The primary reaches both backups; only replica 1 acknowledged up to the commit.
        status.publish(2, 0, true, 0b110, true);
        status.publish_progress(progress, |replica| if replica == 1 { 9 } else { 4 });
        let (members, in_sync) = first_partition_members(server).await;
        assert_eq!(members, [0, 1, 2]);
        assert_eq!(in_sync, [0, 1]);
        // Replica 1 unreachable: no longer counted, whatever it acknowledged.
        status.publish(2, 0, true, 0b100, true);
        assert_eq!(first_partition_members(server).await.1, [0]);
        // As a backup (replica 1 leads) this node can vouch only for itself.
        status.publish(3, 1, true, 0b110, true);
        assert_eq!(first_partition_members(server).await.1, [0]);
        // Not caught up: not even for itself.
        status.publish(3, 1, true, 0b110, false);
        assert_eq!(
            first_partition_members(server).await,
            (vec![0, 1, 2], vec![])
        );
    });
}

/// A three-node cluster takes a replication factor of up to three, and defaults to three.
#[test]
fn a_cluster_topic_takes_a_replication_factor_up_to_the_cluster_size() {
    use proto::commands::topics::TopicDetails;
    use proto::primitives::TlvEntry;
    let fixture = fixture_with(three_nodes(0));
    let server = &fixture.server;
    compio::runtime::Runtime::new().unwrap().block_on(async {
        orders(server).await;
        let status = replicate(server, 0);
        status.publish(0, 0, true, 0b110, true);
        let mut root = connection(server, 0, Dialect::V0_12_2);
        let mut three = create_topic("orders", "three", 1);
        three.options.set("replication_factor", TlvEntry::uint32(3));
        let created = call(server, &mut root, CommandCode::CreateTopic, &three).await;
        let details: TopicDetails = decode(&created.unwrap().unwrap(), Dialect::V0_12_2);
        assert_eq!(
            details.topic.options.get("replication_factor"),
            Some(&TlvEntry::uint32(3))
        );
        let mut four = create_topic("orders", "four", 1);
        four.options.set("replication_factor", TlvEntry::uint32(4));
        let refused = call(server, &mut root, CommandCode::CreateTopic, &four).await;
        assert_eq!(
            refused,
            Err(code(Refusal::TopicOption(
                crate::refusal::TopicOption::InvalidValue
            )))
        );
        let plain = create_topic("orders", "plain", 1);
        let created = call(server, &mut root, CommandCode::CreateTopic, &plain).await;
        let details: TopicDetails = decode(&created.unwrap().unwrap(), Dialect::V0_12_2);
        assert_eq!(
            details.topic.derived_options.get("replication_factor"),
            Some(&TlvEntry::uint32(3))
        );
    });
}

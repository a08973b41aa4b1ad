//! Two shards on two threads, as the binary runs them: commits made from either shard reach
//! both replicas before they are answered, partitions are split between the shards and
//! reachable from both; the lanes between shards are bounded.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use proto::primitives::OptionsBlock;
use segment::log::ReadStart;

use futures_util::FutureExt;

use super::{Inbox, Node, ShardGone};
use crate::clock::SystemClock;
use crate::data::{GroupConfig, PartitionKey};
use crate::hashing::HashPool;
use crate::mail::{LANE_CAPACITY, ShardMessage};
use crate::metadata::{Metadata, MetadataOp, TopicSettings};
use crate::server::{Server, ServerInfo};

fn info() -> ServerInfo {
    ServerInfo {
        roster: crate::cluster::Roster::one_node("iggy-cluster", "iggy-node", "127.0.0.1"),
        tcp_port: 0,
        websocket_port: 0,
        http_port: 0,
        quic_port: 0,
        started_at_us: 0,
        logins: crate::login_limit::LoginLimits::default(),
        groups: GroupConfig::default(),
        validate_checksum: false,
        enforce_fsync: false,
        sync_interval_us: segment::log::SYNC_INTERVAL_DEFAULT_US,
        accept_metadata_loss: false,
    }
}

fn temporary_root() -> PathBuf {
    let root = std::env::temp_dir().join(format!("shard-node-tests-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    root
}

/// Runs the sequencer, shard 1, on its own thread until `stop` fires.
fn spawn_sequencer(
    node: Arc<Node>,
    inbox: Inbox,
    root: PathBuf,
    stop: crossfire::oneshot::RxOneshot<()>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let runtime = compio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let server = Server::for_shard(info(), Metadata::default(), root, node, 1);
            server.open_partitions().await.unwrap();
            let stopped = async move {
                let _ = stop.await;
            };
            inbox.serve(Rc::clone(&server), stopped).await;
            server.close().await.unwrap();
        });
    })
}

fn create_topic(partitions_count: u32) -> [MetadataOp; 2] {
    [
        MetadataOp::CreateStream {
            id: 1,
            name: "orders".into(),
            created_at: 1,
            options: OptionsBlock::default(),
        },
        MetadataOp::CreateTopic {
            stream_id: 1,
            id: 1,
            name: "events".into(),
            created_at: 2,
            partitions_count,
            options: OptionsBlock::default(),
            settings: TopicSettings::default(),
        },
    ]
}

#[test]
fn two_shards_share_metadata_and_partitions_through_a_sequencer_other_than_shard_0() {
    let root = temporary_root();
    let (node, inboxes) = Node::with(2, 1, Arc::new(SystemClock), HashPool::inline());
    let [replica_inbox, sequencer_inbox]: [Inbox; 2] = inboxes.try_into().unwrap();
    let (stop, stopping) = crossfire::oneshot::oneshot();
    let sequencer = spawn_sequencer(Arc::clone(&node), sequencer_inbox, root.clone(), stopping);
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let replica = Server::for_shard(
            info(),
            Metadata::default(),
            root.clone(),
            Arc::clone(&node),
            0,
        );
        assert!(!replica.place().is_leader());
        let never = std::future::pending::<()>();
        compio::runtime::spawn(replica_inbox.serve(Rc::clone(&replica), never)).detach();

        // A commit made on the replica goes through the sequencer and is applied on both
        // before it is answered.
        for op in create_topic(4) {
            let committed = replica.commit(op).await;
            assert_eq!(committed, Ok(replica.commit_number()));
        }
        assert_eq!(replica.commit_number(), 2);

        // The four partitions are split between the shards and all routed.
        let topic = replica.metadata.borrow().streams[&1].topics[&1].clone();
        let keys: Vec<PartitionKey> = topic
            .partitions
            .keys()
            .map(|&partition_id| PartitionKey {
                stream_id: 1,
                topic_id: 1,
                partition_id,
            })
            .collect();
        assert_eq!(keys.len(), 4);
        let place = replica.place();
        let owned_here = keys.iter().filter(|key| place.owns(**key)).count();
        assert!((1..4).contains(&owned_here), "{owned_here} of 4");
        assert_eq!(node.routes.len(), 4);
        for key in &keys {
            let owner = node.routes.pin().get(key).map(|route| route.shard);
            assert_eq!(owner, Some(place.owner(*key)), "{key:?}");
        }

        // Appends reach every partition, whichever shard owns it, and read back.
        for key in &keys {
            let handle = replica.data.partition(*key).unwrap();
            let batch = crate::data::tests::batch(3, None);
            let appended = handle.append(batch, 1, None).await.unwrap();
            assert_eq!(appended.base_offset, 0);
            let records = handle.read(ReadStart::First, 10, 1 << 20).await.unwrap();
            assert_eq!(records.messages_count, 3);
            assert_eq!(handle.stats().messages_count, 3);
        }
        assert_eq!(replica.data.totals(Some(1), None).messages_count, 12);

        // Deleting the topic closes the partitions on both shards and removes its files.
        // The replica applies the op to its state in place: no copy of the metadata is made
        // while no reader holds the previous state.
        let before = Rc::as_ptr(&replica.metadata.borrow());
        let delete = MetadataOp::DeleteTopic {
            stream_id: 1,
            id: 1,
        };
        replica.commit(delete).await.unwrap();
        assert_eq!(Rc::as_ptr(&replica.metadata.borrow()), before);
        assert!(replica.metadata.borrow().streams[&1].topics.is_empty());
        assert_eq!(node.routes.len(), 0);
        assert!(!root.join("streams/1/topics/1").exists());
        replica.close().await.unwrap();
    });
    stop.send(());
    sequencer.join().unwrap();
    let _ = std::fs::remove_dir_all(&root);
}

/// A lane holds [`LANE_CAPACITY`] messages; the next sender waits (backpressure), and learns
/// the shard is gone when its inbox is dropped, instead of queueing without bound.
#[test]
fn a_full_lane_makes_the_sender_wait() {
    let (node, inboxes) = Node::new(2);
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let closed = |client_id| ShardMessage::ConnectionClosed {
            client_id,
            reply: crossfire::oneshot::oneshot().0,
        };
        for client_id in 0..LANE_CAPACITY as u128 {
            let sent = node.send(1, closed(client_id)).now_or_never();
            assert_eq!(sent, Some(Ok(())), "message {client_id} fits");
        }
        let mut waiting = Box::pin(node.send(1, closed(u128::MAX)));
        assert_eq!((&mut waiting).now_or_never(), None, "the sender waits");
        drop(inboxes);
        assert_eq!(waiting.await, Err(ShardGone(1)));
        assert_eq!(node.send(5, closed(0)).await, Err(ShardGone(5)));
    });
}

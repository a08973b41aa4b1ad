//! Two shards on two threads, as the binary runs them: commits made from either shard reach
//! both replicas before they are answered, partitions are split between the shards and
//! reachable from both, and sessions the leader registers are live everywhere.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use proto::primitives::OptionsBlock;
use segment::log::ReadStart;

use super::{Inbox, Node};
use crate::data::{GroupConfig, PartitionKey, ShardPlace};
use crate::metadata::{Metadata, MetadataOp, TopicSettings};
use crate::server::{Server, ServerInfo};

fn info() -> ServerInfo {
    ServerInfo {
        cluster_name: "iggy-cluster".into(),
        node_name: "iggy-node".into(),
        node_ip: "127.0.0.1".into(),
        tcp_port: 0,
        started_at_us: 0,
        logins: crate::login_limit::LoginLimits::default(),
        groups: GroupConfig::default(),
        validate_checksum: false,
    }
}

fn temporary_root() -> PathBuf {
    let root = std::env::temp_dir().join(format!("shard-node-tests-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    root
}

/// Runs shard 1 on its own thread until `stop` fires.
fn spawn_replica(
    node: Arc<Node>,
    inbox: Inbox,
    root: PathBuf,
    stop: crossfire::oneshot::RxOneshot<()>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let runtime = compio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let server = Rc::new(Server::for_shard(
                info(),
                Metadata::default(),
                root,
                node,
                1,
            ));
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
fn two_shards_share_metadata_partitions_and_sessions() {
    let root = temporary_root();
    let (node, inboxes) = Node::new(2);
    let [leader_inbox, replica_inbox]: [Inbox; 2] = inboxes.try_into().unwrap();
    let (stop, stopping) = crossfire::oneshot::oneshot();
    let replica = spawn_replica(Arc::clone(&node), replica_inbox, root.clone(), stopping);
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let leader = Rc::new(Server::for_shard(
            info(),
            Metadata::default(),
            root.clone(),
            Arc::clone(&node),
            0,
        ));
        let never = std::future::pending::<()>();
        compio::runtime::spawn(leader_inbox.serve(Rc::clone(&leader), never)).detach();

        // A commit made on the replica goes through the leader and is applied on both.
        for op in create_topic(4) {
            let committed = leader
                .on_shard(1, move |replica| {
                    Box::pin(async move { replica.commit(op).await })
                })
                .await
                .unwrap();
            assert_eq!(committed, Ok(leader.commit_number()));
        }
        let replica_commit = leader
            .on_shard(1, |replica| {
                Box::pin(async move { replica.commit_number() })
            })
            .await
            .unwrap();
        assert_eq!(replica_commit, leader.commit_number());

        // The four partitions are split between the shards and all routed.
        let topic = leader.metadata.borrow().streams[&1].topics[&1].clone();
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
        let place = ShardPlace { index: 0, count: 2 };
        let owned_by_leader = keys.iter().filter(|key| place.owns(**key)).count();
        assert!((1..4).contains(&owned_by_leader), "{owned_by_leader} of 4");
        assert_eq!(node.routes.len(), 4);
        for key in &keys {
            let owner = node.routes.pin().get(key).map(|route| route.shard);
            assert_eq!(owner, Some(place.owner(*key)), "{key:?}");
        }

        // Appends from the replica's side reach every partition, whichever shard owns it,
        // and the leader reads them back.
        for key in &keys {
            let key = *key;
            let appended = leader
                .on_shard(1, move |replica| {
                    Box::pin(async move {
                        let handle = replica.data.partition(key).unwrap();
                        let batch = crate::data::tests::batch(3, None);
                        handle
                            .append(batch, 1, None)
                            .await
                            .map(|outcome| outcome.base_offset)
                    })
                })
                .await
                .unwrap();
            assert_eq!(appended.unwrap(), 0);
            let handle = leader.data.partition(key).unwrap();
            let records = handle.read(ReadStart::First, 10, 1 << 20).await.unwrap();
            assert_eq!(records.messages_count, 3);
            assert_eq!(handle.stats().messages_count, 3);
        }
        assert_eq!(leader.data.totals(Some(1), None).messages_count, 12);

        // A session the leader registers is live on the replica.
        let record = leader
            .sessions
            .borrow_mut()
            .register(7, 0, proto::commands::session::BindSecret([1; 32]), None)
            .unwrap();
        let live = leader
            .on_shard(1, move |replica| {
                Box::pin(async move { replica.sessions.borrow().is_live(7, record.session) })
            })
            .await
            .unwrap();
        assert!(live);

        // Deleting the topic closes the partitions on both shards and removes its files.
        let delete = MetadataOp::DeleteTopic {
            stream_id: 1,
            id: 1,
        };
        leader.commit(delete).await.unwrap();
        assert_eq!(node.routes.len(), 0);
        assert!(!root.join("streams/1/topics/1").exists());
        leader.close().await.unwrap();
    });
    stop.send(());
    replica.join().unwrap();
    let _ = std::fs::remove_dir_all(&root);
}

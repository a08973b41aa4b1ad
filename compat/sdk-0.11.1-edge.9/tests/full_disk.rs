//! A full disk (issue 9, item 4), on a small tmpfs mounted for the test (root only; the test
//! says so and passes without running elsewhere): appends fail cleanly, nothing acknowledged
//! is lost or duplicated, reads keep working, a metadata change is refused cleanly, writes
//! resume when space returns, and a restart on the full disk works.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use iggy::prelude::*;

const PAYLOAD_BYTES: usize = 1_000;

/// A tmpfs mounted at a fresh directory, unmounted on drop.
struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    fn mount(megabytes: u32) -> Option<Self> {
        // One directory per disk: the tests of this file run at once in one process.
        static DISKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let disk = DISKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("iggy-full-disk-{}-{disk}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).ok()?;
        let size = format!("size={megabytes}m");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
            .arg(&path)
            .status()
            .is_ok_and(|status| status.success());
        mounted.then_some(Self { path })
    }

    fn grow(&self, megabytes: u32) {
        let options = format!("remount,size={megabytes}m");
        let status = Command::new("mount")
            .args(["-o", &options])
            .arg(&self.path)
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {}", self.path.display());
    }

    /// Takes every byte left with a ballast file.
    fn fill_up(&self) {
        use std::io::Write;
        let mut ballast = std::fs::File::create(self.path.join("ballast")).expect("ballast");
        let chunk = vec![0_u8; 64 << 10];
        while ballast.write_all(&chunk).is_ok() {}
        while ballast.write_all(&chunk[..1]).is_ok() {}
    }

    fn data(&self) -> &Path {
        &self.path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
        let _ = std::fs::remove_dir(&self.path);
    }
}

async fn send_one_batch(client: &IggyClient, first: u64) -> Result<(), IggyError> {
    let mut batch: Vec<IggyMessage> = (first..first + 100)
        .map(|index| {
            let mut payload = index.to_le_bytes().to_vec();
            payload.resize(PAYLOAD_BYTES, b'x');
            IggyMessage::builder()
                .payload(payload.into())
                .build()
                .unwrap()
        })
        .collect();
    client
        .send_messages(
            &id("full"),
            &id("t"),
            &Partitioning::partition_id(0),
            &mut batch,
        )
        .await
        .map(drop)
}

/// Reads partition 0 from offset 0 and checks it holds exactly messages 0..count in order.
async fn assert_exactly(client: &IggyClient, count: u64) {
    let mut next = 0_u64;
    loop {
        let polled = client
            .poll_messages(
                &id("full"),
                &id("t"),
                0,
                &Consumer::new(id("checker")),
                &PollingStrategy::offset(next),
                PollOptions::default(),
            )
            .await
            .expect("reads work on a full disk");
        if polled.messages.is_empty() {
            break;
        }
        for message in &polled.messages {
            assert_eq!(message.header.offset, next, "dense offsets");
            let index = u64::from_le_bytes(message.payload[..8].try_into().unwrap());
            assert_eq!(index, next, "message {next} once, in order");
            next += 1;
        }
    }
    assert_eq!(next, count, "every acknowledged message, nothing more");
}

#[test]
fn a_full_disk_refuses_cleanly_and_recovers() {
    let Some(disk) = SmallDisk::mount(24) else {
        println!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let data = disk.data().join("data");
    let data_env = data.to_string_lossy().into_owned();
    let mut server = Server::start_with_env(&[
        ("IGGY_SYSTEM_PATH", data_env.as_str()),
        ("IGGY_DATA_MAINTENANCE_MESSAGES_CLEANER_ENABLED", "false"),
    ]);
    let mut acknowledged = 0_u64;
    run(async {
        let root = root_client(&server).await;
        create_stream_topic(&root, "full", "t", 1).await;
        let mut refused = None;
        for _ in 0..1_000 {
            match send_one_batch(&root, acknowledged).await {
                Ok(()) => acknowledged += 100,
                Err(error) => {
                    refused = Some(error);
                    break;
                }
            }
        }
        let refused = refused.expect("the disk filled up");
        println!("full after {acknowledged} messages: {refused}");
        assert_exactly(&root, acknowledged).await;
        // Not a byte left: a metadata change is refused, and nothing else breaks.
        disk.fill_up();
        // The journal's last page may still hold a few small entries.
        let mut metadata = Ok(());
        for index in 0..500 {
            let name = format!("while-full-{index}");
            metadata = root
                .create_stream(&name, &StreamCreateOptions::default())
                .await
                .map(drop);
            if metadata.is_err() {
                break;
            }
        }
        println!("a metadata change on the full disk: {metadata:?}");
        assert!(metadata.is_err(), "refused on a full disk");
        assert!(send_one_batch(&root, acknowledged).await.is_err());
        assert!(root.ping().await.is_ok(), "the server still serves");
        assert_exactly(&root, acknowledged).await;
    });
    // A restart on the full disk works and loses nothing.
    server.restart();
    run(async {
        let root = root_client(&server).await;
        assert_exactly(&root, acknowledged).await;
    });
    disk.grow(64);
    run(async {
        let root = root_client(&server).await;
        for _ in 0..5 {
            send_one_batch(&root, acknowledged)
                .await
                .expect("writes resume when space returns");
            acknowledged += 100;
        }
        assert_exactly(&root, acknowledged).await;
        root.create_stream("after-space", &StreamCreateOptions::default())
            .await
            .expect("metadata changes resume too");
    });
    server.restart();
    run(async {
        let root = root_client(&server).await;
        assert_exactly(&root, acknowledged).await;
    });
    drop(server);
}

/// Sends one message to `partition` of `full`/`topic`, retrying for up to 10 s: a
/// partition that could not be opened is retried by the server on its own.
async fn send_when_served(client: &IggyClient, topic: &str, partition: u32) {
    let mut error = None;
    for _ in 0..100 {
        let mut batch = vec![message(u64::from(partition))];
        match client
            .send_messages(
                &id("full"),
                &id(topic),
                &Partitioning::partition_id(partition),
                &mut batch,
            )
            .await
        {
            Ok(_) => return,
            Err(refused) => error = Some(refused),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("partition {partition} of {topic} never served: {error:?}");
}

#[test]
fn partitions_created_on_a_full_disk_are_served_once_space_returns() {
    let Some(disk) = SmallDisk::mount(24) else {
        println!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let data = disk.data().join("data");
    let data_env = data.to_string_lossy().into_owned();
    let mut server = Server::start_with_env(&[("IGGY_SYSTEM_PATH", data_env.as_str())]);
    let partitions = 3;
    let mut created = Vec::new();
    run(async {
        let root = root_client(&server).await;
        create_stream_topic(&root, "full", "before", 1).await;
        disk.fill_up();
        // The metadata journal's last page may still take a topic whose partitions' files
        // cannot be made: the topic exists (answered as created), its partitions are not
        // served yet. Until the journal refuses too.
        for index in 0..50 {
            let name = format!("t{index}");
            let options = TopicCreateOptions {
                partitions_count: Some(partitions),
                ..TopicCreateOptions::default()
            };
            let result = root.create_topic(&id("full"), &name, &options).await;
            println!(
                "create {name} on the full disk: {:?}",
                result.as_ref().map(drop)
            );
            // A topic that exists was committed: its create is answered as a success even
            // when its partitions' files could not be made yet.
            let exists = matches!(root.get_topic(&id("full"), &id(&name)).await, Ok(Some(_)));
            assert_eq!(
                exists,
                result.is_ok(),
                "{name}: answered {:?}, exists: {exists}",
                result.as_ref().map(drop)
            );
            if exists {
                created.push(name);
            }
            if result.is_err() {
                break;
            }
        }
        assert!(root.ping().await.is_ok(), "the server still serves");
    });
    // A restart on the full disk starts, whatever the disk refused it.
    server.restart();
    run(async {
        let root = root_client(&server).await;
        assert!(root.ping().await.is_ok(), "started on the full disk");
    });
    disk.grow(64);
    run(async {
        let root = root_client(&server).await;
        for topic in &created {
            for partition in 0..partitions {
                send_when_served(&root, topic, partition).await;
            }
        }
        create_stream_topic(&root, "after", "t", partitions).await;
        for partition in 0..partitions {
            send_range(&root, "after", "t", partition, 0..10, 5).await;
        }
    });
    println!("topics created as the disk filled, served once space returned: {created:?}");
    drop(server);
}

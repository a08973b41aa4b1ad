//! A flipped byte in a sealed segment, with the real binary (issue 9, item 4): after a
//! restart that partition reads up to the damage and refuses sends with 4010 while the other
//! partition of the topic serves, and `iggy check` names the file and byte.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use iggy::prelude::*;

const MIB: u64 = 1 << 20;

async fn fill(client: &IggyClient, partition: u32, count: u64) {
    for start in (0..count).step_by(100) {
        let mut batch: Vec<IggyMessage> = (start..(start + 100).min(count))
            .map(|index| {
                let mut payload = index.to_le_bytes().to_vec();
                payload.resize(1_000, b'x');
                IggyMessage::builder()
                    .payload(payload.into())
                    .build()
                    .unwrap()
            })
            .collect();
        let partitioning = Partitioning::partition_id(partition);
        client
            .send_messages(&id("damaged"), &id("t"), &partitioning, &mut batch)
            .await
            .expect("send");
    }
}

/// Polls `partition` from 0 until it returns nothing or fails; the offsets read.
async fn readable(client: &IggyClient, partition: u32) -> Vec<u64> {
    let mut offsets = Vec::new();
    loop {
        let next = offsets.last().map_or(0, |last| last + 1);
        let polled = client
            .poll_messages(
                &id("damaged"),
                &id("t"),
                partition,
                &Consumer::new(id("reader")),
                &PollingStrategy::offset(next),
                PollOptions::default(),
            )
            .await;
        match polled {
            Ok(polled) if !polled.messages.is_empty() => {
                offsets.extend(polled.messages.iter().map(|message| message.header.offset));
            }
            _ => return offsets,
        }
    }
}

/// The oldest segment log of `partition`, sorted by name.
fn first_segment(data: &Path, partition: u32) -> PathBuf {
    let directory = data.join(format!("streams/0/topics/0/partitions/{partition}"));
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("{}: {error}", directory.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 2, "partition {partition} has sealed segments");
    logs.remove(0)
}

#[test]
fn a_flipped_byte_in_a_sealed_segment_quarantines_only_its_partition() {
    let mut server = Server::start();
    run(async {
        let root = root_client(&server).await;
        root.create_stream("damaged", &StreamCreateOptions::default())
            .await
            .unwrap();
        let options = TopicCreateOptions {
            partitions_count: Some(2),
            segment_size: Some(IggyByteSize::from(MIB)),
            ..TopicCreateOptions::default()
        };
        root.create_topic(&id("damaged"), "t", &options)
            .await
            .unwrap();
        fill(&root, 0, 2_500).await;
        fill(&root, 1, 300).await;
    });
    server.stop();
    let log = first_segment(server.data_path(), 0);
    let mut bytes = std::fs::read(&log).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&log, &bytes).unwrap();

    let binary = harness::server_binary();
    let check = Command::new(&binary)
        .arg("check")
        .arg(server.data_path())
        .output()
        .expect("run iggy check");
    let report = String::from_utf8_lossy(&check.stdout).into_owned()
        + &String::from_utf8_lossy(&check.stderr);
    println!("{report}");
    assert_eq!(check.status.code(), Some(1), "problems found");
    let file_name = log.file_name().unwrap().to_string_lossy().into_owned();
    assert!(report.contains(&file_name), "names the file: {report}");

    server.start_again();
    run(async {
        let root = root_client(&server).await;
        let offsets = readable(&root, 0).await;
        println!(
            "partition 0 reads {} message(s) around the damage",
            offsets.len()
        );
        assert!(
            !offsets.is_empty() && offsets.len() < 2_500,
            "the damaged record is not served"
        );
        // Up to the damage, then on past it: its offsets are a gap (FORMAT.md §7), so a
        // reader is not stopped there for good.
        let gap = offsets
            .iter()
            .enumerate()
            .position(|(index, offset)| *offset != index as u64)
            .expect("a gap where the damage is");
        assert!(gap > 0, "reads up to the damage");
        assert!(offsets.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(offsets.last(), Some(&2_499), "and on past it to the end");
        let mut one = vec![
            IggyMessage::builder()
                .payload("late".into())
                .build()
                .unwrap(),
        ];
        let refused = root
            .send_messages(
                &id("damaged"),
                &id("t"),
                &Partitioning::partition_id(0),
                &mut one,
            )
            .await
            .expect_err("a quarantined partition refuses sends");
        assert_eq!(refused.as_code(), 4010, "{refused}");
        assert_eq!(
            readable(&root, 1).await.len(),
            300,
            "the other partition reads"
        );
        fill(&root, 1, 100).await;
        assert!(
            server.log_shows_within(&file_name, LOG_WAIT),
            "the log names the damaged file\n{}",
            server.log_tail()
        );
    });
}

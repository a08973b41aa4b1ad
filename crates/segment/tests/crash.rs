//! Crash tests on real files: a child process appends with acknowledgements printed to
//! stdout and is killed (`SIGKILL`) at a random point; the parent reopens the partition and
//! checks that every acknowledged message is present byte for byte and that offsets never go
//! backwards.
//!
//! The child is this test binary itself, re-run with `CRASH_CHILD_DIR` set. Trials alternate
//! `persisted` (acknowledged after fdatasync) and `replicated` (acknowledged after the write
//! reached the kernel); a process crash must lose neither.

#![cfg(feature = "compio")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use proto::Dialect;
use proto::batch::{Integrity, OutgoingMessage, Records, encode_batch};
use segment::log::{Durability, LogConfig, PartitionLog, Preallocation, ReadStart};
use segment::storage::compio::CompioStorage;

/// Kill-and-recover cycles per run.
const TRIALS: u64 = 200;
/// Appends a child makes before giving up on being killed.
const CHILD_APPENDS_MAX: u64 = 20_000;

fn config(durability: Durability) -> LogConfig {
    LogConfig {
        segment_size_bytes: 64 * 1024,
        durability,
        // Every segment reserved whole at its first append, so kills land with blocks
        // reserved past the log's end (where the disk has room to spare).
        preallocation: Preallocation::Segment,
        ..LogConfig::default()
    }
}

/// The payload of the message at `offset`: its length and bytes derive from the offset, so
/// the parent can check any message without a record of what was sent.
fn payload(offset: u64) -> Vec<u8> {
    let length = 16 + offset % 97;
    (0..length)
        .map(|index| offset.wrapping_mul(31).wrapping_add(index).to_le_bytes()[0])
        .collect()
}

fn batch(base_offset: u64, count: u64) -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = (base_offset..base_offset + count).map(payload).collect();
    let messages: Vec<_> = payloads
        .iter()
        .map(|payload| OutgoingMessage {
            id: 1,
            origin_timestamp: 1,
            payload,
            user_headers: &[],
        })
        .collect();
    let mut bytes = Vec::new();
    encode_batch(&messages, None, &mut bytes).expect("valid messages");
    bytes
}

/// The child: append until killed, printing `ack <base> <count>` after each acknowledgement.
#[test]
fn crash_child() {
    let Some(directory) = std::env::var_os("CRASH_CHILD_DIR") else {
        return;
    };
    let durability = match std::env::var("CRASH_CHILD_DURABILITY").as_deref() {
        Ok("persisted") => Durability::Persisted,
        _ => Durability::Replicated,
    };
    let runtime = compio::runtime::Runtime::new().expect("a compio runtime");
    runtime.block_on(async {
        let directory = PathBuf::from(directory);
        let (mut log, _) = PartitionLog::open(CompioStorage::new(), &directory, config(durability))
            .await
            .expect("the partition opens");
        let mut stdout = std::io::stdout().lock();
        for round in 0..CHILD_APPENDS_MAX {
            let base = log.next_offset();
            let count = 1 + round % 7;
            let (result, _) = log.append(batch(base, count), 1_000 + round).await;
            let appended = result.expect("append");
            assert_eq!(appended.base_offset, base);
            if appended.needs_sync {
                log.sync().await.expect("sync");
            }
            writeln!(stdout, "ack {base} {count}").expect("stdout");
            stdout.flush().expect("stdout");
        }
    });
}

/// xorshift64* for kill points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound
    }
}

/// Runs one child until it has acknowledged `acks` appends, then SIGKILLs it; returns the
/// acknowledged `(base, count)` pairs.
fn run_child(directory: &Path, durability: &str, acks: u64) -> Vec<(u64, u64)> {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
        .env("CRASH_CHILD_DIR", directory)
        .env("CRASH_CHILD_DURABILITY", durability)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the child starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut acknowledged = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("child output");
        let Some(rest) = line.strip_prefix("ack ") else {
            continue;
        };
        let (base, count) = rest.split_once(' ').expect("ack <base> <count>");
        acknowledged.push((base.parse().expect("base"), count.parse().expect("count")));
        if u64::try_from(acknowledged.len()).expect("small") >= acks {
            break;
        }
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("the child is reaped");
    acknowledged
}

/// Reopens the partition and checks every acknowledged message; returns the next offset.
/// Without `close` the partition is left unclean, so the next child recovers from two
/// crashes in a row.
fn verify(directory: &Path, acknowledged: &[(u64, u64)], floor: u64, close: bool) -> u64 {
    let runtime = compio::runtime::Runtime::new().expect("a compio runtime");
    runtime.block_on(async {
        let (log, _) = PartitionLog::open(
            CompioStorage::new(),
            directory,
            config(Durability::Persisted),
        )
        .await
        .expect("the partition reopens");
        for &(base, count) in acknowledged {
            let records = log
                .read(
                    ReadStart::Offset(base),
                    u32::try_from(count).expect("small"),
                    u64::MAX,
                )
                .await
                .expect("read");
            let mut offset = base;
            for batch in Records::new(&records.bytes, Dialect::V0_12_2, Integrity::Full, 0) {
                let batch = batch.expect("valid record");
                let batch_base = batch.header().base_offset.get();
                for message in batch.messages() {
                    let message_offset = batch_base + u64::from(message.header.offset_delta.get());
                    assert_eq!(message_offset, offset, "acknowledged offsets are dense");
                    assert_eq!(
                        message.payload,
                        payload(offset),
                        "message {offset} is byte-exact"
                    );
                    offset += 1;
                }
            }
            assert_eq!(
                offset,
                base + count,
                "every acknowledged message of {base}+{count} is back"
            );
        }
        let next = log.next_offset();
        assert!(
            next >= floor,
            "offsets never go backwards: {next} < {floor}"
        );
        if close {
            log.close().await.expect("close");
        }
        next
    })
}

#[test]
fn sigkill_during_appends_loses_no_acknowledged_message() {
    let directory = std::env::temp_dir().join(format!("segment-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut floor = 0;
    for trial in 0..TRIALS {
        let durability = if trial % 2 == 0 {
            "persisted"
        } else {
            "replicated"
        };
        let acks = 1 + rng.below(40);
        let acknowledged = run_child(&directory, durability, acks);
        assert!(
            !acknowledged.is_empty(),
            "trial {trial}: the child acknowledged nothing"
        );
        let last = acknowledged.last().map_or(0, |(base, count)| base + count);
        floor = verify(&directory, &acknowledged, floor.max(last), trial % 3 == 0);
    }
    std::fs::remove_dir_all(&directory).expect("clean up");
}

//! Encryption at rest (`[system.encryption]`) with the SDK: random payloads and header values
//! come back intact (whole batches and polls that start inside one), across a restart; no
//! 16-byte window of any of them appears in any file under the data directory; the key
//! never reaches the effective configuration or the log; a start with another key, or
//! without one, refuses to serve, and the right key serves everything again.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::str::FromStr;

use common::*;
use iggy::prelude::*;

const STREAM: &str = "sealed";
const TOPIC: &str = "secrets";
const PARTITIONS: u32 = 2;
const MESSAGES: u64 = 240;
const BATCH: u64 = 24;
/// Two 32-byte keys, base64.
const KEY: &str = "q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=";
const OTHER_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// Deterministic noise (xorshift64*), so a failure replays.
struct Noise(u64);

impl Noise {
    fn bytes(&mut self, length: usize) -> Vec<u8> {
        (0..length)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect()
    }

    fn below(&mut self, bound: usize) -> usize {
        usize::from(
            self.bytes(2)
                .iter()
                .fold(0_u16, |value, &byte| value << 8 | u16::from(byte)),
        ) % bound
    }
}

/// What the test sent: per message, its payload and its one raw header value.
struct Sent {
    payloads: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
}

fn encrypted_env() -> [(&'static str, &'static str); 2] {
    [
        ("IGGY_SYSTEM_ENCRYPTION_ENABLED", "true"),
        ("IGGY_SYSTEM_ENCRYPTION_KEY", KEY),
    ]
}

fn secret_key() -> HeaderKey {
    HeaderKey::from_str("secret").expect("key")
}

async fn produce(root: &IggyClient) -> Sent {
    create_stream_topic(root, STREAM, TOPIC, PARTITIONS).await;
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let mut sent = Sent {
        payloads: Vec::new(),
        values: Vec::new(),
    };
    for start in (0..MESSAGES).step_by(BATCH as usize) {
        let mut batch = Vec::new();
        for index in start..start + BATCH {
            let payload_length = 16 + noise.below(700);
            let payload = noise.bytes(payload_length);
            let value_length = 16 + noise.below(48);
            let value = noise.bytes(value_length);
            let headers = BTreeMap::from([(
                secret_key(),
                HeaderValue::from_raw(HeaderKind::Raw, &value).expect("value"),
            )]);
            batch.push(
                IggyMessage::builder()
                    .id(u128::from(index) + 1)
                    .payload(payload.clone().into())
                    .user_headers(headers)
                    .build()
                    .expect("a message"),
            );
            sent.payloads.push(payload);
            sent.values.push(value);
        }
        let partition = u32::try_from(start / BATCH).unwrap() % PARTITIONS;
        root.send_messages(
            &id(STREAM),
            &id(TOPIC),
            &Partitioning::partition_id(partition),
            &mut batch,
        )
        .await
        .expect("send");
    }
    sent
}

/// Every message comes back as sent: whole, and from an offset inside a batch.
async fn check_readable(server: &Server, sent: &Sent) {
    let root = root_client(server).await;
    let mut seen = 0;
    for partition in 0..PARTITIONS {
        let expected = usize::try_from(MESSAGES / u64::from(PARTITIONS)).unwrap();
        let messages = poll_all(&root, STREAM, TOPIC, partition, expected).await;
        assert_eq!(messages.len(), expected, "partition {partition}");
        for message in &messages {
            check_message(message, sent);
            seen += 1;
        }
        // Offset 5 lies inside the first batch: the server slices a sealed record.
        let consumer = Consumer::new(id("slicer"));
        let polled = root
            .poll_messages(
                &id(STREAM),
                &id(TOPIC),
                partition,
                &consumer,
                &PollingStrategy::offset(5),
                PollOptions {
                    count: 7,
                    commit: CommitPolicy::Manual,
                    ..PollOptions::default()
                },
            )
            .await
            .expect("poll from inside a batch");
        assert_eq!(polled.messages.len(), 7);
        assert_eq!(polled.messages[0].header.offset, 5);
        for message in &polled.messages {
            check_message(message, sent);
        }
    }
    assert_eq!(seen, MESSAGES);
}

fn check_message(message: &IggyMessage, sent: &Sent) {
    let index = usize::try_from(message.header.id - 1).unwrap();
    assert_eq!(
        message.payload.as_ref(),
        sent.payloads[index],
        "payload {index}"
    );
    let headers = message
        .user_headers_map()
        .expect("decodable headers")
        .expect("headers");
    let value = headers.get(&secret_key()).expect("the secret header");
    assert_eq!(
        value.as_raw().expect("raw"),
        sent.values[index],
        "header {index}"
    );
}

/// No file under `root` holds a 16-byte window of a payload or a header value.
fn assert_nothing_in_the_clear(root: &Path, sent: &Sent) {
    let windows: HashSet<&[u8]> = sent
        .payloads
        .iter()
        .chain(&sent.values)
        .flat_map(|secret| secret.windows(16))
        .collect();
    let mut files = 0;
    let mut pending = vec![root.to_owned()];
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("list the data directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).expect("read a data file");
            files += 1;
            let leak = bytes
                .windows(16)
                .position(|window| windows.contains(window));
            assert_eq!(leak, None, "{} holds plaintext", path.display());
        }
    }
    assert!(files > 3, "the scan saw the segments ({files} files)");
}

#[test]
fn messages_are_sealed_at_rest_and_need_their_key() {
    let mut server = Server::start_with_env(&encrypted_env());
    let sent = {
        let sent = std::cell::OnceCell::new();
        run(async {
            let root = root_client(&server).await;
            let _ = sent.set(produce(&root).await);
            check_readable(&server, sent.get().unwrap()).await;
        });
        sent.into_inner().unwrap()
    };
    let data = server.data_path().to_owned();
    assert!(
        data.join("encryption.check").exists(),
        "the key check is stored"
    );
    assert_nothing_in_the_clear(&data, &sent);
    server.restart();
    run(check_readable(&server, &sent));
    assert!(server.stop().is_some_and(|status| status.success()));
    assert_nothing_in_the_clear(&data, &sent);
    let logged = server.log_tail()
        + &std::fs::read_to_string(data.join("runtime/current_config.toml")).unwrap();
    assert!(
        !logged.contains(KEY),
        "the key reached the log or the effective config"
    );

    server.set_env("IGGY_SYSTEM_ENCRYPTION_KEY", Some(OTHER_KEY));
    let refused = server.start_refused();
    assert!(refused.contains("is not the key the data"), "{refused}");
    server.set_env("IGGY_SYSTEM_ENCRYPTION_ENABLED", None);
    server.set_env("IGGY_SYSTEM_ENCRYPTION_KEY", None);
    let refused = server.start_refused();
    assert!(refused.contains("holds encrypted data"), "{refused}");

    for (key, value) in encrypted_env() {
        server.set_env(key, Some(value));
    }
    server.start_again();
    run(check_readable(&server, &sent));
}

//! Encryption at rest (`[system.encryption]`) with the SDK: random payloads and header values
//! come back intact (whole batches and polls that start inside one), across a restart; no
//! 16-byte window of any of them appears in any file under the data directory; the key
//! never reaches the effective configuration or the log, and no password hash or token
//! digest reaches a file; a start with another key, or without one, refuses to serve, and
//! the right key serves everything again. `iggy encryption rotate` then moves it all to a
//! new key: messages, the password and a personal access token work under it, the old key
//! is refused.

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
    let files = every_file(root);
    for (path, bytes) in &files {
        let leak = bytes
            .windows(16)
            .position(|window| windows.contains(window));
        assert_eq!(leak, None, "{} holds plaintext", path.display());
    }
    let files = files.len();
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
    let token = std::cell::OnceCell::new();
    run(async {
        let root = root_client(&server).await;
        let raw = root
            .create_personal_access_token("sealed-pat", PersonalAccessTokenExpiry::NeverExpire)
            .await
            .expect("create a token");
        let _ = token.set(raw.token);
    });
    let token = token.into_inner().unwrap();
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
    // The running server holds the directory's lock: a rotation now is refused.
    let busy = rotate(&data, Some(KEY), Some(OTHER_KEY)).expect_err("the server is running");
    assert!(busy.contains("in use by another process"), "{busy}");
    assert!(server.stop().is_some_and(|status| status.success()));
    assert_no_credentials(&data, &token);

    // A rotation that stopped half way leaves its marker: the server will not start.
    let marker = data.join("encryption.rotating");
    std::fs::write(&marker, b"unfinished").unwrap();
    let refused = server.start_refused();
    assert!(refused.contains("unfinished key rotation"), "{refused}");
    let other = rotate(&data, Some(KEY), Some(OTHER_KEY)).expect_err("another rotation's marker");
    assert!(
        other.contains("unfinished rotation to another key"),
        "{other}"
    );
    std::fs::remove_file(&marker).unwrap();

    let report = rotate(&data, Some(KEY), Some(OTHER_KEY)).expect("the rotation succeeds");
    // Ten sends of 24 messages; the root password and the token.
    assert!(
        report.contains(" 10 records") && report.contains(" 2 credentials"),
        "{report}"
    );
    let refused = server.start_refused();
    assert!(refused.contains("is not the key the data"), "{refused}");
    server.set_env("IGGY_SYSTEM_ENCRYPTION_KEY", Some(OTHER_KEY));
    server.start_again();
    run(async {
        check_readable(&server, &sent).await;
        let client = anonymous_client(&server).await;
        client
            .login_with_personal_access_token(&token)
            .await
            .expect("the token still logs in");
    });
    assert!(server.stop().is_some_and(|status| status.success()));
    assert_nothing_in_the_clear(&data, &sent);
    assert_no_credentials(&data, &token);
    let again = rotate(&data, Some(KEY), Some(OTHER_KEY)).expect_err("a second run is refused");
    assert!(again.contains("encrypted with already"), "{again}");
    let third = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
    let stale = rotate(&data, Some(KEY), Some(third)).expect_err("the old key is refused");
    assert!(stale.contains("not the key"), "{stale}");
}

/// Runs `iggy encryption rotate` over `data` with the keys in the environment; its output,
/// or its error output when it fails.
fn rotate(data: &Path, old: Option<&str>, new: Option<&str>) -> Result<String, String> {
    let mut command = std::process::Command::new(harness::server_binary());
    command.args(["encryption", "rotate"]).arg(data);
    for (name, key) in [
        ("IGGY_ENCRYPTION_OLD_KEY", old),
        ("IGGY_ENCRYPTION_NEW_KEY", new),
    ] {
        match key {
            Some(key) => command.env(name, key),
            None => command.env_remove(name),
        };
    }
    let output = command.output().expect("run iggy encryption rotate");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    if output.status.success() {
        Ok(text(&output.stdout))
    } else {
        Err(text(&output.stderr))
    }
}

/// No file under `root` holds an argon2 hash, the token, or a token digest (stored in the
/// clear, a SHA-256 in 64 lowercase hex digits: no such run may appear anywhere).
fn assert_no_credentials(root: &Path, token: &str) {
    for (path, bytes) in every_file(root) {
        for secret in ["$argon2", token] {
            let found = bytes
                .windows(secret.len())
                .any(|window| window == secret.as_bytes());
            assert!(!found, "{} holds {secret}", path.display());
        }
        let hex_run = bytes
            .split(|byte| !matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
            .map(<[u8]>::len)
            .max()
            .unwrap_or(0);
        assert!(hex_run < 64, "{} holds a hex digest", path.display());
    }
}

/// Every file under `root`, with its bytes.
fn every_file(root: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("list the data directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read a data file");
                files.push((path, bytes));
            }
        }
    }
    files
}

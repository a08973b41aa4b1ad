//! TLS with the SDK's own validation: the server reads a certificate for `localhost` from PEM
//! files made here, and the SDK trusts exactly that certificate (`tls_ca_file`). TCP with
//! `[tcp.tls]` and WebSocket with `[websocket.tls]` (WSS) each run send and poll; a client
//! that speaks plaintext to the TLS port gets nowhere, and the TLS clients go on.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use iggy::prelude::*;

const STREAM: &str = "over-tls";
const TOPIC: &str = "events";

/// A certificate for `localhost` and its key, as PEM files in `directory`.
fn certificate(directory: &Path) -> (PathBuf, PathBuf) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("certificate");
    let cert_file = directory.join("cert.pem");
    let key_file = directory.join("key.pem");
    std::fs::write(&cert_file, made.cert.pem()).expect("write the certificate");
    std::fs::write(&key_file, made.signing_key.serialize_pem()).expect("write the key");
    (cert_file, key_file)
}

async fn flows(connection: &str) {
    let client = IggyClient::from_connection_string(connection).expect("connection string");
    client
        .connect()
        .await
        .unwrap_or_else(|error| panic!("connect with TLS ({connection}): {error}"));
    client.ping().await.expect("ping");
    create_stream_topic(&client, STREAM, TOPIC, 1).await;
    send_range(&client, STREAM, TOPIC, 0, 0..100, 25).await;
    let polled = poll_all(&client, STREAM, TOPIC, 0, 100).await;
    for (index, message) in polled.iter().enumerate() {
        assert_message(message, index as u64);
    }
    client.delete_stream(&id(STREAM)).await.expect("delete");
}

#[test]
fn tcp_and_websocket_with_tls_are_validated_by_the_sdk() {
    let certificates = tempfile_directory();
    let (cert_file, key_file) = certificate(&certificates);
    let (cert, key) = (cert_file.to_str().unwrap(), key_file.to_str().unwrap());
    let server = Server::start_with_env(&[
        ("IGGY_TCP_TLS_ENABLED", "true"),
        ("IGGY_TCP_TLS_SELF_SIGNED", "false"),
        ("IGGY_TCP_TLS_CERT_FILE", cert),
        ("IGGY_TCP_TLS_KEY_FILE", key),
        ("IGGY_WEBSOCKET_TLS_ENABLED", "true"),
        ("IGGY_WEBSOCKET_TLS_SELF_SIGNED", "false"),
        ("IGGY_WEBSOCKET_TLS_CERT_FILE", cert),
        ("IGGY_WEBSOCKET_TLS_KEY_FILE", key),
    ]);
    let options = format!("tls=true&tls_domain=localhost&tls_ca_file={cert}");
    run(async {
        let tcp = format!("iggy://iggy:iggy@{}?{options}", server.tcp_address());
        flows(&tcp).await;
        let wss = format!(
            "iggy+ws://iggy:iggy@{}?{options}",
            server.websocket_address()
        );
        flows(&wss).await;

        // Plaintext to the TLS port: the SDK cannot log in.
        let plain = format!("iggy://iggy:iggy@{}", server.tcp_address());
        let client = IggyClient::from_connection_string(&plain).expect("connection string");
        let connected = tokio::time::timeout(std::time::Duration::from_secs(5), client.connect());
        assert!(
            !matches!(connected.await, Ok(Ok(()))),
            "a plaintext client must not get in"
        );
        flows(&tcp).await;
    });
    let _ = std::fs::remove_dir_all(&certificates);
}

fn tempfile_directory() -> PathBuf {
    let directory = std::env::temp_dir().join(format!("iggy-tls-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("a directory for the certificates");
    directory
}

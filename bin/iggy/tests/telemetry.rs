//! `[telemetry]` and `[system.logging]` against the built binary: a small OTLP/HTTP receiver
//! inside the test gets the server's log lines and a span for a request it answered; the log
//! file holds the same lines; a `grpc` transport stops the start with a message.

// The helpers are test steps: a failed step is the test failing.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use proto::codes::CommandCode;
use proto::header::{Operation, RequestHeader};
use zerocopy::IntoBytes;

/// Accepts OTLP/HTTP posts on a loopback port; each `(path, body)` comes out of the receiver.
fn receiver() -> (String, Receiver<(String, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (sender, posts) = channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let Some(post) = read_post(stream) else {
                continue;
            };
            if sender.send(post).is_err() {
                return;
            }
        }
    });
    (address, posts)
}

fn read_post(mut stream: TcpStream) -> Option<(String, String)> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let path = request_line.split(' ').nth(1)?.to_owned();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    stream
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        .ok()?;
    Some((path, String::from_utf8(body).ok()?))
}

/// A `PING` before login, answered with status 0.
fn ping(address: std::net::SocketAddr) {
    let mut stream = TcpStream::connect(address).unwrap();
    let mut header = RequestHeader::new(7, Operation::NonReplicated, 0);
    header.code = CommandCode::Ping.as_u32().into();
    stream.write_all(header.as_bytes()).unwrap();
    let mut reply = [0_u8; 256];
    stream.read_exact(&mut reply).unwrap();
}

/// Waits for a post to `path` whose body holds every one of `needles`; `seen` keeps every
/// post received so far, so one waited for later is not lost.
fn wait_for(
    posts: &Receiver<(String, String)>,
    seen: &mut Vec<(String, String)>,
    path: &str,
    needles: &[&str],
) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found = seen.iter().find(|(posted_to, body)| {
            posted_to == path && needles.iter().all(|needle| body.contains(needle))
        });
        if let Some((_, body)) = found {
            return body.clone();
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let post = posts
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no post to {path} with {needles:?} in {seen:?}"));
        seen.push(post);
    }
}

#[test]
fn logs_and_request_spans_reach_an_otlp_receiver_and_the_log_file() {
    let (collector, posts) = receiver();
    let data = tempfile::tempdir().unwrap();
    let logs = format!("http://{collector}/v1/logs");
    let traces = format!("http://{collector}/v1/traces");
    let server = common::start(
        data.path(),
        &[
            ("IGGY_TELEMETRY_ENABLED", "true"),
            ("IGGY_TELEMETRY_SERVICE_NAME", "iggy-under-test"),
            ("IGGY_TELEMETRY_LOGS_ENDPOINT", &logs),
            ("IGGY_TELEMETRY_TRACES_ENDPOINT", &traces),
            ("IGGY_SYSTEM_LOGGING_LEVEL", "info,shard=debug"),
        ],
    );
    ping(server.address);
    let mut seen = Vec::new();
    let spans = wait_for(&posts, &mut seen, "/v1/traces", &[r#""name":"ping""#]);
    assert!(
        spans.contains(r#""stringValue":"iggy-under-test""#),
        "{spans}"
    );
    assert!(spans.contains(r#"{"key":"iggy.transport","value":{"stringValue":"tcp"}}"#));
    assert!(spans.contains(r#""kind":2"#) && spans.contains(r#""status":{"code":1}"#));
    let lines = wait_for(
        &posts,
        &mut seen,
        "/v1/logs",
        &["listening on", r#""severityText":"INFO""#],
    );
    assert!(lines.contains(r#""severityNumber":9"#), "{lines}");

    let file = data.path().join("logs").join("iggy-server.log");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("tcp: listening on"), "{written}");
}

#[test]
fn a_grpc_transport_is_refused_at_start() {
    let data = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_iggy"))
        .env("IGGY_SYSTEM_PATH", data.path())
        .env("IGGY_TCP_ADDRESS", "127.0.0.1:0")
        .env("IGGY_TELEMETRY_ENABLED", "true")
        .env("IGGY_TELEMETRY_TRACES_TRANSPORT", "grpc")
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("telemetry.traces.transport"), "{error}");
    assert!(error.contains("tokio"), "{error}");
}

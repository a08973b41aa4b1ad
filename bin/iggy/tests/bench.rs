//! Runs `iggy bench` scenarios, small and bounded (a few MB), against the built `iggy`
//! binary started on a free loopback port, so CI covers the benchmark tool end to end: the
//! protocol client, the actors, the report files and the calibration.

// The helpers are test steps: a failed step is the test failing.
#![allow(clippy::unwrap_used)]

mod common;

use bench::options::Options;
use common::{Server, start};

fn options(scenario: &str, server: &Server, output: &std::path::Path, extra: &[&str]) -> Options {
    let mut arguments = vec![
        scenario.to_owned(),
        "--address".into(),
        server.address.to_string(),
        "--message-size".into(),
        "1000".into(),
        "--messages-per-batch".into(),
        "100".into(),
        "--batches".into(),
        "20".into(),
        "--output".into(),
        output.display().to_string(),
    ];
    arguments.extend(extra.iter().map(|argument| (*argument).to_owned()));
    Options::parse(arguments).unwrap()
}

#[test]
fn scenarios_run_and_report() {
    let data = tempfile::tempdir().unwrap();
    let output = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let producer = options("pinned-producer", &server, output.path(), &["--calibrate"]);
    let outcome = bench::run(&producer).unwrap();
    let (_, total) = &outcome.report.aggregates[0];
    assert_eq!(total.messages, 20 * 100);
    assert_eq!(total.payload_bytes, 20 * 100 * 1000);
    assert!(total.megabytes_per_second > 0.0);
    assert!(outcome.calibration.unwrap().tcp_stream > 0.0);
    let json = std::fs::read_to_string(&outcome.json_path).unwrap();
    assert!(json.contains("\"p9999\""));
    for chart in ["latency-over-time", "latency-distribution"] {
        let path = output.path().join(format!("pinned-producer-{chart}.svg"));
        assert!(std::fs::read_to_string(path).unwrap().starts_with("<svg"));
    }
    let group = options(
        "balanced-consumer-group",
        &server,
        output.path(),
        &["--consumers", "2", "--partitions", "2"],
    );
    let outcome = bench::run(&group).unwrap();
    let (_, total) = &outcome.report.aggregates[0];
    assert_eq!(
        total.messages,
        2 * 20 * 100,
        "the group reads every seeded message"
    );
    let end_to_end = options("end-to-end-producing-consumer", &server, output.path(), &[]);
    let outcome = bench::run(&end_to_end).unwrap();
    assert_eq!(outcome.report.aggregates[0].1.messages, 20 * 100);
}

/// The 0.11.0 dialect, the only one an Apache Iggy 0.9.0-edge server speaks, forced against
/// this server: login without a bind secret, no routes, 16-byte poll heads, group polls
/// re-synced by the stale-assignment sentinel instead of `5009`.
#[test]
fn scenarios_run_in_the_0_11_0_dialect() {
    let data = tempfile::tempdir().unwrap();
    let output = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let legacy = ["--dialect", "0.11.0"];
    for scenario in ["pinned-producer", "pinned-consumer"] {
        let outcome = bench::run(&options(scenario, &server, output.path(), &legacy)).unwrap();
        let (_, total) = &outcome.report.aggregates[0];
        assert_eq!(total.messages, 20 * 100, "{scenario}");
    }
    let mut group_flags = legacy.to_vec();
    group_flags.extend(["--consumers", "2", "--partitions", "2"]);
    let group = options(
        "balanced-consumer-group",
        &server,
        output.path(),
        &group_flags,
    );
    let outcome = bench::run(&group).unwrap();
    assert_eq!(outcome.report.aggregates[0].1.messages, 2 * 20 * 100);
    let auto = options(
        "pinned-producer",
        &server,
        output.path(),
        &["--dialect", "auto"],
    );
    assert_eq!(auto.dialect, None, "auto negotiates");
    let outcome = bench::run(&auto).unwrap();
    assert_eq!(outcome.report.aggregates[0].1.messages, 20 * 100);
}

/// `--idle-connections`: the connections log in with a token made for the run, stay open
/// through it (the actors still finish), and the server's memory around them is reported;
/// the token is gone afterwards.
#[test]
fn idle_connections_are_held_through_the_run_and_measured() {
    let data = tempfile::tempdir().unwrap();
    let output = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    for dialect in ["0.12.2", "0.11.0"] {
        let flags = ["--idle-connections", "50", "--dialect", dialect];
        let idle = options("pinned-producer", &server, output.path(), &flags);
        let outcome = bench::run(&idle).unwrap();
        assert_eq!(outcome.report.aggregates[0].1.messages, 20 * 100);
        let trace = &outcome.server;
        assert_eq!(trace.idle_connections, 50, "{dialect}");
        assert!(trace.memory_after_idle.unwrap() > 0);
        let (per_partition, per_connection) = trace.per_partition_and_connection(&idle);
        assert!(per_partition.is_some() && per_connection.is_some());
        let json = std::fs::read_to_string(&outcome.json_path).unwrap();
        assert!(json.contains("\"idle_connections\": 50"));
    }
    // Each run deleted its token: a third run can make one of the same name.
    let again = options(
        "pinned-producer",
        &server,
        output.path(),
        &["--idle-connections", "1"],
    );
    assert_eq!(bench::run(&again).unwrap().server.idle_connections, 1);
}

/// A free loopback address (TCP; the same port number is taken for QUIC's UDP).
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `--transport`: the producer and the consumer over WebSocket, QUIC and HTTP, then over TCP
/// with TLS, WSS and HTTPS (a server whose TCP listener speaks TLS), each reading back what
/// it sent.
#[test]
fn scenarios_run_over_every_transport() {
    let (websocket, quic, http) = (free_address(), free_address(), free_address());
    let data = tempfile::tempdir().unwrap();
    let output = tempfile::tempdir().unwrap();
    let plain = start(
        data.path(),
        &[
            ("IGGY_WEBSOCKET_ADDRESS", websocket.as_str()),
            ("IGGY_QUIC_ADDRESS", quic.as_str()),
            ("IGGY_HTTP_ADDRESS", http.as_str()),
        ],
    );
    let (tls_websocket, tls_http) = (free_address(), free_address());
    let tls_data = tempfile::tempdir().unwrap();
    let tls = start(
        tls_data.path(),
        &[
            ("IGGY_TCP_TLS_ENABLED", "true"),
            ("IGGY_WEBSOCKET_ADDRESS", tls_websocket.as_str()),
            ("IGGY_WEBSOCKET_TLS_ENABLED", "true"),
            ("IGGY_HTTP_ADDRESS", tls_http.as_str()),
            ("IGGY_HTTP_TLS_ENABLED", "true"),
        ],
    );
    let tls_tcp = tls.address.to_string();
    for (transport, address) in [
        ("ws", websocket.as_str()),
        ("quic", quic.as_str()),
        ("tcp-tls", tls_tcp.as_str()),
        ("wss", tls_websocket.as_str()),
        ("http", http.as_str()),
        ("https", tls_http.as_str()),
    ] {
        let server = if matches!(transport, "ws" | "quic" | "http") {
            &plain
        } else {
            &tls
        };
        for scenario in ["pinned-producer", "pinned-consumer"] {
            let extra = ["--transport", transport, "--address", address];
            let run = options(scenario, server, output.path(), &extra);
            let outcome = bench::run(&run).unwrap_or_else(|error| {
                panic!("{scenario} over {transport}: {error}");
            });
            let (_, total) = &outcome.report.aggregates[0];
            assert_eq!(total.messages, 20 * 100, "{scenario} over {transport}");
        }
    }
}

/// `[system] io_backend = "io_uring"` (feature `io-uring`): the producer's messages are
/// written and the consumer reads every one back; messages sent with the file backend on
/// `io_uring` are still there after the server is killed and started again on the same data.
#[test]
fn the_io_uring_backend_serves_and_recovers() {
    use bench::client::{Client, Durability, Login};
    if !cfg!(feature = "io-uring") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let output = tempfile::tempdir().unwrap();
    let backend = [("IGGY_SYSTEM_IO_BACKEND", "io_uring")];
    let server = start(data.path(), &backend);
    for scenario in ["pinned-producer", "pinned-consumer"] {
        let outcome = bench::run(&options(scenario, &server, output.path(), &[])).unwrap();
        let (_, total) = &outcome.report.aggregates[0];
        assert_eq!(total.messages, 20 * 100, "{scenario} on io_uring");
    }
    let login = |address| Login {
        address,
        transport: bench::link::Transport::Tcp,
        username: "iggy",
        password: "iggy",
    };
    let mut client = Client::connect(&login(server.address), proto::Dialect::V0_12_2, 7).unwrap();
    let stream = client.create_stream("kept").unwrap();
    let topic = client
        .create_topic(stream, "kept", 1, Durability::Replicated)
        .unwrap();
    let payload = [7_u8; 100];
    let messages: Vec<_> = (1..=10_u128)
        .map(|id| proto::batch::OutgoingMessage {
            id,
            origin_timestamp: 1,
            payload: &payload,
            user_headers: &[],
        })
        .collect();
    let mut batch = Vec::new();
    proto::batch::encode_batch(&messages, None, &mut batch).unwrap();
    let incarnation = client.incarnation(stream, topic, 0).unwrap();
    let mut frame = client.send_frame(stream, topic, 0, &batch, 10);
    client.send(&mut frame, incarnation).unwrap();
    drop(client);
    drop(server);

    let again = start(data.path(), &backend);
    let mut client = Client::connect(&login(again.address), proto::Dialect::V0_12_2, 9).unwrap();
    assert_eq!(client.server_messages().unwrap(), 10, "after the restart");
}

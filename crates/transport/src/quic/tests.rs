//! The QUIC loop over loopback with scripted handlers and a compio-quic client: one request
//! per stream, answered concurrently; a stream that is not one request frame gets an
//! eviction on it and ends its connection only; an oversized stream before login is
//! refused without being held; a connection that never logs in is closed after the grace;
//! an answer the client does not take within the write timeout is reset, never cut short.

use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use compio_quic::{ClientBuilder, Connection, Endpoint};
use proto::header::{EvictionHeader, EvictionReason, HEADER_SIZE, ReplyHeader};
use zerocopy::FromBytes;

use super::{QuicConfig, QuicServer};
use crate::test_handler::{Scripted, request};
use crate::tls::{CertificateSource, SelfSigned};

fn config() -> QuicConfig {
    QuicConfig {
        address: "127.0.0.1:0".parse().unwrap(),
        connections_max: 16,
        frame_size_max: 1 << 20,
        unauthenticated_frame_size_max: 4096,
        handshake_grace: Duration::from_millis(700),
        frame_read_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(5),
        max_concurrent_bidi_streams: 16,
        initial_mtu: 1200,
        send_window: 1 << 20,
        receive_window: 1 << 20,
        stream_receive_window: 1 << 20,
        keep_alive_interval: None,
        max_idle_timeout: Some(Duration::from_secs(10)),
        socket_receive_buffer: 1 << 20,
        socket_send_buffer: 1 << 20,
    }
}

/// Serves `handler` on this thread while `client` runs on its own runtime on another.
fn serve_until_done<C, F>(handler: Scripted, client: C)
where
    C: FnOnce(SocketAddr) -> F + Send + 'static,
    F: Future<Output = ()>,
{
    serve_with(config(), handler, client);
}

/// As [`serve_until_done`] with `config`.
fn serve_with<C, F>(config: QuicConfig, handler: Scripted, client: C)
where
    C: FnOnce(SocketAddr) -> F + Send + 'static,
    F: Future<Output = ()>,
{
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let source = CertificateSource {
            self_signed: SelfSigned::Always,
            cert_file: "".into(),
            key_file: "".into(),
        };
        let tls = source.load().unwrap().server_config().unwrap();
        let server = QuicServer::bind(config, tls).unwrap();
        let address = server.local_address();
        let client = std::thread::spawn(move || {
            compio::runtime::Runtime::new()
                .unwrap()
                .block_on(client(address));
        });
        let done = async {
            while !client.is_finished() {
                compio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let handler = Rc::new(handler);
        server.serve(Rc::clone(&handler), done).await;
        client.join().unwrap();
        handler.assert_all_closed();
    });
}

async fn connect(address: SocketAddr) -> (Endpoint, Connection) {
    let endpoint = ClientBuilder::new_with_no_server_verification()
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let connection = endpoint
        .connect(address, "localhost", None)
        .unwrap()
        .await
        .unwrap();
    (endpoint, connection)
}

/// Sends `frame` on a new stream and reads the stream's answer to its end.
async fn exchange(connection: &Connection, frame: Vec<u8>) -> Vec<u8> {
    let (mut send, mut recv) = connection.open_bi_wait().await.unwrap();
    send.write_all_chunks(&mut [frame.into()]).await.unwrap();
    send.finish().unwrap();
    let mut answer = Vec::new();
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.unwrap() {
        answer.extend_from_slice(&chunk.bytes);
    }
    answer
}

fn reply(answer: &[u8]) -> (u64, Vec<u8>) {
    let header = ReplyHeader::parse(answer).unwrap();
    assert_eq!(
        header.size.get() as usize,
        answer.len(),
        "one frame per stream"
    );
    (header.request.get(), answer[HEADER_SIZE..].to_vec())
}

fn eviction(answer: &[u8]) -> EvictionReason {
    EvictionHeader::read_from_bytes(answer)
        .unwrap()
        .reason()
        .unwrap()
}

#[test]
fn requests_on_concurrent_streams_are_answered_as_they_complete() {
    serve_until_done(Scripted::default(), |address| async move {
        let (_endpoint, connection) = connect(address).await;
        let first = exchange(&connection, request(1, b"first"));
        let second = exchange(&connection, request(2, b"second"));
        // Request 1 waits for request 2: both must be in flight at once.
        let (first, second) = futures_util::future::join(first, second).await;
        assert_eq!(reply(&first), (1, b"first".to_vec()));
        assert_eq!(reply(&second), (2, b"second".to_vec()));
    });
}

#[test]
fn a_bad_stream_evicts_its_connection_only() {
    serve_until_done(Scripted::default(), |address| async move {
        let (_good_endpoint, good) = connect(address).await;
        assert_eq!(reply(&exchange(&good, request(2, b"before")).await).0, 2);

        let (_endpoint, bad) = connect(address).await;
        let mut frame = request(2, b"body");
        frame.truncate(frame.len() - 1);
        let answer = exchange(&bad, frame).await;
        assert_eq!(eviction(&answer), EvictionReason::InvalidRequestBodySize);
        bad.closed().await;

        let (_endpoint, reply_frame) = connect(address).await;
        let mut frame = request(2, b"");
        frame[60] = 8; // the command byte: Reply
        let answer = exchange(&reply_frame, frame).await;
        assert_eq!(eviction(&answer), EvictionReason::InvalidRequestOperation);

        let (_endpoint, junk) = connect(address).await;
        let answer = exchange(&junk, vec![7; 10]).await;
        assert_eq!(eviction(&answer), EvictionReason::InvalidRequestBodySize);

        assert_eq!(
            reply(&exchange(&good, request(2, b"after")).await),
            (2, b"after".to_vec())
        );
    });
}

#[test]
fn an_unauthenticated_stream_over_its_limit_is_refused_and_the_login_grace_holds() {
    let handler = Scripted::logging_in();
    serve_until_done(handler, |address| async move {
        let (_endpoint, big) = connect(address).await;
        let (mut send, mut recv) = big.open_bi_wait().await.unwrap();
        // Far more than the limit; the server stops reading and evicts.
        let _ = send
            .write_all_chunks(&mut [vec![0; 64 * 1024].into()])
            .await;
        let mut answer = Vec::new();
        while let Ok(Some(chunk)) = recv.read_chunk(usize::MAX, true).await {
            answer.extend_from_slice(&chunk.bytes);
        }
        assert_eq!(eviction(&answer), EvictionReason::InvalidRequestBodySize);

        // (The handler's login is shared by its connections: the idle one comes first.)
        let started = Instant::now();
        let (_endpoint, idle) = connect(address).await;
        idle.closed().await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(500), "{waited:?}");
        assert!(waited < Duration::from_secs(8), "{waited:?}");
        let (_endpoint, logged) = connect(address).await;
        assert_eq!(reply(&exchange(&logged, request(2, b"login")).await).0, 2);
        let big_body = vec![1; 8192];
        assert_eq!(
            reply(&exchange(&logged, request(2, &big_body)).await).1,
            big_body
        );
    });
}

#[test]
fn answers_a_client_does_not_read_are_reset_after_the_write_timeout() {
    let config = QuicConfig {
        write_timeout: Duration::from_millis(400),
        ..config()
    };
    serve_with(config, Scripted::default(), |address| async move {
        let (_endpoint, deaf) = connect(address).await;
        let mut streams = Vec::new();
        for number in 3..7 {
            let (mut send, recv) = deaf.open_bi_wait().await.unwrap();
            let frame = request(number, b"reply:4194304");
            send.write_all_chunks(&mut [frame.into()]).await.unwrap();
            send.finish().unwrap();
            streams.push(recv);
        }
        // Meanwhile another connection is served.
        let (_endpoint, other) = connect(address).await;
        assert_eq!(reply(&exchange(&other, request(3, b"hi")).await).0, 3);
        compio::time::sleep(Duration::from_secs(2)).await;
        for mut recv in streams {
            let mut received = 0_usize;
            let ended = loop {
                match recv.read_chunk(usize::MAX, true).await {
                    Ok(Some(chunk)) => received += chunk.bytes.len(),
                    Ok(None) => break "finished",
                    Err(_) => break "reset",
                }
            };
            assert_eq!(
                ended, "reset",
                "a cut answer must not look whole ({received} bytes)"
            );
            assert!(received < 4 << 20);
        }
        assert_eq!(reply(&exchange(&other, request(4, b"again")).await).0, 4);
    });
}

/// Before login a connection's receive window holds one unauthenticated frame: while the
/// server reads its one stream, what a client pushes on others stalls in the client, not in
/// the server's memory. A login opens the window: a large frame then goes through.
#[test]
fn the_receive_window_before_login_holds_one_small_frame() {
    serve_until_done(Scripted::logging_in(), |address| async move {
        let (_endpoint, connection) = connect(address).await;
        // A frame begun on the first stream and not finished: the server reads it.
        let (mut first, _first_recv) = connection.open_bi_wait().await.unwrap();
        let begun = request(1, &[b'x'; 100]);
        first
            .write_all_chunks(&mut [begun[..HEADER_SIZE].to_vec().into()])
            .await
            .unwrap();
        let (mut second, _second_recv) = connection.open_bi_wait().await.unwrap();
        let mut chunks = [vec![7_u8; 900 << 10].into()];
        let pushed = second.write_all_chunks(&mut chunks);
        let stalled = compio::time::timeout(Duration::from_millis(500), pushed).await;
        assert!(stalled.is_err(), "900 KiB went out before any login");
        drop(connection);

        let (_endpoint, connection) = connect(address).await;
        assert_eq!(
            reply(&exchange(&connection, request(5, b"login")).await).0,
            5
        );
        let body = vec![b'y'; 900 << 10];
        let answer = exchange(&connection, request(6, &body)).await;
        assert_eq!(reply(&answer), (6, body));
    });
}

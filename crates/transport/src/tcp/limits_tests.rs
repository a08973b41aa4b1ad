//! What a hostile or broken client cannot hold: frames before login are small and must come
//! within the handshake grace, a frame must finish within the frame read timeout, a client
//! that stops reading is dropped after the write timeout, and one address may be limited.

use std::cell::Cell;
use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use proto::Dialect;
use proto::header::{EvictionHeader, EvictionReason, HEADER_SIZE, Operation, RequestHeader};
use zerocopy::{FromBytes, IntoBytes};

use super::TcpConfig;
use super::tests::{config, read_frame, request, serve_with};
use crate::{Answer, ConnectionHandler};

/// A connection is authenticated once it sent a body `login`; every request is answered
/// with a reply whose tail is as long as the request asks (its body parsed as a length).
/// With `replies_short`, the server is always short of reply memory.
#[derive(Default)]
struct Gate {
    replies_short: bool,
}

impl ConnectionHandler for Gate {
    type Connection = Cell<bool>;

    fn open(&self, _peer: SocketAddr) -> Cell<bool> {
        Cell::new(false)
    }

    async fn handle(&self, logged_in: &Cell<bool>, _: &[u8; HEADER_SIZE], body: &[u8]) -> Answer {
        if body == b"login" {
            logged_in.set(true);
        }
        if body == b"logout" {
            logged_in.set(false);
        }
        let tail_length = std::str::from_utf8(body)
            .ok()
            .and_then(|text| text.parse::<usize>().ok())
            .unwrap_or(0);
        Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: 0,
            commit: 0,
            body: Vec::new(),
            tail: vec![7; tail_length],
        }
    }

    fn evicted(&self, _: &Cell<bool>) -> impl Future<Output = EvictionReason> {
        std::future::pending()
    }

    async fn replies_short(&self) {
        if !self.replies_short {
            std::future::pending::<()>().await;
        }
    }

    fn dialect(&self, _: &Cell<bool>) -> Dialect {
        Dialect::V0_12_2
    }

    fn authenticated(&self, logged_in: &Cell<bool>) -> bool {
        logged_in.get()
    }

    fn close(&self, _: Cell<bool>) {}
}

fn short_timeouts() -> TcpConfig {
    TcpConfig {
        unauthenticated_frame_size_max: 1024,
        handshake_grace: Duration::from_millis(400),
        frame_read_timeout: Duration::from_millis(400),
        write_timeout: Duration::from_millis(400),
        connections_per_ip_max: 2,
        ..config()
    }
}

/// Whether the server closed `stream` within `limit` (reads until EOF or a reset).
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).unwrap();
    let started = Instant::now();
    let mut sink = vec![0; 1 << 16];
    loop {
        match stream.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) if started.elapsed() < limit => {}
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return true,
            _ => return false,
        }
    }
}

fn login(stream: &mut TcpStream) {
    stream.write_all(&request(1, b"login")).unwrap();
    read_frame(stream);
}

fn hostile_client(address: SocketAddr) {
    // A header announcing 64 KiB before login: evicted before a body byte is read.
    let mut big = TcpStream::connect(address).unwrap();
    let header = RequestHeader::new(7, Operation::NonReplicated, 64 << 10);
    big.write_all(header.as_bytes()).unwrap();
    let eviction = read_frame(&mut big);
    let eviction = EvictionHeader::ref_from_bytes(&eviction[..HEADER_SIZE]).unwrap();
    assert_eq!(
        eviction.reason,
        EvictionReason::InvalidRequestBodySize as u8
    );
    assert!(closed_within(&mut big, Duration::from_secs(2)));
    // Silent, never logging in: closed once the handshake grace passes.
    let mut silent = TcpStream::connect(address).unwrap();
    let started = Instant::now();
    assert!(closed_within(&mut silent, Duration::from_secs(3)));
    assert!(started.elapsed() >= Duration::from_millis(300));
    // Logged in: it may idle past the grace and then send a large frame.
    let mut user = TcpStream::connect(address).unwrap();
    login(&mut user);
    std::thread::sleep(Duration::from_millis(600));
    let body = vec![b'0'; 32 << 10];
    user.write_all(&request(2, &body)).unwrap();
    read_frame(&mut user);
    // A third connection from the same address: over `connections_per_ip_max` = 2.
    let mut third = TcpStream::connect(address).unwrap();
    let mut second = TcpStream::connect(address).unwrap();
    assert!(closed_within(&mut second, Duration::from_secs(2)));
    drop(third.write_all(b"x"));
    drop(user);
}

fn stalling_client(address: SocketAddr) {
    // Half a frame after login: closed after the frame read timeout.
    let mut stalled = TcpStream::connect(address).unwrap();
    login(&mut stalled);
    let header = RequestHeader::new(7, Operation::NonReplicated, 1000);
    stalled.write_all(header.as_bytes()).unwrap();
    stalled.write_all(&[b'1'; 10]).unwrap();
    assert!(closed_within(&mut stalled, Duration::from_secs(3)));
    // Asks for 4 MiB replies and never reads: the write times out and the server closes.
    let mut deaf = TcpStream::connect(address).unwrap();
    login(&mut deaf);
    for number in 2..10 {
        if deaf.write_all(&request(number, b"4194304")).is_err() {
            break;
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let mut received = 0_usize;
    deaf.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut sink = vec![0; 1 << 16];
    loop {
        match deaf.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(read) => received += read,
        }
    }
    assert!(
        received < 8 * (4 << 20),
        "the server stopped writing: {received} bytes"
    );
}

fn relogging_client(address: SocketAddr) {
    // Logged in past the grace, then out: the grace starts again, so a prompt login works.
    let mut user = TcpStream::connect(address).unwrap();
    login(&mut user);
    std::thread::sleep(Duration::from_millis(600));
    user.write_all(&request(2, b"logout")).unwrap();
    read_frame(&mut user);
    user.write_all(&request(3, b"login")).unwrap();
    read_frame(&mut user);
    // And once logged out for longer than the grace, the link is closed.
    user.write_all(&request(4, b"logout")).unwrap();
    read_frame(&mut user);
    assert!(closed_within(&mut user, Duration::from_secs(3)));
}

fn half_framed_client(address: SocketAddr) {
    // Half a header before login: closed at the grace, not the far longer frame timeout.
    let mut half_header = TcpStream::connect(address).unwrap();
    let header = RequestHeader::new(7, Operation::NonReplicated, 100);
    half_header.write_all(&header.as_bytes()[..10]).unwrap();
    assert!(closed_within(&mut half_header, Duration::from_secs(3)));
    // A whole header and half its body: the same.
    let mut half_body = TcpStream::connect(address).unwrap();
    half_body.write_all(header.as_bytes()).unwrap();
    half_body.write_all(&[b'1'; 10]).unwrap();
    assert!(closed_within(&mut half_body, Duration::from_secs(3)));
}

#[test]
fn a_frame_begun_before_login_ends_within_the_handshake_grace() {
    let config = TcpConfig {
        frame_read_timeout: Duration::from_secs(30),
        ..short_timeouts()
    };
    serve_with(config, Gate::default(), half_framed_client);
}

#[test]
fn a_logout_restarts_the_handshake_grace() {
    serve_with(short_timeouts(), Gate::default(), relogging_client);
}

#[test]
fn frames_before_login_are_small_and_logins_must_come_in_time() {
    serve_with(short_timeouts(), Gate::default(), hostile_client);
}

#[test]
fn stalled_frames_and_clients_that_stop_reading_are_dropped() {
    serve_with(short_timeouts(), Gate::default(), stalling_client);
}

/// Logs in, asks for 4 MiB replies and never reads.
fn deaf_client(address: SocketAddr) {
    let mut deaf = TcpStream::connect(address).unwrap();
    login(&mut deaf);
    for number in 2..10 {
        if deaf.write_all(&request(number, b"4194304")).is_err() {
            break;
        }
    }
    // Past the stall the server allows while short of memory, far short of the write
    // timeout: reading now finds what was sent before the close, then its end.
    std::thread::sleep(Duration::from_secs(5));
    assert!(closed_within(&mut deaf, Duration::from_secs(3)));
}

#[test]
fn a_client_that_stops_reading_is_dropped_early_while_replies_wait_for_memory() {
    // The write timeout alone would hold the replies for half a minute.
    let config = TcpConfig {
        write_timeout: Duration::from_secs(30),
        ..short_timeouts()
    };
    let gate = Gate {
        replies_short: true,
    };
    serve_with(config, gate, deaf_client);
}

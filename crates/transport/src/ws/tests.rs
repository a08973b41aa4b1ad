//! The WebSocket loop over loopback with scripted handlers and a tungstenite client:
//! pipelined requests are answered as they complete, one frame per Binary message; a
//! message that is not one request frame, or a Text message, gets an eviction and closes
//! only its own connection; a client that never upgrades or never logs in is closed after
//! the handshake grace, and one that stops reading after the write timeout.

use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::time::{Duration, Instant};

use compio_ws::tungstenite::{self, Message, WebSocket};
use proto::header::{EvictionHeader, EvictionReason, HEADER_SIZE, ReplyHeader};
use zerocopy::FromBytes;

use super::{WsConfig, WsServer};
use crate::test_handler::{Scripted, request};

fn config() -> WsConfig {
    WsConfig {
        address: "127.0.0.1:0".parse().unwrap(),
        connections_max: 16,
        frame_size_max: 1 << 20,
        fragment_size_max: 1 << 20,
        in_flight_max: 8,
        unauthenticated_frame_size_max: 4096,
        handshake_grace: Duration::from_millis(500),
        write_timeout: Duration::from_secs(5),
        read_buffer_size: 64 * 1024,
        write_buffer_size: 64 * 1024,
        write_buffer_size_max: 1 << 30,
        accept_unmasked_frames: false,
    }
}

/// Serves `handler` on a runtime of this thread while `client` runs on another; stops the
/// server once the client is done.
fn serve_until_done(handler: Scripted, client: impl FnOnce(SocketAddr) + Send + 'static) {
    serve_with(config(), handler, client);
}

/// As [`serve_until_done`] with `config`.
fn serve_with(
    config: WsConfig,
    handler: Scripted,
    client: impl FnOnce(SocketAddr) + Send + 'static,
) {
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = WsServer::bind(config).await.unwrap();
        let address = server.local_address();
        let client = std::thread::spawn(move || client(address));
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

fn connect(address: SocketAddr) -> WebSocket<TcpStream> {
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (socket, _) = tungstenite::client(format!("ws://{address}/"), stream).unwrap();
    socket
}

/// The next Binary message, as a reply: (request number, body).
fn reply(socket: &mut WebSocket<TcpStream>) -> (u64, Vec<u8>) {
    loop {
        match socket.read().unwrap() {
            Message::Binary(bytes) => {
                let size = u32::from_le_bytes(bytes[48..52].try_into().unwrap());
                assert_eq!(size as usize, bytes.len(), "one frame per message");
                let request = ReplyHeader::parse(&bytes).unwrap().request.get();
                return (request, bytes[HEADER_SIZE..].to_vec());
            }
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("expected a reply, got {other:?}"),
        }
    }
}

/// The eviction the server sends before it closes, then the end of the connection.
fn eviction_then_close(socket: &mut WebSocket<TcpStream>) -> EvictionReason {
    let Message::Binary(bytes) = socket.read().unwrap() else {
        panic!("expected an eviction");
    };
    let eviction = EvictionHeader::read_from_bytes(&bytes[..]).unwrap();
    loop {
        match socket.read() {
            Ok(Message::Close(_)) => {}
            Ok(other) => panic!("after the eviction: {other:?}"),
            Err(_) => break,
        }
    }
    eviction.reason().unwrap()
}

#[test]
fn pipelined_requests_are_answered_as_they_complete() {
    serve_until_done(Scripted::default(), |address| {
        let mut socket = connect(address);
        socket.send(Message::binary(request(1, b"first"))).unwrap();
        socket.send(Message::binary(request(2, b"second"))).unwrap();
        // Request 1 waits for request 2: its answer can only come second.
        assert_eq!(reply(&mut socket), (2, b"second".to_vec()));
        assert_eq!(reply(&mut socket), (1, b"first".to_vec()));
        socket.close(None).unwrap();
    });
}

#[test]
fn a_bad_message_evicts_its_connection_only() {
    serve_until_done(Scripted::default(), |address| {
        let mut good = connect(address);
        good.send(Message::binary(request(2, b"before"))).unwrap();
        assert_eq!(reply(&mut good), (2, b"before".to_vec()));

        // A header whose size says more than the message holds.
        let mut short = connect(address);
        let mut frame = request(2, b"body");
        frame.truncate(frame.len() - 1);
        short.send(Message::binary(frame)).unwrap();
        assert_eq!(
            eviction_then_close(&mut short),
            EvictionReason::InvalidRequestBodySize
        );

        // Fewer bytes than a header.
        let mut tiny = connect(address);
        tiny.send(Message::binary(vec![1, 2, 3])).unwrap();
        assert_eq!(
            eviction_then_close(&mut tiny),
            EvictionReason::InvalidRequestBodySize
        );

        // A frame whose command is not Request.
        let mut reply_frame = connect(address);
        let mut frame = request(2, b"");
        frame[60] = 8; // the command byte: Reply
        reply_frame.send(Message::binary(frame)).unwrap();
        assert_eq!(
            eviction_then_close(&mut reply_frame),
            EvictionReason::InvalidRequestOperation
        );

        // Text is not a frame.
        let mut text = connect(address);
        text.send(Message::text("hello")).unwrap();
        assert_eq!(
            eviction_then_close(&mut text),
            EvictionReason::InvalidRequestOperation
        );

        good.send(Message::binary(request(2, b"after"))).unwrap();
        assert_eq!(reply(&mut good), (2, b"after".to_vec()));
        good.close(None).unwrap();
    });
}

#[test]
fn an_unauthenticated_frame_over_its_limit_is_refused() {
    let handler = Scripted::logging_in();
    serve_until_done(handler, |address| {
        let mut socket = connect(address);
        socket
            .send(Message::binary(request(2, &[0; 8192])))
            .unwrap();
        assert_eq!(
            eviction_then_close(&mut socket),
            EvictionReason::InvalidRequestBodySize
        );
        // Once logged in, the same frame is served.
        let mut socket = connect(address);
        socket.send(Message::binary(request(2, b"login"))).unwrap();
        assert_eq!(reply(&mut socket).0, 2);
        socket
            .send(Message::binary(request(2, &[0; 8192])))
            .unwrap();
        assert_eq!(reply(&mut socket).1.len(), 8192);
        socket.close(None).unwrap();
    });
}

/// Sends `message` as a Binary message in fragments of 4 KiB, its last one final only when
/// `finish`; false once the server has closed the connection under the client.
fn send_in_fragments(socket: &mut WebSocket<TcpStream>, message: &[u8], finish: bool) -> bool {
    send_fragments(socket, message, finish, false)
}

/// As [`send_in_fragments`], with a Ping after every fragment when `pings`.
fn send_fragments(
    socket: &mut WebSocket<TcpStream>,
    message: &[u8],
    finish: bool,
    pings: bool,
) -> bool {
    use tungstenite::protocol::frame::Frame;
    use tungstenite::protocol::frame::coding::{Data, OpCode};
    let fragments: Vec<&[u8]> = message.chunks(4096).collect();
    for (index, fragment) in fragments.iter().enumerate() {
        let opcode = if index == 0 {
            OpCode::Data(Data::Binary)
        } else {
            OpCode::Data(Data::Continue)
        };
        let last = finish && index + 1 == fragments.len();
        let frame = Frame::message(fragment.to_vec(), opcode, last);
        if socket.send(Message::Frame(frame)).is_err() {
            return false;
        }
        if pings && socket.send(Message::Ping(Vec::new().into())).is_err() {
            return false;
        }
    }
    true
}

/// The connection ends (a Close, the end of the stream or a reset); false when the read
/// timed out instead.
fn closes(socket: &mut WebSocket<TcpStream>) -> bool {
    loop {
        match socket.read() {
            // The answers to the client's Pings, and the server's Close.
            Ok(Message::Close(_) | Message::Pong(_)) => {}
            Ok(other) => panic!("unexpected {other:?}"),
            Err(tungstenite::Error::Io(error))
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn an_unauthenticated_fragmented_message_is_cut_off_at_its_bound() {
    // Grace and message limit far past what the bound allows: only the bound ends it.
    let config = WsConfig {
        frame_size_max: 8 << 20,
        fragment_size_max: 8 << 20,
        handshake_grace: Duration::from_mins(1),
        ..config()
    };
    serve_with(config, Scripted::logging_in(), |address| {
        let mut hostile = connect(address);
        // 4 KiB + 64 KiB may be read toward it; 1 MiB never completes a message.
        let _ = send_in_fragments(&mut hostile, &vec![0; 1 << 20], false);
        assert!(closes(&mut hostile), "the server waited for the rest");
        // A Ping between the fragments does not end what the bound counts.
        let mut pinging = connect(address);
        let _ = send_fragments(&mut pinging, &vec![0; 1 << 20], false, true);
        assert!(closes(&mut pinging), "Pings reset the bound");
        // Logged in, a request of that size in the same fragments is served.
        let mut client = connect(address);
        client.send(Message::binary(request(2, b"login"))).unwrap();
        assert_eq!(reply(&mut client).0, 2);
        let large = request(3, &vec![7; 1 << 20]);
        assert!(send_in_fragments(&mut client, &large, true));
        assert_eq!(reply(&mut client), (3, vec![7; 1 << 20]));
        client.close(None).unwrap();
    });
}

#[test]
fn clients_that_never_upgrade_or_never_log_in_are_closed_after_the_grace() {
    let handler = Scripted::logging_in();
    serve_until_done(handler, |address| {
        let started = Instant::now();
        // Connected, not a byte sent: the upgrade times out.
        let mut silent = TcpStream::connect(address).unwrap();
        silent
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut byte = [0; 1];
        assert_eq!(std::io::Read::read(&mut silent, &mut byte).unwrap(), 0);
        // Upgraded, never logged in.
        let mut idle = connect(address);
        loop {
            match idle.read() {
                Ok(Message::Close(_)) => {}
                Ok(other) => panic!("unexpected {other:?}"),
                Err(_) => break,
            }
        }
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(500), "{waited:?}");
        assert!(waited < Duration::from_secs(8), "{waited:?}");
    });
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    let config = WsConfig {
        write_timeout: Duration::from_millis(400),
        ..config()
    };
    serve_with(config, Scripted::default(), |address| {
        // Asks for 9 answers of 4 MiB and reads none: far more than the socket buffers hold.
        let mut deaf = connect(address);
        for number in 3..12 {
            deaf.send(Message::binary(request(number, b"reply:4194304")))
                .unwrap();
        }
        // Meanwhile another client is served.
        let mut other = connect(address);
        other.send(Message::binary(request(3, b"hello"))).unwrap();
        assert_eq!(reply(&mut other), (3, b"hello".to_vec()));
        std::thread::sleep(Duration::from_secs(2));
        // Whatever reached the socket before the server gave up, then the end.
        let stream = deaf.get_mut();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let (mut received, mut sink) = (0_usize, vec![0; 1 << 16]);
        let ended = loop {
            match std::io::Read::read(stream, &mut sink) {
                Ok(0) => break true,
                Ok(read) => received += read,
                Err(error) => break error.kind() == std::io::ErrorKind::ConnectionReset,
            }
        };
        assert!(ended, "the server closed the connection");
        assert!(
            received < 9 * (4 << 20),
            "it stopped writing: {received} bytes"
        );
        other.send(Message::binary(request(4, b"again"))).unwrap();
        assert_eq!(reply(&mut other), (4, b"again".to_vec()));
        other.close(None).unwrap();
    });
}

/// A client that pipelines requests for small answers and then stops reading (and sending)
/// is ended within a few write timeouts. Against the server, such a link waited in its read
/// for good: tungstenite flushes what it holds before it yields the next message, so with
/// every answer handed over the link had nothing of its own left to time out; the kernel's
/// unacknowledged-data timeout (`end_when_unacknowledged`) ends it now. Here the link's own
/// send may time out first; either way the connection must not stay.
#[test]
fn a_client_that_stops_reading_small_answers_is_dropped_after_the_write_timeout() {
    let config = WsConfig {
        write_timeout: Duration::from_millis(400),
        in_flight_max: 1024,
        ..config()
    };
    serve_with(config, Scripted::default(), |address| {
        let mut deaf = connect(address);
        deaf.get_mut()
            .set_write_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        // Pipelines answers of 1 KiB until its own sends block.
        let started = Instant::now();
        let mut number = 3;
        while started.elapsed() < Duration::from_secs(10) {
            let sent = deaf.send(Message::binary(request(number, b"reply:1500")));
            if sent.is_err() {
                break;
            }
            number += 1;
        }
        // Reads nothing (reading would let the server go on), then finds the connection
        // reset: a write fails at once instead of blocking behind the full window.
        std::thread::sleep(Duration::from_secs(4));
        let stream = deaf.get_mut();
        let written = std::io::Write::write(stream, &[0; 1024]);
        let kind = written.map_or_else(|error| error.kind(), |_| std::io::ErrorKind::Other);
        assert!(
            matches!(
                kind,
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
            "the server ended the connection: {kind:?}"
        );
    });
}

#[test]
fn a_client_that_stops_reading_is_dropped_early_while_replies_wait_for_memory() {
    // The write timeout alone would hold the replies for half a minute.
    let config = WsConfig {
        write_timeout: Duration::from_secs(30),
        ..config()
    };
    serve_with(config, Scripted::short_of_reply_memory(), |address| {
        let mut deaf = connect(address);
        for number in 3..12 {
            deaf.send(Message::binary(request(number, b"reply:4194304")))
                .unwrap();
        }
        // Past the stall allowed while memory is short: what was sent, then the end.
        std::thread::sleep(Duration::from_secs(5));
        let stream = deaf.get_mut();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let mut sink = vec![0; 1 << 16];
        let ended = loop {
            match std::io::Read::read(stream, &mut sink) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(error) => break error.kind() == std::io::ErrorKind::ConnectionReset,
            }
        };
        assert!(ended, "the server closed the connection");
    });
}

#[test]
fn a_client_that_vanishes_mid_answer_ends_its_connection_only() {
    serve_until_done(Scripted::default(), |address| {
        for _ in 0..3 {
            let mut vanishing = connect(address);
            for number in 3..8 {
                vanishing
                    .send(Message::binary(request(number, b"reply:4194304")))
                    .unwrap();
            }
            std::thread::sleep(Duration::from_millis(100));
            // Gone with a reset while the server writes: its write fails, then its close.
            let stream = vanishing.get_mut();
            rustix::net::sockopt::set_socket_linger(&*stream, Some(Duration::ZERO)).unwrap();
            drop(vanishing);
        }
        let mut other = connect(address);
        other.send(Message::binary(request(3, b"hello"))).unwrap();
        assert_eq!(reply(&mut other), (3, b"hello".to_vec()));
        other.close(None).unwrap();
    });
}

#[test]
fn plain_connections_are_handed_to_every_shard_at_accept() {
    use super::handoff::{WsShard, handoff_channel};
    let count = super::handoff::WsCount::default();
    let (handoff, inbox) = handoff_channel();
    let other_count = std::sync::Arc::clone(&count);
    // The second shard: its own thread, runtime and handler.
    let other = std::thread::spawn(move || {
        compio::runtime::Runtime::new().unwrap().block_on(async {
            let handler = Rc::new(Scripted::default());
            let shard = WsShard::new(config(), Rc::clone(&handler), other_count);
            shard.receive(inbox).await;
            handler.assert_all_closed();
            handler.opened()
        })
    });
    let runtime = compio::runtime::Runtime::new().unwrap();
    let on_leader = runtime.block_on(async {
        let server = WsServer::bind(config()).await.unwrap();
        let address = server.local_address();
        let client = std::thread::spawn(move || {
            let mut sockets: Vec<_> = (0..4).map(|_| connect(address)).collect();
            for (number, socket) in (3..).zip(&mut sockets) {
                socket
                    .send(Message::binary(request(number, b"hello")))
                    .unwrap();
                assert_eq!(reply(socket), (number, b"hello".to_vec()));
            }
            for mut socket in sockets {
                socket.close(None).unwrap();
            }
        });
        let done = async {
            while !client.is_finished() {
                compio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let handler = Rc::new(Scripted::default());
        let local = WsShard::new(config(), Rc::clone(&handler), count);
        server.serve_sharded(&local, vec![handoff], done).await;
        client.join().unwrap();
        handler.assert_all_closed();
        handler.opened()
    });
    let on_other = other.join().unwrap();
    assert_eq!(
        (on_leader, on_other),
        (2, 2),
        "round-robin over both shards"
    );
}

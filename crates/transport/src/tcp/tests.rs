//! The TCP loop over loopback with scripted handlers: pipelined requests are answered as
//! they complete, a bad frame closes only its own connection, and an eviction the handler
//! signals between requests reaches the client before the connection closes.

use std::cell::Cell;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use proto::header::{
    EvictionHeader, EvictionReason, HEADER_SIZE, Operation, ReplyHeader, RequestHeader,
};
use proto::{Dialect, ErrorCode};
use zerocopy::{FromBytes, IntoBytes};

use super::{TcpConfig, TcpServer, TcpShard};
use crate::{Answer, ConnectionHandler};

/// Request 1 waits until request 2 has been handled; every answer echoes the request body,
/// its first half as the reply body and the rest as the tail (a vectored write).
#[derive(Default)]
struct Scripted {
    second_seen: Cell<bool>,
}

impl ConnectionHandler for Scripted {
    type Connection = ();

    fn open(&self, _peer: SocketAddr) {}

    async fn handle(&self, (): &(), header: &[u8; HEADER_SIZE], body: &[u8]) -> Answer {
        let request = RequestHeader::ref_from_bytes(header).unwrap().request.get();
        if request == 1 {
            while !self.second_seen.get() {
                compio::time::sleep(Duration::from_millis(1)).await;
            }
        } else {
            self.second_seen.set(true);
        }
        Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: if request == 3 {
                ErrorCode::InvalidCommand.as_u32()
            } else {
                0
            },
            commit: 0,
            body: body[..body.len() / 2].to_vec(),
            tail: body[body.len() / 2..].to_vec(),
        }
    }

    fn evicted(&self, (): &()) -> impl Future<Output = EvictionReason> {
        std::future::pending()
    }

    fn authenticated(&self, (): &()) -> bool {
        true
    }

    fn dialect(&self, (): &()) -> Dialect {
        Dialect::V0_12_2
    }

    fn close(&self, (): ()) {}
}

/// Echoes every request but number 2, which fires the eviction and is never answered: the
/// eviction frame must come from the signal, not from an answer.
#[derive(Default)]
struct Evicting {
    fired: Cell<bool>,
}

impl ConnectionHandler for Evicting {
    type Connection = ();

    fn open(&self, _peer: SocketAddr) {}

    async fn handle(&self, (): &(), header: &[u8; HEADER_SIZE], body: &[u8]) -> Answer {
        if RequestHeader::ref_from_bytes(header).unwrap().request.get() == 2 {
            self.fired.set(true);
            std::future::pending::<()>().await;
        }
        Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: 0,
            commit: 0,
            body: body.to_vec(),
            tail: Vec::new(),
        }
    }

    async fn evicted(&self, (): &()) -> EvictionReason {
        while !self.fired.get() {
            compio::time::sleep(Duration::from_millis(1)).await;
        }
        EvictionReason::StaleClient
    }

    fn authenticated(&self, (): &()) -> bool {
        true
    }

    fn dialect(&self, (): &()) -> Dialect {
        Dialect::V0_12_2
    }

    fn close(&self, (): ()) {}
}

pub(super) fn request(number: u64, body: &[u8]) -> Vec<u8> {
    let mut header = RequestHeader::new(7, Operation::NonReplicated, body.len());
    header.request = number.into();
    header.session = 1.into();
    let mut frame = header.as_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

pub(super) fn read_frame(stream: &mut TcpStream) -> Vec<u8> {
    let mut frame = vec![0; 256];
    stream.read_exact(&mut frame).unwrap();
    let size = u32::from_le_bytes(frame[48..52].try_into().unwrap());
    frame.resize(usize::try_from(size).unwrap(), 0);
    stream.read_exact(&mut frame[256..]).unwrap();
    frame
}

/// The client side, on its own thread: the runtime thread serves.
fn client(address: SocketAddr) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&request(1, b"first")).unwrap();
    stream.write_all(&request(2, b"second")).unwrap();
    let replies: Vec<Vec<u8>> = (0..2).map(|_| read_frame(&mut stream)).collect();
    let numbers: Vec<u64> = replies
        .iter()
        .map(|reply| ReplyHeader::parse(reply).unwrap().request.get())
        .collect();
    assert_eq!(
        numbers,
        [2, 1],
        "the parked request must not hold up the next one"
    );
    assert_eq!(&replies[1][256..], b"first");

    stream.write_all(&request(3, b"refused")).unwrap();
    let refused = read_frame(&mut stream);
    assert_eq!(refused.len(), 256, "a refusal has no body");

    let mut bad = TcpStream::connect(address).unwrap();
    bad.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut oversized = request(4, b"");
    oversized[48..52].copy_from_slice(&(1u32 << 30).to_le_bytes());
    bad.write_all(&oversized).unwrap();
    let eviction = read_frame(&mut bad);
    assert!(EvictionHeader::parse(&eviction).is_ok());
    assert_eq!(
        bad.read(&mut [0; 1]).unwrap(),
        0,
        "the bad connection is closed"
    );

    stream.write_all(&request(5, b"still here")).unwrap();
    assert_eq!(&read_frame(&mut stream)[256..], b"still here");

    // A large body arriving in pieces with pauses between them is read whole and in order
    // (the pool read waits for all of it in one receive).
    let body: Vec<u8> = (0..300_000_u32).map(|index| (index % 251) as u8).collect();
    for piece in request(6, &body).chunks(40_000) {
        stream.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(&read_frame(&mut stream)[256..], &body[..]);
}

/// The eviction arrives while request 2 is still being handled, with reason 13 and the
/// client id of the connection's requests, and the server closes the socket after it.
fn evicted_client(address: SocketAddr) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&request(1, b"alive")).unwrap();
    assert_eq!(&read_frame(&mut stream)[256..], b"alive");
    stream.write_all(&request(2, b"goes silent")).unwrap();
    let frame = read_frame(&mut stream);
    let eviction = EvictionHeader::parse(&frame).unwrap();
    assert_eq!(eviction.reason(), Some(EvictionReason::StaleClient));
    assert_eq!(eviction.reason, 13);
    assert_eq!(eviction.client.get(), 7);
    assert_eq!(
        stream.read(&mut [0; 1]).unwrap(),
        0,
        "the evicted connection is closed"
    );
}

#[test]
fn pipelined_requests_bad_frames_and_shutdown() {
    serve_until_done(Scripted::default(), client);
}

/// A client that keeps Nagle's algorithm on (the SDK's default) and writes each header and
/// body separately: the body waits for the header's acknowledgement, which Linux delays by
/// up to 40 ms unless the server sends it at once. Counts the round trips that stalled so
/// (well over 30 ms where one takes well under 1 ms) instead of timing the whole run, so a
/// slow machine does not fail it; without the quick acknowledgement nearly all of them do.
fn nagle_client(address: SocketAddr) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(!stream.nodelay().unwrap(), "Nagle's algorithm stays on");
    let body = vec![7_u8; 2000];
    let requests = 100;
    let mut stalled = 0;
    for number in 0..requests {
        let frame = request(10 + number, &body);
        let started = std::time::Instant::now();
        stream.write_all(&frame[..HEADER_SIZE]).unwrap();
        stream.write_all(&frame[HEADER_SIZE..]).unwrap();
        assert_eq!(read_frame(&mut stream)[HEADER_SIZE..], body[..]);
        if started.elapsed() >= Duration::from_millis(30) {
            stalled += 1;
        }
    }
    assert!(
        stalled <= requests / 10,
        "{stalled} of {requests} round trips waited for a delayed acknowledgement"
    );
}

#[test]
fn a_client_with_nagle_on_is_not_held_by_delayed_acknowledgements() {
    serve_until_done(Evicting::default(), nagle_client);
}

#[test]
fn a_signalled_eviction_is_written_and_closes_the_connection() {
    serve_until_done(Evicting::default(), evicted_client);
}

/// Serves `handler` on a loopback listener until `client`, run on its own thread (the
/// runtime thread serves), returns; fails if the client failed.
fn serve_until_done<H: ConnectionHandler + 'static>(handler: H, client: fn(SocketAddr)) {
    serve_with(config(), handler, client);
}

/// [`serve_until_done`] with `config`.
pub(super) fn serve_with<H: ConnectionHandler + 'static>(
    config: TcpConfig,
    handler: H,
    client: fn(SocketAddr),
) {
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = TcpServer::bind(config).await.unwrap();
        let address = server.local_address();
        let done = Rc::new(Cell::new(false));
        let thread = std::thread::spawn(move || client(address));
        let stop = {
            let done = Rc::clone(&done);
            async move {
                while !done.get() {
                    compio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        };
        let watcher = compio::runtime::spawn({
            let done = Rc::clone(&done);
            async move {
                while !thread.is_finished() {
                    compio::time::sleep(Duration::from_millis(5)).await;
                }
                let result = thread.join();
                done.set(true);
                result
            }
        });
        server.serve(Rc::new(handler), test_pool(), stop).await;
        assert!(watcher.await.unwrap().is_ok(), "the client thread failed");
    });
}

/// Answers every request with the name of the thread that handled it.
struct ThreadName;

impl ConnectionHandler for ThreadName {
    type Connection = ();

    fn open(&self, _peer: SocketAddr) {}

    async fn handle(&self, (): &(), _header: &[u8; HEADER_SIZE], _body: &[u8]) -> Answer {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: 0,
            commit: 0,
            body: name.into_bytes(),
            tail: Vec::new(),
        }
    }

    fn authenticated(&self, (): &()) -> bool {
        true
    }

    fn dialect(&self, (): &()) -> Dialect {
        Dialect::V0_12_2
    }

    async fn evicted(&self, (): &()) -> EvictionReason {
        std::future::pending().await
    }

    fn close(&self, (): ()) {}
}

/// A pool with the default budget: blocks are allocated only as bodies need them.
fn test_pool() -> Rc<pool::Pool> {
    Rc::new(pool::Pool::new(pool::PoolConfig::default()).unwrap())
}

pub(super) fn config() -> TcpConfig {
    TcpConfig {
        address: "127.0.0.1:0".parse().unwrap(),
        connections_max: 8,
        frame_size_max: 1 << 20,
        in_flight_max: 4,
        unauthenticated_frame_size_max: 16 << 10,
        handshake_grace: Duration::from_secs(10),
        frame_read_timeout: Duration::from_secs(10),
        write_timeout: Duration::from_secs(10),
        connections_per_ip_max: 0,
    }
}

/// A second shard on its own thread and runtime, serving the connections handed through
/// `inbox` with the handler `make` builds there, until the hand-off channel closes.
fn spawn_shard<H: ConnectionHandler + 'static>(
    make: impl FnOnce() -> H + Send + 'static,
    connections: super::ConnectionCount,
    inbox: super::HandoffInbox,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("shard-1".into())
        .spawn(move || {
            compio::runtime::Runtime::new()
                .unwrap()
                .block_on(async move {
                    let tcp = TcpShard::new(config(), Rc::new(make()), connections, test_pool());
                    tcp.receive(inbox).await;
                    tcp.drain().await;
                });
        })
        .unwrap()
}

/// The accept loop hands every other connection to the second shard's thread, which serves
/// it on its own runtime; connections over `connections_max` (counted on both) are closed.
#[test]
fn connections_are_handed_round_robin_to_shards() {
    let (handoff, inbox) = super::handoff_channel();
    let connections = super::ConnectionCount::default();
    let shard = spawn_shard(|| ThreadName, Arc::clone(&connections), inbox);
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = TcpServer::bind(config()).await.unwrap();
        let address = server.local_address();
        let connections_here = Arc::clone(&connections);
        let local = TcpShard::new(config(), Rc::new(ThreadName), connections_here, test_pool());
        let client = std::thread::spawn(move || {
            let mut streams: Vec<TcpStream> = (0..4)
                .map(|_| TcpStream::connect(address).unwrap())
                .collect();
            let mut names = Vec::new();
            for (number, stream) in (1..).zip(&mut streams) {
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                stream.write_all(&request(number, b"")).unwrap();
                names.push(String::from_utf8(read_frame(stream)[256..].to_vec()).unwrap());
            }
            names
        });
        let done = async {
            while !client.is_finished() {
                compio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        server.accept(&local, vec![handoff], None, done).await;
        let names = client.join().unwrap();
        let on_shard_1 = names.iter().filter(|name| *name == "shard-1").count();
        assert_eq!(on_shard_1, 2, "{names:?}");
        local.drain().await;
    });
    shard.join().unwrap();
}

/// Holds request 1 for a while, and records the order requests finish in.
#[derive(Default)]
struct Holding {
    finished: std::cell::RefCell<Vec<u64>>,
}

impl ConnectionHandler for Holding {
    type Connection = ();

    fn open(&self, _peer: SocketAddr) {}

    async fn handle(&self, (): &(), header: &[u8; HEADER_SIZE], body: &[u8]) -> Answer {
        let request = RequestHeader::ref_from_bytes(header).unwrap().request.get();
        if request == 1 {
            compio::time::sleep(Duration::from_millis(200)).await;
        }
        self.finished.borrow_mut().push(request);
        Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: 0,
            commit: 0,
            body: body.len().to_le_bytes().to_vec(),
            tail: Vec::new(),
        }
    }

    async fn evicted(&self, (): &()) -> EvictionReason {
        std::future::pending().await
    }

    fn authenticated(&self, (): &()) -> bool {
        true
    }

    fn dialect(&self, (): &()) -> Dialect {
        Dialect::V0_12_2
    }

    fn close(&self, (): ()) {}
}

/// With room in the pool for one body, a second connection's body waits until the first
/// request is answered and its buffer returns: memory is bounded, nothing is refused.
#[test]
fn an_exhausted_pool_holds_reading_back_until_memory_returns() {
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = TcpServer::bind(config()).await.unwrap();
        let address = server.local_address();
        let budget = pool::PoolConfig {
            enabled: true,
            size_bytes: 8192,
            bucket_capacity: 4,
        };
        let pool = Rc::new(pool::Pool::new_unchecked(budget));
        let handler = Rc::new(Holding::default());
        let client = std::thread::spawn(move || {
            let body = vec![7u8; 6000];
            let mut first = TcpStream::connect(address).unwrap();
            first.write_all(&request(1, &body)).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let mut second = TcpStream::connect(address).unwrap();
            second.write_all(&request(2, &body)).unwrap();
            for stream in [&mut first, &mut second] {
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let reply = read_frame(stream);
                assert_eq!(&reply[256..], &6000usize.to_le_bytes());
            }
        });
        let done = async {
            while !client.is_finished() {
                compio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        server
            .serve(Rc::clone(&handler), Rc::clone(&pool), done)
            .await;
        client.join().unwrap();
        assert_eq!(*handler.finished.borrow(), [1, 2], "the second body waited");
        assert!(pool.allocated_bytes() <= 8192);
    });
}

/// Counts the requests of a connection and answers each with the name of the serving
/// thread; a connection served on the test's thread moves to "shard-1" after two requests,
/// carrying its count.
struct Mover;

impl ConnectionHandler for Mover {
    type Connection = Cell<u32>;

    fn open(&self, _peer: SocketAddr) -> Cell<u32> {
        Cell::new(0)
    }

    async fn handle(&self, count: &Cell<u32>, _header: &[u8; HEADER_SIZE], _body: &[u8]) -> Answer {
        count.set(count.get() + 1);
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: 0,
            commit: 0,
            body: format!("{name} {}", count.get()).into_bytes(),
            tail: Vec::new(),
        }
    }

    fn may_move(&self, _count: &Cell<u32>) -> bool {
        std::thread::current().name() != Some("shard-1")
    }

    fn move_to(&self, count: &Cell<u32>) -> Option<usize> {
        (self.may_move(count) && count.get() >= 2).then_some(1)
    }

    fn detach(&self, count: Cell<u32>) -> Result<Box<dyn std::any::Any + Send>, Cell<u32>> {
        Ok(Box::new(count.get()))
    }

    fn attach(&self, detached: Box<dyn std::any::Any + Send>) -> Option<Cell<u32>> {
        detached
            .downcast::<u32>()
            .ok()
            .map(|count| Cell::new(*count))
    }

    fn authenticated(&self, _count: &Cell<u32>) -> bool {
        true
    }

    fn dialect(&self, _count: &Cell<u32>) -> Dialect {
        Dialect::V0_12_2
    }

    async fn evicted(&self, _count: &Cell<u32>) -> EvictionReason {
        std::future::pending().await
    }

    fn close(&self, _count: Cell<u32>) {}
}

/// A connection the handler moves goes to the other shard between two frames: every request
/// is answered once, in order, the state travels (the count goes on), and requests sent
/// back to back after the move are all answered there.
#[test]
fn a_connection_moves_to_the_shard_its_handler_names() {
    let (to_shard_1, inbox) = super::handoff_channel();
    let connections = super::ConnectionCount::default();
    let shard = spawn_shard(|| Mover, Arc::clone(&connections), inbox);
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = TcpServer::bind(config()).await.unwrap();
        let address = server.local_address();
        let local = TcpShard::new(
            config(),
            Rc::new(Mover),
            Arc::clone(&connections),
            test_pool(),
        );
        local.set_peers(vec![None, Some(to_shard_1.clone())]);
        let client = std::thread::spawn(move || {
            let mut stream = TcpStream::connect(address).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut answers = Vec::new();
            for number in 1..=4 {
                stream.write_all(&request(number, b"")).unwrap();
                answers.push(String::from_utf8(read_frame(&mut stream)[256..].to_vec()).unwrap());
            }
            let mut burst = Vec::new();
            for number in 5..=7 {
                burst.extend_from_slice(&request(number, b""));
            }
            stream.write_all(&burst).unwrap();
            for _ in 5..=7 {
                answers.push(String::from_utf8(read_frame(&mut stream)[256..].to_vec()).unwrap());
            }
            answers
        });
        let done = async {
            while !client.is_finished() {
                compio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        server.accept(&local, Vec::new(), None, done).await;
        let answers = client.join().unwrap();
        let (counts, threads): (Vec<u32>, Vec<String>) = answers
            .iter()
            .map(|answer| {
                let (thread, count) = answer.rsplit_once(' ').unwrap();
                (count.parse::<u32>().unwrap(), thread.to_owned())
            })
            .unzip();
        let mut sorted = counts.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (1..=7).collect::<Vec<_>>(), "{answers:?}");
        assert_eq!(&counts[..4], &[1, 2, 3, 4], "{answers:?}");
        assert!(
            threads[..2].iter().all(|name| name != "shard-1"),
            "{answers:?}"
        );
        assert!(
            threads[2..].iter().all(|name| name == "shard-1"),
            "{answers:?}"
        );
        local.drain().await;
        let stopped = to_shard_1.send(super::Arrival::Stop).await;
        assert!(stopped.is_ok(), "shard 1 stopped early");
    });
    shard.join().unwrap();
}

//! The listener over loopback: a client that stops reading its responses is dropped after
//! the write timeout (not the idle timeout, which is long here), and the others are served
//! meanwhile.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::time::Duration;

use super::{HttpConfig, HttpServer};
use crate::auth::SessionLimits;
use crate::auth::tests::{AnyoneLogsIn, jwt_settings};
use crate::cors::Cors;
use crate::wire::Limits;

fn config() -> HttpConfig {
    HttpConfig {
        address: "127.0.0.1:0".parse().unwrap(),
        connections_max: 16,
        limits: Limits {
            head_size_max: 64 << 10,
            body_size_max: 1 << 20,
            request_timeout: Duration::from_mins(1),
            idle_timeout: Duration::from_mins(1),
        },
        write_timeout: Duration::from_millis(400),
        handshake_grace: Duration::from_secs(5),
        // Preflights answered with the headers they ask for: a large answer to a request.
        cors: Cors {
            enabled: true,
            allowed_origins: vec!["*".into()],
            allowed_methods: vec!["GET".into()],
            ..Cors::default()
        },
        jwt: jwt_settings(),
        metrics_endpoint: Some("/metrics".to_owned()),
        web_ui: false,
        sessions: SessionLimits {
            total: 100,
            per_user: 10,
        },
    }
}

/// Serves on this thread while `client` runs on another; stops once the client is done.
fn serve_until_done(client: impl FnOnce(SocketAddr) + Send + 'static) {
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = HttpServer::bind(config()).await.unwrap();
        let address = server.local_address();
        let client = std::thread::spawn(move || client(address));
        let done = async {
            while !client.is_finished() {
                compio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        server.serve(Rc::new(AnyoneLogsIn::default()), done).await;
        client.join().unwrap();
    });
}

fn ping(address: SocketAddr) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Pipelined preflights, each answered with about 48 KB: 96 MB in all.
const PREFLIGHTS: usize = 2_000;

#[test]
fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    serve_until_done(|address| {
        let deaf = TcpStream::connect(address).unwrap();
        let mut writer = deaf.try_clone().unwrap();
        // Pipelined requests whose responses it never reads: far more than the buffers hold.
        // The writes stop counting once the server stops reading (or closes).
        writer
            .set_write_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let pipelined = std::thread::spawn(move || {
            let asked: Vec<String> = (0..8_000).map(|header| format!("h{header:04}")).collect();
            let request = format!(
                "OPTIONS /ping HTTP/1.1\r\nHost: x\r\nOrigin: http://a\r\n\
                 Access-Control-Request-Method: GET\r\n\
                 Access-Control-Request-Headers: {}\r\n\r\n",
                asked.join(",")
            );
            (0..PREFLIGHTS).all(|_| writer.write_all(request.as_bytes()).is_ok())
        });
        assert!(
            ping(address).starts_with("HTTP/1.1 200"),
            "the others are served"
        );
        std::thread::sleep(Duration::from_secs(3));
        let mut deaf = deaf;
        deaf.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let (mut received, mut sink) = (Vec::new(), vec![0; 1 << 16]);
        let ended = loop {
            match deaf.read(&mut sink) {
                Ok(0) => break true,
                Ok(read) => received.extend_from_slice(&sink[..read]),
                Err(error) => break error.kind() == ErrorKind::ConnectionReset,
            }
        };
        let _ = pipelined.join();
        let responses = received
            .windows(12)
            .filter(|at| at == b"HTTP/1.1 204")
            .count();
        assert!(
            ended,
            "the server closed the connection after {responses} responses"
        );
        assert!(
            responses < PREFLIGHTS,
            "it stopped writing: {responses} responses"
        );
        assert!(ping(address).starts_with("HTTP/1.1 200"));
    });
}

/// Logs anyone in (as [`AnyoneLogsIn`]); every other request parks for ever, counted when it
/// starts and when it is dropped.
#[derive(Default)]
struct Parking {
    logins: AnyoneLogsIn,
    parked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// Counts its drop.
struct Dropped(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl transport::ConnectionHandler for Parking {
    type Connection = ();

    fn open(&self, peer: SocketAddr) {
        self.logins.open(peer);
    }

    async fn handle(
        &self,
        (): &(),
        header: &[u8; proto::header::HEADER_SIZE],
        body: &[u8],
    ) -> transport::Answer {
        use zerocopy::FromBytes;
        let request = proto::header::RequestHeader::ref_from_bytes(header).unwrap();
        if request.operation() == Some(proto::header::Operation::Register) {
            return self.logins.handle(&(), header, body).await;
        }
        let _dropped = Dropped(std::sync::Arc::clone(&self.dropped));
        self.parked
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::pending().await
    }

    async fn evicted(&self, (): &()) -> proto::header::EvictionReason {
        std::future::pending().await
    }

    fn dialect(&self, (): &()) -> proto::Dialect {
        proto::Dialect::V0_12_2
    }

    fn authenticated(&self, (): &()) -> bool {
        true
    }

    fn close(&self, (): ()) {
        self.logins.close(());
    }
}

/// Waits up to `within` for `counter` to reach `value`.
fn reaches(counter: &std::sync::atomic::AtomicUsize, value: usize, within: Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if counter.load(std::sync::atomic::Ordering::SeqCst) >= value {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_request_whose_client_went_away_is_dropped_while_it_waits() {
    let handler = Parking::default();
    let (parked, dropped) = (
        std::sync::Arc::clone(&handler.parked),
        std::sync::Arc::clone(&handler.dropped),
    );
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = HttpServer::bind(config()).await.unwrap();
        let address = server.local_address();
        let client = std::thread::spawn(move || {
            let mut stream = TcpStream::connect(address).unwrap();
            stream
                .write_all(
                    b"GET /streams HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer pat7\r\n\r\n",
                )
                .unwrap();
            assert!(
                reaches(&parked, 1, Duration::from_secs(5)),
                "the request parked"
            );
            drop(stream);
            assert!(
                reaches(&dropped, 1, Duration::from_secs(3)),
                "the parked request outlived its client"
            );
            // The listener still serves.
            assert!(ping(address).starts_with("HTTP/1.1 200"));
        });
        let done = async {
            while !client.is_finished() {
                compio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        server.serve(Rc::new(handler), done).await;
        client.join().unwrap();
    });
}

/// The status line of `request`, sent on a connection of its own.
fn status_of(address: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn a_private_route_without_a_credential_is_unauthorized_before_its_path_is_judged() {
    serve_until_done(|address| {
        let long = "u".repeat(300);
        let bad = format!("GET /users/{long} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert!(status_of(address, &bad).starts_with("HTTP/1.1 401"));
        // With a credential the path's fault is the answer.
        let with = format!(
            "GET /users/{long} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer pat7\r\n\
             Connection: close\r\n\r\n"
        );
        assert!(status_of(address, &with).starts_with("HTTP/1.1 400"));
        // An unknown route stays unknown.
        let unknown = "GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        assert!(status_of(address, unknown).starts_with("HTTP/1.1 404"));
    });
}

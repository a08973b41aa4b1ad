//! Starts the built `iggy` binary on a free loopback port with a temporary data directory and
//! talks to it over raw sockets: `PING` before login, `LOGIN_REGISTER` (PROTOCOL.md A.1, A.3),
//! garbage that gets its connection closed while another connection keeps working, and a
//! SIGTERM that ends the process with status 0.

// The helpers are test steps: a failed step is the test failing.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use proto::Dialect;
use proto::codec::{WireName, encode_to_vec};
use proto::codes::CommandCode;
use proto::commands::session::{BindSecret, LoginRegister, Secret};
use proto::commands::system::ClusterMetadata;
use proto::commands::{Reply, ReplyOutcome};
use proto::dialect::VersionPrefix;
use proto::header::{EvictionHeader, EvictionReason, Operation, ReplyHeader, RequestHeader};
use zerocopy::IntoBytes;

const CLIENT: u128 = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10;

/// The server process, killed if a test fails before stopping it.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn start(data: &Path, arguments: &[&str]) -> Server {
    start_with(data, arguments, &[])
}

fn start_with(data: &Path, arguments: &[&str], environment: &[(&str, &str)]) -> Server {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_iggy"))
        .args(arguments)
        .envs(environment.iter().copied())
        .env("IGGY_TCP_ADDRESS", format!("127.0.0.1:{port}"))
        .env("IGGY_SYSTEM_PATH", data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the server did not start listening"
        );
        sleep(Duration::from_millis(20));
    }
    server
}

/// SIGTERM, and the exit status must be 0.
fn stop(mut server: Server) {
    let pid = server.child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// Sends a request and reads one whole frame back.
fn exchange(stream: &mut TcpStream, header: &RequestHeader, body: &[u8]) -> Vec<u8> {
    let mut frame = header.as_bytes().to_vec();
    frame.extend_from_slice(body);
    stream.write_all(&frame).unwrap();
    read_frame(stream)
}

fn read_frame(stream: &mut TcpStream) -> Vec<u8> {
    let mut frame = vec![0; 256];
    stream.read_exact(&mut frame).unwrap();
    let size = u32::from_le_bytes(frame[48..52].try_into().unwrap());
    frame.resize(usize::try_from(size).unwrap(), 0);
    stream.read_exact(&mut frame[256..]).unwrap();
    frame
}

fn non_replicated(code: CommandCode, session: u64, request: u64) -> RequestHeader {
    let mut header = RequestHeader::new(CLIENT, Operation::NonReplicated, 0);
    header.code = code.as_u32().into();
    header.session = session.into();
    header.request = request.into();
    header
}

fn ping(stream: &mut TcpStream) {
    let reply = exchange(stream, &non_replicated(CommandCode::Ping, 0, 0), &[]);
    let header = ReplyHeader::parse(&reply).unwrap();
    assert_eq!(header.status.get(), 0);
    assert_eq!(header.operation(), Some(Operation::NonReplicated));
    assert_eq!(reply.len(), 256);
}

/// The A.3 login body: iggy/iggy, protocol 0.12.2, bind secret 32 × 0xab.
fn login_body() -> Vec<u8> {
    let body = LoginRegister {
        version: VersionPrefix::rust_sdk(Dialect::V0_12_2),
        bind_secret: BindSecret([0xab; 32]),
        username: WireName::new("iggy").unwrap(),
        password: Secret::new("iggy").unwrap(),
        context: String::new(),
    };
    encode_to_vec(&body, Dialect::V0_12_2)
}

/// Logs in as iggy/iggy and returns the session.
fn login(stream: &mut TcpStream) -> u64 {
    let body = login_body();
    assert_eq!(body.len(), 73, "the A.3 body");
    let mut header = RequestHeader::new(CLIENT, Operation::Register, body.len());
    header.request_checksum = 99.into();
    let reply = exchange(stream, &header, &body);
    let reply_header = ReplyHeader::parse(&reply).unwrap();
    assert_eq!(reply_header.status.get(), 0);
    let outcome = Reply::decode_body(
        CommandCode::LoginRegister,
        Operation::Register,
        &reply[256..],
        Dialect::V0_12_2,
    );
    let ReplyOutcome::Ok(Reply::LoginRegister(login)) = outcome.unwrap() else {
        panic!("login refused");
    };
    assert_eq!(login.user_id, 0);
    assert_eq!(login.server_version.as_str(), "0.9.0");
    login.session
}

#[test]
fn ping_login_roster_garbage_and_sigterm() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--with-default-root-credentials"]);
    let mut stream = connect(&server);
    ping(&mut stream);
    let session = login(&mut stream);
    assert_ne!(session, 0);

    let reply = exchange(
        &mut stream,
        &non_replicated(CommandCode::GetClusterMetadata, session, 1),
        &[],
    );
    let header = ReplyHeader::parse(&reply).unwrap();
    assert_eq!(header.request.get(), 1);
    let roster: ClusterMetadata =
        proto::codec::decode_exact(&reply[256..], Dialect::V0_12_2).unwrap();
    assert_eq!(roster.nodes[0].tcp_port, server.port);

    let mut garbage = connect(&server);
    garbage.write_all(&[0xff; 300]).unwrap();
    let eviction = read_frame(&mut garbage);
    let eviction = EvictionHeader::parse(&eviction).unwrap();
    assert_eq!(
        eviction.reason(),
        Some(EvictionReason::InvalidRequestBodySize)
    );
    // Closed: an orderly end, or a reset because the rest of the garbage was never read.
    let mut rest = Vec::new();
    match garbage.read_to_end(&mut rest) {
        Ok(read) => assert_eq!(read, 0),
        Err(error) => assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset),
    }

    let mut huge = connect(&server);
    let mut absurd = non_replicated(CommandCode::Ping, 0, 0);
    absurd.size = u32::MAX.into();
    huge.write_all(absurd.as_bytes()).unwrap();
    let eviction = read_frame(&mut huge);
    assert!(EvictionHeader::parse(&eviction).is_ok());

    ping(&mut stream);
    let mut another = connect(&server);
    ping(&mut another);

    stop(server);
}

#[test]
fn root_user_survives_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--with-default-root-credentials"]);
    login(&mut connect(&server));
    stop(server);
    assert!(data.path().join("metadata/journal.wal").is_file());
    // No flag now: a first boot would make a random password, a restart keeps iggy/iggy.
    let server = start(data.path(), &[]);
    login(&mut connect(&server));
    stop(server);
    let server = start(data.path(), &["--fresh"]);
    let mut stream = connect(&server);
    let mut header = RequestHeader::new(CLIENT, Operation::Register, 73);
    header.request_checksum = 1.into();
    let body = login_body();
    let eviction = exchange(&mut stream, &header, &body);
    let eviction = EvictionHeader::parse(&eviction).unwrap();
    assert_eq!(eviction.reason(), Some(EvictionReason::InvalidCredentials));
    stop(server);
}

/// The cores each thread named `shard-*` (and the main thread, shard 0) may run on.
fn shard_thread_cores(pid: u32) -> Vec<(String, String)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(task.join("status")).unwrap_or_default();
        let cores = status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        threads.push((name.trim().to_owned(), cores));
    }
    threads
}

/// Whether every shard thread is there and pinned to a core of its own.
fn pinned_one_per_core(threads: &[(String, String)], shards: usize) -> bool {
    let mut cores: Vec<&str> = threads
        .iter()
        .filter(|(name, _)| name == "iggy" || name.starts_with("shard-"))
        .map(|(_, cores)| cores.as_str())
        .collect();
    let all_single = cores.iter().all(|cores| cores.parse::<usize>().is_ok());
    cores.sort_unstable();
    cores.dedup();
    all_single && cores.len() == shards
}

/// With `pin_cores`, the leader runs on the first allowed core and shard *i* on the i-th;
/// every shard is a thread of its own.
#[test]
fn pinned_shards_run_one_per_core() {
    let data = tempfile::tempdir().unwrap();
    let environment = [("IGGY_SYSTEM_SHARDING_PIN_CORES", "true")];
    let server = start_with(
        data.path(),
        &["--with-default-root-credentials"],
        &environment,
    );
    let shards = std::thread::available_parallelism().map_or(1, usize::from);
    // The listener is bound before the shard threads start and pin themselves.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut threads = shard_thread_cores(server.child.id());
    while !pinned_one_per_core(&threads, shards) && Instant::now() < deadline {
        sleep(Duration::from_millis(20));
        threads = shard_thread_cores(server.child.id());
    }
    assert!(pinned_one_per_core(&threads, shards), "{threads:?}");
    stop(server);
}

//! The real `iggy` server binary as a test fixture: a loopback port of its own, a temporary data
//! directory, `--with-default-root-credentials` (`iggy`/`iggy`), and a process that is always
//! stopped when the fixture drops (SIGTERM, then SIGKILL after [`STOP_TIMEOUT`]).
//!
//! The binary is `IGGY_SERVER_BIN` when set, else `target/release/iggy`, else
//! `target/debug/iggy` of the repository (or of `CARGO_TARGET_DIR`'s parent layout). A test fails
//! with the paths it tried when none exists. With `IGGY_KEEP_LOGS` set, server logs are kept
//! (their paths printed) instead of removed. Every wait is bounded; nothing listens beyond
//! 127.0.0.1.

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a start may take before the port accepts connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a SIGTERM may take before the fixture escalates to SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The root credentials `--with-default-root-credentials` creates.
pub const ROOT_USERNAME: &str = "iggy";
pub const ROOT_PASSWORD: &str = "iggy";

/// One server process and the data directory it owns. Dropping it stops the process and removes
/// the directory.
pub struct Server {
    binary: PathBuf,
    data: TempDir,
    address: SocketAddr,
    /// The WebSocket listener's address (used by builds with feature `ws`).
    websocket_address: SocketAddr,
    /// The QUIC listener's address, UDP (used by builds with feature `quic`).
    quic_address: SocketAddr,
    /// The HTTP API listener's address (used by builds with feature `http`).
    http_address: SocketAddr,
    extra_env: Vec<(String, String)>,
    /// Arguments after the fixture's own (a cluster node's `--config` and `--replica-id`).
    extra_args: Vec<String>,
    child: Option<Child>,
    log_path: PathBuf,
    starts: u32,
}

impl Server {
    /// Starts a fresh server on a free loopback port.
    pub fn start() -> Server {
        Server::start_with_env(&[])
    }

    /// Starts a fresh server with extra `IGGY_*` overrides.
    pub fn start_with_env(extra_env: &[(&str, &str)]) -> Server {
        let mut server = Server::prepare(extra_env);
        server.spawn(true);
        server
    }

    /// A fixture with its directory and ports chosen, not started.
    fn prepare(extra_env: &[(&str, &str)]) -> Server {
        let binary = server_binary();
        let data = tempfile::Builder::new()
            .prefix("iggy-compat-")
            .tempdir()
            .expect("create a temporary data directory");
        let log_path = data.path().with_extension("log");
        let server = Server {
            binary,
            data,
            address: free_loopback_address(),
            websocket_address: free_loopback_address(),
            quic_address: free_loopback_address(),
            http_address: free_loopback_address(),
            extra_env: extra_env
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
            extra_args: Vec::new(),
            child: None,
            log_path,
            starts: 0,
        };
        server
    }

    /// The TCP address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `127.0.0.1:<port>` of the WebSocket listener (builds with feature `ws`).
    pub fn websocket_address(&self) -> String {
        self.websocket_address.to_string()
    }

    /// `127.0.0.1:<port>` of the QUIC listener (builds with feature `quic`).
    pub fn quic_address(&self) -> String {
        self.quic_address.to_string()
    }

    /// `127.0.0.1:<port>` of the HTTP API listener (builds with feature `http`).
    pub fn http_address(&self) -> String {
        self.http_address.to_string()
    }

    /// `127.0.0.1:<port>`, as the SDK's server address.
    pub fn tcp_address(&self) -> String {
        self.address.to_string()
    }

    /// The data directory (`IGGY_SYSTEM_PATH`).
    pub fn data_path(&self) -> &Path {
        self.data.path()
    }

    /// Stops the server with SIGTERM and waits for it (SIGKILL after [`STOP_TIMEOUT`]). Returns
    /// the exit status, `None` when it had to be killed.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        signal(&child, libc::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => {
                    eprintln!("server ignored SIGTERM for {STOP_TIMEOUT:?}, killing it");
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
            }
        }
    }

    /// Kills the server with SIGKILL, as a crash, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
    }

    /// Stops the server with SIGTERM and starts it again on the same data directory and port.
    pub fn restart(&mut self) {
        let status = self.stop();
        assert!(
            status.is_some_and(|status| status.success()),
            "server did not exit 0 on SIGTERM: {status:?}\n{}",
            self.log_tail()
        );
        self.spawn(false);
    }

    /// Starts the server again on the same data directory and port, after [`Server::kill`] or
    /// [`Server::stop`].
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the server is still running");
        self.spawn(false);
    }

    /// As [`Server::start_again`], with `arguments` added to this start only.
    pub fn start_again_with(&mut self, arguments: &[&str]) {
        assert!(self.child.is_none(), "the server is still running");
        let kept = self.extra_args.clone();
        self.extra_args
            .extend(arguments.iter().map(|argument| (*argument).to_owned()));
        self.spawn(false);
        self.extra_args = kept;
    }

    /// The last lines the server wrote to stdout and stderr, for failure messages.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log_path) {
            let _ = file.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(40);
        format!(
            "--- server log ({}) ---\n{}",
            self.log_path.display(),
            lines[start..].join("\n")
        )
    }

    /// Whether the server log contains `needle` within `timeout`. The log is written by the
    /// server as it goes, so a line may land a moment after the state a test observed (the
    /// listener accepts before start-up finishes logging).
    pub fn log_shows_within(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let mut text = String::new();
            if let Ok(mut file) = File::open(&self.log_path) {
                let _ = file.read_to_string(&mut text);
            }
            if text.contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sets (`Some`) or removes (`None`) an `IGGY_*` override for the next starts.
    pub fn set_env(&mut self, key: &str, value: Option<&str>) {
        self.extra_env.retain(|(name, _)| name != key);
        if let Some(value) = value {
            self.extra_env.push((key.to_owned(), value.to_owned()));
        }
    }

    /// Starts the server again on the same data directory, expecting it to refuse: returns
    /// the end of its log once it exited with a failure. Panics if it exits 0 or serves.
    pub fn start_refused(&mut self) -> String {
        assert!(self.child.is_none(), "the server is still running");
        let mut child = self
            .command(false)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", self.binary.display()));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                assert!(
                    !status.success(),
                    "the server exited 0\n{}",
                    self.log_tail()
                );
                return self.log_tail();
            }
            let timeout = Duration::from_millis(100);
            if TcpStream::connect_timeout(&self.address, timeout).is_ok()
                || Instant::now() >= deadline
            {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the server started instead of refusing\n{}",
                    self.log_tail()
                );
            }
            thread::sleep(Duration::from_millis(25));
        }
    }

    fn spawn(&mut self, fresh: bool) {
        let child = self
            .command(fresh)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", self.binary.display()));
        self.child = Some(child);
        self.wait_until_accepting();
    }

    /// The server's command line and environment, its output going to the log.
    fn command(&mut self, fresh: bool) -> Command {
        self.starts += 1;
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open the server log");
        let mut command = Command::new(&self.binary);
        if fresh {
            command.arg("--fresh");
        }
        command
            .arg("--with-default-root-credentials")
            .env("IGGY_TCP_ADDRESS", self.address.to_string())
            // Ports of their own, so servers started side by side never contend for 8092
            // and 8080.
            .env("IGGY_WEBSOCKET_ADDRESS", self.websocket_address.to_string())
            .env("IGGY_QUIC_ADDRESS", self.quic_address.to_string())
            .env("IGGY_HTTP_ADDRESS", self.http_address.to_string())
            .env("IGGY_SYSTEM_PATH", self.data.path())
            .envs(self.extra_env.iter().map(|(key, value)| (key, value)))
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log);
        command
    }

    fn wait_until_accepting(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                panic!(
                    "server exited during start-up with {status}\n{}",
                    self.log_tail()
                );
            }
            let timeout = Duration::from_millis(200);
            if TcpStream::connect_timeout(&self.address, timeout).is_ok() {
                return;
            }
            if Instant::now() >= deadline {
                self.kill();
                panic!(
                    "server did not accept on {} within {START_TIMEOUT:?} (start {})\n{}",
                    self.address,
                    self.starts,
                    self.log_tail()
                );
            }
            thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if thread::panicking() {
            eprintln!("{}", self.log_tail());
        }
        if std::env::var_os("IGGY_KEEP_LOGS").is_none() {
            let _ = std::fs::remove_file(&self.log_path);
        } else {
            eprintln!("server log kept: {}", self.log_path.display());
        }
        let _ = std::fs::remove_file(self.data.path().with_extension("toml"));
    }
}

/// A cluster of real server processes on loopback: node `i` is `--replica-id i` of a roster
/// naming every node's TCP port and replica port, with replica authentication on. Nodes
/// are started side by side (a node waits for no other) and each is a [`Server`] fixture:
/// `kill`, `start_again`, `pause` and `resume` act on one node.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    /// Starts `count` fresh nodes. `heartbeat_timeout` is the cluster's: how long backups
    /// wait for a silent primary before they elect another.
    pub fn start(count: usize, heartbeat_timeout: &str) -> Cluster {
        Self::start_with(count, heartbeat_timeout, &[], "")
    }

    /// As [`Cluster::start`], each node with extra `IGGY_*` overrides and `extra_config`
    /// (TOML tables) in its config file.
    pub fn start_with(
        count: usize,
        heartbeat_timeout: &str,
        extra_env: &[(&str, &str)],
        extra_config: &str,
    ) -> Cluster {
        let mut nodes: Vec<Server> = (0..count).map(|_| Server::prepare(extra_env)).collect();
        let replica_ports: Vec<u16> = (0..count).map(|_| free_loopback_address().port()).collect();
        let mut roster = String::new();
        for (id, node) in nodes.iter().enumerate() {
            roster.push_str(&format!(
                "[[cluster.nodes]]\nname = \"node-{id}\"\nip = \"127.0.0.1\"\n\
                 replica_id = {id}\nports = {{ tcp = {}, tcp_replica = {} }}\n",
                node.address.port(),
                replica_ports[id]
            ));
        }
        let config = format!(
            "[quic]\nenabled = false\n[http]\nenabled = false\n[websocket]\nenabled = false\n\
             [cluster]\nenabled = true\nname = \"compat-cluster\"\n\
             heartbeat_timeout = \"{heartbeat_timeout}\"\ncommit_broadcast_interval = \"100ms\"\n\
             [cluster.auth]\nenabled = true\n\
             shared_secret = \"compat-cluster-shared-secret-of-32-bytes-or-more\"\n\
             {extra_config}\n{roster}"
        );
        for (id, node) in nodes.iter_mut().enumerate() {
            let path = node.data.path().with_extension("toml");
            std::fs::write(&path, &config).expect("write a cluster node's config");
            node.extra_args = vec![
                "--config".into(),
                path.display().to_string(),
                "--replica-id".into(),
                id.to_string(),
            ];
        }
        for node in &mut nodes {
            node.spawn(true);
        }
        Cluster { nodes }
    }

    /// Every node's `127.0.0.1:<port>`, comma-separated, as the SDK's server address list.
    pub fn tcp_addresses(&self) -> Vec<String> {
        self.nodes.iter().map(Server::tcp_address).collect()
    }
}

impl Server {
    /// Stops the process with SIGSTOP (it keeps its sockets and state, and answers nothing).
    pub fn pause(&self) {
        if let Some(child) = &self.child {
            signal(child, libc::SIGSTOP);
        }
    }

    /// Resumes a process [`Server::pause`] stopped.
    pub fn resume(&self) {
        if let Some(child) = &self.child {
            signal(child, libc::SIGCONT);
        }
    }
}

/// The server binary: `IGGY_SERVER_BIN`, else the repository's `target/{release,debug}/iggy`.
///
/// # Panics
/// When no candidate exists, naming every path tried.
pub fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("IGGY_SERVER_BIN") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "IGGY_SERVER_BIN={} is not a file",
            path.display()
        );
        return path;
    }
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("compat/harness sits two levels below the repository root")
        .to_path_buf();
    let candidates = [
        repository.join("target/release/iggy"),
        repository.join("target/debug/iggy"),
    ];
    candidates
        .iter()
        .find(|path| path.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no server binary: set IGGY_SERVER_BIN or build it with \
                 `cargo build --release --bin iggy` (tried {candidates:?})"
            )
        })
}

/// First port handed out; below Linux's ephemeral range (32768–60999), so no client
/// connection can take a server's port while the server restarts.
const PORT_FIRST: u16 = 20_000;
/// Ports handed out from `PORT_FIRST` on.
const PORT_SPAN: u16 = 12_000;

/// A loopback address whose port is free now and not handed out before by this process.
///
/// Ports come from a per-process sequence (offset by the process id, so test binaries run
/// one after another do not start on the same port) outside the ephemeral range: a port
/// picked by binding port 0 could be handed to a concurrent test, or to a client socket, in
/// the moment a server is down between a kill and a restart.
pub fn free_loopback_address() -> SocketAddr {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let offset = u16::try_from(std::process::id() % u32::from(PORT_SPAN)).unwrap_or(0);
    for _ in 0..PORT_SPAN {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = PORT_FIRST + (offset + step % PORT_SPAN) % PORT_SPAN;
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        if TcpListener::bind(address).is_ok() {
            return address;
        }
    }
    panic!(
        "no free loopback port in {PORT_FIRST}..{}",
        PORT_FIRST + PORT_SPAN
    )
}

fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("a pid fits pid_t");
    // SAFETY: `kill` takes plain integers; `pid` is our own unreaped child, so it cannot name
    // another process.
    unsafe {
        libc::kill(pid, signal);
    }
}

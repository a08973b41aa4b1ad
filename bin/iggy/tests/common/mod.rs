//! The built `iggy` binary as a test fixture: started on a free loopback port with a data
//! directory, waited for until it listens, killed when the fixture drops.
#![allow(dead_code, unreachable_pub)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long a start may take before the port accepts connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The server process, killed when the test ends.
pub struct Server {
    pub child: Child,
    pub address: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server with the default root credentials on `data`, with extra `IGGY_*`
/// variables, and waits until it listens.
pub fn start(data: &Path, environment: &[(&str, &str)]) -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let child = Command::new(env!("CARGO_BIN_EXE_iggy"))
        .arg("--with-default-root-credentials")
        .envs(environment.iter().copied())
        .env("IGGY_TCP_ADDRESS", address.to_string())
        .env("IGGY_SYSTEM_PATH", data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the iggy binary");
    let deadline = Instant::now() + START_TIMEOUT;
    while TcpStream::connect(address).is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        sleep(Duration::from_millis(20));
    }
    Server { child, address }
}

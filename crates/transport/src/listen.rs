//! Binding a TCP listener (for TCP itself and for WebSocket), retrying a port still held.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use compio::net::TcpListener;

/// How long binding retries an address that is still in use.
pub(crate) const BIND_RETRY_TIMEOUT: Duration = Duration::from_secs(5);
const BIND_RETRY_DELAY: Duration = Duration::from_millis(50);

/// Binds `address`. A port still held by a just-killed process (an `io_uring` instance
/// releases its sockets asynchronously after the process exits) is retried for up to
/// [`BIND_RETRY_TIMEOUT`].
pub(crate) async fn bind(address: SocketAddr) -> io::Result<TcpListener> {
    let deadline = Instant::now() + BIND_RETRY_TIMEOUT;
    loop {
        match TcpListener::bind(address).await {
            Ok(listener) => return Ok(listener),
            Err(error) if error.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                log::debug!("{address} in use, retrying");
                compio::time::sleep(BIND_RETRY_DELAY).await;
            }
            Err(error) => return Err(error),
        }
    }
}

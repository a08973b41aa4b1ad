//! Binding a TCP listener, retrying a port still held, and the accept loop with its
//! connection limit and drain that the listeners served where they accept share (WebSocket,
//! TCP+TLS, HTTP).

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use compio::net::{TcpListener, TcpSocket, TcpStream};
use futures_util::future::select;

/// How long binding retries an address that is still in use.
pub(crate) const BIND_RETRY_TIMEOUT: Duration = Duration::from_secs(5);
const BIND_RETRY_DELAY: Duration = Duration::from_millis(50);

/// Connections the kernel completes and queues for `accept` (capped by
/// `net.core.somaxconn`, 4096 on current kernels). Past a full queue the kernel drops the
/// client's handshake and the client resends it a second or more later: with the 128 most
/// runtimes ask for, 3,000 clients connecting at once waited 1.0 s at the median and 2.1 s
/// at most, against 0.12 s with this (`ListenOverflows` in `nstat`).
pub const LISTEN_BACKLOG: i32 = 4096;

/// Binds `address` and listens with [`LISTEN_BACKLOG`]. A port still held by a just-killed
/// process (an `io_uring` instance releases its sockets asynchronously after the process
/// exits) is retried for up to [`BIND_RETRY_TIMEOUT`].
pub async fn bind(address: SocketAddr) -> io::Result<TcpListener> {
    let deadline = Instant::now() + BIND_RETRY_TIMEOUT;
    loop {
        match listen(address).await {
            Ok(listener) => return Ok(listener),
            Err(error) if error.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                log::debug!("{address} in use, retrying");
                compio::time::sleep(BIND_RETRY_DELAY).await;
            }
            Err(error) => return Err(error),
        }
    }
}

async fn listen(address: SocketAddr) -> io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4().await?
    } else {
        TcpSocket::new_v6().await?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address).await?;
    socket.listen(LISTEN_BACKLOG).await
}

/// How long shutdown waits for requests already being handled.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed accept (descriptor exhaustion), so the loop does not spin.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(50);

/// The open connections of a listener and its shutdown, shared by its connection tasks.
#[derive(Debug, Default)]
pub struct Shared {
    open: Cell<usize>,
    stopping: Cell<bool>,
    /// Notified when shutdown starts, and when a connection ends.
    changed: event_listener::Event,
}

impl Shared {
    /// Counts a new connection unless `connections_max` are open (then says why, with
    /// `name` and `peer`, counts nothing and gives `None`). The count is given back when the
    /// slot is dropped.
    pub fn admit(
        self: &Rc<Self>,
        name: &str,
        peer: SocketAddr,
        connections_max: usize,
    ) -> Option<OpenSlot> {
        if self.open.get() >= connections_max {
            log::warn!(
                "{name}: {peer} refused: {} connections open (max_connections)",
                self.open.get()
            );
            return None;
        }
        self.open.set(self.open.get() + 1);
        Some(OpenSlot(Rc::clone(self)))
    }

    /// A connection counted by [`Self::admit`] ended.
    fn closed(&self) {
        self.open.set(self.open.get().saturating_sub(1));
        self.changed.notify(usize::MAX);
    }

    /// Completes once shutdown has started.
    pub async fn stopping(&self) {
        loop {
            let listener = self.changed.listen();
            if self.stopping.get() {
                return;
            }
            listener.await;
        }
    }

    /// Starts shutdown, then waits for the open connections to end (up to ten seconds).
    pub async fn stop_and_drain(&self, name: &str) {
        self.stopping.set(true);
        self.changed.notify(usize::MAX);
        log::info!(
            "{name}: stopped accepting; {} connection(s) open",
            self.open.get()
        );
        let drained = async {
            while self.open.get() > 0 {
                let changed = self.changed.listen();
                if self.open.get() == 0 {
                    break;
                }
                changed.await;
            }
        };
        if compio::time::timeout(DRAIN_TIMEOUT, drained).await.is_err() {
            log::warn!(
                "{name}: {} connection(s) still open after the drain timeout",
                self.open.get()
            );
        }
    }
}

/// The next connection `listener` accepts. A failed accept (descriptor exhaustion, for one)
/// is logged under `name` and retried after a pause, so the loop does not spin.
pub(crate) async fn accept_next(name: &str, listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(error) => {
                log::warn!("{name}: accept failed: {error}");
                compio::time::sleep(ACCEPT_RETRY_DELAY).await;
            }
        }
    }
}

/// One connection's place in [`Shared`]'s count, given back when dropped: held by the
/// connection's task, so a connection that died of a bug (its task unwound) does not hold
/// its place of `connections_max` for ever.
pub struct OpenSlot(Rc<Shared>);

impl Drop for OpenSlot {
    fn drop(&mut self) {
        self.0.closed();
    }
}

/// Accepts on `listener` until `shutdown` completes, running `serve` as a task per connection
/// (at most `connections_max` at once), then waits for the connections to end (up to ten
/// seconds). `name` is for the log lines.
pub async fn accept_until<S, F>(
    name: &'static str,
    listener: &TcpListener,
    connections_max: usize,
    serve: S,
    shutdown: impl Future<Output = ()>,
) where
    S: Fn(TcpStream, SocketAddr, Rc<Shared>) -> F,
    F: Future<Output = ()> + 'static,
{
    let shared = Rc::new(Shared::default());
    let accepting = async {
        loop {
            let (stream, peer) = accept_next(name, listener).await;
            let Some(slot) = shared.admit(name, peer, connections_max) else {
                continue;
            };
            let task = serve(stream, peer, Rc::clone(&shared));
            compio::runtime::spawn(async move {
                let _slot = slot;
                task.await;
            })
            .detach();
        }
    };
    let _ = select(pin!(accepting), pin!(shutdown)).await;
    shared.stop_and_drain(name).await;
}

/// Has the kernel end `stream` once bytes it sent stay unacknowledged for `timeout`,
/// including while the peer's window stays shut (its zero-window probes count too): a peer
/// that stopped reading. A transport whose library writes from buffers of its own cannot
/// time every write itself: tungstenite flushes what it holds before it yields the next
/// message, so a link waiting for that message waits on the flush, with no answer of its own
/// left to time out. Best effort: a failure is logged and the transport's own timeouts stay.
#[cfg(any(feature = "ws", feature = "tls"))]
pub(crate) fn end_when_unacknowledged(stream: &TcpStream, timeout: Duration, name: &str) {
    let millis = u32::try_from(timeout.as_millis())
        .unwrap_or(u32::MAX)
        .max(1);
    if let Err(error) = rustix::net::sockopt::set_tcp_user_timeout(stream, millis) {
        log::warn!("{name}: TCP_USER_TIMEOUT not set: {error}");
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::LISTEN_BACKLOG;

    /// The accept queue of the listening socket on `port`, from `/proc/net/tcp` (for a
    /// listening socket its `rx_queue` column is the queue's length).
    fn accept_queue(port: u16) -> Option<usize> {
        let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
        let local = format!(":{port:04X}");
        table.lines().skip(1).find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let listening = fields.get(3) == Some(&"0A");
            let ours = fields.get(1)?.ends_with(&local);
            let queues = fields.get(4)?;
            let rx = queues.split(':').nth(1)?;
            (listening && ours).then(|| usize::from_str_radix(rx, 16).ok())?
        })
    }

    #[test]
    fn the_accept_queue_holds_more_than_the_usual_128_connections() {
        const CLIENTS: usize = 300;
        assert!(LISTEN_BACKLOG as usize > CLIENTS);
        let runtime = compio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let listener = super::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
            let address = listener.local_addr().unwrap();
            // Nothing accepts: every completed handshake waits in the queue.
            let clients: Vec<std::net::TcpStream> = (0..CLIENTS)
                .map(|_| std::net::TcpStream::connect_timeout(&address, Duration::from_secs(2)))
                .collect::<Result<_, _>>()
                .expect("every handshake completes without an accept");
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut queued = accept_queue(address.port());
            while queued != Some(CLIENTS) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                queued = accept_queue(address.port());
            }
            assert_eq!(queued, Some(CLIENTS));
            drop(clients);
        });
    }
}

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

use compio::net::{TcpListener, TcpStream};
use futures_util::future::select;

/// How long binding retries an address that is still in use.
pub(crate) const BIND_RETRY_TIMEOUT: Duration = Duration::from_secs(5);
const BIND_RETRY_DELAY: Duration = Duration::from_millis(50);

/// Binds `address`. A port still held by a just-killed process (an `io_uring` instance
/// releases its sockets asynchronously after the process exits) is retried for up to
/// [`BIND_RETRY_TIMEOUT`].
pub async fn bind(address: SocketAddr) -> io::Result<TcpListener> {
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

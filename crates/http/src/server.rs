//! The HTTP listener: accepts connections (TLS optional), reads requests one at a time per
//! connection, answers each through the [`Api`], and keeps the connection while both sides
//! want it. Requests of different connections run concurrently on the listener's shard.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use compio::io::compat::AsyncStream;
use compio::net::{TcpListener, TcpStream};
use futures_util::future::{Either, select};
use futures_util::{AsyncRead, AsyncWrite};
use transport::ConnectionHandler;
use transport::listen::{Shared, accept_until};

use crate::api::{Api, Now};
use crate::auth::{Credentials, SessionLimits};
use crate::cors::Cors;
use crate::error::ApiError;
use crate::jwt::{Jwt, JwtSettings};
use crate::wire::{Conn, Limits, ReadError};

/// The listener's settings (`[http]`, `[http.jwt]`, `[http.cors]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    pub address: SocketAddr,
    pub connections_max: usize,
    pub limits: Limits,
    /// How long a response may wait for the client to take it.
    pub write_timeout: Duration,
    /// How long the TLS handshake may take.
    pub handshake_grace: Duration,
    pub cors: Cors,
    pub jwt: JwtSettings,
    /// Credentials (tokens and bearer sessions) held at once, in all and per user.
    pub sessions: SessionLimits,
    /// The path `GET` scrapes metrics on (`[http.metrics] endpoint`); `None` when
    /// `[http.metrics] enabled` is false.
    pub metrics_endpoint: Option<String>,
    /// `http.web_ui`: serve the embedded web UI at `/ui` (builds with feature `web`).
    pub web_ui: bool,
}

/// Binding the listener failed.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("bind HTTP listener on {address}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("read the local address of the HTTP listener")]
    LocalAddress(#[source] io::Error),
    #[error("http.metrics.endpoint `{0}` is a route of the API: choose another path")]
    MetricsEndpoint(String),
}

/// Refuses a metrics endpoint that would hide a `GET` route of the API (`/stats`, `/streams`).
pub fn check_metrics_endpoint(endpoint: &str) -> Result<(), ListenError> {
    let taken = crate::route::Target::parse(endpoint)
        .is_ok_and(|target| crate::route::route(&http::Method::GET, &target.segments).is_ok());
    if taken {
        return Err(ListenError::MetricsEndpoint(endpoint.to_owned()));
    }
    Ok(())
}

/// A bound listener, not yet accepting.
pub struct HttpServer {
    listener: TcpListener,
    config: HttpConfig,
    local_address: SocketAddr,
    #[cfg(feature = "tls")]
    tls: Option<compio_tls::TlsAcceptor>,
    console: Rc<dyn crate::console::Console>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HttpServer")
            .field("local_address", &self.local_address)
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds `config.address`, retrying a port still held.
    pub async fn bind(config: HttpConfig) -> Result<Self, ListenError> {
        let address = config.address;
        let listener = transport::listen::bind(address)
            .await
            .map_err(|source| ListenError::Bind { address, source })?;
        let local_address = listener.local_addr().map_err(ListenError::LocalAddress)?;
        Ok(Self {
            listener,
            config,
            local_address,
            #[cfg(feature = "tls")]
            tls: None,
            console: Rc::new(crate::console::NoConsole),
        })
    }

    /// Answers the console routes (log lines, effective configuration) from `console`.
    #[must_use]
    pub fn with_console(mut self, console: Rc<dyn crate::console::Console>) -> Self {
        self.console = console;
        self
    }

    /// Serves HTTPS: TLS with `tls` under every connection.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn with_tls(mut self, tls: rustls::ServerConfig) -> Self {
        self.tls = Some(compio_tls::TlsAcceptor::from(std::sync::Arc::new(tls)));
        self
    }

    pub fn local_address(&self) -> SocketAddr {
        self.local_address
    }

    /// Serves every connection on the current runtime with `handler` until `shutdown`
    /// completes, then lets the requests being answered finish.
    pub async fn serve<H>(self, handler: Rc<H>, shutdown: impl Future<Output = ()>)
    where
        H: ConnectionHandler + 'static,
    {
        let config = Rc::new(self.config);
        let jwt = Jwt::new(config.jwt.clone());
        let api = Api::new(handler, Credentials::new(jwt, config.sessions))
            .with_metrics_endpoint(config.metrics_endpoint.as_deref())
            .with_console(self.console)
            .with_web_ui(config.web_ui);
        let api = Rc::new(api);
        #[cfg(feature = "tls")]
        let tls = self.tls.clone();
        let serve = |stream: TcpStream, peer: SocketAddr, shared: Rc<Shared>| {
            let api = Rc::clone(&api);
            let config = Rc::clone(&config);
            #[cfg(feature = "tls")]
            let tls = tls.clone();
            async move {
                let _ = stream.set_nodelay(true);
                let socket = Socket(Box::new(compio::driver::ToSharedFd::to_shared_fd(&stream)));
                let shared = (&*shared, &socket);
                #[cfg(feature = "tls")]
                if let Some(acceptor) = tls {
                    let handshake = acceptor.accept(stream);
                    match compio::time::timeout(config.handshake_grace, handshake).await {
                        Ok(Ok(stream)) => {
                            serve_connection(stream, peer, &api, &config, shared).await;
                        }
                        Ok(Err(error)) => log::info!("http: {peer}: TLS handshake failed: {error}"),
                        Err(_elapsed) => log::info!("http: {peer}: TLS handshake timed out"),
                    }
                    return;
                }
                // Pinned on the heap: the adapter is not `Unpin`.
                let stream = Box::pin(AsyncStream::new(stream));
                serve_connection(stream, peer, &api, &config, shared).await;
            }
        };
        accept_until(
            "http",
            &self.listener,
            config.connections_max,
            serve,
            shutdown,
        )
        .await;
    }
}

fn now() -> Now {
    let unix_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        });
    Now { unix_us }
}

/// Serves one connection: request, response, until either side ends it.
async fn serve_connection<S, H>(
    stream: S,
    peer: SocketAddr,
    api: &Api<H>,
    config: &HttpConfig,
    (shared, socket): (&Shared, &Socket),
) where
    S: AsyncRead + AsyncWrite + Unpin,
    H: ConnectionHandler,
{
    let mut conn = Conn::new(stream);
    loop {
        let read = {
            let limit = config.limits.body_size_max;
            let body_max =
                async |head: &crate::wire::Head| api.body_max(head, (peer, now()), limit).await;
            let read = conn.read_request(&config.limits, body_max);
            match select(pin!(read), pin!(shared.stopping())).await {
                Either::Left((read, _)) => read,
                Either::Right(((), _)) => return,
            }
        };
        let request = match read {
            Ok(request) => request,
            Err(error) => return refuse(&mut conn, peer, error, config).await,
        };
        let response = if config.cors.is_preflight(&request) {
            config.cors.preflight(&request)
        } else {
            // A client gone while its request waits (a long poll) ends it: what the request
            // holds — its connection slot, a parked poll — goes now, not when it would end.
            let handled = api.handle(peer, &request, now());
            match select(pin!(handled), pin!(socket.peer_gone())).await {
                Either::Left((response, _)) => response,
                Either::Right(((), _)) => {
                    return log::debug!("http: {peer}: gone while its request was answered");
                }
            }
        };
        let response = config.cors.apply(&request, response);
        let keep_alive = request.keep_alive;
        let head_only = request.method == http::Method::HEAD;
        let written = conn
            .write_response(&response, keep_alive, head_only, config.write_timeout)
            .await;
        if let Err(error) = written {
            return log::info!("http: {peer}: {error}");
        }
        if !keep_alive {
            return;
        }
    }
}

/// A connection's socket (a shared handle: no second descriptor), for the check that its
/// peer is still there.
struct Socket(Box<dyn std::os::fd::AsFd>);

/// How often a request being answered checks that its client is still there.
const PEER_CHECK: Duration = Duration::from_millis(500);

impl Socket {
    /// Completes once the peer has shut its side of the connection down or the socket
    /// failed, checked every [`PEER_CHECK`] (`POLLRDHUP`, which a FIN sets whatever data is
    /// still unread, TLS records included). A client that half-closes after sending its
    /// request is taken for gone too; HTTP/1.1 clients do not.
    async fn peer_gone(&self) {
        use rustix::event::{PollFd, PollFlags, poll};
        use std::os::fd::AsFd;
        let gone = PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR;
        loop {
            compio::time::sleep(PEER_CHECK).await;
            let mut fds = [PollFd::from_borrowed_fd(self.0.as_fd(), PollFlags::RDHUP)];
            let zero = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            match poll(&mut fds, Some(&zero)) {
                Ok(_) if fds[0].revents().intersects(gone) => return,
                Ok(_) => {}
                Err(error) => {
                    log::debug!("http: poll of a connection: {error}");
                    return;
                }
            }
        }
    }
}

/// Ends a connection whose next request could not be read: a refusal gets its status first.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Conn<S>,
    peer: SocketAddr,
    error: ReadError,
    config: &HttpConfig,
) {
    match error {
        ReadError::Closed => {}
        ReadError::TimedOut => log::debug!("http: {peer}: idle or slow request; closed"),
        ReadError::Io(error) => log::debug!("http: {peer}: {error}"),
        ReadError::Refused { status, reason } => {
            log::info!("http: {peer}: {status} {reason}; closed");
            let mut response = ApiError::invalid(reason, "request").response();
            response.status = status;
            let written = conn
                .write_response(&response, false, false, config.write_timeout)
                .await;
            if written.is_ok() {
                conn.linger(LINGER_BYTES_MAX, LINGER).await;
            }
        }
    }
}

/// What a refused request's connection still reads and drops before it closes, so the
/// client, still sending the body it was refused, reads the refusal instead of a reset.
const LINGER_BYTES_MAX: usize = 16 << 20;
const LINGER: Duration = Duration::from_secs(2);

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;

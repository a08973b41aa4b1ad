//! Which transports the binary is built with: every `#[cfg(feature = ..)]` of the binary is
//! here, so the rest of it compiles the same whatever the features.

use std::future::Future;
use std::rc::Rc;

use shard::Server;

use crate::config::Config;

// The subcommand's module is declared here so that its presence is the only `cfg` it needs.
#[cfg(feature = "bench")]
#[path = "bench.rs"]
mod bench_command;

#[cfg(feature = "vsr")]
mod cluster;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "http")]
mod log_tail;
#[cfg(feature = "ws")]
mod ws;

#[cfg(not(any(feature = "tcp", feature = "ws", feature = "quic", feature = "http")))]
compile_error!("the server needs a transport: enable feature `tcp` (or `minimal`/`full`)");

/// Runs `iggy bench <arguments>`; without feature `bench` it says how to get it.
#[cfg_attr(not(feature = "bench"), allow(clippy::needless_pass_by_value))]
pub(crate) fn bench(arguments: Vec<String>) -> std::process::ExitCode {
    #[cfg(feature = "bench")]
    {
        bench_command::run(arguments)
    }
    #[cfg(not(feature = "bench"))]
    {
        let _ = arguments;
        eprintln!("error: this build has no `iggy bench`: build with feature `bench` or `full`");
        std::process::ExitCode::FAILURE
    }
}

/// The transports: (cargo feature, config section, built in).
const TRANSPORTS: [(&str, &str, bool); 4] = [
    ("tcp", "tcp", cfg!(feature = "tcp")),
    ("quic", "quic", cfg!(feature = "quic")),
    ("ws", "websocket", cfg!(feature = "ws")),
    ("http", "http", cfg!(feature = "http")),
];

/// The cargo features this binary was built with, for `iggy --version`.
pub(crate) fn features() -> Vec<&'static str> {
    TRANSPORTS
        .iter()
        .map(|&(feature, _, built)| (feature, built))
        .chain([
            ("tls", cfg!(feature = "tls")),
            ("io-uring", cfg!(feature = "io-uring")),
            ("bench", cfg!(feature = "bench")),
            ("vsr", cfg!(feature = "vsr")),
            ("encryption", cfg!(feature = "encryption")),
            ("web", cfg!(feature = "web")),
        ])
        .filter_map(|(name, on)| on.then_some(name))
        .collect()
}

/// The config sections of the transports this binary was built with: the others default to
/// off, and enabling one is refused at start.
pub(crate) fn transports() -> Vec<&'static str> {
    TRANSPORTS
        .iter()
        .filter_map(|&(_, section, built)| built.then_some(section))
        .collect()
}

/// Where the logger also hands each line: the HTTP console's memory of recent lines, in
/// builds that can serve it (none keep lines nobody can read).
#[cfg_attr(feature = "http", allow(clippy::unnecessary_wraps))]
pub(crate) fn log_tail() -> Option<fn(&str)> {
    #[cfg(feature = "http")]
    {
        Some(log_tail::push)
    }
    #[cfg(not(feature = "http"))]
    {
        None
    }
}

/// Refuses `http.web_ui = true` in a build without the embedded UI.
pub(crate) fn web_ui(config: &Config) -> Result<(), BindError> {
    if config.http.web_ui && !cfg!(feature = "web") {
        return Err(BindError::Missing {
            key: "http.web_ui = true",
            feature: "web",
        });
    }
    Ok(())
}

/// The file backend `[system] io_backend` names, refused when the build lacks it.
pub(crate) fn io_backend(config: &Config) -> Result<shard::disk::Backend, BindError> {
    if config.io_backend == shard::disk::Backend::IoUring && !cfg!(feature = "io-uring") {
        return Err(BindError::Missing {
            key: "system.io_backend = \"io_uring\"",
            feature: "io-uring",
        });
    }
    Ok(config.io_backend)
}

/// A listener failed to bind, or the config asks for what the build lacks.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BindError {
    #[cfg(feature = "tcp")]
    #[error(transparent)]
    Tcp(#[from] transport::tcp::ListenError),
    #[cfg(feature = "ws")]
    #[error(transparent)]
    WebSocket(#[from] transport::ws::ListenError),
    #[cfg(feature = "quic")]
    #[error(transparent)]
    Quic(#[from] transport::quic::ListenError),
    #[cfg(feature = "http")]
    #[error(transparent)]
    Http(#[from] http_api::ListenError),
    #[cfg(not(all(
        feature = "tcp",
        feature = "ws",
        feature = "quic",
        feature = "tls",
        feature = "http"
    )))]
    #[error(
        "`[{section}] enabled = true`, but this binary was built without feature `{feature}` \
         (build with `--features {feature}` or `full`, or set `{section}.enabled = false`)"
    )]
    NotBuilt {
        section: &'static str,
        feature: &'static str,
    },
    #[error(
        "`{key}`, but this binary was built without feature `{feature}` (build with \
         `--features {feature}` or `full`)"
    )]
    Missing {
        key: &'static str,
        feature: &'static str,
    },
    #[cfg(feature = "tls")]
    #[error(transparent)]
    TlsTcp(#[from] transport::tls_tcp::ListenError),
    #[cfg(feature = "vsr")]
    #[error("cluster mode")]
    Cluster(#[from] cluster::ClusterError),
    #[cfg(feature = "tls")]
    #[error("the certificate of `[{section}]`")]
    Certificate {
        section: &'static str,
        #[source]
        source: transport::tls::TlsError,
    },
}

/// What cluster mode needs that the configuration does not hold.
pub(crate) struct ClusterArguments {
    pub(crate) replica_id: u8,
    pub(crate) recover: bool,
    pub(crate) root_username: String,
    pub(crate) root_password_hash: String,
    /// The root password in the clear when it was generated at this start: shown only if
    /// this node is the one that creates the root user.
    pub(crate) generated_password: Option<String>,
}

/// Starts cluster mode on `server` (empty: its replica log rebuilds it) when
/// `[cluster] enabled`; refuses when the build lacks feature `vsr`.
#[cfg_attr(not(feature = "vsr"), allow(clippy::unused_async))]
pub(crate) async fn start_cluster(
    server: &Rc<Server>,
    config: &Config,
    arguments: ClusterArguments,
) -> Result<(), BindError> {
    #[cfg(feature = "vsr")]
    {
        let start = cluster::ClusterStart {
            settings: &config.cluster,
            replica_id: arguments.replica_id,
            recover: arguments.recover,
            system_path: &config.system_path,
            frame_size_max: usize::try_from(config.frame_size_max_bytes).unwrap_or(usize::MAX),
            handshake_timeout: config.handshake_grace,
            tls: replica_tls(&config.cluster)?,
            root: cluster::RootSeed {
                username: arguments.root_username,
                password_hash: arguments.root_password_hash,
                generated_password: arguments.generated_password,
                password_settled: std::cell::Cell::new(false),
            },
        };
        cluster::start(server, start).await?;
        Ok(())
    }
    #[cfg(not(feature = "vsr"))]
    {
        let ClusterArguments {
            replica_id,
            recover,
            root_username,
            root_password_hash,
            generated_password,
        } = arguments;
        let _ = (
            server,
            config,
            replica_id,
            recover,
            root_username,
            root_password_hash,
            generated_password,
        );
        Err(BindError::Missing {
            key: "cluster.enabled = true",
            feature: "vsr",
        })
    }
}

/// The TLS sides of the replica bus from `[cluster.tls]` (`None` when off); refuses when the
/// build lacks feature `tls`.
#[cfg(feature = "vsr")]
fn replica_tls(
    settings: &crate::config::ClusterSettings,
) -> Result<Option<Rc<transport::replica::ReplicaTls>>, BindError> {
    let Some(tls) = &settings.tls else {
        return Ok(None);
    };
    #[cfg(feature = "tls")]
    {
        use transport::replica::tls::{PeerCheck, ReplicaTls};
        use transport::tls::{CertificateSource, SelfSigned};
        let section = "cluster.tls";
        let source = CertificateSource {
            self_signed: if tls.self_signed {
                SelfSigned::Always
            } else {
                SelfSigned::Never
            },
            cert_file: tls.cert_file.clone(),
            key_file: tls.key_file.clone(),
        };
        let certificate = |source| BindError::Certificate { section, source };
        let loaded = source.load().map_err(certificate)?;
        let peers = if tls.self_signed {
            log::warn!(
                "{section}: self-signed: replica traffic is encrypted, but a peer's certificate \
                 is not checked (cluster.auth still authenticates the dialing node)"
            );
            PeerCheck::Any
        } else {
            log::info!("{section}: peers checked against {}", tls.ca_file.display());
            PeerCheck::Ca(tls.ca_file.clone())
        };
        let replica_tls = ReplicaTls::new(loaded, &peers).map_err(certificate)?;
        Ok(Some(Rc::new(replica_tls)))
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = tls;
        Err(BindError::Missing {
            key: "cluster.tls.enabled = true",
            feature: "tls",
        })
    }
}

/// The ports the listeners bound (0: off), for the roster clients read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ports {
    pub(crate) tcp: u16,
    pub(crate) quic: u16,
    pub(crate) websocket: u16,
    pub(crate) http: u16,
}

/// The bound listeners, not yet accepting.
pub(crate) struct Listeners {
    #[cfg(feature = "tcp")]
    tcp: Option<transport::tcp::TcpServer>,
    #[cfg(feature = "tcp")]
    tcp_config: transport::tcp::TcpConfig,
    #[cfg(feature = "ws")]
    ws: Option<transport::ws::WsServer>,
    /// TCP with `[tcp.tls]`: served on the leader instead of `tcp`.
    #[cfg(feature = "tls")]
    tcp_tls: Option<transport::tls_tcp::TlsTcpServer>,
    #[cfg(feature = "quic")]
    quic: Option<transport::quic::QuicServer>,
    #[cfg(feature = "http")]
    http: Option<http_api::HttpServer>,
}

/// The leader's ends of the channels that hand accepted connections to the other shards, and
/// the leader's buffer pool settings.
pub(crate) struct Handoffs {
    #[cfg_attr(not(feature = "tcp"), allow(dead_code))]
    pool: pool::PoolConfig,
    /// Every shard's hand-off channel by index (the leader's own is `None`): the accept
    /// loop hands accepted connections to the others, and every shard moves connections
    /// through them.
    #[cfg(feature = "tcp")]
    tcp: Vec<Option<transport::tcp::Handoff>>,
    /// The leader's inbox, for connections moving to it.
    #[cfg(feature = "tcp")]
    tcp_inbox: Option<transport::tcp::HandoffInbox>,
    #[cfg(feature = "tcp")]
    tcp_connections: transport::tcp::ConnectionCount,
    #[cfg(feature = "ws")]
    ws: ws::WsHandoffs,
}

/// What one shard other than the leader serves: the connections handed to it, with a buffer
/// pool of its own (made on its thread: pools are per shard).
pub(crate) struct Handed {
    #[cfg_attr(not(feature = "tcp"), allow(dead_code))]
    pool: pool::PoolConfig,
    #[cfg(feature = "tcp")]
    tcp: Option<(transport::tcp::HandoffInbox, transport::tcp::TcpConfig)>,
    /// Every shard's hand-off channel by index (its own `None`).
    #[cfg(feature = "tcp")]
    tcp_peers: Vec<Option<transport::tcp::Handoff>>,
    #[cfg(feature = "tcp")]
    tcp_connections: transport::tcp::ConnectionCount,
    #[cfg(feature = "ws")]
    ws: ws::WsHanded,
}

impl Listeners {
    /// Binds every enabled listener; refuses a transport the build lacks.
    pub(crate) async fn bind(config: &Config) -> Result<Self, BindError> {
        refuse_missing(config)?;
        #[cfg(feature = "tcp")]
        let tcp_config = transport::tcp::TcpConfig {
            address: config.tcp_address,
            connections_max: config.tcp_connections_max,
            frame_size_max: config.frame_size_max_bytes,
            in_flight_max: config.tcp_in_flight_max,
            unauthenticated_frame_size_max: config.unauthenticated_frame_size_max_bytes,
            handshake_grace: config.handshake_grace,
            frame_read_timeout: config.frame_read_timeout,
            write_timeout: config.write_timeout,
            connections_per_ip_max: config.tcp_connections_per_ip_max,
        };
        #[cfg(feature = "tcp")]
        let tcp = if config.tcp_enabled && !config.tcp_tls.enabled {
            Some(transport::tcp::TcpServer::bind(tcp_config).await?)
        } else {
            None
        };
        // The other listeners bind side by side: each may wait out its port's bind retry
        // (another server on a default port), and those waits must not add up.
        #[cfg(feature = "ws")]
        let ws = bind_websocket(config);
        #[cfg(not(feature = "ws"))]
        let ws = async { Ok::<(), BindError>(()) };
        #[cfg(feature = "quic")]
        let quic = std::future::ready(bind_quic(config));
        #[cfg(not(feature = "quic"))]
        let quic = async { Ok::<(), BindError>(()) };
        #[cfg(feature = "tls")]
        let tcp_tls = bind_tcp_tls(config);
        #[cfg(not(feature = "tls"))]
        let tcp_tls = async { Ok::<(), BindError>(()) };
        #[cfg(feature = "http")]
        let http = http::bind(config);
        #[cfg(not(feature = "http"))]
        let http = async { Ok::<(), BindError>(()) };
        let (ws, quic, tcp_tls, http) = futures_util::future::join4(ws, quic, tcp_tls, http).await;
        let (ws, quic, tcp_tls, http) = (ws?, quic?, tcp_tls?, http?);
        #[cfg(not(all(feature = "ws", feature = "quic", feature = "tls", feature = "http")))]
        let _ = (&ws, &quic, &tcp_tls, &http);
        Ok(Self {
            #[cfg(feature = "tcp")]
            tcp,
            #[cfg(feature = "tcp")]
            tcp_config,
            #[cfg(feature = "ws")]
            ws,
            #[cfg(feature = "tls")]
            tcp_tls,
            #[cfg(feature = "quic")]
            quic,
            #[cfg(feature = "http")]
            http,
        })
    }

    /// The ports clients are told, 0 for a transport that is off.
    pub(crate) fn ports(&self) -> Ports {
        #[allow(unused_mut)]
        let mut ports = Ports::default();
        #[cfg(feature = "tcp")]
        if let Some(tcp) = &self.tcp {
            ports.tcp = tcp.local_address().port();
        }
        #[cfg(feature = "ws")]
        if let Some(ws) = &self.ws {
            ports.websocket = ws.local_address().port();
        }
        #[cfg(feature = "quic")]
        if let Some(quic) = &self.quic {
            ports.quic = quic.local_address().port();
        }
        #[cfg(feature = "tls")]
        if let Some(tcp_tls) = &self.tcp_tls {
            ports.tcp = tcp_tls.local_address().port();
        }
        #[cfg(feature = "http")]
        if let Some(http) = &self.http {
            ports.http = http.local_address().port();
        }
        ports
    }

    /// The hand-off channels of the leader and `others` shards besides it: the leader's
    /// ends, and one [`Handed`] per other shard, in shard order. Every shard can reach every
    /// other one (connections move between them). Every shard's pool is `pool`.
    pub(crate) fn handoffs(
        &self,
        others: usize,
        pool: pool::PoolConfig,
    ) -> (Handoffs, Vec<Handed>) {
        #[cfg(feature = "ws")]
        let (ws_handoffs, ws_handed) = ws::channels(self.ws.as_ref(), others);
        #[cfg(feature = "ws")]
        let mut ws_handed = ws_handed.into_iter();
        #[cfg(feature = "tcp")]
        {
            let connections = transport::tcp::ConnectionCount::default();
            let shards = others + 1;
            let (senders, mut inboxes): (Vec<_>, Vec<_>) = (0..shards)
                .map(|_| {
                    let (sender, inbox) = transport::tcp::handoff_channel();
                    (sender, Some(inbox))
                })
                .unzip();
            let peers_of = |index: usize| -> Vec<Option<transport::tcp::Handoff>> {
                let peer = |(shard, sender): (usize, &transport::tcp::Handoff)| {
                    (shard != index).then(|| sender.clone())
                };
                senders.iter().enumerate().map(peer).collect()
            };
            let tcp_on = self.tcp.is_some();
            let handed = (1..shards)
                .map(|index| Handed {
                    pool,
                    tcp: inboxes[index]
                        .take()
                        .filter(|_| tcp_on)
                        .map(|inbox| (inbox, self.tcp_config)),
                    tcp_peers: peers_of(index),
                    tcp_connections: std::sync::Arc::clone(&connections),
                    #[cfg(feature = "ws")]
                    ws: ws_handed.next().unwrap_or_default(),
                })
                .collect();
            let handoffs = Handoffs {
                pool,
                tcp: peers_of(0),
                tcp_inbox: inboxes[0].take(),
                tcp_connections: connections,
                #[cfg(feature = "ws")]
                ws: ws_handoffs,
            };
            (handoffs, handed)
        }
        #[cfg(not(feature = "tcp"))]
        {
            let handed = (0..others)
                .map(|_| Handed {
                    pool,
                    #[cfg(feature = "ws")]
                    ws: ws_handed.next().unwrap_or_default(),
                })
                .collect();
            let handoffs = Handoffs {
                pool,
                #[cfg(feature = "ws")]
                ws: ws_handoffs,
            };
            (handoffs, handed)
        }
    }

    /// Serves on the leader until `shutdown` completes, handing TCP and plain WebSocket
    /// connections round-robin to the shards behind `handoffs` (the other transports are
    /// served here); then lets the leader's in-flight requests finish. The other shards'
    /// [`Handed::serve`] end when this returns.
    pub(crate) async fn serve(
        self,
        server: Rc<Server>,
        handoffs: Handoffs,
        shutdown: impl Future<Output = ()>,
    ) {
        use futures_util::FutureExt;
        let shutdown = shutdown.shared();
        let ports = self.ports();
        if ports.tcp == 0 && ports.websocket == 0 && ports.quic == 0 && ports.http == 0 {
            log::warn!("no transport is enabled; waiting for a signal to stop");
        }
        #[cfg(feature = "ws")]
        let mut handoffs = handoffs;
        #[cfg(feature = "ws")]
        let websocket = ws::serve_leader(
            self.ws,
            Rc::clone(&server),
            std::mem::take(&mut handoffs.ws),
            shutdown.clone(),
        );
        #[cfg(not(feature = "ws"))]
        let websocket = async {};
        #[cfg(feature = "quic")]
        let quic = serve_quic(self.quic, Rc::clone(&server), shutdown.clone());
        #[cfg(not(feature = "quic"))]
        let quic = async {};
        #[cfg(feature = "tls")]
        let tcp_tls = serve_tcp_tls(self.tcp_tls, Rc::clone(&server), shutdown.clone());
        #[cfg(not(feature = "tls"))]
        let tcp_tls = async {};
        #[cfg(feature = "http")]
        let http = http::serve(self.http, Rc::clone(&server), shutdown.clone());
        #[cfg(not(feature = "http"))]
        let http = async {};
        #[cfg(feature = "tcp")]
        let tcp = serve_tcp(
            self.tcp,
            self.tcp_config,
            server,
            handoffs,
            shutdown.clone(),
        );
        #[cfg(not(feature = "tcp"))]
        let tcp = {
            let _ = (server, handoffs);
            shutdown.clone()
        };
        futures_util::future::join5(tcp, websocket, quic, tcp_tls, http).await;
    }
}

/// Refuses a config that enables a transport (or its TLS) the build lacks.
#[cfg_attr(
    all(
        feature = "tcp",
        feature = "ws",
        feature = "quic",
        feature = "tls",
        feature = "http"
    ),
    allow(clippy::unnecessary_wraps, unused_variables)
)]
fn refuse_missing(config: &Config) -> Result<(), BindError> {
    #[cfg(not(feature = "vsr"))]
    if config.cluster.enabled {
        return Err(BindError::Missing {
            key: "cluster.enabled = true",
            feature: "vsr",
        });
    }
    #[cfg(not(feature = "ws"))]
    if config.websocket.enabled {
        return Err(BindError::NotBuilt {
            section: "websocket",
            feature: "ws",
        });
    }
    #[cfg(not(feature = "tcp"))]
    if config.tcp_enabled && !config.tcp_tls.enabled {
        return Err(BindError::NotBuilt {
            section: "tcp",
            feature: "tcp",
        });
    }
    #[cfg(not(feature = "tls"))]
    for (section, tls) in [
        ("tcp.tls", &config.tcp_tls),
        ("websocket.tls", &config.websocket.tls),
    ] {
        if tls.enabled {
            return Err(BindError::NotBuilt {
                section,
                feature: "tls",
            });
        }
    }
    #[cfg(not(feature = "quic"))]
    if config.quic.enabled {
        return Err(BindError::NotBuilt {
            section: "quic",
            feature: "quic",
        });
    }
    #[cfg(not(feature = "http"))]
    if config.http.enabled {
        return Err(BindError::NotBuilt {
            section: "http",
            feature: "http",
        });
    }
    #[cfg(not(feature = "tls"))]
    if config.http.enabled && config.http.tls.enabled {
        return Err(BindError::NotBuilt {
            section: "http.tls",
            feature: "tls",
        });
    }
    Ok(())
}

/// The handler of one transport's connections on the shard this runs on.
fn transport_handler(
    server: Rc<Server>,
    transport: shard::TransportKind,
) -> Rc<crate::shard_handler::ShardHandler> {
    Rc::new(crate::shard_handler::ShardHandler { server, transport })
}

/// Serves QUIC on the leader until `shutdown` completes.
#[cfg(feature = "quic")]
async fn serve_quic(
    quic: Option<transport::quic::QuicServer>,
    server: Rc<Server>,
    shutdown: impl Future<Output = ()>,
) {
    if let Some(quic) = quic {
        log::info!("quic: listening on {}", quic.local_address());
        let handler = transport_handler(server, shard::TransportKind::Quic);
        quic.serve(handler, shutdown).await;
    }
}

/// Serves TCP with TLS on the leader until `shutdown` completes.
#[cfg(feature = "tls")]
async fn serve_tcp_tls(
    tcp_tls: Option<transport::tls_tcp::TlsTcpServer>,
    server: Rc<Server>,
    shutdown: impl Future<Output = ()>,
) {
    if let Some(tcp_tls) = tcp_tls {
        log::info!(
            "tcp: listening on {} with TLS (shard 0)",
            tcp_tls.local_address()
        );
        let handler = transport_handler(server, shard::TransportKind::Tcp);
        tcp_tls.serve(handler, shutdown).await;
    }
}

/// Serves TCP on the leader until `shutdown` completes (see [`Listeners::serve`]); without
/// a TCP listener, only waits for it.
#[cfg(feature = "tcp")]
async fn serve_tcp(
    tcp: Option<transport::tcp::TcpServer>,
    tcp_config: transport::tcp::TcpConfig,
    server: Rc<Server>,
    handoffs: Handoffs,
    shutdown: impl Future<Output = ()>,
) {
    let Some(tcp) = tcp else {
        shutdown.await;
        return;
    };
    log::info!(
        "tcp: listening on {} ({} shard(s))",
        tcp.local_address(),
        handoffs.tcp.len()
    );
    let pool = Rc::new(pool::Pool::new_unchecked(handoffs.pool));
    publish_pool(&server, &pool);
    trim_pool(&pool);
    let handler = Rc::new(crate::shard_handler::ShardHandler {
        server,
        transport: shard::TransportKind::Tcp,
    });
    let local = transport::tcp::TcpShard::new(tcp_config, handler, handoffs.tcp_connections, pool);
    local.set_peers(handoffs.tcp.clone());
    let others = handoffs.tcp.into_iter().flatten().collect();
    tcp.accept(&local, others, handoffs.tcp_inbox, shutdown)
        .await;
    local.drain().await;
}

/// Binds TCP with TLS when `[tcp]` and `[tcp.tls]` enable it (served on the leader only).
#[cfg(feature = "tls")]
async fn bind_tcp_tls(
    config: &Config,
) -> Result<Option<transport::tls_tcp::TlsTcpServer>, BindError> {
    if !(config.tcp_enabled && config.tcp_tls.enabled) {
        return Ok(None);
    }
    let tls = server_tls("tcp.tls", &certificate_source(&config.tcp_tls))?;
    let tcp_config = transport::tls_tcp::TlsTcpConfig {
        address: config.tcp_address,
        connections_max: config.tcp_connections_max,
        frame_size_max: config.frame_size_max_bytes,
        unauthenticated_frame_size_max: config.unauthenticated_frame_size_max_bytes,
        in_flight_max: config.tcp_in_flight_max,
        handshake_grace: config.handshake_grace,
        frame_read_timeout: config.frame_read_timeout,
        write_timeout: config.write_timeout,
    };
    Ok(Some(
        transport::tls_tcp::TlsTcpServer::bind(tcp_config, tls).await?,
    ))
}

/// Where a `[<transport>.tls]` section's certificate comes from (Iggy's rule: self-signed
/// only while `cert_file` does not exist).
#[cfg(feature = "tls")]
fn certificate_source(tls: &crate::config::TlsSettings) -> transport::tls::CertificateSource {
    use transport::tls::SelfSigned;
    transport::tls::CertificateSource {
        self_signed: if tls.self_signed {
            SelfSigned::UnlessFileExists
        } else {
            SelfSigned::Never
        },
        cert_file: tls.cert_file.clone(),
        key_file: tls.key_file.clone(),
    }
}

/// The rustls server configuration of `source`, logging whether it was read or made.
#[cfg(feature = "tls")]
fn server_tls(
    section: &'static str,
    source: &transport::tls::CertificateSource,
) -> Result<rustls::ServerConfig, BindError> {
    let certificate = |source| BindError::Certificate { section, source };
    let loaded = source.load().map_err(certificate)?;
    if loaded.self_signed {
        log::info!("{section}: a self-signed certificate for localhost made at start");
    } else {
        log::info!("{section}: certificate {}", source.cert_file.display());
    }
    loaded.server_config().map_err(certificate)
}

/// Binds the QUIC listener when `[quic]` enables it, with the certificate of
/// `[quic.certificate]`; a default address that cannot be bound leaves QUIC off with a
/// warning, as for WebSocket.
#[cfg(feature = "quic")]
fn bind_quic(config: &Config) -> Result<Option<transport::quic::QuicServer>, BindError> {
    use transport::tls::{CertificateSource, SelfSigned};
    let quic = &config.quic;
    if !quic.enabled {
        return Ok(None);
    }
    let source = CertificateSource {
        self_signed: if quic.self_signed {
            SelfSigned::Always
        } else {
            SelfSigned::Never
        },
        cert_file: quic.cert_file.clone(),
        key_file: quic.key_file.clone(),
    };
    if quic.self_signed && !quic.cert_file.as_os_str().is_empty() {
        log::warn!(
            "quic: self_signed = true: {} is not read",
            quic.cert_file.display()
        );
    }
    let tls = server_tls("quic.certificate", &source)?;
    let nonzero = |duration: std::time::Duration| (!duration.is_zero()).then_some(duration);
    let quic_config = transport::quic::QuicConfig {
        address: quic.address,
        connections_max: quic.connections_max,
        frame_size_max: config.frame_size_max_bytes,
        unauthenticated_frame_size_max: config.unauthenticated_frame_size_max_bytes,
        handshake_grace: config.handshake_grace,
        frame_read_timeout: config.frame_read_timeout,
        write_timeout: config.write_timeout,
        max_concurrent_bidi_streams: quic.max_concurrent_bidi_streams,
        initial_mtu: u16::try_from(quic.initial_mtu).unwrap_or(u16::MAX),
        send_window: quic.send_window,
        receive_window: quic.receive_window,
        stream_receive_window: quic.stream_receive_window,
        keep_alive_interval: nonzero(quic.keep_alive_interval),
        max_idle_timeout: nonzero(quic.max_idle_timeout),
        socket_receive_buffer: usize::try_from(quic.socket_receive_buffer).unwrap_or(usize::MAX),
        socket_send_buffer: usize::try_from(quic.socket_send_buffer).unwrap_or(usize::MAX),
    };
    match transport::quic::QuicServer::bind(quic_config, tls) {
        Ok(server) => Ok(Some(server)),
        Err(error @ transport::quic::ListenError::Bind { .. })
            if !config.is_explicit("quic.address") =>
        {
            log::warn!(
                "quic: {error}: {} (the default address); serving without QUIC",
                std::error::Error::source(&error).map_or_else(String::new, ToString::to_string)
            );
            Ok(None)
        }
        Err(error) => Err(error.into()),
    }
}

/// Binds the WebSocket listener when `[websocket]` enables it. A default address that cannot
/// be bound (another server holds it) leaves WebSocket off with a warning; an address the
/// config set must bind.
#[cfg(feature = "ws")]
async fn bind_websocket(config: &Config) -> Result<Option<transport::ws::WsServer>, BindError> {
    let websocket = &config.websocket;
    if !websocket.enabled {
        return Ok(None);
    }
    let size = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
    let ws_config = transport::ws::WsConfig {
        address: websocket.address,
        connections_max: websocket.connections_max,
        frame_size_max: u32::try_from(websocket.message_size_max)
            .unwrap_or(u32::MAX)
            .min(config.frame_size_max_bytes),
        fragment_size_max: size(websocket.frame_size_max),
        in_flight_max: config.tcp_in_flight_max,
        unauthenticated_frame_size_max: config.unauthenticated_frame_size_max_bytes,
        handshake_grace: config.handshake_grace,
        write_timeout: config.write_timeout,
        read_buffer_size: size(websocket.read_buffer_size),
        write_buffer_size: size(websocket.write_buffer_size),
        write_buffer_size_max: size(websocket.write_buffer_size_max),
        accept_unmasked_frames: websocket.accept_unmasked_frames,
    };
    match transport::ws::WsServer::bind(ws_config).await {
        #[cfg(feature = "tls")]
        Ok(server) if websocket.tls.enabled => {
            let source = certificate_source(&websocket.tls);
            Ok(Some(server.with_tls(server_tls("websocket.tls", &source)?)))
        }
        Ok(server) => Ok(Some(server)),
        Err(error) if !config.is_explicit("websocket.address") => {
            log::warn!(
                "websocket: {error}: {} (the default address); serving without WebSocket",
                std::error::Error::source(&error).map_or_else(String::new, ToString::to_string)
            );
            Ok(None)
        }
        Err(error) => Err(error.into()),
    }
}

impl Handed {
    /// Serves the connections handed to this shard until the leader stops accepting, then
    /// lets this shard's in-flight requests finish.
    pub(crate) async fn serve(self, server: Rc<Server>) {
        let Handed {
            pool,
            #[cfg(feature = "tcp")]
            tcp,
            #[cfg(feature = "tcp")]
            tcp_peers,
            #[cfg(feature = "tcp")]
            tcp_connections,
            #[cfg(feature = "ws")]
            ws,
        } = self;
        #[cfg(feature = "ws")]
        let websocket = ws::serve_handed(ws, Rc::clone(&server));
        #[cfg(not(feature = "ws"))]
        let websocket = async {};
        #[cfg(feature = "tcp")]
        let tcp = async move {
            let Some((inbox, config)) = tcp else {
                return;
            };
            let pool = Rc::new(pool::Pool::new_unchecked(pool));
            publish_pool(&server, &pool);
            trim_pool(&pool);
            let handler = transport_handler(server, shard::TransportKind::Tcp);
            let local = transport::tcp::TcpShard::new(config, handler, tcp_connections, pool);
            local.set_peers(tcp_peers);
            local.receive(inbox).await;
            local.drain().await;
        };
        #[cfg(not(feature = "tcp"))]
        let tcp = {
            let _ = (server, pool);
            async {}
        };
        futures_util::future::join(tcp, websocket).await;
    }
}

/// How often a shard's buffer pool frees the blocks no request needed since the last time.
#[cfg(feature = "tcp")]
const POOL_TRIM_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Trims the shard's buffer pool every [`POOL_TRIM_INTERVAL`] (`pool::Pool::trim`), so the
/// memory a burst of large requests took goes back once the burst is over (after 32
/// producers of 1 MB batches: RSS 168 MB, then 37 MB within 20 s).
#[cfg(feature = "tcp")]
fn trim_pool(pool: &Rc<pool::Pool>) {
    let pool = Rc::downgrade(pool);
    compio::runtime::spawn(async move {
        let mut interval = compio::time::interval(POOL_TRIM_INTERVAL);
        loop {
            interval.tick().await;
            let Some(pool) = pool.upgrade() else { return };
            let freed = pool.trim();
            if freed > 0 {
                log::debug!("pool: {freed} bytes of idle buffers freed");
            }
            // glibc keeps freed pages in its arenas, the pool's blocks and every other
            // allocation a burst freed (replies, indexes). Handing them back walks the
            // arenas, so only when a class went idle: a burst ended, at most every interval.
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            if freed > 0 {
                // SAFETY: `malloc_trim` takes no pointer and only returns the allocator's
                // free pages to the kernel; it is safe to call from any thread.
                unsafe {
                    libc::malloc_trim(0);
                }
            }
        }
    })
    .detach();
}

/// Publishes the shard's buffer-pool counters to its metrics once a second (the pool never
/// leaves its thread; a scrape on another reads what was published), while metrics record.
#[cfg(feature = "tcp")]
fn publish_pool(server: &Rc<Server>, pool: &Rc<pool::Pool>) {
    if !server.metrics().enabled() {
        return;
    }
    let (server, pool) = (Rc::clone(server), Rc::downgrade(pool));
    compio::runtime::spawn(async move {
        let mut interval = compio::time::interval(std::time::Duration::from_secs(1));
        loop {
            interval.tick().await;
            let Some(pool) = pool.upgrade() else { return };
            server.metrics().publish_pool(&pool);
        }
    })
    .detach();
}

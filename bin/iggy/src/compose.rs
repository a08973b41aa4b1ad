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

#[cfg(not(feature = "tcp"))]
compile_error!("the server needs a transport: enable feature `tcp` (or `minimal`/`full`)");

/// Runs `iggy bench <arguments>`; without feature `bench` it says how to get it.
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

/// A listener failed to bind.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BindError {
    #[cfg(feature = "tcp")]
    #[error(transparent)]
    Tcp(#[from] transport::tcp::ListenError),
}

/// The bound listeners, not yet accepting.
pub(crate) struct Listeners {
    #[cfg(feature = "tcp")]
    tcp: Option<transport::tcp::TcpServer>,
}

impl Listeners {
    /// Binds every enabled listener.
    pub(crate) async fn bind(config: &Config) -> Result<Self, BindError> {
        #[cfg(feature = "tcp")]
        let tcp = if config.tcp_enabled {
            let tcp_config = transport::tcp::TcpConfig {
                address: config.tcp_address,
                connections_max: config.tcp_connections_max,
                frame_size_max: config.frame_size_max_bytes,
                in_flight_max: config.tcp_in_flight_max,
            };
            Some(transport::tcp::TcpServer::bind(tcp_config).await?)
        } else {
            None
        };
        Ok(Self {
            #[cfg(feature = "tcp")]
            tcp,
        })
    }

    /// The TCP port clients are told, 0 when TCP is off.
    pub(crate) fn tcp_port(&self) -> u16 {
        #[cfg(feature = "tcp")]
        if let Some(tcp) = &self.tcp {
            return tcp.local_address().port();
        }
        0
    }

    /// Serves until `shutdown` completes, then lets in-flight requests finish.
    pub(crate) async fn serve(self, server: Rc<Server>, shutdown: impl Future<Output = ()>) {
        #[cfg(feature = "tcp")]
        if let Some(tcp) = self.tcp {
            log::info!("tcp: listening on {}", tcp.local_address());
            let handler = Rc::new(crate::shard_handler::ShardHandler {
                server,
                transport: shard::TransportKind::Tcp,
            });
            tcp.serve(handler, shutdown).await;
            return;
        }
        log::warn!("no transport is enabled; waiting for a signal to stop");
        let _ = server;
        shutdown.await;
    }
}

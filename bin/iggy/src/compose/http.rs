//! The HTTP API listener (feature `http`): its settings from `[http]`, bound and served on
//! the leader like the other listeners that cannot move connections between shards.

use std::future::Future;
use std::rc::Rc;

use shard::Server;

use super::BindError;
use crate::config::Config;

/// Binds the HTTP listener when `[http]` enables it; a default address that cannot be bound
/// leaves HTTP off with a warning, as for WebSocket.
pub(super) async fn bind(config: &Config) -> Result<Option<http_api::HttpServer>, BindError> {
    let http = &config.http;
    if !http.enabled {
        return Ok(None);
    }
    if http.metrics_enabled {
        http_api::check_metrics_endpoint(&http.metrics_endpoint)?;
    }
    let console = Rc::new(ServerConsole {
        effective_config: config.effective_toml(),
    });
    let bound = http_api::HttpServer::bind(settings(config)).await;
    match bound.map(|server| server.with_console(console)) {
        #[cfg(feature = "tls")]
        Ok(server) if http.tls.enabled => {
            let source = super::certificate_source(&http.tls);
            Ok(Some(
                server.with_tls(super::server_tls("http.tls", &source)?),
            ))
        }
        Ok(server) => Ok(Some(server)),
        Err(error) if !config.is_explicit("http.address") => {
            log::warn!(
                "http: {error}: {} (the default address); serving without HTTP",
                std::error::Error::source(&error).map_or_else(String::new, ToString::to_string)
            );
            Ok(None)
        }
        Err(error) => Err(error.into()),
    }
}

/// What the console routes of the API tell (README, Web UI): the logger's last lines and
/// the effective configuration as written to `runtime/current_config.toml` (secrets
/// redacted).
struct ServerConsole {
    effective_config: String,
}

impl http_api::console::Console for ServerConsole {
    fn log_lines(&self, after: u64, limit: usize) -> Vec<http_api::console::LogLine> {
        super::log_tail::after(after, limit)
            .into_iter()
            .map(|(seq, text)| http_api::console::LogLine { seq, text })
            .collect()
    }

    fn last_log_seq(&self) -> u64 {
        super::log_tail::last()
    }

    fn effective_config(&self) -> String {
        self.effective_config.clone()
    }
}

/// The listener's settings from `[http]` and the `[message_bus]` timeouts.
fn settings(config: &Config) -> http_api::HttpConfig {
    let http = &config.http;
    let size = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
    let encoding_secret = if http.jwt_encoding_secret.is_empty() {
        random_secret()
    } else {
        http.jwt_encoding_secret.clone()
    };
    // With no decoding secret of its own, tokens are verified with the signing one.
    let decoding_secret = if http.jwt_decoding_secret.is_empty() {
        encoding_secret.clone()
    } else {
        http.jwt_decoding_secret.clone()
    };
    http_api::HttpConfig {
        address: http.address,
        connections_max: http.connections_max,
        limits: http_api::wire::Limits {
            head_size_max: 64 * 1024,
            body_size_max: size(http.request_size_max),
            request_timeout: config.frame_read_timeout,
            idle_timeout: http.idle_timeout,
        },
        write_timeout: config.write_timeout,
        handshake_grace: config.handshake_grace,
        cors: http_api::cors::Cors {
            enabled: http.cors_enabled,
            allowed_origins: http.cors_allowed_origins.clone(),
            allowed_methods: http.cors_allowed_methods.clone(),
            allowed_headers: nonempty(&http.cors_allowed_headers),
            exposed_headers: nonempty(&http.cors_exposed_headers),
            allow_credentials: http.cors_allow_credentials,
            allow_private_network: http.cors_allow_private_network,
        },
        jwt: http_api::jwt::JwtSettings {
            issuer: http.jwt_issuer.clone(),
            audience: http.jwt_audience.clone(),
            valid_issuers: http.jwt_valid_issuers.clone(),
            valid_audiences: http.jwt_valid_audiences.clone(),
            lifetime_s: http.jwt_expiry.as_secs(),
            clock_skew_s: http.jwt_clock_skew.as_secs(),
            not_before_s: http.jwt_not_before.as_secs(),
            encoding_secret,
            decoding_secret,
        },
        metrics_endpoint: http.metrics_enabled.then(|| http.metrics_endpoint.clone()),
        web_ui: http.web_ui,
        sessions: http_api::SessionLimits {
            total: http.sessions_max,
            per_user: http.sessions_per_user_max,
        },
    }
}

/// Iggy's default lists hold `""` for "none".
fn nonempty(list: &[String]) -> Vec<String> {
    list.iter()
        .filter(|item| !item.is_empty())
        .cloned()
        .collect()
}

/// 64 random bytes: a secret for this run only.
fn random_secret() -> Vec<u8> {
    let mut secret = vec![0_u8; 64];
    // Without the OS's randomness no secret can be made: the system is not usable.
    getrandom::fill(&mut secret).expect("the OS random source is available");
    secret
}

/// Serves the HTTP API on the leader until `shutdown` completes.
pub(super) async fn serve(
    http: Option<http_api::HttpServer>,
    server: Rc<Server>,
    shutdown: impl Future<Output = ()>,
) {
    if let Some(http) = http {
        log::info!("http: listening on {}", http.local_address());
        let handler = super::transport_handler(server, shard::TransportKind::Http);
        http.serve(handler, shutdown).await;
    }
}

//! Defaults, file overlays, environment overrides and the errors that name the key.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Config, ConfigError, parse_size};

/// The transports of a `full` build.
const BUILT: &[&str] = &["tcp", "quic", "websocket", "http"];

fn environment(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

#[test]
fn defaults() {
    let config = Config::load(None, &BTreeMap::new(), BUILT).unwrap();
    assert_eq!(config.tcp_address, "127.0.0.1:8090".parse().unwrap());
    assert_eq!(config.system_path.to_str(), Some("local_data"));
    assert_eq!(config.frame_size_max_bytes, 64 << 20);
    assert_eq!(config.rebalancing_timeout, Duration::from_secs(30));
    assert_eq!(config.heartbeat_interval, Duration::from_secs(30));
    assert_eq!(config.memory_pool_size_bytes, 4 << 30);
    assert_eq!(config.sync_interval, Duration::from_secs(1));
}

#[test]
fn environment_overrides_nested_keys() {
    let env = environment(&[
        ("IGGY_TCP_ADDRESS", "127.0.0.1:9000"),
        ("IGGY_SYSTEM_MEMORY_POOL_SIZE", "1 MiB"),
        ("IGGY_TCP_ENABLED", "false"),
        ("IGGY_SYSTEM_PARTITION_SYNC_INTERVAL", "250 ms"),
        ("IGGY_ROOT_PASSWORD", "not a key"),
        ("IGGY_UNRELATED", "ignored"),
    ]);
    let config = Config::load(None, &env, BUILT).unwrap();
    assert_eq!(config.tcp_address.port(), 9000);
    assert_eq!(config.memory_pool_size_bytes, 1 << 20);
    assert!(!config.tcp_enabled);
    assert_eq!(config.sync_interval, Duration::from_millis(250));
    assert!(config.effective_toml().contains("127.0.0.1:9000"));
}

#[test]
fn errors_name_the_key() {
    let error = Config::load(None, &environment(&[("IGGY_TCP_ADRESS", "x")]), BUILT).unwrap_err();
    let ConfigError::UnknownVariable { variable } = error else {
        panic!("expected an unknown variable, got {error}");
    };
    assert_eq!(variable, "IGGY_TCP_ADRESS");
    let error = Config::load(
        None,
        &environment(&[("IGGY_TCP_ADDRESS", "nowhere")]),
        BUILT,
    )
    .unwrap_err();
    assert!(error.to_string().contains("tcp.address"), "{error}");
    let env = environment(&[("IGGY_HEARTBEAT_INTERVAL", "soon")]);
    let error = Config::load(None, &env, BUILT).unwrap_err();
    assert!(error.to_string().contains("heartbeat.interval"), "{error}");
}

#[test]
fn file_overlay_refuses_unknown_and_mistyped_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.toml");
    std::fs::write(&path, "[tcp]\naddress = \"127.0.0.1:7000\"\n").unwrap();
    let config = Config::load(Some(&path), &BTreeMap::new(), BUILT).unwrap();
    assert_eq!(config.tcp_address.port(), 7000);
    std::fs::write(&path, "[tcp]\nadress = \"x\"\n").unwrap();
    let error = Config::load(Some(&path), &BTreeMap::new(), BUILT).unwrap_err();
    assert_eq!(error.to_string(), "unknown config key `tcp.adress`");
    std::fs::write(&path, "[tcp]\nenabled = \"yes\"\n").unwrap();
    let error = Config::load(Some(&path), &BTreeMap::new(), BUILT).unwrap_err();
    assert!(error.to_string().contains("tcp.enabled"), "{error}");
}

#[test]
fn sizes() {
    assert_eq!(parse_size("64 MiB"), Some(64 << 20));
    assert_eq!(parse_size("4GB"), Some(4_000_000_000));
    assert_eq!(parse_size("512"), Some(512));
    assert_eq!(parse_size("1 XB"), None);
    assert_eq!(parse_size("MiB"), None);
    assert_eq!(parse_size("99999999999999 TiB"), None);
}

#[test]
fn cpu_allocation_forms() {
    for good in ["all", "4", "0..4"] {
        let env = environment(&[("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", good)]);
        assert_eq!(
            Config::load(None, &env, BUILT).unwrap().cpu_allocation,
            good
        );
    }
    for bad in ["0", "4..2", "most"] {
        let env = environment(&[("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", bad)]);
        let error = Config::load(None, &env, BUILT).unwrap_err();
        assert!(
            error.to_string().contains("system.sharding.cpu_allocation"),
            "{error}"
        );
    }
}

#[test]
fn the_pool_is_split_between_the_shards() {
    let config = Config::load(None, &BTreeMap::new(), BUILT).unwrap();
    let pool = config.shard_pool(2).unwrap();
    assert_eq!(pool.size_bytes, 2 << 30);
    assert_eq!(pool.bucket_capacity, 8192);
    let small = environment(&[("IGGY_SYSTEM_MEMORY_POOL_SIZE", "256 MiB")]);
    let error = Config::load(None, &small, BUILT)
        .unwrap()
        .shard_pool(1)
        .unwrap_err();
    assert!(
        error.to_string().contains("system.memory_pool.size"),
        "{error}"
    );
}

#[test]
fn transports_the_build_lacks_default_to_off_and_set_keys_are_explicit() {
    let config = Config::load(None, &BTreeMap::new(), BUILT).unwrap();
    assert!(config.websocket.enabled);
    assert_eq!(config.websocket.address, "127.0.0.1:8092".parse().unwrap());
    assert!(!config.is_explicit("websocket.address"));
    assert!(config.quic.enabled);
    assert_eq!(config.quic.address, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(config.quic.initial_mtu, 1200);
    assert_eq!(config.quic.socket_receive_buffer, 8 << 20);
    assert_eq!(config.quic.socket_send_buffer, 8 << 20);
    let minimal = Config::load(None, &BTreeMap::new(), &["tcp"]).unwrap();
    assert!(!minimal.websocket.enabled);
    assert!(!minimal.quic.enabled);
    assert!(!minimal.is_explicit("websocket.enabled"));
    let env = environment(&[
        ("IGGY_WEBSOCKET_ENABLED", "true"),
        ("IGGY_WEBSOCKET_ADDRESS", "127.0.0.1:0"),
    ]);
    let asked = Config::load(None, &env, &["tcp"]).unwrap();
    assert!(asked.websocket.enabled);
    assert!(asked.is_explicit("websocket.enabled"));
    assert!(asked.is_explicit("websocket.address"));
    assert!(!asked.is_explicit("tcp.address"));
}

#[test]
fn this_build_enables_exactly_the_transports_it_has() {
    let built = crate::compose::transports();
    let features = crate::compose::features();
    let config = Config::load(None, &BTreeMap::new(), &built).unwrap();
    assert_eq!(config.tcp_enabled, features.contains(&"tcp"));
    assert_eq!(config.quic.enabled, features.contains(&"quic"));
    assert_eq!(config.websocket.enabled, features.contains(&"ws"));
    assert_eq!(config.http.enabled, features.contains(&"http"));
}

#[test]
fn the_http_section_has_iggys_defaults_and_rules() {
    let config = Config::load(None, &BTreeMap::new(), BUILT).unwrap();
    let http = &config.http;
    assert!(http.enabled);
    assert_eq!(http.address, "127.0.0.1:3000".parse().unwrap());
    assert_eq!(http.request_size_max, 2_000_000);
    assert_eq!(http.jwt_expiry, Duration::from_hours(1));
    assert_eq!(http.jwt_issuer, "iggy.apache.org");
    assert!(http.jwt_encoding_secret.is_empty(), "generated at start");
    assert_eq!(http.cors_allowed_origins, ["*"]);
    assert!(
        !Config::load(None, &BTreeMap::new(), &["tcp"])
            .unwrap()
            .http
            .enabled
    );

    let env = environment(&[
        (
            "IGGY_HTTP_CORS_ALLOWED_ORIGINS",
            "https://a.example, https://b.example",
        ),
        ("IGGY_HTTP_JWT_USE_BASE64_SECRET", "true"),
        ("IGGY_HTTP_JWT_ENCODING_SECRET", "c2VjcmV0"),
    ]);
    let set = Config::load(None, &env, BUILT).unwrap();
    assert_eq!(
        set.http.cors_allowed_origins,
        ["https://a.example", "https://b.example"]
    );
    assert_eq!(set.http.jwt_encoding_secret, b"secret");
    let defaults = Config::load(None, &BTreeMap::new(), BUILT).unwrap();
    assert!(defaults.http.metrics_enabled);
    assert_eq!(defaults.http.metrics_endpoint, "/metrics");
    assert!(!defaults.http.web_ui);
    let env = BTreeMap::from([("IGGY_HTTP_WEB_UI".to_owned(), "true".to_owned())]);
    assert!(Config::load(None, &env, BUILT).unwrap().http.web_ui);

    for (key, value, named) in [
        ("IGGY_HTTP_JWT_ALGORITHM", "RS256", "http.jwt.algorithm"),
        (
            "IGGY_HTTP_METRICS_ENDPOINT",
            "metrics",
            "http.metrics.endpoint",
        ),
        ("IGGY_HTTP_METRICS_ENDPOINT", "/", "http.metrics.endpoint"),
        (
            "IGGY_HTTP_METRICS_ENDPOINT",
            "/m?x=1",
            "http.metrics.endpoint",
        ),
        (
            "IGGY_HTTP_JWT_DECODING_SECRET",
            "other",
            "http.jwt.decoding_secret",
        ),
        (
            "IGGY_HTTP_JWT_ENCODING_SECRET",
            "not base64!",
            "http.jwt.encoding_secret",
        ),
    ] {
        let mut pairs = vec![(key, value)];
        if key.ends_with("SECRET") {
            pairs.push(("IGGY_HTTP_JWT_USE_BASE64_SECRET", "true"));
        }
        let error = Config::load(None, &environment(&pairs), BUILT).unwrap_err();
        assert!(error.to_string().contains(named), "{error}");
    }
}

#[test]
fn the_io_backend_is_compio_unless_asked() {
    let config = Config::load(None, &BTreeMap::new(), BUILT).unwrap();
    assert_eq!(config.io_backend, shard::disk::Backend::Compio);
    let asked = environment(&[("IGGY_SYSTEM_IO_BACKEND", "io_uring")]);
    let config = Config::load(None, &asked, BUILT).unwrap();
    assert_eq!(config.io_backend, shard::disk::Backend::IoUring);
    let bogus = environment(&[("IGGY_SYSTEM_IO_BACKEND", "epoll")]);
    let error = Config::load(None, &bogus, BUILT).unwrap_err();
    assert!(error.to_string().contains("system.io_backend"), "{error}");
}

/// The key a start with `pairs` set in the environment is refused for.
fn refused_key(pairs: &[(&str, &str)]) -> String {
    match Config::load(None, &environment(pairs), BUILT) {
        Err(ConfigError::Invalid { key, .. }) => key,
        Err(other) => panic!("{pairs:?}: expected an invalid value, got {other}"),
        Ok(_) => panic!("{pairs:?}: accepted"),
    }
}

/// Values that would start a server unable to serve are refused, naming the key: timeouts
/// of 0 (every connection ended at once), windows, buffers and admission limits of 0, a
/// frame limit too small for a login, an empty data directory path.
#[test]
fn values_that_would_serve_nobody_are_refused() {
    let cases = [
        (
            "IGGY_MESSAGE_BUS_HANDSHAKE_GRACE",
            "0 s",
            "message_bus.handshake_grace",
        ),
        (
            "IGGY_MESSAGE_BUS_FRAME_READ_TIMEOUT",
            "0 s",
            "message_bus.frame_read_timeout",
        ),
        (
            "IGGY_MESSAGE_BUS_WRITE_TIMEOUT",
            "0 ms",
            "message_bus.write_timeout",
        ),
        ("IGGY_HEARTBEAT_INTERVAL", "0 s", "heartbeat.interval"),
        (
            "IGGY_MESSAGE_BUS_MAX_MESSAGE_SIZE",
            "256 B",
            "message_bus.max_message_size",
        ),
        ("IGGY_QUIC_RECEIVE_WINDOW", "0 B", "quic.receive_window"),
        ("IGGY_QUIC_SEND_WINDOW", "0 B", "quic.send_window"),
        (
            "IGGY_WEBSOCKET_MAX_MESSAGE_SIZE",
            "0 B",
            "websocket.max_message_size",
        ),
        ("IGGY_HTTP_MAX_REQUEST_SIZE", "0 B", "http.max_request_size"),
        ("IGGY_HTTP_MAX_SESSIONS", "0", "http.max_sessions"),
        ("IGGY_TCP_MAX_CONNECTIONS", "0", "tcp.max_connections"),
        ("IGGY_QUIC_MAX_CONNECTIONS", "0", "quic.max_connections"),
        ("IGGY_SYSTEM_PATH", "", "system.path"),
    ];
    for (variable, value, key) in cases {
        assert_eq!(
            refused_key(&[(variable, value)]),
            key,
            "{variable}={value:?}"
        );
    }
    // The least values that still serve are taken.
    let least = environment(&[
        ("IGGY_MESSAGE_BUS_MAX_MESSAGE_SIZE", "4 KiB"),
        ("IGGY_MESSAGE_BUS_MAX_UNAUTHENTICATED_MESSAGE_SIZE", "1 KiB"),
        ("IGGY_TCP_MAX_CONNECTIONS", "1"),
    ]);
    let config = Config::load(None, &least, BUILT).unwrap();
    assert_eq!(config.frame_size_max_bytes, 4096);
    assert_eq!(config.tcp_connections_max, 1);
}

//! The server configuration: the embedded `config.toml` as defaults, an optional file over it,
//! then `IGGY_<SECTION>_<KEY>` environment overrides, then typed validation.
//!
//! The default file is the schema: a key it does not have is unknown, and a value must have
//! the default's TOML type. Every error names the key (or variable) at fault.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use toml::{Table, Value};

mod cluster;
mod observability;

pub(crate) use cluster::{ClusterNode, ClusterSettings, NodePorts};
pub(crate) use observability::{LoggingSettings, TelemetrySettings};

/// The shipped configuration, embedded so the binary runs without it on disk.
pub(crate) const DEFAULT_CONFIG: &str = include_str!("../config.toml");
/// Environment variables that are not keys but share the `IGGY_` prefix.
const NON_KEY_VARIABLES: [&str; 3] = [
    "IGGY_ROOT_USERNAME",
    "IGGY_ROOT_PASSWORD",
    "IGGY_CONFIG_PATH",
];

/// Keys whose values never reach `runtime/current_config.toml`.
const SECRET_KEYS: [&str; 5] = [
    "system.encryption.key",
    "cluster.auth.shared_secret",
    "cluster.auth.previous_shared_secret",
    "http.jwt.encoding_secret",
    "http.jwt.decoding_secret",
];

/// The effective configuration, typed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub(crate) system_path: PathBuf,
    pub(crate) io_backend: shard::disk::Backend,
    pub(crate) cpu_allocation: String,
    pub(crate) pin_cores: bool,
    pub(crate) memory_pool_enabled: bool,
    pub(crate) memory_pool_size_bytes: u64,
    pub(crate) memory_pool_bucket_capacity: u64,
    pub(crate) validate_checksum: bool,
    /// `[system.partition] enforce_fsync`: `replicated` topics sync before the ack too.
    pub(crate) enforce_fsync: bool,
    /// `[system.partition] sync_interval`: `replicated`'s threshold sync at most once per.
    pub(crate) sync_interval: Duration,
    /// `[system.encryption]`: the at-rest key's base64 text when encryption is on.
    pub(crate) encryption_key: Option<Secret>,
    pub(crate) tcp_enabled: bool,
    pub(crate) tcp_address: SocketAddr,
    pub(crate) tcp_tls: TlsSettings,
    pub(crate) tcp_connections_max: usize,
    pub(crate) tcp_in_flight_max: usize,
    pub(crate) frame_size_max_bytes: u32,
    pub(crate) unauthenticated_frame_size_max_bytes: u32,
    pub(crate) handshake_grace: Duration,
    pub(crate) frame_read_timeout: Duration,
    pub(crate) write_timeout: Duration,
    pub(crate) tcp_connections_per_ip_max: usize,
    pub(crate) websocket: WebSocketConfig,
    pub(crate) quic: QuicSettings,
    pub(crate) http: HttpSettings,
    pub(crate) cleaner_enabled: bool,
    pub(crate) cleaner_interval: Duration,
    pub(crate) login_failures_free: u32,
    pub(crate) login_backoff: Duration,
    pub(crate) login_backoff_max: Duration,
    pub(crate) rebalancing_timeout: Duration,
    pub(crate) heartbeat_enabled: bool,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) cluster: ClusterSettings,
    pub(crate) logging: LoggingSettings,
    pub(crate) telemetry: TelemetrySettings,
    /// The merged table, written to `runtime/current_config.toml`.
    pub(crate) effective: Table,
    /// The dotted keys a file or a variable set (the rest are defaults).
    pub(crate) explicit: BTreeSet<String>,
}

/// A secret from the configuration, which `Debug` never shows.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("<redacted>")
    }
}

/// `[websocket]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WebSocketConfig {
    pub(crate) enabled: bool,
    pub(crate) address: SocketAddr,
    pub(crate) connections_max: usize,
    pub(crate) read_buffer_size: u64,
    pub(crate) write_buffer_size: u64,
    pub(crate) write_buffer_size_max: u64,
    pub(crate) message_size_max: u64,
    pub(crate) frame_size_max: u64,
    pub(crate) accept_unmasked_frames: bool,
    pub(crate) tls: TlsSettings,
}

/// `[http]` with `[http.cors]`, `[http.jwt]` and `[http.tls]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HttpSettings {
    pub(crate) enabled: bool,
    /// `http.web_ui`: the embedded web UI at `/ui` (feature `web`).
    pub(crate) web_ui: bool,
    pub(crate) address: SocketAddr,
    pub(crate) request_size_max: u64,
    pub(crate) connections_max: usize,
    pub(crate) sessions_max: usize,
    pub(crate) sessions_per_user_max: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) cors_enabled: bool,
    pub(crate) cors_allowed_methods: Vec<String>,
    pub(crate) cors_allowed_origins: Vec<String>,
    pub(crate) cors_allowed_headers: Vec<String>,
    pub(crate) cors_exposed_headers: Vec<String>,
    pub(crate) cors_allow_credentials: bool,
    pub(crate) cors_allow_private_network: bool,
    pub(crate) jwt_issuer: String,
    pub(crate) jwt_audience: String,
    pub(crate) jwt_valid_issuers: Vec<String>,
    pub(crate) jwt_valid_audiences: Vec<String>,
    pub(crate) jwt_expiry: Duration,
    pub(crate) jwt_clock_skew: Duration,
    pub(crate) jwt_not_before: Duration,
    /// Empty: generated at start.
    pub(crate) jwt_encoding_secret: Vec<u8>,
    pub(crate) jwt_decoding_secret: Vec<u8>,
    pub(crate) tls: TlsSettings,
    /// `[http.metrics]`: `GET endpoint` answers the metrics; off, nothing is recorded.
    pub(crate) metrics_enabled: bool,
    pub(crate) metrics_endpoint: String,
}

/// `[tcp.tls]` and `[websocket.tls]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TlsSettings {
    pub(crate) enabled: bool,
    /// Self-signed while `cert_file` does not exist.
    pub(crate) self_signed: bool,
    pub(crate) cert_file: PathBuf,
    pub(crate) key_file: PathBuf,
}

/// `[quic]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuicSettings {
    pub(crate) enabled: bool,
    pub(crate) address: SocketAddr,
    pub(crate) connections_max: usize,
    pub(crate) max_concurrent_bidi_streams: u32,
    pub(crate) initial_mtu: u64,
    pub(crate) send_window: u64,
    pub(crate) receive_window: u64,
    pub(crate) stream_receive_window: u64,
    /// Zero: none.
    pub(crate) keep_alive_interval: Duration,
    /// Zero: never.
    pub(crate) max_idle_timeout: Duration,
    /// Zero: the kernel's default.
    pub(crate) socket_receive_buffer: u64,
    /// Zero: the kernel's default.
    pub(crate) socket_send_buffer: u64,
    pub(crate) self_signed: bool,
    pub(crate) cert_file: PathBuf,
    pub(crate) key_file: PathBuf,
}

/// Transport sections whose `enabled` defaults to whether the build has them.
pub(crate) const TRANSPORT_SECTIONS: [&str; 4] = ["tcp", "quic", "websocket", "http"];

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    #[error("read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parse config file {path}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("unknown config key `{key}`")]
    UnknownKey { key: String },
    #[error("unknown config variable `{variable}` (no such key)")]
    UnknownVariable { variable: String },
    #[error("invalid value for `{key}`: {reason}")]
    Invalid { key: String, reason: String },
}

impl Config {
    /// The buffer pool of one of `shards` shards: an equal part of `system.memory_pool.size`,
    /// which as a whole must meet the pool's minimum.
    pub(crate) fn shard_pool(&self, shards: usize) -> Result<pool::PoolConfig, ConfigError> {
        let invalid = |key: &str, reason: String| ConfigError::Invalid {
            key: key.to_owned(),
            reason,
        };
        let whole = pool::PoolConfig {
            enabled: self.memory_pool_enabled,
            size_bytes: self.memory_pool_size_bytes,
            bucket_capacity: usize::try_from(self.memory_pool_bucket_capacity).map_err(
                |error| invalid("system.memory_pool.bucket_capacity", error.to_string()),
            )?,
        };
        whole.validate().map_err(|error| {
            let key = match error {
                pool::ConfigError::SizeTooSmall { .. } => "system.memory_pool.size",
                pool::ConfigError::BucketCapacityZero => "system.memory_pool.bucket_capacity",
            };
            invalid(key, error.to_string())
        })?;
        let shards = u64::try_from(shards.max(1)).unwrap_or(u64::MAX);
        Ok(pool::PoolConfig {
            size_bytes: whole.size_bytes / shards,
            ..whole
        })
    }

    /// Defaults, then `file` if given, then the variables in `environment` (name, value).
    /// A transport section the build lacks (not in `built`) defaults to disabled.
    pub(crate) fn load(
        file: Option<&Path>,
        environment: &BTreeMap<String, String>,
        built: &[&str],
    ) -> Result<Self, ConfigError> {
        let mut table = parse(DEFAULT_CONFIG, Path::new("<embedded config.toml>"))?;
        for section in TRANSPORT_SECTIONS {
            if !built.contains(&section)
                && let Some(Value::Table(transport)) = table.get_mut(section)
            {
                transport.insert("enabled".into(), Value::Boolean(false));
            }
        }
        let defaults = table.clone();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            let overlay = parse(&text, path)?;
            merge(&mut table, overlay, "")?;
        }
        apply_environment(&mut table, environment)?;
        let mut explicit = BTreeSet::new();
        differences(&defaults, &table, "", &mut explicit);
        let mut config = Self::from_table(table)?;
        config.explicit = explicit;
        Ok(config)
    }

    /// Cluster mode: every transport listens on its own address with the port this node's
    /// roster entry names (checked present by [`ClusterSettings::check_for`]).
    pub(crate) fn use_roster_ports(&mut self, replica_id: u8) {
        let Some(node) = self.cluster.node(replica_id) else {
            return;
        };
        let ports = node.ports;
        let addresses = [
            (&mut self.tcp_address, ports.tcp),
            (&mut self.quic.address, ports.quic),
            (&mut self.websocket.address, ports.websocket),
            (&mut self.http.address, ports.http),
        ];
        for (address, port) in addresses {
            if let Some(port) = port {
                address.set_port(port);
            }
        }
    }

    /// The roster clients are told: every node in cluster mode (with the roster's ports for
    /// the transports this node serves, 0 for the others), else this node alone with the
    /// ports its listeners bound.
    pub(crate) fn roster(&self, replica_id: u8, bound: [u16; 4]) -> shard::cluster::Roster {
        let [tcp, quic, websocket, http] = bound;
        let entry = |node: &ClusterNode, ports: [u16; 4]| shard::cluster::RosterNode {
            replica_id: node.replica_id,
            name: node.name.clone(),
            ip: node.ip.clone(),
            tcp_port: ports[0],
            quic_port: ports[1],
            websocket_port: ports[2],
            http_port: ports[3],
        };
        let nodes = if self.cluster.enabled {
            let served = |on: bool, port: Option<u16>| if on { port.unwrap_or(0) } else { 0 };
            self.cluster
                .nodes
                .iter()
                .map(|node| {
                    let p = node.ports;
                    let ports = [
                        served(tcp != 0, p.tcp),
                        served(quic != 0, p.quic),
                        served(websocket != 0, p.websocket),
                        served(http != 0, p.http),
                    ];
                    entry(node, ports)
                })
                .collect()
        } else {
            let this = self
                .cluster
                .node(replica_id)
                .cloned()
                .unwrap_or(ClusterNode {
                    name: "iggy-node-1".into(),
                    ip: "127.0.0.1".into(),
                    replica_id: 0,
                    ports: NodePorts::default(),
                });
            let this = ClusterNode {
                replica_id: 0,
                ..this
            };
            vec![entry(&this, [tcp, quic, websocket, http])]
        };
        shard::cluster::Roster {
            cluster_name: self.cluster.name.clone(),
            replica_id: if self.cluster.enabled { replica_id } else { 0 },
            nodes,
        }
    }

    /// Whether a file or a variable set `key` (to a value other than its default).
    #[allow(
        dead_code,
        reason = "only builds with a listener that may fall back use it"
    )]
    pub(crate) fn is_explicit(&self, key: &str) -> bool {
        self.explicit.contains(key)
    }

    fn from_table(table: Table) -> Result<Self, ConfigError> {
        let view = View(&table);
        let frame_size = view.size("message_bus.max_message_size")?;
        Ok(Self {
            system_path: view.system_path()?,
            io_backend: view.io_backend("system.io_backend")?,
            cpu_allocation: view.cpu_allocation("system.sharding.cpu_allocation")?,
            pin_cores: view.bool("system.sharding.pin_cores")?,
            memory_pool_enabled: view.bool("system.memory_pool.enabled")?,
            memory_pool_size_bytes: view.size("system.memory_pool.size")?,
            memory_pool_bucket_capacity: view.count("system.memory_pool.bucket_capacity")?,
            validate_checksum: view.bool("system.partition.validate_checksum")?,
            enforce_fsync: view.bool("system.partition.enforce_fsync")?,
            sync_interval: view.duration("system.partition.sync_interval")?,
            encryption_key: view.encryption_key()?,
            tcp_enabled: view.bool("tcp.enabled")?,
            tcp_address: view.parsed("tcp.address")?,
            tcp_tls: view.tls("tcp.tls")?,
            tcp_connections_max: view.positive_count("tcp.max_connections")?,
            tcp_in_flight_max: view.count("tcp.max_in_flight_requests")?,
            frame_size_max_bytes: frame_size_max(frame_size, FRAME_SIZE_FLOOR)?,
            unauthenticated_frame_size_max_bytes: frame_size_max(
                view.size("message_bus.max_unauthenticated_message_size")?,
                UNAUTHENTICATED_FRAME_SIZE_FLOOR,
            )
            .map_err(|error| rename_key(error, "message_bus.max_unauthenticated_message_size"))?,
            handshake_grace: view.positive_duration("message_bus.handshake_grace")?,
            frame_read_timeout: view.positive_duration("message_bus.frame_read_timeout")?,
            write_timeout: view.positive_duration("message_bus.write_timeout")?,
            tcp_connections_per_ip_max: view.count("tcp.max_connections_per_ip")?,
            websocket: WebSocketConfig {
                enabled: view.bool("websocket.enabled")?,
                address: view.parsed("websocket.address")?,
                connections_max: view.positive_count("websocket.max_connections")?,
                read_buffer_size: view.size("websocket.read_buffer_size")?,
                write_buffer_size: view.size("websocket.write_buffer_size")?,
                write_buffer_size_max: view.positive_size("websocket.max_write_buffer_size")?,
                message_size_max: view.positive_size("websocket.max_message_size")?,
                frame_size_max: view.size("websocket.max_frame_size")?,
                accept_unmasked_frames: view.bool("websocket.accept_unmasked_frames")?,
                tls: view.tls("websocket.tls")?,
            },
            quic: view.quic()?,
            http: view.http()?,
            cleaner_enabled: view.bool("data_maintenance.messages.cleaner_enabled")?,
            cleaner_interval: view.positive_duration("data_maintenance.messages.interval")?,
            login_failures_free: view.count("login.max_failures")?,
            login_backoff: view.duration("login.backoff")?,
            login_backoff_max: view.duration("login.max_backoff")?,
            rebalancing_timeout: view.duration("consumer_group.rebalancing_timeout")?,
            heartbeat_enabled: view.bool("heartbeat.enabled")?,
            heartbeat_interval: view.positive_duration("heartbeat.interval")?,
            cluster: view.cluster()?,
            logging: view.logging(Path::new(&view.string("system.path")?))?,
            telemetry: view.telemetry()?,
            effective: table,
            explicit: BTreeSet::new(),
        })
    }

    /// The effective configuration as TOML text, its secrets (`SECRET_KEYS`) replaced by
    /// `"<redacted>"` where set.
    pub(crate) fn effective_toml(&self) -> String {
        let mut table = self.effective.clone();
        for key in SECRET_KEYS {
            let mut parts: Vec<&str> = key.split('.').collect();
            let leaf = parts.pop().unwrap_or_default();
            let mut section = Some(&mut table);
            for part in parts {
                section = section.and_then(|table| table.get_mut(part)?.as_table_mut());
            }
            if let Some(Value::String(secret)) = section.and_then(|table| table.get_mut(leaf))
                && !secret.is_empty()
            {
                "<redacted>".clone_into(secret);
            }
        }
        table.to_string()
    }
}

/// The least `message_bus.max_message_size`: a header and a send of a small message.
const FRAME_SIZE_FLOOR: u32 = 4096;

/// The least `message_bus.max_unauthenticated_message_size`: a header and a login of the
/// longest name and password the protocol allows (255 bytes each) with its client version
/// and context.
const UNAUTHENTICATED_FRAME_SIZE_FLOOR: u32 = 1024;

/// A frame limit must hold what clients send (`floor`) and fit the wire's `u32` size field.
fn frame_size_max(bytes: u64, floor: u32) -> Result<u32, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        key: "message_bus.max_message_size".into(),
        reason,
    };
    let size = u32::try_from(bytes).map_err(|_overflow| invalid("over 4 GiB - 1".into()))?;
    if size < floor {
        return Err(invalid(format!(
            "below {floor} bytes, too small for a client's login or send"
        )));
    }
    Ok(size)
}

fn parse(text: &str, path: &Path) -> Result<Table, ConfigError> {
    text.parse::<Table>().map_err(|source| ConfigError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Lays `overlay` over `base`; every key must exist in `base` with the same type.
fn merge(base: &mut Table, overlay: Table, prefix: &str) -> Result<(), ConfigError> {
    for (key, value) in overlay {
        let path = join(prefix, &key);
        let Some(slot) = base.get_mut(&key) else {
            return Err(ConfigError::UnknownKey { key: path });
        };
        match (slot, value) {
            (Value::Table(slot), Value::Table(value)) => merge(slot, value, &path)?,
            (slot, value) if slot.same_type(&value) => *slot = value,
            (slot, _) => {
                let reason = format!("expected a {}", slot.type_str());
                return Err(ConfigError::Invalid { key: path, reason });
            }
        }
    }
    Ok(())
}

/// The dotted keys whose value in `table` differs from `defaults`.
fn differences(defaults: &Table, table: &Table, prefix: &str, out: &mut BTreeSet<String>) {
    for (key, value) in table {
        let path = join(prefix, key);
        match (defaults.get(key), value) {
            (Some(Value::Table(default)), Value::Table(value)) => {
                differences(default, value, &path, out);
            }
            (Some(default), value) if default == value => {}
            _ => {
                out.insert(path);
            }
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Every leaf key as (dotted path, `IGGY_…` variable name).
fn leaves(table: &Table, prefix: &str, out: &mut Vec<(String, String)>) {
    for (key, value) in table {
        let path = join(prefix, key);
        if let Value::Table(table) = value {
            leaves(table, &path, out);
        } else {
            let variable = format!("IGGY_{}", path.replace('.', "_").to_uppercase());
            out.push((path, variable));
        }
    }
}

/// Applies `IGGY_<SECTION>_<KEY>` variables; an `IGGY_<SECTION>_…` variable that names no
/// key of a known section is an error, other `IGGY_` variables are not ours to judge.
fn apply_environment(
    table: &mut Table,
    environment: &BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    let mut keys = Vec::new();
    leaves(table, "", &mut keys);
    let sections: Vec<String> = table
        .keys()
        .map(|section| format!("IGGY_{}_", section.to_uppercase()))
        .collect();
    for (variable, text) in environment {
        if NON_KEY_VARIABLES.contains(&variable.as_str()) {
            continue;
        }
        match keys.iter().find(|(_, name)| name == variable) {
            Some((path, _)) => set_from_text(table, path, text)?,
            None if sections.iter().any(|section| variable.starts_with(section)) => {
                let variable = variable.clone();
                return Err(ConfigError::UnknownVariable { variable });
            }
            None => {}
        }
    }
    Ok(())
}

/// Sets the leaf at `path` from text, typed like the value it replaces.
fn set_from_text(table: &mut Table, path: &str, text: &str) -> Result<(), ConfigError> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let leaf = parts.pop().unwrap_or_default();
    let mut current = table;
    for part in parts {
        current = match current.get_mut(part) {
            Some(Value::Table(table)) => table,
            _ => return Err(ConfigError::UnknownKey { key: path.into() }),
        };
    }
    let slot = current
        .get_mut(leaf)
        .ok_or_else(|| ConfigError::UnknownKey { key: path.into() })?;
    let invalid = |reason: String| ConfigError::Invalid {
        key: path.into(),
        reason,
    };
    *slot = match slot {
        Value::String(_) => Value::String(text.to_owned()),
        Value::Boolean(_) => Value::Boolean(
            text.parse()
                .map_err(|_not_bool| invalid(format!("`{text}` is not true or false")))?,
        ),
        Value::Integer(_) => Value::Integer(
            text.parse()
                .map_err(|_not_integer| invalid(format!("`{text}` is not an integer")))?,
        ),
        // A list of strings from comma-separated text.
        Value::Array(_) => Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| Value::String(item.to_owned()))
                .collect(),
        ),
        other => {
            return Err(invalid(format!(
                "a {} cannot be set from text",
                other.type_str()
            )));
        }
    };
    Ok(())
}

/// Typed reads of dotted keys, with errors that name the key.
struct View<'t>(&'t Table);

impl View<'_> {
    fn value(&self, path: &str) -> Result<&Value, ConfigError> {
        let mut current = self.0;
        let mut parts = path.split('.').peekable();
        while let Some(part) = parts.next() {
            let value = current
                .get(part)
                .ok_or_else(|| ConfigError::UnknownKey { key: path.into() })?;
            if parts.peek().is_none() {
                return Ok(value);
            }
            current = value
                .as_table()
                .ok_or_else(|| ConfigError::UnknownKey { key: path.into() })?;
        }
        Err(ConfigError::UnknownKey { key: path.into() })
    }

    fn invalid(path: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: path.into(),
            reason: reason.into(),
        }
    }

    fn string(&self, path: &str) -> Result<String, ConfigError> {
        self.value(path)?
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Self::invalid(path, "expected a string"))
    }

    fn bool(&self, path: &str) -> Result<bool, ConfigError> {
        self.value(path)?
            .as_bool()
            .ok_or_else(|| Self::invalid(path, "expected true or false"))
    }

    fn count<T: TryFrom<i64>>(&self, path: &str) -> Result<T, ConfigError> {
        let value = self.value(path)?.as_integer();
        value
            .and_then(|value| T::try_from(value).ok())
            .ok_or_else(|| Self::invalid(path, "expected a non-negative integer in range"))
    }

    fn parsed<T: std::str::FromStr>(&self, path: &str) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        let text = self.string(path)?;
        text.parse()
            .map_err(|error: T::Err| Self::invalid(path, format!("`{text}`: {error}")))
    }

    /// A `[<transport>.tls]` section.
    fn tls(&self, section: &str) -> Result<TlsSettings, ConfigError> {
        Ok(TlsSettings {
            enabled: self.bool(&format!("{section}.enabled"))?,
            self_signed: self.bool(&format!("{section}.self_signed"))?,
            cert_file: PathBuf::from(self.string(&format!("{section}.cert_file"))?),
            key_file: PathBuf::from(self.string(&format!("{section}.key_file"))?),
        })
    }

    fn io_backend(&self, path: &str) -> Result<shard::disk::Backend, ConfigError> {
        match self.string(path)?.as_str() {
            "compio" => Ok(shard::disk::Backend::Compio),
            "io_uring" => Ok(shard::disk::Backend::IoUring),
            other => {
                let reason = format!("`{other}`: expected \"compio\" or \"io_uring\"");
                Err(Self::invalid(path, reason))
            }
        }
    }

    fn strings(&self, path: &str) -> Result<Vec<String>, ConfigError> {
        let list = self.value(path)?;
        let items = list
            .as_array()
            .ok_or_else(|| Self::invalid(path, "expected a list of strings"))?;
        items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Self::invalid(path, "expected a list of strings"))
            })
            .collect()
    }

    /// A JWT secret: the text, or its base64 decoding with `use_base64_secret`.
    fn secret(&self, path: &str) -> Result<Vec<u8>, ConfigError> {
        let text = self.string(path)?;
        if !self.bool("http.jwt.use_base64_secret")? {
            return Ok(text.into_bytes());
        }
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|error| Self::invalid(path, format!("not base64: {error}")))
    }

    /// The at-rest key when `[system.encryption]` is enabled; enabled without a key is an
    /// error here, a key that is not 32 bytes of base64 one at start.
    fn encryption_key(&self) -> Result<Option<Secret>, ConfigError> {
        if !self.bool("system.encryption.enabled")? {
            return Ok(None);
        }
        let key = self.string("system.encryption.key")?;
        if key.trim().is_empty() {
            return Err(Self::invalid(
                "system.encryption.key",
                "empty while system.encryption.enabled is true (give 32 random bytes as \
                 base64, e.g. `openssl rand -base64 32`)",
            ));
        }
        Ok(Some(Secret(key)))
    }

    fn quic(&self) -> Result<QuicSettings, ConfigError> {
        Ok(QuicSettings {
            enabled: self.bool("quic.enabled")?,
            address: self.parsed("quic.address")?,
            connections_max: self.positive_count("quic.max_connections")?,
            max_concurrent_bidi_streams: self.count("quic.max_concurrent_bidi_streams")?,
            initial_mtu: self.size("quic.initial_mtu")?,
            send_window: self.positive_size("quic.send_window")?,
            receive_window: self.positive_size("quic.receive_window")?,
            stream_receive_window: self.positive_size("quic.stream_receive_window")?,
            keep_alive_interval: self.duration("quic.keep_alive_interval")?,
            max_idle_timeout: self.duration("quic.max_idle_timeout")?,
            socket_receive_buffer: self.size("quic.socket_receive_buffer")?,
            socket_send_buffer: self.size("quic.socket_send_buffer")?,
            self_signed: self.bool("quic.certificate.self_signed")?,
            cert_file: PathBuf::from(self.string("quic.certificate.cert_file")?),
            key_file: PathBuf::from(self.string("quic.certificate.key_file")?),
        })
    }

    fn http(&self) -> Result<HttpSettings, ConfigError> {
        if self.string("http.jwt.algorithm")? != "HS256" {
            return Err(Self::invalid(
                "http.jwt.algorithm",
                "only HS256 is supported",
            ));
        }
        let (encoding, decoding) = (
            self.string("http.jwt.encoding_secret")?,
            self.string("http.jwt.decoding_secret")?,
        );
        if !decoding.is_empty() && decoding != encoding {
            let reason = "HS256 signs and verifies with one secret: leave it empty or equal \
                          to http.jwt.encoding_secret";
            return Err(Self::invalid("http.jwt.decoding_secret", reason));
        }
        Ok(HttpSettings {
            enabled: self.bool("http.enabled")?,
            web_ui: self.bool("http.web_ui")?,
            address: self.parsed("http.address")?,
            request_size_max: self.positive_size("http.max_request_size")?,
            connections_max: self.positive_count("http.max_connections")?,
            sessions_max: self.positive_count("http.max_sessions")?,
            sessions_per_user_max: self.positive_count("http.max_sessions_per_user")?,
            idle_timeout: self.duration("http.idle_timeout")?,
            cors_enabled: self.bool("http.cors.enabled")?,
            cors_allowed_methods: self.strings("http.cors.allowed_methods")?,
            cors_allowed_origins: self.strings("http.cors.allowed_origins")?,
            cors_allowed_headers: self.strings("http.cors.allowed_headers")?,
            cors_exposed_headers: self.strings("http.cors.exposed_headers")?,
            cors_allow_credentials: self.bool("http.cors.allow_credentials")?,
            cors_allow_private_network: self.bool("http.cors.allow_private_network")?,
            jwt_issuer: self.string("http.jwt.issuer")?,
            jwt_audience: self.string("http.jwt.audience")?,
            jwt_valid_issuers: self.strings("http.jwt.valid_issuers")?,
            jwt_valid_audiences: self.strings("http.jwt.valid_audiences")?,
            jwt_expiry: self.duration("http.jwt.access_token_expiry")?,
            jwt_clock_skew: self.duration("http.jwt.clock_skew")?,
            jwt_not_before: self.duration("http.jwt.not_before")?,
            jwt_encoding_secret: self.secret("http.jwt.encoding_secret")?,
            jwt_decoding_secret: self.secret("http.jwt.decoding_secret")?,
            tls: self.tls("http.tls")?,
            metrics_enabled: self.bool("http.metrics.enabled")?,
            metrics_endpoint: self.endpoint("http.metrics.endpoint")?,
        })
    }

    /// An absolute URL path (`/metrics`).
    fn endpoint(&self, path: &str) -> Result<String, ConfigError> {
        let text = self.string(path)?;
        let valid = text.starts_with('/')
            && text.len() > 1
            && !text.contains(['?', '#'])
            && text.chars().all(|c| c.is_ascii_graphic());
        if valid {
            Ok(text)
        } else {
            Err(Self::invalid(
                path,
                format!("`{text}` is not a path like \"/metrics\""),
            ))
        }
    }

    fn duration(&self, path: &str) -> Result<Duration, ConfigError> {
        let text = self.string(path)?;
        humantime::parse_duration(&text)
            .map_err(|error| Self::invalid(path, format!("`{text}`: {error}")))
    }

    /// `all`, a core count (`4`) or a core range (`0..4`).
    fn cpu_allocation(&self, path: &str) -> Result<String, ConfigError> {
        let text = self.string(path)?;
        let count = |part: &str| part.trim().parse::<u32>().ok();
        let valid = match text.split_once("..") {
            _ if text == "all" => true,
            Some((start, end)) => matches!((count(start), count(end)), (Some(s), Some(e)) if s < e),
            None => count(&text).is_some_and(|cores| cores > 0),
        };
        if valid {
            Ok(text)
        } else {
            let reason = format!("`{text}` is not \"all\", a core count or a range \"0..4\"");
            Err(Self::invalid(path, reason))
        }
    }

    fn size(&self, path: &str) -> Result<u64, ConfigError> {
        let text = self.string(path)?;
        parse_size(&text).ok_or_else(|| {
            Self::invalid(path, format!("`{text}` is not a size such as \"64 MiB\""))
        })
    }

    /// `system.path`: not empty (which would put the data in the working directory).
    fn system_path(&self) -> Result<PathBuf, ConfigError> {
        let path = self.string("system.path")?;
        if path.trim().is_empty() {
            return Err(Self::invalid("system.path", "empty"));
        }
        Ok(PathBuf::from(path))
    }

    /// A duration that must not be zero: a timeout or interval of 0 would end every
    /// connection (or member) at once, where elsewhere in this file 0 means "none".
    fn positive_duration(&self, path: &str) -> Result<Duration, ConfigError> {
        let duration = self.duration(path)?;
        if duration.is_zero() {
            return Err(Self::invalid(path, "must be above 0"));
        }
        Ok(duration)
    }

    /// A size that must not be zero (a window, a buffer or a request limit of none).
    fn positive_size(&self, path: &str) -> Result<u64, ConfigError> {
        let size = self.size(path)?;
        if size == 0 {
            return Err(Self::invalid(path, "must be above 0"));
        }
        Ok(size)
    }

    /// A count that must not be zero (connections or sessions a listener admits: a listener
    /// that admits none is turned off with its `enabled` key instead).
    fn positive_count<T: TryFrom<i64>>(&self, path: &str) -> Result<T, ConfigError> {
        if self.value(path)?.as_integer() == Some(0) {
            return Err(Self::invalid(
                path,
                "must be above 0 (`enabled = false` turns it off)",
            ));
        }
        self.count(path)
    }
}

/// `error` about another key: the same reason, named for `key`.
fn rename_key(error: ConfigError, key: &str) -> ConfigError {
    match error {
        ConfigError::Invalid { reason, .. } => ConfigError::Invalid {
            key: key.to_owned(),
            reason,
        },
        other => other,
    }
}

/// Parses "64 MiB", "4 GB", "512 B" or a bare byte count.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    proto::units::parse_byte_size(text)
}

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod tests;

//! `[cluster]`: Iggy's keys and rules — the roster (`[[cluster.nodes]]`), the consensus
//! timeouts, `[cluster.auth]` and `[cluster.tls]` — and which roster entry this process is.

use std::path::PathBuf;
use std::time::Duration;

use toml::Value;

use super::{ConfigError, View};

/// The most nodes a roster may have (the replica state machine's bitsets).
const NODES_MAX: usize = 16;
/// The shortest shared secret accepted.
const SECRET_MIN_BYTES: usize = 32;

/// `[cluster]`, typed and checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClusterSettings {
    pub(crate) enabled: bool,
    pub(crate) name: String,
    pub(crate) nodes: Vec<ClusterNode>,
    pub(crate) timeouts: ConsensusTimeouts,
    /// `[cluster.auth]`: `Some` secrets when enabled.
    pub(crate) auth: Option<ReplicaSecrets>,
    /// `[cluster.tls]`: `Some` when enabled.
    pub(crate) tls: Option<ClusterTls>,
}

/// `[cluster.tls]` when enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterTls {
    /// This node serves a self-signed certificate made at start and takes any peer's
    /// (encryption without authenticating the acceptor); otherwise the three files below.
    pub(crate) self_signed: bool,
    /// This node's certificate chain and key (PEM).
    pub(crate) cert_file: PathBuf,
    pub(crate) key_file: PathBuf,
    /// The CA certificates (PEM) a peer's certificate must chain to, for the peer's `ip`.
    pub(crate) ca_file: PathBuf,
}

/// One `[[cluster.nodes]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterNode {
    pub(crate) name: String,
    pub(crate) ip: String,
    pub(crate) replica_id: u8,
    pub(crate) ports: NodePorts,
}

/// A node's `ports`; `None` where the entry names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct NodePorts {
    pub(crate) tcp: Option<u16>,
    pub(crate) quic: Option<u16>,
    pub(crate) http: Option<u16>,
    pub(crate) websocket: Option<u16>,
    pub(crate) tcp_replica: Option<u16>,
}

/// The consensus timeouts, as Iggy names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConsensusTimeouts {
    pub(crate) heartbeat_timeout: Duration,
    pub(crate) commit_broadcast_interval: Duration,
    pub(crate) prepare_retransmit_interval: Duration,
    pub(crate) view_change_retransmit_interval: Duration,
    pub(crate) view_change_status_timeout: Duration,
    pub(crate) request_start_view_retransmit_interval: Duration,
    pub(crate) repair_retry_interval: Duration,
}

/// `[cluster.auth]` when enabled: the secret this node proves and the ones it accepts.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ReplicaSecrets {
    pub(crate) current: Vec<u8>,
    /// Accepted from peers during a rotation.
    pub(crate) previous: Option<Vec<u8>>,
}

impl std::fmt::Debug for ReplicaSecrets {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ReplicaSecrets(redacted)")
    }
}

impl ClusterSettings {
    /// The roster entry of replica `id`.
    pub(crate) fn node(&self, id: u8) -> Option<&ClusterNode> {
        self.nodes.iter().find(|node| node.replica_id == id)
    }

    /// Checks what depends on the process (`--replica-id`) and the enabled transports
    /// (`(section, enabled)`): in cluster mode every enabled transport and the replica port
    /// need a roster port on every node, as Iggy requires.
    pub(crate) fn check_for(
        &self,
        replica_id: u8,
        transports: &[(&str, bool)],
    ) -> Result<(), ConfigError> {
        if self.node(replica_id).is_none() && (self.enabled || replica_id != 0) {
            let reason = format!("--replica-id {replica_id} names no `[[cluster.nodes]]` entry");
            return Err(View::invalid("cluster.nodes", reason));
        }
        if !self.enabled {
            return Ok(());
        }
        for node in &self.nodes {
            let ports = [
                ("tcp", node.ports.tcp),
                ("quic", node.ports.quic),
                ("http", node.ports.http),
                ("websocket", node.ports.websocket),
            ];
            let needed = ports.iter().filter(|(transport, _)| {
                transports.contains(&(*transport, true)) || *transport == "tcp"
            });
            let replica = [("tcp_replica", node.ports.tcp_replica)];
            for (transport, port) in needed.chain(replica.iter()) {
                if port.is_none() {
                    let reason = format!(
                        "node `{}` has no ports.{transport}: cluster mode needs a roster \
                         port for every enabled transport",
                        node.name
                    );
                    return Err(View::invalid("cluster.nodes", reason));
                }
            }
        }
        self.check_distinct_endpoints()
    }

    /// No two roster entries, and no two ports of one entry, on one address and protocol: a
    /// node would dial itself as its peer, or two listeners of one node would clash (QUIC is
    /// UDP, so it may share a number with a TCP port).
    fn check_distinct_endpoints(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::BTreeMap::new();
        for node in &self.nodes {
            let ports = [
                (node.ports.tcp, "tcp"),
                (node.ports.http, "tcp"),
                (node.ports.websocket, "tcp"),
                (node.ports.tcp_replica, "tcp"),
                (node.ports.quic, "udp"),
            ];
            for (port, protocol) in ports {
                let Some(port) = port else {
                    continue;
                };
                let endpoint = (node.ip.as_str(), port, protocol);
                if let Some(other) = seen.insert(endpoint, node.name.as_str()) {
                    let reason = format!(
                        "`{other}` and `{}` both use {protocol} {}:{port}",
                        node.name, node.ip
                    );
                    return Err(View::invalid("cluster.nodes", reason));
                }
            }
        }
        Ok(())
    }
}

impl View<'_> {
    pub(super) fn cluster(&self) -> Result<ClusterSettings, ConfigError> {
        let timeouts = self.consensus_timeouts()?;
        let count = |path: &str, range: std::ops::RangeInclusive<i64>| {
            let value: i64 = self.count(path)?;
            if range.contains(&value) {
                Ok(())
            } else {
                let reason = format!("{value} is outside {}..={}", range.start(), range.end());
                Err(Self::invalid(path, reason))
            }
        };
        count("cluster.view_probe_attempts_max", 1..=100)?;
        count("cluster.repair_chunk_max", 1..=1024)?;
        let enabled = self.bool("cluster.enabled")?;
        let auth = self.replica_secrets()?;
        let tls = self.cluster_tls()?;
        if tls.is_some() && auth.is_none() {
            let reason = "replica TLS authenticates only the acceptor: it needs cluster.auth";
            return Err(Self::invalid("cluster.tls.enabled", reason));
        }
        Ok(ClusterSettings {
            enabled,
            name: self.string("cluster.name")?,
            nodes: self.cluster_nodes()?,
            timeouts,
            auth,
            tls,
        })
    }

    /// `[cluster.tls]`: without `self_signed`, every file must be named.
    fn cluster_tls(&self) -> Result<Option<ClusterTls>, ConfigError> {
        let enabled = self.bool("cluster.tls.enabled")?;
        let self_signed = self.bool("cluster.tls.self_signed")?;
        let file = |key: &str| -> Result<PathBuf, ConfigError> {
            let path = format!("cluster.tls.{key}");
            let file = self.string(&path)?;
            if enabled && !self_signed && file.is_empty() {
                let reason = "needed unless cluster.tls.self_signed is true";
                return Err(Self::invalid(&path, reason));
            }
            Ok(PathBuf::from(file))
        };
        let (cert_file, key_file, ca_file) =
            (file("cert_file")?, file("key_file")?, file("ca_file")?);
        Ok(enabled.then_some(ClusterTls {
            self_signed,
            cert_file,
            key_file,
            ca_file,
        }))
    }

    fn consensus_timeouts(&self) -> Result<ConsensusTimeouts, ConfigError> {
        let positive = |key: &str| {
            let path = format!("cluster.{key}");
            let duration = self.duration(&path)?;
            if duration.is_zero() {
                return Err(Self::invalid(&path, "must be above zero"));
            }
            Ok(duration)
        };
        let timeouts = ConsensusTimeouts {
            heartbeat_timeout: positive("heartbeat_timeout")?,
            commit_broadcast_interval: positive("commit_broadcast_interval")?,
            prepare_retransmit_interval: positive("prepare_retransmit_interval")?,
            view_change_retransmit_interval: positive("view_change_retransmit_interval")?,
            view_change_status_timeout: positive("view_change_status_timeout")?,
            request_start_view_retransmit_interval: positive(
                "request_start_view_retransmit_interval",
            )?,
            repair_retry_interval: positive("repair_retry_interval")?,
        };
        let heartbeat = timeouts.heartbeat_timeout;
        if heartbeat < Duration::from_secs(2) || heartbeat < timeouts.commit_broadcast_interval * 4
        {
            let reason = "must be at least 2s and at least 4 x commit_broadcast_interval, so \
                          one late broadcast never starts an election";
            return Err(Self::invalid("cluster.heartbeat_timeout", reason));
        }
        if timeouts.view_change_status_timeout < timeouts.view_change_retransmit_interval * 4 {
            let reason = "must be at least 4 x view_change_retransmit_interval";
            return Err(Self::invalid("cluster.view_change_status_timeout", reason));
        }
        Ok(timeouts)
    }

    fn replica_secrets(&self) -> Result<Option<ReplicaSecrets>, ConfigError> {
        let secret = |key: &str| -> Result<Option<Vec<u8>>, ConfigError> {
            let path = format!("cluster.auth.{key}");
            let text = self.string(&path)?;
            if text.is_empty() {
                return Ok(None);
            }
            if text.len() < SECRET_MIN_BYTES {
                let reason = format!("must be at least {SECRET_MIN_BYTES} bytes");
                return Err(Self::invalid(&path, reason));
            }
            Ok(Some(text.into_bytes()))
        };
        let current = secret("shared_secret")?;
        let previous = secret("previous_shared_secret")?;
        if !self.bool("cluster.auth.enabled")? {
            return Ok(None);
        }
        let Some(current) = current else {
            let reason = "cluster.auth.enabled needs a shared secret (or \
                          IGGY_CLUSTER_AUTH_SHARED_SECRET)";
            return Err(Self::invalid("cluster.auth.shared_secret", reason));
        };
        Ok(Some(ReplicaSecrets { current, previous }))
    }

    fn cluster_nodes(&self) -> Result<Vec<ClusterNode>, ConfigError> {
        let path = "cluster.nodes";
        let Some(entries) = self.value(path)?.as_array() else {
            return Err(Self::invalid(path, "expected [[cluster.nodes]] tables"));
        };
        if entries.is_empty() || entries.len() > NODES_MAX {
            let reason = format!("the roster needs 1 to {NODES_MAX} nodes");
            return Err(Self::invalid(path, reason));
        }
        let mut nodes = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let node = cluster_node(entry)
                .map_err(|reason| Self::invalid(&format!("{path}[{index}]"), reason))?;
            if nodes
                .iter()
                .any(|other: &ClusterNode| other.name == node.name)
            {
                let reason = format!("two nodes are named `{}`", node.name);
                return Err(Self::invalid(path, reason));
            }
            nodes.push(node);
        }
        for id in 0..nodes.len() {
            if !nodes.iter().any(|node| usize::from(node.replica_id) == id) {
                let reason = format!(
                    "replica ids must be 0 .. {} once each; {id} is missing",
                    nodes.len() - 1
                );
                return Err(Self::invalid(path, reason));
            }
        }
        Ok(nodes)
    }
}

/// One roster entry: `name`, `ip`, `replica_id`, `ports`, and Iggy's optional
/// `advertised_address` (accepted; clients are told `ip`).
fn cluster_node(entry: &Value) -> Result<ClusterNode, String> {
    let table = entry.as_table().ok_or("expected a table")?;
    for key in table.keys() {
        let known = [
            "name",
            "ip",
            "replica_id",
            "ports",
            "advertised_address",
            "advertised_addresses",
        ];
        if !known.contains(&key.as_str()) {
            return Err(format!("unknown key `{key}`"));
        }
    }
    let text = |key: &str| {
        table
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| format!("`{key}` must be a non-empty string"))
    };
    let replica_id = table
        .get("replica_id")
        .and_then(Value::as_integer)
        .and_then(|id| u8::try_from(id).ok())
        .filter(|id| usize::from(*id) < NODES_MAX)
        .ok_or_else(|| format!("`replica_id` must be 0 to {}", NODES_MAX - 1))?;
    let mut ports = NodePorts::default();
    if let Some(value) = table.get("ports") {
        let table = value.as_table().ok_or("`ports` must be a table")?;
        for (key, value) in table {
            let port = value
                .as_integer()
                .and_then(|port| u16::try_from(port).ok())
                .filter(|port| *port != 0)
                .ok_or_else(|| format!("`ports.{key}` must be 1 to 65535"))?;
            let slot = match key.as_str() {
                "tcp" => &mut ports.tcp,
                "quic" => &mut ports.quic,
                "http" => &mut ports.http,
                "websocket" => &mut ports.websocket,
                "tcp_replica" => &mut ports.tcp_replica,
                other => return Err(format!("unknown port `{other}`")),
            };
            *slot = Some(port);
        }
    }
    Ok(ClusterNode {
        name: text("name")?,
        ip: text("ip")?,
        replica_id,
        ports,
    })
}

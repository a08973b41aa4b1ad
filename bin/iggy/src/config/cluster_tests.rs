//! `[cluster]`: Iggy's keys and defaults, the roster, its rules, and secrets kept out of the
//! effective configuration file.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Config, ConfigError};

const BUILT: &[&str] = &["tcp", "quic", "websocket", "http"];

const ROSTER: &str = r#"
[[cluster.nodes]]
name = "a"
ip = "127.0.0.1"
replica_id = 0
ports = { tcp = 8090, tcp_replica = 9090 }
[[cluster.nodes]]
name = "b"
ip = "127.0.0.1"
replica_id = 1
ports = { tcp = 8091, tcp_replica = 9091 }
[[cluster.nodes]]
name = "c"
ip = "127.0.0.1"
replica_id = 2
ports = { tcp = 8092, tcp_replica = 9092 }
"#;

fn load(text: &str) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.toml");
    std::fs::write(&path, text).unwrap();
    Config::load(Some(&path), &BTreeMap::new(), BUILT)
}

fn cluster(extra: &str) -> String {
    let transports = "[quic]\nenabled = false\n[http]\nenabled = false\n\
                      [websocket]\nenabled = false\n";
    format!("{transports}[cluster]\nenabled = true\n{extra}\n{ROSTER}")
}

fn error_of(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

#[test]
fn defaults_are_iggys_and_a_one_node_roster() {
    let config = Config::load(None, &BTreeMap::new(), BUILT).unwrap();
    let cluster = &config.cluster;
    assert!(!cluster.enabled);
    assert_eq!(cluster.name, "iggy-cluster");
    assert_eq!(cluster.timeouts.heartbeat_timeout, Duration::from_secs(5));
    assert_eq!(
        cluster.timeouts.commit_broadcast_interval,
        Duration::from_millis(500)
    );
    assert_eq!(cluster.nodes.len(), 1);
    assert_eq!(cluster.nodes[0].ports.tcp_replica, Some(9090));
    assert!(cluster.auth.is_none() && cluster.tls.is_none());
    let roster = config.roster(0, [8090, 0, 0, 0]);
    assert_eq!(roster.nodes.len(), 1);
    assert_eq!(roster.nodes[0].name, "iggy-node-1");
}

#[test]
fn a_roster_gives_every_node_and_this_nodes_ports() {
    let mut config = load(&cluster("")).unwrap();
    config.cluster.check_for(1, &[("tcp", true)]).unwrap();
    config.use_roster_ports(1);
    assert_eq!(config.tcp_address.port(), 8091);
    let roster = config.roster(1, [8091, 0, 0, 0]);
    assert_eq!(roster.replica_id, 1);
    let ports: Vec<u16> = roster.nodes.iter().map(|node| node.tcp_port).collect();
    assert_eq!(ports, [8090, 8091, 8092]);
    assert!(roster.nodes.iter().all(|node| node.quic_port == 0));
}

#[test]
fn the_roster_rules_are_checked() {
    let error = config_error_for(&cluster(""), 3);
    assert!(error.contains("--replica-id 3"), "{error}");
    let duplicate = cluster("").replace("replica_id = 2", "replica_id = 1");
    assert!(error_of(&duplicate).contains("2 is missing"));
    let renamed = cluster("").replace("name = \"c\"", "name = \"a\"");
    assert!(error_of(&renamed).contains("two nodes are named"));
    let no_replica_port = cluster("").replace(", tcp_replica = 9092", "");
    let error = config_error_for(&no_replica_port, 0);
    assert!(error.contains("ports.tcp_replica"), "{error}");
    let quic_on = cluster("").replace("[quic]\nenabled = false\n", "");
    let config = load(&quic_on).unwrap();
    let transports = [("tcp", true), ("quic", config.quic.enabled)];
    let error = config
        .cluster
        .check_for(0, &transports)
        .unwrap_err()
        .to_string();
    assert!(error.contains("ports.quic"), "{error}");
    let unknown = cluster("").replace(
        "ip = \"127.0.0.1\"\nreplica_id = 0",
        "ip = \"127.0.0.1\"\nreplica_id = 0\nzone = 1",
    );
    assert!(error_of(&unknown).contains("unknown key `zone`"));
    // Two nodes on one address: the second would dial itself as its peer.
    let same_replica_port = cluster("").replace("tcp_replica = 9091", "tcp_replica = 9090");
    let error = config_error_for(&same_replica_port, 0);
    assert!(error.contains("both use tcp 127.0.0.1:9090"), "{error}");
    let same_client_port = cluster("").replace("tcp = 8091,", "tcp = 9092,");
    let error = config_error_for(&same_client_port, 0);
    assert!(error.contains("9092"), "{error}");
}

fn config_error_for(text: &str, replica_id: u8) -> String {
    let config = load(text).unwrap();
    config
        .cluster
        .check_for(replica_id, &[("tcp", true)])
        .unwrap_err()
        .to_string()
}

#[test]
fn the_timeout_rules_are_iggys() {
    let short = cluster("heartbeat_timeout = \"1s\"");
    assert!(error_of(&short).contains("cluster.heartbeat_timeout"));
    let slow_broadcast =
        cluster("heartbeat_timeout = \"2s\"\ncommit_broadcast_interval = \"600ms\"");
    assert!(error_of(&slow_broadcast).contains("cluster.heartbeat_timeout"));
    let hasty = cluster("view_change_status_timeout = \"1s\"");
    assert!(error_of(&hasty).contains("cluster.view_change_status_timeout"));
    let zero = cluster("prepare_retransmit_interval = \"0s\"");
    assert!(error_of(&zero).contains("cluster.prepare_retransmit_interval"));
    let probes = cluster("view_probe_attempts_max = 0");
    assert!(error_of(&probes).contains("cluster.view_probe_attempts_max"));
}

#[test]
fn auth_needs_a_long_secret_and_tls_needs_auth() {
    let missing = cluster("[cluster.auth]\nenabled = true");
    assert!(error_of(&missing).contains("cluster.auth.shared_secret"));
    let short = cluster("[cluster.auth]\nenabled = true\nshared_secret = \"short\"");
    assert!(error_of(&short).contains("at least 32 bytes"));
    let tls = cluster("[cluster.tls]\nenabled = true\nself_signed = true");
    assert!(error_of(&tls).contains("cluster.tls.enabled"));
    let no_files = cluster("[cluster.tls]\nenabled = true");
    assert!(error_of(&no_files).contains("cluster.tls.cert_file"));
    let secret = "s3cret-s3cret-s3cret-s3cret-s3cret";
    let good = cluster(&format!(
        "[cluster.auth]\nenabled = true\nshared_secret = \"{secret}\""
    ));
    let config = load(&good).unwrap();
    let auth = config.cluster.auth.as_ref().unwrap();
    assert_eq!(auth.current, secret.as_bytes());
    assert!(!format!("{auth:?}").contains(secret));
    let written = config.effective_toml();
    assert!(!written.contains(secret), "{written}");
    assert!(written.contains("<redacted>"));
}

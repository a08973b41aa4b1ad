//! Cluster mode (feature `vsr`, `[cluster] enabled = true`): this node is replica
//! `--replica-id` of the roster. Its state machine is the server itself: metadata and
//! message appends are replicated by `crates/vsr` before they apply (`shard::cluster`), and
//! its durable state is the replica's log in `<system.path>/cluster/`.
//!
//! At start the log is the whole truth: the rest of the data directory (metadata journal,
//! partitions) is rebuilt from it, so a node restarted after any crash replays the committed
//! ops into an empty state and ends where the cluster is. (Checkpoints, which would bound
//! the log and the replay, are not built yet; see features.md.) A log damaged inside, not
//! merely torn at its end, is not trusted: the node recovers it from the others
//! ([`recover_from_damage`]).
//!
//! A node whose `cluster/` directory is missing formats a new replica — right for a new
//! cluster, wrong for a node that lost its disk: that one is started with `--recover`, so it
//! takes no part in any decision until the others have given it the cluster's log.

mod clock;
mod driver;
mod wal;

use std::cell::Cell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossfire::{AsyncRx, mpsc};
use shard::Server;
use shard::cluster::ClusterStatus;
use shard::server::Replication;
use transport::replica::handshake::Secrets;
use transport::replica::{BusConfig, Outbound, cluster_id};
use vsr::{Message, Outbox, Replica};

use crate::config::ClusterSettings;
use driver::Driver;
pub(crate) use driver::RootSeed;

/// Submissions waiting for the driver; more are refused `58` at once.
const SUBMISSIONS_MAX: usize = vsr::REQUEST_QUEUE_MAX;
/// Replica messages read from the bus and not yet handled; more are dropped.
const MESSAGES_MAX: usize = 4096;
/// Bytes of the replica messages read from the bus and not yet handled. Past it a prepare
/// is dropped (the protocol retransmits), unless none waits: a driver held up by its disk
/// otherwise let a backup buffer every prepare the primary sent it (+320 MB in 30 s of a
/// frozen disk, in a probe), bounded only by the count.
const QUEUED_BYTES_MAX: usize = 64 << 20;

/// The replica messages waiting for the driver, each with its frame's size, and the bytes
/// they hold together.
pub(crate) struct Inbound {
    pub(crate) messages: AsyncRx<mpsc::Array<(Message, usize)>>,
    pub(crate) queued_bytes: Rc<Cell<usize>>,
}

impl Inbound {
    /// The next message; `None` once the bus is gone.
    pub(crate) async fn next(&self) -> Option<Message> {
        let (message, bytes) = self.messages.recv().await.ok()?;
        let queued = self.queued_bytes.get().saturating_sub(bytes);
        self.queued_bytes.set(queued);
        Some(message)
    }
}

/// Whether a message of `bytes` may join the `queued` bytes waiting: always into an empty
/// queue, so one larger than the bound still gets through.
fn admits(queued: usize, bytes: usize) -> bool {
    queued == 0 || queued.saturating_add(bytes) <= QUEUED_BYTES_MAX
}

/// Cluster mode could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClusterError {
    #[error("open the replica log in {path}")]
    Log {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the replica log in {path} belongs to replica {found} of another cluster or node")]
    Foreign { path: std::path::PathBuf, found: u8 },
    #[error("the replica address {address} of node {replica}")]
    Address { replica: u8, address: String },
    #[error("bind the replica port {address}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// What cluster mode needs from the configuration and the command line.
pub(crate) struct ClusterStart<'a> {
    pub(crate) settings: &'a ClusterSettings,
    pub(crate) replica_id: u8,
    pub(crate) recover: bool,
    pub(crate) system_path: &'a Path,
    /// The largest client frame: a replicated op's body is one request and a little more.
    pub(crate) frame_size_max: usize,
    pub(crate) handshake_timeout: Duration,
    /// `[cluster.tls]`, made ready by the composition (feature `tls`).
    pub(crate) tls: Option<Rc<transport::replica::ReplicaTls>>,
    pub(crate) root: RootSeed,
}

/// The least size a log record may declare and still be read as one at start, whatever the
/// frame limit is now.
const RECORD_BOUND_FLOOR: u64 = 256 << 20;

/// The largest log record read as one at start: an op of the largest client frame, but at
/// least [`RECORD_BOUND_FLOOR`]. A record this node wrote under a larger frame limit than
/// today's is still one; the bound only keeps a flipped length field from reading a whole
/// log into memory.
fn record_bound(client_frame_size_max: usize) -> u64 {
    u64::try_from(client_frame_size_max.saturating_add(OP_OVERHEAD))
        .unwrap_or(u64::MAX)
        .saturating_add(vsr::journal::RECORD_FIXED as u64)
        .max(RECORD_BOUND_FLOOR)
}

/// Room in a replicated op's body beyond the client request it carries.
const OP_OVERHEAD: usize = 64 << 10;

/// The largest replica frame: a view change or recovery answer carries at most a pipeline
/// of ops (`vsr::Suffix`), each at most one client frame and its wrapping.
fn replica_frame_size_max(client_frame_size_max: usize) -> usize {
    let op = client_frame_size_max.saturating_add(OP_OVERHEAD);
    let frame = vsr::PIPELINE_MAX
        .saturating_mul(op)
        .saturating_add(OP_OVERHEAD);
    // The frame's size field is a u32.
    frame.min(usize::try_from(u32::MAX).unwrap_or(usize::MAX))
}

/// The consensus tick (Iggy's): every timeout becomes a whole number of these.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// Whole ticks of `duration`, rounded down, at least one.
pub(crate) fn ticks(duration: Duration) -> u64 {
    let ticks = duration.as_millis() / TICK.as_millis();
    u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
}

/// The replica state machine's timeouts from `[cluster]`. One retransmit interval serves
/// prepares, view-change messages and repair here, so it is the shortest of Iggy's three.
fn replica_config(settings: &ClusterSettings) -> vsr::Config {
    let timeouts = &settings.timeouts;
    let count = u8::try_from(settings.nodes.len()).unwrap_or(u8::MAX);
    let mut config = vsr::Config::new(count);
    config.commit_interval = ticks(timeouts.commit_broadcast_interval);
    config.heartbeat_timeout = ticks(timeouts.heartbeat_timeout);
    config.view_change_timeout = ticks(timeouts.view_change_status_timeout);
    config.retransmit_interval = ticks(
        timeouts
            .prepare_retransmit_interval
            .min(timeouts.view_change_retransmit_interval)
            .min(timeouts.repair_retry_interval)
            .min(timeouts.request_start_view_retransmit_interval),
    );
    config
}

fn replica_address(settings: &ClusterSettings, id: u8) -> Result<SocketAddr, ClusterError> {
    let node = settings.node(id).ok_or(ClusterError::Address {
        replica: id,
        address: "none".into(),
    })?;
    let ip: IpAddr = node.ip.parse().map_err(|_not_ip| ClusterError::Address {
        replica: id,
        address: node.ip.clone(),
    })?;
    let port = node.ports.tcp_replica.unwrap_or(0);
    Ok(SocketAddr::new(ip, port))
}

/// Starts this node's replica on the current runtime: opens its log, binds the replica
/// port, dials the peers and turns replication on in `server` (an empty server: the log
/// rebuilds it).
pub(crate) async fn start(
    server: &Rc<Server>,
    start: ClusterStart<'_>,
) -> Result<(), ClusterError> {
    let settings = start.settings;
    let id = start.replica_id;
    let cluster = cluster_id(&settings.name);
    server.rebuilt_from_log();
    let (replica, wal, out) = open_replica(server, &start, cluster).await?;
    let restored = replica.applied();
    let mut peers = Vec::new();
    for node in settings.nodes.iter().filter(|node| node.replica_id != id) {
        peers.push((node.replica_id, replica_address(settings, node.replica_id)?));
    }
    let bus = Rc::new(BusConfig {
        replica: id,
        cluster,
        peers,
        secrets: settings
            .auth
            .as_ref()
            .map(|auth| Secrets::new(&auth.current, auth.previous.as_deref())),
        frame_size_max: replica_frame_size_max(start.frame_size_max),
        tls: start.tls.clone(),
        handshake_timeout: start.handshake_timeout,
        at_rest: server.at_rest_fingerprint(),
    });
    let (outbound, inbound) = start_bus(settings, &bus).await?;
    let status = Arc::new(ClusterStatus::default());
    let (submissions_tx, submissions) = mpsc::bounded_async(SUBMISSIONS_MAX);
    server.set_replication(Replication::new(id, Arc::clone(&status), submissions_tx));
    let mut driver = Driver {
        replica,
        wal,
        server: Rc::clone(server),
        outbound,
        cluster,
        status,
        client: u128::from(random_u64()) << 64 | u128::from(random_u64()),
        next_request: 1,
        pending: HashMap::new(),
        clock: clock::ReplicaClock::new(Instant::now()),
        root: Some(start.root),
        root_asked: Rc::new(Cell::new(false)),
        published: None,
        restored,
    };
    // Published before any request is served, so none reads the status's defaults.
    driver.publish();
    compio::runtime::spawn(abort_on_panic(driver.run(inbound, submissions, out))).detach();
    Ok(())
}

/// Opens `cluster/` and the replica on it: resumed from its log, recovering from its peers
/// (a lost disk: `--recover`, or a recovery a crash interrupted), or formatted (a new node).
async fn open_replica(
    server: &Server,
    start: &ClusterStart<'_>,
    cluster: u128,
) -> Result<(Replica, wal::Wal, Outbox), ClusterError> {
    let id = start.replica_id;
    let directory = start.system_path.join("cluster");
    let log_error = |source| ClusterError::Log {
        path: directory.clone(),
        source,
    };
    let (superblock, recover) = checked_superblock(start, &directory, cluster)?;
    let config = replica_config(start.settings);
    let mut out = Outbox::new();
    let mut reader = wal::LogReader::open(&directory).map_err(log_error)?;
    let replica = match (&superblock, recover) {
        (Some(superblock), false) if !superblock.recovering => {
            // The ops the log proves committed are applied as they are read; only the
            // last pipeline of them stays in memory for the replica.
            let mut restore = vsr::Restore::default();
            while let Some(entry) = reader.next().map_err(log_error)? {
                if let Some(committed) = restore.push(entry)
                    && let Err(fault) = driver::apply_committed(server, &committed).await
                {
                    driver::stop_on_fault(&fault);
                }
            }
            let durable = restore.finish(superblock.view, superblock.log_view);
            let (view, applied, ops) = (superblock.view, durable.base, durable.log.len());
            log::info!(
                "cluster: replica {id} opens its log (view {view}): applied ops 1..={applied} \
                 as read, {ops} ops after them"
            );
            Replica::open(config, id, durable, 0, &mut out)
        }
        (Some(_), _) | (None, true) => {
            log::warn!("cluster: replica {id} recovers its state from the other replicas");
            Replica::recover(config, id, 0, random_u64(), &mut out)
        }
        (None, false) => {
            log::info!("cluster: replica {id} formats a new log");
            let superblock = vsr::journal::Superblock {
                cluster,
                replica: id,
                view: 0,
                log_view: 0,
                recovering: false,
            };
            wal::persist_superblock(&directory, &superblock).map_err(log_error)?;
            Replica::format(config, id)
        }
    };
    let wal = reader.finish().await.map_err(log_error)?;
    Ok((replica, wal, out))
}

/// The superblock of `directory` after the start-up checks, and whether the replica is to
/// recover: a damaged superblock, one missing beside a log, or a log damaged inside makes
/// it a recovering replica ([`recover_from_damage`]); `--recover` on intact data is
/// ignored.
fn checked_superblock(
    start: &ClusterStart<'_>,
    directory: &Path,
    cluster: u128,
) -> Result<(Option<vsr::journal::Superblock>, bool), ClusterError> {
    let id = start.replica_id;
    let log_error = |source| ClusterError::Log {
        path: directory.to_owned(),
        source,
    };
    let mut superblock = match wal::superblock(directory) {
        Ok(superblock) => superblock,
        Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
            let why = format!("its superblock is damaged ({error})");
            Some(recover_from_damage(directory, None, cluster, id, &why)?)
        }
        Err(error) => return Err(log_error(error)),
    };
    if let Some(superblock) = &superblock
        && (superblock.cluster != cluster || superblock.replica != id)
    {
        return Err(ClusterError::Foreign {
            path: directory.to_owned(),
            found: superblock.replica,
        });
    }
    if superblock.is_none() && wal::log_size(directory).map_err(log_error)? > 0 {
        // The superblock is written before the first entry: a log without one lost it,
        // and with it the views this replica voted in.
        let why = "its superblock is missing beside its log";
        superblock = Some(recover_from_damage(directory, None, cluster, id, why)?);
    }
    let record_max = record_bound(start.frame_size_max);
    if let Some(damage) = wal::find_damage(directory, record_max).map_err(log_error)? {
        let why = format!(
            "its log is damaged at op {} (byte {}) with intact records after it",
            damage.op, damage.offset
        );
        superblock = Some(recover_from_damage(
            directory, superblock, cluster, id, &why,
        )?);
    }
    let mut recover = start.recover;
    if recover
        && superblock.is_some_and(|superblock| !superblock.recovering)
        && wal::log_size(directory).map_err(log_error)? > 0
    {
        // `--recover` is for a node that lost its data: one whose log and superblock are
        // intact opens them (the checks above found no damage), or two nodes restarted
        // with it would wait for each other's recovery forever.
        log::warn!(
            "cluster: replica {id}: --recover ignored: {} holds an intact log and superblock \
             (remove that directory first to rebuild this node from the others)",
            directory.display()
        );
        recover = false;
    }
    Ok((superblock, recover))
}

/// A log damaged inside (bytes flipped or lost before an intact later record), or a
/// superblock damaged or lost beside a log: entries this replica acknowledged, or the views
/// it voted in, may be gone, and a replica that votes without them can lose a committed op
/// in a view change. So it becomes a recovering replica, as one whose disk was lost: the
/// superblock is marked first (a crash from here on recovers again), then the log is
/// emptied and rebuilt from the others, and the node votes only once it has caught up.
fn recover_from_damage(
    directory: &Path,
    superblock: Option<vsr::journal::Superblock>,
    cluster: u128,
    id: u8,
    why: &str,
) -> Result<vsr::journal::Superblock, ClusterError> {
    let log_error = |source| ClusterError::Log {
        path: directory.to_owned(),
        source,
    };
    log::error!("cluster: replica {id}: {why}; it recovers its log from the other replicas");
    let marked = vsr::journal::Superblock {
        recovering: true,
        ..superblock.unwrap_or(vsr::journal::Superblock {
            cluster,
            replica: id,
            view: 0,
            log_view: 0,
            recovering: true,
        })
    };
    wal::persist_superblock(directory, &marked).map_err(log_error)?;
    wal::discard_log(directory).map_err(log_error)?;
    Ok(marked)
}

/// Binds the replica port, accepts the peers' connections (their frames decoded into the
/// returned queue) and dials every peer.
async fn start_bus(
    settings: &ClusterSettings,
    bus: &Rc<BusConfig>,
) -> Result<(Outbound, Inbound), ClusterError> {
    let address = replica_address(settings, bus.replica)?;
    let listener = transport::listen::bind(address)
        .await
        .map_err(|source| ClusterError::Bind { address, source })?;
    log::info!(
        "cluster: replica {} listens for replicas on {address}",
        bus.replica
    );
    let (messages_tx, messages) = mpsc::bounded_async(MESSAGES_MAX);
    let queued_bytes = Rc::new(Cell::new(0_usize));
    let queued = Rc::clone(&queued_bytes);
    let cluster = bus.cluster;
    let deliver = Rc::new(
        move |from: u8, frame: Vec<u8>| match vsr::wire::decode(&frame) {
            Ok((message, frame_cluster)) if frame_cluster == cluster => {
                if message.sender().is_some_and(|sender| sender != from) {
                    return false;
                }
                // A full queue drops the message: the protocol retransmits. The byte bound
                // is for prepares, the bulk of the traffic; a view change's messages, which
                // may be as large, are never held back by it.
                let bytes = frame.len();
                let bulk = matches!(message, Message::Prepare { .. });
                let admitted = !bulk || admits(queued.get(), bytes);
                if admitted && messages_tx.try_send((message, bytes)).is_ok() {
                    queued.set(queued.get().saturating_add(bytes));
                }
                true
            }
            Ok(_) | Err(_) => false,
        },
    );
    compio::runtime::spawn(transport::replica::accept(
        listener,
        Rc::clone(bus),
        deliver,
    ))
    .detach();
    let inbound = Inbound {
        messages,
        queued_bytes,
    };
    Ok((transport::replica::dial(bus), inbound))
}

/// Runs the replica driver, ending the process if it panics. The runtime catches a spawned
/// task's panic and runs on without the task: a node whose driver died (an assertion of the
/// replica state machine) went on accepting connections and answering pings while every
/// login and replicated request hung. Aborting lets a supervisor restart the node, which
/// recovers from its log.
async fn abort_on_panic<F: Future>(future: F) -> F::Output {
    use futures_util::FutureExt;
    let Ok(output) = std::panic::AssertUnwindSafe(future).catch_unwind().await else {
        log::error!("cluster: the replica driver panicked; aborting so the node restarts");
        std::process::abort()
    };
    output
}

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // A failing system RNG leaves zeros: the nonce and client id then only lose uniqueness
    // across restarts, which the replica tolerates (a stale answer is ignored by view).
    let _ = getrandom::fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ticks;

    #[test]
    fn the_inbound_queue_takes_messages_up_to_its_bytes_and_always_one() {
        use super::{QUEUED_BYTES_MAX, admits};
        assert!(admits(0, QUEUED_BYTES_MAX * 2), "one larger than the bound");
        assert!(admits(1, QUEUED_BYTES_MAX - 1));
        assert!(!admits(1, QUEUED_BYTES_MAX));
        assert!(!admits(QUEUED_BYTES_MAX, 1));
    }

    #[test]
    fn durations_round_down_to_whole_ticks_of_at_least_one() {
        assert_eq!(ticks(Duration::from_millis(5)), 1);
        assert_eq!(ticks(Duration::from_millis(259)), 25);
        assert_eq!(ticks(Duration::from_secs(5)), 500);
    }
}

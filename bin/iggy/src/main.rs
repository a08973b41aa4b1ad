//! `iggy`: the server binary. It reads the flags and configuration, prepares the data
//! directory, creates the root user on first boot, binds the listeners and serves until
//! SIGINT or SIGTERM with one shard per configured core: the leader (shard 0) on the main
//! thread, which accepts connections and hands them round-robin to every shard, and the
//! others on their own threads ([`shards`]).

mod at_rest;
mod check;
mod cli;
mod compose;
mod config;
mod cores;
mod data_lock;
mod logger;
mod process;
mod rotate;
mod shard_handler;
mod shards;
mod telemetry;

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{Either, select};
use shard::Server;
use shard::node::Node;
use shard::server::ServerInfo;

use crate::cli::Cli;
use crate::config::{Config, ConfigError};

/// Linux's SIGTERM number.
const SIGTERM: i32 = 15;
/// Bounds of the period of the shard's periodic work (half the heartbeat interval).
const TICK_MIN: Duration = Duration::from_millis(100);
const TICK_MAX: Duration = Duration::from_secs(1);
const PARTITION_TICK_MIN: Duration = Duration::from_millis(10);
const PARTITION_TICK_MAX: Duration = Duration::from_secs(1);
/// The shortest cleaner interval: each pass lists every retained topic's segments.
const CLEANER_INTERVAL_MIN: Duration = Duration::from_millis(100);
/// Characters of a generated root password.
const ROOT_PASSWORD_LENGTH: usize = 24;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Cli(#[from] cli::CliError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{action} {path}")]
    DataDirectory {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("start the compio runtime")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Lock(#[from] data_lock::LockError),
    #[error("the file backend (system.io_backend)")]
    Backend(#[source] shard::disk::BackendError),
    #[error(transparent)]
    Bind(#[from] compose::BindError),
    #[error("generate the root password")]
    Random(#[source] getrandom::Error),
    #[error(transparent)]
    Hash(#[from] shard::metadata::auth::CredentialError),
    #[error("open the server state")]
    Open(#[from] shard::server::OpenError),
    #[error("commit the root user")]
    Root(#[source] shard::refusal::Refusal),
    #[error("open the log file in {0}")]
    LogFile(PathBuf, #[source] std::io::Error),
    #[error("telemetry: {0}")]
    Telemetry(String),
    #[error("encryption at rest")]
    AtRest(#[from] at_rest::AtRestError),
    #[error("choose the shards' cores (system.sharding.cpu_allocation)")]
    Cores(#[source] cores::CoreError),
    #[error(transparent)]
    Shard(#[from] shards::ShardStartError),
    #[error(
        "{0} holds a single-node server's data: cluster mode rebuilds its state from the \
         replica log and would discard it (use another system.path)"
    )]
    SingleNodeData(PathBuf),
}

fn main() -> ExitCode {
    let mut arguments = std::env::args().skip(1).peekable();
    if arguments.peek().is_some_and(|first| first == "bench") {
        return compose::bench(arguments.skip(1).collect());
    }
    if arguments.peek().is_some_and(|first| first == "check") {
        return check::run(&arguments.skip(1).collect::<Vec<_>>());
    }
    if arguments.peek().is_some_and(|first| first == "encryption") {
        return rotate::run(&arguments.skip(1).collect::<Vec<_>>());
    }
    logger::init();
    if let Some(tail) = compose::log_tail() {
        logger::tail_to(tail);
    }
    match start() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => failure(&error),
    }
}

/// Prints `error` and its causes, one per line, and gives the failing exit code.
pub(crate) fn failure(error: &dyn Error) -> ExitCode {
    eprintln!("error: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        eprintln!("  caused by: {cause}");
        source = cause.source();
    }
    ExitCode::FAILURE
}

fn start() -> Result<(), StartError> {
    let cli = Cli::parse(std::env::args().skip(1))?;
    if cli.help {
        println!("{}", cli::USAGE);
        return Ok(());
    }
    if cli.version {
        println!(
            "iggy {} (features: {})",
            env!("CARGO_PKG_VERSION"),
            compose::features().join(", ")
        );
        return Ok(());
    }
    let environment = iggy_environment(std::env::vars_os())?;
    let config_path = cli
        .config
        .clone()
        .or_else(|| environment.get("IGGY_CONFIG_PATH").map(PathBuf::from));
    let mut config = Config::load(config_path.as_deref(), &environment, &compose::transports())?;
    let transports = [
        ("tcp", config.tcp_enabled),
        ("quic", config.quic.enabled),
        ("http", config.http.enabled),
        ("websocket", config.websocket.enabled),
    ];
    config.cluster.check_for(cli.replica_id, &transports)?;
    if config.cluster.enabled {
        config.use_roster_ports(cli.replica_id);
    }
    process::private_files();
    let files = process::raise_open_file_limit();
    log::info!(
        "open-file limit: {}",
        files.map_or_else(|| "unlimited".into(), |n| n.to_string())
    );
    warn_if_connections_past_files(&config, files);
    // Held until the process ends: no second server or rotation on this directory.
    let _lock = data_lock::acquire(&config.system_path)?;
    prepare_data_directory(&config, cli.fresh)?;
    let record_key = at_rest::prepare(&config)?;
    logger::configure(&config.logging)
        .map_err(|error| StartError::LogFile(config.logging.directory.clone(), error))?;
    let root = root_credentials(&cli, &environment)?;
    let mut cores = cores::shard_cores(&config.cpu_allocation).map_err(StartError::Cores)?;
    if config.cluster.enabled && cores.len() > 1 {
        // The replica driver applies every op on the leader shard, which then owns every
        // partition: one shard per node in cluster mode (features.md).
        log::info!("cluster mode: one shard (core {})", cores[0]);
        cores.truncate(1);
    }
    if config.pin_cores {
        let leader = *cores
            .first()
            .expect("shard_cores never returns an empty list");
        cores::pin_current_thread(leader).map_err(StartError::Cores)?;
    }
    let runtime = compio::runtime::Runtime::new().map_err(StartError::Runtime)?;
    runtime.block_on(run(config, (root, record_key), &cores, &cli))
}

/// The `IGGY_*` variables of `variables`. One whose value is not UTF-8 stops the start, named:
/// dropped, its key would silently keep its default (another address, another directory).
fn iggy_environment(
    variables: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut environment = BTreeMap::new();
    for (name, value) in variables {
        let Some(name) = name.to_str().filter(|name| name.starts_with("IGGY_")) else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|_not_utf8| ConfigError::Invalid {
                key: name.to_owned(),
                reason: "the value is not UTF-8".into(),
            })?;
        environment.insert(name.to_owned(), value);
    }
    Ok(environment)
}

/// `--fresh` wipes the data directory; then it and `runtime/` exist and hold the effective
/// configuration.
fn prepare_data_directory(config: &Config, fresh: bool) -> Result<(), StartError> {
    let path = &config.system_path;
    let error = |action, path: &Path| {
        let path = path.to_owned();
        move |source| StartError::DataDirectory {
            action,
            path,
            source,
        }
    };
    if fresh && path.exists() {
        // Everything but the lock this process holds.
        let entries = std::fs::read_dir(path).map_err(error("wipe", path))?;
        for entry in entries {
            let entry = entry.map_err(error("wipe", path))?;
            if entry.file_name() == data_lock::LOCK_FILE {
                continue;
            }
            let target = entry.path();
            let removed = if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                std::fs::remove_dir_all(&target)
            } else {
                std::fs::remove_file(&target)
            };
            removed.map_err(error("wipe", &target))?;
        }
        log::info!("--fresh: wiped {}", path.display());
    }
    if config.cluster.enabled {
        rebuildable_state(path)?;
    }
    let runtime = path.join("runtime");
    std::fs::create_dir_all(&runtime).map_err(error("create", &runtime))?;
    process::private_directory(path).map_err(error("make private", path))?;
    let effective = runtime.join("current_config.toml");
    std::fs::write(&effective, config.effective_toml()).map_err(error("write", &effective))?;
    Ok(())
}

/// Cluster mode rebuilds metadata and partitions from the replica log (`cluster/`) at every
/// start, so they are removed first. A directory a single-node server used (metadata but no
/// replica log) is refused rather than wiped.
fn rebuildable_state(path: &Path) -> Result<(), StartError> {
    let metadata = path.join("metadata");
    if metadata.exists() && !path.join("cluster").exists() {
        return Err(StartError::SingleNodeData(path.to_owned()));
    }
    for derived in ["metadata", "streams"] {
        let derived = path.join(derived);
        if derived.exists() {
            std::fs::remove_dir_all(&derived).map_err(|source| StartError::DataDirectory {
                action: "rebuild",
                path: derived.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

/// The root user's name and password, and whether the password was generated (and so must
/// be shown once).
struct RootCredentials {
    username: String,
    password: String,
    generated: bool,
}

fn root_credentials(
    cli: &Cli,
    environment: &BTreeMap<String, String>,
) -> Result<RootCredentials, StartError> {
    let username = environment.get("IGGY_ROOT_USERNAME");
    let password = environment.get("IGGY_ROOT_PASSWORD");
    if let (Some(username), Some(password)) = (username, password) {
        let (username, password) = (username.clone(), password.clone());
        return Ok(RootCredentials {
            username,
            password,
            generated: false,
        });
    }
    if cli.default_root_credentials {
        return Ok(RootCredentials {
            username: "iggy".into(),
            password: "iggy".into(),
            generated: false,
        });
    }
    Ok(RootCredentials {
        username: username.cloned().unwrap_or_else(|| "iggy".into()),
        password: random_password()?,
        generated: true,
    })
}

fn random_password() -> Result<String, StartError> {
    const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; ROOT_PASSWORD_LENGTH];
    getrandom::fill(&mut bytes).map_err(StartError::Random)?;
    // 256 = 4 * 62 + 8: the slight bias towards the first 8 letters costs < 0.1 bit each.
    Ok(bytes
        .iter()
        .map(|byte| char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]))
        .collect())
}

async fn run(
    config: Config,
    (root, record_key): (RootCredentials, Option<Arc<shard::at_rest::RecordKey>>),
    cores: &[usize],
    cli: &Cli,
) -> Result<(), StartError> {
    // Handlers first, so a SIGTERM during start-up is a clean stop once serving begins.
    let shutdown = compio::runtime::spawn(shutdown_signal());
    let listeners = compose::Listeners::bind(&config).await?;
    let info = server_info(&config, listeners.ports(), cli);
    let (node, inboxes) = observed_node(&config, cores.len(), record_key)?;
    let mut inboxes = inboxes.into_iter();
    let leader_inbox = inboxes.next().expect("Node::new makes at least one inbox");
    let path = config.system_path.clone();
    let backend = compose::io_backend(&config)?;
    compose::web_ui(&config)?;
    let server = open_server(&config, backend, &info, &node).await?;
    let (inbox_stop, inbox_stopped) = crossfire::oneshot::oneshot::<()>();
    let inbox_stopped = async move {
        let _ = inbox_stopped.await;
    };
    let leader_inbox =
        compio::runtime::spawn(leader_inbox.serve(Rc::clone(&server), inbox_stopped));
    let pool = config.shard_pool(cores.len())?;
    let (handoffs, handed) = listeners.handoffs(cores.len() - 1, pool);
    let mut running = Vec::with_capacity(cores.len() - 1);
    let others = inboxes.zip(handed).zip(cores.iter().skip(1)).enumerate();
    for (offset, ((inbox, handed), &core)) in others {
        let start = shards::ShardStart {
            index: offset + 1,
            core: config.pin_cores.then_some(core),
            info: info.clone(),
            metadata: shard::metadata::Metadata::clone(&server.metadata()),
            root: path.clone(),
            node: Arc::clone(&node),
            backend,
            inbox,
            handed,
        };
        running.push(shards::start(start).await?);
    }
    log::info!("{} shard(s) on core(s) {cores:?}", cores.len());
    if config.cluster.enabled {
        start_cluster(&server, &config, &root, cli).await?;
    } else {
        ensure_root_user(&server, &root).await?;
    }
    let periodic = spawn_periodic(&server, &config);
    listeners
        .serve(Rc::clone(&server), handoffs, async {
            let _ = shutdown.await;
        })
        .await;
    drop(periodic);
    for shard in &mut running {
        shard.drained().await;
    }
    for shard in running {
        shard.stop();
    }
    if let Err(error) = server.close().await {
        log::error!("closing the partitions failed: {error}");
    }
    inbox_stop.send(());
    let _ = leader_inbox.await;
    log::info!("stopped");
    Ok(())
}

/// The shards' shared state, recording metrics only when something can read them (the HTTP
/// listener's endpoint), tracing requests when `[telemetry]` is on, and sealing messages at
/// rest with `record_key`.
fn observed_node(
    config: &Config,
    shard_count: usize,
    record_key: Option<Arc<shard::at_rest::RecordKey>>,
) -> Result<(Arc<Node>, Vec<shard::node::Inbox>), StartError> {
    let (node, inboxes) = Node::new(shard_count);
    if let Some(key) = record_key {
        node.encrypt_with(key);
    }
    telemetry::start(&config.telemetry, &node).map_err(StartError::Telemetry)?;
    node.metrics()
        .set_enabled(config.http.enabled && config.http.metrics_enabled);
    Ok((node, inboxes))
}

/// The leader's periodic tasks: session liveness, partition syncs, the retention cleaner.
/// Dropping the handles stops them.
fn spawn_periodic(server: &Rc<Server>, config: &Config) -> Vec<compio::runtime::JoinHandle<()>> {
    let period = (config.heartbeat_interval / 2).clamp(TICK_MIN, TICK_MAX);
    let mut tasks = vec![
        compio::runtime::spawn(tick(Rc::clone(server), period)),
        compio::runtime::spawn(complete_handoffs(Rc::clone(server))),
        compio::runtime::spawn(tick_partitions(
            Rc::clone(server),
            partition_tick_period(config.sync_interval),
        )),
    ];
    if config.cleaner_enabled {
        let interval = config.cleaner_interval.max(CLEANER_INTERVAL_MIN);
        tasks.push(compio::runtime::spawn(clean_messages(
            Rc::clone(server),
            interval,
        )));
    }
    tasks
}

/// The leader shard's server: opened from its metadata journal, or, in cluster mode, empty
/// (the replica log rebuilds it).
async fn open_server(
    config: &Config,
    backend: shard::disk::Backend,
    info: &ServerInfo,
    node: &Arc<Node>,
) -> Result<Rc<Server>, StartError> {
    let storage = shard::disk::shard_storage(backend).map_err(StartError::Backend)?;
    let path = config.system_path.clone();
    if config.cluster.enabled {
        let empty = shard::metadata::Metadata::default();
        let sequencer = node.sequencer();
        let node = Arc::clone(node);
        return Ok(Server::for_shard_on(
            storage,
            info.clone(),
            empty,
            path,
            node,
            sequencer,
        ));
    }
    Ok(Server::open_on(storage, info.clone(), path, Arc::clone(node)).await?)
}

/// Starts the replica (cluster mode). The first primary of a new cluster creates the root
/// user with the password it generated, if it generated one, and only that node shows it:
/// the others' generated passwords are never used.
async fn start_cluster(
    server: &Rc<Server>,
    config: &Config,
    root: &RootCredentials,
    cli: &Cli,
) -> Result<(), StartError> {
    let arguments = compose::ClusterArguments {
        replica_id: cli.replica_id,
        recover: cli.recover,
        root_username: root.username.clone(),
        // Plain: `Server::ensure_root_user` seals it, on whichever node commits it.
        root_password_hash: shard::metadata::auth::hash_password(&root.password)?,
        generated_password: root.generated.then(|| root.password.clone()),
    };
    compose::start_cluster(server, config, arguments).await?;
    if root.generated {
        log::info!(
            "no root credentials given: if this node creates the root user (the first primary \
             of a cluster without users), it prints the password it generated"
        );
    }
    Ok(())
}

fn server_info(config: &Config, ports: compose::Ports, cli: &Cli) -> ServerInfo {
    let bound = [ports.tcp, ports.quic, ports.websocket, ports.http];
    ServerInfo {
        roster: config.roster(cli.replica_id, bound),
        tcp_port: ports.tcp,
        websocket_port: ports.websocket,
        http_port: ports.http,
        quic_port: ports.quic,
        started_at_us: shard::clock::system_now_us(),
        logins: shard::login_limit::LoginLimits {
            failures_free: config.login_failures_free,
            backoff_us: micros(config.login_backoff),
            backoff_max_us: micros(config.login_backoff_max),
        },
        groups: shard::data::GroupConfig {
            rebalancing_timeout_us: micros(config.rebalancing_timeout),
            // `heartbeat.enabled = false`: silent members are never evicted.
            heartbeat_interval_us: if config.heartbeat_enabled {
                micros(config.heartbeat_interval)
            } else {
                u64::MAX
            },
        },
        validate_checksum: config.validate_checksum,
        enforce_fsync: config.enforce_fsync,
        sync_interval_us: micros(config.sync_interval),
        accept_metadata_loss: cli.accept_metadata_loss,
    }
}

/// Commits the root user on first boot and shows a generated password once.
async fn ensure_root_user(server: &Server, root: &RootCredentials) -> Result<(), StartError> {
    let hash = shard::metadata::auth::hash_password(&root.password)?;
    let created = server.ensure_root_user(&root.username, hash).await;
    if created.map_err(StartError::Root)? {
        log::info!("created the root user `{}`", root.username);
        if root.generated {
            println!(
                "Root user `{}` created with password: {}",
                root.username, root.password
            );
        }
    }
    Ok(())
}

/// Drives the shard's periodic work (group heartbeats and hand-offs) every `period`.
async fn tick(server: Rc<Server>, period: Duration) {
    let mut interval = compio::time::interval(period);
    loop {
        interval.tick().await;
        server.tick(server.now_us());
    }
}

/// How often the leader looks for consumer-group hand-offs that may complete. The reference
/// server checks every 10 ms too; with only the half-heartbeat tick and the members'
/// requests, a partition moving to a new member could wait up to 2.5 s after the old
/// owner's commit caught up. A check that completes nothing publishes nothing.
const HANDOFF_CHECK: Duration = Duration::from_millis(10);

/// Completes consumer-group hand-offs as soon as they may (see [`HANDOFF_CHECK`]).
async fn complete_handoffs(server: Rc<Server>) {
    let mut interval = compio::time::interval(HANDOFF_CHECK);
    loop {
        interval.tick().await;
        server.complete_handoffs(server.now_us());
    }
}

/// Gives this shard's partitions the time every `period`, so a threshold sync that waits
/// for `[system.partition] sync_interval` starts though no append comes, and retries the
/// partitions that could not be opened.
pub(crate) async fn tick_partitions(server: Rc<Server>, period: Duration) {
    let mut interval = compio::time::interval(period);
    loop {
        interval.tick().await;
        server.tick_partitions(server.now_us());
        server.retry_unopened_partitions(server.now_us()).await;
    }
}

/// How often a shard ticks its partitions: a quarter of the sync interval, so a waiting sync
/// starts at most a quarter interval late.
pub(crate) fn partition_tick_period(sync_interval: Duration) -> Duration {
    (sync_interval / 4).clamp(PARTITION_TICK_MIN, PARTITION_TICK_MAX)
}

/// Runs the message cleaner every `interval` (`[data_maintenance.messages]`).
async fn clean_messages(server: Rc<Server>, interval: Duration) {
    let mut interval = compio::time::interval(interval);
    loop {
        interval.tick().await;
        let deleted = server.clean_messages(server.now_us()).await;
        if deleted > 0 {
            log::info!("message cleaner: deleted {deleted} segment(s)");
        }
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Completes on the first SIGINT or SIGTERM. If a handler cannot be installed the server
/// runs until it is killed, which the log says.
async fn shutdown_signal() {
    let interrupt = std::pin::pin!(compio::signal::ctrl_c());
    let terminate = std::pin::pin!(compio::signal::unix::signal(SIGTERM));
    let (result, name) = match select(interrupt, terminate).await {
        Either::Left((result, _)) => (result, "SIGINT"),
        Either::Right((result, _)) => (result, "SIGTERM"),
    };
    match result {
        Ok(()) => log::info!("{name}: shutting down"),
        Err(error) => {
            log::error!("cannot wait for {name}: {error}; stop the server with SIGKILL");
            std::future::pending::<()>().await;
        }
    }
}

/// Warns when the listeners' connection limits and the files partitions need do not fit the
/// open-file limit `files` (see `process::connections_past_limit`).
fn warn_if_connections_past_files(config: &Config, files: Option<u64>) {
    let listeners = [
        ("tcp", config.tcp_enabled, config.tcp_connections_max),
        (
            "websocket",
            config.websocket.enabled,
            config.websocket.connections_max,
        ),
        ("http", config.http.enabled, config.http.connections_max),
    ];
    if let Some(limit) = files
        && let Some(connections) = process::connections_past_limit(limit, &listeners)
    {
        log::warn!(
            "the listeners' max_connections add up to {connections}, which with the \
             descriptors partitions need does not fit the open-file limit of {limit}: at that \
             many connections, accepts and partition files fail until some close; raise the \
             hard limit (LimitNOFILE=, ulimit -Hn) or lower max_connections"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    use super::iggy_environment;
    use crate::config::ConfigError;

    /// An `IGGY_*` variable whose value is not UTF-8 stops the start, named; others are
    /// left alone whatever they hold.
    #[test]
    fn a_variable_that_is_not_utf8_is_refused_by_name() {
        let variable =
            |name: &str, value: &[u8]| (OsString::from(name), OsString::from_vec(value.to_vec()));
        let fine = [
            variable("IGGY_TCP_ADDRESS", b"127.0.0.1:9"),
            variable("OTHER", b"\xff"),
        ];
        let environment = iggy_environment(fine.into_iter()).unwrap();
        assert_eq!(environment.len(), 1);
        let bad = [variable("IGGY_SYSTEM_PATH", b"/tmp/data\xe9")];
        match iggy_environment(bad.into_iter()) {
            Err(ConfigError::Invalid { key, .. }) => assert_eq!(key, "IGGY_SYSTEM_PATH"),
            other => panic!("expected the variable refused, got {other:?}"),
        }
    }
}

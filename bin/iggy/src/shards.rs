//! The shards other than the leader: one OS thread each, pinned to its core when
//! `system.sharding.pin_cores` is set, running a compio runtime with its own [`Server`]
//! (a metadata replica and the partitions it owns), its inbox and the connections the
//! leader hands it.
//!
//! Life cycle, driven by the leader: start (open partitions, then report ready), serve,
//! drain (the leader stopped accepting: finish in-flight requests, report drained), stop
//! (close partitions). Inboxes keep running until the stop, so requests forwarded to the
//! leader and commits it replicates complete during the drain.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossfire::oneshot::{RxOneshot, TxOneshot, oneshot};
use shard::Server;
use shard::data::DataError;
use shard::metadata::Metadata;
use shard::node::{Inbox, Node};
use shard::server::ServerInfo;

use crate::compose::Handed;
use crate::cores::{self, CoreError};

/// A shard other than the leader could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ShardStartError {
    #[error("shard {shard}: start its thread")]
    Thread {
        shard: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("shard {shard}: pin to core {core}")]
    Pin {
        shard: usize,
        core: usize,
        #[source]
        source: CoreError,
    },
    #[error("shard {shard}: start its compio runtime")]
    Runtime {
        shard: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("shard {shard}: open its partitions")]
    Open {
        shard: usize,
        #[source]
        source: DataError,
    },
    #[error("shard {shard}: its file backend")]
    Backend {
        shard: usize,
        #[source]
        source: shard::disk::BackendError,
    },
    #[error("shard {shard}: its thread ended before it was ready")]
    Vanished { shard: usize },
}

/// What a shard thread needs to start.
pub(crate) struct ShardStart {
    pub(crate) index: usize,
    /// The core to pin the thread to, if pinning is on.
    pub(crate) core: Option<usize>,
    pub(crate) info: ServerInfo,
    pub(crate) metadata: Metadata,
    pub(crate) root: PathBuf,
    pub(crate) node: Arc<Node>,
    /// The file backend, opened on the shard's own thread.
    pub(crate) backend: shard::disk::Backend,
    pub(crate) inbox: Inbox,
    pub(crate) handed: Handed,
}

/// The leader's handle on a running shard.
pub(crate) struct RunningShard {
    index: usize,
    thread: JoinHandle<()>,
    drained: RxOneshot<()>,
    stop: TxOneshot<()>,
}

/// The shard's ends of the life-cycle signals.
struct Signals {
    ready: TxOneshot<Result<(), ShardStartError>>,
    drained: TxOneshot<()>,
    stop: RxOneshot<()>,
}

/// Starts the shard's thread and waits until it has opened its partitions.
pub(crate) async fn start(start: ShardStart) -> Result<RunningShard, ShardStartError> {
    let index = start.index;
    let (ready, is_ready) = oneshot();
    let (drained, is_drained) = oneshot();
    let (stop, stopping) = oneshot();
    let signals = Signals {
        ready,
        drained,
        stop: stopping,
    };
    let thread = std::thread::Builder::new()
        .name(format!("shard-{index}"))
        .spawn(move || run_thread(start, signals))
        .map_err(|source| ShardStartError::Thread {
            shard: index,
            source,
        })?;
    match is_ready.await {
        Ok(Ok(())) => Ok(RunningShard {
            index,
            thread,
            drained: is_drained,
            stop,
        }),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(ShardStartError::Vanished { shard: index }),
    }
}

impl RunningShard {
    /// Waits for the shard to finish its in-flight requests (after the leader stopped
    /// accepting).
    pub(crate) async fn drained(&mut self) {
        let drained = std::mem::replace(&mut self.drained, oneshot().1);
        let _ = drained.await;
    }

    /// Tells the shard to close its partitions and waits for its thread to end (a thread
    /// that panicked has aborted the process already).
    pub(crate) fn stop(self) {
        self.stop.send(());
        if self.thread.join().is_err() {
            log::error!("shard {}: its thread ended in a panic", self.index);
        }
    }
}

fn run_thread(start: ShardStart, signals: Signals) {
    let index = start.index;
    if let Some(core) = start.core
        && let Err(source) = cores::pin_current_thread(core)
    {
        signals.ready.send(Err(ShardStartError::Pin {
            shard: index,
            core,
            source,
        }));
        return;
    }
    let runtime = match compio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(source) => {
            signals.ready.send(Err(ShardStartError::Runtime {
                shard: index,
                source,
            }));
            return;
        }
    };
    // A shard that dies would leave its partitions unreachable while the rest serves on:
    // stop the whole process instead, so a supervisor restarts it and recovery runs (every
    // acknowledged message is on disk by then).
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(serve(start, signals));
    }));
    if served.is_err() {
        log::error!("shard {index} panicked; aborting the server so it restarts whole");
        std::process::abort();
    }
}

async fn serve(start: ShardStart, signals: Signals) {
    let index = start.index;
    let storage = match shard::disk::shard_storage(start.backend) {
        Ok(storage) => storage,
        Err(source) => {
            signals.ready.send(Err(ShardStartError::Backend {
                shard: index,
                source,
            }));
            return;
        }
    };
    let sync_interval = std::time::Duration::from_micros(start.info.sync_interval_us);
    let server = Server::for_shard_on(
        storage,
        start.info,
        start.metadata,
        start.root,
        start.node,
        index,
    );
    if let Err(source) = server.open_partitions().await {
        signals.ready.send(Err(ShardStartError::Open {
            shard: index,
            source,
        }));
        return;
    }
    let (inbox_stop, inbox_stopped) = oneshot::<()>();
    let inbox = compio::runtime::spawn(start.inbox.serve(Rc::clone(&server), async move {
        let _ = inbox_stopped.await;
    }));
    let partition_ticker = compio::runtime::spawn(crate::tick_partitions(
        Rc::clone(&server),
        crate::partition_tick_period(sync_interval),
    ));
    log::debug!("shard {index}: ready");
    signals.ready.send(Ok(()));
    start.handed.serve(Rc::clone(&server)).await;
    signals.drained.send(());
    let _ = signals.stop.await;
    drop(partition_ticker);
    if let Err(error) = server.close().await {
        log::error!("shard {index}: closing its partitions failed: {error}");
    }
    inbox_stop.send(());
    let _ = inbox.await;
    log::debug!("shard {index}: stopped");
}

//! The deterministic whole-server simulator (VOPR): the real shards (`shard::Server`, the
//! partition tasks, the journal) on simulated time and in-memory storage with faults, driven
//! by simulated clients that speak the wire protocol, on one thread. A seed fixes every
//! choice — which client acts, how long each step takes, which faults strike, when the
//! process dies and how much of the unsynced data a power loss keeps — so a seed names one
//! run, and its trace is the same byte for byte on every run.
//!
//! After every step the run checks the invariants of [`model`] and [`world`]: every
//! acknowledged message is readable at its offset with its payload after any crash (all of
//! them after a process crash; those of `persisted` topics after a power loss), offsets are
//! never reused and have no gaps but those a power loss leaves, a message is stored once (an
//! idempotent retry is confirmed at its first offset), a `next` poll never returns an offset
//! at or below what the consumer or its group stored, a stored offset survives a crash as
//! the last acknowledged store, each group partition may be served to one member at most
//! (and the groups' published views say what the sequencer decided), and every shard's
//! metadata is the same at the same commit. A vandal's mangled frames may get any answer, but
//! none of the above may change.
//!
//! Each life runs in its own compio runtime; a crash drops the runtime with every task of
//! the process in it (requests in flight, partition tasks), then the storage forgets what
//! the crash mode says was not durable, and the next life boots from what is left.

pub mod client;
pub mod clock;
pub mod model;
pub mod requests;
pub mod rng;
pub mod setup;
pub mod vandal;
pub mod wire;
pub mod world;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use segment::storage::memory::{CrashMode, Faults, MemoryStorage};
use shard::data::GroupConfig;
use shard::login_limit::LoginLimits;
use shard::server::ServerInfo;

use crate::client::{Client, Role, TopicSetup};
use crate::clock::SimClock;
use crate::model::{PartitionModel, Place, StoredModel, Violation};
use crate::requests::{ConsumerKey, Intent};
use crate::rng::Rng;
use crate::world::LifeEnd;

pub const USERNAME: &str = "iggy";

/// The clients a run may have, in order (role, index of its topic): a run takes the first
/// five to ten, so each group has two members, both topics have traffic and a vandal (a
/// user without permissions sending mangled frames) is always there.
const CAST: [(Role, usize); 10] = [
    (Role::Admin, 0),
    (Role::Producer, 0),
    (Role::Member, 0),
    (Role::Member, 0),
    (Role::Vandal, 1),
    (Role::Consumer, 1),
    (Role::Producer, 1),
    (Role::Member, 1),
    (Role::Member, 1),
    (Role::Consumer, 0),
];
pub const PASSWORD: &str = "simulated";
/// The user the vandal logs in as (with [`PASSWORD`]); it has no permission.
pub const VANDAL: &str = "vandal";

/// The size of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Client requests to send before the run ends.
    pub requests: u64,
    /// Crashes the run makes at least.
    pub crashes_min: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            requests: 1_000,
            crashes_min: 1,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub shards: usize,
    pub requests: u64,
    pub acked_messages: u64,
    pub crashes: u32,
    pub power_losses: u32,
    pub faults: u32,
    /// FNV-1a of the whole trace.
    pub trace_digest: u64,
}

/// A run that found a violation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("seed {seed}: {violation}")]
pub struct Failure {
    pub seed: u64,
    pub violation: Violation,
    /// The whole trace up to the violation.
    pub trace: Vec<String>,
}

/// The state of one run.
pub struct Sim {
    pub seed: u64,
    options: Options,
    pub rng: Rng,
    pub storage: MemoryStorage,
    pub clock: SimClock,
    pub shard_count: usize,
    /// The shard that sequences metadata (any of them: it is a parameter of the core).
    pub sequencer: usize,
    /// The longest a message between shards is held in transit, µs (0: delivered at once).
    pub transit_max_us: u64,
    /// Whether messages between shards are held in transit now: not while the driver sets
    /// up or audits, whose calls do not move time.
    pub transit_on: Rc<Cell<bool>>,
    pub topics: Vec<TopicSetup>,
    pub partitions: BTreeMap<Place, PartitionModel>,
    pub stored: BTreeMap<(ConsumerKey, Place), StoredModel>,
    pub clients: Vec<Client>,
    pub requests: u64,
    pub acked_messages: u64,
    pub crashes: u32,
    pub power_losses: u32,
    pub faults: u32,
    /// Storage-fault state: a capacity limit in force until this time.
    pub full_until_us: u64,
    /// Metadata changes made by the admin client so far (names are never reused).
    pub admin_changes: u32,
    /// A write or sync fault struck in this life: a partition may be poisoned without any
    /// answer having said so (the crash cut it off), and so reopen past its reservation.
    pub io_fault_in_life: bool,
    trace: Vec<String>,
    /// The request count at which the run crashes next.
    next_crash_at: u64,
}

/// Runs seed `seed`; the report, or the first violation found.
pub fn run(seed: u64, options: Options) -> Result<Report, Failure> {
    run_to_end(seed, options).map(|sim| sim.report())
}

/// Lives until the run ends (the finished run) or a violation (its failure).
fn run_to_end(seed: u64, options: Options) -> Result<Sim, Failure> {
    let mut sim = Sim::new(seed, options);
    sim.trace(format!(
        "{} shard(s), shard {} sequences metadata, messages between shards in transit up to \
         {} µs",
        sim.shard_count, sim.sequencer, sim.transit_max_us
    ));
    loop {
        let runtime = compio::runtime::Runtime::new().expect("a compio runtime starts");
        let ended = runtime.block_on(sim.life());
        drop(runtime);
        sim.clock.clear_timers();
        match ended {
            Ok(LifeEnd::Done) => return Ok(sim),
            Ok(LifeEnd::Crash) => sim.crash(),
            Err(violation) => return Err(sim.failure(violation)),
        }
    }
}

impl Sim {
    fn new(seed: u64, options: Options) -> Self {
        let mut rng = Rng::new(seed);
        let shard_count = 1 + rng.index(3);
        let count = 5 + rng.index(CAST.len() - 4);
        let clients = CAST[..count]
            .iter()
            .enumerate()
            .map(|(index, (role, topic))| Client::new(index, *role, *topic))
            .collect();
        let next_crash_at = Self::crash_point(&mut rng, options.requests);
        let sequencer = rng.index(shard_count);
        let transit_max_us = [0, 200, 3_000][rng.index(3)];
        Self {
            seed,
            options,
            rng,
            storage: MemoryStorage::new(),
            clock: SimClock::starting_at(1_700_000_000_000_000),
            shard_count,
            sequencer,
            transit_max_us,
            transit_on: Rc::default(),
            topics: Vec::new(),
            partitions: BTreeMap::new(),
            stored: BTreeMap::new(),
            clients,
            requests: 0,
            acked_messages: 0,
            crashes: 0,
            power_losses: 0,
            faults: 0,
            full_until_us: 0,
            admin_changes: 0,
            io_fault_in_life: false,
            trace: Vec::new(),
            next_crash_at,
        }
    }

    /// Requests until the next crash: a fifth to a half of the run.
    fn crash_point(rng: &mut Rng, requests: u64) -> u64 {
        requests / 5 + rng.below(requests / 3 + 1)
    }

    /// What the shards are started with: short group timers so hand-offs, evictions and
    /// rebalancing timeouts happen within a run.
    pub fn info(&self) -> ServerInfo {
        ServerInfo {
            roster: shard::cluster::Roster::one_node("sim", "sim-0", "127.0.0.1"),
            tcp_port: 8090,
            websocket_port: 0,
            http_port: 0,
            quic_port: 0,
            // Session numbers are seeded from the start time, as in a real process.
            started_at_us: {
                use shard::clock::Clock;
                self.clock.now_us()
            },
            groups: GroupConfig {
                rebalancing_timeout_us: 3_000_000,
                heartbeat_interval_us: 2_000_000,
            },
            logins: LoginLimits::default(),
            validate_checksum: true,
            enforce_fsync: false,
            sync_interval_us: segment::log::SYNC_INTERVAL_DEFAULT_US,
            accept_metadata_loss: false,
        }
    }

    pub fn trace(&mut self, line: String) {
        self.trace.push(line);
    }

    fn finished(&self) -> bool {
        self.requests >= self.options.requests && self.crashes >= self.options.crashes_min
    }

    fn crash_due(&self) -> bool {
        self.requests >= self.next_crash_at
    }

    /// The process dies: a crash mode is drawn, storage forgets what it says, and the oracle
    /// learns what may now be gone.
    fn crash(&mut self) {
        self.crashes += 1;
        let mode = match self.rng.below(4) {
            0 | 1 => CrashMode::ProcessOnly,
            2 => CrashMode::DropUnsynced,
            _ => CrashMode::TornAt(usize::try_from(self.rng.below(600)).unwrap_or(0)),
        };
        self.trace(format!("crash {} ({mode:?})", self.crashes));
        self.storage.set_faults(Faults::default());
        self.storage.set_capacity(None);
        self.full_until_us = 0;
        self.storage.crash(mode);
        for index in 0..self.clients.len() {
            if let Some(intent) = self.clients[index].busy.take() {
                self.uncertain(&intent);
            }
        }
        if std::mem::take(&mut self.io_fault_in_life) {
            for model in self.partitions.values_mut() {
                model.may_jump = true;
            }
        }
        if mode != CrashMode::ProcessOnly {
            self.power_losses += 1;
            let persisted: BTreeMap<u32, bool> = self
                .topics
                .iter()
                .map(|topic| (topic.id, topic.persisted))
                .collect();
            for model in self.partitions.values_mut() {
                model.power_lost();
            }
            for ((key, place), model) in &mut self.stored {
                if !persisted.get(&place.topic_id).copied().unwrap_or(false) {
                    model.unknown = true;
                    if let ConsumerKey::Group(..) = key {
                        // Never audited: a group's offset is only a lower bound from here.
                        model.acked = None;
                    }
                }
            }
        }
        let remaining = self.options.requests.saturating_sub(self.requests);
        self.next_crash_at =
            self.requests + Self::crash_point(&mut self.rng, remaining.max(50) * 2);
    }

    /// A request that was not acknowledged may still have taken effect: one the crash cut
    /// off, or one refused because a write or sync failed after it reached the file.
    pub fn uncertain(&mut self, intent: &Intent) {
        match intent {
            Intent::Store {
                consumer,
                place,
                offset,
            } => {
                self.stored.entry((*consumer, *place)).or_default().maybe = Some(*offset);
            }
            Intent::Poll {
                topic_id,
                consumer,
                auto_commit: true,
                ..
            } => {
                for ((key, place), model) in &mut self.stored {
                    if key == consumer && place.topic_id == *topic_id {
                        model.unknown = true;
                    }
                }
            }
            _ => {}
        }
    }

    /// Faults come and go: a failed write, sync or read now and then, a full disk for a
    /// while.
    fn inject_faults(&mut self) {
        let now = {
            use shard::clock::Clock;
            self.clock.now_us()
        };
        if self.full_until_us != 0 && now >= self.full_until_us {
            self.storage.set_capacity(None);
            self.full_until_us = 0;
            self.trace(String::from("disk space freed"));
        }
        if !self.rng.chance(6) {
            return;
        }
        self.faults += 1;
        let kind = self.rng.below(4);
        self.io_fault_in_life |= kind < 2;
        match kind {
            0 => {
                self.storage.set_faults(Faults {
                    write_errors: 1,
                    ..Faults::default()
                });
                self.trace(String::from("fault: next write fails"));
            }
            1 => {
                self.storage.set_faults(Faults {
                    sync_errors: 1,
                    ..Faults::default()
                });
                self.trace(String::from("fault: next sync fails"));
            }
            2 => {
                let read_errors = 1 + u32::try_from(self.rng.below(3)).unwrap_or(0);
                self.storage.set_faults(Faults {
                    read_errors,
                    ..Faults::default()
                });
                self.trace(format!("fault: the next {read_errors} read(s) fail"));
            }
            _ => {
                let used = self.storage.used_bytes();
                self.storage.set_capacity(Some(used + self.rng.below(4096)));
                self.full_until_us = now + 200_000 + self.rng.below(1_000_000);
                self.trace(String::from("fault: disk full"));
            }
        }
    }

    fn report(&self) -> Report {
        Report {
            seed: self.seed,
            shards: self.shard_count,
            requests: self.requests,
            acked_messages: self.acked_messages,
            crashes: self.crashes,
            power_losses: self.power_losses,
            faults: self.faults,
            trace_digest: digest(&self.trace),
        }
    }

    fn failure(&self, violation: Violation) -> Failure {
        Failure {
            seed: self.seed,
            violation,
            trace: self.trace.clone(),
        }
    }
}

/// Runs seed `seed` and returns its whole trace (or the failure).
pub fn trace_of(seed: u64, options: Options) -> Result<Vec<String>, Failure> {
    run_to_end(seed, options).map(|sim| sim.trace)
}

/// FNV-1a over the trace lines.
fn digest(lines: &[String]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for line in lines {
        for byte in line.bytes().chain(std::iter::once(b'\n')) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

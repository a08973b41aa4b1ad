//! Running a scenario: create the streams, seed them when consumers need data, start one
//! thread per actor with its own connection, release them together, show progress, collect
//! results and remove the streams.
//!
//! Blocking threads, one per actor, keep the client simple and its cost visible: each actor
//! has one request in flight, as iggy-bench's actors do, so latency is the request's round trip.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::actors::{self, ActorPlan, Target};
use crate::client::{Client, ClientError};
use crate::idle::Idle;
use crate::metrics::{ActorKind, ActorResult, Progress, to_f64};
use crate::options::{Options, Scenario};

/// How often the progress line is redrawn.
const PROGRESS_PERIOD: Duration = Duration::from_millis(500);

/// A finished run: every actor's result and what the server reported.
pub struct Run {
    pub results: Vec<ActorResult>,
    pub server: ServerTrace,
}

/// The server's resident memory (`GET_STATS`, bytes) at the steps of a run, and the idle
/// connections held through it: what a partition and an idle connection cost the server.
#[derive(Debug, Clone, Default)]
pub struct ServerTrace {
    pub memory_start: Option<u64>,
    /// After the streams, topics and partitions were created.
    pub memory_after_targets: Option<u64>,
    /// After the idle connections were opened.
    pub memory_after_idle: Option<u64>,
    pub memory_end: Option<u64>,
    pub idle_connections: u32,
    /// Seconds opening the idle connections took.
    pub idle_open_seconds: f64,
}

impl ServerTrace {
    /// Memory added per partition created and per idle connection opened, in bytes.
    pub fn per_partition_and_connection(&self, options: &Options) -> (Option<f64>, Option<f64>) {
        let grew = |from: Option<u64>, to: Option<u64>, count: u64| match (from, to) {
            (Some(from), Some(to)) if count > 0 => {
                Some((to_f64(to) - to_f64(from)) / to_f64(count))
            }
            _ => None,
        };
        let partitions = u64::from(options.streams) * u64::from(options.partitions);
        (
            grew(self.memory_start, self.memory_after_targets, partitions),
            grew(
                self.memory_after_targets,
                self.memory_after_idle,
                u64::from(self.idle_connections),
            ),
        )
    }

    /// One line for the console, when the server reported its memory.
    pub fn describe(&self, options: &Options) -> Option<String> {
        let mib = |bytes: u64| to_f64(bytes) / f64::from(1 << 20);
        let (start, end) = (self.memory_start?, self.memory_end?);
        let (per_partition, per_connection) = self.per_partition_and_connection(options);
        let mut line = format!(
            "server memory (GET_STATS): {:.1} MiB at the start, {:.1} MiB at the end",
            mib(start),
            mib(end)
        );
        if let Some(bytes) = per_partition {
            let _ = write!(line, "; {:.1} KiB per partition created", bytes / 1024.0);
        }
        if let Some(bytes) = per_connection {
            let _ = write!(
                line,
                "; {} idle connections opened in {:.1} s, {:.1} KiB each",
                self.idle_connections,
                self.idle_open_seconds,
                bytes / 1024.0
            );
        }
        Some(line)
    }
}

/// Runs `options.scenario` against the server and removes its streams afterwards, also when
/// the run fails.
pub fn run(options: &Options) -> Result<Run, ClientError> {
    let mut admin = options.connect(actors::client_id(u32::MAX))?;
    // Every actor speaks the dialect the admin's login settled on.
    let options = &Options {
        dialect: Some(admin.dialect()),
        ..options.clone()
    };
    let mut server = ServerTrace {
        memory_start: admin.server_memory().ok(),
        ..ServerTrace::default()
    };
    let mut targets = Vec::new();
    let mut idle = None;
    let outcome = create_targets(&mut admin, options, &mut targets)
        .and_then(|()| {
            server.memory_after_targets = admin.server_memory().ok();
            open_idle(options, &mut admin, &mut server, &mut idle)
        })
        .and_then(|()| seed(options, &targets))
        .and_then(|()| run_actors(options, &targets));
    server.memory_end = admin.server_memory().ok();
    if let Some(idle) = idle {
        idle.close(&mut admin);
    }
    for target in &targets {
        if let Err(error) = admin.delete_stream(target.stream_id) {
            eprintln!("warning: stream {} not removed: {error}", target.stream_id);
        }
    }
    outcome.map(|results| Run { results, server })
}

/// Opens the run's idle connections, if it asks for any, and notes what they cost.
fn open_idle(
    options: &Options,
    admin: &mut Client,
    server: &mut ServerTrace,
    idle: &mut Option<Idle>,
) -> Result<(), ClientError> {
    if options.idle_connections == 0 {
        return Ok(());
    }
    eprintln!("opening {} idle connections", options.idle_connections);
    let opened = Idle::open(options, admin, options.idle_connections)?;
    server.idle_connections = u32::try_from(opened.count()).unwrap_or(u32::MAX);
    server.idle_open_seconds = opened.seconds;
    server.memory_after_idle = admin.server_memory().ok();
    *idle = Some(opened);
    Ok(())
}

fn create_targets(
    admin: &mut Client,
    options: &Options,
    targets: &mut Vec<Target>,
) -> Result<(), ClientError> {
    let prefix = format!("bench-{}", std::process::id());
    for index in 0..options.streams {
        let stream_id = admin.create_stream(&format!("{prefix}-{index}"))?;
        targets.push(Target {
            stream_id,
            topic_id: 0,
            group_id: None,
        });
        let topic_id =
            admin.create_topic(stream_id, "bench", options.partitions, options.durability)?;
        let target = targets.last_mut().expect("pushed just above");
        target.topic_id = topic_id;
        if options.scenario == Scenario::BalancedConsumerGroup {
            target.group_id = Some(admin.create_group(stream_id, topic_id)?);
        }
    }
    Ok(())
}

/// Consumer-only scenarios read data written before the clock starts.
fn seed(options: &Options, targets: &[Target]) -> Result<(), ClientError> {
    let batches_per_stream = match options.scenario {
        Scenario::PinnedConsumer => options.batches,
        Scenario::BalancedConsumerGroup => {
            let consumers = u64::from(options.consumers);
            (options.batches * consumers).div_ceil(u64::from(options.streams))
        }
        _ => return Ok(()),
    };
    eprintln!(
        "seeding {} batches into each of {} streams",
        batches_per_stream,
        targets.len()
    );
    thread::scope(|scope| {
        let seeders: Vec<_> = targets
            .iter()
            .enumerate()
            .map(|(index, target)| {
                let index = u32::try_from(index).expect("streams count in a u32");
                scope.spawn(move || actors::seed(options, *target, index, batches_per_stream))
            })
            .collect();
        seeders
            .into_iter()
            .try_for_each(|seeder| seeder.join().expect("a seeder thread does not panic"))
    })
}

/// The actors of a scenario.
fn plans(options: &Options) -> Vec<ActorPlan> {
    let mut plans = Vec::new();
    let producer_kind = match options.scenario {
        Scenario::EndToEndProducingConsumer => ActorKind::ProducingConsumer,
        _ => ActorKind::Producer,
    };
    for index in 0..options.producing_actors() {
        plans.push(ActorPlan {
            kind: producer_kind,
            index,
        });
    }
    for index in 0..options.consuming_actors() {
        plans.push(ActorPlan {
            kind: ActorKind::Consumer,
            index,
        });
    }
    plans
}

fn run_actors(options: &Options, targets: &[Target]) -> Result<Vec<ActorResult>, ClientError> {
    let plans = plans(options);
    let barrier = Barrier::new(plans.len() + 1);
    let progress = Progress::default();
    let finished = AtomicU32::new(0);
    thread::scope(|scope| {
        let handles: Vec<_> = plans
            .iter()
            .map(|plan| {
                let (barrier, progress, finished) = (&barrier, &progress, &finished);
                scope.spawn(move || {
                    let result = actors::run(options, targets, *plan, barrier, progress);
                    finished.fetch_add(1, Ordering::Release);
                    result
                })
            })
            .collect();
        barrier.wait();
        show_progress(options, &progress, &finished, plans.len());
        handles
            .into_iter()
            .map(|handle| handle.join().expect("an actor thread does not panic"))
            .collect()
    })
}

/// Redraws one line on stderr until every actor is done.
fn show_progress(options: &Options, progress: &Progress, finished: &AtomicU32, actors: usize) {
    let start = Instant::now();
    let actors = u32::try_from(actors).expect("actor count fits a u32");
    let expected = options.batch_payload_bytes()
        * options.batches
        * u64::from(options.producing_actors() + options.consuming_actors());
    let mut stderr = std::io::stderr();
    while finished.load(Ordering::Acquire) < actors {
        thread::sleep(PROGRESS_PERIOD);
        let bytes = progress.payload_bytes.load(Ordering::Relaxed);
        let messages = progress.messages.load(Ordering::Relaxed);
        let seconds = start.elapsed().as_secs_f64();
        let _ = write!(
            stderr,
            "\r{:>6.1} s  {:>9.1} MB  {:>8.1} MB/s  {:>10.0} msg/s  {:>5.1} %   ",
            seconds,
            to_f64(bytes) / 1e6,
            to_f64(bytes) / 1e6 / seconds,
            to_f64(messages) / seconds,
            100.0 * to_f64(bytes) / to_f64(expected.max(1)),
        );
        let _ = stderr.flush();
    }
    let _ = writeln!(stderr);
}

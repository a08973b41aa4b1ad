//! The actors: producers, consumers and producing consumers, each on its own thread and
//! connection. Setup (login, routes, frames) happens before the common start; only the
//! requests after it are measured.

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use proto::batch::{OutgoingMessage, encode_batch};
use proto::commands::poll_selector::PollSelector;
use proto::header::PartitionContext;
use proto::primitives::{Consumer, ConsumerKind, Identifier, OptionalPartition, PollingStrategy};

use crate::client::{Client, ClientError, STATUS_NOT_OWNED, SendFrame};
use crate::metrics::{ActorKind, ActorResult, Progress, Recorder, bump};
use crate::options::{Options, Scenario};

/// How long a consumer waits without any message before it gives up.
const STALL_MAX: Duration = Duration::from_secs(30);
/// Pause after an empty poll, so a waiting consumer does not take a core from the server.
const EMPTY_POLL_PAUSE: Duration = Duration::from_micros(200);

/// A stream the run created, with its topic (and group, for the group scenario).
// The names are the protocol's (`stream_id`, `topic_id`, `group_id`).
#[allow(clippy::struct_field_names)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target {
    pub(crate) stream_id: u32,
    pub(crate) topic_id: u32,
    pub(crate) group_id: Option<u32>,
}

/// Which actor to run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ActorPlan {
    pub(crate) kind: ActorKind,
    pub(crate) index: u32,
}

/// A partition an actor writes to or reads from.
struct Lane {
    partition_id: u32,
    incarnation: u64,
    frame: Option<SendFrame>,
    /// Next offset to read (consumers).
    offset: u64,
    /// The group assignment's generation (group members), stamped as `owner_generation`.
    generation: u64,
    exhausted: bool,
}

/// A distinct non-zero client id per actor and process.
pub(crate) fn client_id(actor: u32) -> u128 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let process = u128::from(std::process::id()) << 96;
    (nanos ^ process ^ (u128::from(actor) << 64)) | 1
}

/// Runs one actor: setup, the common start, the measured loop.
pub(crate) fn run(
    options: &Options,
    targets: &[Target],
    plan: ActorPlan,
    barrier: &Barrier,
    progress: &Progress,
) -> Result<ActorResult, ClientError> {
    let setup = setup(options, targets, plan);
    barrier.wait();
    let (mut client, target, mut lanes) = setup?;
    let started = Instant::now();
    let mut recorder = Recorder::new(plan.kind, plan.index, started);
    match plan.kind {
        ActorKind::Producer => produce(options, &mut client, &mut lanes, &mut recorder, progress),
        ActorKind::ProducingConsumer => produce_and_consume(
            options,
            &mut client,
            target,
            &mut lanes,
            &mut recorder,
            progress,
        ),
        ActorKind::Consumer => consume(
            options,
            &mut client,
            target,
            &mut lanes,
            &mut recorder,
            progress,
        ),
    }?;
    Ok(recorder.finish(Instant::now()))
}

/// Writes `batches` batches into `target`, spread over its partitions, unmeasured.
pub(crate) fn seed(
    options: &Options,
    target: Target,
    index: u32,
    batches: u64,
) -> Result<(), ClientError> {
    let id = client_id(u32::MAX - 1 - index);
    let mut client = options.connect(id)?;
    let partitions: Vec<u32> = (0..options.partitions).collect();
    let mut lanes = lanes(options, &mut client, target, &partitions, true)?;
    let count = lanes.len();
    for batch in 0..batches {
        let lane = &mut lanes[usize::try_from(batch).unwrap_or(0) % count];
        let frame = lane.frame.as_mut().expect("sending lanes carry a frame");
        client.send(frame, lane.incarnation)?;
    }
    Ok(())
}

type Setup = (Client, Target, Vec<Lane>);

fn setup(options: &Options, targets: &[Target], plan: ActorPlan) -> Result<Setup, ClientError> {
    let id = client_id(match plan.kind {
        ActorKind::Consumer => plan.index + 1_000_000,
        _ => plan.index,
    });
    let mut client = options.connect(id)?;
    let stream_count = u32::try_from(targets.len()).expect("streams count in a u32");
    let target = targets[usize::try_from(plan.index % stream_count).expect("u32 fits usize")];
    let sending = plan.kind != ActorKind::Consumer;
    let partitions: Vec<u32> = match (options.scenario, target.group_id) {
        (Scenario::BalancedProducer, _) => {
            // Each producer starts at its own partition, then goes round-robin.
            let first = plan.index % options.partitions;
            (0..options.partitions)
                .map(|step| (first + step) % options.partitions)
                .collect()
        }
        (_, Some(group_id)) => {
            client
                .join_group(target.stream_id, target.topic_id, group_id)?
                .partition_ids
        }
        _ => vec![0],
    };
    let lanes = lanes(options, &mut client, target, &partitions, sending)?;
    Ok((client, target, lanes))
}

/// Routes (and, for senders, encoded frames) for each partition.
fn lanes(
    options: &Options,
    client: &mut Client,
    target: Target,
    partitions: &[u32],
    sending: bool,
) -> Result<Vec<Lane>, ClientError> {
    let (batch, messages) = if sending {
        batch(options)
    } else {
        (Vec::new(), 0)
    };
    partitions
        .iter()
        .map(|&partition_id| {
            let incarnation =
                client.incarnation(target.stream_id, target.topic_id, partition_id)?;
            let frame = sending.then(|| {
                client.send_frame(
                    target.stream_id,
                    target.topic_id,
                    partition_id,
                    &batch,
                    messages,
                )
            });
            Ok(Lane {
                partition_id,
                incarnation,
                frame,
                offset: 0,
                generation: 0,
                exhausted: false,
            })
        })
        .collect()
}

/// One encoded batch of `messages_per_batch` messages of `message_size_bytes` each.
fn batch(options: &Options) -> (Vec<u8>, u32) {
    let payload_length = usize::try_from(options.message_size_bytes).expect("u32 fits usize");
    let payload: Vec<u8> = (0..payload_length)
        .map(|index| b'a' + u8::try_from(index % 26).expect("below 26"))
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, crate::metrics::duration_us);
    let messages: Vec<OutgoingMessage<'_>> = (0..options.messages_per_batch)
        .map(|index| OutgoingMessage {
            id: u128::from(index) + 1,
            origin_timestamp: now,
            payload: &payload,
            user_headers: &[],
        })
        .collect();
    let mut out = Vec::new();
    encode_batch(&messages, None, &mut out).expect("sizes were validated by the options");
    (out, options.messages_per_batch)
}

fn produce(
    options: &Options,
    client: &mut Client,
    lanes: &mut [Lane],
    recorder: &mut Recorder,
    progress: &Progress,
) -> Result<(), ClientError> {
    let payload = options.batch_payload_bytes();
    let messages = u64::from(options.messages_per_batch);
    let started = Instant::now();
    for batch in 0..options.batches {
        pace(options, started, batch * payload);
        let lane = &mut lanes[usize::try_from(batch).unwrap_or(0) % lanes.len()];
        let frame = lane.frame.as_mut().expect("sending lanes carry a frame");
        let frame_bytes = u64::try_from(frame.len()).unwrap_or(u64::MAX);
        let begin = Instant::now();
        client.send(frame, lane.incarnation)?;
        recorder.record(begin, payload, frame_bytes, messages);
        bump(progress, payload, messages);
    }
    Ok(())
}

/// Sends a batch, then polls exactly it back; one latency sample covers both.
fn produce_and_consume(
    options: &Options,
    client: &mut Client,
    target: Target,
    lanes: &mut [Lane],
    recorder: &mut Recorder,
    progress: &Progress,
) -> Result<(), ClientError> {
    let payload = options.batch_payload_bytes();
    let count = options.messages_per_batch;
    let consumer = Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(recorder.index + 1),
    };
    let lane = &mut lanes[0];
    let started = Instant::now();
    for batch in 0..options.batches {
        pace(options, started, batch * payload);
        let frame = lane.frame.as_mut().expect("sending lanes carry a frame");
        let frame_bytes = u64::try_from(frame.len()).unwrap_or(u64::MAX);
        let begin = Instant::now();
        client.send(frame, lane.incarnation)?;
        let selector = selector(consumer.clone(), target, lane, count, false);
        let mut received = 0;
        while received < count {
            let polled = client.poll(&selector_at(&selector, lane.offset), context(lane, 0))?;
            received += polled;
            lane.offset += u64::from(polled);
        }
        recorder.record(begin, payload, frame_bytes, u64::from(count));
        bump(progress, payload, u64::from(count));
    }
    Ok(())
}

/// Polls until the expected messages arrived (pinned) or every assigned partition is
/// drained (group). Only polls that return messages are recorded.
fn consume(
    options: &Options,
    client: &mut Client,
    target: Target,
    lanes: &mut Vec<Lane>,
    recorder: &mut Recorder,
    progress: &Progress,
) -> Result<(), ClientError> {
    let expected = options.batches * u64::from(options.messages_per_batch);
    let mut consumed = 0u64;
    let mut last_progress = Instant::now();
    let mut turn = 0usize;
    let message_bytes = u64::from(options.message_size_bytes);
    loop {
        let done = match target.group_id {
            Some(_) => lanes.iter().all(|lane| lane.exhausted),
            None => consumed >= expected,
        };
        if done {
            return Ok(());
        }
        if lanes.is_empty() || last_progress.elapsed() > STALL_MAX {
            return stalled(options, client, target, lanes, &mut last_progress);
        }
        turn = (turn + 1) % lanes.len();
        let begin = Instant::now();
        let polled = match poll_lane(options, client, target, &mut lanes[turn], recorder.index) {
            Err(ClientError::Refused {
                status: STATUS_NOT_OWNED,
                ..
            }) => {
                *lanes = resync(options, client, target)?;
                continue;
            }
            other => other?,
        };
        if polled == 0 {
            thread::sleep(EMPTY_POLL_PAUSE);
            continue;
        }
        last_progress = Instant::now();
        consumed += u64::from(polled);
        let payload = u64::from(polled) * message_bytes;
        recorder.record(begin, payload, payload, u64::from(polled));
        bump(progress, payload, u64::from(polled));
    }
}

/// A consumer saw nothing for too long, or its group gave it no partition: for a group
/// member that may be a rebalance still settling, so it syncs again; otherwise it is an error.
fn stalled(
    options: &Options,
    client: &mut Client,
    target: Target,
    lanes: &mut Vec<Lane>,
    last_progress: &mut Instant,
) -> Result<(), ClientError> {
    if target.group_id.is_none() || last_progress.elapsed() > STALL_MAX {
        return Err(ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no message arrived for 30 s",
        )));
    }
    thread::sleep(Duration::from_millis(10));
    *lanes = resync(options, client, target)?;
    if lanes.is_empty() {
        return Ok(());
    }
    *last_progress = Instant::now();
    Ok(())
}

/// The group's current assignment, as fresh lanes reading from the stored offsets.
fn resync(
    options: &Options,
    client: &mut Client,
    target: Target,
) -> Result<Vec<Lane>, ClientError> {
    let group_id = target.group_id.expect("only group members resync");
    let assignment = client.join_group(target.stream_id, target.topic_id, group_id)?;
    let mut lanes = lanes(options, client, target, &assignment.partition_ids, false)?;
    for lane in &mut lanes {
        lane.generation = assignment.generation;
    }
    Ok(lanes)
}

fn poll_lane(
    options: &Options,
    client: &mut Client,
    target: Target,
    lane: &mut Lane,
    index: u32,
) -> Result<u32, ClientError> {
    let count = options.messages_per_batch;
    let polled = if let Some(group_id) = target.group_id {
        let consumer = Consumer {
            kind: ConsumerKind::ConsumerGroup,
            id: Identifier::Numeric(group_id),
        };
        let mut selector = selector(consumer, target, lane, count, true);
        selector.strategy = PollingStrategy::next();
        client.poll(&selector, context(lane, lane.generation))?
    } else {
        let consumer = Consumer {
            kind: ConsumerKind::Consumer,
            id: Identifier::Numeric(index + 1),
        };
        let selector = selector(consumer, target, lane, count, false);
        let polled = client.poll(&selector_at(&selector, lane.offset), context(lane, 0))?;
        lane.offset += u64::from(polled);
        polled
    };
    lane.exhausted = polled == 0;
    Ok(polled)
}

fn selector(
    consumer: Consumer,
    target: Target,
    lane: &Lane,
    count: u32,
    auto_commit: bool,
) -> PollSelector {
    PollSelector {
        consumer,
        stream_id: Identifier::Numeric(target.stream_id),
        topic_id: Identifier::Numeric(target.topic_id),
        partition: OptionalPartition(Some(lane.partition_id)),
        strategy: PollingStrategy::offset(lane.offset),
        count,
        auto_commit,
    }
}

fn selector_at(selector: &PollSelector, offset: u64) -> PollSelector {
    PollSelector {
        strategy: PollingStrategy::offset(offset),
        ..selector.clone()
    }
}

fn context(lane: &Lane, owner_generation: u64) -> PartitionContext {
    PartitionContext {
        incarnation: lane.incarnation,
        owner_generation,
        metadata_op: 0,
    }
}

/// Sleeps until `sent` bytes are due under the rate limit.
fn pace(options: &Options, started: Instant, sent: u64) {
    let Some(rate) = options.rate_limit_bytes_per_second else {
        return;
    };
    let due = Duration::from_secs_f64(crate::metrics::to_f64(sent) / crate::metrics::to_f64(rate));
    if let Some(wait) = due.checked_sub(started.elapsed()) {
        thread::sleep(wait);
    }
}

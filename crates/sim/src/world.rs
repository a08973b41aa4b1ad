//! One simulated process life: the shards booted from what storage holds, an audit of what
//! survived, then clients acting until the run decides to crash or ends.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use proto::codec::Reader;
use proto::commands::decode_optional;
use proto::commands::groups::ConsumerGroupAssignment;
use proto::commands::messages::SendConfirmations;
use proto::commands::offsets::ConsumerOffset;
use proto::primitives::{PollingKind, PollingStrategy};
use segment::storage::either::Either;
use shard::hashing::HashPool;
use shard::node::Node;
use shard::{Connection, Outcome, Server, TransportKind};

use crate::Sim;
use crate::client::LastBatch;
use crate::model::{PartitionModel, Place, Violation, read_polled};
use crate::requests::{self, ConsumerKey, Intent};
use crate::wire::{self, Answer, Frame};

/// The data directory inside the simulated storage.
pub fn root() -> PathBuf {
    PathBuf::from("/sim")
}

/// How a life ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifeEnd {
    Crash,
    Done,
}

/// A request's answer, delivered to the driver.
struct Completion {
    client: usize,
    frame: Frame,
    outcome: Outcome,
    connection: Connection,
}

type Completions = Rc<RefCell<Vec<Completion>>>;

/// The running shards of one life, by index.
pub struct Shards {
    pub servers: Vec<Rc<Server>>,
    /// The index of the shard that sequences metadata.
    pub sequencer: usize,
}

impl Shards {
    /// The metadata sequencer: it holds the sessions and groups and ticks.
    pub fn sequencer(&self) -> &Rc<Server> {
        &self.servers[self.sequencer]
    }
}

/// Boots every shard on the simulated storage: the sequencer replays the journal, the others
/// start from its metadata; every inbox is served, its messages held in transit for a time
/// the seed picks.
pub async fn boot(sim: &mut Sim) -> Result<Shards, Violation> {
    let clock: Arc<dyn shard::clock::Clock> = Arc::new(sim.clock.clone());
    let (node, inboxes) = Node::with(sim.shard_count, sim.sequencer, clock, HashPool::inline());
    let storage = || Either::Right(sim.storage.clone());
    let sequencer = Server::open_on(storage(), sim.info(), root(), Arc::clone(&node))
        .await
        .map_err(|error| Violation(format!("restart failed: {error:?}")))?;
    let mut servers = Vec::new();
    for index in 0..sim.shard_count {
        if index == sim.sequencer {
            servers.push(Rc::clone(&sequencer));
            continue;
        }
        let metadata = shard::metadata::Metadata::clone(&sequencer.metadata());
        let server = Server::for_shard_on(
            storage(),
            sim.info(),
            metadata,
            root(),
            Arc::clone(&node),
            index,
        );
        server
            .open_partitions()
            .await
            .map_err(|error| Violation(format!("shard {index} failed to open: {error:?}")))?;
        servers.push(server);
    }
    sim.transit_on.set(false);
    for (inbox, server) in inboxes.into_iter().zip(&servers) {
        let transit = transit(sim);
        let served = inbox.serve_in_transit(Rc::clone(server), std::future::pending(), transit);
        compio::runtime::spawn(served).detach();
    }
    Ok(Shards {
        servers,
        sequencer: sim.sequencer,
    })
}

/// How long each message to one shard stays in transit: up to the seed's maximum, while
/// transit is on.
fn transit(sim: &mut Sim) -> impl FnMut() -> u64 + 'static {
    let mut rng = sim.rng.fork();
    let on = Rc::clone(&sim.transit_on);
    let max = sim.transit_max_us;
    move || {
        if on.get() && max > 0 {
            rng.below(max + 1)
        } else {
            0
        }
    }
}

/// Lets every runnable task make progress: `rounds` trips through the run queue.
pub async fn settle(rounds: u64) {
    for _ in 0..rounds {
        YieldNow(false).await;
    }
}

/// A future that is pending once, waking itself: the scheduler runs the others meanwhile.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        context.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

fn address(client: usize) -> SocketAddr {
    let port = u16::try_from(10_000 + client % 50_000).unwrap_or(10_000);
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Sends `frame` on `connection` and waits for its answer (the driver's own requests).
pub async fn call(server: &Server, connection: &mut Connection, frame: &Frame) -> Answer {
    let outcome = server.handle(connection, &frame.header, &frame.body).await;
    wire::answer(outcome)
}

impl Sim {
    /// One life: boot, audit, act until a crash or the end. Requests still in flight when
    /// it returns die with the runtime, as they would with the process.
    pub async fn life(&mut self) -> Result<LifeEnd, Violation> {
        let shards = boot(self).await?;
        if self.topics.is_empty() {
            self.setup(&shards).await?;
        }
        self.audit(&shards).await?;
        self.transit_on.set(true);
        for client in &mut self.clients {
            client.disconnected();
            client.busy = None;
        }
        let completions: Completions = Rc::default();
        loop {
            if self.finished() {
                self.drain(&shards, &completions).await?;
                self.transit_on.set(false);
                self.audit(&shards).await?;
                return Ok(LifeEnd::Done);
            }
            if self.crash_due() {
                return Ok(LifeEnd::Crash);
            }
            self.step(&shards, &completions);
            let rounds = self.rng.below(8);
            settle(rounds).await;
            self.deliver(&shards, &completions)?;
            Self::check_shards(&shards)?;
        }
    }

    /// Waits for every request in flight to be answered.
    async fn drain(&mut self, shards: &Shards, completions: &Completions) -> Result<(), Violation> {
        self.storage
            .set_faults(segment::storage::memory::Faults::default());
        self.storage.set_capacity(None);
        for _ in 0..20_000 {
            if self.clients.iter().all(|client| client.busy.is_none()) {
                return Ok(());
            }
            self.clock.advance(1_000);
            settle(4).await;
            self.deliver(shards, completions)?;
        }
        let stuck: Vec<String> = self
            .clients
            .iter()
            .filter_map(|client| {
                client
                    .busy
                    .as_ref()
                    .map(|intent| format!("c{} {intent:?}", client.index))
            })
            .collect();
        Err(Violation(format!("requests never answered: {stuck:?}")))
    }

    /// One step: time passes, faults come and go, one client acts.
    fn step(&mut self, shards: &Shards, completions: &Completions) {
        let step_us = if self.rng.chance(4) {
            2_000_000 + self.rng.below(2_000_000)
        } else {
            self.rng.below(20_000)
        };
        self.advance(shards, step_us);
        self.inject_faults();
        let index = self.rng.index(self.clients.len());
        let now = self.clock_now();
        let client = &self.clients[index];
        if client.busy.is_some() || client.silent_until_us > now {
            return;
        }
        self.act(shards, completions, index);
    }

    /// Moves time on, ticking the leader (and every shard's partitions) at every half
    /// second it crosses.
    fn advance(&mut self, shards: &Shards, step_us: u64) {
        let before = self.clock_now();
        self.clock.advance(step_us);
        let now = self.clock_now();
        if before / 500_000 != now / 500_000 {
            shards.sequencer().tick(now);
            for server in &shards.servers {
                server.tick_partitions(now);
            }
        }
    }

    fn clock_now(&self) -> u64 {
        use shard::clock::Clock;
        self.clock.now_us()
    }

    /// Client `index` sends its next request (logging in first when it has no session).
    fn act(&mut self, shards: &Shards, completions: &Completions, index: usize) {
        let evicted = self.clients[index]
            .connection
            .as_ref()
            .and_then(|connection| connection.liveness.eviction().reason());
        if let Some(reason) = evicted {
            self.trace(format!("c{index} evicted by the server: {reason:?}"));
            self.close(shards, index);
        }
        let now = self.clock_now();
        if self.clients[index].connection.is_some() && self.rng.chance(15) {
            self.trace(format!("c{index} reconnects"));
            self.close(shards, index);
            return;
        }
        if self.clients[index].role == crate::client::Role::Member
            && self.clients[index].member
            && self.rng.chance(8)
        {
            let silence = 1_000_000 + self.rng.below(4_000_000);
            self.clients[index].silent_until_us = now + silence;
            self.trace(format!("c{index} goes silent for {silence} µs"));
            return;
        }
        let (intent, frame) = if self.clients[index].connection.is_none() {
            let shard = self.rng.index(shards.servers.len());
            let connection =
                shards.servers[shard].open_connection(address(index), TransportKind::Tcp);
            let client = &mut self.clients[index];
            client.shard = shard;
            client.connection = Some(connection);
            if client.role == crate::client::Role::Vandal {
                let login = client.numbering.login(crate::VANDAL, crate::PASSWORD);
                // A third of its connections start with a mangled login.
                if self.rng.chance(333) {
                    (
                        Intent::Garbage,
                        crate::vandal::vandalize(&mut self.rng, login),
                    )
                } else {
                    (Intent::Login, login)
                }
            } else {
                (
                    Intent::Login,
                    client.numbering.login(crate::USERNAME, crate::PASSWORD),
                )
            }
        } else if self.clients[index].role == crate::client::Role::Admin {
            self.admin(shards, index)
        } else {
            let ends = |place: Place| self.partitions.get(&place).map_or(0, PartitionModel::end);
            let (mut intent, frame) = {
                let topics = self.topics.clone();
                let mut rng = self.rng.fork();
                let client = &mut self.clients[index];
                let chosen = client.choose(&mut rng, &topics, now, &ends);
                self.rng = rng;
                chosen
            };
            self.snapshot_stored(&mut intent);
            (intent, frame)
        };
        self.issue(shards, completions, index, intent, frame);
    }

    /// Fills in what a `next` poll must stay past.
    fn snapshot_stored(&self, intent: &mut Intent) {
        if let Intent::Poll {
            topic_id,
            consumer,
            strategy,
            stored_before,
            ..
        } = intent
            && strategy.kind == PollingKind::Next
        {
            *stored_before = self
                .stored
                .iter()
                .filter(|((key, place), _)| key == consumer && place.topic_id == *topic_id)
                .filter(|(_, model)| !model.unknown)
                .filter_map(|((_, place), model)| {
                    model.acked.map(|offset| (place.partition_id, offset))
                })
                .collect();
        }
    }

    fn issue(
        &mut self,
        shards: &Shards,
        completions: &Completions,
        index: usize,
        intent: Intent,
        frame: Frame,
    ) {
        self.requests += 1;
        let client = &mut self.clients[index];
        let Some(mut connection) = client.connection.clone() else {
            return;
        };
        client.busy = Some(intent);
        let server = Rc::clone(&shards.servers[client.shard]);
        let done = Rc::clone(completions);
        compio::runtime::spawn(async move {
            let outcome = server
                .handle(&mut connection, &frame.header, &frame.body)
                .await;
            done.borrow_mut().push(Completion {
                client: index,
                frame,
                outcome,
                connection,
            });
        })
        .detach();
    }

    /// Closes client `index`'s connection as its transport would.
    fn close(&mut self, shards: &Shards, index: usize) {
        let client = &mut self.clients[index];
        if let Some(connection) = client.connection.take() {
            let server = Rc::clone(&shards.servers[client.shard]);
            server.close_connection(&connection);
            if let Some(bound) = connection.session {
                compio::runtime::spawn(
                    async move { server.connection_closed(bound.client_id).await },
                )
                .detach();
            }
        }
        client.disconnected();
    }

    /// Hands every answer that arrived to its client and checks it.
    fn deliver(&mut self, shards: &Shards, completions: &Completions) -> Result<(), Violation> {
        let arrived: Vec<Completion> = std::mem::take(&mut *completions.borrow_mut());
        for completion in arrived {
            let index = completion.client;
            let intent = self.clients[index].busy.take();
            let answer = wire::answer(completion.outcome);
            let summary = summarize(&answer);
            self.trace(format!("c{index} {:?} -> {summary}", completion.frame.code));
            if let Some(connection) = self.clients[index].connection.as_mut() {
                connection.dialect = completion.connection.dialect;
                connection.session = completion.connection.session;
            }
            if let Answer::Evicted(_) = answer {
                self.close(shards, index);
                continue;
            }
            if let Some(intent) = intent {
                self.check(index, &completion.frame, intent, answer)?;
            }
        }
        Ok(())
    }

    /// Checks one answer against the oracle and updates it.
    fn check(
        &mut self,
        index: usize,
        frame: &Frame,
        intent: Intent,
        answer: Answer,
    ) -> Result<(), Violation> {
        self.refused(index, &intent, &answer);
        let Answer::Ok(payload) = answer else {
            return Ok(());
        };
        match intent {
            Intent::Login => {
                let session = wire::login_session(frame, &payload)
                    .ok_or_else(|| Violation("login reply without a session".into()))?;
                self.clients[index].logged_in(session);
            }
            Intent::Send {
                place,
                ids,
                producer,
                retry_of,
            } => self.sent(index, place, &ids, producer, retry_of, &payload)?,
            Intent::Poll {
                topic_id,
                consumer,
                strategy,
                auto_commit,
                stored_before,
                ..
            } => self.polled(
                index,
                topic_id,
                consumer,
                strategy,
                auto_commit,
                &stored_before,
                &payload,
            )?,
            Intent::Store {
                consumer,
                place,
                offset,
            } => {
                let model = self.stored.entry((consumer, place)).or_default();
                model.acked = Some(match consumer {
                    ConsumerKey::Plain(_) => offset,
                    ConsumerKey::Group(..) => model.acked.map_or(offset, |acked| acked.max(offset)),
                });
                model.maybe = None;
                model.unknown = false;
            }
            Intent::Join(_) => self.clients[index].member = true,
            Intent::Leave(_) => {
                self.clients[index].member = false;
                self.clients[index].assigned.clear();
            }
            Intent::Sync(_) => self.synced(index, &payload)?,
            Intent::Admin(_) | Intent::Garbage => {}
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    /// A refusal: one for a failed write or sync leaves its effect uncertain and lets the
    /// partition skip to its reservation; a group poll refused as not the owner re-syncs.
    fn refused(&mut self, index: usize, intent: &Intent, answer: &Answer) {
        if let Answer::Refused(1 | 4010) = answer {
            // A failed write or sync poisons the partition: it reopens past its reservation.
            let (topic_id, partition_id) = match intent {
                Intent::Send { place, .. } | Intent::Store { place, .. } => {
                    (place.topic_id, Some(place.partition_id))
                }
                Intent::Poll {
                    topic_id,
                    partition_id,
                    ..
                } => (*topic_id, *partition_id),
                _ => (u32::MAX, None),
            };
            for (place, model) in &mut self.partitions {
                let hit = partition_id.is_none_or(|partition| partition == place.partition_id);
                model.may_jump |= place.topic_id == topic_id && hit;
            }
            self.uncertain(intent);
        }
        if let (Intent::Poll { .. }, Answer::Refused(5006 | 5009)) = (intent, answer) {
            // Not the owner (any more): sync before the next group poll.
            self.clients[index].assigned.clear();
        }
    }

    /// A sync's assignment: an empty reply means the client is no member.
    fn synced(&mut self, index: usize, payload: &[u8]) -> Result<(), Violation> {
        let mut reader = Reader::new(payload, wire::DIALECT);
        let assignment: Option<ConsumerGroupAssignment> = decode_optional(&mut reader)
            .map_err(|error| Violation(format!("bad sync reply: {error}")))?;
        let client = &mut self.clients[index];
        client.member = assignment.is_some();
        client.generation = assignment
            .as_ref()
            .map_or(0, |assignment| assignment.generation);
        client.assigned = assignment
            .map(|assignment| assignment.partition_ids)
            .unwrap_or_default();
        Ok(())
    }

    fn sent(
        &mut self,
        index: usize,
        place: Place,
        ids: &[u128],
        producer: Option<proto::batch::Producer>,
        retry_of: Option<u64>,
        payload: &[u8],
    ) -> Result<(), Violation> {
        let confirmations: SendConfirmations =
            proto::codec::decode_exact(payload, wire::DIALECT)
                .map_err(|error| Violation(format!("bad send reply: {error}")))?;
        let Some(confirmation) = confirmations.0.first() else {
            return Ok(());
        };
        let base_offset = confirmation.base_offset;
        if let Some(first) = retry_of {
            if first != base_offset {
                return Err(Violation(format!(
                    "a retried batch was confirmed at {base_offset}, first at {first}"
                )));
            }
            return Ok(());
        }
        let model = self
            .partitions
            .get_mut(&place)
            .ok_or_else(|| Violation("send to an unknown partition".into()))?;
        model.acked(base_offset, ids)?;
        self.acked_messages += ids.len() as u64;
        let client = &mut self.clients[index];
        client.last_batch = None;
        if producer.is_some() {
            let count = u32::try_from(ids.len()).unwrap_or(0);
            let sequence = client.next_sequence.entry(place).or_insert(0);
            *sequence = sequence.wrapping_add(count);
            client.last_batch = Some(LastBatch {
                place,
                ids: ids.to_vec(),
                producer,
                base_offset,
            });
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn polled(
        &mut self,
        index: usize,
        topic_id: u32,
        consumer: ConsumerKey,
        strategy: PollingStrategy,
        auto_commit: bool,
        stored_before: &[(u32, u64)],
        payload: &[u8],
    ) -> Result<(), Violation> {
        let (partition_id, seen) = read_polled(payload)?;
        let place = Place {
            topic_id,
            partition_id,
        };
        let Some(model) = self.partitions.get_mut(&place) else {
            return Err(Violation(format!(
                "a poll answered from unknown partition {place:?}"
            )));
        };
        model.read(&seen)?;
        if strategy.kind == PollingKind::Next
            && let Some((_, stored)) = stored_before
                .iter()
                .find(|(partition, _)| *partition == partition_id)
            && let Some(first) = seen.first()
            && first.offset <= *stored
        {
            return Err(Violation(format!(
                "{consumer:?} polled offset {} of {place:?} by next after storing {stored}",
                first.offset
            )));
        }
        let Some(last) = seen.last() else {
            return Ok(());
        };
        if auto_commit {
            let model = self.stored.entry((consumer, place)).or_default();
            model.acked = Some(match consumer {
                ConsumerKey::Plain(_) => last.offset,
                ConsumerKey::Group(..) => model
                    .acked
                    .map_or(last.offset, |acked| acked.max(last.offset)),
            });
            model.maybe = None;
            model.unknown = false;
        } else if matches!(consumer, ConsumerKey::Group(..)) {
            self.clients[index].to_store = Some((place, last.offset));
        }
        Ok(())
    }

    /// Invariants over the shards' state: metadata agrees at equal commits; the groups'
    /// published views say what the sequencer decided; every group partition may be served
    /// to at most one member.
    fn check_shards(shards: &Shards) -> Result<(), Violation> {
        let leader = shards.sequencer().metadata();
        let replicas = shards.servers.iter().enumerate();
        for (index, server) in replicas.filter(|(index, _)| *index != shards.sequencer) {
            let replica = server.metadata();
            if replica.commit == leader.commit && *replica != *leader {
                return Err(Violation(format!(
                    "shard {index}'s metadata differs at commit {}",
                    leader.commit
                )));
            }
        }
        shards.sequencer().check_group_views().map_err(Violation)?;
        for (key, partition, members) in shards.sequencer().group_servers() {
            if members.len() > 1 {
                return Err(Violation(format!(
                    "group {key:?}: partition {partition} may be served to {} members",
                    members.len()
                )));
            }
        }
        Ok(())
    }
}

fn summarize(answer: &Answer) -> String {
    match answer {
        Answer::Ok(payload) => format!("ok {} bytes", payload.len()),
        Answer::Refused(code) => format!("refused {code}"),
        Answer::Evicted(reason) => format!("evicted {reason:?}"),
        Answer::Silent => String::from("silent"),
    }
}

/// Reads the stored offset of `consumer` on `place`.
pub async fn stored_offset(
    server: &Server,
    connection: &mut Connection,
    numbering: &mut wire::Numbering,
    consumer: ConsumerKey,
    place: Place,
) -> Result<Option<u64>, Violation> {
    let frame = requests::get_offset(numbering, consumer, place);
    match call(server, connection, &frame).await {
        Answer::Ok(payload) => {
            let mut reader = Reader::new(&payload, wire::DIALECT);
            let offset: Option<ConsumerOffset> = decode_optional(&mut reader)
                .map_err(|error| Violation(format!("bad offset reply: {error}")))?;
            Ok(offset.map(|offset| offset.stored_offset))
        }
        other => Err(Violation(format!(
            "reading the offset of {consumer:?} on {place:?}: {other:?}"
        ))),
    }
}

/// A `next`-free poll by offset, for the audit.
pub fn by_offset(offset: u64) -> PollingStrategy {
    PollingStrategy::offset(offset)
}

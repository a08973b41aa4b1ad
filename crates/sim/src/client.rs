//! A simulated client: its role, its connection and numbering, and the next request it
//! chooses, with the behaviours of the SDK the issue names (idempotent batches and their
//! retries, every poll strategy with and without auto-commit, stored offsets, group
//! membership that joins, leaves and goes silent, reconnects).

use proto::batch::Producer;
use proto::codes::CommandCode;
use proto::primitives::{PollingKind, PollingStrategy};
use shard::Connection;

use crate::model::Place;
use crate::requests::{self, ConsumerKey, Intent};
use crate::rng::Rng;
use crate::wire::{Frame, Numbering};

/// What a client does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Metadata changes on scratch topics and tokens.
    Admin,
    Producer,
    /// A plain consumer with its own stored offsets.
    Consumer,
    /// A consumer-group member.
    Member,
    /// A hostile client, logged in as a user without permissions: valid requests with
    /// bytes flipped, random bodies under random codes, garbage before login. It must get
    /// refusals and evictions, never change what the others see, never stop the server.
    Vandal,
}

/// One fixed topic of the run.
#[derive(Debug, Clone)]
pub struct TopicSetup {
    pub id: u32,
    pub persisted: bool,
    pub partitions: Vec<u32>,
    pub group_id: u32,
}

/// The last batch a producer had acknowledged, for an exact retry.
#[derive(Debug, Clone)]
pub struct LastBatch {
    pub place: Place,
    pub ids: Vec<u128>,
    pub producer: Option<Producer>,
    pub base_offset: u64,
}

#[derive(Debug)]
pub struct Client {
    pub index: usize,
    pub role: Role,
    /// Index into the run's topics.
    pub topic: usize,
    pub numbering: Numbering,
    pub shard: usize,
    pub connection: Option<Connection>,
    /// The request in flight (one at a time, as the SDK keeps).
    pub busy: Option<Intent>,
    /// Messages minted so far: ids are never reused.
    pub minted: u64,
    /// The next sequence of this session's idempotent producer, per partition.
    pub next_sequence: std::collections::BTreeMap<Place, u32>,
    pub last_batch: Option<LastBatch>,
    pub member: bool,
    pub generation: u64,
    /// The partitions its last sync assigned it (a 0.12.2 group poll names one).
    pub assigned: Vec<u32>,
    /// A group poll without auto-commit left this to store.
    pub to_store: Option<(Place, u64)>,
    /// A vanished client sends nothing before this time.
    pub silent_until_us: u64,
    /// The session its producer state (sequences, last batch) belongs to.
    pub producer_session: u64,
}

impl Client {
    pub fn new(index: usize, role: Role, topic: usize) -> Self {
        let client_id = (0x51_u128 << 120) | (u128::try_from(index).unwrap_or(0) + 1);
        Self {
            index,
            role,
            topic,
            numbering: Numbering::new(client_id),
            shard: 0,
            connection: None,
            busy: None,
            minted: 0,
            next_sequence: std::collections::BTreeMap::new(),
            last_batch: None,
            member: false,
            generation: 0,
            assigned: Vec::new(),
            to_store: None,
            silent_until_us: 0,
            producer_session: 0,
        }
    }

    /// The plain consumer id of this client.
    pub fn consumer(&self) -> ConsumerKey {
        ConsumerKey::Plain(u32::try_from(self.index).unwrap_or(0) + 1)
    }

    /// Forgets the session (the connection closed or the server restarted).
    pub fn disconnected(&mut self) {
        self.connection = None;
        self.numbering.session = 0;
        self.member = false;
        self.assigned.clear();
        self.to_store = None;
    }

    /// A login handed out `session`: a new one starts the producer over (its id is minted
    /// from the session); the same one (a re-login of a live session) keeps it.
    pub fn logged_in(&mut self, session: u64) {
        self.numbering.session = session;
        if session != self.producer_session {
            self.producer_session = session;
            self.next_sequence.clear();
            self.last_batch = None;
        }
    }

    /// A fresh message id: the client, a counter and a payload length in the low bits.
    fn mint(&mut self, rng: &mut Rng) -> u128 {
        self.minted += 1;
        let client = u128::try_from(self.index).unwrap_or(0) + 1;
        client << 96 | u128::from(self.minted) << 8 | u128::from(rng.below(64))
    }

    /// The request this client sends next (it is logged in and idle).
    pub fn choose(
        &mut self,
        rng: &mut Rng,
        topics: &[TopicSetup],
        now_us: u64,
        ends: &dyn Fn(Place) -> u64,
    ) -> (Intent, Frame) {
        let topic = &topics[self.topic];
        match self.role {
            Role::Vandal => {
                let (_, frame) = self.plain_poll(rng, topic, now_us, ends);
                (Intent::Garbage, crate::vandal::vandalize(rng, frame))
            }
            Role::Producer if rng.chance(850) => self.produce(rng, topic, now_us),
            Role::Member => self.member_request(rng, topic),
            Role::Consumer if rng.chance(250) => {
                let place = random_place(rng, topic);
                let offset = rng.below(ends(place) + 2);
                let consumer = self.consumer();
                let frame = requests::store_offset(&mut self.numbering, consumer, place, offset);
                let intent = Intent::Store {
                    consumer,
                    place,
                    offset,
                };
                (intent, frame)
            }
            _ => self.plain_poll(rng, topic, now_us, ends),
        }
    }

    fn produce(&mut self, rng: &mut Rng, topic: &TopicSetup, now_us: u64) -> (Intent, Frame) {
        if let Some(last) = self.last_batch.clone()
            && rng.chance(120)
        {
            let frame = requests::send(
                &mut self.numbering,
                last.place,
                &last.ids,
                last.producer,
                now_us,
            );
            let intent = Intent::Send {
                place: last.place,
                ids: last.ids,
                producer: last.producer,
                retry_of: Some(last.base_offset),
            };
            return (intent, frame);
        }
        let place = random_place(rng, topic);
        let count = 1 + rng.below(4);
        let ids: Vec<u128> = (0..count).map(|_| self.mint(rng)).collect();
        let producer = rng.chance(800).then(|| Producer {
            producer_id: self.numbering.session << 20 | 1,
            epoch: 0,
            base_sequence: self.next_sequence.get(&place).copied().unwrap_or(0),
        });
        let frame = requests::send(&mut self.numbering, place, &ids, producer, now_us);
        let intent = Intent::Send {
            place,
            ids,
            producer,
            retry_of: None,
        };
        (intent, frame)
    }

    fn plain_poll(
        &mut self,
        rng: &mut Rng,
        topic: &TopicSetup,
        now_us: u64,
        ends: &dyn Fn(Place) -> u64,
    ) -> (Intent, Frame) {
        let place = random_place(rng, topic);
        let kind = match rng.below(5) {
            0 => PollingKind::Offset,
            1 => PollingKind::Timestamp,
            2 => PollingKind::First,
            3 => PollingKind::Last,
            _ => PollingKind::Next,
        };
        let value = match kind {
            PollingKind::Offset => rng.below(ends(place) + 2),
            PollingKind::Timestamp => now_us.saturating_sub(rng.below(5_000_000)),
            _ => 0,
        };
        let strategy = PollingStrategy { kind, value };
        let auto_commit = rng.chance(500);
        let count = 1 + u32::try_from(rng.below(40)).unwrap_or(0);
        let consumer = self.consumer();
        let (wait_us, min_count) = deferral(rng, count);
        let frame = requests::poll(
            &mut self.numbering,
            requests::PollAsk {
                consumer,
                topic_id: place.topic_id,
                partition_id: Some(place.partition_id),
                strategy,
                count,
                auto_commit,
                generation: 0,
                wait_us,
                min_count,
            },
        );
        let intent = Intent::Poll {
            topic_id: place.topic_id,
            partition_id: Some(place.partition_id),
            consumer,
            strategy,
            auto_commit,
            stored_before: Vec::new(),
        };
        (intent, frame)
    }

    fn member_request(&mut self, rng: &mut Rng, topic: &TopicSetup) -> (Intent, Frame) {
        let group = ConsumerKey::Group(topic.id, topic.group_id);
        if let Some((place, offset)) = self.to_store.take() {
            let frame = requests::store_offset(&mut self.numbering, group, place, offset);
            let intent = Intent::Store {
                consumer: group,
                place,
                offset,
            };
            return (intent, frame);
        }
        let code = if self.member {
            match rng.below(100) {
                _ if self.assigned.is_empty() => CommandCode::SyncConsumerGroup,
                0..=14 => CommandCode::SyncConsumerGroup,
                15..=18 => CommandCode::LeaveConsumerGroup,
                _ => return self.group_poll(rng, topic, group),
            }
        } else {
            CommandCode::JoinConsumerGroup
        };
        let frame = requests::group(&mut self.numbering, code, topic.id, topic.group_id);
        let intent = match code {
            CommandCode::JoinConsumerGroup => Intent::Join(topic.id),
            CommandCode::LeaveConsumerGroup => Intent::Leave(topic.id),
            _ => Intent::Sync(topic.id),
        };
        (intent, frame)
    }

    fn group_poll(
        &mut self,
        rng: &mut Rng,
        topic: &TopicSetup,
        group: ConsumerKey,
    ) -> (Intent, Frame) {
        let auto_commit = rng.chance(500);
        let count = 1 + u32::try_from(rng.below(20)).unwrap_or(0);
        let partition_id = self.assigned[rng.index(self.assigned.len())];
        let (wait_us, min_count) = deferral(rng, count);
        let frame = requests::poll(
            &mut self.numbering,
            requests::PollAsk {
                consumer: group,
                topic_id: topic.id,
                partition_id: Some(partition_id),
                strategy: PollingStrategy::next(),
                count,
                auto_commit,
                generation: self.generation,
                wait_us,
                min_count,
            },
        );
        let intent = Intent::Poll {
            topic_id: topic.id,
            partition_id: Some(partition_id),
            consumer: group,
            strategy: PollingStrategy::next(),
            auto_commit,
            stored_before: Vec::new(),
        };
        (intent, frame)
    }
}

fn random_place(rng: &mut Rng, topic: &TopicSetup) -> Place {
    Place {
        topic_id: topic.id,
        partition_id: topic.partitions[rng.index(topic.partitions.len())],
    }
}

/// A quarter of the polls are deferred (106): they wait up to 2 s of simulated time for
/// 1..=`count` messages; the rest poll at once (wait 0).
fn deferral(rng: &mut Rng, count: u32) -> (u64, u32) {
    if !rng.chance(250) {
        return (0, 0);
    }
    let wait_us = 1 + rng.below(2_000_000);
    let min_count = 1 + u32::try_from(rng.below(u64::from(count))).unwrap_or(0);
    (wait_us, min_count)
}

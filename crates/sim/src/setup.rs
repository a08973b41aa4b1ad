//! The run's fixed world and its driver-side requests: the first boot's root user, stream,
//! topics and groups; the audit after every boot; the admin client's metadata changes.

use argon2::password_hash::PasswordHasher;
use argon2::{Algorithm, Argon2, Params, Version};
use proto::codes::CommandCode;
use proto::commands::groups::CreateConsumerGroup;
use proto::commands::partitions::CreatePartitions;
use proto::commands::streams::CreateStream;
use proto::commands::tokens::{CreatePersonalAccessToken, DeletePersonalAccessToken};
use proto::commands::topics::{CreateTopic, DeleteTopic};
use proto::primitives::{Identifier, OptionsBlock, TlvEntry};
use shard::{Connection, TransportKind};

use crate::client::TopicSetup;
use crate::model::{PartitionModel, Place, Violation, read_polled};
use crate::requests::{self, ConsumerKey, Intent, STREAM_ID};
use crate::wire::{Answer, Frame, Numbering, name};
use crate::world::{Shards, by_offset, call, stored_offset};
use crate::{PASSWORD, Sim, USERNAME};

/// The fixed topics: (name, persisted, partitions).
const TOPICS: [(&str, bool, u32); 2] = [("durable", true, 2), ("fast", false, 3)];
/// Topic ids above this are the admin's scratch topics.
const FIXED_TOPICS: u32 = 1;
/// The driver's own client id (setup and audits).
const DRIVER_CLIENT: u128 = 0xD0_u128 << 120 | 1;

/// An argon2id hash with the smallest parameters: the simulator logs in often, and the
/// check reads its parameters from the hash.
fn cheap_hash(password: &str) -> String {
    let params = Params::new(8, 1, 1, None).expect("valid argon2 parameters");
    let hasher = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
    hasher
        .hash_password_with_salt(password.as_bytes(), b"simulator-salt16")
        .expect("argon2 hashes")
        .to_string()
}

/// A logged-in connection of the driver on the leader.
async fn driver(shards: &Shards) -> Result<(Connection, Numbering), Violation> {
    let server = &shards.servers[0];
    let mut connection = server.open_connection(([127, 0, 0, 1], 9).into(), TransportKind::Tcp);
    let mut numbering = Numbering::new(DRIVER_CLIENT);
    let login = numbering.login(USERNAME, PASSWORD);
    match call(server, &mut connection, &login).await {
        Answer::Ok(payload) => {
            numbering.session = crate::wire::login_session(&login, &payload)
                .ok_or_else(|| Violation("driver login: no session".into()))?;
            Ok((connection, numbering))
        }
        other => Err(Violation(format!("driver login failed: {other:?}"))),
    }
}

async fn must(
    shards: &Shards,
    connection: &mut Connection,
    frame: &Frame,
) -> Result<Vec<u8>, Violation> {
    match call(&shards.servers[0], connection, frame).await {
        Answer::Ok(payload) => Ok(payload),
        other => Err(Violation(format!(
            "setup {:?} failed: {other:?}",
            frame.code
        ))),
    }
}

/// Root, and the vandal's user without any permission; both hashes are cheap.
async fn create_users(shards: &Shards) -> Result<(), Violation> {
    let server = &shards.servers[0];
    server
        .ensure_root_user(USERNAME, cheap_hash(PASSWORD))
        .await
        .map_err(|code| Violation(format!("root user: {code:?}")))?;
    let vandal = shard::metadata::MetadataOp::CreateUser {
        id: 1,
        username: crate::VANDAL.to_owned(),
        password_hash: cheap_hash(PASSWORD),
        status: shard::metadata::UserStatus::Active,
        permissions: None,
        created_at: 0,
    };
    server
        .commit(vandal)
        .await
        .map(|_| ())
        .map_err(|code| Violation(format!("vandal user: {code:?}")))
}

impl Sim {
    /// First boot: the users, the stream, the fixed topics and one group on each.
    pub async fn setup(&mut self, shards: &Shards) -> Result<(), Violation> {
        create_users(shards).await?;
        let (mut connection, mut numbering) = driver(shards).await?;
        let stream = CreateStream {
            name: name("sim"),
            options: OptionsBlock::default(),
        };
        must(
            shards,
            &mut connection,
            &numbering.encode(CommandCode::CreateStream, &stream),
        )
        .await?;
        create_topics(shards, &mut connection, &mut numbering).await?;
        let metadata = shards.servers[0].metadata();
        let stream = metadata
            .streams
            .get(&STREAM_ID)
            .ok_or_else(|| Violation("the stream is missing after setup".into()))?;
        for (topic_name, persisted, _) in TOPICS {
            let Some(topic) = stream
                .topics
                .values()
                .find(|topic| topic.name == topic_name)
            else {
                return Err(Violation(format!(
                    "topic {topic_name} is missing after setup"
                )));
            };
            let group = CreateConsumerGroup {
                stream_id: Identifier::Numeric(STREAM_ID),
                topic_id: Identifier::Numeric(topic.id),
                name: name("g"),
            };
            must(
                shards,
                &mut connection,
                &numbering.encode(CommandCode::CreateConsumerGroup, &group),
            )
            .await?;
            let partitions: Vec<u32> = topic.partitions.keys().copied().collect();
            for partition_id in &partitions {
                let place = Place {
                    topic_id: topic.id,
                    partition_id: *partition_id,
                };
                self.partitions
                    .insert(place, PartitionModel::new(persisted));
            }
            self.topics.push(TopicSetup {
                id: topic.id,
                persisted,
                partitions,
                group_id: 1,
            });
        }
        self.note_group_ids(shards);
        shards.servers[0].close_connection(&connection);
        self.trace(format!(
            "setup: {} shard(s), {} client(s)",
            self.shard_count,
            self.clients.len()
        ));
        Ok(())
    }

    /// Takes each fixed topic's group id from the leader's metadata.
    fn note_group_ids(&mut self, shards: &Shards) {
        let metadata = shards.servers[0].metadata();
        for topic in &mut self.topics {
            let groups = &metadata.streams[&STREAM_ID].topics[&topic.id].groups;
            topic.group_id = groups.keys().next().copied().unwrap_or(1);
        }
    }

    /// After a boot: reads every fixed partition whole and every stored offset the oracle
    /// knows, and checks them against it.
    pub async fn audit(&mut self, shards: &Shards) -> Result<(), Violation> {
        let (mut connection, mut numbering) = driver(shards).await?;
        let server = &shards.servers[0];
        let places: Vec<Place> = self.partitions.keys().copied().collect();
        let auditor = ConsumerKey::Plain(u32::MAX);
        let mut total = 0;
        for place in places {
            let mut all = Vec::new();
            let mut next = 0;
            loop {
                let frame = requests::poll(
                    &mut numbering,
                    requests::PollAsk {
                        consumer: auditor,
                        topic_id: place.topic_id,
                        partition_id: Some(place.partition_id),
                        strategy: by_offset(next),
                        count: 1_000,
                        auto_commit: false,
                        generation: 0,
                        wait_us: 0,
                        min_count: 0,
                    },
                );
                let payload = match call(server, &mut connection, &frame).await {
                    Answer::Ok(payload) => payload,
                    other => return Err(Violation(format!("audit read of {place:?}: {other:?}"))),
                };
                let (_, seen) = read_polled(&payload)?;
                let Some(last) = seen.last() else { break };
                next = last.offset + 1;
                all.extend(seen);
            }
            total += all.len();
            let model = self
                .partitions
                .get_mut(&place)
                .ok_or_else(|| Violation("no model".into()))?;
            model.audit(&all)?;
        }
        let keys: Vec<(ConsumerKey, Place)> = self
            .stored
            .keys()
            .filter(|(key, _)| matches!(key, ConsumerKey::Plain(_)))
            .copied()
            .collect();
        for (consumer, place) in keys {
            let read =
                stored_offset(server, &mut connection, &mut numbering, consumer, place).await?;
            let what = format!("{consumer:?} on {place:?}");
            self.stored
                .entry((consumer, place))
                .or_default()
                .audit(read, &what)?;
        }
        server.close_connection(&connection);
        self.trace(format!("audit: {total} message(s) read back"));
        Ok(())
    }

    /// The admin's next metadata change on scratch topics or tokens.
    pub fn admin(&mut self, shards: &Shards, index: usize) -> (Intent, Frame) {
        self.admin_changes += 1;
        let scratch: Vec<u32> = {
            let metadata = shards.servers[0].metadata();
            metadata
                .streams
                .get(&STREAM_ID)
                .map(|stream| {
                    stream
                        .topics
                        .keys()
                        .copied()
                        .filter(|id| *id > FIXED_TOPICS)
                        .collect()
                })
                .unwrap_or_default()
        };
        let change = self.admin_changes;
        let pick = self.rng.below(5);
        let target = scratch.get(self.rng.index(scratch.len())).copied();
        let numbering = &mut self.clients[index].numbering;
        let (what, frame) = admin_frame(numbering, pick, target, change);
        (Intent::Admin(what), frame)
    }
}

/// The admin's change number `change`: `pick` chooses it, `target` is a scratch topic.
fn admin_frame(
    numbering: &mut Numbering,
    pick: u64,
    target: Option<u32>,
    change: u32,
) -> (&'static str, Frame) {
    match (pick, target) {
        (1, Some(topic_id)) => {
            let delete = DeleteTopic {
                stream_id: Identifier::Numeric(STREAM_ID),
                topic_id: Identifier::Numeric(topic_id),
            };
            (
                "delete topic",
                numbering.encode(CommandCode::DeleteTopic, &delete),
            )
        }
        (2, Some(topic_id)) => {
            let create = CreatePartitions {
                stream_id: Identifier::Numeric(STREAM_ID),
                topic_id: Identifier::Numeric(topic_id),
                partitions_count: 1,
            };
            (
                "create partitions",
                numbering.encode(CommandCode::CreatePartitions, &create),
            )
        }
        (3, _) => {
            let token = CreatePersonalAccessToken {
                name: name(&format!("t{change}")),
                expiry: 0,
            };
            (
                "create token",
                numbering.encode(CommandCode::CreatePersonalAccessToken, &token),
            )
        }
        (4, _) => {
            let token = DeletePersonalAccessToken {
                name: name(&format!("t{}", change.saturating_sub(1))),
            };
            (
                "delete token",
                numbering.encode(CommandCode::DeletePersonalAccessToken, &token),
            )
        }
        _ => {
            let create = CreateTopic {
                stream_id: Identifier::Numeric(STREAM_ID),
                partitions_count: 1,
                name: name(&format!("scratch{change}")),
                options: OptionsBlock::default(),
            };
            (
                "create topic",
                numbering.encode(CommandCode::CreateTopic, &create),
            )
        }
    }
}

/// Creates the fixed topics, with their durability for messages and offsets.
async fn create_topics(
    shards: &Shards,
    connection: &mut Connection,
    numbering: &mut Numbering,
) -> Result<(), Violation> {
    for (topic_name, persisted, partitions) in TOPICS {
        let mut options = OptionsBlock::default();
        let durability = if persisted { "persisted" } else { "replicated" };
        let value = TlvEntry::string(durability).expect("a short value");
        options.set("durability", value.clone());
        options.set("consumer_offset_durability", value);
        let topic = CreateTopic {
            stream_id: Identifier::Numeric(STREAM_ID),
            partitions_count: partitions,
            name: name(topic_name),
            options,
        };
        let frame = numbering.encode(CommandCode::CreateTopic, &topic);
        must(shards, connection, &frame).await?;
    }
    Ok(())
}

//! Permissions over the wire (issue 9, item 1): a user's permissions are set through
//! `UPDATE_PERMISSIONS`, then one probe per rule of PROTOCOL.md §7.5 is sent as that user to
//! the real binary, and whether it was refused with `41 Unauthorized` is compared with a
//! model written here from the spec's table, apart from the server's own. Exhaustive over the
//! ten global flags; property-based (proptest) over stream and topic grants.
//!
//! Every probe is harmless when allowed: creates name something that exists (refused as a
//! duplicate after the permission check), deletes and password changes aim at the root user
//! (refused as such), updates change nothing, and a send appends one small message.

// The helpers are test steps: a failed step is the test failing.
#![allow(clippy::unwrap_used)]
// The probe table reads best as one list.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeMap;

mod common;

use bench::client::{Client, Login};
use common::{Server, start};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use proto::Dialect;
use proto::batch::{OutgoingMessage, encode_batch};
use proto::codec::{Codec, WireName, encode_to_vec};
use proto::codes::CommandCode;
use proto::commands::groups::GetConsumerGroups;
use proto::commands::messages::GetPartitionRoute;
use proto::commands::offsets::{GetConsumerOffset, OffsetSelector};
use proto::commands::session::Secret;
use proto::commands::streams::{CreateStream, GetStream};
use proto::commands::system::{ResetKeys, ResourceTarget, UpdateResource};
use proto::commands::topics::{CreateTopic, GetTopic, GetTopics};
use proto::commands::users::{ChangePassword, CreateUser, DeleteUser, UpdatePermissions};
use proto::primitives::{
    Consumer, ConsumerKind, GlobalPermissions, Identifier, OptionalPartition, OptionsBlock,
    Permissions, StreamPermissions, TopicPermissions,
};

const UNAUTHORIZED: u32 = 41;
const STREAM: &str = "perm-s";
const TOPIC: &str = "perm-t";

fn name(text: &str) -> WireName {
    WireName::new(text).unwrap()
}

fn encoded<'a, T: Codec<'a>>(body: &T) -> Vec<u8> {
    encode_to_vec(body, Dialect::V0_12_2)
}

/// What the spec's table grants, as field tests over the three permission levels.
#[derive(Clone, Copy)]
struct Grants {
    global: fn(&GlobalPermissions) -> bool,
    stream: fn(&StreamPermissions) -> bool,
    topic: fn(&TopicPermissions) -> bool,
}

const NONE_S: fn(&StreamPermissions) -> bool = |_| false;
const NONE_T: fn(&TopicPermissions) -> bool = |_| false;

/// One probe: a request, and the §7.5 row that decides it.
struct Probe {
    label: &'static str,
    code: CommandCode,
    body: Vec<u8>,
    grants: Grants,
}

fn read_topics_grants(topic: fn(&TopicPermissions) -> bool) -> Grants {
    Grants {
        global: |g| g.read_streams || g.manage_streams || g.manage_topics || g.read_topics,
        stream: |s| s.manage_stream || s.read_stream || s.manage_topics || s.read_topics,
        topic,
    }
}

fn manage_topic_grants() -> Grants {
    Grants {
        global: |g| g.manage_streams || g.manage_topics,
        stream: |s| s.manage_stream || s.manage_topics,
        topic: |t| t.manage_topic,
    }
}

fn poll_grants() -> Grants {
    Grants {
        global: |g| {
            g.poll_messages
                || g.read_topics
                || g.manage_topics
                || g.read_streams
                || g.manage_streams
        },
        stream: |s| {
            s.manage_stream || s.read_stream || s.manage_topics || s.read_topics || s.poll_messages
        },
        topic: |t| t.manage_topic || t.read_topic || t.poll_messages,
    }
}

fn send_grants() -> Grants {
    Grants {
        global: |g| g.send_messages || g.manage_streams || g.manage_topics,
        stream: |s| s.manage_stream || s.manage_topics || s.send_messages,
        topic: |t| t.manage_topic || t.send_messages,
    }
}

fn global_only(global: fn(&GlobalPermissions) -> bool) -> Grants {
    Grants {
        global,
        stream: NONE_S,
        topic: NONE_T,
    }
}

fn probes(stream_id: u32, topic_id: u32) -> Vec<Probe> {
    let (stream, topic) = (
        Identifier::Numeric(stream_id),
        Identifier::Numeric(topic_id),
    );
    let offset = GetConsumerOffset {
        selector: OffsetSelector {
            consumer: Consumer {
                kind: ConsumerKind::Consumer,
                id: Identifier::Numeric(1),
            },
            stream_id: stream.clone(),
            topic_id: topic.clone(),
            partition: OptionalPartition(Some(0)),
        },
    };
    // Resets a key to its default: no change, but a patch the decoder accepts.
    let update = |target| UpdateResource {
        target,
        reset: ResetKeys::new(vec![name("message_expiry")]).unwrap(),
        options: OptionsBlock::default(),
    };
    let probe = |label, code, body, grants| Probe {
        label,
        code,
        body,
        grants,
    };
    vec![
        probe("ping", CommandCode::Ping, Vec::new(), global_only(|_| true)),
        probe(
            "stats",
            CommandCode::GetStats,
            Vec::new(),
            global_only(|g| g.manage_servers || g.read_servers),
        ),
        probe(
            "users",
            CommandCode::GetUsers,
            Vec::new(),
            global_only(|g| g.manage_users || g.read_users),
        ),
        probe(
            "delete root",
            CommandCode::DeleteUser,
            encoded(&DeleteUser {
                user_id: Identifier::Numeric(0),
            }),
            global_only(|g| g.manage_users),
        ),
        probe(
            "root's password",
            CommandCode::ChangePassword,
            encoded(&ChangePassword {
                user_id: Identifier::Numeric(0),
                current_password: Secret::new("not-it").unwrap(),
                new_password: Secret::new("whatever").unwrap(),
            }),
            global_only(|g| g.manage_users),
        ),
        probe(
            "streams",
            CommandCode::GetStreams,
            Vec::new(),
            global_only(|g| g.manage_streams || g.read_streams),
        ),
        probe(
            "stream",
            CommandCode::GetStream,
            encoded(&GetStream {
                stream_id: stream.clone(),
            }),
            Grants {
                global: |g| g.manage_streams || g.read_streams,
                stream: |s| s.manage_stream || s.read_stream,
                topic: NONE_T,
            },
        ),
        probe(
            "create stream",
            CommandCode::CreateStream,
            encoded(&CreateStream {
                name: name(STREAM),
                options: OptionsBlock::default(),
            }),
            global_only(|g| g.manage_streams),
        ),
        probe(
            "update stream",
            CommandCode::UpdateResource,
            encoded(&update(ResourceTarget::Stream {
                stream_id: stream.clone(),
            })),
            Grants {
                global: |g| g.manage_streams,
                stream: |s| s.manage_stream,
                topic: NONE_T,
            },
        ),
        probe(
            "topics",
            CommandCode::GetTopics,
            encoded(&GetTopics {
                stream_id: stream.clone(),
            }),
            read_topics_grants(NONE_T),
        ),
        probe(
            "topic",
            CommandCode::GetTopic,
            encoded(&GetTopic {
                stream_id: stream.clone(),
                topic_id: topic.clone(),
            }),
            read_topics_grants(|t| t.manage_topic || t.read_topic),
        ),
        probe(
            "groups",
            CommandCode::GetConsumerGroups,
            encoded(&GetConsumerGroups {
                stream_id: stream.clone(),
                topic_id: topic.clone(),
            }),
            read_topics_grants(|t| t.manage_topic || t.read_topic),
        ),
        probe(
            "create topic",
            CommandCode::CreateTopic,
            encoded(&CreateTopic {
                stream_id: stream.clone(),
                partitions_count: 1,
                name: name(TOPIC),
                options: OptionsBlock::default(),
            }),
            Grants {
                global: |g| g.manage_streams || g.manage_topics,
                stream: |s| s.manage_stream || s.manage_topics,
                topic: NONE_T,
            },
        ),
        probe(
            "update topic",
            CommandCode::UpdateResource,
            encoded(&update(ResourceTarget::Topic {
                stream_id: stream.clone(),
                topic_id: topic.clone(),
            })),
            manage_topic_grants(),
        ),
        probe(
            "offset",
            CommandCode::GetConsumerOffset,
            encoded(&offset),
            poll_grants(),
        ),
        probe(
            "route",
            CommandCode::GetPartitionRoute,
            encoded(&GetPartitionRoute {
                stream_id: stream,
                topic_id: topic,
                partition_id: 0,
            }),
            Grants {
                global: |g| (poll_grants().global)(g) || (send_grants().global)(g),
                stream: |s| (poll_grants().stream)(s) || (send_grants().stream)(s),
                topic: |t| (poll_grants().topic)(t) || (send_grants().topic)(t),
            },
        ),
    ]
}

/// The model's verdict: any level's grant allows; a grant on another stream or topic never
/// counts.
fn allowed(grants: Grants, permissions: &Permissions, stream_id: u32, topic_id: u32) -> bool {
    let stream = permissions.streams.get(&stream_id);
    let topic = stream.and_then(|stream| stream.topics.get(&topic_id));
    (grants.global)(&permissions.global)
        || stream.is_some_and(grants.stream)
        || topic.is_some_and(grants.topic)
}

/// A 0.12.2 client logged in as `username`.
fn connect(server: &Server, username: &str, password: &str, client_id: u128) -> Client {
    let login = Login {
        address: server.address,
        transport: bench::link::Transport::Tcp,
        username,
        password,
    };
    Client::connect(&login, Dialect::V0_12_2, client_id).unwrap()
}

/// The fixture: a stream and topic, a user `probe` and its client, and root.
struct Fixture {
    root: Client,
    probe: Client,
    probe_id: u32,
    stream_id: u32,
    topic_id: u32,
    send_batch: Vec<u8>,
}

impl Fixture {
    fn new(server: &Server) -> Self {
        let mut root = connect(server, "iggy", "iggy", 1);
        let stream_id = root.create_stream(STREAM).unwrap();
        let topic_id = root
            .create_topic(stream_id, TOPIC, 1, bench::client::Durability::Replicated)
            .unwrap();
        let create = CreateUser {
            username: name("probe"),
            password: Secret::new("probe-pass").unwrap(),
            status: proto::commands::users::UserStatus::Active,
            permissions: None,
            options: OptionsBlock::default(),
        };
        assert_eq!(
            root.status_of(CommandCode::CreateUser, &encoded(&create))
                .unwrap(),
            0
        );
        let probe = connect(server, "probe", "probe-pass", 2);
        let message = OutgoingMessage {
            id: 1,
            origin_timestamp: 1,
            payload: b"probe",
            user_headers: &[],
        };
        let mut send_batch = Vec::new();
        encode_batch(&[message], None, &mut send_batch).unwrap();
        Self {
            root,
            probe,
            probe_id: 1,
            stream_id,
            topic_id,
            send_batch,
        }
    }

    /// Sets the probe user's permissions, sends every probe as it and compares with the model.
    fn check(&mut self, permissions: &Permissions) -> Result<(), String> {
        let update = UpdatePermissions {
            user_id: Identifier::Numeric(self.probe_id),
            permissions: Some(permissions.clone()),
        };
        let status = self
            .root
            .status_of(CommandCode::UpdatePermissions, &encoded(&update))
            .unwrap();
        assert_eq!(status, 0, "root updates permissions");
        let (stream_id, topic_id) = (self.stream_id, self.topic_id);
        for probe in probes(stream_id, topic_id) {
            let status = self.probe.status_of(probe.code, &probe.body).unwrap();
            let expected = allowed(probe.grants, permissions, stream_id, topic_id);
            if (status != UNAUTHORIZED) != expected {
                return Err(format!(
                    "{}: status {status}, model allows: {expected}; {permissions:?}",
                    probe.label
                ));
            }
        }
        let mut frame = self
            .probe
            .send_frame(stream_id, topic_id, 0, &self.send_batch, 1);
        let status = self.probe.send_status(&mut frame).unwrap();
        let expected = allowed(send_grants(), permissions, stream_id, topic_id);
        if (status != UNAUTHORIZED) != expected {
            return Err(format!(
                "send: status {status}, model allows: {expected}; {permissions:?}"
            ));
        }
        Ok(())
    }
}

fn global_of(bits: u16) -> GlobalPermissions {
    let bit = |index: u16| bits & (1 << index) != 0;
    GlobalPermissions {
        manage_servers: bit(0),
        read_servers: bit(1),
        manage_users: bit(2),
        read_users: bit(3),
        manage_streams: bit(4),
        read_streams: bit(5),
        manage_topics: bit(6),
        read_topics: bit(7),
        poll_messages: bit(8),
        send_messages: bit(9),
    }
}

#[test]
fn every_global_permission_combination_over_the_wire() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", "1")]);
    let mut fixture = Fixture::new(&server);
    for bits in 0..1024 {
        let permissions = Permissions {
            global: global_of(bits),
            streams: BTreeMap::default(),
        };
        fixture.check(&permissions).unwrap();
    }
}

fn stream_grant(flags: [bool; 6], topic: Option<[bool; 4]>, topic_id: u32) -> StreamPermissions {
    let mut grant = StreamPermissions {
        manage_stream: flags[0],
        read_stream: flags[1],
        manage_topics: flags[2],
        read_topics: flags[3],
        poll_messages: flags[4],
        send_messages: flags[5],
        topics: BTreeMap::default(),
    };
    if let Some(topic) = topic {
        let permissions = TopicPermissions {
            manage_topic: topic[0],
            read_topic: topic[1],
            poll_messages: topic[2],
            send_messages: topic[3],
        };
        grant.topics.insert(topic_id, permissions);
    }
    grant
}

#[test]
fn stream_and_topic_grants_over_the_wire() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[("IGGY_SYSTEM_SHARDING_CPU_ALLOCATION", "1")]);
    let fixture = std::cell::RefCell::new(Fixture::new(&server));
    let (stream_id, topic_id) = {
        let fixture = fixture.borrow();
        (fixture.stream_id, fixture.topic_id)
    };
    let grants = (
        any::<[bool; 6]>(),
        proptest::option::of(any::<[bool; 4]>()),
        any::<bool>(),
        0_u16..1024,
    );
    let mut runner = TestRunner::new(Config {
        cases: 160,
        ..Config::default()
    });
    let outcome = runner.run(&grants, |(flags, topic, elsewhere, bits)| {
        let mut permissions = Permissions {
            // Global flags in a quarter of the cases, so stream and topic grants decide most.
            global: if bits % 4 == 0 {
                global_of(bits)
            } else {
                GlobalPermissions::default()
            },
            streams: BTreeMap::default(),
        };
        // Granted on this stream, or on another one (which must never count).
        let target = if elsewhere { stream_id + 1 } else { stream_id };
        permissions
            .streams
            .insert(target, stream_grant(flags, topic, topic_id));
        fixture
            .borrow_mut()
            .check(&permissions)
            .map_err(TestCaseError::fail)
    });
    outcome.unwrap();
}

//! The authorization table against a model written from PROTOCOL.md §7.5 alone: each code's
//! granting flags as plain data, evaluated by a naive interpreter. Exhaustive over the ten
//! global flags, property-based over stream and topic grants.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proto::codes::CommandCode;
use proto::primitives::{GlobalPermissions, Permissions, StreamPermissions, TopicPermissions};

use super::{Resolved, action, allowed};
use crate::metadata::{User, UserStatus};

const STREAM: u32 = 3;
const TOPIC: u32 = 7;
const SELF_ID: u32 = 5;

/// Which grants allow a code: flag names per level, or a special rule.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Anyone,
    Flags {
        global: &'static [&'static str],
        stream: &'static [&'static str],
        topic: &'static [&'static str],
    },
    /// Own password always, another's with global `manage_users`.
    OwnOrManageUsers,
    /// `UPDATE_RESOURCE`, checked per scope in the tests.
    ByScope,
}

const READ_TOPICS_GLOBAL: &[&str] = &[
    "read_streams",
    "manage_streams",
    "manage_topics",
    "read_topics",
];
const READ_TOPICS_STREAM: &[&str] = &[
    "manage_stream",
    "read_stream",
    "manage_topics",
    "read_topics",
];
const MANAGE_TOPIC: Rule = Rule::Flags {
    global: &["manage_streams", "manage_topics"],
    stream: &["manage_stream", "manage_topics"],
    topic: &["manage_topic"],
};
const MANAGE_STREAM: Rule = Rule::Flags {
    global: &["manage_streams"],
    stream: &["manage_stream"],
    topic: &[],
};
const POLL: Rule = Rule::Flags {
    global: &[
        "poll_messages",
        "read_topics",
        "manage_topics",
        "read_streams",
        "manage_streams",
    ],
    stream: &[
        "manage_stream",
        "read_stream",
        "manage_topics",
        "read_topics",
        "poll_messages",
    ],
    topic: &["manage_topic", "read_topic", "poll_messages"],
};
const SEND: Rule = Rule::Flags {
    global: &["send_messages", "manage_streams", "manage_topics"],
    stream: &["manage_stream", "manage_topics", "send_messages"],
    topic: &["manage_topic", "send_messages"],
};
const GROUPS: Rule = Rule::Flags {
    global: READ_TOPICS_GLOBAL,
    stream: READ_TOPICS_STREAM,
    topic: &["manage_topic", "read_topic"],
};

fn global_only(flags: &'static [&'static str]) -> Rule {
    Rule::Flags {
        global: flags,
        stream: &[],
        topic: &[],
    }
}

/// The model: §7.5 row by row.
fn rule(code: CommandCode) -> Option<Rule> {
    use CommandCode as C;
    Some(match code {
        C::GetStats | C::GetClient | C::GetClients | C::GetSnapshotFile => {
            global_only(&["manage_servers", "read_servers"])
        }
        C::GetUser | C::GetUsers => global_only(&["manage_users", "read_users"]),
        C::CreateUser | C::DeleteUser | C::UpdateUser | C::UpdatePermissions => {
            global_only(&["manage_users"])
        }
        C::ChangePassword => Rule::OwnOrManageUsers,
        C::GetStreams => global_only(&["manage_streams", "read_streams"]),
        C::GetStream => Rule::Flags {
            global: &["manage_streams", "read_streams"],
            stream: &["manage_stream", "read_stream"],
            topic: &[],
        },
        C::CreateStream => global_only(&["manage_streams"]),
        C::DeleteStream | C::UpdateStream | C::PurgeStream => MANAGE_STREAM,
        C::GetTopics => Rule::Flags {
            global: READ_TOPICS_GLOBAL,
            stream: READ_TOPICS_STREAM,
            topic: &[],
        },
        // GET_TOPIC and the groups: stream-level read, or the topic's own read flags.
        C::GetTopic
        | C::GetConsumerGroup
        | C::GetConsumerGroups
        | C::CreateConsumerGroup
        | C::DeleteConsumerGroup
        | C::JoinConsumerGroup
        | C::LeaveConsumerGroup
        | C::SyncConsumerGroup => GROUPS,
        C::CreateTopic => Rule::Flags {
            global: &["manage_streams", "manage_topics"],
            stream: &["manage_stream", "manage_topics"],
            topic: &[],
        },
        C::DeleteTopic
        | C::UpdateTopic
        | C::PurgeTopic
        | C::CreatePartitions
        | C::DeletePartitions
        | C::DeleteSegments => MANAGE_TOPIC,
        C::PollMessages
        | C::PollMessagesDeferred
        | C::FetchMessages
        | C::GetConsumerOffset
        | C::StoreConsumerOffset
        | C::DeleteConsumerOffset => POLL,
        C::SendMessages | C::FlushUnsavedBuffer => SEND,
        // Route: send or poll, checked as the union below.
        C::GetPartitionRoute => return None,
        C::UpdateResource => Rule::ByScope,
        _ => Rule::Anyone,
    })
}

fn global_flag(global: &GlobalPermissions, name: &str) -> bool {
    match name {
        "manage_servers" => global.manage_servers,
        "read_servers" => global.read_servers,
        "manage_users" => global.manage_users,
        "read_users" => global.read_users,
        "manage_streams" => global.manage_streams,
        "read_streams" => global.read_streams,
        "manage_topics" => global.manage_topics,
        "read_topics" => global.read_topics,
        "poll_messages" => global.poll_messages,
        "send_messages" => global.send_messages,
        other => panic!("unknown global flag {other}"),
    }
}

fn stream_flag(stream: &StreamPermissions, name: &str) -> bool {
    match name {
        "manage_stream" => stream.manage_stream,
        "read_stream" => stream.read_stream,
        "manage_topics" => stream.manage_topics,
        "read_topics" => stream.read_topics,
        "poll_messages" => stream.poll_messages,
        "send_messages" => stream.send_messages,
        other => panic!("unknown stream flag {other}"),
    }
}

fn topic_flag(topic: TopicPermissions, name: &str) -> bool {
    match name {
        "manage_topic" => topic.manage_topic,
        "read_topic" => topic.read_topic,
        "poll_messages" => topic.poll_messages,
        "send_messages" => topic.send_messages,
        other => panic!("unknown topic flag {other}"),
    }
}

fn flags_allow(
    permissions: &Permissions,
    global: &[&str],
    stream: &[&str],
    topic: &[&str],
) -> bool {
    let stream_grant = permissions.streams.get(&STREAM);
    let topic_grant = stream_grant.and_then(|grant| grant.topics.get(&TOPIC));
    global
        .iter()
        .any(|flag| global_flag(&permissions.global, flag))
        || stream_grant.is_some_and(|grant| stream.iter().any(|flag| stream_flag(grant, flag)))
        || topic_grant.is_some_and(|grant| topic.iter().any(|flag| topic_flag(*grant, flag)))
}

/// The model's verdict for `code` on the test topic (or `target_user`).
fn model(code: CommandCode, permissions: &Permissions, target_user: u32) -> bool {
    match rule(code) {
        None => {
            model(CommandCode::SendMessages, permissions, target_user)
                || model(CommandCode::PollMessages, permissions, target_user)
        }
        Some(Rule::Anyone) => true,
        Some(Rule::Flags {
            global,
            stream,
            topic,
        }) => flags_allow(permissions, global, stream, topic),
        Some(Rule::OwnOrManageUsers) => {
            target_user == SELF_ID || flags_allow(permissions, &["manage_users"], &[], &[])
        }
        Some(Rule::ByScope) => unreachable!("checked per scope"),
    }
}

fn user(permissions: Permissions) -> User {
    User {
        id: SELF_ID,
        username: String::from("tester"),
        password_hash: String::new(),
        status: UserStatus::Active,
        permissions: Some(permissions),
        created_at: 0,
        tokens: BTreeMap::new(),
    }
}

fn every_code() -> Vec<CommandCode> {
    (0..2_000).filter_map(CommandCode::from_u32).collect()
}

fn topic_target() -> Resolved {
    Resolved {
        stream_id: Some(STREAM),
        topic_id: Some(TOPIC),
        user_id: None,
    }
}

/// The server's verdict for `code` as the handlers resolve its target.
fn server(code: CommandCode, user: &User, target_user: u32) -> bool {
    let target = match code {
        CommandCode::ChangePassword => Resolved {
            user_id: Some(target_user),
            ..Resolved::default()
        },
        CommandCode::GetStream
        | CommandCode::DeleteStream
        | CommandCode::UpdateStream
        | CommandCode::PurgeStream
        | CommandCode::GetTopics
        | CommandCode::CreateTopic => Resolved {
            stream_id: Some(STREAM),
            ..Resolved::default()
        },
        _ => topic_target(),
    };
    allowed(action(code), user, target)
}

fn check_all_codes(permissions: &Permissions) {
    let subject = user(permissions.clone());
    for code in every_code() {
        if code == CommandCode::UpdateResource {
            continue;
        }
        for target_user in [SELF_ID, SELF_ID + 1] {
            assert_eq!(
                server(code, &subject, target_user),
                model(code, permissions, target_user),
                "{code:?} (target user {target_user}) with {permissions:?}"
            );
        }
    }
    let scopes = [
        (topic_target(), MANAGE_TOPIC),
        (
            Resolved {
                stream_id: Some(STREAM),
                ..Resolved::default()
            },
            MANAGE_STREAM,
        ),
        (
            Resolved {
                user_id: Some(SELF_ID),
                ..Resolved::default()
            },
            global_only(&["manage_users"]),
        ),
    ];
    for (target, rule) in scopes {
        let Rule::Flags {
            global,
            stream,
            topic,
        } = rule
        else {
            unreachable!()
        };
        assert_eq!(
            allowed(action(CommandCode::UpdateResource), &subject, target),
            flags_allow(permissions, global, stream, topic),
            "UpdateResource {target:?} with {permissions:?}"
        );
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
fn every_code_has_a_rule_and_the_table_matches_the_model_for_all_global_flags() {
    assert!(every_code().len() > 50, "the code table is walked whole");
    for bits in 0..1024 {
        let permissions = Permissions {
            global: global_of(bits),
            streams: BTreeMap::new(),
        };
        check_all_codes(&permissions);
    }
}

#[test]
fn nobody_gets_group_commands_without_a_grant() {
    let nobody = user(Permissions::default());
    let groups: Vec<CommandCode> = (600..=606).filter_map(CommandCode::from_u32).collect();
    assert_eq!(groups.len(), 7);
    for code in groups {
        assert!(!allowed(action(code), &nobody, topic_target()), "{code:?}");
    }
}

fn stream_grant() -> impl Strategy<Value = StreamPermissions> {
    let flags = proptest::collection::vec(any::<bool>(), 6);
    let topic = proptest::collection::vec(any::<bool>(), 4);
    (flags, proptest::option::of(topic)).prop_map(|(flags, topic)| {
        let mut topics = BTreeMap::new();
        if let Some(topic) = topic {
            topics.insert(
                TOPIC,
                TopicPermissions {
                    manage_topic: topic[0],
                    read_topic: topic[1],
                    poll_messages: topic[2],
                    send_messages: topic[3],
                },
            );
        }
        StreamPermissions {
            manage_stream: flags[0],
            read_stream: flags[1],
            manage_topics: flags[2],
            read_topics: flags[3],
            poll_messages: flags[4],
            send_messages: flags[5],
            topics,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_table_matches_the_model_for_stream_and_topic_grants(
        bits in 0_u16..1024,
        grant in proptest::option::of(stream_grant()),
        other in proptest::option::of(stream_grant()),
    ) {
        let mut streams = BTreeMap::new();
        if let Some(grant) = grant {
            streams.insert(STREAM, grant);
        }
        if let Some(other) = other {
            // A grant on another stream never counts for this one.
            streams.insert(STREAM + 1, other);
        }
        let permissions = Permissions { global: global_of(bits), streams };
        check_all_codes(&permissions);
    }
}
